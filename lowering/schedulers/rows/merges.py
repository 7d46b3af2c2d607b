"""Reductions of one row kernel merged into one pass over the row: max and sum(exp(x - max))
as an online normaliser, sum(x) and sum((x - mean)^2) as Welford. A schedule that streams the
row (does not keep it on chip) merges them, so that each pass is a read of the row."""

from __future__ import annotations

from xdsl.ir import SSAValue

from fuser_dialect import ops_compute as C
from fuser_dialect import ops_layout as L
from fuser_dialect.types import TensorType
from fuser.lowering.schedulers.rows.classify import ELEMENTWISE


def _is_max_result(value, red_max: C.ReductionOp) -> bool:
    """`value` is red_max's result, either kept (keepdim) or broadcast back over the reduced dims
    (`broadcast`, or `broadcast_in_dim` onto the rows: the spelling frameworks emit), and maybe
    expanded to the row's extents."""
    if value is red_max.result:
        return red_max.keepdim is not None
    op = value.owner
    if isinstance(op, L.ExpandOp):  # broadcast dims expanded to the row's extents
        return _is_max_result(op.input, red_max)
    if isinstance(op, L.BroadcastOp):
        return (op.input is red_max.result and red_max.keepdim is None
                and tuple(op.dims.get_values()) == red_max.reduced_dims)
    if isinstance(op, L.BroadcastInDimOp) and op.input is red_max.result:
        rank = op.result.type.rank  # type: ignore[union-attr]
        kept = [d for d in range(rank) if d not in red_max.reduced_dims]
        dims = list(op.dims.get_values())
        # keepdim=False: the kept dims map in order; keepdim: every dim maps to itself.
        return dims == (kept if red_max.keepdim is None else list(range(rank)))
    return False


def online_softmax_pairs(reductions: list[C.ReductionOp]) -> dict[C.ReductionOp, C.ReductionOp]:
    """max reductions M paired with a later sum S of exp(M.input - M) over the same dims."""
    pairs = {}
    for m in reductions:
        if m.op_kind != C.ReductionKind.MAX or m.input.type.dtype not in ("f32", "f64", "f16", "bf16"):
            continue
        for s in reductions:
            if s.op_kind != C.ReductionKind.SUM or s in pairs.values() or s.reduced_dims != m.reduced_dims:
                continue
            exp = s.input.owner
            if not (isinstance(exp, C.UnaryOp) and exp.op_kind == C.UnaryKind.EXP):
                continue
            sub = exp.input.owner
            if (isinstance(sub, C.BinaryOp) and sub.op_kind == C.BinaryKind.SUB and sub.lhs is m.input
                    and _is_max_result(sub.rhs, m) and exp.result.type.dtype == m.input.type.dtype):
                pairs[m] = s
                break
    return pairs


_ROW_VALUE_OPS = (*ELEMENTWISE, L.BroadcastOp, L.BroadcastInDimOp, L.ExpandOp, L.SqueezeOp)


def _computed_from(value: SSAValue, root: SSAValue) -> bool:
    """`value` is computed from `root` and scalars alone, by elementwise ops, broadcasts and
    squeezes (a mean from a sum: sum / n, sum * (1 / n), broadcast back over the row)."""
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if v is root or v in seen or not isinstance(v.type, TensorType):
            continue
        seen.add(v)
        op = v.owner
        if not isinstance(op, _ROW_VALUE_OPS):
            return False
        stack += op.operands
    return True


def welford_pairs(reductions: list[C.ReductionOp], taken: set[C.ReductionOp]
                  ) -> dict[C.ReductionOp, tuple[C.ReductionOp, SSAValue]]:
    """sum reductions S of a float x paired with a later sum of (x - c) * (x - c) over the same
    dims, c computed from S alone (decompose-welford's var_sum, a layer-norm's variance):
    S -> (that reduction, c). Reductions in `taken` are already merged otherwise."""
    pairs: dict[C.ReductionOp, tuple[C.ReductionOp, SSAValue]] = {}
    used: set[C.ReductionOp] = set(taken)
    for s in reductions:
        if s in used or s.op_kind != C.ReductionKind.SUM or s.input.type.dtype not in ("f32", "f64"):
            continue
        for q in reductions:
            if q in used or q is s or q.op_kind != C.ReductionKind.SUM or q.reduced_dims != s.reduced_dims:
                continue
            square = q.input.owner
            if not (isinstance(square, C.BinaryOp) and square.op_kind == C.BinaryKind.MUL and square.lhs is square.rhs):
                continue
            deviation = square.lhs.owner
            if not (isinstance(deviation, C.BinaryOp) and deviation.op_kind == C.BinaryKind.SUB
                    and deviation.lhs is s.input and isinstance(deviation.rhs.type, TensorType)):
                continue
            if q.input.type.dtype == s.input.type.dtype and _computed_from(deviation.rhs, s.result):
                pairs[s] = (q, deviation.rhs)
                used |= {s, q}
                break
    return pairs
