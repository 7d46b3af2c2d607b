"""`remove-bcast-squeeze`: compose consecutive broadcast/squeeze ops, and swap simple
unary ops out of the way so that more pairs meet.

Replaceable ops are `fuser.broadcast`, `fuser.broadcast_in_dim` (a broadcast whose kept dims
are listed instead of its new ones) and `fuser.squeeze` (the dialect has no copy/set op).
Each is a sequence of per-axis actions: PRESERVE (one dim in, one out), SQUEEZE (one in,
none out) and BROADCAST (none in, one out). Two consecutive ops compose axis by axis:

    PRESERVE∘PRESERVE = PRESERVE   PRESERVE then SQUEEZE = SQUEEZE
    BROADCAST then PRESERVE = BROADCAST   BROADCAST then SQUEEZE = (nothing)

and a SQUEEZE of the first op next to a BROADCAST of the second (no preserved dim between
them) is a PRESERVE of an extent-1 dim. A composition that is the identity replaces the
pair by the first op's input; one made only of SQUEEZE (BROADCAST) and PRESERVE actions
becomes one squeeze (broadcast); a mixed one (squeezes and broadcasts in different places)
is left alone.

Unary swap (option `swap-unary`, default true; nvFuser's PR #3643 never landed): in a
chain `R1 → u1 → … → uk → R2` of replaceable ops R1, R2 and simple unary ops u (UnaryOp,
CastOp, or a BinaryOp/WhereOp with exactly one tensor operand), R2 is moved above uk
— one step per rewrite — when R1 and R2 compose to something that is not mixed, so the
pair meets and merges. `broadcast → relu → squeeze` becomes `relu`. A swap needs every
intermediate u result to have a single use and not to be a fusion output (nothing is
duplicated), and only happens when the merge it prepares is possible.

Termination (the greedy walker has no iteration cap): a replaceable op only ever moves
towards the inputs (a swap removes one op from its ancestors; a merge replaces it by at
most one op with fewer ancestors), and no pattern moves one the other way or creates a
unary op, so every rewrite strictly decreases the sum over replaceable ops of their
ancestor counts.

Outputs: layouts live on the func's result attributes by position, so a replaced output
keeps its required (or hinted) stride order. An output is never forwarded to a fusion
input, nor to another output with a different layout (see passes/fusion_outputs.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import builtin
from xdsl.ir import Operation, SSAValue
from xdsl.passes import Context, ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import VerifyException

from fuser_dialect import shape_rules as rules
from fuser_dialect.ops_compute import BinaryOp, CastOp, UnaryOp, WhereOp
from fuser_dialect.ops_layout import BroadcastInDimOp, BroadcastOp, SqueezeOp
from fuser_dialect.types import BROADCAST, DYNAMIC, TensorType
from fuser.passes.fusion_outputs import erase_dead, has_single_use, may_forward
from fuser.passes.rewrite_driver import rewrite_module

PRESERVE, SQUEEZE, BCAST = "P", "S", "B"

Replaceable = BroadcastOp | BroadcastInDimOp | SqueezeOp
REPLACEABLE = (BroadcastOp, BroadcastInDimOp, SqueezeOp)


# --- per-axis composition ---------------------------------------------------------------


def axis_actions(op: Operation) -> list[str] | None:
    """The op as a sequence of per-axis actions, or None when it is not replaceable."""
    if isinstance(op, BroadcastOp):
        new = set(op.dims.get_values())
        return [BCAST if i in new else PRESERVE for i in range(op.out_type.rank)]
    if isinstance(op, BroadcastInDimOp):
        kept = set(op.dims.get_values())
        return [PRESERVE if i in kept else BCAST for i in range(op.out_type.rank)]
    if isinstance(op, SqueezeOp):
        gone = set(op.dims.get_values())
        return [SQUEEZE if i in gone else PRESERVE for i in range(op.in_type.rank)]
    return None


def compose(first: Sequence[str], second: Sequence[str]) -> list[str]:
    """Per-axis composition of `first` followed by `second`."""
    out: list[str] = []
    i = j = 0
    while i < len(first) or j < len(second):
        if i < len(first) and first[i] == SQUEEZE:
            out.append(SQUEEZE)
            i += 1
        elif j < len(second) and second[j] == BCAST:
            out.append(BCAST)
            j += 1
        else:
            # first[i] produces a dim (PRESERVE or BROADCAST) that second[j] consumes.
            a, b = first[i], second[j]
            if b == PRESERVE:
                out.append(a)
            elif a == PRESERVE:  # b == SQUEEZE
                out.append(SQUEEZE)
            # BROADCAST then SQUEEZE cancels.
            i += 1
            j += 1
    # A squeezed extent-1 dim next to a new broadcast dim is that dim, preserved.
    merged: list[str] = []
    for action in out:
        if merged and {merged[-1], action} == {SQUEEZE, BCAST}:
            merged[-1] = PRESERVE
        else:
            merged.append(action)
    return merged


@dataclass(frozen=True)
class Plan:
    """What a composition becomes: 'identity', or one 'squeeze'/'broadcast' with `dims`."""

    kind: str
    dims: tuple[int, ...] = ()


def plan_of(actions: Sequence[str]) -> Plan | None:
    kinds = set(actions) - {PRESERVE}
    if not kinds:
        return Plan("identity")
    if kinds == {SQUEEZE}:
        # Squeezed dims, numbered as input positions (PRESERVE and SQUEEZE consume one).
        return Plan("squeeze", tuple(k for k, a in enumerate(actions) if a == SQUEEZE))
    if kinds == {BCAST}:
        # New dims, numbered as output positions (PRESERVE and BROADCAST produce one).
        return Plan("broadcast", tuple(k for k, a in enumerate(actions) if a == BCAST))
    return None  # mixed: left alone


def _compatible(inferred: Sequence[int], declared: Sequence[int]) -> bool:
    """The verifiers' rule: a declared dim may refine a dynamic one; 1 and b interchange."""
    return len(inferred) == len(declared) and all(
        a == b or a == DYNAMIC or {a, b} <= {1, BROADCAST} for a, b in zip(inferred, declared)
    )


