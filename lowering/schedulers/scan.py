"""The scan scheduler: kernels of inclusive scans (cumsum, cumprod, cummax, cummin) and the
producer cone of their inputs.

A scan of the domain D along dim `a` works on *lines*: all elements of D that share every
index but `a`. Computing each output element on its own would re-read its whole prefix
(O(n^2) loads), so a line is owned by one block or one thread, which walks it once in order,
carrying the fold of everything before:

- block per line (the scan dim is innermost and lines are longer than a warp): consecutive
  threads read consecutive elements (coalesced). The line goes in chunks of blockDim
  elements; each chunk is scanned block-wide (a warp scan with `__shfl_up_sync`, the warps'
  totals through shared memory) and combined with the carry of the chunks before it.
  Blocks loop over lines. Lines too few to give every SM a block and too long for one block
  (`SPLIT_LINE`: a 1-D cumsum of 2^26 elements) are *split*: each line is cut into chunks,
  a block each, and the kernel runs in two passes (reduce-then-scan, two launches of the same
  kernel, `passes`): pass 0 folds each chunk to its total (the same block-wide scan, storing
  nothing but the chunk's carry, in a workspace); pass 1 starts each chunk from the fold of the
  totals of the chunks before it on its line, in chunk order, and scans and stores it. No
  block ever waits for another (the emulation runs blocks one after another; a decoupled
  look-back would spin on other blocks' values), at the cost of reading the input twice.
- thread per line (the scan dim is not innermost, or lines are short): each thread walks its
  line serially; neighbouring threads own neighbouring lines, so a warp's loads of one step
  are consecutive in the innermost dim (coalesced) when the scan dim is an outer one.

The scan input's producers (elementwise ops, casts, broadcasts, layout ops, gathers) are
computed in the kernel at the element being scanned, so fusion inputs are read once and the
scan result is written once: the bytes moved are the minimum. Other outputs shaped like D
are stored from the same loop. A value computed from a scan result needs the whole prefix
first, so its ops run in a following kernel (segmentation splits there); reductions run in
row kernels. Several scans of one domain and dim (of one input or several) share a kernel:
their carries advance together.

f16/bf16 scans carry f32; integer and bool sums and products carry i64 (torch's result
dtype); max/min of bools carry int (shuffles move ints, not bools). A kernel's carries live in
registers (several per scan a thread: the carry, the element, its warp prefix, the warps'
totals), so one kernel takes at most `MAX_CARRY_BYTES` of them (12 f64 or 24 f32 scans):
more spill (16 f64 scans in a block of 512: ptxas spills; 200 overflowed the 48 KiB of static
shared memory of their warps' totals); segmentation splits the rest into further kernels,
saying so in the IR.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation

from fuser_dialect import ops_compute as C
from fuser_dialect.ops_scan import ScanOp
from fuser.lowering.codegen import cuda_exprs as X
from fuser.lowering.codegen.emit_cuda import EmitOptions, KernelEmitter
from fuser.lowering.codegen.index import Ix, loop_var
from fuser.lowering.codegen.kernel import KernelPlan
from fuser.lowering.device import DEFAULT, DeviceSpec
from fuser.lowering.schedulers.base import MAX_GRID, Candidate, KernelBody, SchedulerUnit, Verdict
from fuser.lowering.schedulers.grid import Accumulator

SHORT_LINE = 32
"""Lines up to a warp long are scanned a thread per line: a block per line would idle most threads."""
LONG_LINE = 4096
BLOCK = 128
LONG_BLOCK = 512
"""Threads of a block per line: 128, or 512 for lines longer than LONG_LINE (fewer chunks, each
a block-wide scan). Two sizes only: each is its own compiled kernel."""
SCAN_INDEX = "si"
"""The C name of the position along the scan dim."""
MAX_CARRY_BYTES = 96
"""Bytes of carries one scan kernel keeps per thread (each scan's, by its carry type): up to 12
f64 or 24 f32 scans compile without spills in a block of 512 (ptxas, sm_90: 12 f64 scans take
98 registers of the 128 a thread has there, 16 spill)."""
SPLIT_LINE = 16384
"""Lines at least this long, fewer than the GPU has SMs, are split over several blocks each."""
SPLIT_CHUNK_STEPS = 8
"""A split line's chunks are at least this many block-wide steps long (the carry-in fold and the
two passes' fixed costs are paid per chunk)."""
SPLIT_BLOCKS_PER_SM = 2
"""A split scan's grid: up to this many blocks an SM, over all its lines."""


@dataclass(frozen=True)
class ScanSchedule:
    block: int
    block_per_line: bool
    split: bool = False
    """Each line is cut into chunks over several blocks, in two passes (see the module doc)."""

    def describe(self) -> str:
        if self.split:
            return f"block per chunk of a line, two passes, block: {self.block}"
        return f"{'block' if self.block_per_line else 'thread'} per line, block: {self.block}"


# -- segmentation: is a group of ops a scan kernel? --------------------------------------


def _dims(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def scans_of(ops: Sequence[Operation]) -> list[ScanOp]:
    return [op for op in ops if isinstance(op, ScanOp)]


def candidate_scans(candidate: Candidate) -> list[ScanOp]:
    """The scans of a candidate (found once: every unit asks)."""
    found = candidate.facts.get("scans")
    if found is None:
        found = candidate.facts["scans"] = scans_of(candidate.ops)
    return found  # type: ignore[return-value]


def scan_verdict(candidate: Candidate) -> Verdict:
    """The scan unit's verdict on a candidate (computed once, shared with the units that
    refuse scans, so that a refusal quotes the scan unit's reason)."""
    found = candidate.facts.get("scan")
    if found is None:
        found = candidate.facts["scan"] = _classify_scan(candidate)
    return found  # type: ignore[return-value]


def refuse_scans(candidate: Candidate) -> Verdict | None:
    """For the other units: a refusal when the candidate holds a scan, else None."""
    if not candidate_scans(candidate):
        return None
    verdict = scan_verdict(candidate)
    return Verdict(False, verdict.reason or "a scan runs in the scan scheduler")


def _classify_scan(candidate: Candidate) -> Verdict:
    sym, scans = candidate.sym, candidate_scans(candidate)
    if not scans:
        return Verdict(False, "no scan")
    first = scans[0]
    domain = sym.shape(first.result)
    for scan in scans[1:]:
        if sym.shape(scan.result) != domain or scan.axis != first.axis:
            return Verdict(False, f"scans of different domains or dims: {_dims(domain)} along dim {first.axis} "
                                  f"and {_dims(sym.shape(scan.result))} along dim {scan.axis}")
    results = {scan.result for scan in scans}
    for op in candidate.ops:
        if any(v in results for v in op.operands):
            return Verdict(False, f"{op.name} reads a scan result (it needs the whole prefix: a following kernel)")
        if isinstance(op, C.ReductionOp):
            return Verdict(False, f"{op.name} in a scan kernel (a reduction runs in a row kernel)")
    for v in candidate.outputs:
        if v not in results and sym.shape(v) != domain:
            return Verdict(False, f"output {_dims(sym.shape(v))} is not shaped like the scan domain {_dims(domain)}")
    producers = _producer_verdict(candidate, scans)
    if not producers.ok:
        return Verdict(False, f"the scan's producers are not pointwise: {producers.reason}")
    carried = sum(carry_bytes(scan) for scan in scans)
    if carried > MAX_CARRY_BYTES:
        return Verdict(False, f"{len(scans)} scans carry {carried} bytes a thread, more than the {MAX_CARRY_BYTES} "
                              "one scan kernel keeps in registers")
    return Verdict(True, scheduler="scan", domain=first.result)


_CARRY_BYTES = {"double": 8, "long long": 8, "float": 4, "int": 4}


def carry_bytes(scan: ScanOp) -> int:
    """Bytes of the carry a thread keeps for `scan` (its accumulator type)."""
    return _CARRY_BYTES.get(_carry("c", scan).ctype, 16)


def _producer_verdict(candidate: Candidate, scans: list[ScanOp]) -> Verdict:
    """The scan kernel computes its other ops element by element, as a pointwise kernel does:
    the pointwise unit knows which ops can be (an op family with a unit of its own cannot)."""
    from fuser.lowering.schedulers.pointwise import PointwiseScheduler  # it imports this module

    rest = [op for op in candidate.ops if op not in scans]
    return PointwiseScheduler().accepts(Candidate(rest, [], candidate.sym))


# -- the unit ----------------------------------------------------------------------------


def _scan_dim(plan: KernelPlan) -> int:
    """The dim the kernel's scans run along (its domain is the first scan's result)."""
    scan = plan.domain.owner if plan.domain is not None else None
    assert isinstance(scan, ScanOp), "a scan kernel's domain is a scan result"
    return scan.axis


class ScanScheduler(SchedulerUnit):
    name = "scan"

    def accepts(self, candidate: Candidate) -> Verdict:
        return scan_verdict(candidate)

    def choose(self, plan: KernelPlan, shapes: Sequence[tuple[int, ...]], arrays: dict | None,
               output_layout: dict, device: DeviceSpec = DEFAULT) -> ScanSchedule:
        shape, axis = shapes[0], _scan_dim(plan)
        innermost = math.prod(shape[axis + 1:]) == 1
        if not innermost or shape[axis] <= SHORT_LINE:
            return ScanSchedule(BLOCK, block_per_line=False)
        lines = math.prod(e for d, e in enumerate(shape) if d != axis)
        if shape[axis] >= SPLIT_LINE and lines < device.sms:
            return ScanSchedule(LONG_BLOCK, block_per_line=True, split=True)
        return ScanSchedule(LONG_BLOCK if shape[axis] > LONG_LINE else BLOCK, block_per_line=True)

    def check_schedule(self, plan: KernelPlan, schedule, shapes: Sequence[tuple[int, ...]], arrays: dict | None,
                       output_layout: dict, device: DeviceSpec = DEFAULT) -> None:
        super().check_schedule(plan, schedule, shapes, arrays, output_layout, device)

        def refuse(field: str, why: str) -> None:
            raise ValueError(f"override_schedule: kernel {plan.index} ({self.name}) cannot run {schedule.describe()}: "
                             f"{field}: {why}")

        if not isinstance(schedule.block_per_line, bool) or not isinstance(schedule.split, bool):
            refuse("block_per_line, split", "must be True or False")
        if schedule.split and not schedule.block_per_line:
            refuse("split", "a split line is scanned by blocks (block_per_line=True)")
        if schedule.block_per_line and schedule.block % 32:
            refuse("block", f"{schedule.block} is not a multiple of 32: a block-wide scan combines whole warps "
                            "(blockDim.x >> 5 of them; a partial warp's total would be lost)")
        scans = scans_of(plan.ops)
        static = sum(carry_bytes(scan) for scan in scans) * (schedule.block // 32) if schedule.block_per_line else 0
        if static > device.shared_per_block:
            refuse("block", f"the warps' totals of {len(scans)} scans take {static} bytes of shared memory, more than "
                            f"the {device.shared_per_block} a kernel may declare on {device.name}")

    def passes(self, plan: KernelPlan, schedule: ScanSchedule) -> int:
        return 2 if schedule.split else 1

    def grid(self, plan: KernelPlan, schedule: ScanSchedule, extents, device: DeviceSpec = DEFAULT
             ) -> tuple[int, int, int] | None:
        assert plan.domain is not None
        shape, axis = extents.shape(plan.domain), _scan_dim(plan)
        lines = math.prod(e for d, e in enumerate(shape) if d != axis)
        if lines == 0 or shape[axis] == 0:
            return None
        if schedule.split:
            return lines * split_chunks(lines, shape[axis], schedule.block, device), 1, 1
        if schedule.block_per_line:
            return min(lines, MAX_GRID), 1, 1
        return max(1, min(math.ceil(lines / schedule.block), MAX_GRID)), 1, 1

    def emit(self, plan: KernelPlan, schedule: ScanSchedule, options: EmitOptions = EmitOptions()) -> KernelBody:
        kernel = _ScanKernel(KernelEmitter(plan, schedule, options=options), scans_of(plan.ops))
        kernel.emit()
        em = kernel.em
        warps = max(1, schedule.block // 32)
        shared = ([f"  __shared__ {acc.ctype} {_smem(acc)}[{warps}];" for acc in kernel.carries]
                  if schedule.block_per_line else [])
        return KernelBody(em.text(), shared, tuple(em.params.values()), em.needs_sync)


def split_chunks(lines: int, length: int, block: int, device: DeviceSpec) -> int:
    """Chunks (blocks) per line of a split scan: up to SPLIT_BLOCKS_PER_SM blocks an SM over all
    lines, each chunk at least SPLIT_CHUNK_STEPS steps of the block long, within the grid's limit."""
    longest = math.ceil(length / (SPLIT_CHUNK_STEPS * block))
    return max(1, min(longest, max(1, SPLIT_BLOCKS_PER_SM * device.sms // lines), MAX_GRID // lines))


# -- emission --------------------------------------------------------------------------------


def _carry(name: str, scan: ScanOp) -> Accumulator:
    dst = scan.result.type.dtype
    if dst == "i1":  # max/min of bools (sums and products are i64)
        return Accumulator(name, "int", scan.op_kind, "0" if scan.op_kind == C.ReductionKind.MAX else "1")
    return Accumulator(name, X.COMPUTE_TYPE[dst], scan.op_kind, X.reduction_identity(scan.op_kind, dst))


def _smem(acc: Accumulator) -> str:
    return f"{acc.name}_warps"


def _fold(acc: Accumulator, a: str, b: str) -> str:
    """a before b (every scan kind is commutative, but a fixed order keeps sums reproducible)."""
    return f"{X.reduction_combine(acc.kind)}({a}, {b})"


class _ScanKernel:
    """Emits a scan kernel: a loop over lines, then along each line (see the module doc)."""

    def __init__(self, em: KernelEmitter, scans: list[ScanOp]):
        self.em = em
        self.scans = scans
        plan = em.plan
        assert plan.domain is not None
        self.domain = plan.domain
        self.axis = scans[0].axis
        self.others = [d for d in range(self.domain.type.rank) if d != self.axis]  # type: ignore[union-attr]
        self.carries = [_carry(f"carry{j}", scan) for j, scan in enumerate(scans)]
        results = {scan.result for scan in scans}
        self.plain_outputs = [v for v in plan.outputs if v not in results]

    def emit(self) -> None:
        em = self.em
        em.line(f"const long long lines = {em.numel(self.domain, self.others)};")
        em.line(f"const long long len = {em.extent(self.domain, self.axis)};")
        if em.schedule.block_per_line:
            self.block_per_line()
        else:
            self.thread_per_line()
        em.stop_hoisting()

    def index(self, o: dict[int, Ix]) -> list[Ix]:
        return [o[d] if d != self.axis else loop_var(self.axis, SCAN_INDEX) for d in range(self.domain.type.rank)]  # type: ignore[union-attr]

    def open_line(self, header: str) -> list[Ix]:
        """Opens the loop over lines; loads that depend on the line alone are read once per line."""
        em = self.em
        em.open(header)
        o = em.unravel(self.domain, self.others, "line", "o")
        for acc in self.carries:
            em.line(f"{acc.ctype} {acc.name} = {acc.identity};")
        em.hoist_here(allowed=set(self.others), group=32 if em.schedule.block_per_line else 0)
        return self.index(o)

    def store_scanned(self, values: list[str], idx: list[Ix]) -> None:
        em = self.em
        for scan, value in zip(self.scans, values):
            dst = scan.result.type.dtype
            em.define_result(scan.result, em.tmp(X.COMPUTE_TYPE[dst], f"({X.COMPUTE_TYPE[dst]}){value}", "scan"))
            em.store(scan.result, idx)

    def thread_per_line(self) -> None:
        em = self.em
        idx = self.open_line("for (long long line = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
                             "line < lines; line += (long long)gridDim.x * blockDim.x)")
        em.open(f"for (long long {SCAN_INDEX} = 0; {SCAN_INDEX} < len; ++{SCAN_INDEX})")
        for scan, acc in zip(self.scans, self.carries):
            em.line(acc.combine(em.emit(scan.input, idx)))
        for v in self.plain_outputs:
            em.store(v, idx)
        self.store_scanned([acc.name for acc in self.carries], idx)
        em.close()
        em.close()

    def block_per_line(self) -> None:
        em = self.em
        em.require_sync()
        em.line("const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;")
        split = em.schedule.split
        if split:
            self.open_chunk()
            begin, end, storing = "begin", "end", "scanning"
        else:
            self.line_idx = self.open_line("for (long long line = blockIdx.x; line < lines; line += gridDim.x)")
            begin, end, storing = "0", "len", ""
        idx = self.line_idx
        em.open(f"for (long long base = {begin}; base < {end}; base += blockDim.x)")
        em.line(f"const long long {SCAN_INDEX} = base + threadIdx.x;")
        values = [f"x{j}" for j in range(len(self.scans))]
        for acc, x in zip(self.carries, values):
            em.line(f"{acc.ctype} {x} = {acc.identity};")
        em.open(f"if ({SCAN_INDEX} < {end})")
        for scan, acc, x in zip(self.scans, self.carries, values):
            em.line(f"{x} = ({acc.ctype}){em.emit(scan.input, idx)};")
        if self.plain_outputs:
            if storing:
                em.open(f"if ({storing})")
            for v in self.plain_outputs:
                em.store(v, idx)
            if storing:
                em.close()
        em.close()
        self.block_scan(values)
        em.open(f"if ({storing + ' && ' if storing else ''}{SCAN_INDEX} < {end})")
        self.store_scanned(values, idx)
        em.close()
        em.close()
        if split:
            self.close_chunk()
        em.close()

    def open_chunk(self) -> None:
        """A split scan's block: its line and the chunk of it [begin, end) (the grid is lines x
        chunks, the chunk a whole number of block steps); in pass 1 each carry starts from the
        fold of the totals of the chunks before it on its line, which pass 0 wrote."""
        em = self.em
        which = em.param(("pass",), "int", "pass", "pass")
        ws = em.param(("workspace",), "unsigned long long* __restrict__", "workspace", "ws", dim=len(self.carries))
        em.line(f"const bool scanning = {which} != 0;  // pass 1 (pass 0 folds each chunk)")
        em.line("const long long chunks = (long long)gridDim.x / lines;")
        em.line("const long long line = (long long)blockIdx.x / chunks, chunk = (long long)blockIdx.x % chunks;")
        em.line("const long long per = ((len + chunks - 1) / chunks + blockDim.x - 1) / blockDim.x * blockDim.x;")
        em.line("const long long begin = chunk * per, end = begin + per < len ? begin + per : len;")
        self.parts = []
        for j, acc in enumerate(self.carries):
            part = f"part{j}"
            em.line(f"{acc.ctype}* {part} = reinterpret_cast<{acc.ctype}*>({ws} + 1 + {j}LL * gridDim.x);")
            self.parts.append(part)
        self.line_idx = self.open_line("if (line < lines)")
        # Lane 0 of each warp folds the earlier chunks' totals in chunk order (every warp alike:
        # the same bits), then hands the carry to its warp.
        em.open("if (scanning)")
        em.open("if (lane == 0)")
        em.open("for (long long c = line * chunks; c < (long long)blockIdx.x; ++c)")
        for acc, part in zip(self.carries, self.parts):
            em.line(f"{acc.name} = {_fold(acc, acc.name, f'fuser_ld({part}, c)')};")
        em.close()
        em.close()
        for acc in self.carries:
            em.line(f"{acc.name} = __shfl_sync(0xffffffffu, {acc.name}, 0);")
        em.close()

    def close_chunk(self) -> None:
        """Pass 0: the chunk's total (its carry after the last step) goes to the workspace."""
        em = self.em
        em.open("if (!scanning && threadIdx.x == 0)")
        for acc, part in zip(self.carries, self.parts):
            em.line(f"fuser_st({part}, blockIdx.x, {acc.name});")
        em.close()

    def block_scan(self, values: list[str]) -> None:
        """Each x becomes carry + (the chunk's elements up to this thread's); each carry takes
        the chunk's total. Two barriers: the warps' totals are written, then read by all."""
        em = self.em
        em.open("for (int off = 1; off < 32; off <<= 1)")
        for acc, x in zip(self.carries, values):
            em.line(f"const {acc.ctype} up_{x} = __shfl_up_sync(0xffffffffu, {x}, off);")
            em.line(f"if (lane >= off) {x} = {_fold(acc, f'up_{x}', x)};")
        em.close()
        em.open("if (lane == 31)")
        for acc, x in zip(self.carries, values):
            em.line(f"{_smem(acc)}[warp] = {x};")
        em.close()
        em.line("__syncthreads();")
        for acc, x in zip(self.carries, values):
            em.line(f"{acc.ctype} before_{x} = {acc.identity}, total_{x} = {acc.identity};")
        em.open("for (int w = 0; w < warps; ++w)")
        for acc, x in zip(self.carries, values):
            em.line(f"const {acc.ctype} warp_{x} = {_smem(acc)}[w];")  # read once, as a value of its type
            em.line(f"if (w < warp) before_{x} = {_fold(acc, f'before_{x}', f'warp_{x}')};")
            em.line(f"total_{x} = {_fold(acc, f'total_{x}', f'warp_{x}')};")
        em.close()
        em.line("__syncthreads();  // the next chunk rewrites the warps' totals")
        for acc, x in zip(self.carries, values):
            em.line(f"{x} = {_fold(acc, acc.name, _fold(acc, f'before_{x}', x))};")
            em.line(f"{acc.name} = {_fold(acc, acc.name, f'total_{x}')};")


__all__ = ["MAX_CARRY_BYTES", "ScanScheduler", "ScanSchedule", "carry_bytes", "refuse_scans", "scan_verdict",
           "scans_of", "split_chunks"]
