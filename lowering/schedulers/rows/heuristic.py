"""The row heuristic: enumerate schedules of a row problem and keep the one the performance
model (lowering/schedulers/performance.py) predicts fastest on the device.

Candidates, per power-of-two count of lanes per row (quack, nvFuser and Inductor all scale the
threads of a row with its length; see docs/architecture.md), for each of what a persistent row
may keep (storage.KEEPS: with the row's other inputs prefetched, values, loads only):
- blocks: a row of 64 lanes or more is a block (up to 1024 threads); rows of up to 32 lanes
  share a block of 128 threads (several rows a warp below 32 lanes, TransformerEngine's layout);
- persistent in registers (a normalization: more than one pass over the row) when the kept
  values fit the register budget;
- persistent in shared memory when they fit the block's shared memory (with any lanes a row:
  each thread's share is its own);
- streaming, 1, 2 or 4 vectors a thread in flight per step.
Each is scored by predicted time on the device as schedules are planned for (`DeviceSpec.planning`:
a loaded DRAM's latency with margin, so that a schedule just at the bandwidth limit on paper
loses to one with more in flight); near-ties (within `TIE`)
go to the schedule that moves fewer DRAM bytes, then wastes fewer lanes, then keeps the row
closer (registers, shared memory, streamed), then keeps less, then uses fewer threads per row.
`__launch_bounds__` gets the blocks per SM that the registers of the estimate allow, with a margin.

The innermost dim kept (a thread per row, `column_schedule`): as nvFuser's outer reduction,
rows across a block's threads (up to a warp, consecutive threads on consecutive rows), the rest
of the block and, where nothing in the kernel reads the results, more blocks along the
reduced dims, until the grid fills the GPU twice over and no thread is left fewer than
COLUMN_MIN_STEPS steps of its row.
"""

from __future__ import annotations

import dataclasses
import math

from fuser.lowering.device import DeviceSpec
from fuser.lowering.schedulers.performance import Prediction, ctas_per_sm, predict
from fuser.lowering.schedulers.rows.problem import RowProblem, estimated_resources, grid_blocks, traffic
from fuser.lowering.schedulers.rows.schedule import RowSchedule
from fuser.lowering.schedulers.rows.storage import KEEPS, SharedRowStorage, kept_words, row_storage

LANES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
SMALL_ROW_BLOCK = 128
"""Threads of a block holding several rows (4 warps)."""
MAX_ITERS = 16
"""Vectors of its row a thread keeps at most (register arrays are fully unrolled)."""
REGISTER_BUDGET = 48
"""32-bit words of its row a thread may keep in registers (ptxas needs about twice that)."""
UNROLLS = (1, 2, 4)
SHARED_SPARE = 4096
"""Shared memory a block keeps beside a kept row (its reductions' partials, the driver's share)."""
LAUNCH_BOUND_MARGIN = 1.6
"""Registers ptxas may use over the estimate before `__launch_bounds__` makes it spill (the
estimate's worst under-estimate on the fitted schedules was 1.52x)."""
TIE = 0.02
SCORED_ROWS_PER_SM = 64
"""Row counts are scored in powers of two up to this many rows an SM, beyond which every count
scores alike: one kernel serves every large batch, and few rows still get many lanes a row."""


def candidates(plan, problem: RowProblem, device: DeviceSpec):
    nv = max(1, math.ceil(problem.row_len / problem.vec))
    multi_pass = any(problem.reread_bytes[1:])  # streaming would read the row more than once
    for lanes in LANES:
        if lanes > 1 and lanes // 2 >= nv:
            break  # half the lanes would already cover the row
        block = lanes if lanes >= 64 else SMALL_ROW_BLOCK
        if block > device.max_threads_per_block:
            continue
        base = RowSchedule(block, True, lanes=lanes if lanes < block else 0, vec=problem.vec)
        iters = math.ceil(nv / lanes)
        if multi_pass and iters <= MAX_ITERS:
            for keep in KEEPS:
                if kept_words(row_storage(plan, keep), iters, problem.vec) <= REGISTER_BUDGET:
                    yield dataclasses.replace(base, iters=iters, keep=keep)
            # Shared memory: each thread's share is its own, so rows of any lanes may keep it there.
            for keep in KEEPS:
                smem = dataclasses.replace(base, iters=iters, shared=True, keep=keep)
                if SharedRowStorage(row_storage(plan, keep), smem, plan.inputs).bytes <= device.shared_per_block_optin - SHARED_SPARE:
                    yield smem
        for unroll in UNROLLS:
            if unroll > 1 and unroll * lanes > nv:
                break
            yield dataclasses.replace(base, unroll=unroll)


MAX_GRID_X_UNSTRIDED = 2**31 - 1
"""gridDim.x's limit: a split column kernel's grid covers its rows (no grid-stride loop)."""
MAX_GRID_Y = 65535


