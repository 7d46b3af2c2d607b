"""`execute(..., _enable_options=[...], _disable_options=[...])`: nvFuser's per-call spelling of
NVFUSER_ENABLE / NVFUSER_DISABLE, checked against what fuser has.

Disable options: `concretize_resize_extents` (keeps pad/slice/cat extents symbolic; also env
FUSER_DISABLE). Enable options: none — fuser does unconditionally what nvFuser's options turn
on where it does it at all (take_along_axis fuses with its producer without
`memory_promotion`), and the rest (id_model, kernel_profile, ...) have no counterpart. An
unknown name is a ValueError naming it, on every backend."""

from __future__ import annotations

from collections.abc import Sequence

KNOWN_ENABLE_OPTIONS: tuple[str, ...] = ()


def _names(options: Sequence[str] | str, what: str) -> tuple[str, ...]:
    if isinstance(options, str):
        raise TypeError(f"execute: {what} must be a list of option names, got the string {options!r}")
    names = tuple(options)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"execute: {what} entries are option names (str), got {name!r}")
    return names


def check_options(enable: Sequence[str], disable: Sequence[str]) -> tuple[str, ...]:
    """Raises for an unknown option; returns the disable options as a tuple."""
    from fuser.passes.concretize import KNOWN_DISABLE_OPTIONS

    for what, names, known in (("_enable_options", _names(enable, "_enable_options"), KNOWN_ENABLE_OPTIONS),
                               ("_disable_options", _names(disable, "_disable_options"), KNOWN_DISABLE_OPTIONS)):
        unknown = [n for n in names if n not in known]
        if unknown:
            listed = ", ".join(repr(k) for k in known) if known else "none"
            raise ValueError(f"execute: unknown {what} entry {unknown[0]!r}; fuser knows: {listed}")
    return tuple(disable)
