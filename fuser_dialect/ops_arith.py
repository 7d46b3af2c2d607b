"""The builtin `arith` ops a fusion uses for scalar arithmetic (extents, pad widths, scalar
operands): their semantics, written once for both the reference interpreter (on numpy
scalars) and the run-time extent planner (on Python numbers, None where unknown).

They are not fuser ops: they register no shape, layout or dim rule, and no CUDA emitter
(scalars are computed on the host and passed to kernels as parameters)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Operation

from fuser_dialect.extents import ExtentError, ExtentPlan, Scalar, Step
from fuser_dialect.interpreter import InterpreterError, Value
from fuser_dialect.op_table import NotApplicable, register
from fuser_dialect.types import dtype_name, numpy_dtype


class ScalarFn(NamedTuple):
    fn: Callable[..., Scalar]
    divides: bool = False
    """The second operand is a divisor: zero is an error, not a value."""


def _c_div(a, b):
    """Integer division truncating toward zero (C semantics)."""
    q = abs(int(a)) // abs(int(b))
    return -q if (a < 0) != (b < 0) else q


def _float_div(a, b):
    # IEEE semantics, as the device computes it (Python raises on a zero divisor).
    if b:
        return a / b
    if a == 0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _wrap_int32(a):
    """arith.trunci to i32 (the only narrower scalar integer type; bools come from cmpi)."""
    return (int(a) + 2**31) % 2**32 - 2**31


def _nan_propagating(pick, a, b):
    # arith.maximumf/minimumf: NaN wins, as torch.maximum does (Python's max would not).
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return pick(a, b)


SCALAR_FNS: dict[type[Operation], ScalarFn] = {
    arith.AddiOp: ScalarFn(operator.add),
    arith.SubiOp: ScalarFn(operator.sub),
    arith.MuliOp: ScalarFn(operator.mul),
    arith.DivSIOp: ScalarFn(_c_div, divides=True),
    arith.FloorDivSIOp: ScalarFn(operator.floordiv, divides=True),
    arith.CeilDivSIOp: ScalarFn(lambda a, b: -(-a // b), divides=True),
    arith.RemSIOp: ScalarFn(lambda a, b: a - _c_div(a, b) * b, divides=True),
    arith.MaxSIOp: ScalarFn(max),
    arith.MinSIOp: ScalarFn(min),
    arith.AddfOp: ScalarFn(operator.add),
    arith.SubfOp: ScalarFn(operator.sub),
    arith.MulfOp: ScalarFn(operator.mul),
    arith.DivfOp: ScalarFn(_float_div),
    arith.NegfOp: ScalarFn(operator.neg),
    arith.SIToFPOp: ScalarFn(float),
    arith.FPToSIOp: ScalarFn(int),
    arith.ExtFOp: ScalarFn(float),
    arith.TruncFOp: ScalarFn(float),
    # Scalar-only `fd.ops` calls (fuser_dialect/scalar_ops.py) build these too.
    arith.ExtSIOp: ScalarFn(int),
    arith.ExtUIOp: ScalarFn(int),
    arith.TruncIOp: ScalarFn(lambda a: _wrap_int32(a)),
    arith.MaximumfOp: ScalarFn(lambda a, b: _nan_propagating(max, a, b)),
    arith.MinimumfOp: ScalarFn(lambda a, b: _nan_propagating(min, a, b)),
    arith.AndIOp: ScalarFn(operator.and_),
    arith.OrIOp: ScalarFn(operator.or_),
    arith.XOrIOp: ScalarFn(operator.xor),
    arith.BitcastOp: ScalarFn(lambda a: int(np.float64(a).view(np.int64))),  # f64 -> i64 (scalar signbit)
}
"""The semantics of each arith op on scalars, shared by both users below."""

CMPI_PREDICATES: dict[int, Callable[[Scalar, Scalar], bool]] = {
    0: operator.eq, 1: operator.ne, 2: operator.lt, 3: operator.le, 4: operator.gt, 5: operator.ge,
}
"""arith.cmpi's signed predicates (and eq/ne); unsigned ones never appear on extents."""

CMPF_PREDICATES: dict[int, Callable[[Scalar, Scalar], bool]] = {
    1: operator.eq, 2: operator.gt, 3: operator.ge, 4: operator.lt, 5: operator.le,
    6: lambda a, b: a == a and b == b and a != b, 13: operator.ne,
}
"""arith.cmpf's ordered predicates (oeq ... one; false on NaN) and une (true on NaN), as torch compares."""


