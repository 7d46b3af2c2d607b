"""One table of per-op knowledge: each op registers its dialect-level pieces next to its
definition (`register(PadOp, shape=..., interpret=..., ...)`), and every consumer looks them
up here instead of testing op classes one by one.

The pieces:
- `shape`: the result dims from the operands' types (`(op, type_of) -> dims`): the verifier
  checks the declared result against it, `concretize` re-infers types with it;
- `interpret`: the numpy reference semantics (`(op, operand values) -> result value`);
- `plan_extents`: the run-time extent planner (`(op, ExtentPlan) -> step`, see extents.py);
- `layout`: which operand dims each result dim takes its storage order from
  (`op -> [(operand, operand dim, result dim)]`, for allocation-order inference);
- `dim_ties`: which extents of operands and result are equal at run time (`op -> [DimTie]`):
  symbolic extents unify them, `concretize` makes them static together;
- `emitted`: whether lowering/codegen/emit_cuda.EMITTERS must have an emitter for it.

A piece an op cannot have is declared `NotApplicable("why")`, never left out: a missing
piece (None) is what test/pytest/dialect/test_op_table.py reports.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from xdsl.ir import Operation, SSAValue

from fuser_dialect.types import DYNAMIC, TensorType

Dims = tuple[int, ...]
TypeOf = Callable[[SSAValue], TensorType]


class DimTie(NamedTuple):
    """The extent of operand `operand` along `operand_dim` equals the result's along
    `result_dim`. A dim of None stands for the value itself when it is an i64 scalar (an
    extent operand of expand/reshape/full, the length of iota, the result of fuser.dim)."""

    operand: int
    operand_dim: int | None
    result_dim: int | None
    exact: bool = True
    """False where the IR allows the tie to break at run time (an extent-1 dim that is not
    typed `b` may still expand): symbolic extents assume it holds; concretize uses it only
    where its run decided that the dim does not expand (ExactDims' `expands_decided`)."""


DimLink = tuple[int, int, int]
"""(operand, operand dim, result dim): the result dim takes that operand dim's layout."""


@dataclass(frozen=True)
class NotApplicable:
    """Declares that an op has no such piece, and why."""

    reason: str


ShapeRule = Callable[[Any, TypeOf], Dims]
Interpret = Callable[[Any, list], Any]
PlanExtents = Callable[[Any, Any], Any]
LayoutRule = Callable[[Any], Sequence[DimLink]]
DimRule = Callable[[Any], Sequence[DimTie]]


@dataclass(frozen=True)
class OpPieces:
    """The pieces of one op (see the module docstring). None is a missing piece (what
    test_op_table reports); NotApplicable is one the op declares it cannot have."""

    shape: ShapeRule | NotApplicable | None = None
    interpret: Interpret | NotApplicable | None = None
    plan_extents: PlanExtents | NotApplicable | None = None
    layout: LayoutRule | NotApplicable | None = None
    dim_ties: DimRule | NotApplicable | None = None
    emitted: Literal[True] | NotApplicable = True
    """True: lowering/codegen/emit_cuda.EMITTERS must have an entry for the op."""


OP_TABLE: dict[type[Operation], OpPieces] = {}

_DESCRIPTIONS = {
    "shape": "shape rule",
    "interpret": "reference-interpreter implementation",
    "plan_extents": "run-time extent planner",
    "layout": "layout (allocation-order) rule",
    "dim_ties": "dim rule (dim_ties)",
}


def register(op_type: type[Operation], **pieces: Any) -> None:
    """Registers the pieces of `op_type` (keywords: the fields of OpPieces)."""
    if op_type in OP_TABLE:
        raise ValueError(f"{op_type.__name__} is registered twice in the op table")
    OP_TABLE[op_type] = OpPieces(**pieces)


def missing_pieces(op_type: type[Operation], emitters: Container[type[Operation]]) -> list[str]:
    """One line per piece `op_type` lacks (empty when complete); `emitters` are the op
    classes the CUDA emitter handles (fuser_dialect cannot import the lowering)."""
    name = getattr(op_type, "name", op_type.__name__)
    pieces = OP_TABLE.get(op_type)
    if pieces is None:
        return [f"{name}: not registered in the op table (fuser_dialect.op_table.register)"]
    problems = [
        f"{name}: no {what} (register one, or declare it NotApplicable(why))"
        for piece, what in _DESCRIPTIONS.items()
        if getattr(pieces, piece) is None
    ]
    if pieces.emitted is True and op_type not in emitters:
        problems.append(f"{name}: no CUDA emitter in EMITTERS (add one, or register emitted=NotApplicable(why))")
    return problems


def _piece(op: Operation, piece: str) -> Callable | None:
    """The registered piece of `op`'s class; None when it has none, for whatever reason."""
    pieces = OP_TABLE.get(type(op))
    found = getattr(pieces, piece) if pieces is not None else None
    return None if isinstance(found, NotApplicable) else found


def shape_rule(op: Operation) -> ShapeRule | None:
    return _piece(op, "shape")


def interpreter(op: Operation) -> Interpret | None:
    return _piece(op, "interpret")


def extent_planner(op: Operation) -> PlanExtents | None:
    return _piece(op, "plan_extents")


def layout_links(op: Operation) -> Sequence[DimLink]:
    """The op's layout links; none for an op without a layout rule."""
    rule = _piece(op, "layout")
    return rule(op) if rule is not None else ()


def dim_ties(op: Operation) -> Sequence[DimTie]:
    """The op's dim ties; none for an op without a dim rule."""
    rule = _piece(op, "dim_ties")
    return rule(op) if rule is not None else ()


def own_type(value: SSAValue) -> TensorType:
    assert isinstance(value.type, TensorType)
    return value.type


def result_dims(op: Operation, type_of: TypeOf = own_type) -> Dims:
    """The op's result dims by its shape rule, from the operand types `type_of` gives."""
    rule = shape_rule(op)
    if rule is None:
        raise NotImplementedError(f"{op.name}: no shape rule in the op table")
    return rule(op, type_of)


def op_title(op: Operation) -> str:
    """`fuser.binary add`: the name and, for ops with one, the kind (as messages quote ops)."""
    kind = getattr(op, "op_kind", None)
    return f"{op.name} {kind}" if kind is not None else op.name


# --- rules several ops share --------------------------------------------------------------


def same_dims(op: Operation) -> list[DimTie]:
    """Every tensor operand's dim d ties to result dim d (elementwise ops)."""
    return [
        DimTie(k, d, d)
        for k, v in enumerate(op.operands) if isinstance(v.type, TensorType)
        for d in range(v.type.rank)
    ]


def follow_ties(rule: DimRule) -> LayoutRule:
    """A layout rule that follows the tensor-to-tensor ties of a dim rule."""

    def links(op: Operation) -> list[DimLink]:
        return [
            (t.operand, t.operand_dim, t.result_dim)
            for t in rule(op) if t.operand_dim is not None and t.result_dim is not None
        ]

    return links


def same_position(op: Operation) -> list[DimLink]:
    """Layout rule: every tensor operand's dim d lays out result dim d (also resized dims):
    follow_ties(same_dims), without making the ties (it runs once per op of a fusion)."""
    return [(k, d, d) for k, v in enumerate(op.operands) if isinstance(t := v.type, TensorType)
            for d in range(t.rank)]


def no_links(op: Operation) -> list[DimLink]:
    """Layout rule of the factories: no result dim takes an operand's layout."""
    return []


def extent_operand_ties(op: Operation, first: int, skip: Container[int] = ()) -> list[DimTie]:
    """Ties of the `?` result dims to their extent operands: one per `?` in dim order, from
    operand `first` on. Dims in `skip` take their extent elsewhere (their operand goes unused)."""
    result = op.results[0].type
    assert isinstance(result, TensorType)
    dynamic = [d for d, e in enumerate(result.shape) if e == DYNAMIC]
    return [DimTie(first + k, None, d) for k, d in enumerate(dynamic) if d not in skip]