def plan_dims(plan: Plan, source: TensorType) -> tuple[int, ...] | None:
    """The dims the planned op infers from `source`; None if the rule rejects it."""
    try:
        if plan.kind == "identity":
            return source.shape
        if plan.kind == "squeeze":
            return rules.squeeze("fuser.squeeze", source, plan.dims)
        rank = source.rank + len(plan.dims)
        if any(not 0 <= d < rank for d in plan.dims):
            return None
        return rules.broadcast("fuser.broadcast", source, [k in plan.dims for k in range(rank)])
    except VerifyException:
        return None


def merge_plan(first: Operation, second: Operation) -> Plan | None:
    a, b = axis_actions(first), axis_actions(second)
    if a is None or b is None:
        return None
    return plan_of(compose(a, b))


def build(plan: Plan, source: SSAValue, result_type: TensorType) -> Operation | None:
    """The planned op on `source` typed `result_type`; None for the identity."""
    if plan.kind == "squeeze":
        return SqueezeOp(source, list(plan.dims), result_type)
    if plan.kind == "broadcast":
        return BroadcastOp(source, list(plan.dims), result_type)
    return None


# --- simple unary ops -------------------------------------------------------------------


def tensor_operand_index(op: Operation) -> int | None:
    """The position of the only tensor operand of a simple elementwise op, else None."""
    if isinstance(op, (UnaryOp, CastOp)):
        return 0
    if isinstance(op, (BinaryOp, WhereOp)):
        tensors = [k for k, v in enumerate(op.operands) if isinstance(v.type, TensorType)]
        return tensors[0] if len(tensors) == 1 else None
    return None


def rebuild_unary(op: Operation, tensor: SSAValue, result_type: TensorType) -> Operation:
    """A copy of the simple unary `op` reading `tensor` and typed `result_type`."""
    k = tensor_operand_index(op)
    assert k is not None
    operands = list(op.operands)
    operands[k] = tensor
    return type(op).create(
        operands=operands,
        result_types=[result_type],
        properties=dict(op.properties),
        attributes=dict(op.attributes),
    )


# --- patterns ---------------------------------------------------------------------------


def _same_tensor(a: TensorType, b: TensorType) -> bool:
    return a.without_layout() == b.without_layout()


