"""Row kernels, shared by the `reduction` and `inner_persistent` units: every reduction of the
kernel reduces the same dims R of tensors of one domain D, and every other value is
*row-consistent* — FULL (shaped like D), KEEP (D with R broadcast) or DROP (D without R) — so
that whoever owns one row of D can compute all of them.

Schedule (`RowSchedule`, chosen from the run-time extents):
- the innermost dim is reduced: one block per row; threads stride over the row (coalesced)
  and combine with warp shuffles + shared memory. Rows up to `MAX_PERSISTENT_ITERS` elements
  per thread are *persistent*: each thread keeps the loads that several phases share in
  registers (`iters` is a compile-time trip count; which loads, the kernel analysis says),
  so a normalization reads its input once; such kernels loop over rows with one block per SM
  when they keep row-invariant loads (weights) across rows, else with as many blocks as an SM
  holds (`persistent_blocks_per_sm`). Longer rows fuse
  `max` and `sum(exp(x - max))` into one online pass, and `sum(x)` and `sum((x - m)^2)` (m a
  mean: welford, var, layer-norm) into one Welford pass; other phases re-read the row.
- the innermost dim is kept: one thread per row, a serial loop over the reduced elements.

Kernel shape: for each row: one phase per reduction (a loop over the row + a block
reduction), then a loop storing the FULL outputs, then thread 0 stores the row outputs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from fuser_dialect import ops_compute as C
from fuser_dialect import ops_gather as G
from fuser_dialect import ops_layout as L
from fuser_dialect.types import TensorType
from fuser.lowering.codegen import cuda_exprs as X
from fuser.lowering.codegen.analysis import RowAccess
from fuser.lowering.codegen.emit_cuda import KernelEmitter, PhaseLoop
from fuser.lowering.codegen.index import ZERO, Ix
from fuser.lowering.codegen.kernel import DROP, FULL, GRID, KEEP, KernelPlan
from fuser.lowering.schedulers.base import MAX_GRID, Candidate, KernelBody, SchedulerUnit, Verdict
from fuser.lowering.schedulers.grid import SMEM_NAME, Accumulator, emit_grid_combine, shared_declarations
from fuser.lowering.schedulers.scan import refuse_scans
from fuser.lowering.schedulers.symbolic import B, SymbolicExtents

MAX_PERSISTENT_ITERS = 32
REGISTER_ITERS = 8
"""Up to this many elements a thread, a persistent row's kept values are register arrays (at
1024 threads a thread has 64 registers); beyond, they live in shared memory."""
SHARED_ROW_BYTES = 200 * 1024
"""Dynamic shared memory a row kernel may use (an H100 block may opt in to 227 KB)."""
SPLIT_BLOCK = 512
SPLIT_ELEMENTS_PER_THREAD = 8
SPLIT_GRID = 264
"""A row split over the grid: at most 2 blocks per SM of an H100, each thread folding at
least 8 elements before the block and grid combine."""
PERSISTENT_GRID = 132
"""SMs of an H100: a persistent row kernel runs up to `persistent_blocks_per_sm` blocks on each,
each block looping over rows."""
RESIDENT_THREADS_PER_SM = 1024
"""Threads of row kernels an SM holds at once, counted at 64 registers a thread (65,536 on an
H100 SM): a kept row slice of up to 8 elements plus the reduction state."""
MAX_BLOCKS_PER_SM = 32
SHARED_PER_SM = 228 * 1024
_ELEMENTWISE = (C.UnaryOp, C.CastOp, C.BinaryOp, C.WhereOp)


@dataclass(frozen=True)
class RowSchedule:
    block: int
    block_per_row: bool
    """True: a block reduces each row (innermost dim reduced); False: a thread does."""
    iters: int = 0
    """Block per row: elements per thread kept on chip (0: the row does not fit)."""
    split: bool = False
    """Everything is reduced (one row): the row is split over the grid, the blocks' partials
    combined by the last block (lowering/schedulers/grid.py)."""
    shared: bool = False
    """The kept row values live in shared memory (slots of iters * block elements), not in
    per-thread register arrays: rows too long for registers without spilling."""
    keep: str = "values"
    """"values": loads and computed values later phases read are kept; "loads": only loads
    (what is computed from them is recomputed; fewer slots)."""
    invariants: bool = True
    """Row-invariant loads (weights) are kept across the rows of a block."""

    def describe(self) -> str:
        if self.split:
            return f"one row split over the grid, block: {self.block}"
        per_row = "block" if self.block_per_row else "thread"
        text = f"{per_row} per row, block: {self.block}, iters: {self.iters}"
        if self.shared:
            text += f", row in shared memory (keeps {self.keep}" + ("" if self.invariants else ", weights re-read") + ")"
        return text


# -- segmentation: is a group of ops a row kernel? ----------------------------------


def _dims(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def shape_form(sym: SymbolicExtents, v: SSAValue, domain: tuple, reduced: set[int]) -> str | None:
    s = sym.shape(v)
    if len(s) == len(domain) and all(a == b or a == B for a, b in zip(s, domain)):
        return KEEP if all(s[d] == B for d in reduced) else FULL
    kept = [e for d, e in enumerate(domain) if d not in reduced]
    if len(s) == len(kept) and all(a == b or a == B for a, b in zip(s, kept)):
        return DROP
    return None


@dataclass
class RowVerdict:
    verdict: Verdict
    normalization: bool = False
    """A reduction result flows back onto FULL rows (softmax, layer-norm)."""


def row_verdict(candidate: Candidate) -> RowVerdict:
    """The row analysis of a candidate (computed once, shared by the row units)."""
    found = candidate.facts.get("rows")
    if found is None:
        found = candidate.facts["rows"] = _classify_rows(candidate)
    return found  # type: ignore[return-value]


def _classify_rows(candidate: Candidate) -> RowVerdict:
    sym, reductions = candidate.sym, candidate.reductions
    if not reductions:
        return RowVerdict(Verdict(False, "no reduction"))
    # Reductions of the widest inputs are the row reductions; a reduction of a narrower value
    # must be a grid reduction (all of a per-row value), checked once the domain is known.
    widest = max(len(sym.shape(r.input)) for r in reductions)
    rows_of = [r for r in reductions if len(sym.shape(r.input)) == widest]
    across = [r for r in reductions if len(sym.shape(r.input)) < widest]
    reduced = rows_of[0].reduced_dims
    ref = min((r.input for r in rows_of), key=lambda v: sym.shape(v).count(B))
    domain = sym.shape(ref)
    rset = set(reduced)
    for r in rows_of:
        if r.reduced_dims != reduced:
            return RowVerdict(Verdict(False, f"reductions over different dims {_dims(reduced)} and {_dims(r.reduced_dims)}"))
        if shape_form(sym, r.input, domain, rset) is None:
            return RowVerdict(Verdict(False, f"reduction inputs have different domains {_dims(domain)} and {_dims(sym.shape(r.input))}"))
        shape = sym.shape(r.input)
        if any(shape[d] == B and domain[d] != B for d in reduced):
            # Its rows are shorter than the kernel's: one loop cannot reduce both.
            return RowVerdict(Verdict(False, f"reduction input {_dims(shape)} is broadcast in a reduced dim of {_dims(domain)}"))
    forms: dict[SSAValue, str] = {}

    def form_of(v: SSAValue) -> str | None:
        return forms.get(v) or (shape_form(sym, v, domain, rset) if isinstance(v.type, TensorType) else None)

    for op in candidate.ops:
        if isinstance(op, C.ReductionOp) and op in across:
            why = _grid_refusal(sym, op, form_of(op.input), domain)
            if why:
                return RowVerdict(Verdict(False, why))
            forms[op.result] = GRID
            continue
        if isinstance(op, C.ReductionOp):
            if form_of(op.input) not in (FULL, KEEP):
                return RowVerdict(Verdict(False, f"{op.name} input is not shaped like the reduction domain"))
            forms[op.result] = KEEP if op.keepdim is not None else DROP
            continue
        if not any(v in forms for v in op.operands):
            continue
        if any(forms.get(v) == GRID for v in op.operands):
            form = _grid_form(op, forms)
        else:
            form = _tainted_form(sym, op, form_of, rset, forms, domain)
        if form is None or form.startswith("!"):
            return RowVerdict(Verdict(False, form[1:] if form else f"{op.name} remaps the indices of a reduction result"))
        forms[op.results[0]] = form
    # Only values that depend on a reduction are in `forms` here.
    normalization = any(f == FULL for f in forms.values())
    for v in candidate.outputs:
        if v not in forms:
            form = shape_form(sym, v, domain, rset)
            if form is None:
                return RowVerdict(Verdict(False, f"output {_dims(sym.shape(v))} is not shaped like the reduction domain {_dims(domain)}"))
            forms[v] = form
    return RowVerdict(Verdict(True, domain=ref, reduced_dims=tuple(reduced), forms=forms), normalization)


def _grid_refusal(sym, op: C.ReductionOp, input_form: str | None, domain: tuple) -> str:
    """Why `op` cannot be a grid reduction of this kernel ("" when it can): it must reduce
    every dim of a per-row value (DROP, or KEEP read at the row)."""
    shape = sym.shape(op.input)
    if input_form not in (DROP, KEEP):
        return (f"reductions of different domains {_dims(domain)} and {_dims(shape)} (not a reduction of "
                f"per-row values either)")
    if len(op.reduced_dims) != len(shape):
        return f"{op.name} of the per-row value {_dims(shape)} reduces dims {_dims(op.reduced_dims)}, not all of them"
    return ""


def _grid_form(op: Operation, forms: dict) -> str | None:
    """A value computed from grid reduction results: elementwise on them (and scalars) only."""
    if not isinstance(op, _ELEMENTWISE):
        return f"!{op.name} of a grid reduction result is not elementwise"
    if all(forms.get(v) == GRID for v in op.operands if isinstance(v.type, TensorType)):
        return GRID
    return f"!{op.name} combines a grid reduction result with a per-row value"


def _tainted_form(sym, op: Operation, form_of, rset: set[int], forms: dict, domain: tuple) -> str | None:
    """The form of a value computed from a reduction result, None when no row can compute it,
    or "!why" with a more precise reason."""
    if isinstance(op, _ELEMENTWISE):
        operand_forms = [form_of(v) for v in op.operands if isinstance(v.type, TensorType)]
        if None in operand_forms:
            return f"!{op.name} combines a reduction result with a value of another domain"
        if DROP in operand_forms:
            return DROP if set(operand_forms) == {DROP} else f"!{op.name} mixes reduced and unreduced ranks"
        return FULL if FULL in operand_forms else KEEP
    if isinstance(op, L.BroadcastOp):
        ok = form_of(op.input) == DROP and set(op.dims.get_values()) == rset
        return KEEP if ok else None
    if isinstance(op, L.SqueezeOp):
        ok = form_of(op.input) == KEEP and set(op.dims.get_values()) == rset
        return DROP if ok else None
    if isinstance(op, L.BroadcastInDimOp):
        # A row value put back onto the rows (the spelling frameworks emit: static output shape).
        dims = list(op.dims.get_values())
        kept = [d for d in range(len(domain)) if d not in rset]
        source = form_of(op.input)
        ok = (source == DROP and dims == kept) or (source == KEEP and dims == list(range(len(domain))))
        return shape_form(sym, op.result, domain, rset) if ok else None
    if isinstance(op, L.ExpandOp):
        # Only an expand back onto the rows of the domain keeps the kernel's indexing.
        expanded = shape_form(sym, op.result, domain, rset)
        return expanded if form_of(op.input) in (FULL, KEEP) and expanded in (FULL, KEEP) else None
    if isinstance(op, (G.TakeAlongAxisOp, G.GatherOp)):
        ok = (form_of(op.input) == FULL and op.index not in forms
              and form_of(op.index) == KEEP and rset == {op.axis})
        return KEEP if ok else None
    return None


# -- the shared unit ------------------------------------------------------------------


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


class RowScheduler(SchedulerUnit):
    """What the row units share: acceptance, schedule, grid and emission. They differ in
    which row kernels they take: with or without a result flowing back onto full rows."""

    normalization: bool
    refusal: str

    def accepts(self, candidate: Candidate) -> Verdict:
        if (scan := refuse_scans(candidate)) is not None:
            return scan
        rows = row_verdict(candidate)
        if not rows.verdict.ok:
            return rows.verdict
        if rows.normalization != self.normalization:
            return Verdict(False, self.refusal)
        return dataclasses.replace(rows.verdict, scheduler=self.name)

    def choose(self, plan: KernelPlan, shapes: Sequence[tuple[int, ...]], arrays: dict | None,
               output_layout: dict) -> RowSchedule:
        domain_shape = shapes[0]
        reduced = set(plan.reduced_dims)
        rank = len(domain_shape)
        if rank and (rank - 1) not in reduced:
            return RowSchedule(128, block_per_row=False)
        row_len = math.prod(domain_shape[d] for d in reduced)
        if reduced and len(reduced) == rank and not self.normalization:
            return RowSchedule(SPLIT_BLOCK, True, split=True)
        threads = min(1024, max(32, _round_up(math.ceil(row_len / 8), 32)))
        iters = math.ceil(row_len / threads) if row_len else 1
        if iters > MAX_PERSISTENT_ITERS:
            return RowSchedule(threads, True, 0)
        if iters <= REGISTER_ITERS:
            return RowSchedule(threads, True, iters)
        return _shared_row_schedule(plan, threads, iters)

    def grid(self, plan: KernelPlan, schedule: RowSchedule, extents) -> tuple[int, int, int] | None:
        assert plan.domain is not None
        domain = extents.shape(plan.domain)
        rows = math.prod(e for d, e in enumerate(domain) if d not in plan.reduced_dims)
        if rows == 0:
            # No rows, but grid totals still exist (the identity; a mean's 0/0): one block writes them.
            return (1, 1, 1) if plan.grid_reductions else None
        if schedule.split:
            row_len = math.prod(domain)
            return max(1, min(math.ceil(row_len / (schedule.block * SPLIT_ELEMENTS_PER_THREAD)), SPLIT_GRID)), 1, 1
        if schedule.block_per_row:
            if not schedule.iters:
                return min(rows, MAX_GRID), 1, 1
            return min(rows, PERSISTENT_GRID * persistent_blocks_per_sm(plan, schedule)), 1, 1
        return max(1, min(math.ceil(rows / schedule.block), MAX_GRID)), 1, 1

    def emit(self, plan: KernelPlan, schedule: RowSchedule) -> KernelBody:
        access = _row_storage(plan, schedule)
        em = KernelEmitter(plan, schedule, access.reused if access else frozenset())
        shared_bytes = 0
        if access is not None and schedule.shared:
            em.row_storage = SharedRowStorage(access, schedule)
            shared_bytes = em.row_storage.bytes
        em.keep_invariants = schedule.invariants
        kernel = _RowKernel(em)
        kernel.emit()
        shared = [f"  __shared__ {t} {SMEM_NAME[t]}[{kernel.smem_words}];" for t in sorted(kernel.smem_types)]
        if kernel.grid_combined:
            shared += shared_declarations()
        if shared_bytes:
            shared.append(f"  FUSER_DYNAMIC_SHARED(double, {SharedRowStorage.BASE});")
        return KernelBody(em.text(), shared, tuple(em.params.values()), em.needs_sync, shared_bytes)


def persistent_blocks_per_sm(plan: KernelPlan, schedule: RowSchedule) -> int:
    """Blocks of a persistent row kernel per SM. A kernel that keeps row-invariant loads
    (weights, biases) across rows runs one block per SM: each block reads them once, so more
    blocks would read them more often. Otherwise as many blocks as the SM holds (threads,
    dynamic shared memory): one block of a few hundred threads per SM cannot keep enough loads
    in flight (measured on an H100: rows of 1,024 bf16 at 137 GB/s, 5% of a copy)."""
    access = _row_storage(plan, schedule)
    assert access is not None
    shared = SharedRowStorage(access, schedule).bytes if schedule.shared else 0
    if access.invariant and (not schedule.shared or schedule.invariants):
        return 1
    per_sm = min(MAX_BLOCKS_PER_SM, max(1, RESIDENT_THREADS_PER_SM // schedule.block))
    return min(per_sm, max(1, SHARED_PER_SM // shared)) if shared else per_sm


def _row_storage(plan: KernelPlan, schedule: RowSchedule) -> RowAccess | None:
    """What a persistent schedule keeps per thread (None: not persistent)."""
    if not schedule.iters:
        return None
    return plan.analysis.rows if schedule.keep == "values" else plan.analysis.rows_loads_only


def _element_bytes(keys) -> int:
    return max([4, *(_COMPUTE_BYTES[X.COMPUTE_TYPE[v.type.dtype]] for v, _ in keys)])


_COMPUTE_BYTES = {"double": 8, "float": 4, "long long": 8, "int": 4, "bool": 1,
                  "fuser_complex<float>": 8, "fuser_complex<double>": 16}


def _shared_row_schedule(plan: KernelPlan, threads: int, iters: int) -> RowSchedule:
    """Rows too long for registers (more than REGISTER_ITERS elements a thread): the kept values
    go to shared memory. Preference: keep computed values and weights; else recompute from the
    loads; else re-read the weights every row; else the row does not fit (re-read per phase)."""
    options = [(keep, invariants) for invariants in (True, False) for keep in ("values", "loads")]
    for keep, invariants in options:
        schedule = RowSchedule(threads, True, iters, shared=True, keep=keep, invariants=invariants)
        access = _row_storage(plan, schedule)
        assert access is not None
        if SharedRowStorage(access, schedule).bytes <= SHARED_ROW_BYTES:
            return schedule
    return RowSchedule(threads, True, 0)


class SharedRowStorage:
    """Where a shared-memory row schedule keeps each value: a slot of `iters * block` elements
    in dynamic shared memory; thread t's element k at k * block + t (consecutive threads,
    consecutive words: no bank conflicts, and no barrier, each thread reads what it wrote).
    Values whose phases do not overlap share a slot; weights have a slot each."""

    BASE = "fuser_row_smem"

    def __init__(self, access: RowAccess, schedule: RowSchedule):
        self.block = schedule.block
        self.element_bytes = _element_bytes([*access.kept, *access.invariant])
        self.slot_bytes = schedule.iters * schedule.block * self.element_bytes
        self.slot_of, slots = access.slots()
        self.invariant_slot = {key: slots + i for i, key in enumerate(access.invariant)}
        self.bytes = self.slot_bytes * (slots + (len(access.invariant) if schedule.invariants else 0))

    def declare(self, name: str, ctype: str, slot: int) -> str:
        offset = slot * self.slot_bytes
        return f"const auto {name} = FUSER_SHARED_VIEW({ctype}, {self.BASE}, {offset});"

    def element(self, name: str, slot_var: str) -> str:
        return f"{name}[{slot_var} * {self.block} + threadIdx.x]"


# -- emission --------------------------------------------------------------------------


def _accumulator_type(dtype: str) -> str:
    return "long long" if dtype in ("i32", "i64", "i1") else X.COMPUTE_TYPE[dtype]


def _accumulator(name: str, red: C.ReductionOp) -> Accumulator:
    src = red.input.type.dtype
    acc_t = _accumulator_type(src)
    return Accumulator(name, acc_t, red.op_kind, X.reduction_identity(red.op_kind, src if acc_t != "long long" else "i64"))


class _RowKernel:
    """Emits a row kernel: rows of the domain, phases, then the stores."""

    def __init__(self, em: KernelEmitter):
        self.em = em
        plan = em.plan
        assert plan.domain is not None
        self.domain = plan.domain
        self.rank = self.domain.type.rank
        self.reduced = list(plan.reduced_dims)
        self.kept = [d for d in range(self.rank) if d not in self.reduced]
        self.block_per_row = em.schedule.block_per_row
        self.split = em.schedule.split
        self.persistent = self.block_per_row and em.schedule.iters > 0
        self.smem_types: set[str] = set()
        self.smem_words = 64  # per warp: 32 slots for each of the (at most 2) values combined
        self.r: dict[int, Ix] = {}
        self.grid_accs = [_accumulator(f"gacc{j}", red) for j, red in enumerate(plan.grid_reductions)]
        self.grid_combined = False

    def full_idx(self, o: dict[int, Ix]) -> list[Ix]:
        return [o[d] if d in o else self.r[d] for d in range(self.rank)]

    def open_loop(self, phase: int) -> None:
        em = self.em
        if self.persistent:
            # Register arrays need constant indices (a full unroll); shared memory does not, and
            # a full unroll there only multiplies live address registers.
            em.line("#pragma unroll" if not em.schedule.shared else "#pragma unroll 4")
            em.open(f"for (int k = 0; k < {em.schedule.iters}; ++k)")
            em.line("const long long rl = threadIdx.x + (long long)k * blockDim.x;")
            em.open("if (rl < rlen)")
            em.s.loop = PhaseLoop(phase, "k", frozenset(self.reduced))
        elif self.split:
            em.open("for (long long rl = (long long)blockIdx.x * blockDim.x + threadIdx.x; rl < rlen; "
                    "rl += (long long)gridDim.x * blockDim.x)")
        elif self.block_per_row:
            em.open("for (long long rl = threadIdx.x; rl < rlen; rl += blockDim.x)")
        else:
            em.open("for (long long rl = 0; rl < rlen; ++rl)")
        self.r = em.unravel(self.domain, self.reduced, "rl", "r")

    def close_loop(self) -> None:
        em = self.em
        em.s.loop = None
        em.close()
        if self.persistent:
            em.close()

    def emit(self) -> None:
        em, plan = self.em, self.em.plan
        em.line(f"const long long rows = {em.numel(self.domain, self.kept)};")
        em.line(f"const long long rlen = {em.numel(self.domain, self.reduced)};")
        if self.split:
            self.emit_split()
            return
        if self.persistent:
            em.invariant_section = em.section()  # weights kept across the rows of a block
        for acc in self.grid_accs:
            em.line(f"{acc.ctype} {acc.name} = {acc.identity};")
        if self.block_per_row:
            em.open("for (long long row = blockIdx.x; row < rows; row += gridDim.x)")
        else:
            em.open("for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < rows; "
                    "row += (long long)gridDim.x * blockDim.x)")
        o = em.unravel(self.domain, self.kept, "row", "o")
        if self.persistent:
            em.buffer_section = em.section()  # the row's loads that later phases read again
        # Loads that depend on the row alone (a label, a per-row scale) are read once per row.
        em.hoist_here(allowed=set(self.kept), warp_broadcast=self.block_per_row)
        reductions = plan.row_reductions
        online = online_softmax_pairs(reductions) if not self.persistent else {}
        welford = welford_pairs(reductions, set(online) | set(online.values())) if not self.persistent else {}
        merged = set(online.values()) | {second for second, _ in welford.values()}
        for phase, red in enumerate(reductions):
            if red in online:
                self.online_phase(phase, red, online[red], o)
            elif red in welford:
                self.welford_phase(phase, red, *welford[red], o)
            elif red not in merged:
                self.phase(phase, red, o)
        self.store_full(len(reductions), o)
        self.store_row_outputs(o)
        em.hoist = None
        if em.invariant:
            em.line("fuser_first_row = false;")
            assert em.invariant_section is not None
            em.invariant_section.line("bool fuser_first_row = true;")
        em.close()
        if self.grid_accs:
            self.grid_combined = True
            emit_grid_combine(em, self.grid_accs, self.smem_types, self.store_grid_outputs)

    def emit_split(self) -> None:
        """One row, split over the grid: each phase folds the block's share of the row; the
        last block combines the partials, then writes the row outputs. (Only kernels whose
        reductions are independent of each other's results are split: the reduction unit's.)"""
        em, plan = self.em, self.em.plan
        em.hoist_here(allowed=set())
        accs = []
        for phase, red in enumerate(plan.row_reductions):
            acc = _accumulator(f"acc{phase}", red)
            em.line(f"{acc.ctype} {acc.name} = {acc.identity};")
            self.open_loop(phase)
            em.line(acc.combine(em.emit(red.input, self.full_idx({}))))
            self.close_loop()
            accs.append((red, acc))
        self.store_full(len(accs), {})
        em.hoist = None
        self.grid_combined = True

        def last_block() -> None:
            for red, acc in accs:
                self.result_register(red, acc.name)
            self.store_row_outputs({}, force_thread0=True)

        emit_grid_combine(em, [acc for _, acc in accs], self.smem_types, last_block)

    def store_full(self, phase: int, o: dict[int, Ix]) -> None:
        em, plan = self.em, self.em.plan
        full = [v for v in plan.outputs if plan.forms.get(v) == FULL]
        if full:
            self.open_loop(phase)
            for v in full:
                em.store(v, self.full_idx(o))
            self.close_loop()

    def store_row_outputs(self, o: dict[int, Ix], force_thread0: bool = False) -> None:
        """The row's outputs, and its values folded into the grid accumulators."""
        em, plan = self.em, self.em.plan
        rows = [v for v in plan.outputs if plan.forms.get(v) in (KEEP, DROP)]
        thread0 = self.block_per_row or force_thread0
        if thread0:
            em.hoist = None  # thread 0 alone stores the row outputs: nothing to share
        if not rows and not self.grid_accs:
            return
        if thread0:
            em.open("if (threadIdx.x == 0)")
        for v in rows:
            em.store(v, self.row_idx(v, o))
        for red, acc in zip(plan.grid_reductions, self.grid_accs):
            em.line(acc.combine(em.emit(red.input, self.row_idx(red.input, o))))
        if thread0:
            em.close()

    def row_idx(self, v: SSAValue, o: dict[int, Ix]) -> list[Ix]:
        if self.em.plan.forms.get(v, DROP if v.type.rank == len(self.kept) else KEEP) == KEEP:  # type: ignore[union-attr]
            return [o.get(d, ZERO) for d in range(self.rank)]
        return [o[d] for d in self.kept]

    def store_grid_outputs(self) -> None:
        """In the last block: the grid totals, and the outputs computed from them alone."""
        em, plan = self.em, self.em.plan
        for red, acc in zip(plan.grid_reductions, self.grid_accs):
            self.result_register(red, acc.name)
        outputs = [v for v in plan.outputs if plan.forms.get(v) == GRID]
        if not outputs:
            return
        em.open("if (threadIdx.x == 0)")
        for v in outputs:
            em.store(v, [ZERO] * v.type.rank)  # type: ignore[union-attr]
        em.close()

    def phase(self, phase: int, red: C.ReductionOp, o: dict[int, Ix]) -> None:
        em = self.em
        acc = _accumulator(f"acc{phase}", red)
        em.line(f"{acc.ctype} {acc.name} = {acc.identity};")
        self.reduce_row(phase, red.input, o, acc.ctype, acc.combine, acc.block_reduce())
        self.result_register(red, acc.name)

    def reduce_row(self, phase: int, root: SSAValue, o: dict[int, Ix], acc_t: str,
                   accumulate: Callable[[str], str], block_combine: str, after_loop: str = "") -> None:
        """One phase: every thread folds its elements of `root` into its accumulators (then
        runs `after_loop`), then (a block per row) the block combines them through shared memory."""
        em = self.em
        self.open_loop(phase)
        em.line(accumulate(em.emit(root, self.full_idx(o))))
        self.close_loop()
        if after_loop:
            em.line(after_loop)
        if self.block_per_row:
            self.smem_types.add(acc_t)
            em.line(block_combine)
            em.needs_sync = True

    def result_register(self, red: C.ReductionOp, acc: str) -> None:
        """The reduction's value for the rest of the row, rounded to its dtype."""
        dst = red.result.type.dtype
        result_t = X.COMPUTE_TYPE[dst]
        self.em.red_regs[red.result] = self.em.tmp(result_t, X.round_expr(f"({result_t}){acc}", dst), "red")

    def online_phase(self, phase: int, red_max: C.ReductionOp, red_sum: C.ReductionOp, o: dict[int, Ix]) -> None:
        """max(x) and sum(exp(x - max)) in ONE pass over the row (online normaliser): the running
        sum is rescaled whenever the running max grows. Used when the row does not fit in
        registers, so that log-sum-exp (cross-entropy) still reads its input once."""
        em = self.em
        t = _accumulator_type(red_max.input.type.dtype)
        m, s = f"acc{phase}m", f"acc{phase}s"
        em.line(f"{t} {m} = ({t})-INFINITY;")
        em.line(f"{t} {s} = ({t})0;")
        self.reduce_row(phase, red_max.input, o, t, lambda x: f"fuser_online_update({m}, {s}, ({t}){x});",
                        f"fuser_block_reduce_online({m}, {s}, {SMEM_NAME[t]});")
        self.result_register(red_max, m)
        self.result_register(red_sum, s)


    def welford_phase(self, phase: int, red_sum: C.ReductionOp, red_squares: C.ReductionOp, center: SSAValue,
                      o: dict[int, Ix]) -> None:
        """sum(x) and sum((x - c)^2) in ONE pass over the row (Welford), c a per-row value
        computed from sum(x) alone (a mean): sum(x) = n * mean, and sum((x - c)^2) =
        M2 + n * (mean - c)^2, which is exact whatever c is and M2 alone when c is the mean.
        Used when the row does not stay on chip, so var / var_mean / welford read x once."""
        em = self.em
        t = _accumulator_type(red_sum.input.type.dtype)
        n, mean, m2, shift = f"acc{phase}n", f"acc{phase}a", f"acc{phase}q", f"acc{phase}k"
        for name in (n, mean, m2, shift):
            em.line(f"{t} {name} = ({t})0;")
        self.smem_words = 96
        # Statistics of x - shift (a thread's first element; for the block merge thread 0's):
        # rounding then scales with the spread of the row, not with its magnitude.
        smem = SMEM_NAME[t]
        rebase = f"fuser_welford_common_shift({n}, {mean}, {shift}, {smem});" if self.block_per_row else ""
        self.reduce_row(phase, red_sum.input, o, t,
                        lambda x: f"fuser_welford_update({n}, {mean}, {m2}, {shift}, ({t}){x});",
                        f"fuser_block_reduce_welford({n}, {mean}, {m2}, {smem});", after_loop=rebase)
        em.line(f"{mean} += {shift};")
        self.result_register(red_sum, f"({mean} * {n})")
        c = em.emit(center, self.row_idx(center, o))
        deviation = em.tmp(t, f"({mean} - ({t}){c})", "dev")
        self.result_register(red_squares, f"({m2} + {n} * {deviation} * {deviation})")


