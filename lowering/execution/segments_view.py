"""`fd.segment(inputs)`: the segments (kernels) a fusion runs as for some inputs, to read.

The fusion is concretized for the inputs, pre-segmentation passes run and it is segmented,
exactly as `execute` does on a miss, but nothing is compiled or launched. Each segment is
printed as a fusion of its own (its tensor ops, the scalar ops they need, its inputs as
arguments and its outputs returned), with maps saying where each of its inputs comes from
(a fusion input, or another segment's output) and which fusion outputs each of its
outputs is. Values are those of the concretized fusion: argument and output positions are
the original fusion's, intermediate values are named by segment and position."""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.printer import Printer

from fuser_dialect.extents import runtime_arguments
from fuser_dialect.fusion import the_fusion
from fuser_dialect.inputs import check_inputs
from fuser_dialect.types import TensorType
from fuser.lowering.backends import CPU, Backend
from fuser.lowering.execution.compiled import build_compiled_fusion
from fuser.lowering.gc_pause import paused_gc
from fuser.passes.concretize import resize_extents_enabled


class Origin(NamedTuple):
    """Where a segment input comes from: fusion input `position` (segment None), or output
    `position` of segment `segment`."""

    segment: int | None
    position: int

    def __str__(self) -> str:
        return f"input {self.position}" if self.segment is None else f"segment {self.segment} output {self.position}"


@dataclass
class Segment:
    index: int
    scheduler: str
    split_reason: str
    inputs: list[Origin]
    """Per segment input (argument of `text`'s fusion), where it comes from."""
    outputs: list[list[int]]
    """Per segment output, the fusion output positions it is (empty: read by later segments only)."""
    source: tuple = field(default=(), repr=False, compare=False)
    """(name, arguments, ops, outputs) of the concretized fusion that `text` prints."""

    @functools.cached_property
    def text(self) -> str:
        """The segment as fuser-dialect MLIR: printed when first asked for (a 20,000-op
        fusion's took 6 s to print, more than segmenting it)."""
        return _fusion_text(*self.source)

    def __str__(self) -> str:
        ins = ", ".join(f"%arg{k} <- {o}" for k, o in enumerate(self.inputs)) or "none"
        outs = ", ".join(f"#{k} -> " + (", ".join(f"output {p}" for p in ps) or "later segments")
                         for k, ps in enumerate(self.outputs))
        why = f" ({self.split_reason})" if self.split_reason else ""
        return f"segment {self.index}: {self.scheduler}{why}\n  inputs: {ins}\n  outputs: {outs}\n{self.text}"


class Segments(list):
    """The segments of one fusion, in run order; prints them all (each segment's text is made
    when first printed or asked for)."""

    def __str__(self) -> str:
        return "\n".join(str(s) for s in self) if self else "no segments (the fusion computes no tensor)"


def segment_fusion(module: ModuleOp, inputs: Sequence[object], backend: Backend,
                   disable: Sequence[str] = ()) -> Segments:
    fusion = the_fusion(module)
    checked = check_inputs(fusion, inputs)
    shapes, scalars = runtime_arguments(fusion, checked)
    kernel_backend = backend if backend.compiles else CPU  # only its name matters: nothing compiles
    with paused_gc():
        compiled = build_compiled_fusion(module, shapes, scalars, kernel_backend, resize_extents_enabled(disable))
    concrete = compiled.fusion
    ret = concrete.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    produced: dict[SSAValue, Origin] = {}
    for plan in compiled.plans:
        for k, v in enumerate(plan.outputs):
            produced.setdefault(v, Origin(plan.index, k))
    order = {op: k for k, op in enumerate(concrete.body.block.ops)}
    segments = Segments()
    for plan in compiled.plans:
        args, ops = _arguments_and_ops(plan.ops, order)
        segments.append(Segment(
            index=plan.index,
            scheduler=plan.scheduler,
            split_reason=plan.split_reason,
            inputs=[Origin(None, a.index) if isinstance(a, BlockArgument) else produced[a] for a in args],
            outputs=[[p for p, r in enumerate(ret.arguments) if r == v] for v in plan.outputs],
            source=(f"segment_{plan.index}", args, ops, list(plan.outputs)),
        ))
    return segments


def _arguments_and_ops(tensor_ops: Sequence[Operation], order: dict[Operation, int]) -> tuple[list[SSAValue], list[Operation]]:
    """The values a segment reads from outside (its arguments) and its ops with the scalar
    ops they need, in program order."""
    ops: set[Operation] = set(tensor_ops)
    args: list[SSAValue] = []
    stack = [v for op in tensor_ops for v in op.operands]
    while stack:
        v = stack.pop()
        owner = v.owner
        if isinstance(owner, Operation) and owner in ops:
            continue
        if isinstance(owner, Operation) and not isinstance(v.type, TensorType):
            ops.add(owner)  # a scalar (constant, extent arithmetic, fuser.dim): computed in the segment
            stack += owner.operands
        elif v not in args:
            args.append(v)
    args.sort(key=lambda v: (v.index, -1) if isinstance(v, BlockArgument) else (len(order), order[v.owner]))
    return args, sorted(ops, key=order.__getitem__)


def _fusion_text(name: str, args: Sequence[SSAValue], ops: Sequence[Operation], outputs: Sequence[SSAValue]) -> str:
    block = Block(arg_types=[a.type for a in args])
    mapping: dict[SSAValue, SSAValue] = dict(zip(args, block.args))
    for op in ops:
        block.add_op(op.clone(value_mapper=mapping))
    block.add_op(func.ReturnOp(*[mapping[v] for v in outputs]))
    f = func.FuncOp(name, ([a.type for a in args], [v.type for v in outputs]), Region(block))
    stream = io.StringIO()
    Printer(stream=stream).print_op(f)
    return stream.getvalue()
