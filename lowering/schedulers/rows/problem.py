"""A row kernel as the heuristic sees it: extents, bytes per element, phases, what can be kept;
and the traffic a schedule of it moves (for the performance model).

Everything here is read from the kernel analysis (lowering/codegen/analysis.py) and the call's
extents and arrays, never from C text."""

from __future__ import annotations

import math
from dataclasses import dataclass

from fuser_dialect.types import numpy_dtype
from fuser.lowering.codegen.analysis import vector_values
from fuser.lowering.codegen.index import depends_only_on, within_dims
from fuser.lowering.codegen.kernel import FULL, KernelPlan
from fuser.lowering.device import DeviceSpec
from fuser.lowering.schedulers.base import MAX_GRID
from fuser.lowering.schedulers import performance
from fuser.lowering.schedulers.performance import Resources, Traffic
from fuser.lowering.schedulers.rows.merges import online_softmax_pairs, welford_pairs
from fuser.lowering.schedulers.rows.schedule import RowSchedule
from fuser.lowering.schedulers.rows.storage import SharedRowStorage, kept_words, row_storage
from fuser.lowering.schedulers.vectorize import vector_width

L2_RESIDENT_FRACTION = 0.6
"""The share of L2 that holds the rows a streaming schedule re-reads (the rest is other data,
and L2 is split in two partitions): while the rows in process at once take at most that much,
every re-read hits; beyond, the hit rate falls as that share over the rows' bytes."""
BASE_REGISTERS = 24
"""Registers of a row kernel besides what it keeps or has in flight (indices, accumulators)."""
KEPT_REGISTER_FACTOR = 1.2
SHARED_UNROLL = 4
"""A shared-memory row's phase loops unroll this many vectors (rows/emit.py)."""
STAGE_WORDS = 48
"""Registers a register-persistent row's load stage fills at most: its vectors are loaded in
chunks of that many words (rows/emit.py stage_chunk), each chunk's loads issued together.
Counted in the SASS (2026-12-02, sm_90): at 32, a row reading three tensors (BERT's
embeddings + layer norm) staged 2 vectors a chunk and kept 28 KiB in flight per SM, RMSNorm's
backward 29; at 48 67 and 65, and no benchmark kernel fell below 32 KiB."""
SHUFFLE_REDUCTION_WEIGHT = 0.1
"""A reduction within a warp's group of lanes (shuffles only), as a share of a block reduction's
wait (barriers, shared memory; the device's `reduction_s`)."""
UNROLLED_BY_COMPILER = 4
"""Iterations of a thread's serial loop over a row (a thread per row) whose loads nvcc overlaps."""
SPLIT_BLOCK = 512
SPLIT_ELEMENTS_PER_THREAD = 8
SPLIT_BLOCKS_PER_SM = 2
"""A row split over the grid: at most 2 blocks per SM, each thread folding at least 8 elements
before the block and grid combine."""
SPLIT_UNROLL = 4
"""A split row's step: 4 vectors a thread, loaded together (its loads staged like a streamed
row's): 1,024 threads an SM x 64 bytes. One element a step kept 4 KiB in flight per SM."""


def _itemsize(v) -> int:
    return numpy_dtype(v.type.dtype).itemsize  # type: ignore[union-attr]


@dataclass(frozen=True)
class RowProblem:
    rows: int
    row_len: int
    vec: int
    """The widest vector every access along the row allows (1: scalar)."""
    phases: int
    """Passes over the row when every reduction is its own (a persistent schedule)."""
    merged_phases: int
    """Passes when max/sum pairs and Welford pairs merge (a streaming schedule)."""
    phase_bytes: tuple[int, ...]
    """Per merged phase: bytes per row element of the loads that vary along rows and the row."""
    reread_bytes: tuple[int, ...]
    """Per merged phase: of those, bytes an earlier phase already read (a streaming re-read)."""
    stream_bytes: int
    """Bytes per row element of the distinct inputs that vary along rows and the row."""
    invariant_bytes: int
    """Bytes per row element of loads along the row that every row shares (weights)."""
    out_bytes: int
    """Bytes per row element of the outputs shaped like the rows."""
    row_bytes: int
    """Bytes per row of the per-row loads and outputs (labels, a loss per row)."""
    element_bytes: int = 4
    """The widest element read or written along the row (a vector is `vec` of them)."""
    values: int = 1
    """Tensors read or written along the row (each a register per vector lane while in use)."""
    prefetch_bytes: int = 0
    """Bytes per row element a prefetching persistent schedule's first phase loads besides its
    own (the row's other inputs)."""


