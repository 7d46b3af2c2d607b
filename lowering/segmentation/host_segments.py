"""Host segments: ops that run as one library call between the fused kernels (matmul, linear),
the way nvFuser's expression-evaluator segments run ATen.

Segmentation (`staged_segments`) cuts a fusion into *stages* at its host ops: a host op's stage
is one past the host ops it depends on, a kernel op's stage the latest one that still precedes
every consumer (so a bias cast or an epilogue fuses after the matmul, an operand's producer
before it). Each stage's kernel ops are segmented as any fusion is, then its host ops follow,
one segment each. Running the segments in that order respects every dependency: a kernel of
stage s reads only host results of earlier stages; a host op of stage s reads kernels of stages
<= s.

This module plans host segments and picks their library (`HostUnit.choose`); running them is
`lowering/execution/host_calls.py`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from fuser_dialect.ops_matmul import HOST_OPS
from fuser_dialect.types import TensorType
from fuser.lowering.schedulers.base import Verdict

HOST = "host"
"""The scheduler name of host segments (KernelRecord.scheduler, the `segment` pass)."""

HOST_VERDICT = Verdict(True, scheduler=HOST)


def is_host_op(op: Operation) -> bool:
    return isinstance(op, HOST_OPS)


# --- segmentation ---------------------------------------------------------------------------


def _stages(ops: Sequence[Operation]) -> dict[Operation, int]:
    """The stage of every op (see the module doc): as early as its producers allow, then, for
    kernel ops, as late as its consumers allow."""
    stage: dict[Operation, int] = {}
    for op in ops:
        producers = [v.owner for v in op.operands if v.owner in stage]
        stage[op] = max((stage[p] + is_host_op(p) for p in producers), default=0)
    for op in reversed(ops):
        if is_host_op(op):
            continue
        consumers = [u.operation for u in op.results[0].uses if u.operation in stage]
        if consumers:
            stage[op] = max(stage[op], min(stage[c] for c in consumers))
    return stage


def staged_segments(segmenter) -> list[tuple[list[Operation], Verdict, str]]:
    """The segments of a fusion with host ops, in an order that runs (see the module doc).
    `segmenter` is the lowering.segmentation.segment.Segmenter of the fusion: each stage's kernel ops are
    grouped by its `kernel_segments`."""
    ops = segmenter.ops
    stage = _stages(ops)
    segments: list[tuple[list[Operation], Verdict, str]] = []
    previous_hosts: list[Operation] = []
    for s in range(max(stage.values()) + 1):
        kernel_ops = [op for op in ops if stage[op] == s and not is_host_op(op)]
        found = segmenter.kernel_segments(kernel_ops) if kernel_ops else []
        if found and previous_hosts:
            seg, verdict, reason = found[0]
            names = ", ".join(sorted({op.name for op in previous_hosts}))
            found[0] = (seg, verdict, reason or f"split after {names}: reads a host segment's result")
        segments += found
        previous_hosts = [op for op in ops if stage[op] == s and is_host_op(op)]
        segments += [([op], HOST_VERDICT, f"{op.name} runs on the host (library call)") for op in previous_hosts]
    return segments


@dataclass(eq=False)
class HostPlan:
    """One host segment: its op, the values it reads and the one it writes. Quacks like a
    KernelPlan where the executor asks (name, scheduler, outputs, unit, domain_values)."""

    index: int
    ops: list[Operation]
    inputs: list[SSAValue]
    outputs: list[SSAValue]
    split_reason: str = ""
    scheduler: str = HOST

    @property
    def op(self) -> Operation:
        return self.ops[0]

    @property
    def name(self) -> str:
        return f"fuser_host_{self.index}_{self.op.name.removeprefix('fuser.')}"

    @property
    def unit(self) -> HostUnit:
        return HOST_UNIT

    def domain_values(self) -> list[SSAValue]:
        return list(self.outputs)


def host_plan(index: int, seg: list[Operation], outputs: list[SSAValue], reason: str) -> HostPlan:
    op = seg[0]
    inputs = list(dict.fromkeys(v for v in op.operands if isinstance(v.type, TensorType)))
    return HostPlan(index, seg, inputs, outputs, reason)


def is_host_plan(plan: object) -> bool:
    return isinstance(plan, HostPlan)


# --- the library --------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostSchedule:
    """Which library runs the segment: "torch" when a fusion input is a torch tensor, else numpy."""

    library: str
    block: int = 0

    def describe(self) -> str:
        return f"library: {self.library}"


def is_torch(x: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


class HostUnit:
    """The `unit` of a HostPlan: only `choose` (CompiledFusion.schedules asks every plan)."""

    name = HOST

    def choose(self, plan: HostPlan, shapes, arrays: dict | None, output_layout: dict, device=None) -> HostSchedule:
        torch_inputs = arrays is not None and any(is_torch(a) for a in arrays.values())
        return HostSchedule("torch" if torch_inputs else "numpy")


HOST_UNIT = HostUnit()


__all__ = ["HOST", "HOST_UNIT", "HostPlan", "HostSchedule", "HostUnit", "host_plan", "is_host_op", "is_host_plan",
           "is_torch", "staged_segments"]