def _is_max_result(value, red_max: C.ReductionOp) -> bool:
    """`value` is red_max's result, either kept (keepdim) or broadcast back over the reduced dims."""
    if value is red_max.result:
        return red_max.keepdim is not None
    op = value.owner
    return (isinstance(op, L.BroadcastOp) and op.input is red_max.result and red_max.keepdim is None
            and tuple(op.dims.get_values()) == red_max.reduced_dims)


def online_softmax_pairs(reductions: list[C.ReductionOp]) -> dict[C.ReductionOp, C.ReductionOp]:
    """max reductions M paired with a later sum S of exp(M.input - M) over the same dims."""
    pairs = {}
    for m in reductions:
        if m.op_kind != C.ReductionKind.MAX or m.input.type.dtype not in ("f32", "f64", "f16", "bf16"):
            continue
        for s in reductions:
            if s.op_kind != C.ReductionKind.SUM or s in pairs.values() or s.reduced_dims != m.reduced_dims:
                continue
            exp = s.input.owner
            if not (isinstance(exp, C.UnaryOp) and exp.op_kind == C.UnaryKind.EXP):
                continue
            sub = exp.input.owner
            if (isinstance(sub, C.BinaryOp) and sub.op_kind == C.BinaryKind.SUB and sub.lhs is m.input
                    and _is_max_result(sub.rhs, m) and exp.result.type.dtype == m.input.type.dtype):
                pairs[m] = s
                break
    return pairs


