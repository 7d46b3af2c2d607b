"""Emission of a column kernel: a row kernel whose innermost dim is kept (a thread per row),
reading only the schedule (rows/schedule.py: `row_threads`, `row_blocks`, `unroll`).

Such kernels reduce over the outer dims of their inputs: a bias's gradient is the sum of
[tokens, hidden] over the tokens, a norm's weight gradient the same of a product. With one
thread per row alone, GPT-2's hidden size of 768 is 768 threads for the whole GPU. Here a
block holds `columns` rows (consecutive threads on consecutive rows, so a warp's loads are
contiguous) and `row_threads` threads along the reduced dims of each; `row_blocks` blocks
(gridDim.y) share the reduced dims too:

    row = blockIdx.x * columns + tx            (the grid covers the rows: no grid-stride loop
                                                 when row_blocks > 1)
    per phase: acc over rl = blockIdx.y * step + k * row_threads + ty, in steps of `unroll`
               elements a thread, each step's loads issued before any is used (a staged loop)
               then the row's threads combine through shared memory (fuser_column_reduce)
    row_blocks > 1: each block writes its partials to the workspace; the last block of a
               column of blocks (an atomic count per blockIdx.x) combines them, then stores
    the row outputs: by the row's thread ty == 0

Phases are never merged here (each reduction its own pass, combined across threads): a
normalization's later phases read the earlier results, which every thread of the row gets
from the combine; such kernels keep row_blocks == 1.
"""

from __future__ import annotations

from fuser.lowering.codegen.emit_cuda import KernelEmitter
from fuser.lowering.codegen.index import ZERO, vector_lane
from fuser.lowering.codegen.kernel import DROP, FULL, KEEP
from fuser.lowering.schedulers.grid import FUNCTOR, LAST_BLOCK, SMEM_NAME, WIDE_SLOTS, Accumulator
from fuser.lowering.schedulers.rows.schedule import RowSchedule

TX = "fuser_tx"
"""The thread's row within its block."""
TY = "fuser_ty"
"""The thread's place along its row's reduced dims within the block."""
ROW_OK = "fuser_row_ok"
COLUMN_WORKSPACE = "column_workspace"
"""The Param kind of a split column kernel's workspace: a finished-block counter per
blockIdx.x, then per accumulator slot `columns` partials for every block (launch.py)."""


def column_workspace_words(slots: int, columns: int, grid: tuple[int, int, int]) -> int:
    """Words of a column kernel's workspace (its Param's `dim` is slots * columns)."""
    return grid[0] + slots * columns * grid[0] * grid[1]