class MergeReplaceablePair(RewritePattern):
    """R1 → R2 with a non-mixed composition becomes nothing, one squeeze or one broadcast."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: BroadcastOp | BroadcastInDimOp | SqueezeOp, rewriter: PatternRewriter) -> None:
        first = op.input.owner
        if not isinstance(first, REPLACEABLE):
            return
        plan = merge_plan(first, op)
        if plan is None:
            return
        source = first.input
        assert isinstance(source.type, TensorType)
        inferred = plan_dims(plan, source.type)
        if inferred is None or not _compatible(inferred, op.out_type.shape):
            return
        new_op = build(plan, source, op.out_type)
        if new_op is None:
            if not _same_tensor(source.type, op.out_type) or not may_forward(op.result, source, op):
                return
            rewriter.replace(op, [], [source])
        else:
            rewriter.replace(op, [new_op])
        erase_dead(rewriter, first, REPLACEABLE)


class RemoveIdentityReplaceable(RewritePattern):
    """A broadcast/squeeze that changes no dim is its input."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: BroadcastOp | BroadcastInDimOp | SqueezeOp, rewriter: PatternRewriter) -> None:
        actions = axis_actions(op)
        if actions is None or any(a != PRESERVE for a in actions):
            return
        source = op.input
        assert isinstance(source.type, TensorType)
        if not _same_tensor(source.type, op.out_type) or not may_forward(op.result, source, op):
            return
        rewriter.replace(op, [], [source])


def _unary_chain(op: Replaceable) -> tuple[list[Operation], Operation] | None:
    """The simple unary ops between `op` and the replaceable op above them (nearest first)
    and that op, when every intermediate result has a single use and is no output."""
    chain: list[Operation] = []
    value = op.input
    while True:
        producer = value.owner
        if isinstance(producer, REPLACEABLE):
            return (chain, producer) if chain else None
        if not isinstance(producer, Operation) or tensor_operand_index(producer) is None:
            return None
        if not has_single_use(value):
            return None
        chain.append(producer)
        k = tensor_operand_index(producer)
        assert k is not None
        value = producer.operands[k]


def _moved_dims(op: Replaceable, source: TensorType) -> tuple[int, ...] | None:
    """The dims `op` (same kind, same dims) infers when applied to `source`."""
    try:
        if isinstance(op, SqueezeOp):
            return rules.squeeze(op.name, source, op.dims.get_values())
        if isinstance(op, BroadcastOp):
            return rules.broadcast(op.name, source, op.is_broadcast_dim)
        return rules.broadcast_in_dim(op.name, source, op.out_type.rank, op.dims.get_values())
    except VerifyException:
        return None


def _clone_replaceable(op: Replaceable, source: SSAValue, result_type: TensorType) -> Operation:
    return type(op).create(
        operands=[source], result_types=[result_type], properties=dict(op.properties), attributes=dict(op.attributes)
    )


class SwapUnaryAboveReplaceable(RewritePattern):
    """`R1 → u… → u → R2` ⇒ `R1 → u… → R2' → u'` when R1 and R2 merge once they meet."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: BroadcastOp | BroadcastInDimOp | SqueezeOp, rewriter: PatternRewriter) -> None:
        found = _unary_chain(op)
        if found is None:
            return
        chain, first = found
        plan = merge_plan(first, op)
        if plan is None:
            return
        # The merge this swap prepares must be possible where R2 will land (on R1's result).
        landed = _moved_dims(op, first.out_type)
        source = first.input
        assert isinstance(source.type, TensorType)
        inferred = plan_dims(plan, source.type)
        if landed is None or inferred is None or not _compatible(inferred, landed):
            return
        if plan.kind == "identity" and tuple(inferred) != tuple(landed):
            return
        # One step: swap op with the unary right above it.
        unary = chain[0]
        k = tensor_operand_index(unary)
        assert k is not None
        tensor = unary.operands[k]
        assert isinstance(tensor.type, TensorType)
        dims = _moved_dims(op, tensor.type)
        if dims is None:
            return
        moved = _clone_replaceable(op, tensor, TensorType(tensor.type.dtype, dims))
        new_unary = rebuild_unary(unary, moved.results[0], op.out_type)
        try:
            moved.verify()
            new_unary.verify()
        except VerifyException:
            new_unary.erase()
            moved.erase()
            return
        rewriter.replace(op, [moved, new_unary])
        rewriter.erase(unary)


@dataclass(frozen=True)
class RemoveBcastSqueezePass(ModulePass):
    """Composes consecutive broadcast/squeeze ops; with `swap-unary`, moves a broadcast or
    squeeze above simple unary ops (cast, neg, relu, exp, ...) so that a pair can merge."""

    name = "remove-bcast-squeeze"

    swap_unary: bool = True

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        patterns: list[RewritePattern] = [RemoveIdentityReplaceable(), MergeReplaceablePair()]
        if self.swap_unary:
            patterns.append(SwapUnaryAboveReplaceable())
        rewrite_module(op, patterns)
