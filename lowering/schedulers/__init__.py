"""The scheduler units, in the order segmentation tries them (the first that accepts a group
of ops runs it). Adding a scheduler: one module here with a `SchedulerUnit` subclass, and its
line in `SCHEDULERS`."""

from __future__ import annotations

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
    take the more constrained kernels)."""
    refusal = Verdict(False, "no scheduler")
    for unit in SCHEDULERS:
        verdict = unit.accepts(candidate)
        if verdict.ok:
            return verdict
        refusal = verdict
    return refusal


__all__ = ["SCHEDULERS", "SCHEDULE_TYPES", "Candidate", "KernelBody", "PointwiseSchedule", "RowSchedule",
           "SchedulerUnit", "Verdict", "classify", "scheduler_named"]
