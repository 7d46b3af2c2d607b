"""`remove-broadcast-reduction`: a reduction does not reduce its input's broadcast dims.

A broadcast dim has extent 1: reducing it (sum, prod, max or min of one element) is that
element. So the broadcast dims leave the reduction: they are squeezed from its input first,
and the reduction keeps only its other dims. When none is left, the reduction is gone:

    %r = fuser.reduction min %x dims [0] : bx?  -> ?       ⇒  %r = fuser.squeeze %x dims [0]
    %r = fuser.reduction sum %x dims [0, 1] : bx? -> (f32) ⇒  %s = fuser.squeeze %x dims [0]
                                                               %r = fuser.reduction sum %s dims [0]

With keepdim the broadcast dims are put back in place after it (a fuser.broadcast), so
the result type is unchanged; a keepdim reduction of broadcast dims only is its input where
the two types are the same and the input may stand for it (fusion_outputs.may_forward), else
a squeeze and a broadcast. Why it matters: the segmenter splits a reduction whose input
is broadcast in a reduced dim, and a chain of such reductions (min of a max over a
1-element dim, layer_norm over a 1-element dim) read a reduction before its phase.
The rewrite is exact (one element folded with the identity is itself; f16/bf16 inputs,
which accumulate in f32 and round once, round an already-representable value).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import builtin
from xdsl.passes import Context, ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from fuser_dialect.ops_compute import ReductionOp
from fuser_dialect.ops_layout import BroadcastOp, SqueezeOp
from fuser_dialect.types import BROADCAST, TensorType
from fuser.passes.fusion_outputs import may_forward
from fuser.passes.rewrite_driver import rewrite_module


class BroadcastDimsLeaveReductions(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ReductionOp, rewriter: PatternRewriter) -> None:
        source = op.input.type
        assert isinstance(source, TensorType)
        reduced = list(op.reduced_dims)
        broadcast = [d for d in reduced if source.shape[d] == BROADCAST]
        if not broadcast:
            return
        if len(broadcast) == len(reduced) and op.keepdim is not None and op.result.type == source \
                and may_forward(op.result, op.input, op):
            rewriter.replace(op, [], [op.input])  # it keeps every dim: it is its input
            return
        kept = [d for d in range(len(source.shape)) if d not in broadcast]
        squeezed_type = TensorType(source.dtype, [source.shape[d] for d in kept])
        squeeze = SqueezeOp(op.input, broadcast, squeezed_type)
        new_ops = [squeeze]
        value = squeeze.results[0]
        rest = [kept.index(d) for d in reduced if d not in broadcast]
        if not rest and op.keepdim is not None:
            back = BroadcastOp(value, broadcast, op.result.type)
            new_ops.append(back)
            value = back.results[0]
        if rest:
            keepdim = op.keepdim is not None
            if keepdim:
                shape = [BROADCAST if i in rest else e for i, e in enumerate(squeezed_type.shape)]
            else:
                shape = [e for i, e in enumerate(squeezed_type.shape) if i not in rest]
            reduction = ReductionOp(op.op_kind, value, rest, keepdim, TensorType(source.dtype, shape))
            new_ops.append(reduction)
            value = reduction.results[0]
            if keepdim:  # the broadcast dims back in their places
                back = BroadcastOp(value, broadcast, op.result.type)
                new_ops.append(back)
                value = back.results[0]
        rewriter.replace(op, new_ops, [value])


@dataclass(frozen=True)
class RemoveBroadcastReductionPass(ModulePass):
    name = "remove-broadcast-reduction"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        rewrite_module(op, [BroadcastDimsLeaveReductions()], dce=True)
