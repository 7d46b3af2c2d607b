"""`gather-to-take-along-axis`: a gather whose index matches the input's extents on every
dim but the gathered one is a take_along_axis, which can fuse into the kernel that
produces its lookup tensor (torch.gather allows a smaller index; take_along_axis does not).

Statically the match needs equal static extents (or both broadcast). The executor knows
more: `exact` lists gathers (by position among the fusion's gathers) whose extents matched
at run time; it is part of the executor's cache key (lowering/execution/cache_key.py), so a kernel
compiled for an exact gather is never reused for a smaller index."""

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
from fuser_dialect.fusion import fusion_funcs
from fuser_dialect.ops_gather import GatherOp, TakeAlongAxisOp
from fuser_dialect.types import BROADCAST, DYNAMIC, TensorType
from fuser.passes.rewrite_driver import rewrite_module


def statically_exact(op: GatherOp) -> bool:
    """Index and input extents are provably equal on every dim but `dim`."""
    for d, (a, b) in enumerate(zip(op.input.type.shape, op.index.type.shape)):
        if d == op.axis:
            continue
        if a == DYNAMIC or b == DYNAMIC or a != b:
            return False
    return True


@dataclass
class GatherToTakeAlongAxis(RewritePattern):
    exact_at_run_time: frozenset[GatherOp]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: GatherOp, rewriter: PatternRewriter) -> None:
        if op not in self.exact_at_run_time and not statically_exact(op):
            return
        try:
            dims = rules.take_along_axis("fuser.take_along_axis", op.input.type, op.index.type, op.axis)
        except rules.ShapeError:
            return  # the extents contradict exactness: a real torch.gather

        result: TensorType = op.result.type
        if any(a != b and not (a == BROADCAST and b == 1) for a, b in zip(dims, result.shape)):
            return  # a more precise type would ripple through later ops; keep the gather
        rewriter.replace(op, TakeAlongAxisOp(op.input, op.index, op.axis, result))


@dataclass(frozen=True)
class GatherToTakeAlongAxisPass(ModulePass):
    name = "gather-to-take-along-axis"

    exact: tuple[int, ...] = ()
    """Positions (0-based, in op order) of gathers known to be exact at run time."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in fusion_funcs(op):
            gathers = [g for g in f.body.block.ops if isinstance(g, GatherOp)]
            bad = [k for k in self.exact if not 0 <= k < len(gathers)]
            if bad:
                raise ValueError(f"gather-to-take-along-axis: exact={list(self.exact)} names gather {bad[0]}, "
                                 f"but @{f.sym_name.data} has {len(gathers)} gathers")
            chosen = frozenset(gathers[k] for k in self.exact)
            rewrite_module(op, [GatherToTakeAlongAxis(chosen)], apply_recursively=False, dce=True)


def exact_gathers_at_run_time(fusion, extents) -> tuple[int, ...]:
    """Positions of the fusion's gathers whose index extents equal the input's off `dim`
    for these run-time extents (a `fuser_dialect.extents.RuntimeExtents`)."""
    exact = []
    gathers = [g for g in fusion.body.block.ops if isinstance(g, GatherOp)]
    for k, g in enumerate(gathers):
        src, index = extents.shape(g.input), extents.shape(g.index)
        if all(a == b for d, (a, b) in enumerate(zip(src, index)) if d != g.axis):
            exact.append(k)
    return tuple(exact)
