"""What the GPU runs: a compiled kernel's SASS, read for the facts the performance model needs.

The schedule says how many bytes a thread means to have in flight (unroll x vector); the SASS
says how many it does. A load is in flight from its `LDG` until the first instruction that reads
or overwrites one of the registers it writes: ptxas places the wait (its scoreboard) there. So,
in address order, the loads issued back to back before the first use of any of them are one
*batch*, waited on together; a branch backwards (a loop's end), a barrier or an exit ends a batch
too. A thread's bytes in flight is the mean batch of the kernel's innermost loops that load (the
loop a thread spends its time in: each batch there costs a DRAM round trip per iteration), and
per SM that times the resident threads.

An unrolled loop of `if (in range) { v = load; use(v); }` shows here as batches of one vector,
however deep the unroll; `for k: v[k] = in_range ? load : 0;` then `for k: use(v[k])` as one
batch of all of them (docs/benchmarks.md#performance-model).

The SASS comes from `nvdisasm -c` (NVIDIA's `nvidia-cuda-nvdisasm` wheel, in the nvrtc and cuda
extras, or the CUDA toolkit's on PATH) on the cubin NVRTC or nvcc made. Where there is none,
`sass_reports` raises `SassUnavailable`, and the model says the figure is the schedule's.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path


class SassUnavailable(RuntimeError):
    """No nvdisasm here (or it failed): the SASS cannot be read."""


_SECTION = re.compile(r"^\s*\.section\s+\.text\.(\w+),")
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:(@!?U?P[T0-9]+)\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?)\s*;")
_REGISTER = re.compile(r"(?<![A-Za-z0-9_])R(\d+)(\.64|\.128)?")
_TARGET = re.compile(r"`\(\.(L_x_\d+)\)")
_LABEL = re.compile(r"^\s*\.(L_x_\d+):")

GLOBAL_LOADS = ("LDG", "LD")
"""Opcodes (before the first dot) that load from global memory (LD: a generic load, which may be)."""
BATCH_ENDS = ("EXIT", "RET", "MEMBAR", "ERRBAR")
"""Opcodes after which a thread waits for (or cannot keep tracking) what it has in flight. Not
barriers, reconvergence or calls (BAR, BSYNC, WARPSYNC, CALL: ptxas's 64-bit division is a
call that keeps the caller's live registers): a load stays in flight across them, its wait is
at its first use."""


@dataclass(frozen=True)
class LoadBatch:
    """Global loads a thread issues before it first uses one of them."""

    loads: int
    bytes: int
    loop_depth: int
    """How many loops (backward branches) enclose its first load."""
    address: int


@dataclass(frozen=True)
class SassReport:
    """What one kernel's SASS says."""

    batches: tuple[LoadBatch, ...]
    global_loads: int
    widest_load: int
    """Bytes of the widest global load (16: LDG.E.128)."""
    local_loads: int
    local_stores: int
    instructions: int

    @property
    def hot_depth(self) -> int:
        return max((b.loop_depth for b in self.batches), default=0)

    @property
    def hot_batches(self) -> tuple[LoadBatch, ...]:
        """The batches of the innermost loops that load: what a thread's time is spent on."""
        depth = self.hot_depth
        return tuple(b for b in self.batches if b.loop_depth == depth)

    @property
    def in_flight_per_thread(self) -> int:
        """Bytes a thread keeps in flight in its hot loops: their mean batch (0: no loads)."""
        hot = self.hot_batches
        return round(sum(b.bytes for b in hot) / len(hot)) if hot else 0

    def describe(self) -> str:
        hot = self.hot_batches
        return (f"{self.in_flight_per_thread} B in flight a thread (mean of {len(hot)} load batches at loop depth "
                f"{self.hot_depth}: {', '.join(str(b.bytes) for b in hot)} B), {self.global_loads} global loads, "
                f"widest {self.widest_load} B, {self.local_loads + self.local_stores} local-memory accesses")


def _load_bytes(opcode: str) -> int:
    parts = opcode.split(".")
    for part in parts[1:]:
        if part in ("128", "64", "32"):
            return int(part) // 8
        if part in ("U16", "S16"):
            return 2
        if part in ("U8", "S8"):
            return 1
    return 4


def _registers(operand_text: str, wide: int = 1) -> set[int]:
    """Register numbers an operand list names (R4.64: R4 and R5)."""
    found: set[int] = set()
    for m in _REGISTER.finditer(operand_text):
        n = int(m.group(1))
        width = {".64": 2, ".128": 4}.get(m.group(2) or "", 1)
        found.update(range(n, n + max(width, wide)))
    return found


@dataclass
class _Instruction:
    address: int
    opcode: str
    operands: str
    guarded: bool


def parse_kernels(text: str) -> dict[str, list[_Instruction]]:
    """nvdisasm -c output -> per kernel, its instructions in address order; labels as
    pseudo-instructions (opcode "LABEL", operands its name)."""
    kernels: dict[str, list[_Instruction]] = {}
    current: list[_Instruction] | None = None
    for line in text.splitlines():
        section = _SECTION.match(line)
        if section:
            current = kernels.setdefault(section.group(1), [])
            continue
        if current is None:
            continue
        label = _LABEL.match(line)
        if label:
            current.append(_Instruction(-1, "LABEL", label.group(1), False))
            continue
        m = _INSTRUCTION.match(line)
        if m:
            current.append(_Instruction(int(m.group(1), 16), m.group(3), m.group(4), bool(m.group(2))))
    return kernels


def _loops(instructions: list[_Instruction]) -> list[tuple[int, int]]:
    """(first, last) instruction positions of each loop: a branch to a label before it."""
    labels = {ins.operands: k for k, ins in enumerate(instructions) if ins.opcode == "LABEL"}
    loops = []
    for k, ins in enumerate(instructions):
        if ins.opcode.split(".")[0] in ("BRA", "JMP", "BRX"):
            target = _TARGET.search(ins.operands)
            if target and labels.get(target.group(1), k + 1) < k:
                loops.append((labels[target.group(1)], k))
    return loops


def analyse(instructions: list[_Instruction]) -> SassReport:
    loops = _loops(instructions)

    def depth(k: int) -> int:
        return sum(1 for a, b in loops if a <= k <= b)

    loop_ends = {b for _, b in loops}
    batches: list[LoadBatch] = []
    pending: set[int] = set()
    issued: list[tuple[frozenset[int], int]] = []
    """The batch's loads: (destination registers, how many unconditional jumps came since)."""
    batch_loads = batch_bytes = 0
    first = -1
    global_loads = widest = local_loads = local_stores = count = 0

    def close() -> None:
        nonlocal batch_loads, batch_bytes, first
        if batch_loads:
            ins = instructions[first]
            batches.append(LoadBatch(batch_loads, batch_bytes, depth(first), ins.address))
        pending.clear()
        issued.clear()
        batch_loads = batch_bytes = 0
        first = -1

    for k, ins in enumerate(instructions):
        if ins.opcode == "LABEL":
            continue
        count += 1
        base = ins.opcode.split(".")[0]
        if base == "LDL":
            local_loads += 1
        elif base == "STL":
            local_stores += 1
        if base in GLOBAL_LOADS:
            dest, _, source = ins.operands.partition(",")
            size = _load_bytes(ins.opcode)
            written = frozenset(_registers(dest, max(1, size // 4)))
            global_loads += 1
            widest = max(widest, size)
            if any(regs == written and jumps for regs, jumps in issued) and not _registers(source) & pending:
                continue  # the other arm of an if/else loading the same registers: one load a thread
            if _registers(source) & pending or written & pending:
                close()  # its address (a gather) or its destination waits on the batch
            pending.update(written)
            issued.append((written, 0))
            if not batch_loads:
                first = k
            batch_loads += 1
            batch_bytes += size
            continue
        if pending and _registers(ins.operands) & pending:
            close()
        if base in BATCH_ENDS or k in loop_ends:
            close()
        elif base == "BRA" and not ins.guarded:
            issued[:] = [(regs, jumps + 1) for regs, jumps in issued]
    close()
    return SassReport(tuple(batches), global_loads, widest, local_loads, local_stores, count)


def nvdisasm() -> str | None:
    """The nvdisasm to run: FUSER_NVDISASM, the nvidia-cuda-nvdisasm wheel's, or PATH's."""
    named = os.environ.get("FUSER_NVDISASM", "").strip()
    if named:
        return shutil.which(named) or (named if Path(named).is_file() else None)
    try:
        import nvidia  # the namespace package NVIDIA's wheels install into

        for root in getattr(nvidia, "__path__", []):
            for candidate in sorted(Path(root).glob("*/bin/nvdisasm")):
                if os.access(candidate, os.X_OK):
                    return str(candidate)
    except ImportError:
        pass
    return shutil.which("nvdisasm")


_memo: dict[str, dict[str, SassReport]] = {}
_lock = threading.Lock()


def sass_reports(cubin: bytes) -> dict[str, SassReport]:
    """Per kernel of `cubin`: what its SASS says (raises SassUnavailable without nvdisasm)."""
    key = hashlib.sha256(cubin).hexdigest()
    with _lock:
        if key in _memo:
            return _memo[key]
    tool = nvdisasm()
    if tool is None:
        raise SassUnavailable("nvdisasm not found (pip install nvidia-cuda-nvdisasm, part of fuser's nvrtc extra, "
                              "or set FUSER_NVDISASM)")
    # Self-contained (no other fuser module): benchmarks/gpu/extract_kernels.py loads this file
    # beside an old commit's fuser to count the SASS of the kernels a recorded GPU run timed.
    with tempfile.TemporaryDirectory(prefix="fuser-sass-") as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            done = subprocess.run([tool, "-c", str(path)], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SassUnavailable(f"{tool} failed: {e}") from e
    if done.returncode != 0:
        raise SassUnavailable(f"{tool} -c exited with {done.returncode}: {done.stderr.strip()[:500]}")
    reports = {name: analyse(body) for name, body in parse_kernels(done.stdout).items()}
    with _lock:
        _memo[key] = reports
    return reports


__all__ = ["LoadBatch", "SassReport", "SassUnavailable", "analyse", "nvdisasm", "parse_kernels", "sass_reports"]
