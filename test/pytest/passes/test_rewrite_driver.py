"""passes/rewrite_driver.py and passes/dead_ops.py: the pre-segmentation passes walk only the ops
their patterns can match, and dead ops go in one sweep, with the IR xDSL's walker and xDSL's
`dce` would have produced.

- Every pattern of fuser's passes says its root op types (else the walker visits every op:
  correct, but the speed-up is gone without a sign).
- On generated broadcast / squeeze / unary / cast chains, each pass through the rooted walker
  and xDSL's walker give the same IR (both followed by xDSL's dce: dead ops that were already
  in the input are the pipeline's last step's, not each pass's), and `erase_dead_ops` gives the
  IR of xDSL's dce.
- A pass whose root ops are absent does not walk the module.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker, RewritePattern
from xdsl.transforms.dead_code_elimination import region_dce

from fuser import DataType, FusionDefinition
from fuser_dialect.fusion import make_context
from fuser_dialect.ops_compute import CastOp
from fuser_dialect.ops_layout import BroadcastInDimOp, BroadcastOp, SqueezeOp
from fusion_strategies import chain_fusions
from fuser.passes import rewrite_driver
from fuser.passes.broadcast_reduction import BroadcastDimsLeaveReductions
from fuser.passes.consecutive_cast import FoldCastChain, MoveNarrowingCastAboveMeta
from fuser.passes.dead_ops import erase_dead_ops
from fuser.passes.decompose_welford import DecomposeWelford
from fuser.passes.gather_sum_to_one_hot import GatherSumToOneHot
from fuser.passes.move_gather import MoveTakeAlongAxisAboveUnary
from fuser.passes.preseg import PresegPass
from fuser.passes.remove_bcast_squeeze import MergeReplaceablePair, RemoveIdentityReplaceable, SwapUnaryAboveReplaceable

PATTERN_SETS: dict[str, tuple[list[RewritePattern], bool]] = {
    # name: (patterns, dce) as the pass runs them
    "remove-bcast-squeeze": ([RemoveIdentityReplaceable(), MergeReplaceablePair(), SwapUnaryAboveReplaceable()], False),
    "consecutive-cast": ([FoldCastChain(), MoveNarrowingCastAboveMeta()], False),
    "remove-broadcast-reduction": ([BroadcastDimsLeaveReductions()], True),
    "gather-sum-to-one-hot": ([GatherSumToOneHot()], True),
    "move-gather": ([MoveTakeAlongAxisAboveUnary()], True),
}


def test_every_pattern_says_its_root_ops():
    patterns = [p for ps, _ in PATTERN_SETS.values() for p in ps] + [DecomposeWelford()]
    for pattern in patterns:
        assert rewrite_driver.pattern_roots(pattern), type(pattern).__name__
    # A union of op types stands for each member.
    assert set(rewrite_driver.pattern_roots(MergeReplaceablePair())) == {BroadcastOp, BroadcastInDimOp, SqueezeOp}
    assert rewrite_driver.pattern_roots(FoldCastChain()) == (CastOp,)


def test_a_pattern_without_a_declared_root_visits_every_op():
    class AnyOp(RewritePattern):
        def match_and_rewrite(self, op, rewriter):
            pass

    assert rewrite_driver.pattern_roots(AnyOp()) is None
    assert rewrite_driver._union_of_roots([FoldCastChain(), AnyOp()]) is None


def _xdsl_walk(module: ModuleOp, patterns, dce: bool) -> None:
    PatternRewriteWalker(GreedyRewritePatternApplier(list(patterns), dce_enabled=dce),
                         apply_recursively=True).rewrite_module(module)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chain_fusions())
def test_rooted_walks_give_xdsls_ir(case):
    for name, (patterns, dce) in PATTERN_SETS.items():
        ours, theirs = case.fd.module.clone(), case.fd.module.clone()
        rewrite_driver.rewrite_module(ours, patterns, dce=dce)
        _xdsl_walk(theirs, patterns, dce)
        region_dce(ours.body), region_dce(theirs.body)
        assert str(ours) == str(theirs), name


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chain_fusions())
def test_one_sweep_removes_what_xdsls_dce_removes(case):
    module = case.fd.module.clone()
    PresegPass().apply(make_context(), module)  # leaves dead ops behind for the last step
    ours, theirs = module.clone(), module.clone()
    erase_dead_ops(ours)
    region_dce(theirs.body)
    assert str(ours) == str(theirs)


def test_dead_chains_go_in_one_sweep():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        dead = fd.ops.exp(fd.ops.neg(fd.ops.cast(x, DataType.Half)))  # noqa: F841 (a dead chain)
        fd.add_output(fd.ops.abs(x))
    module = fd.module.clone()
    erase_dead_ops(module)
    text = str(module)
    assert "fuser.cast" not in text and "neg" not in text and "exp" not in text and "abs" in text


def test_a_pass_without_its_root_ops_does_not_walk(monkeypatch):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.neg(fd.ops.mul(x, 2.0)))

    def no_walk(*args, **kwargs):
        raise AssertionError("walked a module without casts")

    monkeypatch.setattr(rewrite_driver.RootedWalker, "rewrite_module", no_walk)
    assert rewrite_driver.rewrite_module(fd.module, [FoldCastChain()]) is False


def test_only_root_ops_are_offered_to_the_patterns(monkeypatch):
    offered = []
    original = GreedyRewritePatternApplier.match_and_rewrite

    def recording(self, op, rewriter):
        offered.append(op)
        return original(self, op, rewriter)

    monkeypatch.setattr(GreedyRewritePatternApplier, "match_and_rewrite", recording)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.neg(fd.ops.mul(fd.ops.cast(x, DataType.Half), 2.0)))
    rewrite_driver.rewrite_module(fd.module, [FoldCastChain()])  # a lone cast: nothing to fold
    assert len(offered) == 1 and isinstance(offered[0], CastOp)
