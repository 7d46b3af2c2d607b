"""What a scheduler unit is: the one place that knows how a kind of kernel is recognised,
scheduled, launched and emitted.

- `accepts(candidate)`: segmentation asks whether this unit can run a group of ops as one
  kernel (a `Verdict`, with the reason when it cannot);
- `choose(plan, shapes, arrays, output_layout, device)`: the schedule for one call's run-time
  extents (and input arrays by fusion argument, whose strides and alignment may matter;
  None when there are none, e.g. printing a kernel) on `device` (lowering/device.py); a
  schedule is a frozen value, part of the compiled-kernel cache key, with a `block` size and
  a one-line `describe()`;
- `grid(plan, schedule, extents, device)`: the launch grid, or None when there is nothing to do;
- `emit(plan, schedule, options)`: the kernel body (`KernelBody`), a pure function of its
  arguments (`options`: what else emission depends on, such as the in-kernel index checks).

Decisions read the kernel analysis (`plan.analysis`, lowering/codegen/analysis.py), never C text.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from xdsl.ir import Operation, SSAValue

from fuser_dialect import ops_compute as C
from fuser.lowering.codegen.emit_cuda import EmitOptions, Param
from fuser.lowering.codegen.kernel import KernelPlan
from fuser.lowering.device import DEFAULT, DeviceSpec
from fuser.lowering.schedulers.performance import Resources, Traffic
from fuser.lowering.schedulers.symbolic import SymbolicExtents

MAX_GRID = 65535
"""The largest grid dimension every launch respects (gridDim.y and .z limit; x is kept under it too)."""


@dataclass
class Verdict:
    ok: bool
    reason: str = ""
    scheduler: str = ""
    domain: SSAValue | None = None
    reduced_dims: tuple[int, ...] = ()
    forms: dict[SSAValue, str] = field(default_factory=dict)


class Candidate:
    """Ops that segmentation considers running as one kernel, with the values they must write.
    Facts several units need (the row analysis) are computed once per candidate."""

    def __init__(self, ops: Sequence[Operation], outputs: Sequence[SSAValue], sym: SymbolicExtents):
        self.ops = ops
        self.outputs = outputs
        self.sym = sym
        self.facts: dict[str, object] = {}

    @cached_property
    def reductions(self) -> list[C.ReductionOp]:
        return [op for op in self.ops if isinstance(op, C.ReductionOp)]


@dataclass(frozen=True)
class KernelBody:
    """The C lines of a kernel body, its shared-memory declarations and parameters."""

    lines: list[str]
    shared: list[str]
    params: tuple[Param, ...]
    needs_sync: bool
    """Uses barriers or warp shuffles (the cpu backend then runs threads as fibers)."""
    shared_bytes: int = 0
    """Dynamic shared memory per block (FUSER_DYNAMIC_SHARED), given at launch."""
    min_blocks_per_sm: int = 0
    """`__launch_bounds__`' minimum of resident blocks per SM the kernel is compiled for (0: none)."""


class SchedulerUnit(ABC):
    name: str

    @abstractmethod
    def accepts(self, candidate: Candidate) -> Verdict: ...

    @abstractmethod
    def choose(self, plan: KernelPlan, shapes: Sequence[tuple[int, ...]], arrays: dict | None,
               output_layout: dict, device: DeviceSpec = DEFAULT): ...

    @abstractmethod
    def grid(self, plan: KernelPlan, schedule, extents, device: DeviceSpec = DEFAULT) -> tuple[int, int, int] | None: ...

    @abstractmethod
    def emit(self, plan: KernelPlan, schedule, options: EmitOptions = EmitOptions()) -> KernelBody: ...

    def check_schedule(self, plan: KernelPlan, schedule, shapes: Sequence[tuple[int, ...]], arrays: dict | None,
                       output_layout: dict, device: DeviceSpec = DEFAULT) -> None:
        """Raises a ValueError when a forced `schedule` (an override) cannot run this call: the
        wrong kind of schedule, or one whose choices the extents, arrays or device rule out."""
        expected = type(self.choose(plan, shapes, None, output_layout, device))
        if type(schedule) is not expected:
            raise ValueError(f"override_schedule: kernel {plan.index} ({self.name}) takes a {expected.__name__}, "
                             f"got {type(schedule).__name__}")
        block = getattr(schedule, "block", None)
        if isinstance(block, bool) or not isinstance(block, int) or not 0 < block <= device.max_threads_per_block:
            raise ValueError(f"override_schedule: kernel {plan.index} ({self.name}): block: {block!r} threads; a block "
                             f"has 1 to {device.max_threads_per_block} threads on {device.name}")

    def passes(self, plan: KernelPlan, schedule) -> int:
        """Launches of the kernel per call (the same grid and arguments but its `pass` parameter,
        0, 1, ...: a split scan's reduce and scan passes). 1 by default."""
        return 1

    def alternatives(self, plan: KernelPlan, schedule, extents, arrays: dict | None, device: DeviceSpec) -> list:
        """Schedules worth timing against `schedule` (the heuristic's) for this call, most
        promising first: what autotuning and the GPU sweep try. None by default."""
        return []

    def traffic(self, plan: KernelPlan, schedule, extents, device: DeviceSpec, ctas_per_sm: int) -> Traffic | None:
        """What one launch moves and keeps in flight, for the performance model
        (lowering/schedulers/performance.py); None: the unit does not model it."""
        return None

    def estimated_resources(self, plan: KernelPlan, schedule, extents) -> Resources:
        """Registers and shared memory a thread and block need, before ptxas says."""
        return Resources(registers=32)

    def __str__(self) -> str:
        return self.name