def row_vector_width(plan: KernelPlan, shape: tuple[int, ...], arrays: dict | None, output_layout: dict) -> int:
    """The widest access every load and store along the row allows for this call (1: scalar;
    also 1 without arrays to check, e.g. printing a kernel)."""
    loads = plan.analysis.row_loads
    rank = len(shape)
    if loads.vector_values is None or arrays is None or not rank or (rank - 1) not in plan.reduced_dims:
        return 1
    full = [v for v in plan.outputs if plan.forms.get(v) == FULL]
    return vector_width(loads.vector_values, full, shape[-1], arrays, output_layout, narrowest_bytes=4,
                        alignment=loads.vector_alignment)


def column_vector_width(plan: KernelPlan, shape: tuple[int, ...], arrays: dict | None, output_layout: dict) -> int:
    """A thread per row (the innermost dim kept): how many consecutive rows a thread takes, one
    access of each load along the innermost dim for all of them (1: a row a thread). Needs every
    load that reads the innermost dim to read it as its innermost index, arrays that allow the
    access, and no output along the rows (FULL: its stores would be a lane's each); the row
    outputs are stored a lane at a time."""
    loads = plan.analysis.row_loads
    rank = len(shape)
    if loads.vector_values is None or arrays is None or not rank or (rank - 1) in plan.reduced_dims:
        return 1
    if not loads.vector_values or any(plan.forms.get(v) == FULL for v in plan.outputs):
        return 1
    # The row outputs' loads are vector accesses too (every lane's, before any lane's stores).
    outputs = vector_values(plan.analysis.row_output_loads, rank - 1)
    if outputs is None:
        return 1
    values = tuple(dict.fromkeys((*loads.vector_values, *outputs[0])))
    return vector_width(values, [], shape[-1], arrays, output_layout, narrowest_bytes=4,
                        alignment=math.gcd(loads.vector_alignment, outputs[1]))


def row_problem(plan: KernelPlan, shape: tuple[int, ...], vec: int = 1) -> RowProblem:
    reduced = set(plan.reduced_dims)
    rank = len(shape)
    rows = math.prod(e for d, e in enumerate(shape) if d not in reduced)
    row_len = math.prod(shape[d] for d in reduced)
    loads = plan.analysis.row_loads
    full = [v for v in plan.outputs if plan.forms.get(v) == FULL]
    reductions = plan.row_reductions
    online = online_softmax_pairs(reductions)
    welford = welford_pairs(reductions, set(online) | set(online.values()))
    dropped = set(online.values()) | {second for second, _ in welford.values()}
    kept_dims = frozenset(d for d in range(rank) if d not in reduced)
    along = frozenset(reduced)
    phases, rereads, seen, stream, invariant = [], [], set(), set(), set()
    per_row: set = set()
    roots = [*(red for red in reductions), None]  # None: the store phase
    for phase_loads, root in zip(loads.phases, roots):
        if root in dropped:
            continue
        total = reread = 0
        for load in phase_loads:
            if within_dims(load.idx, kept_dims):
                per_row.add(load.value)
                continue
            if depends_only_on(load.idx, along):
                invariant.add(load.value)
                total += _itemsize(load.value)
                continue
            total += _itemsize(load.value)
            stream.add(load.value)
            if load.value in seen:
                reread += _itemsize(load.value)
        seen |= {load.value for load in phase_loads}
        phases.append(total)
        rereads.append(reread)
    if not full and phases and phases[-1] == 0:  # no store phase: nothing to count
        phases.pop(), rereads.pop()
    row_outputs = [v for v in plan.outputs if plan.forms.get(v) != FULL]
    return RowProblem(
        rows=rows, row_len=row_len, vec=vec,
        phases=len(reductions) + (1 if full else 0),
        merged_phases=max(1, len(phases)),
        phase_bytes=tuple(phases) or (0,), reread_bytes=tuple(rereads) or (0,),
        stream_bytes=sum(map(_itemsize, stream)), invariant_bytes=sum(map(_itemsize, invariant)),
        out_bytes=sum(map(_itemsize, full)),
        row_bytes=sum(map(_itemsize, per_row)) + sum(map(_itemsize, row_outputs)),
        element_bytes=max(map(_itemsize, [*stream, *invariant, *full]), default=4),
        values=len(stream) + len(invariant) + len(full),
        prefetch_bytes=sum(_itemsize(v) for v, _ in plan.analysis.rows_prefetch.prefetched))