COLUMN_ROWS = 32
"""Rows of a column kernel's block at most: a warp's loads of one element are one contiguous access."""
COLUMN_THREADS = (1, 2, 4, 8, 16, 32)
"""Threads along the reduced dims a column kernel's block may have."""
COLUMN_MORE_THREADS = (64, 128)
"""Threads along the reduced dims of a block of vectors of rows as wide as a line."""
COLUMN_LINE_BYTES = 128
"""A warp's row of loads: the block of a vectorised column kernel may be as narrow (8 threads of
16 bytes), its other threads along the reduced dims."""
COLUMN_UNROLLS = (1, 2, 4, 8)
COLUMN_MAX_STAGED = 64
"""Bytes a column kernel's thread stages per step at most (`unroll` x a phase's bytes an
element): beyond, ptxas interleaves the loads with their uses (counted in the SASS before the
loads were staged: 8 steps of 7 f32 inputs kept 11 KiB in flight per SM of the 40 planned).
With staged loads, 64 (2026-12-02, sm_90, the bias gradients of GPT-2's and Llama's backward):
GPT-2's largest 27 -> 32 KiB, predicted 157 -> 61 us; Llama's 37 -> 40 KiB, 123 -> 93 us."""
COLUMN_TARGET_IN_FLIGHT = 32 * 1024
"""Bytes of loads in flight per SM a column schedule should keep (nvFuser's target)."""
COLUMN_MIN_STEPS = 2
"""Steps of its row a thread walks at least when blocks split the rows (their partials and the
last block's combine are paid once per block)."""


def column_candidates(problem: RowProblem, device: DeviceSpec, splittable: bool):
    """Column schedules of `vec` rows a thread (the widest the call's arrays allow, and one)."""
    for vec in sorted({problem.vec, 1}, reverse=True):
        yield from _column_candidates(problem, device, splittable, vec)


