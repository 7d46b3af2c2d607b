"""The cpu backend's C++ compiler ($FUSER_CXX, default g++) named in its failures.

A failed g++ run is reported with the compiler that actually ran: the name FUSER_CXX gave, the
file it resolved to and its version line. When that program cannot compile a one-line C++20
file either (FUSER_CXX=python3, a g++ older than 10), the error says so: it is no C++20
compiler, and no kernel of any fusion would compile with it."""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from fuser.lowering.errors import CompileError

_PROBE = "#include <concepts>\nstatic_assert(std::same_as<int, int>);\nint main() { return 0; }\n"
"""Compiles with any C++20 compiler (std::same_as is C++20's); fails for anything else."""


def compiler_error(cxx: str, identity: str, what: str, how: str, log: str, source: str = "") -> CompileError:
    """The CompileError of a run of `cxx` (resolved path and version line: `identity`) that did
    not compile `what`; `how`: how it ended ("exit 1")."""
    path, _, version = identity.partition("\n")
    named = f"{_setting(cxx)}, which is {path}{f' ({version})' if version else ''},"
    if not compiles_cxx20(path):
        message = (f"{named} is not a C++20 compiler: it cannot compile a one-line C++20 file, and did not compile "
                   f"{what} ({how}); set FUSER_CXX to g++ >= 10 or another C++20 compiler")
    else:
        message = f"{named} failed to compile {what} ({how})"
    return CompileError(message, log=log, source=source)


def run_compiler(cxx: str, identity: str, cmd: list[str], output: Path, what: str, source: str = "",
                 log_of: Callable[[str], str] = lambda text: text) -> str:
    """Runs `cmd` (the compiler `cxx`, resolved as `identity`) in `output`'s folder; the
    compiler's log (through `log_of`) once it has written `output`. Raises the CompileError
    naming `what` (and quoting `source`) when it cannot run or fails."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=output.parent)
    except OSError as e:
        raise CompileError(f"cannot run the C++ compiler {cxx!r}: {e}", log=str(e), source=source) from e
    log = log_of(proc.stdout + proc.stderr)
    failed = how_it_failed(proc, output)
    if failed is not None:
        raise compiler_error(cxx, identity, what, failed, log, source)
    return log


def how_it_failed(proc: subprocess.CompletedProcess, output: Path) -> str | None:
    """How a compiler run that should have written `output` failed; None when it did not."""
    if proc.returncode != 0:
        return f"exit {proc.returncode}"
    return None if output.is_file() else "exit 0, but it wrote no output file"


def _setting(cxx: str) -> str:
    """The compiler as the user chose it."""
    if os.environ.get("FUSER_CXX", "").strip():
        return f"FUSER_CXX={cxx!r}"
    return f"the C++ compiler {cxx!r} (the default: FUSER_CXX is unset)"


@functools.lru_cache(maxsize=None)
def compiles_cxx20(path: str) -> bool:
    """Whether `path` compiles a C++20 file to an object file (asked only after a failure)."""
    with tempfile.TemporaryDirectory(prefix="fuser-cxx-probe-") as tmp:
        obj = Path(tmp) / "probe.o"
        try:
            proc = subprocess.run([path, "-std=c++20", "-c", "-x", "c++", "-", "-o", str(obj)], input=_PROBE,
                                  capture_output=True, text=True, timeout=60, cwd=tmp)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return proc.returncode == 0 and obj.is_file() and obj.stat().st_size > 0
