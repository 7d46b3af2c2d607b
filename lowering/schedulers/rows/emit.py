"""Emission of a row kernel: it only reads the schedule (rows/schedule.py).

Kernel shape, a block per row or `block // lanes` rows a block:
    for each row group of the block (a grid-stride loop over rows):
        row = the thread's row; row_ok = it exists (several rows a block)
        per-row loads (labels, scales): the row's lane 0 loads, a shuffle shares
        one phase per reduction (merged pairs share one): a loop over the thread's vectors of
        the row (persistent: a fully unrolled loop over `iters`; streaming: steps of
        `unroll` vectors), then the row's lanes combine (group shuffles, or the block)
        a loop storing the outputs shaped like the rows (vector stores)
        the row's lane 0 stores the per-row outputs
    grid totals, if any (lowering/schedulers/grid.py)
The innermost dim kept: a thread per row, a serial loop over the reduced elements. One row
over the grid (`split`): each block folds its share, the last block combines.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import SSAValue

from fuser_dialect import ops_compute as C
from fuser.lowering.codegen import cuda_exprs as X
from fuser.lowering.codegen.emit_cuda import KernelEmitter, PhaseLoop
from fuser_dialect.types import numpy_dtype
from fuser.lowering.codegen.index import ZERO, Ix, depends_only_on, vector_lane, within_dims
from fuser.lowering.codegen.kernel import DROP, FULL, GRID, KEEP
from fuser.lowering.schedulers.grid import FUNCTOR, SMEM_NAME, Accumulator, emit_grid_combine
from fuser.lowering.schedulers.rows.merges import online_softmax_pairs, welford_pairs
from fuser.lowering.schedulers.rows.problem import SHARED_UNROLL, STAGE_WORDS
from fuser.lowering.schedulers.rows.storage import row_storage

LANE = "fuser_lane"
"""The thread's lane within its row (threadIdx.x when a block is one row)."""
ROW_OK = "fuser_row_ok"


def accumulator_type(dtype: str) -> str:
    return "long long" if dtype in ("i32", "i64", "i1") else X.COMPUTE_TYPE[dtype]


def accumulator(name: str, red: C.ReductionOp) -> Accumulator:
    src = red.input.type.dtype
    acc_t = accumulator_type(src)
    return Accumulator(name, acc_t, red.op_kind, X.reduction_identity(red.op_kind, src if acc_t != "long long" else "i64"))


def result_register(em: KernelEmitter, red: C.ReductionOp, acc: str) -> None:
    """The reduction's value for the rest of the row, rounded to its dtype."""
    dst = red.result.type.dtype
    result_t = X.COMPUTE_TYPE[dst]
    em.define_result(red.result, em.tmp(result_t, X.round_expr(f"({result_t}){acc}", dst), "red"))


