"""`allocation-order-inference`: propagate input stride orders to the fusion outputs as HINTS.

Every dim of every tensor value is labelled with the input dims it comes from (a forward
data-flow walk over the fusion, along each op's layout rule in fuser_dialect.op_table:
elementwise ops join their operands' labels per dim, broadcast/squeeze/permute/... move them,
reductions drop them). For each output the
reference is the input with the most output dims mapped to its non-broadcast dims (the
first such input on ties); its stride order (row-major when it has none) orders the
mapped output dims — innermost input dims innermost —, the unmapped dims (e.g. from
factories) go outermost in their logical order, and each broadcast dim goes right outside
the outermost non-broadcast dim that follows it logically (so a row-major reference gives
a row-major order).

The inferred order is written as the result attribute `fuser.stride_order_hint`, distinct
from a user's `fuser.stride_order` REQUIREMENT, which is never touched: an output with a
requirement gets no hint. A hint may be replaced by a later run of this pass or dropped by
a later stage; an output with no mapped dim keeps whatever it had. Outputs of matmul-like
ops (none exist in the dialect yet; the names are listed below) get no hint, as in nvFuser.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import builtin, func
from xdsl.ir import Operation, SSAValue
from xdsl.passes import Context, ModulePass

from fuser_dialect.fusion import fusion_funcs, output_order, set_output_order
from fuser_dialect.op_table import layout_links
from fuser_dialect.types import BROADCAST, TensorType

Label = tuple[int, int]
"""(input position, input dim)."""
Labels = list[frozenset[Label]]
"""Per dim of a value: the input dims it is mapped to."""

MATMUL_LIKE = frozenset({"fuser.matmul", "fuser.linear", "fuser.sdpa", "fuser.bmm"})

_EMPTY: frozenset[Label] = frozenset()


def _labels_of(env: dict[SSAValue, Labels], value: SSAValue) -> Labels:
    t = value.type
    if not isinstance(t, TensorType):
        return []
    return env.get(value, [_EMPTY] * t.rank)


def result_labels(op: Operation, env: dict[SSAValue, Labels]) -> Labels | None:
    """Labels of the op's (single tensor) result: each dim joins the labels of the operand
    dims its layout rule links it to (fuser_dialect.op_table); None when it has no tensor result."""
    results = op.results
    if len(results) != 1 or not isinstance(results[0].type, TensorType):
        return None
    out = [_EMPTY] * results[0].type.rank
    links = layout_links(op)
    if links:
        operands, labels = op.operands, {}  # each operand's labels looked up once
        for operand, operand_dim, result_dim in links:
            found = labels.get(operand)
            if found is None:
                found = labels[operand] = _labels_of(env, operands[operand])
            joined, new = out[result_dim], found[operand_dim]
            out[result_dim] = new if joined is _EMPTY or joined == new else joined | new
    return out


def infer_labels(f: func.FuncOp) -> dict[SSAValue, Labels]:
    env: dict[SSAValue, Labels] = {}
    for k, arg in enumerate(f.body.block.args):
        t = arg.type
        if isinstance(t, TensorType):
            env[arg] = [_EMPTY if t.is_broadcast(d) else frozenset({(k, d)}) for d in range(t.rank)]
    for op in f.body.block.ops:
        labels = result_labels(op, env)
        if labels is not None:
            env[op.results[0]] = labels
    return env


def input_order(t: TensorType) -> tuple[int, ...]:
    """The stride order an input arrives in (row-major when its type says none)."""
    return t.stride_order or tuple(range(t.rank - 1, -1, -1))


def infer_order(f: func.FuncOp, labels: Labels, out_type: TensorType) -> tuple[int, ...] | None:
    """The hinted stride order of an output with per-dim `labels`; None without a reference."""
    args = f.body.block.args
    best, best_count = None, 0
    for k, arg in enumerate(args):
        if not isinstance(arg.type, TensorType):
            continue
        count = sum(
            1 for d in range(out_type.rank)
            if out_type.shape[d] != BROADCAST and any(a == k for a, _ in labels[d])
        )
        if count > best_count:
            best, best_count = k, count
    if best is None:
        return None
    ref_type = args[best].type
    assert isinstance(ref_type, TensorType)
    ref_order = input_order(ref_type)
    rank = out_type.rank
    mapped: dict[int, int] = {}
    for d in range(rank):
        ranks = [ref_order[i] for a, i in labels[d] if a == best]
        if ranks and out_type.shape[d] != BROADCAST:
            mapped[d] = min(ranks)
    free = [d for d in range(rank) if out_type.shape[d] == BROADCAST]
    unmapped = [d for d in range(rank) if d not in mapped and d not in free]
    slowest_first = unmapped + sorted(mapped, key=lambda d: (-mapped[d], d))
    # Extent-1 broadcast dims have no stride to speak of: each goes right outside the
    # outermost non-broadcast dim that follows it logically (row-major stays row-major).
    for d in free:
        later = [k for k, e in enumerate(slowest_first) if e > d and e not in free]
        slowest_first.insert(later[0] if later else len(slowest_first), d)
    order = [0] * rank
    for pos, d in enumerate(slowest_first):
        order[d] = rank - 1 - pos
    return tuple(order)


def infer_output_hints(f: func.FuncOp) -> None:
    ret = f.body.block.last_op
    if not isinstance(ret, func.ReturnOp):
        return
    env = infer_labels(f)
    for i, value in enumerate(ret.arguments):
        t = value.type
        if not isinstance(t, TensorType) or t.rank == 0:
            continue
        if output_order(f, i)[1]:
            continue  # a requirement is never overwritten
        owner = value.owner
        if isinstance(owner, Operation) and owner.name in MATMUL_LIKE:
            continue
        order = infer_order(f, env.get(value, [_EMPTY] * t.rank), t)
        if order is not None:
            set_output_order(f, i, order, required=False)


@dataclass(frozen=True)
class AllocationOrderInferencePass(ModulePass):
    """Writes an inferred stride order on each output without a required one, as a hint."""

    name = "allocation-order-inference"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for f in fusion_funcs(op):
            infer_output_hints(f)
