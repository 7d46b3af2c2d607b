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
Each is scored by predicted time (with DRAM latency taken 25 % longer than fitted, so that a
schedule just at the bandwidth limit on paper loses to one with margin); near-ties (within `TIE`)
go to the schedule that moves fewer DRAM bytes, then wastes fewer lanes, then keeps the row
closer (registers, shared memory, streamed), then keeps less, then uses fewer threads per row.
`__launch_bounds__` gets the blocks per SM that the registers of the estimate allow, with a margin.
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
LATENCY_MARGIN = 1.25
"""Schedules are scored as if DRAM latency were this much longer than fitted: a schedule just
at the bandwidth limit on paper has no margin on a GPU, so more bytes in flight wins a tie."""
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
                if SharedRowStorage(row_storage(plan, keep), smem).bytes <= device.shared_per_block_optin - SHARED_SPARE:
                    yield smem
        for unroll in UNROLLS:
            if unroll > 1 and unroll * lanes > nv:
                break
            yield dataclasses.replace(base, unroll=unroll)


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
    device = dataclasses.replace(device, dram_latency_s=device.dram_latency_s * LATENCY_MARGIN)
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


__all__ = ["Scored", "candidates", "plan_row_schedule", "ranked", "score"]
