"""The registry of pass names. The names are a fixed contract (scripts and pipelines outside the
repository use them: the pass table under README.md#fuser-opt, and docs/README.md); modules
load lazily."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.passes import ModulePass

# name -> (module, class); one module per pass.
PASSES: dict[str, tuple[str, str]] = {}


def register(name: str, module: str, cls: str) -> None:
    PASSES[name] = (module, cls)


def pass_factory(name: str) -> Callable[[], type[ModulePass]]:
    module, cls = PASSES[name]
    return lambda: getattr(importlib.import_module(module), cls)


def get_pass(name: str) -> type[ModulePass]:
    return pass_factory(name)()


def all_pass_factories() -> dict[str, Callable[[], type[ModulePass]]]:
    return {name: pass_factory(name) for name in PASSES}


# Pre-segmentation passes.
register("remove-bcast-squeeze", "fuser.passes.remove_bcast_squeeze", "RemoveBcastSqueezePass")
register("consecutive-cast", "fuser.passes.consecutive_cast", "ConsecutiveCastPass")
register("allocation-order-inference", "fuser.passes.allocation_order", "AllocationOrderInferencePass")
register("remove-broadcast-reduction", "fuser.passes.broadcast_reduction", "RemoveBroadcastReductionPass")
register("fuser-preseg", "fuser.passes.preseg", "PresegPass")
register("segment", "fuser.lowering.segmentation.segment_pass", "SegmentPass")
register("concretize", "fuser.passes.concretize", "ConcretizePass")
# Gather family (cross-entropy).
register("gather-to-take-along-axis", "fuser.passes.gather_to_take_along_axis", "GatherToTakeAlongAxisPass")
register("gather-sum-to-one-hot", "fuser.passes.gather_sum_to_one_hot", "GatherSumToOneHotPass")
register("move-gather", "fuser.passes.move_gather", "MoveGatherPass")
# Welford (var, var_mean).
register("decompose-welford", "fuser.passes.decompose_welford", "DecomposeWelfordPass")
