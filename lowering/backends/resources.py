"""What ptxas says a compiled kernel needs: registers, spills, shared memory; and how wide its
global accesses are. No GPU is needed: NVRTC (or nvcc) compiles for the named architecture and
writes ptxas's `-v` report to its log, the PTX shows each access's width, and the cubin's SASS
(lowering/backends/sass.py) how many bytes a thread really keeps in flight.

These are the facts the performance model (lowering/schedulers/performance.py) reads; a
scheduler's own estimate stands in where no CUDA compiler is installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fuser.lowering.backends import compile as cc
from fuser.lowering.errors import FuserError

_FUNCTION = re.compile(r"Compiling entry function '(\w+)'")
_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?, (\d+) bytes smem)?")
_ENTRY = re.compile(r"^\.visible \.entry (\w+)\(", re.M)
_ACCESS = re.compile(r"\b(ld|st)\.global(?:\.nc)?(?:\.L1::\w+|\.L2::\w+)*(?:\.v(\d))?\.[a-z]*(\d+)\b")


@dataclass(frozen=True)
class PtxasReport:
    registers: int
    spill_bytes: int
    """Spill stores + spill loads."""
    stack_bytes: int
    static_shared_bytes: int


def _verbose_compile(source: str, arch: str) -> cc.CompiledCuda:
    """`source` compiled for `arch` with ptxas's report in the log (memoised by compile_cuda)."""
    backend = cc.find_compiler(None).name
    options = ("--ptxas-options=-v",) if backend == "nvrtc" else ("-Xptxas", "-v")
    return cc.compile_cuda(source, arch, options, backend=backend)


def sass_of(source: str, arch: str):
    """Per kernel of `source`: what its SASS for `arch` says (lowering/backends/sass.py), read
    from the same cubin ptxas reported on. Raises CompilerUnavailable or SassUnavailable."""
    from fuser.lowering.backends.sass import sass_reports

    return sass_reports(_verbose_compile(source, arch).cubin)


def ptxas_reports(source: str, arch: str) -> dict[str, PtxasReport]:
    """Per kernel of `source`: ptxas's resource report for `arch` (raises CompilerUnavailable
    without a CUDA compiler)."""
    log = _verbose_compile(source, arch).log
    reports: dict[str, PtxasReport] = {}
    for section in re.split(r"(?=ptxas info\s+: Compiling entry function)", log):
        name = _FUNCTION.search(section)
        used = _USED.search(section)
        if not name or not used:
            continue
        spills = _SPILLS.search(section)
        stack, stores, loads = (int(g) for g in spills.groups()) if spills else (0, 0, 0)
        reports[name.group(1)] = PtxasReport(int(used.group(1)), stores + loads, stack, int(used.group(2) or 0))
    if not reports:
        raise FuserError(f"no ptxas resource report in the compiler log for {arch}:\n{log}")
    return reports


def access_widths(source: str, arch: str) -> dict[str, tuple[int, int]]:
    """Per kernel: (widest global load, widest global store) in bytes, read from its PTX."""
    ptx = cc.compile_cuda(source, arch, (), output="ptx").cubin.decode(errors="replace")
    widths: dict[str, tuple[int, int]] = {}
    entries = list(_ENTRY.finditer(ptx))
    for k, entry in enumerate(entries):
        body = ptx[entry.end():entries[k + 1].start() if k + 1 < len(entries) else len(ptx)]
        load = store = 0
        for m in _ACCESS.finditer(body):
            size = int(m.group(2) or 1) * int(m.group(3)) // 8
            if m.group(1) == "ld":
                load = max(load, size)
            else:
                store = max(store, size)
        widths[entry.group(1)] = (load, store)
    return widths


__all__ = ["PtxasReport", "access_widths", "ptxas_reports", "sass_of"]