def minimum_bytes(problem: RowProblem) -> int:
    """Each input read once, each output written once."""
    p = problem
    return p.rows * (p.row_len * (p.stream_bytes + p.out_bytes) + p.row_bytes) + p.row_len * p.invariant_bytes


def in_flight_per_thread(problem: RowProblem, schedule: RowSchedule) -> int:
    """Bytes of loads a thread issues in the first phase before it uses one: the phase's loads
    along the row, `vec` elements each, for every vector of the unrolled step (all of its
    share of the row when persistent in registers; 4 at a time into shared memory)."""
    if schedule.split:
        return (problem.phase_bytes[0] or 4) * schedule.vec * schedule.unroll
    if not schedule.block_per_row:  # a thread per row: `unroll` elements a step, of `vec` rows
        return (problem.phase_bytes[0] or 4) * schedule.unroll * schedule.vec
    per_vector = problem.phase_bytes[0] * schedule.vec
    if schedule.persistent and schedule.keep == "prefetch":
        per_vector += problem.prefetch_bytes * schedule.vec
    if schedule.persistent:
        return per_vector * (min(schedule.iters, SHARED_UNROLL) if schedule.shared else schedule.iters)
    return per_vector * schedule.unroll


def estimated_resources(plan: KernelPlan, problem: RowProblem, schedule: RowSchedule) -> Resources:
    """Registers and shared memory before ptxas says: a base, the loads in flight (held in
    registers until used), the kept share of the row, and a register per vector lane of each
    value the row streams (fitted to ptxas's reports on 328 candidate schedules of the
    benchmark kernels: docs/benchmarks.md#register-estimate)."""
    registers = BASE_REGISTERS + in_flight_per_thread(problem, schedule) // 4
    registers += schedule.vec * problem.values
    if schedule.block_per_row and not schedule.persistent:
        # Each further vector of an unrolled step keeps its values live too (about half of them).
        registers += (schedule.unroll - 1) * schedule.vec * problem.values // 2
    shared = 0
    if schedule.persistent:
        access = row_storage(plan, schedule.keep)
        if schedule.shared:
            shared = SharedRowStorage(access, schedule, plan.inputs).bytes
        else:
            registers += math.ceil(KEPT_REGISTER_FACTOR * kept_words(access, schedule.iters, schedule.vec))
    if schedule.block_per_row and schedule.row_lanes >= 64:
        shared += 3 * 32 * 8  # the block reduction's per-warp partials
    return Resources(min(registers, 255), shared)


