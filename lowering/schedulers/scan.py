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
  Blocks loop over lines. A single very long line is then walked by one block: a grid-wide
  scan (decoupled look-back) would be the next step for that case.
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
dtype); max/min of bools carry int (shuffles move ints, not bools).
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


@dataclass(frozen=True)
class ScanSchedule:
    block: int
    block_per_line: bool

    def describe(self) -> str:
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
    return Verdict(True, scheduler="scan", domain=first.result)


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
        return ScanSchedule(LONG_BLOCK if shape[axis] > LONG_LINE else BLOCK, block_per_line=True)

    def grid(self, plan: KernelPlan, schedule: ScanSchedule, extents, device: DeviceSpec = DEFAULT
             ) -> tuple[int, int, int] | None:
        assert plan.domain is not None
        shape, axis = extents.shape(plan.domain), _scan_dim(plan)
        lines = math.prod(e for d, e in enumerate(shape) if d != axis)
        if lines == 0 or shape[axis] == 0:
            return None
        if schedule.block_per_line:
            return min(lines, MAX_GRID), 1, 1
        return max(1, min(math.ceil(lines / schedule.block), MAX_GRID)), 1, 1

    def emit(self, plan: KernelPlan, schedule: ScanSchedule, options: EmitOptions = EmitOptions()) -> KernelBody:
        kernel = _ScanKernel(KernelEmitter(plan, schedule, options=options), scans_of(plan.ops))
        kernel.emit()
        em = kernel.em
        shared = [f"  __shared__ {acc.ctype} {_smem(acc)}[32];" for acc in kernel.carries] if schedule.block_per_line else []
        return KernelBody(em.text(), shared, tuple(em.params.values()), em.needs_sync)


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
        idx = self.open_line("for (long long line = blockIdx.x; line < lines; line += gridDim.x)")
        em.open("for (long long base = 0; base < len; base += blockDim.x)")
        em.line(f"const long long {SCAN_INDEX} = base + threadIdx.x;")
        values = [f"x{j}" for j in range(len(self.scans))]
        for acc, x in zip(self.carries, values):
            em.line(f"{acc.ctype} {x} = {acc.identity};")
        em.open(f"if ({SCAN_INDEX} < len)")
        for scan, acc, x in zip(self.scans, self.carries, values):
            em.line(f"{x} = ({acc.ctype}){em.emit(scan.input, idx)};")
        for v in self.plain_outputs:
            em.store(v, idx)
        em.close()
        self.block_scan(values)
        em.open(f"if ({SCAN_INDEX} < len)")
        self.store_scanned(values, idx)
        em.close()
        em.close()
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


__all__ = ["ScanScheduler", "ScanSchedule", "refuse_scans", "scan_verdict", "scans_of"]
