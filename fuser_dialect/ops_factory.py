"""Ops that create tensors (iota, full) and the extent query (dim).

After the definitions, each op registers its pieces in the op table (fuser_dialect/op_table.py):
shape rule, reference semantics, run-time extent planner, layout rule and dim rule."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import complex as cplx
from xdsl.dialects.builtin import I64, ComplexType, Float64Type, IntegerAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def, traits_def, var_operand_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from fuser_dialect.canonicalization import DimCanonicalization
from fuser_dialect.extents import ExtentError, ExtentPlan, Step, declared_shape, missing_value, type_flags
from fuser_dialect.interpreter import Value, cast_array, result_dtype, result_shape
from fuser_dialect.op_base import AlongDim, tensor_type
from fuser_dialect.op_table import DimTie, Dims, NotApplicable, TypeOf, extent_operand_ties, no_links, register
from fuser_dialect.types import BROADCAST, COMPLEX_DTYPES, DYNAMIC, TensorType, is_scalar_type


@irdl_op_definition
class DimOp(AlongDim, IRDLOperation):
    """The extent of one dim of a tensor, as an i64 scalar."""

    name = "fuser.dim"
    input = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    result = result_def(i64)
    traits = traits_def(Pure(), DimCanonicalization())
    assembly_format = "$input `,` $dim attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, dim: int):
        super().__init__(operands=[input], result_types=[i64], properties={"dim": IntegerAttr(dim, i64)})

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        if not 0 <= self.axis < t.rank:
            raise VerifyException(f"{self.name}: dim {self.axis} is out of range for {t.describe()} (rank {t.rank})")


@irdl_op_definition
class IotaOp(IRDLOperation):
    """[start, start + step, ...] of `length` elements (a 1-D tensor)."""

    name = "fuser.iota"
    length = operand_def(i64)
    start = operand_def()
    step = operand_def()
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$length `,` $start `,` $step attr-dict `:` `(` type($start) `,` type($step) `)` `->` type($result)"

    def __init__(self, length: SSAValue, start: SSAValue, step: SSAValue, result_type: TensorType):
        super().__init__(operands=[length, start, step], result_types=[result_type])

    def verify_(self) -> None:
        t = tensor_type(self, self.result, "result")
        if t.rank != 1:
            raise VerifyException(f"{self.name}: result must be 1-D, got {t.describe()}")
        for what, v in (("start", self.start), ("step", self.step)):
            if not is_scalar_type(v.type):
                raise VerifyException(f"{self.name}: {what} must be a scalar, got {v.type}")


@irdl_op_definition
class FullOp(IRDLOperation):
    """A tensor of the result type filled with `value`; one i64 extent operand per `?` dim."""

    name = "fuser.full"
    extents = var_operand_def(i64)
    value = operand_def()
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "(`(` $extents^ `)`)? `value` $value attr-dict `:` `(` type($value) `)` `->` type($result)"

    def __init__(self, extents: list[SSAValue], value: SSAValue, result_type: TensorType):
        super().__init__(operands=[extents, value], result_types=[result_type])

    def verify_(self) -> None:
        t = tensor_type(self, self.result, "result")
        n = t.shape.count(DYNAMIC)
        if n != len(self.extents):
            raise VerifyException(
                f"{self.name}: result {t.describe()} has {n} dynamic extent(s) but "
                f"{len(self.extents)} extent operand(s) were given (one per `?`)"
            )
        if not is_scalar_type(self.value.type) and self.value.type != _COMPLEX_FILL:
            raise VerifyException(f"{self.name}: fill value must be a scalar, got {self.value.type}")
        if self.value.type == _COMPLEX_FILL and t.dtype not in COMPLEX_DTYPES:
            raise VerifyException(f"{self.name}: a complex fill value needs a complex result, got {t.describe()}")


_COMPLEX_FILL = ComplexType(Float64Type())
"""The type of a complex fill value: a `complex.constant` (how a complex Scalar constant is made,
fuser_dialect/builder.py _complex_scalar)."""

OPS = [IotaOp, FullOp, DimOp]
"""The ops of this family, in the order the dialect lists them."""


# --- fuser.dim ----------------------------------------------------------------------------


def _interpret_dim(op: DimOp, args: list[Value]) -> Value:
    return np.int64(args[0].shape[op.axis])


def _plan_dim(op: DimOp, plan: ExtentPlan) -> Step:
    x, out, axis = plan.slot[op.input], plan.result_slot(op), op.axis

    def step(S, B, V, R):
        V[out] = S[x][axis]

    return step


def _dim_ties(op: DimOp) -> list[DimTie]:
    return [DimTie(0, op.axis, None)]


_SCALAR = NotApplicable("yields an i64 scalar, not a tensor")

register(
    DimOp,
    shape=_SCALAR,
    interpret=_interpret_dim,
    plan_extents=_plan_dim,
    layout=_SCALAR,
    dim_ties=_dim_ties,
    emitted=NotApplicable("yields an i64 scalar, computed on the host: kernels take it as a parameter"),
)


# --- shared by the factories --------------------------------------------------------------


def _declared_dims(op: IRDLOperation, type_of: TypeOf) -> Dims:
    """A factory's result is what its type declares (there is no operand to infer it from)."""
    return tensor_type(op, op.results[0], "result").shape