class RowKernel:
    """Emits a row kernel: rows of the domain, phases, then the stores."""

    def __init__(self, em: KernelEmitter):
        self.em = em
        plan = em.plan
        schedule = em.schedule
        assert plan.domain is not None
        self.domain = plan.domain
        self.rank = self.domain.type.rank
        self.reduced = list(plan.reduced_dims)
        self.kept = [d for d in range(self.rank) if d not in self.reduced]
        self.schedule = schedule
        self.block_per_row = schedule.block_per_row
        self.split = schedule.split
        self.persistent = schedule.persistent
        self.lanes = schedule.row_lanes
        self.grouped = self.block_per_row and schedule.rows_per_block > 1
        """Several rows a block: a row's lanes reduce by shuffles within their group."""
        self.vec = schedule.vec if self.block_per_row else 1
        self.smem_types: set[str] = set()
        self.smem_words = 64  # per warp: 32 slots for each of the (at most 2) values combined
        self.r: dict[int, Ix] = {}
        self.lane_idx: list[Ix] = []
        self.grid_accs = [accumulator(f"gacc{j}", red) for j, red in enumerate(plan.grid_reductions)]
        self.grid_combined = False
        self.o: dict[int, Ix] = {}
        self.prefetched = row_storage(plan, schedule.keep).prefetched if self.persistent else ()
        self.staged = False
        """The loop open now is a staged loop (open_loop)."""
        self._phase = 0
        """The phase whose loop is open (open_loop)."""
        self._chunked = False
        """The loop open now walks chunks of a persistent row (open_loop)."""

    # -- indices -------------------------------------------------------------------------
    def full_idx(self, o: dict[int, Ix], lane: int = 0) -> list[Ix]:
        idx = [o[d] if d in o else self.r[d] for d in range(self.rank)]
        if self.vec > 1:
            idx[self.rank - 1] = self.lane_idx[lane]
        return idx

    def row_idx(self, v: SSAValue, o: dict[int, Ix]) -> list[Ix]:
        if self.em.plan.forms.get(v, DROP if v.type.rank == len(self.kept) else KEEP) == KEEP:  # type: ignore[union-attr]
            return [o.get(d, ZERO) for d in range(self.rank)]
        return [o[d] for d in self.kept]

    def in_row(self) -> str:
        """The condition under which a thread works on its row (its row exists)."""
        return f"{ROW_OK} && " if self.grouped else ""

    # -- loops ---------------------------------------------------------------------------
    def loops(self, phase: int):
        """The loops over the thread's share of the row, the body emitted in each
        (`for _ in self.loops(phase): <body>`). A persistent row's vectors go in chunks whose
        loads are staged together; a last, shorter chunk is a loop of its own, so that no
        iteration of a chunk lies past the row's vectors (its buffer slots do not exist)."""
        segments = self.segments(phase)
        filled = set(self.em.filled)
        written = set()
        for start, count, chunk in segments:
            self.em.filled = set(filled)  # each segment fills its own vectors' buffer slots
            self.open_loop(phase, start, count, chunk)
            yield
            self.close_loop()
            written |= self.em.filled
        self.em.filled = written

    def segments(self, phase: int) -> list[tuple[int, int, int]]:
        """(first vector, vectors, vectors a chunk) of each loop of a persistent row; one
        segment (0, 0, 0) for the other kinds of loop."""
        s = self.schedule
        if not self.persistent:
            return [(0, 0, 0)]
        chunk = min(SHARED_UNROLL, s.iters) if s.shared else self.stage_chunk(phase)
        whole = s.iters // chunk * chunk
        return [(0, whole, chunk)] + ([(whole, s.iters - whole, s.iters - whole)] if whole < s.iters else [])

    def open_loop(self, phase: int, start: int = 0, count: int = 0, chunk: int = 0) -> None:
        """Opens one loop over the thread's share of the row. Its unrolled form (a persistent
        row's vectors, a streamed row's step of `unroll` vectors) is a staged loop: every load
        of the iteration is issued, predicated on the iteration's guard, before any is used
        (KernelEmitter.open_staged_loop), so a thread keeps the whole step in flight."""
        em, s = self.em, self.schedule
        self._phase = phase
        step = f"(long long)k * {self.lanes} + {LANE}"
        first = f"({step}) * {self.vec}" if self.vec > 1 else f"({step})"
        self.staged = self.persistent or self.block_per_row
        self._chunked = False
        guard = f"{self.in_row()}rl < rlen"
        if self.persistent and start == 0 and count == chunk == s.iters:
            # The whole row's vectors in one stage (register arrays need constant indices: a
            # full unroll).
            em.open_staged_loop("k", s.iters, f"for (int k = 0; k < {s.iters}; ++k)")
            em.line(f"const long long rl = {first};")
        elif self.persistent:
            # Chunks of the row's vectors: in shared memory (which needs no constant index: a
            # full unroll there only multiplies live address registers) or registers (unrolled
            # too, the stage of a long row's whole share would not fit beside it).
            self._chunked = True
            if not s.shared:
                em.line("#pragma unroll")
            em.open(f"for (int k0 = {start}; k0 < {start + count}; k0 += {chunk})")
            em.open_staged_loop("kj", chunk, f"for (int kj = 0; kj < {chunk}; ++kj)")
            em.line("const int k = k0 + kj;")
            em.line(f"const long long rl = {first};")
        elif self.split:
            # The grid's threads over the whole row, `unroll` vectors a thread a step: a warp's
            # loads of one vector are consecutive.
            span = s.unroll * self.vec
            em.open(f"for (long long rc = (long long)blockIdx.x * blockDim.x * {span}LL; rc < rlen; "
                    f"rc += (long long)gridDim.x * blockDim.x * {span}LL)")
            em.open_staged_loop("k", s.unroll, f"for (int k = 0; k < {s.unroll}; ++k)")
            step = "((long long)k * blockDim.x + threadIdx.x)"
            em.line(f"const long long rl = rc + {step}{f' * {self.vec}' if self.vec > 1 else ''};")
        elif self.block_per_row:
            em.open(f"for (long long rc = 0; rc < rlen; rc += {s.unroll * self.lanes * self.vec}LL)")
            em.open_staged_loop("k", s.unroll, f"for (int k = 0; k < {s.unroll}; ++k)")
            em.line(f"const long long rl = rc + {first};")
        else:
            em.open("for (long long rl = 0; rl < rlen; ++rl)")
        self.r = em.unravel(self.domain, self.reduced, "rl", "r")
        if self.vec > 1:
            last = self.rank - 1
            base = self.r[last].text
            self.lane_idx = [vector_lane(last, j, base if j == 0 else f"({base} + {j})") for j in range(self.vec)]
            em.use_vector_lanes(self.lane_idx)
        if self.staged:
            em.guard_staged(guard)
        if self.persistent:
            em.enter_phase_loop(PhaseLoop(phase, "k", frozenset(self.reduced)))
        if self.persistent and phase == 0:
            # The row's other inputs, loaded with the first phase's: all in flight at once.
            for value, _ in self.prefetched:
                for lane in range(self.vec):
                    em.prefetch(value, tuple(self.full_idx(self.o, lane)))

    def stage_chunk(self, phase: int) -> int:
        """Vectors of a register-persistent row whose loads one stage issues together: as many
        as keep the stage within STAGE_WORDS registers (the phase's loads along the row, and
        the first phase's prefetches)."""
        loads = self.em.plan.analysis.row_loads.phases
        words = 0
        if phase < len(loads):
            words = sum(numpy_dtype(load.value.type.dtype).itemsize for load in loads[phase]
                        if load.idx and not within_dims(load.idx, frozenset(self.kept)))
        if phase == 0:
            words += sum(numpy_dtype(v.type.dtype).itemsize for v, _ in self.prefetched)
        words = max(1, words * self.vec // 4)
        most = max(1, min(self.schedule.iters, STAGE_WORDS // words))
        # Chunks of one size (8 vectors at most 6 a chunk: 4 + 4, not 6 + 2): no shorter last
        # chunk whose loop ptxas schedules on its own.
        chunks = -(-self.schedule.iters // most)
        return -(-self.schedule.iters // chunks)

    def close_loop(self) -> None:
        em = self.em
        em.leave_phase_loop()
        if self.staged:
            em.close_staged()
            if not self.persistent or self._chunked:
                em.close()  # the streamed row's steps, or the chunks
        else:
            em.close()

    # -- the kernel ----------------------------------------------------------------------
    def emit(self) -> None:
        em, plan = self.em, self.em.plan
        em.line(f"const long long rows = {em.numel(self.domain, self.kept)};")
        em.line(f"const long long rlen = {em.numel(self.domain, self.reduced)};")
        if self.split:
            self.emit_split()
            return
        for acc in self.grid_accs:
            em.line(f"{acc.ctype} {acc.name} = {acc.identity};")
        if self.grouped:
            rows_per_block = self.schedule.rows_per_block
            em.line(f"const int {LANE} = threadIdx.x % {self.lanes};")
            em.open(f"for (long long row0 = (long long)blockIdx.x * {rows_per_block}; row0 < rows; "
                    f"row0 += (long long)gridDim.x * {rows_per_block})")
            em.line(f"const long long row = row0 + threadIdx.x / {self.lanes};")
            em.line(f"const bool {ROW_OK} = row < rows;")
        elif self.block_per_row:
            em.line(f"const int {LANE} = threadIdx.x;")
            em.open("for (long long row = blockIdx.x; row < rows; row += gridDim.x)")
        else:
            em.open("for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < rows; "
                    "row += (long long)gridDim.x * blockDim.x)")
        o = self.o = em.unravel(self.domain, self.kept, "row", "o")
        if self.persistent:
            em.open_row_buffers()  # the row's loads that later phases read again
        # Loads that depend on the row alone (a label, a per-row scale) are read once per row.
        group = min(self.lanes, 32) if self.block_per_row else 0
        em.hoist_here(allowed=set(self.kept), group=group, guard=ROW_OK if self.grouped else "")
        reductions = plan.row_reductions
        online = online_softmax_pairs(reductions) if self.schedule.merged else {}
        welford = welford_pairs(reductions, set(online) | set(online.values())) if self.schedule.merged else {}
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
        em.stop_hoisting()
        em.close()
        em.end_vector_lanes()
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
            acc = accumulator(f"acc{phase}", red)
            em.line(f"{acc.ctype} {acc.name} = {acc.identity};")
            for _ in self.loops(phase):
                for value in self.lane_values(red.input, {}):
                    em.accumulate(acc.name, acc.combined(value))
            accs.append((red, acc))
        self.store_full(len(accs), {})
        em.stop_hoisting()
        self.grid_combined = True

        def last_block() -> None:
            for red, acc in accs:
                self.result_register(red, acc.name)
            self.store_row_outputs({}, force_thread0=True)

        emit_grid_combine(em, [acc for _, acc in accs], self.smem_types, last_block)

    # -- stores ----------------------------------------------------------------------------
    def store_full(self, phase: int, o: dict[int, Ix]) -> None:
        em, plan = self.em, self.em.plan
        full = [v for v in plan.outputs if plan.forms.get(v) == FULL]
        if not full:
            return
        for _ in self.loops(phase):
            if self.vec > 1:
                staged = {v: em.stage(v, self.vec) for v in full}
                for j in range(self.vec):
                    for v in full:
                        em.stage_value(v, staged[v], j, self.full_idx(o, j))
                for v in full:
                    em.store_vector(v, staged[v], self.full_idx(o), self.vec)
            else:
                for v in full:
                    em.store(v, self.full_idx(o))

    def store_row_outputs(self, o: dict[int, Ix], force_thread0: bool = False) -> None:
        """The row's outputs, and its values folded into the grid accumulators, by the row's
        lane 0 (a thread per row: by every thread)."""
        em, plan = self.em, self.em.plan
        rows = [v for v in plan.outputs if plan.forms.get(v) in (KEEP, DROP)]
        lane0 = self.block_per_row or force_thread0
        if lane0:
            em.stop_hoisting()  # the row's lane 0 alone stores the row outputs: nothing to share
        if not rows and not self.grid_accs:
            return
        if lane0:
            em.open(f"if ({self.in_row()}{LANE} == 0)" if self.block_per_row and not force_thread0
                    else "if (threadIdx.x == 0)")
        for v in rows:
            em.store(v, self.row_idx(v, o))
        for red, acc in zip(plan.grid_reductions, self.grid_accs):
            em.line(acc.combine(em.emit(red.input, self.row_idx(red.input, o))))
        if lane0:
            em.close()

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

    # -- phases ----------------------------------------------------------------------------
    def lane_values(self, root: SSAValue, o: dict[int, Ix]) -> list[str]:
        """`root` at each vector lane of the current loop iteration (one value when scalar)."""
        return [self.em.emit(root, self.full_idx(o, j)) for j in range(self.vec)]

    def combine_row(self, acc_t: str, block: str, group: str) -> None:
        """The row's lanes combine their partials: by shuffles within the group when several
        rows share a block, else across the block (through shared memory)."""
        em = self.em
        em.require_sync()
        if self.grouped:
            em.line(group)
        else:
            self.smem_types.add(acc_t)
            em.line(block)

    def phase(self, phase: int, red: C.ReductionOp, o: dict[int, Ix]) -> None:
        em = self.em
        acc = accumulator(f"acc{phase}", red)
        em.line(f"{acc.ctype} {acc.name} = {acc.identity};")
        for _ in self.loops(phase):
            for value in self.lane_values(red.input, o):
                em.accumulate(acc.name, acc.combined(value))
        if self.block_per_row:
            group = f"{acc.name} = fuser_group_reduce<{min(self.lanes, 32)}>({acc.name}, {FUNCTOR[acc.kind]}());"
            self.combine_row(acc.ctype, acc.block_reduce(), group)
        self.result_register(red, acc.name)

    def result_register(self, red: C.ReductionOp, acc: str) -> None:
        result_register(self.em, red, acc)

    def fold_lanes(self, t: str, values: list[str], update: Callable[[str], str], vector_update: str) -> None:
        """One update of the thread's running statistics per element, or, with vector lanes,
        one for the whole vector (`vector_update`, a helper taking an array of the lanes)."""
        em = self.em
        if len(values) == 1:
            em.effect(update(values[0]))
            return
        em.s.counter += 1
        lanes = f"fl{em.s.counter}"
        em.line(f"const {t} {lanes}[{len(values)}] = {{{', '.join(f'({t}){v}' for v in values)}}};")
        em.effect(vector_update.format(lanes=lanes))

    def online_phase(self, phase: int, red_max: C.ReductionOp, red_sum: C.ReductionOp, o: dict[int, Ix]) -> None:
        """max(x) and sum(exp(x - max)) in ONE pass over the row (online normaliser): the running
        sum is rescaled whenever the running max grows (once per vector). Used when the row is
        streamed, so that log-sum-exp (cross-entropy) reads its input once."""
        em = self.em
        t = accumulator_type(red_max.input.type.dtype)
        m, s = f"acc{phase}m", f"acc{phase}s"
        em.line(f"{t} {m} = ({t})-INFINITY;")
        em.line(f"{t} {s} = ({t})0;")
        for _ in self.loops(phase):
            self.fold_lanes(t, self.lane_values(red_max.input, o), lambda x: f"fuser_online_update({m}, {s}, ({t}){x});",
                            f"fuser_online_update_vec({m}, {s}, {{lanes}});")
        if self.block_per_row:
            self.combine_row(t, f"fuser_block_reduce_online({m}, {s}, {SMEM_NAME[t]});",
                             f"fuser_group_reduce_online<{min(self.lanes, 32)}>({m}, {s});")
        self.result_register(red_max, m)
        self.result_register(red_sum, s)

    def welford_phase(self, phase: int, red_sum: C.ReductionOp, red_squares: C.ReductionOp, center: SSAValue,
                      o: dict[int, Ix]) -> None:
        """sum(x) and sum((x - c)^2) in ONE pass over the row (Welford), c a per-row value
        computed from sum(x) alone (a mean): sum(x) = n * mean, and sum((x - c)^2) =
        M2 + n * (mean - c)^2, which is exact whatever c is and M2 alone when c is the mean.
        Used when the row is streamed, so var / var_mean / welford read x once."""
        em = self.em
        t = accumulator_type(red_sum.input.type.dtype)
        n, mean, m2, shift = f"acc{phase}n", f"acc{phase}a", f"acc{phase}q", f"acc{phase}k"
        for name in (n, mean, m2, shift):
            em.line(f"{t} {name} = ({t})0;")
        self.smem_words = 96
        # Statistics of x - shift (a thread's first element; for the merge, the row's lane 0's):
        # rounding then scales with the spread of the row, not with its magnitude.
        smem = SMEM_NAME[t]
        for _ in self.loops(phase):
            self.fold_lanes(t, self.lane_values(red_sum.input, o),
                            lambda x: f"fuser_welford_update({n}, {mean}, {m2}, {shift}, ({t}){x});",
                            f"fuser_welford_update_vec({n}, {mean}, {m2}, {shift}, {{lanes}});")
        if self.block_per_row:
            width = min(self.lanes, 32)
            if self.grouped:
                em.line(f"fuser_group_common_shift<{width}>({n}, {mean}, {shift});")
            else:
                em.line(f"fuser_welford_common_shift({n}, {mean}, {shift}, {smem});")
            self.combine_row(t, f"fuser_block_reduce_welford({n}, {mean}, {m2}, {smem});",
                             f"fuser_group_reduce_welford<{width}>({n}, {mean}, {m2});")
        em.line(f"{mean} += {shift};")
        self.result_register(red_sum, f"({mean} * {n})")
        c = em.emit(center, self.row_idx(center, o))
        deviation = em.tmp(t, f"({mean} - ({t}){c})", "dev")
        self.result_register(red_squares, f"({m2} + {n} * {deviation} * {deviation})")


__all__ = ["RowKernel", "accumulator", "accumulator_type", "result_register"]
