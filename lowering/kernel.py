"""What segmentation produces: kernel plans (ops + global inputs/outputs + the scheduler that
runs them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from xdsl.ir import Operation, SSAValue

from fuser_dialect.ops_compute import ReductionOp

if TYPE_CHECKING:
    from fuser.lowering.analysis import KernelAnalysis
    from fuser.lowering.schedulers.base import SchedulerUnit

FULL, KEEP, DROP = "full", "keep", "drop"
"""Row kernels: how a value lies relative to the reduction domain D with reduced dims R —
shaped like D, like D with R broadcast, or like D without R."""


@dataclass(eq=False)
class KernelPlan:
    """One kernel: `ops` in program order, reading `inputs` and writing `outputs` in global memory.

    For row kernels every reduction reduces `reduced_dims` of a tensor shaped like
    `domain` (the reference iteration domain); other values are row-consistent with it."""

    index: int
    ops: list[Operation]
    scheduler: str
    """The name of the scheduler unit (lowering/schedulers/) that runs this kernel."""
    inputs: list[SSAValue] = field(default_factory=list)
    outputs: list[SSAValue] = field(default_factory=list)
    split_reason: str = ""
    domain: SSAValue | None = None
    reduced_dims: tuple[int, ...] = ()
    groups: list[list[SSAValue]] = field(default_factory=list)
    """Pointwise kernels: outputs grouped by iteration domain (one blockIdx.z per group)."""
    forms: dict[SSAValue, str] = field(default_factory=dict)
    """Row kernels: per value, FULL / KEEP / DROP relative to `domain`."""

    @property
    def name(self) -> str:
        return f"fuser_kernel_{self.index}_{self.scheduler}"

    @property
    def unit(self) -> SchedulerUnit:
        from fuser.lowering.schedulers import scheduler_named

        return scheduler_named(self.scheduler)

    def domain_values(self) -> list[SSAValue]:
        """One value per iteration domain: each group's first output, or the reduction domain."""
        if self.domain is None:
            return [g[0] for g in self.groups]
        return [self.domain]

    @property
    def reductions(self) -> list[ReductionOp]:
        return [op for op in self.ops if isinstance(op, ReductionOp)]

    @cached_property
    def analysis(self) -> KernelAnalysis:
        """Which loads the kernel makes and with which indices (computed once, before scheduling)."""
        from fuser.lowering.analysis import KernelAnalysis

        return KernelAnalysis(self)
