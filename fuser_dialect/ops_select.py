"""`fuser.select`: torch.select — the slice at one position of one dim, the dim removed.

`fuser.select %x[%i] dim d` reads x with dim d fixed to the scalar %i (an i64 or i32 SSA
value: a constant or a run-time scalar input). A negative index counts from the end, as in
torch. An index outside [-extent, extent) is an IndexError: from the verifier when the
index is a constant and the extent static, else from the run-time extent planner, which
every backend runs before computing anything (an index is a scalar, so checking it is free).

After the definition the op registers its pieces in the op table (fuser_dialect/op_table.py):
shape rule, reference semantics, run-time extent planner, layout rule and dim rule."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import I64, IntegerAttr, i32, i64
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from fuser_dialect.extents import ExtentPlan, Step, constant_value
from fuser_dialect.interpreter import IndexOutOfRange, Value
from fuser_dialect.op_base import AlongDim, check_result, tensor_type
from fuser_dialect.op_table import DimTie, Dims, TypeOf, follow_ties, register
from fuser_dialect.shape_rules import ShapeError
from fuser_dialect.types import TensorType, format_dims

INDEX_TYPES = (i64, i32)


def select_shape(op: str, t: TensorType, dim: int) -> Dims:
    """The input's dims without `dim`."""
    if not 0 <= dim < t.rank:
        raise ShapeError(f"{op}: dim {dim} is out of range for the input {format_dims(t.shape)} (rank {t.rank})")
    return tuple(e for d, e in enumerate(t.shape) if d != dim)


def wrap_index(op: str, index: int, extent: int, dim: int) -> int:
    """torch.select's index in [0, extent): negative counts from the end; out of range raises."""
    if not -extent <= index < extent:
        raise IndexOutOfRange(
            f"{op}: index {index} is out of range for dim {dim} of extent {extent} "
            f"(valid: {-extent}..{extent - 1})"
        )
    return index + extent if index < 0 else index


@irdl_op_definition
class SelectOp(AlongDim, IRDLOperation):
    name = "fuser.select"
    input = operand_def(TensorType)
    index = operand_def()
    dim = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input `[` $index `]` `dim` $dim attr-dict `:` `(` type($input) `,` type($index) `)` `->` type($result)"

    def __init__(self, input: SSAValue, index: SSAValue, dim: int, result_type: TensorType):
        super().__init__(operands=[input, index], result_types=[result_type],
                         properties={"dim": IntegerAttr(dim, i64)})

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        if self.index.type not in INDEX_TYPES:
            raise VerifyException(f"{self.name}: index must be an i64 or i32 scalar, got {self.index.type}")
        dims = select_shape(self.name, t, self.axis)
        index, extent = constant_value(self.index), t.static_extent(self.axis)
        if index is not None and extent is not None:
            try:
                wrap_index(self.name, index, extent, self.axis)
            except IndexOutOfRange as e:
                raise VerifyException(str(e)) from None
        check_result(self, dims, t.dtype)


OPS = [SelectOp]
"""The ops of this family, in the order the dialect lists them."""


def _select_shape(op: SelectOp, type_of: TypeOf) -> Dims:
    return select_shape(op.name, type_of(op.input), op.axis)


def _select_ties(op: SelectOp) -> list[DimTie]:
    """The input's dims but the selected one, in order."""
    kept = [d for d in range(op.input.type.rank) if d != op.axis]
    return [DimTie(0, d, k) for k, d in enumerate(kept)]


def _interpret_select(op: SelectOp, args: list[Value]) -> Value:
    x, index = args
    position = wrap_index(op.name, int(index), x.shape[op.axis], op.axis)
    return np.asarray(np.take(x, position, axis=op.axis))


def _plan_select(op: SelectOp, plan: ExtentPlan) -> Step:
    x, index, out, axis = plan.slot[op.input], plan.slot[op.index], plan.result_slot(op), op.axis

    def step(S, B, V, R):
        if V[index] is not None:
            wrap_index(op.name, int(V[index]), S[x][axis], axis)
        S[out] = S[x][:axis] + S[x][axis + 1:]
        B[out] = B[x][:axis] + B[x][axis + 1:]

    return step


register(
    SelectOp,
    shape=_select_shape,
    interpret=_interpret_select,
    plan_extents=_plan_select,
    layout=follow_ties(_select_ties),
    dim_ties=_select_ties,
)