def traffic(problem: RowProblem, schedule: RowSchedule, device: DeviceSpec, ctas_per_sm: int,
            least: int | None = None) -> Traffic:
    """What one launch moves: the minimum, plus a streaming schedule's re-reads of rows that
    no longer fit in L2 (the rows all SMs process at once, against the L2 share). The rows in
    process are counted at the most blocks an SM could hold whatever registers ptxas gives a
    thread (`ctas_per_sm` is the estimate's): fewer registers than planned must not turn
    planned L2 hits into DRAM traffic. `least`: the launch's tensors' bytes, when known (an input
    broadcast over some rows, a mask, is read from DRAM once, not once a row)."""
    least = minimum_bytes(problem) if least is None else least
    dram = least
    if schedule.block_per_row and not schedule.persistent and not schedule.split:
        # The rows in process at once; of their re-reads, the share L2 still holds hits.
        most = max(ctas_per_sm, performance.ctas_per_sm(device, schedule.block, 32, 0), 1)
        working_set = device.sms * most * schedule.rows_per_block * problem.row_len * problem.stream_bytes
        hit = min(1.0, L2_RESIDENT_FRACTION * device.l2_bytes / working_set) if working_set else 1.0
        dram += round((1 - hit) * problem.rows * problem.row_len * sum(problem.reread_bytes[1:]))
    if not schedule.block_per_row and schedule.row_blocks > 1:
        # Each block's partials out and back in (8 bytes a row a phase at most).
        blocks_x = math.ceil(problem.rows / (schedule.columns * schedule.vec))
        dram += 2 * 8 * schedule.columns * schedule.vec * blocks_x * schedule.row_blocks * problem.phases
    trips, barriers = dependent_waits(problem, schedule, device)
    return Traffic(dram, in_flight_per_thread(problem, schedule), problem.element_bytes * schedule.vec, least,
                   trips, barriers)


def dependent_waits(problem: RowProblem, schedule: RowSchedule, device: DeviceSpec) -> tuple[float, float]:
    """(DRAM waits, reductions) of one block over its life (performance.Traffic): per row it
    owns, a persistent row's one load (two steps a shared-memory row's 4-vector unroll... one
    per unrolled group) or a streamed row's steps in every pass, and a reduction per phase."""
    if schedule.split:
        blocks = SPLIT_BLOCKS_PER_SM * device.sms
        per_thread = problem.row_len / (schedule.block * blocks)
        return max(1.0, per_thread / (schedule.vec * schedule.unroll)), problem.phases
    if not schedule.block_per_row:
        # A thread per row: each phase's steps of `unroll` elements, then the combine across the
        # row's threads, for every tile of rows a block walks.
        tiles = math.ceil(problem.rows / (schedule.columns * schedule.vec * MAX_GRID)) if schedule.row_blocks == 1 else 1
        steps = math.ceil(problem.row_len / (schedule.row_threads * schedule.row_blocks * schedule.unroll))
        combines = problem.phases * (1 if schedule.row_threads > 1 else 0) + (1 if schedule.row_blocks > 1 else 0)
        return tiles * problem.phases * max(1, steps), tiles * combines
    rows_per_block = math.ceil(problem.rows / (grid_blocks(problem, schedule, MAX_GRID) * schedule.rows_per_block))
    # A block reduction waits on barriers and shared memory; a group's is a few shuffles.
    weight = 1.0 if schedule.rows_per_block == 1 else SHUFFLE_REDUCTION_WEIGHT
    if schedule.persistent:
        loads = math.ceil(schedule.iters / SHARED_UNROLL) if schedule.shared else 1
        return rows_per_block * loads, rows_per_block * problem.phases * weight
    steps = math.ceil(problem.row_len / (schedule.vec * schedule.row_lanes * schedule.unroll))
    return rows_per_block * problem.merged_phases * steps, rows_per_block * problem.merged_phases * weight


def grid_blocks(problem: RowProblem, schedule: RowSchedule, max_grid: int = MAX_GRID) -> int:
    return max(1, min(math.ceil(problem.rows / schedule.rows_per_block), max_grid))


__all__ = ["RowProblem", "column_vector_width", "estimated_resources", "grid_blocks", "in_flight_per_thread", "minimum_bytes",
           "row_problem", "row_vector_width", "traffic"]