def _column_candidates(problem: RowProblem, device: DeviceSpec, splittable: bool, vec: int):
    rows, row_len = max(1, math.ceil(problem.rows / vec)), max(1, problem.row_len)  # rows: of `vec` rows each
    widest = min(COLUMN_ROWS, 1 << (rows - 1).bit_length())
    # With vectors, also a block as wide in bytes as a line (8 threads of 16 bytes): as many
    # blocks across the rows as a row a thread has, more threads along them.
    line = min(widest, max(1, COLUMN_LINE_BYTES // (vec * problem.element_bytes))) if vec > 1 else widest
    for columns in sorted({widest, line}, reverse=True):
        yield from _column_widths(problem, device, splittable, vec, rows, row_len, columns)


def _column_widths(problem: RowProblem, device: DeviceSpec, splittable: bool, vec: int, rows: int, row_len: int,
                   columns: int):
    blocks_x = math.ceil(rows / columns)
    for threads in COLUMN_THREADS + (COLUMN_MORE_THREADS if vec > 1 else ()):
        if columns * threads > device.max_threads_per_block or (threads > 1 and columns * threads < 32):
            continue
        for unroll in COLUMN_UNROLLS:
            if threads * unroll > 2 * row_len and (threads, unroll) != (1, 1):
                continue
            if unroll > 1 and unroll * vec * max(problem.phase_bytes) > COLUMN_MAX_STAGED:
                continue
            base = RowSchedule(columns * threads, False, vec=vec, unroll=unroll, row_threads=threads)
            if threads > 1 or vec == 1:  # (a thread walking its row alone, no blocks along it, is
                yield base               # rows/emit.py's, a row a thread: the vec-1 pass yields it)
            if not splittable or blocks_x > MAX_GRID_X_UNSTRIDED:
                continue
            most = min(MAX_GRID_Y, row_len // (threads * unroll * COLUMN_MIN_STEPS))
            row_blocks = 2
            while row_blocks <= most:
                yield dataclasses.replace(base, row_blocks=row_blocks)
                row_blocks *= 2


def column_schedule(plan, problem: RowProblem, device: DeviceSpec, splittable: bool) -> RowSchedule:
    """The schedule of a thread per row (the innermost dim kept), as nvFuser's outer reduction:
    the row count of a block up to a warp (consecutive threads on consecutive rows), threads
    along the reduced dims, steps of `unroll` elements and, where nothing in the kernel reads
    the results (`splittable`), blocks along the reduced dims, scored by the model as planned
    (`DeviceSpec.planning`); near-ties go to more rows a thread (16-byte accesses), then fewer
    blocks along the rows, then fewer threads."""
    planning = device.planning()
    scored = []
    for schedule in column_candidates(problem, device, splittable):
        resources = estimated_resources(plan, problem, schedule)
        ctas = ctas_per_sm(planning, schedule.block, resources.registers, resources.shared_bytes)
        moved = traffic(problem, schedule, planning, ctas)
        grid = column_grid(problem.rows, schedule)
        prediction = predict(planning, grid[0] * grid[1], schedule.block, resources, moved)
        scored.append((prediction.seconds, prediction.in_flight_per_sm >= COLUMN_TARGET_IN_FLIGHT, schedule))
    # Schedules that keep the target in flight when some do (a GPU's latency is not the model's).
    if any(full for _, full, _ in scored):
        scored = [entry for entry in scored if entry[1]]
    best = min(seconds for seconds, _, _ in scored)
    near = [sch for seconds, _, sch in scored if seconds <= best * (1 + TIE)]
    # (wider accesses first: a quarter of the load instructions and address registers for the
    # same bytes, which the model does not see)
    chosen = min(near, key=lambda sch: (-sch.vec, sch.row_blocks, sch.row_threads, -sch.unroll))
    return dataclasses.replace(chosen, min_blocks=launch_bound_blocks(plan, problem, chosen, device))


def column_grid(rows: int, schedule: RowSchedule) -> tuple[int, int, int]:
    blocks = math.ceil(rows / (schedule.columns * schedule.vec))
    if schedule.row_blocks > 1:
        return blocks, schedule.row_blocks, 1
    return max(1, min(blocks, MAX_GRID_X_UNSTRIDED)), 1, 1


def scored_rows(rows: int, device: DeviceSpec) -> int:
    cap = SCORED_ROWS_PER_SM * device.sms
    return cap if rows >= cap else 1 << max(0, rows - 1).bit_length()


@dataclasses.dataclass(frozen=True)
class Scored:
    schedule: RowSchedule
    prediction: Prediction
    dram_bytes: int
    waste: float
    """Share of the lanes' vector slots past the row's end."""


def score(plan, problem: RowProblem, schedule: RowSchedule, device: DeviceSpec) -> Scored:
    device = device.planning()  # the latency with margin, not the fitted one (DeviceSpec.plan_latency_s)
    resources = estimated_resources(plan, problem, schedule)
    ctas = ctas_per_sm(device, schedule.block, resources.registers, resources.shared_bytes)
    nominal = dataclasses.replace(problem, rows=scored_rows(problem.rows, device))
    moved = traffic(nominal, schedule, device, ctas)
    prediction = predict(device, grid_blocks(nominal, schedule), schedule.block, resources, moved)
    nv = max(1, math.ceil(problem.row_len / problem.vec))
    per_thread = schedule.iters if schedule.persistent else schedule.unroll
    slots = schedule.row_lanes * per_thread
    waste = (math.ceil(nv / slots) * slots - nv) / (math.ceil(nv / slots) * slots)
    return Scored(schedule, prediction, moved.dram_bytes, waste)


def _preference(s: Scored) -> tuple:
    where = 0 if s.schedule.persistent and not s.schedule.shared else 1 if s.schedule.persistent else 2
    keeps = KEEPS.index(s.schedule.keep) if s.schedule.persistent else 0
    # Among near-equal schedules: less DRAM traffic, fewer idle lanes, the row kept closer,
    # less kept (loads only before values before prefetches), fewer lanes, more unroll.
    return (s.dram_bytes, round(s.waste, 2), where, -keeps, s.schedule.row_lanes, -s.schedule.unroll)


def plan_row_schedule(plan, problem: RowProblem, device: DeviceSpec) -> RowSchedule:
    scored = [score(plan, problem, c, device) for c in candidates(plan, problem, device)]
    best_time = min(s.prediction.seconds for s in scored)
    near = [s for s in scored if s.prediction.seconds <= best_time * (1 + TIE)]
    chosen = min(near, key=_preference)
    return dataclasses.replace(chosen.schedule, min_blocks=launch_bound_blocks(plan, problem, chosen.schedule, device))


def launch_bound_blocks(plan, problem: RowProblem, schedule: RowSchedule, device: DeviceSpec) -> int:
    """The blocks per SM to compile for: what the registers of the estimate with a margin
    (`LAUNCH_BOUND_MARGIN`) allow, so that ptxas is held near the planned occupancy without
    being pushed to spill where the estimate is low (0: no minimum, when that is 1 block)."""
    resources = estimated_resources(plan, problem, schedule)
    registers = min(device.max_registers_per_thread, math.ceil(resources.registers * LAUNCH_BOUND_MARGIN))
    ctas = ctas_per_sm(device, schedule.block, registers, resources.shared_bytes)
    return ctas if ctas > 1 else 0


def ranked(plan, problem: RowProblem, device: DeviceSpec) -> list[Scored]:
    """Every candidate with its score, fastest predicted first (the benchmark's sweep runs them)."""
    return sorted((score(plan, problem, c, device) for c in candidates(plan, problem, device)),
                  key=lambda s: (s.prediction.seconds, _preference(s)))


__all__ = ["Scored", "candidates", "column_grid", "column_schedule", "plan_row_schedule", "ranked", "score"]
