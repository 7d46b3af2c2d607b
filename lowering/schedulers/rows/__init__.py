"""Row kernels, shared by the `reduction` and `inner_persistent` units, in nvFuser's manner
(reduction.h / reduction_heuristic.h / reduction_non_tma.cpp / reduction_utils.cpp):

- classify.py: segmentation's question, is a group of ops a row kernel (FULL / KEEP / DROP forms);
- problem.py: the row problem a call poses (extents, bytes, phases, vector width) and the
  traffic of a schedule of it;
- heuristic.py: candidate schedules scored by the performance model;
- schedule.py: the schedule, stating every decision;
- storage.py: where a persistent row is kept (registers, shared memory);
- merges.py: reductions merged into one pass (online softmax, Welford);
- emit.py: the kernel, reading only the schedule;
- columns.py: the kernel of a thread per row (the innermost dim kept), over threads and blocks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from fuser_dialect.types import DYNAMIC, numpy_dtype
from fuser.lowering.codegen.kernel import KernelPlan
from fuser.lowering.device import DEFAULT, DeviceSpec
from fuser.lowering.schedulers.base import MAX_GRID, Candidate, KernelBody, SchedulerUnit, Verdict
from fuser.lowering.schedulers.grid import SMEM_NAME, shared_declarations
from fuser.lowering.schedulers.performance import Resources, Traffic
from fuser.lowering.schedulers.rows.classify import RowVerdict, row_verdict, shape_form
from fuser.lowering.schedulers.rows.columns import ColumnKernel
from fuser.lowering.schedulers.rows.merges import online_softmax_pairs, welford_pairs
from fuser.lowering.schedulers.rows.emit import RowKernel, accumulator, result_register
from fuser.lowering.schedulers.rows.heuristic import (SCORED_ROWS_PER_SM, SHARED_SPARE, column_grid, column_schedule,
                                                     plan_row_schedule, ranked)
from fuser.lowering.schedulers.rows.problem import (SPLIT_BLOCK, SPLIT_BLOCKS_PER_SM, SPLIT_ELEMENTS_PER_THREAD, SPLIT_UNROLL,
                                                     RowProblem, column_vector_width,
                                                   estimated_resources, row_problem, row_vector_width, traffic)
from fuser.lowering.schedulers.rows.schedule import RowSchedule
from fuser.lowering.schedulers.rows.storage import SharedRowStorage, row_storage
from fuser.lowering.codegen.emit_cuda import EmitOptions, KernelEmitter
from fuser.lowering.schedulers.scan import refuse_scans


SERIAL_COLUMN_BLOCK = 128
"""A thread per row walking it alone (rows/emit.py): a kernel with grid totals or merged pairs."""

MIN_PLANNED_ROW = 1024
"""A dynamic row length is planned for as the next power of two from this up: one schedule, one
kernel, for every length in the bucket (a persistent one holds the bucket's longest row)."""


def planned_problem(plan: KernelPlan, problem: RowProblem, device: DeviceSpec) -> RowProblem:
    """The problem the heuristic plans for: extents the fusion leaves dynamic (`?`) are not taken
    as they are in this call, so that other calls reuse the kernel. Dynamic rows count as many
    (every batch size alike); a dynamic row length is bucketed (MIN_PLANNED_ROW)."""
    assert plan.domain is not None
    dynamic = [e == DYNAMIC for e in plan.domain.type.shape]  # type: ignore[union-attr]
    reduced = set(plan.reduced_dims)
    rows, row_len = problem.rows, problem.row_len
    if any(dynamic[d] for d in range(len(dynamic)) if d not in reduced):
        rows = max(rows, SCORED_ROWS_PER_SM * device.sms)
    if any(dynamic[d] for d in reduced):
        row_len = max(MIN_PLANNED_ROW, 1 << max(0, row_len - 1).bit_length())
    return dataclasses.replace(problem, rows=rows, row_len=row_len)


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
               output_layout: dict, device: DeviceSpec = DEFAULT) -> RowSchedule:
        shape = shapes[0]
        reduced = set(plan.reduced_dims)
        rank = len(shape)
        if rank and (rank - 1) not in reduced:
            reductions = plan.row_reductions
            if plan.grid_reductions or online_softmax_pairs(reductions) or welford_pairs(reductions, set()):
                # One thread a row walks it alone: its grid totals, one pass for a merged pair.
                return RowSchedule(SERIAL_COLUMN_BLOCK, block_per_row=False)
            vec = column_vector_width(plan, shape, arrays, output_layout)
            return column_schedule(plan, planned_problem(plan, row_problem(plan, shape, vec), device), device,
                                   splittable=not self.normalization)
        vec = row_vector_width(plan, shape, arrays, output_layout)
        if reduced and len(reduced) == rank and not self.normalization:
            return RowSchedule(SPLIT_BLOCK, True, split=True, vec=vec, unroll=SPLIT_UNROLL)
        return plan_row_schedule(plan, planned_problem(plan, row_problem(plan, shape, vec), device), device)

    def check_schedule(self, plan: KernelPlan, schedule, shapes: Sequence[tuple[int, ...]], arrays: dict | None,
                       output_layout: dict, device: DeviceSpec = DEFAULT) -> None:
        super().check_schedule(plan, schedule, shapes, arrays, output_layout, device)
        natural = self.choose(plan, shapes, None, output_layout, device)
        shape = shapes[0]

        def refuse(why: str) -> None:
            raise ValueError(f"override_schedule: kernel {plan.index} ({self.name}) cannot run "
                             f"{schedule.describe()} at extents {list(shape)}: {why}")

        if (schedule.block_per_row, schedule.split) != (natural.block_per_row, natural.split):
            refuse("the reduced dims decide between a block per row, a thread per row and a split row")
        if schedule.block % 32 or not 0 < schedule.block <= device.max_threads_per_block:
            refuse(f"the block must be a multiple of 32 up to {device.max_threads_per_block} threads")
        lanes = schedule.row_lanes
        if lanes & (lanes - 1) or schedule.block % lanes or (schedule.rows_per_block > 1 and lanes > 32):
            refuse("lanes per row must be a power of two dividing the block, at most 32 when rows share a block")
        widest = (row_vector_width if natural.block_per_row else column_vector_width)(plan, shape, arrays, output_layout)
        if schedule.vec > 1 and (schedule.vec & (schedule.vec - 1) or widest % schedule.vec):
            refuse(f"the arrays allow vectors of {widest} elements")
        if schedule.vec > 1 and not schedule.block_per_row and schedule.merged:
            refuse("a thread walking its row alone (row_threads and row_blocks 1) takes one row")
        if schedule.unroll < 1 or schedule.iters < 0:
            refuse("unroll must be at least 1 and iters not negative")
        threads = schedule.row_threads
        if threads < 1 or threads & (threads - 1) or schedule.block % threads or schedule.row_blocks < 1:
            refuse("row_threads must be a power of two dividing the block, row_blocks at least 1")
        if schedule.block_per_row and (threads > 1 or schedule.row_blocks > 1):
            refuse("row_threads and row_blocks are a thread per row's (the innermost dim kept)")
        if schedule.row_blocks > 1 and (self.normalization or plan.grid_reductions):
            refuse("blocks along the rows combine only results nothing else in the kernel reads")
        row_len = math.prod(shape[d] for d in plan.reduced_dims)
        if schedule.persistent and schedule.iters * lanes * schedule.vec < row_len:
            refuse(f"a persistent row holds {schedule.iters * lanes * schedule.vec} elements, the row has {row_len}")
        if schedule.shared and not schedule.persistent:
            refuse("a row in shared memory is a persistent schedule (iters > 0)")
        if schedule.shared and SharedRowStorage(row_storage(plan, schedule.keep), schedule, plan.inputs).bytes + SHARED_SPARE > \
                device.shared_per_block_optin:
            # (the kept row, beside the static partials of the reductions: SHARED_SPARE)
            refuse(f"the row needs more shared memory than a block may have ({device.shared_per_block_optin} B)")

    def grid(self, plan: KernelPlan, schedule: RowSchedule, extents, device: DeviceSpec = DEFAULT
             ) -> tuple[int, int, int] | None:
        assert plan.domain is not None
        domain = extents.shape(plan.domain)
        rows = math.prod(e for d, e in enumerate(domain) if d not in plan.reduced_dims)
        if rows == 0:
            # No rows, but grid totals still exist (the identity; a mean's 0/0): one block writes them.
            return (1, 1, 1) if plan.grid_reductions else None
        if schedule.split:
            row_len = math.prod(domain)
            blocks = math.ceil(row_len / (schedule.block * max(SPLIT_ELEMENTS_PER_THREAD, schedule.vec * schedule.unroll)))
            return max(1, min(blocks, SPLIT_BLOCKS_PER_SM * device.sms)), 1, 1
        if schedule.block_per_row:
            return min(math.ceil(rows / schedule.rows_per_block), MAX_GRID), 1, 1
        return column_grid(rows, schedule)

    def emit(self, plan: KernelPlan, schedule: RowSchedule, options: EmitOptions = EmitOptions()) -> KernelBody:
        access = row_storage(plan, schedule.keep) if schedule.persistent else None
        storage = SharedRowStorage(access, schedule, plan.inputs) if access is not None and schedule.shared else None
        em = KernelEmitter(plan, schedule, access.reused if access else frozenset(), options, storage)
        shared_bytes = storage.bytes if storage is not None else 0
        if schedule.block_per_row or schedule.split or schedule.merged:
            kernel = RowKernel(em)
        else:
            kernel = ColumnKernel(em, accumulator, lambda red, acc: result_register(em, red, acc))
        kernel.emit()
        shared = [f"  __shared__ {t} {SMEM_NAME[t]}[{kernel.smem_words}];" for t in sorted(kernel.smem_types)]
        if kernel.grid_combined:
            shared += shared_declarations()
        if shared_bytes:
            shared.append(f"  FUSER_DYNAMIC_SHARED(double, {SharedRowStorage.BASE});")
        # Always a minimum of blocks per SM: given none, ptxas picks a register target of its own
        # (seen: 64 registers and a 16-byte spill for a 512-thread softmax that needs 80 at 1 block).
        return KernelBody(em.text(), shared, tuple(em.params.values()), em.needs_sync, shared_bytes,
                          max(1, schedule.min_blocks))

    def alternatives(self, plan: KernelPlan, schedule: RowSchedule, extents, arrays: dict | None,
                     device: DeviceSpec) -> list[RowSchedule]:
        """The schedules the performance model ranks next after this one (other lanes, storage,
        unroll), each valid for this call."""
        if not schedule.block_per_row or schedule.split:
            return []
        assert plan.domain is not None
        shape = extents.shape(plan.domain)
        problem = planned_problem(plan, row_problem(plan, shape, schedule.vec), device)
        unbound = dataclasses.replace(schedule, min_blocks=0)
        return [s.schedule for s in ranked(plan, problem, device)
                if dataclasses.replace(s.schedule, min_blocks=0) != unbound]

    def traffic(self, plan: KernelPlan, schedule: RowSchedule, extents, device: DeviceSpec, ctas_per_sm: int) -> Traffic:
        assert plan.domain is not None
        tensors = sum(math.prod(extents.shape(v)) * numpy_dtype(v.type.dtype).itemsize  # type: ignore[union-attr]
                      for v in (*plan.inputs, *plan.outputs))
        return traffic(row_problem(plan, extents.shape(plan.domain), schedule.vec), schedule, device, ctas_per_sm,
                       least=tensors)

    def estimated_resources(self, plan: KernelPlan, schedule: RowSchedule, extents) -> Resources:
        assert plan.domain is not None
        return estimated_resources(plan, row_problem(plan, extents.shape(plan.domain), schedule.vec), schedule)


__all__ = ["RowScheduler", "RowSchedule", "RowVerdict", "SharedRowStorage", "row_verdict", "shape_form"]
