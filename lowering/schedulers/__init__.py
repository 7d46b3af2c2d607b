"""The scheduler units, in the order segmentation tries them (the first that accepts a group
of ops runs it). Adding a scheduler: one module here with a `SchedulerUnit` subclass, and its
line in `SCHEDULERS`."""

from __future__ import annotations

from xdsl.dialects import arith

from fuser_dialect import ops_resize as R
from fuser_dialect.ops_random import RandomOp
from fuser_dialect.types import TensorType
from fuser.lowering.device import DEFAULT as DEFAULT_DEVICE
from fuser.lowering.schedulers.base import Candidate, KernelBody, SchedulerUnit, Verdict
from fuser.lowering.schedulers.inner_persistent import InnerPersistentScheduler
from fuser.lowering.schedulers.pointwise import PointwiseSchedule, PointwiseScheduler
from fuser.lowering.schedulers.reduction import ReductionScheduler
from fuser.lowering.schedulers.rows import RowSchedule
from fuser.lowering.schedulers.scan import ScanSchedule, ScanScheduler

SCHEDULERS: tuple[SchedulerUnit, ...] = (
    ScanScheduler(),  # first: the others refuse a scan quoting its reason (classify keeps the last refusal)
    PointwiseScheduler(),
    ReductionScheduler(),
    InnerPersistentScheduler(),
)
_BY_NAME = {unit.name: unit for unit in SCHEDULERS}
SCHEDULE_TYPES = {cls.__name__: cls for cls in (PointwiseSchedule, RowSchedule, ScanSchedule)}
"""Every schedule type by name (a stored autotuning choice names its type)."""


def scheduler_named(name: str) -> SchedulerUnit:
    return _BY_NAME[name]


def classify(candidate: Candidate) -> Verdict:
    """The first unit's acceptance, else the last refusal (the most specific: later units
    take the more constrained kernels). A group whose kernel would take more parameter bytes
    than a launch may pass is refused whatever the unit (segmentation then splits it, the
    reason in the IR): NVRTC would refuse its kernel ("formal parameter space overflowed")."""
    refusal = Verdict(False, "no scheduler")
    for unit in SCHEDULERS:
        verdict = unit.accepts(candidate)
        if verdict.ok:
            return _within_parameter_space(candidate, verdict)
        refusal = verdict
    return refusal


def _within_parameter_space(candidate: Candidate, verdict: Verdict) -> Verdict:
    needed = estimated_parameter_bytes(candidate)
    if needed <= PARAMETER_BUDGET:
        return verdict
    return Verdict(False, f"its kernel would take about {needed:,} bytes of parameters, more than the "
                          f"{PARAMETER_BUDGET:,} this fusion's kernels may (a launch passes at most "
                          f"{DEFAULT_DEVICE.max_parameter_bytes:,})")


PARAMETER_BUDGET = DEFAULT_DEVICE.max_parameter_bytes - 1024
"""Parameter bytes segmentation lets one kernel take: the launch limit (the same on every sm_70+
GPU with CUDA 12.1+) less a margin for what `estimated_parameter_bytes` cannot see. render()
checks the exact figure (lowering/codegen/render.py)."""


def estimated_parameter_bytes(candidate: Candidate) -> int:
    """An upper estimate of the parameter bytes of the kernel of `candidate`: per tensor it reads
    or writes in global memory a pointer and a stride per dim; the extents of its outputs' dims;
    8 bytes per run-time scalar operand; per resize op the extents and starts of its operands;
    per random op its state pointer; the workspace and the index-check record."""
    members = set(candidate.ops)
    seen: set = set()
    total = 3 * 8  # a workspace, an index-check record, a pass number
    for op in candidate.ops:
        for v in op.operands:
            if v in seen:
                continue
            seen.add(v)
            if isinstance(v.type, TensorType):
                if v.owner not in members:
                    total += 8 * (1 + v.type.rank)
            elif not isinstance(v.owner, (arith.ConstantOp,)):
                total += 8
        if isinstance(op, (R.PadOp, R.SliceOp, R.CatOp)):
            total += 16 * sum(v.type.rank for v in op.operands if isinstance(v.type, TensorType))
        if isinstance(op, RandomOp):
            total += 8
    # Written: the outputs asked for, and any result read outside the group (what segmentation
    # writes in the end: counted from the start, so that its greedy search and its final check
    # agree on where a kernel ends).
    written = dict.fromkeys(candidate.outputs)
    for op in candidate.ops:
        for v in op.results:
            if isinstance(v.type, TensorType) and any(u.operation not in members for u in v.uses):
                written[v] = None
    shapes = set()
    for v in written:
        total += 8 * (1 + v.type.rank)
        shapes.add(tuple(candidate.sym.shape(v)))
    total += sum(8 * len(shape) for shape in shapes)
    return total


__all__ = ["PARAMETER_BUDGET", "SCHEDULERS", "SCHEDULE_TYPES", "Candidate", "KernelBody", "PointwiseSchedule",
           "RowSchedule", "SchedulerUnit", "Verdict", "classify", "estimated_parameter_bytes", "scheduler_named"]
