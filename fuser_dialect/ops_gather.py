"""The gather family: gather (torch.gather, non-exact), take_along_axis (exact, fusible)
and index_select (1-D index).

After the definitions, each op registers its pieces in the op table (fuser_dialect/op_table.py):
shape rule, reference semantics, run-time extent planner, layout rule and dim rule."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import I64, IntegerAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure

from fuser_dialect import shape_rules as rules
from fuser_dialect.extents import ExtentError, ExtentPlan, Step
from fuser_dialect.interpreter import InterpreterError, Value, check_index_range
from fuser_dialect.op_base import AlongDim, check_result, tensor_type
from fuser_dialect.op_table import DimTie, Dims, TypeOf, follow_ties, register, result_dims
from fuser_dialect.types import TensorType


class _IndexOp(AlongDim, IRDLOperation):
    input = operand_def(TensorType)
    index = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$input `[` $index `]` `dim` $dim attr-dict `:` `(` type($input) `,` type($index) `)` `->` type($result)"
    )

    def __init__(self, input: SSAValue, index: SSAValue, dim: int, result_type: TensorType):
        super().__init__(operands=[input, index], result_types=[result_type],
                         properties={"dim": IntegerAttr(dim, i64)})

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        tensor_type(self, self.index, "index")
        check_result(self, result_dims(self), t.dtype)


@irdl_op_definition
class GatherOp(_IndexOp):
    """torch.gather: out[i][j] = input[i][index[i][j]] for dim 1; index.size(d) <= input.size(d)."""

    name = "fuser.gather"


@irdl_op_definition
class TakeAlongAxisOp(_IndexOp):
    """np.take_along_axis: like gather, but index extents equal the input's off `dim`."""

    name = "fuser.take_along_axis"


@irdl_op_definition
class IndexSelectOp(_IndexOp):
    """torch.index_select: picks whole slices along `dim` with a 1-D index."""

    name = "fuser.index_select"


OPS = [GatherOp, TakeAlongAxisOp, IndexSelectOp]
"""The ops of this family, in the order the dialect lists them."""


# --- shared ----------------------------------------------------------------------------------


def _input_off_axis_and_index_ties(op: _IndexOp) -> list[DimTie]:
    """The input off `dim`, and the index on every dim, tie to the result."""
    rank = op.input.type.rank
    return [DimTie(0, d, d) for d in range(rank) if d != op.axis] + [DimTie(1, d, d) for d in range(rank)]


# --- fuser.gather -------------------------------------------------------------------------


def _gather_shape(op: GatherOp, type_of: TypeOf) -> Dims:
    return rules.gather(op.name, type_of(op.input), type_of(op.index), op.axis)


def _gather_ties(op: GatherOp) -> list[DimTie]:
    """The result is shaped like the index; off `dim` the index may be shorter than the input."""
    return [DimTie(1, d, d) for d in range(op.index.type.rank)]


def _interpret_gather(op: GatherOp, args: list[Value]) -> Value:
    x, index = args
    dim = op.axis
    for d in range(x.ndim):
        if d != dim and index.shape[d] > x.shape[d]:
            raise InterpreterError(f"{op.name}: index extent {index.shape[d]} exceeds input extent {x.shape[d]} in dim {d}")
    check_index_range(op, index, x.shape[dim])
    view = x[tuple(slice(None) if d == dim else slice(0, index.shape[d]) for d in range(x.ndim))]
    return np.take_along_axis(view, index.astype(np.int64), axis=dim)


def _plan_gather(op: GatherOp, plan: ExtentPlan) -> Step:
    x, index, out, axis = plan.slot[op.input], plan.slot[op.index], plan.result_slot(op), op.axis
    plan.gathers.append((x, index, axis))  # RuntimeExtents.exact_gathers reads them

    def step(S, B, V, R):
        for d, (a, b) in enumerate(zip(S[x], S[index])):
            if d != axis and b > a:
                raise ExtentError(f"{op.name}: index extent {b} exceeds input extent {a} in dim {d} at run time")
        S[out], B[out] = S[index], B[index]

    return step


