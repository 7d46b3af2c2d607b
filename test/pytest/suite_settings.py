"""The suite's own environment variables that size generated tests, read where a test module
is imported: a value that is not a count stops the session at collection, naming the variable
and what it takes (a bare int() error, or a negative count taken as 1, said nothing)."""

from __future__ import annotations

import os

import pytest


def example_count(variable: str, default: int | None) -> int | None:
    """$variable as a number of generated examples (a whole number >= 1); `default` when it is
    unset or blank."""
    value = os.environ.get(variable, "")
    if not value.strip():
        return default
    try:
        count = int(value.strip())
    except ValueError:
        count = None
    if count is None or count < 1:
        raise pytest.UsageError(f"{variable}={value!r}: expected a number of examples, a whole number >= 1 "
                                "(unset for the default)")
    return count
