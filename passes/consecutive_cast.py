"""`consecutive-cast`: fold chains of casts, as nvFuser's ConsecutiveCastPass does.

A chain is `v0 → cast → … → cast → vn` whose intermediate values each have a single use
and are not fusion outputs (an intermediate with other uses or an output is a chain end).
It is cut into sections: a new section starts where the next dtype is incompatible with
the section's narrowest dtype so far (its anchor). Compatible dtypes are ordered by
precision: bf16 < f32 < f64, f16 < f32 < f64 (bf16 and f16 are incompatible), i32 < i64;
a float and an integer (e.g. f32/i32) or bool and anything else are incompatible. Each
section `start → … → end` with anchor A becomes `start → A → end` (a cast is dropped where
two of them are equal):

    f64 → f32 → f16 → f32 → f64  ⇒  f64 → f16 → f64
    f64 → f32 → f64 → f16        ⇒  f64 → f16
    f32 → f64 → f32              ⇒  the input itself

Widening casts are exact, so dropping them changes nothing. Folding two narrowing casts
(f64 → f32 → f16 ⇒ f64 → f16) rounds once instead of twice, as nvFuser accepts: the result
can differ by one unit in the last place of the narrow type when the first rounding lands
on a tie of the second (about 6 in 10^6 random f64 values for f64 → f32 → f16; never for
bf16 targets on the reference backend, whose f64 → bf16 cast goes through f32). No cast
between incompatible dtypes is ever created. A chain is rewritten only when it gets
strictly shorter.

Narrowing casts also move above a single-use, non-output squeeze or reshape when a cast
sits above that (chain of) squeeze/reshape: `upcast → squeeze → downcast` becomes
`upcast → downcast → squeeze` and then folds. Never above a broadcast.

Termination: a fold strictly decreases the number of casts; a move keeps it and moves
one narrowing cast above one meta op (nothing moves a cast down).
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

from fuser_dialect.ops_compute import CastOp
from fuser_dialect.ops_layout import ReshapeOp, SqueezeOp
from fuser_dialect.types import TensorType
from fuser.passes.fusion_outputs import erase_dead, has_single_use, may_forward
from fuser.passes.rewrite_driver import rewrite_module

_FLOAT_BITS = {"bf16": 16, "f16": 16, "f32": 32, "f64": 64}
_INT_BITS = {"i32": 32, "i64": 64}


def compatible(a: str, b: str) -> bool:
    """Whether one of the dtypes holds every value of the other."""
    if a == b:
        return True
    if a in _FLOAT_BITS and b in _FLOAT_BITS:
        return {a, b} != {"f16", "bf16"}
    return a in _INT_BITS and b in _INT_BITS


def narrower(a: str, b: str) -> bool:
    """a is compatible with b and strictly less precise."""
    if a == b or not compatible(a, b):
        return False
    bits = _FLOAT_BITS if a in _FLOAT_BITS else _INT_BITS
    return bits[a] < bits[b]


def _section(start: str, anchor: str, end: str) -> list[str]:
    steps = [anchor] if anchor != start else []
    return steps + ([end] if end != anchor else [])


def fold_chain(dtypes: Sequence[str]) -> list[str]:
    """The dtypes to cast through (after dtypes[0]) for a chain of casts through `dtypes`."""
    out: list[str] = []
    start = anchor = prev = dtypes[0]
    for t in dtypes[1:]:
        if not compatible(anchor, t):
            out += _section(start, anchor, prev)  # the section ends at the previous value
            start = anchor = prev
            if not compatible(prev, t):  # an incompatible cast of the chain stays as it is
                out.append(t)
                start = anchor = t
        if narrower(t, anchor):
            anchor = t
        prev = t
    return out + _section(start, anchor, prev)


def _tensor_type(value: SSAValue) -> TensorType:
    assert isinstance(value.type, TensorType)
    return value.type


def _dtype(value: SSAValue) -> str:
    return _tensor_type(value).dtype


class FoldCastChain(RewritePattern):
    """A chain of casts ending at `op` becomes the folded chain (when strictly shorter)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CastOp, rewriter: PatternRewriter) -> None:
        casts: list[CastOp] = [op]
        value = op.input
        while isinstance(value.owner, CastOp) and has_single_use(value):
            casts.insert(0, value.owner)
            value = value.owner.input
        source = value
        dtypes = [_dtype(source)] + [_dtype(c.result) for c in casts]
        folded = fold_chain(dtypes)
        if not folded and not may_forward(op.result, source, op):
            # An output must not become an input or another output: keep a 2-cast copy.
            folded = [dtypes[1], dtypes[-1]]
        if len(folded) >= len(casts):
            return
        if not folded:
            rewriter.replace(op, [], [source])
        else:
            new_ops: list[Operation] = []
            current = source
            for k, dtype in enumerate(folded):
                assert isinstance(current.type, TensorType)
                last = k == len(folded) - 1
                t = _tensor_type(op.result) if last else current.type.without_layout().with_dtype(dtype)
                new_ops.append(CastOp(current, t))
                current = new_ops[-1].results[0]
            rewriter.replace(op, new_ops)
        if len(casts) > 1:
            erase_dead(rewriter, casts[-2], (CastOp,))


def _meta_chain_has_cast(value: SSAValue) -> bool:
    """Whether a cast produces `value` through single-use, non-output squeeze/reshape ops."""
    while True:
        producer = value.owner
        if isinstance(producer, CastOp):
            return True
        if not isinstance(producer, (SqueezeOp, ReshapeOp)) or not has_single_use(value):
            return False
        value = producer.input


class MoveNarrowingCastAboveMeta(RewritePattern):
    """`m → cast(narrow)` ⇒ `cast(narrow) → m` for a single-use, non-output squeeze/reshape m
    with a cast above it."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CastOp, rewriter: PatternRewriter) -> None:
        meta = op.input.owner
        if not isinstance(meta, (SqueezeOp, ReshapeOp)) or not has_single_use(op.input):
            return
        src, dst = _dtype(meta.input), _dtype(op.result)
        if not narrower(dst, src) or not _meta_chain_has_cast(meta.input):
            return
        in_type = meta.input.type
        assert isinstance(in_type, TensorType)
        cast = CastOp(meta.input, in_type.without_layout().with_dtype(dst))
        moved = type(meta).create(
            operands=[cast.result, *meta.operands[1:]],
            result_types=[op.result.type],
            properties=dict(meta.properties),
            attributes=dict(meta.attributes),
        )
        rewriter.replace(op, [cast, moved])
        rewriter.erase(meta)


@dataclass(frozen=True)
class ConsecutiveCastPass(ModulePass):
    """Folds chains of casts to the narrowest anchor per compatible section and moves
    narrowing casts above single-use squeeze/reshape ops so that they fold."""

    name = "consecutive-cast"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        rewrite_module(op, [FoldCastChain(), MoveNarrowingCastAboveMeta()])
