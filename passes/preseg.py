"""`fuser-preseg`: the default pre-segmentation pipeline.

    decompose-welford → remove-broadcast-reduction → remove-bcast-squeeze → consecutive-cast
      → remove-bcast-squeeze → gather-to-take-along-axis → move-gather
      → allocation-order-inference → dce

gather-to-take-along-axis turns statically exact gathers into take_along_axis (the executor's
concretization also converts the gathers found exact at run time), and move-gather then
picks the looked-up values from before a unary op or cast, so cross-entropy reads its bf16
logits directly. The second remove-bcast-squeeze catches broadcast/squeeze pairs that only meet once cast
chains between them are folded. `dce` drops ops left without uses (one sweep of each fusion's
block: passes/dead_ops.py; xDSL's `dce` computes the same in several). xDSL's
`canonicalize` and `cse` are not part of it: the fuser patterns above do the cleanup this
stage needs, and cse would merge values that a later stage may want apart (outputs).
decompose-welford comes first: what it builds (casts, squeezes) is what the others clean up;
remove-broadcast-reduction then takes broadcast dims out of reductions (the segmenter splits
a reduction that reduces a broadcast dim), leaving squeezes for remove-bcast-squeeze.

Callable from Python: `PresegPass().apply(make_context(), module)`."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import builtin
from xdsl.passes import Context, ModulePass

from fuser.passes.allocation_order import AllocationOrderInferencePass
from fuser.passes.broadcast_reduction import RemoveBroadcastReductionPass
from fuser.passes.consecutive_cast import ConsecutiveCastPass
from fuser.passes.dead_ops import erase_dead_ops
from fuser.passes.decompose_welford import DecomposeWelfordPass
from fuser.passes.gather_to_take_along_axis import GatherToTakeAlongAxisPass
from fuser.passes.move_gather import MoveGatherPass
from fuser.passes.remove_bcast_squeeze import RemoveBcastSqueezePass


@dataclass(frozen=True)
class PresegPass(ModulePass):
    """The default pre-segmentation pipeline; `swap-unary` is passed to remove-bcast-squeeze."""

    name = "fuser-preseg"

    swap_unary: bool = True

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        DecomposeWelfordPass().apply(ctx, op)
        RemoveBroadcastReductionPass().apply(ctx, op)
        remove = RemoveBcastSqueezePass(swap_unary=self.swap_unary)
        remove.apply(ctx, op)
        ConsecutiveCastPass().apply(ctx, op)
        remove.apply(ctx, op)
        GatherToTakeAlongAxisPass().apply(ctx, op)
        MoveGatherPass().apply(ctx, op)
        AllocationOrderInferencePass().apply(ctx, op)
        erase_dead_ops(op)