# --- fuser.iota ---------------------------------------------------------------------------


def _interpret_iota(op: IotaOp, args: list[Value]) -> Value:
    length, start, step = args
    dtype = result_dtype(op)
    return cast_array(np.asarray(start) + np.asarray(step) * np.arange(int(length)), dtype)


def _plan_iota(op: IotaOp, plan: ExtentPlan) -> Step:
    length, out = plan.slot[op.length], plan.result_slot(op)
    t = op.result.type
    assert isinstance(t, TensorType)
    declared, flags = t.shape[0], type_flags(t)

    def step(S, B, V, R):
        n = V[length]
        if n is None:
            raise missing_value(op, "the iota length")
        n = int(n)
        if n < 0:
            raise ExtentError(f"{op.name}: length {n} is negative at run time")
        if declared not in (DYNAMIC, n) and not (declared == BROADCAST and n == 1):
            raise ExtentError(f"{op.name}: length {n} at run time differs from the result type {t.describe()}")
        S[out], B[out] = (n,), flags

    return step


def _iota_ties(op: IotaOp) -> list[DimTie]:
    return [DimTie(0, None, 0)]


register(
    IotaOp,
    shape=_declared_dims,
    interpret=_interpret_iota,
    plan_extents=_plan_iota,
    layout=no_links,
    dim_ties=_iota_ties,
)


# --- fuser.full ---------------------------------------------------------------------------


def _interpret_full(op: FullOp, args: list[Value]) -> Value:
    shape = result_shape(op, args[:-1])
    return np.full(shape, cast_array(np.asarray(args[-1]), result_dtype(op)))


def _plan_full(op: FullOp, plan: ExtentPlan) -> Step:
    out = plan.result_slot(op)
    t = op.result.type
    assert isinstance(t, TensorType)
    shape_of, flags = declared_shape(op, plan, op.extents), type_flags(t)

    def step(S, B, V, R):
        S[out], B[out] = shape_of(V), flags

    return step


def _full_ties(op: FullOp) -> list[DimTie]:
    return extent_operand_ties(op, first=0)


register(
    FullOp,
    shape=_declared_dims,
    interpret=_interpret_full,
    plan_extents=_plan_full,
    layout=no_links,
    dim_ties=_full_ties,
)


# --- complex.constant (the fill value of a complex Scalar constant) ------------------------------


def _complex_value(op: cplx.ConstantOp) -> complex:
    real, imag = (a.value.data for a in op.value.data)  # type: ignore[attr-defined]
    return complex(real, imag)


def _interpret_complex_constant(op: cplx.ConstantOp, args: list[Value]) -> Value:
    return np.complex128(_complex_value(op))


def _plan_complex_constant(op: cplx.ConstantOp, plan: ExtentPlan) -> Step:
    out, value = plan.result_slot(op), _complex_value(op)

    def step(S, B, V, R):
        V[out] = value

    return step


_scalar_only = NotApplicable("a complex constant: no tensor result")
register(cplx.ConstantOp, shape=_scalar_only, interpret=_interpret_complex_constant,
         plan_extents=_plan_complex_constant, layout=_scalar_only, dim_ties=_scalar_only,
         emitted=NotApplicable("kernels spell it as a literal (lowering/codegen/emit_cuda.py)"))