_ROW_VALUE_OPS = (*_ELEMENTWISE, L.BroadcastOp, L.SqueezeOp)


def _computed_from(value: SSAValue, root: SSAValue) -> bool:
    """`value` is computed from `root` and scalars alone, by elementwise ops, broadcasts and
    squeezes (a mean from a sum: sum / n, sum * (1 / n), broadcast back over the row)."""
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if v is root or v in seen or not isinstance(v.type, TensorType):
            continue
        seen.add(v)
        op = v.owner
        if not isinstance(op, _ROW_VALUE_OPS):
            return False
        stack += op.operands
    return True


def welford_pairs(reductions: list[C.ReductionOp], taken: set[C.ReductionOp]
                  ) -> dict[C.ReductionOp, tuple[C.ReductionOp, SSAValue]]:
    """sum reductions S of a float x paired with a later sum of (x - c) * (x - c) over the same
    dims, c computed from S alone (decompose-welford's var_sum, a layer-norm's variance):
    S -> (that reduction, c). Reductions in `taken` are already merged otherwise."""
    pairs: dict[C.ReductionOp, tuple[C.ReductionOp, SSAValue]] = {}
    used: set[C.ReductionOp] = set(taken)
    for s in reductions:
        if s in used or s.op_kind != C.ReductionKind.SUM or s.input.type.dtype not in ("f32", "f64"):
            continue
        for q in reductions:
            if q in used or q is s or q.op_kind != C.ReductionKind.SUM or q.reduced_dims != s.reduced_dims:
                continue
            square = q.input.owner
            if not (isinstance(square, C.BinaryOp) and square.op_kind == C.BinaryKind.MUL and square.lhs is square.rhs):
                continue
            deviation = square.lhs.owner
            if not (isinstance(deviation, C.BinaryOp) and deviation.op_kind == C.BinaryKind.SUB
                    and deviation.lhs is s.input and isinstance(deviation.rhs.type, TensorType)):
                continue
            if q.input.type.dtype == s.input.type.dtype and _computed_from(deviation.rhs, s.result):
                pairs[s] = (q, deviation.rhs)
                used |= {s, q}
                break
    return pairs
