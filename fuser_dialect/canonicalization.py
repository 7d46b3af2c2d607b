"""Canonicalizations of fuser ops that are always right (run by xDSL's `canonicalize`).

Each removes an op that does nothing: identity permute, broadcast/squeeze of no dims,
broadcast_in_dim to the same rank, reshape/expand to the same dims, zero pad, full
slice, cast to the same dtype; and `fuser.dim` of a dim whose extent is static becomes
an `arith.constant`. (arith folding is xDSL's own.)

Two rules keep them safe:
- An op is replaced by its input only when the input's type equals the result's type
  exactly. A fusion input that arrives with `order [...]` has a different type from the
  op's layout-free result, so the op stays: replacing it could change a `func.return`
  type, or hand a layout-carrying value to a user that expects none.
- A dynamic (`?`) dim is trusted to stay the same only when nothing can change it at run
  time: reshape/expand take their `?` extents from operands, so they are identities only
  when every operand is `fuser.dim` of the input at the same dim (`?x?` -> `?x?` with
  extents (%m, %n) may regroup 2x6 into 3x4). A slice with static bounds on a `?` dim
  may cut it, so only static dims make a slice "full".

The traits at the bottom attach the patterns to the ops (see the op files); ops are matched
by name here, never imported, which keeps the op modules free of import cycles.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.traits import HasCanonicalizationPatternsTrait

from fuser_dialect.types import BROADCAST, DYNAMIC, DYNAMIC_ENTRY, TensorType


def _replace_by_input(op: Operation, rewriter: PatternRewriter) -> None:
    """Replaces a one-result op by its `input` operand when the two types are identical."""
    value = op.input  # pyright: ignore[reportAttributeAccessIssue]
    if value.type != op.results[0].type:
        return
    rewriter.replace(op, [], [value])


def _is_dim_of(value: SSAValue, source: SSAValue, axis: int) -> bool:
    """value is `fuser.dim %source, axis` (matched by name: ops_factory imports this module)."""
    owner = value.owner
    return (isinstance(owner, Operation) and owner.name == "fuser.dim" and owner.input == source  # pyright: ignore
            and owner.axis == axis)  # pyright: ignore[reportAttributeAccessIssue]


def _extents_are_input_dims(op: Operation) -> bool:
    """Every `?` result dim of a reshape/expand takes the input's own extent at that dim."""
    result = op.results[0].type
    assert isinstance(result, TensorType)
    dynamic_axes = [d for d, e in enumerate(result.shape) if e == DYNAMIC]
    extents = op.extents  # pyright: ignore[reportAttributeAccessIssue]
    source = op.input  # pyright: ignore[reportAttributeAccessIssue]
    return len(extents) == len(dynamic_axes) and all(
        _is_dim_of(v, source, d) for v, d in zip(extents, dynamic_axes)
    )


class RemoveIdentityPermute(RewritePattern):
    """permute with dims [0, 1, ..., n-1]."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        dims = op.properties["dims"].get_values()  # pyright: ignore[reportAttributeAccessIssue]
        if list(dims) == list(range(len(dims))):
            _replace_by_input(op, rewriter)


class RemoveNoDims(RewritePattern):
    """broadcast or squeeze of no dims."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not op.properties["dims"].get_values():  # pyright: ignore[reportAttributeAccessIssue]
            _replace_by_input(op, rewriter)


class RemoveIdentityBroadcastInDim(RewritePattern):
    """broadcast_in_dim whose result has the input's rank: it maps every dim to itself."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        result = op.results[0].type
        assert isinstance(result, TensorType)
        if len(op.properties["dims"].get_values()) == result.rank:  # pyright: ignore[reportAttributeAccessIssue]
            _replace_by_input(op, rewriter)


class RemoveSameDimsReshapeOrExpand(RewritePattern):
    """reshape/expand whose result dims equal the input's, `?` dims included."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if _extents_are_input_dims(op):
            _replace_by_input(op, rewriter)


def _static_int(v: int | SSAValue) -> int | None:
    """The value of a static list entry or of an `arith.constant` SSA entry."""
    if isinstance(v, int):
        return v
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


class RemoveZeroPad(RewritePattern):
    """pad with every width 0 (static, or an arith.constant 0)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if all(_static_int(w) == 0 for w in op.mixed_widths):  # pyright: ignore[reportAttributeAccessIssue]
            _replace_by_input(op, rewriter)


class RemoveFullSlice(RewritePattern):
    """slice taking every element of every dim: static extents and static bounds only.
    (The verifier has checked the declared extents, so equal types then mean a full slice.)"""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        t = op.input.type  # pyright: ignore[reportAttributeAccessIssue]
        assert isinstance(t, TensorType)
        if DYNAMIC in t.shape or DYNAMIC_ENTRY in op.properties["bounds"].get_values():  # pyright: ignore[reportAttributeAccessIssue]
            return
        _replace_by_input(op, rewriter)


class RemoveSameTypeCast(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        _replace_by_input(op, rewriter)


class StaticDimToConstant(RewritePattern):
    """`fuser.dim` of a static or broadcast dim is a constant."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        t = op.input.type  # pyright: ignore[reportAttributeAccessIssue]
        assert isinstance(t, TensorType)
        axis = op.axis  # pyright: ignore[reportAttributeAccessIssue]
        if not 0 <= axis < t.rank:
            return  # invalid IR: left to the verifier
        extent = t.shape[axis]
        if extent == DYNAMIC:
            return
        value = 1 if extent == BROADCAST else extent
        rewriter.replace(op, arith.ConstantOp(IntegerAttr(value, i64)))


# -- traits (one per op; patterns are created on first use) ---------------------------


class PermuteCanonicalization(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return (RemoveIdentityPermute(),)


class NoDimsCanonicalization(HasCanonicalizationPatternsTrait):
    """broadcast, squeeze."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return (RemoveNoDims(),)


class BroadcastInDimCanonicalization(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return (RemoveIdentityBroadcastInDim(),)


class SameDimsCanonicalization(HasCanonicalizationPatternsTrait):
    """reshape, expand."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return (RemoveSameDimsReshapeOrExpand(),)


class PadCanonicalization(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return (RemoveZeroPad(),)


class SliceCanonicalization(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return (RemoveFullSlice(),)


class CastCanonicalization(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return (RemoveSameTypeCast(),)


class DimCanonicalization(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return (StaticDimToConstant(),)