register(
    GatherOp,
    shape=_gather_shape,
    interpret=_interpret_gather,
    plan_extents=_plan_gather,
    layout=follow_ties(_input_off_axis_and_index_ties),
    dim_ties=_gather_ties,
)


# --- fuser.take_along_axis ----------------------------------------------------------------


def _take_along_axis_shape(op: TakeAlongAxisOp, type_of: TypeOf) -> Dims:
    return rules.take_along_axis(op.name, type_of(op.input), type_of(op.index), op.axis)


def _interpret_take_along_axis(op: TakeAlongAxisOp, args: list[Value]) -> Value:
    x, index = args
    dim = op.axis
    check_index_range(op, index, x.shape[dim])
    shape_x = list(x.shape)
    shape_i = list(index.shape)
    for d in range(x.ndim):
        if d == dim:
            continue
        if shape_x[d] != shape_i[d] and 1 not in (shape_x[d], shape_i[d]):
            raise InterpreterError(f"{op.name}: dim {d} has extents {shape_x[d]} (input) and {shape_i[d]} (index) at run time")
        n = max(shape_x[d], shape_i[d])
        shape_x[d] = shape_i[d] = n
    shape_x[dim] = x.shape[dim]
    return np.take_along_axis(np.broadcast_to(x, shape_x), np.broadcast_to(index, shape_i).astype(np.int64), axis=dim)


def _plan_take_along_axis(op: TakeAlongAxisOp, plan: ExtentPlan) -> Step:
    x, index, out, axis = plan.slot[op.input], plan.slot[op.index], plan.result_slot(op), op.axis

    def step(S, B, V, R):
        sx, si, fx, fi = S[x], S[index], B[x], B[index]
        shape, flags = list(si), list(fi)
        for d in range(len(sx)):
            if d == axis:
                continue
            if fi[d]:
                shape[d], flags[d] = sx[d], fx[d]
            elif not fx[d] and sx[d] != si[d]:
                raise ExtentError(
                    f"{op.name}: dim {d} has extents {sx[d]} (input) and {si[d]} (index) at run time; "
                    f"take_along_axis needs equal (or broadcast) extents off dim {axis}"
                )
        S[out], B[out] = tuple(shape), tuple(flags)

    return step


register(
    TakeAlongAxisOp,
    shape=_take_along_axis_shape,
    interpret=_interpret_take_along_axis,
    plan_extents=_plan_take_along_axis,
    layout=follow_ties(_input_off_axis_and_index_ties),
    dim_ties=_input_off_axis_and_index_ties,
)


# --- fuser.index_select -------------------------------------------------------------------


def _index_select_shape(op: IndexSelectOp, type_of: TypeOf) -> Dims:
    return rules.index_select(op.name, type_of(op.input), type_of(op.index), op.axis)


def _index_select_ties(op: IndexSelectOp) -> list[DimTie]:
    ties = [DimTie(0, d, d) for d in range(op.input.type.rank) if d != op.axis]
    if op.index.type.rank == 1:
        ties.append(DimTie(1, 0, op.axis))
    return ties


def _interpret_index_select(op: IndexSelectOp, args: list[Value]) -> Value:
    x, index = args
    check_index_range(op, index, x.shape[op.axis])
    return np.take(x, index.reshape(-1).astype(np.int64), axis=op.axis)


def _plan_index_select(op: IndexSelectOp, plan: ExtentPlan) -> Step:
    x, index, out, axis = plan.slot[op.input], plan.slot[op.index], plan.result_slot(op), op.axis

    def step(S, B, V, R):
        si, fi = S[index], B[index]
        n, fn = (si[0], fi[0]) if si else (1, False)
        S[out] = tuple(n if d == axis else e for d, e in enumerate(S[x]))
        B[out] = tuple(fn if d == axis else b for d, b in enumerate(B[x]))

    return step


register(
    IndexSelectOp,
    shape=_index_select_shape,
    interpret=_interpret_index_select,
    plan_extents=_plan_index_select,
    layout=follow_ties(_index_select_ties),
    dim_ties=_index_select_ties,
)
