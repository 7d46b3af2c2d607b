"""Errors raised by fuser's compilation and execution layers."""

from __future__ import annotations

from fuser_dialect.errors import FuserError, FuserIndexError, FuserTypeError, FuserValueError

# FuserError (fuser_dialect/errors.py) is the base of every error fuser raises on purpose: a
# RuntimeError, as nvFuser's errors are, so `except RuntimeError` catches each of them.


def number_lines(source: str) -> str:
    """The source with right-aligned 1-based line numbers, as compiler logs refer to them."""
    lines = source.splitlines()
    width = len(str(len(lines)))
    return "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, start=1))


class CompileError(FuserError):
    """A kernel source failed to compile (g++ for the CPU, NVRTC/nvcc for the GPU).

    `log` is the compiler's output and `source` the text it compiled; str() shows both, the source
    with line numbers so that "kernel.cpp:42:7" in the log can be found at a glance.
    """

    def __init__(self, message: str = "kernel compilation failed", log: str = "", source: str = ""):
        super().__init__(message)
        self.message = message
        self.log = log
        self.source = source

    def __str__(self) -> str:
        return (
            f"{self.message}\n"
            f"--- compiler log ---\n{self.log.rstrip()}\n"
            f"--- source ---\n{number_lines(self.source)}"
        )


class LaunchError(FuserError):
    """A kernel launch failed: bad arguments or configuration, or an error found while running
    (deadlock, barrier divergence, misaligned vector access, ...)."""

    def __init__(self, message: str, kernel: str | None = None, code: int | None = None):
        super().__init__(message)
        self.kernel = kernel
        self.code = code


class RaceError(LaunchError):
    """Two threads of a block touched one element in the same barrier interval, one of them
    writing (the cpu backend's racecheck, FUSER_RACECHECK=1); or a warp operation's mask named
    a lane that never reached it. The message names the kernel, the array and element, the two
    threads and their access kinds."""


class MemcheckError(LaunchError, IndexError):
    """A kernel accessed global memory outside the buffer it was given (the cpu backend's memcheck,
    FUSER_MEMCHECK=1). An IndexError too, as an out-of-range index is on every backend.

    param: the kernel parameter (e.g. "in3", with the fusion value it holds when launched from a
    fusion); index: the element index relative to that parameter; extent: its elements."""

    def __init__(self, message: str, kernel: str | None = None, code: int | None = None, *,
                 param: str | None = None, index: int | None = None, extent: int | None = None):
        super().__init__(message, kernel=kernel, code=code)
        self.param = param
        self.index = index
        self.extent = extent


class IndexRangeError(FuserError, IndexError):
    """An index of a gather, take_along_axis, index_select or scatter outside the extent it
    indexes, found by the host's check before launch or by the in-kernel check.

    op: the op as the fusion's author wrote it ("fuser.gather", also where the compiled fusion
    turned it into a take_along_axis); site: its position among the index ops of the author's
    fusion (None where the compiled fusion cannot tell which it was); dim: the dim it indexes;
    index: the offending value; extent: that dim's extent."""

    def __init__(self, message: str, *, op: str, site: int | None, dim: int, index: int, extent: int):
        super().__init__(message)
        self.op = op
        self.site = site
        self.dim = dim
        self.index = index
        self.extent = extent


__all__ = ["FuserError", "FuserValueError", "FuserTypeError", "FuserIndexError", "CompileError", "LaunchError",
           "RaceError", "MemcheckError", "IndexRangeError", "number_lines"]
