"""What segmentation produces: kernel plans (ops + global inputs/outputs + the scheduler that
runs them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from xdsl.ir import Operation, SSAValue

from fuser_dialect.ops_compute import ReductionOp

if TYPE_CHECKING:
    from fuser.lowering.codegen.analysis import KernelAnalysis
    from fuser.lowering.schedulers.base import SchedulerUnit

FULL, KEEP, DROP, GRID = "full", "keep", "drop", "grid"
"""Row kernels: how a value lies relative to the reduction domain D with reduced dims R —
shaped like D, like D with R broadcast, or like D without R; GRID: a reduction over all the
rows (of a per-row value) and what is computed from it alone, known once every block is done."""


@dataclass(eq=False)
class KernelPlan:
    """One kernel: `ops` in program order, reading `inputs` and writing `outputs` in global memory.

    For row kernels every reduction reduces `reduced_dims` of a tensor shaped like
    `domain` (the reference iteration domain); other values are row-consistent with it."""

    index: int
    ops: list[Operation]
    unit: SchedulerUnit
    """The scheduler unit (lowering/schedulers/) that chooses this kernel's schedule and emits
    its body (segmentation sets it; codegen only calls it, so it imports no scheduler)."""
    inputs: list[SSAValue] = field(default_factory=list)
    outputs: list[SSAValue] = field(default_factory=list)
    split_reason: str = ""
    domain: SSAValue | None = None
    reduced_dims: tuple[int, ...] = ()
    groups: list[list[SSAValue]] = field(default_factory=list)
    """Pointwise kernels: outputs grouped by iteration domain (one blockIdx.z per group)."""
    forms: dict[SSAValue, str] = field(default_factory=dict)
    """Row kernels: per value, FULL / KEEP / DROP relative to `domain`."""

    def __post_init__(self) -> None:
        # A kernel that writes nothing has an empty grid or body; segmentation never plans one.
        if not self.outputs or (self.domain is None and not self.groups):
            raise ValueError(
                f"kernel plan {self.index} ({self.scheduler}, {len(self.ops)} ops) writes no output: "
                "a kernel with nothing to compute must not be planned"
            )

    @property
    def name(self) -> str:
        return f"fuser_kernel_{self.index}_{self.scheduler}"

    @property
    def scheduler(self) -> str:
        """The unit's name: "pointwise", "reduction", "inner_persistent" or "scan"."""
        return self.unit.name

    def domain_values(self) -> list[SSAValue]:
        """One value per iteration domain: each group's first output, or the reduction domain."""
        if self.domain is None:
            return [g[0] for g in self.groups]
        return [self.domain]

    @property
    def reductions(self) -> list[ReductionOp]:
        return [op for op in self.ops if isinstance(op, ReductionOp)]

    @property
    def row_reductions(self) -> list[ReductionOp]:
        """The reductions of `reduced_dims` (one phase each), without the grid reductions."""
        return [op for op in self.reductions if self.forms.get(op.result) != GRID]

    @property
    def grid_reductions(self) -> list[ReductionOp]:
        """Reductions over all rows of a per-row value: every block folds its rows, the last
        block to finish combines the blocks' partials."""
        return [op for op in self.reductions if self.forms.get(op.result) == GRID]

    @cached_property
    def analysis(self) -> KernelAnalysis:
        """Which loads the kernel makes and with which indices (computed once, before scheduling)."""
        from fuser.lowering.codegen.analysis import KernelAnalysis

        return KernelAnalysis(self)
