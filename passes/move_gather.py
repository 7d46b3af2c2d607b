"""`move-gather`: take_along_axis(u(x), index) → u(take_along_axis(x, index)) for a unary
elementwise op or cast `u` with no other use, so that cross-entropy picks the target logit
straight from the (bf16) input instead of from a converted copy (nvFuser's MoveGatherPass).
Elementwise ops commute with gathering, so results are unchanged."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from fuser_dialect import shape_rules as rules
from fuser_dialect.ops_compute import CastOp, UnaryOp
from fuser_dialect.ops_gather import TakeAlongAxisOp
from fuser_dialect.types import TensorType
from fuser.passes.fusion_outputs import has_single_use
from fuser.passes.rewrite_driver import rewrite_module


class MoveTakeAlongAxisAboveUnary(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: TakeAlongAxisOp, rewriter: PatternRewriter) -> None:
        producer = op.input.owner
        if not isinstance(producer, (UnaryOp, CastOp)) or not has_single_use(producer.result):
            return
        source = producer.input
        dims = rules.take_along_axis(op.name, source.type, op.index.type, op.axis)
        gathered = TakeAlongAxisOp(source, op.index, op.axis, TensorType(source.type.dtype, dims))
        result: TensorType = op.result.type
        if isinstance(producer, CastOp):
            moved = CastOp(gathered.result, result)
        else:
            moved = UnaryOp(producer.op_kind, gathered.result, result)
        rewriter.replace(op, [gathered, moved])


@dataclass(frozen=True)
class MoveGatherPass(ModulePass):
    name = "move-gather"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # The greedy applier also erases the unary op left without uses.
        rewrite_module(op, [MoveTakeAlongAxisAboveUnary()], dce=True)
