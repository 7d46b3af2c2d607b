"""The error classes of the public API, and the one place that turns any other error met while a
fusion is defined or executed into one of them.

nvFuser raises every definition and argument error as a `RuntimeError` (its C++ checks reach
Python as one), so code written for it catches `except RuntimeError`. Every error fuser raises on
purpose is a `FuserError`, a RuntimeError; the kinds that say "a bad value" or "a bad type" are
also a ValueError or a TypeError (the DESIGN.md contract: bad input raises ValueError/TypeError
naming the input), so `except ValueError` keeps working too.

`reports_errors` wraps the frontend's entry points (every `fd.ops` method, `define_tensor`,
`define_scalar`, `add_output`, leaving the `with` block, ...): an error that is not already a
RuntimeError leaves them as the matching Fuser* class with the same message, prefixed by the
op's name when the message does not start with it. An xDSL VerifyException (a verifier meeting
operands the builder let through) becomes a FuserValueError the same way, so no xDSL class
reaches the user. Nested calls (an `fd.ops` method building on others) report once, at the
call the user made.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NoReturn, TypeVar

F = TypeVar("F", bound=Callable)


class FuserError(RuntimeError):
    """Base class of every error fuser raises on purpose (a RuntimeError, as nvFuser's are)."""


class FuserValueError(FuserError, ValueError):
    """A bad value given to the frontend or to `execute`: a shape, a dim, an extent, a bound..."""


class FuserTypeError(FuserError, TypeError):
    """A value of the wrong kind or dtype given to the frontend or to `execute`."""


class FuserIndexError(FuserError, IndexError):
    """An index outside its range given to the frontend (a dim, a position)."""


class FuserRangeError(FuserValueError, TypeError):
    """An int that does not fit in 64 bits: a ValueError (a value out of range) and a TypeError
    (not an int64 at all: nvFuser's bindings refuse it as one)."""


def _named(message: str, name: str) -> bool:
    """Whether `message` already names `name` in its lead ("fuser.pad: ...", "pad width #2 ...")."""
    head = message.split(":", 1)[0]
    return name in head


def user_error(error: Exception, name: str | None = None) -> Exception:
    """`error` as the user sees it: itself when it is a RuntimeError already, else the Fuser*
    class of its kind with its message (prefixed `name: ` unless the message names it)."""
    if isinstance(error, RuntimeError):
        return error
    from xdsl.utils.exceptions import DiagnosticException

    message = str(error) or type(error).__name__
    if isinstance(error, DiagnosticException) or isinstance(error, (ValueError, ArithmeticError)):
        kind: type[FuserError] = FuserValueError
    elif isinstance(error, TypeError):
        kind = FuserTypeError
    elif isinstance(error, IndexError):
        kind = FuserIndexError
    else:  # an AttributeError, KeyError, AssertionError...: a failure of fuser's, said as what it is
        kind, message = FuserError, f"{type(error).__name__}: {message}"
    if name and not _named(message, name):
        message = f"{name}: {message}"
    converted = kind(message)
    for note in getattr(error, "__notes__", ()):
        converted.add_note(note)
    return converted


def raise_user_error(error: Exception, name: str | None = None) -> NoReturn:
    """Raises user_error(error, name) in error's place: its traceback, its cause, not chained
    to `error` itself (the message is the same; the traceback would only repeat it)."""
    converted = user_error(error, name)
    if converted is error:
        raise error
    converted.__cause__ = error.__cause__
    converted.__suppress_context__ = True
    raise converted.with_traceback(error.__traceback__)


def reports_errors(method: F, name: str | None = None, builder: Callable[[object], object] = lambda self: self) -> F:
    """`method` raising user errors (see the module doc), their messages led by `name` (the
    method's own name by default; "" for none). `builder(self)` is the FusionBuilder whose
    `_api_busy` flag marks a call in progress: nested calls leave reporting to the outer one."""
    shown = name if name is not None else method.__name__

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        fd = builder(self)
        if getattr(fd, "_api_busy", False):
            return method(self, *args, **kwargs)
        fd._api_busy = True
        try:
            return method(self, *args, **kwargs)
        except Exception as error:
            raise_user_error(error, shown)
        finally:
            fd._api_busy = False

    return call  # type: ignore[return-value]


__all__ = ["FuserError", "FuserValueError", "FuserTypeError", "FuserIndexError", "FuserRangeError", "user_error",
           "raise_user_error", "reports_errors"]
