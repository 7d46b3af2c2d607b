"""`gather-sum-to-one-hot`: sum over `dim` of an exact gather whose index has extent 1 on
`dim` equals a masked reduction of the lookup tensor:

    sum(gather(x, index, dim), dims)  ==  sum(where(iota(C) == index, x, 0), dims)

(C = x's extent on `dim`, the iota broadcast along every other dim, `dim` in `dims`).
The rewritten form is a plain reduction, so it fuses with x's producer even where a
gather could not. Not part of `fuser-preseg`: it trades one load per row for a compare
per element; enable it explicitly."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import Float64Type, FloatAttr, IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from fuser_dialect import shape_rules as rules
from fuser_dialect.ops_compute import BinaryKind, BinaryOp, ReductionKind, ReductionOp, WhereOp
from fuser_dialect.ops_factory import DimOp, IotaOp
from fuser_dialect.ops_gather import GatherOp, TakeAlongAxisOp
from fuser_dialect.ops_layout import BroadcastInDimOp
from fuser_dialect.types import BROADCAST, DYNAMIC, FLOAT_DTYPES, TensorType
from fuser.passes.fusion_outputs import has_single_use
from fuser.passes.gather_to_take_along_axis import statically_exact
from fuser.passes.rewrite_driver import rewrite_module


def _exact(op: GatherOp | TakeAlongAxisOp) -> bool:
    return isinstance(op, TakeAlongAxisOp) or statically_exact(op)


class GatherSumToOneHot(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ReductionOp, rewriter: PatternRewriter) -> None:
        gather = op.input.owner
        if op.op_kind != ReductionKind.SUM or not isinstance(gather, (GatherOp, TakeAlongAxisOp)):
            return
        if gather.axis not in op.reduced_dims or not has_single_use(gather.result) or not _exact(gather):
            return
        if gather.index.type.shape[gather.axis] not in (1, BROADCAST):
            return
        x, index, dim = gather.input, gather.index, gather.axis
        rank = x.type.rank
        if x.type.shape[dim] == BROADCAST:
            return
        new_ops = []
        extent = x.type.shape[dim]
        if extent == DYNAMIC:
            length = DimOp(x, dim)
        else:
            length = arith.ConstantOp(IntegerAttr(extent, i64))
        zero_i, one_i = arith.ConstantOp(IntegerAttr(0, i64)), arith.ConstantOp(IntegerAttr(1, i64))
        iota = IotaOp(length.result, zero_i.result, one_i.result, TensorType(index.type.dtype, [extent]))
        iota_dims = [BROADCAST] * rank
        iota_dims[dim] = extent
        spread = BroadcastInDimOp(iota.result, [dim], TensorType(index.type.dtype, iota_dims))
        hit_dims = rules.elementwise("fuser.binary eq", [spread.result.type, index.type])
        hit = BinaryOp(BinaryKind.EQ, spread.result, index, TensorType("i1", hit_dims))
        zero = arith.ConstantOp(FloatAttr(0.0, Float64Type()) if x.type.dtype in FLOAT_DTYPES
                                else IntegerAttr(0, i64))
        masked_dims = rules.elementwise("fuser.where", [hit.result.type, x.type])
        masked = WhereOp(hit.result, x, zero.result, TensorType(x.type.dtype, masked_dims))
        new_ops += [length, zero_i, one_i, iota, spread, hit, zero, masked]
        total = ReductionOp(ReductionKind.SUM, masked.result, list(op.reduced_dims), op.keepdim is not None,
                            op.result.type)
        rewriter.replace(op, new_ops + [total])
        rewriter.erase(gather)


@dataclass(frozen=True)
class GatherSumToOneHotPass(ModulePass):
    name = "gather-sum-to-one-hot"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_module(op, [GatherSumToOneHot()], dce=True)
