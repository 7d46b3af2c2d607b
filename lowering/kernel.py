"""What segmentation produces: kernel plans (ops + global inputs/outputs + scheduler kind)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from xdsl.ir import Operation, SSAValue

from fuser_dialect.ops_compute import ReductionOp


class Scheduler(str, Enum):
    POINTWISE = "pointwise"
    REDUCTION = "reduction"
    INNER_PERSISTENT = "inner_persistent"

    def __str__(self) -> str:
        return self.value


@dataclass
class KernelPlan:
    """One kernel: `ops` in program order, reading `inputs` and writing `outputs` in global memory.

    For reduction kernels every reduction reduces `reduced_dims` of a tensor shaped like
    `domain` (the reference iteration domain); other values are row-consistent with it."""

    index: int
    ops: list[Operation]
    inputs: list[SSAValue] = field(default_factory=list)
    outputs: list[SSAValue] = field(default_factory=list)
    scheduler: Scheduler = Scheduler.POINTWISE
    split_reason: str = ""
    domain: SSAValue | None = None
    reduced_dims: tuple[int, ...] = ()
    groups: list[list[SSAValue]] = field(default_factory=list)
    """Pointwise kernels: outputs grouped by iteration domain (one blockIdx.z per group)."""
    forms: dict[SSAValue, str] = field(default_factory=dict)
    """Reduction kernels: per value, "full" / "keep" / "drop" relative to `domain`."""

    @property
    def name(self) -> str:
        return f"fuser_kernel_{self.index}_{self.scheduler.value}"

    def domain_values(self) -> list[SSAValue]:
        """One value per iteration domain: each group's first output, or the reduction domain."""
        if self.scheduler == Scheduler.POINTWISE:
            return [g[0] for g in self.groups]
        assert self.domain is not None
        return [self.domain]

    @property
    def reductions(self) -> list[ReductionOp]:
        return [op for op in self.ops if isinstance(op, ReductionOp)]