def _interpret_with(scalar: ScalarFn) -> Callable[[Operation, list[Value]], Value]:
    def interpret(op: Operation, args: list[Value]) -> Value:
        if scalar.divides and args[1] == 0:
            raise InterpreterError(f"{op.name}: division by zero")
        return numpy_dtype(dtype_name(op.results[0].type)).type(scalar.fn(*args))

    return interpret


def _plan_with(scalar: ScalarFn) -> Callable[[Operation, ExtentPlan], Step]:
    def planner(op: Operation, plan: ExtentPlan) -> Step:
        args, out = [plan.slot[v] for v in op.operands], plan.result_slot(op)

        def step(S, B, V, R):
            values = [V[a] for a in args]
            if None in values:
                V[out] = None
                return
            if scalar.divides and values[1] == 0:
                raise ExtentError(f"{op.name}: division by zero while computing extents")
            V[out] = scalar.fn(*values)

        return step

    return planner


def _cmpi(op: arith.CmpiOp) -> ScalarFn:
    pred = op.predicate.value.data
    if pred not in CMPI_PREDICATES:
        raise ExtentError(f"{op.name}: unsigned predicate {pred} is not supported on extents")
    return ScalarFn(CMPI_PREDICATES[pred])


def _interpret_cmpi(op: arith.CmpiOp, args: list[Value]) -> Value:
    return np.bool_(_cmpi(op).fn(*args))


def _plan_cmpi(op: arith.CmpiOp, plan: ExtentPlan) -> Step:
    return _plan_with(_cmpi(op))(op, plan)


def _cmpf(op: arith.CmpfOp) -> ScalarFn:
    pred = op.predicate.value.data
    if pred not in CMPF_PREDICATES:
        raise ExtentError(f"{op.name}: predicate {pred} is not supported on scalars (oeq, ogt, oge, olt, ole, one, une are)")
    return ScalarFn(CMPF_PREDICATES[pred])


def _interpret_cmpf(op: arith.CmpfOp, args: list[Value]) -> Value:
    return np.bool_(_cmpf(op).fn(*args))


def _plan_cmpf(op: arith.CmpfOp, plan: ExtentPlan) -> Step:
    return _plan_with(_cmpf(op))(op, plan)


def _interpret_constant(op: arith.ConstantOp, args: list[Value]) -> Value:
    return numpy_dtype(dtype_name(op.result.type)).type(op.value.value.data)  # type: ignore[union-attr]


def _plan_constant(op: arith.ConstantOp, plan: ExtentPlan) -> Step:
    value = op.value.value.data  # type: ignore[union-attr]
    t = op.result.type
    if isinstance(t, IntegerType) and t.width.data == 1:
        value = value != 0
    out = plan.result_slot(op)

    def step(S, B, V, R):
        V[out] = value

    return step


def _interpret_select(op: arith.SelectOp, args: list[Value]) -> Value:
    return args[1] if args[0] else args[2]


def _plan_select(op: arith.SelectOp, plan: ExtentPlan) -> Step:
    c, a, b, out = plan.slot[op.cond], plan.slot[op.lhs], plan.slot[op.rhs], plan.result_slot(op)

    def step(S, B, V, R):
        # Known as soon as the condition and the chosen value are.
        V[out] = None if V[c] is None else V[a] if V[c] else V[b]

    return step


def _register_scalar(op_type: type[Operation], interpret, plan_extents) -> None:
    scalar = NotApplicable("scalar arithmetic: no tensor result")
    register(op_type, shape=scalar, interpret=interpret, plan_extents=plan_extents, layout=scalar,
             dim_ties=scalar, emitted=NotApplicable("runs on the host: kernels take its value as a scalar parameter"))


for _op_type, _scalar_fn in SCALAR_FNS.items():
    _register_scalar(_op_type, _interpret_with(_scalar_fn), _plan_with(_scalar_fn))
_register_scalar(arith.CmpiOp, _interpret_cmpi, _plan_cmpi)
_register_scalar(arith.CmpfOp, _interpret_cmpf, _plan_cmpf)
_register_scalar(arith.ConstantOp, _interpret_constant, _plan_constant)
_register_scalar(arith.SelectOp, _interpret_select, _plan_select)