class ColumnKernel:
    """Emits a column kernel (see the module docstring); `accumulator` and `result_register`
    are rows/emit.py's, shared with the kernels of a block per row."""

    def __init__(self, em: KernelEmitter, accumulator, result_register):
        self.em = em
        plan = em.plan
        self.schedule: RowSchedule = em.schedule
        assert plan.domain is not None and not self.schedule.block_per_row
        self.domain = plan.domain
        self.rank = self.domain.type.rank
        self.reduced = list(plan.reduced_dims)
        self.kept = [d for d in range(self.rank) if d not in self.reduced]
        self.accumulator = accumulator
        self.result_register = result_register
        self.smem_types: set[str] = set()
        self.columns = self.schedule.columns
        self.threads = self.schedule.row_threads
        self.split = self.schedule.row_blocks > 1
        self.vec = self.schedule.vec
        self.grid_combined = False
        self.o: dict = {}
        self.lanes: list = []
        """vec > 1: the kept innermost dim's index of each of the thread's rows (vector lanes)."""
        self.results: dict = {}
        """Each reduction's result register, a lane at a time."""

    @property
    def smem_words(self) -> int:
        return self.schedule.block

    def in_row(self, rl: str) -> str:
        return f"{ROW_OK} && {rl} < rlen"

    # -- loops ---------------------------------------------------------------------------
    def open_loop(self) -> None:
        """This thread's share of its row: steps of `unroll` elements, staged."""
        em, s = self.em, self.schedule
        step = self.threads * s.unroll
        em.open(f"for (long long rc = (long long)blockIdx.y * {step}LL; rc < rlen; rc += (long long)gridDim.y * {step}LL)")
        em.open_staged_loop("k", s.unroll, f"for (int k = 0; k < {s.unroll}; ++k)")
        em.line(f"const long long rl = rc + (long long)k * {self.threads} + {TY};")
        self.r = em.unravel(self.domain, self.reduced, "rl", "r")
        if self.vec > 1:
            em.use_vector_lanes(self.lanes)
        em.guard_staged(self.in_row("rl"))

    def close_loop(self) -> None:
        self.em.close_staged()
        self.em.close()
        self.em.end_vector_lanes()

    def lane_o(self, j: int) -> dict:
        """The kept dims' indices of the thread's j-th row."""
        if self.vec == 1:
            return self.o
        return {**self.o, self.rank - 1: self.lanes[j]}

    def idx(self, j: int = 0) -> list:
        o = self.lane_o(j)
        return [o[d] if d in o else self.r[d] for d in range(self.rank)]

    def lane(self, j: int) -> None:
        """The reductions' results are the j-th row's from here (each lane its own registers)."""
        for red, names in self.results.items():
            self.em.define_result(red.result, names[j])

    def row_idx(self, v, j: int = 0) -> list:
        o = self.lane_o(j)
        if self.em.plan.forms.get(v, DROP if v.type.rank == len(self.kept) else KEEP) == KEEP:
            return [o.get(d, ZERO) for d in range(self.rank)]
        return [o[d] for d in self.kept]

    def register(self, red, names: list[str]) -> None:
        """The reduction's result for the rest of the row, a register a lane (rounded to its dtype)."""
        lanes = []
        for name in names:
            self.result_register(red, name)
            lanes.append(self.em.red_regs[red.result])
        self.results[red] = lanes

    # -- the kernel ----------------------------------------------------------------------
    def emit(self) -> None:
        em, plan = self.em, self.em.plan
        em.line(f"const long long rows = {em.numel(self.domain, self.kept)};")
        em.line(f"const long long rlen = {em.numel(self.domain, self.reduced)};")
        em.line(f"const int {TX} = threadIdx.x % {self.columns};")
        em.line(f"const int {TY} = threadIdx.x / {self.columns};")
        # Block-uniform: every thread of a block runs as many iterations (the combine's barriers).
        # With vec, `row0` counts groups of vec rows (the kept innermost extent divides by vec).
        groups = "rows" if self.vec == 1 else f"(rows / {self.vec}LL)"
        em.open(f"for (long long row0 = (long long)blockIdx.x * {self.columns}; row0 < {groups}; "
                f"row0 += (long long)gridDim.x * {self.columns})")
        em.line(f"const long long row = row0 + {TX};" if self.vec == 1 else
                f"const long long row = (row0 + {TX}) * {self.vec}LL;")
        em.line(f"const bool {ROW_OK} = row < rows;")
        self.o = em.unravel(self.domain, self.kept, "row", "o")
        if self.vec > 1:
            last = self.rank - 1
            base = self.o[last].text
            self.lanes = [vector_lane(last, j, base if j == 0 else f"({base} + {j})") for j in range(self.vec)]
        em.hoist_here(allowed=set(self.kept), guard=ROW_OK)
        accs = []
        for phase, red in enumerate(plan.row_reductions):
            lane_accs = [self.accumulator(f"acc{phase}" if self.vec == 1 else f"acc{phase}_{j}", red)
                         for j in range(self.vec)]
            for acc in lane_accs:
                em.line(f"{acc.ctype} {acc.name} = {acc.identity};")
            self.open_loop()
            for j, acc in enumerate(lane_accs):  # lane 0 first: its load is the vector's
                self.lane(j)
                em.accumulate(acc.name, acc.combined(em.emit(red.input, self.idx(j))))
            self.close_loop()
            if self.threads > 1:
                em.require_sync()
                for acc in lane_accs:
                    self.smem_types.add(acc.ctype)
                    em.line(f"{acc.name} = fuser_column_reduce<{self.columns}, {self.threads}>({acc.name}, "
                            f"{FUNCTOR[acc.kind]}(), {SMEM_NAME[acc.ctype]});")
            if not self.split:
                self.register(red, [acc.name for acc in lane_accs])
            accs += [(red, acc) for acc in lane_accs]
        self.store_full()  # (split: no value stored on the rows reads a reduction)
        if self.split:
            self.combine_blocks(accs)
        else:
            self.store_row_outputs()
        em.stop_hoisting()
        em.close()

    def store_full(self) -> None:
        em, plan = self.em, self.em.plan
        full = [v for v in plan.outputs if plan.forms.get(v) == FULL]
        if not full:
            return
        assert self.vec == 1, "column_vector_width: no vectors with outputs along the rows"
        self.open_loop()
        for v in full:
            em.store(v, self.idx())
        self.close_loop()

    def store_row_outputs(self, by_first_thread: bool = True) -> None:
        """The row outputs, by the row's thread ty == 0 (`by_first_thread`: the caller has not
        already narrowed to it)."""
        em, plan = self.em, self.em.plan
        rows = [v for v in plan.outputs if plan.forms.get(v) in (KEEP, DROP)]
        if not rows:
            return
        em.stop_hoisting()
        em.open(f"if ({ROW_OK} && {TY} == 0)" if self.threads > 1 and by_first_thread else f"if ({ROW_OK})")
        # Lane 0 first: its loads are the vectors every lane reads (column_vector_width checked
        # them); every lane's values before any store, the stores a lane at a time.
        values = {}
        if self.vec > 1:
            em.use_vector_lanes(self.lanes)
        for j in range(self.vec):
            self.lane(j)
            for v in rows:
                values[j, v] = em.emit(v, self.row_idx(v, j))
        em.end_vector_lanes()
        for (j, v), value in values.items():
            em.store(v, self.row_idx(v, j), value)
        em.close()

    def combine_blocks(self, accs: list[tuple[object, Accumulator]]) -> None:
        """Each block's partials out; the last block of this blockIdx.x combines them all, then
        stores the row outputs and leaves its counter at 0 for the next launch."""
        em = self.em
        slots = sum(WIDE_SLOTS.get(acc.ctype, 1) for _, acc in accs)
        ws = em.param((COLUMN_WORKSPACE,), "unsigned long long* __restrict__", COLUMN_WORKSPACE, "ws",
                      dim=slots * self.columns)
        em.require_sync()
        self.grid_combined = True
        per_slot = f"(long long)gridDim.x * gridDim.y * {self.columns}"
        mine = f"((long long)blockIdx.y * gridDim.x + blockIdx.x) * {self.columns} + {TX}"
        parts, slot = [], 0
        for j, (_, acc) in enumerate(accs):
            part = f"part{j}"
            em.line(f"{acc.ctype}* {part} = reinterpret_cast<{acc.ctype}*>({ws} + gridDim.x + {slot}LL * {per_slot});")
            parts.append(part)
            slot += WIDE_SLOTS.get(acc.ctype, 1)
        if self.threads > 1:
            em.open(f"if ({TY} == 0)")
        for (_, acc), part in zip(accs, parts):
            em.line(f"fuser_st({part}, {mine}, {acc.name});")
        if self.threads > 1:
            em.close()
        # Release this block's partials before counting it; the last block acquires them all.
        em.line("__threadfence();")
        em.line("__syncthreads();")
        em.open("if (threadIdx.x == 0)")
        em.line(f"{LAST_BLOCK}[0] = atomicAdd({ws} + blockIdx.x, 1ULL) == (unsigned long long)gridDim.y - 1ULL;")
        em.line("__threadfence();")
        em.close()
        em.line("__syncthreads();")
        em.open(f"if ({LAST_BLOCK}[0])")
        em.open("if (threadIdx.x == 0)")
        em.line(f"fuser_st({ws}, blockIdx.x, 0ULL);")  # the next launch counts from 0
        em.close()
        if self.threads > 1:
            em.open(f"if ({TY} == 0)")  # a row's partials are combined by its thread ty == 0
        lanes: dict = {}  # each reduction's accumulators, a lane each (a slot each)
        for (red, acc), part in zip(accs, parts):
            em.line(f"{acc.name} = {acc.identity};")
            em.open("for (long long b = 0; b < gridDim.y; ++b)")
            em.line(acc.combine(f"fuser_ld({part}, (b * gridDim.x + blockIdx.x) * {self.columns} + {TX})"))
            em.close()
            lanes.setdefault(red, []).append(acc.name)
        for red, names in lanes.items():
            self.register(red, names)
        self.store_row_outputs(by_first_thread=False)
        if self.threads > 1:
            em.close()
        em.close()


__all__ = ["COLUMN_WORKSPACE", "ColumnKernel", "column_workspace_words"]
