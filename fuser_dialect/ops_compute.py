"""Elementwise ops (unary, binary, where, cast) and reductions.

Binary and where operands are tensors or scalars (builtin f64/f32/i64/i32/i1 SSA values);
tensor operands share one rank and dtype (the builder inserts casts for promotion), and
broadcast dims broadcast. Comparisons and logical ops yield i1.

After the definitions, each op registers its pieces in the op table (fuser_dialect/op_table.py):
shape rule, reference semantics, run-time extent planner, layout rule and dim rule."""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import auto

import numpy as np

from xdsl.dialects.builtin import DenseArrayBase, UnitAttr, i64
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Operation, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from fuser_dialect import inverse_erf
from fuser_dialect import shape_rules as rules
from fuser_dialect.canonicalization import CastCanonicalization
from fuser_dialect.dtype_rules import (
    COMPLEX_BINARY, COMPLEX_REDUCTION, COMPLEX_UNARY, COMPLEX_WHERE, cast_error, compute_error, unary_result_dtype,
)
from fuser_dialect.extents import ExtentError, ExtentPlan, Flags, Shape, Step, describe, plan_same_shape
from fuser_dialect.interpreter import InterpreterError, Value, cast_array, compute_dtype, dtype_of, result_dtype
from fuser_dialect.op_base import check_result, tensor_type
from fuser_dialect.op_table import (
    DimTie, Dims, TypeOf, follow_ties, op_title, register, result_dims, same_dims, same_position,
)
from fuser_dialect.types import COMPLEX_DTYPES, FLOAT_DTYPES, INT_DTYPES, TensorType, dtype_name, is_scalar_type


class UnaryKind(StrEnum):
    NEG = auto()
    ABS = auto()
    EXP = auto()
    EXP2 = auto()
    EXPM1 = auto()
    LOG = auto()
    LOG2 = auto()
    LOG1P = auto()
    SQRT = auto()
    RSQRT = auto()
    RECIPROCAL = auto()
    RELU = auto()
    SIGMOID = auto()
    TANH = auto()
    SIN = auto()
    COS = auto()
    ERF = auto()
    FLOOR = auto()
    CEIL = auto()
    ROUND = auto()
    TRUNC = auto()
    SIGN = auto()
    LOGICAL_NOT = auto()
    BITWISE_NOT = auto()
    ISNAN = auto()
    ISINF = auto()
    SIGNBIT = auto()
    FRAC = auto()
    TAN = auto()
    ASIN = auto()
    ACOS = auto()
    ATAN = auto()
    SINH = auto()
    COSH = auto()
    ASINH = auto()
    ACOSH = auto()
    ATANH = auto()
    LOG10 = auto()
    ERFC = auto()
    LGAMMA = auto()
    ISFINITE = auto()
    ISPOSINF = auto()
    ISNEGINF = auto()
    REAL = auto()
    IMAG = auto()
    ISREAL = auto()
    ERFINV = auto()
    ERFCINV = auto()


FLOAT_ONLY_UNARY = {
    UnaryKind.EXP, UnaryKind.EXP2, UnaryKind.EXPM1, UnaryKind.LOG, UnaryKind.LOG2, UnaryKind.LOG1P,
    UnaryKind.SQRT, UnaryKind.RSQRT, UnaryKind.RECIPROCAL, UnaryKind.SIGMOID, UnaryKind.TANH,
    UnaryKind.SIN, UnaryKind.COS, UnaryKind.ERF, UnaryKind.TAN, UnaryKind.ASIN, UnaryKind.ACOS,
    UnaryKind.ATAN, UnaryKind.SINH, UnaryKind.COSH, UnaryKind.ASINH, UnaryKind.ACOSH, UnaryKind.ATANH,
    UnaryKind.LOG10, UnaryKind.ERFC, UnaryKind.LGAMMA, UnaryKind.ERFINV, UnaryKind.ERFCINV,
}
"""Need a float input; the builder computes them in f32 for integer tensors (as torch)."""
FLOAT_INPUT_UNARY = FLOAT_ONLY_UNARY | {UnaryKind.FRAC}
"""Need a float input; frac of an integer is an error in torch, so the builder does not cast."""
BOOL_RESULT_UNARY = {
    UnaryKind.LOGICAL_NOT, UnaryKind.ISNAN, UnaryKind.ISINF, UnaryKind.SIGNBIT, UnaryKind.ISFINITE,
    UnaryKind.ISPOSINF, UnaryKind.ISNEGINF, UnaryKind.ISREAL,
}


class BinaryKind(StrEnum):
    ADD = auto()
    SUB = auto()
    MUL = auto()
    DIV = auto()
    POW = auto()
    FMOD = auto()
    MAXIMUM = auto()
    MINIMUM = auto()
    EQ = auto()
    NE = auto()
    LT = auto()
    LE = auto()
    GT = auto()
    GE = auto()
    LOGICAL_AND = auto()
    LOGICAL_OR = auto()
    BITWISE_AND = auto()
    BITWISE_OR = auto()
    BITWISE_XOR = auto()
    TRUEDIV = auto()
    REMAINDER = auto()
    ATAN2 = auto()
    NEXTAFTER = auto()
    GCD = auto()
    BITWISE_LEFT_SHIFT = auto()
    BITWISE_RIGHT_SHIFT = auto()
    LOGICAL_RIGHT_SHIFT = auto()


BOOL_RESULT_BINARY = {
    BinaryKind.EQ, BinaryKind.NE, BinaryKind.LT, BinaryKind.LE, BinaryKind.GT, BinaryKind.GE,
    BinaryKind.LOGICAL_AND, BinaryKind.LOGICAL_OR,
}
INT_ONLY_BINARY = {
    BinaryKind.GCD, BinaryKind.BITWISE_LEFT_SHIFT, BinaryKind.BITWISE_RIGHT_SHIFT, BinaryKind.LOGICAL_RIGHT_SHIFT,
}
"""Need i32/i64 operands (torch rejects bool and floats)."""
BITWISE_BINARY = {BinaryKind.BITWISE_AND, BinaryKind.BITWISE_OR, BinaryKind.BITWISE_XOR}
"""Need integer or bool operands."""
FLOAT_ONLY_BINARY = {BinaryKind.ATAN2}
"""Need float operands; the builder computes them in f32 for integer tensors (as torch)."""
FULL_PRECISION_BINARY = {BinaryKind.NEXTAFTER}
"""Need f32 or f64 operands: a step to the next f16/bf16 value is not a step in f32 (nvFuser
rejects the 16-bit types too)."""


def binary_result_dtype(kind: BinaryKind, operands: str) -> str:
    """The result dtype of `kind` on operands of dtype `operands` (after promotion)."""
    if kind in BOOL_RESULT_BINARY:
        return "i1"
    if kind == BinaryKind.TRUEDIV and (operands in INT_DTYPES or operands == "i1"):
        return "f32"  # torch.true_divide: integers divide in the default float dtype
    return operands


def binary_operand_error(kind: BinaryKind, operands: str) -> str | None:
    """Why `kind` cannot take operands of dtype `operands`, or None when it can."""
    if kind in INT_ONLY_BINARY and operands not in INT_DTYPES:
        return f"needs integer (i32 or i64) operands, got {operands}"
    if kind in BITWISE_BINARY and operands in FLOAT_DTYPES:
        return f"needs integer or bool operands, got {operands}"
    if kind in FLOAT_ONLY_BINARY and operands not in FLOAT_DTYPES:
        return f"needs floating-point operands, got {operands}"
    if kind in FULL_PRECISION_BINARY and operands not in ("f32", "f64"):
        return f"needs f32 or f64 operands, got {operands}"
    return None


class ReductionKind(StrEnum):
    SUM = auto()
    PROD = auto()
    MAX = auto()
    MIN = auto()


@irdl_attr_definition
class UnaryKindAttr(EnumAttribute[UnaryKind], SpacedOpaqueSyntaxAttribute):
    name = "fuser.unary_kind"


@irdl_attr_definition
class BinaryKindAttr(EnumAttribute[BinaryKind], SpacedOpaqueSyntaxAttribute):
    name = "fuser.binary_kind"


@irdl_attr_definition
class ReductionKindAttr(EnumAttribute[ReductionKind], SpacedOpaqueSyntaxAttribute):
    name = "fuser.reduction_kind"


def _dtype(value: SSAValue) -> str:
    """'f32', 'i1', ... of a tensor or scalar; the type itself when it has no fuser dtype."""
    t = value.type
    if isinstance(t, TensorType):
        return t.dtype
    return dtype_name(t) if is_scalar_type(t) else str(t)


def _tensor_operands(op: IRDLOperation, operands: list[tuple[str, SSAValue]]) -> list[TensorType]:
    tensors = []
    for what, v in operands:
        if isinstance(v.type, TensorType):
            tensors.append(v.type)
        elif not is_scalar_type(v.type):
            raise VerifyException(f"{op.name}: {what} must be a tensor or a scalar, got {v.type}")
    if not tensors:
        raise VerifyException(f"{op.name}: at least one operand must be a tensor (use arith for scalars)")
    return tensors


@irdl_op_definition
class UnaryOp(IRDLOperation):
    name = "fuser.unary"
    kind = prop_def(UnaryKindAttr)
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$kind $input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, kind: UnaryKind, input: SSAValue, result_type: TensorType):
        super().__init__(operands=[input], result_types=[result_type], properties={"kind": UnaryKindAttr(kind)})

    @property
    def op_kind(self) -> UnaryKind:
        return self.kind.data

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        _raise_if(compute_error(f"{self.name} {self.op_kind}", self.op_kind, t.dtype, COMPLEX_UNARY))
        if self.op_kind in FLOAT_INPUT_UNARY and t.dtype not in FLOAT_DTYPES and t.dtype not in COMPLEX_DTYPES:
            raise VerifyException(f"{self.name} {self.op_kind}: needs a floating-point input, got {t.dtype}")
        dtype = "i1" if self.op_kind in BOOL_RESULT_UNARY else unary_result_dtype(self.op_kind, t.dtype)
        check_result(self, t.shape, dtype, f"{self.name} {self.op_kind}")


@irdl_op_definition
class BinaryOp(IRDLOperation):
    name = "fuser.binary"
    kind = prop_def(BinaryKindAttr)
    lhs = operand_def()
    rhs = operand_def()
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$kind $lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)"

    def __init__(self, kind: BinaryKind, lhs: SSAValue, rhs: SSAValue, result_type: TensorType):
        super().__init__(operands=[lhs, rhs], result_types=[result_type], properties={"kind": BinaryKindAttr(kind)})

    @property
    def op_kind(self) -> BinaryKind:
        return self.kind.data

    def verify_(self) -> None:
        tensors = _tensor_operands(self, [("lhs", self.lhs), ("rhs", self.rhs)])
        dtypes = {t.dtype for t in tensors}
        if len(dtypes) != 1:
            raise VerifyException(
                f"{self.name} {self.op_kind}: tensor operands have dtypes {_dtype(self.lhs)} and "
                f"{_dtype(self.rhs)}; cast one of them first"
            )
        _raise_if(compute_error(op_title(self), self.op_kind, tensors[0].dtype, COMPLEX_BINARY))
        error = binary_operand_error(self.op_kind, tensors[0].dtype)
        if error is not None:
            raise VerifyException(f"{op_title(self)}: {error}")
        check_result(self, result_dims(self), binary_result_dtype(self.op_kind, tensors[0].dtype), op_title(self))


@irdl_op_definition
class WhereOp(IRDLOperation):
    """where(cond, x, y): x where cond is true, else y."""

    name = "fuser.where"
    cond = operand_def()
    lhs = operand_def()
    rhs = operand_def()
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$cond `,` $lhs `,` $rhs attr-dict `:` `(` type($cond) `,` type($lhs) `,` type($rhs) `)` `->` type($result)"
    )

    def __init__(self, cond: SSAValue, lhs: SSAValue, rhs: SSAValue, result_type: TensorType):
        super().__init__(operands=[cond, lhs, rhs], result_types=[result_type])

    def verify_(self) -> None:
        _tensor_operands(self, [("condition", self.cond), ("lhs", self.lhs), ("rhs", self.rhs)])
        if _dtype(self.cond) != "i1":
            raise VerifyException(f"{self.name}: condition must have dtype i1, got {_dtype(self.cond)}")
        value_tensors = [v.type for v in (self.lhs, self.rhs) if isinstance(v.type, TensorType)]
        dtypes = {t.dtype for t in value_tensors}
        if len(dtypes) > 1:
            raise VerifyException(
                f"{self.name}: values have dtypes {_dtype(self.lhs)} and {_dtype(self.rhs)}; cast one of them first"
            )
        dtype = value_tensors[0].dtype if value_tensors else self.result.type.dtype
        _raise_if(compute_error(self.name, "where", dtype, COMPLEX_WHERE))
        check_result(self, result_dims(self), dtype)


@irdl_op_definition
class CastOp(IRDLOperation):
    name = "fuser.cast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), CastCanonicalization())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, result_type: TensorType):
        super().__init__(operands=[input], result_types=[result_type])

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        result = tensor_type(self, self.result, "result")
        _raise_if(cast_error(self.name, t.dtype, result.dtype))
        check_result(self, t.shape, result.dtype)


class DimsReduction(IRDLOperation):
    """What the reductions over `dims` share (fuser.reduction, fuser.welford): one input, the
    reduced dims (sorted), and keepdim, which leaves broadcast dims in their place."""

    input = operand_def(TensorType)
    dims = prop_def(DenseArrayBase.constr(i64))
    keepdim = opt_prop_def(UnitAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, kind: tuple[str, Attribute], input: SSAValue, dims: list[int], keepdim: bool,
                 result_type: TensorType):
        props = {kind[0]: kind[1], "dims": DenseArrayBase.from_list(i64, sorted(dims))}
        if keepdim:
            props["keepdim"] = UnitAttr()
        super().__init__(operands=[input], result_types=[result_type], properties=props)

    @property
    def reduced_dims(self) -> tuple[int, ...]:
        return self.dims.get_values()


@irdl_op_definition
class ReductionOp(DimsReduction):
    """sum/prod/max/min over `dims`; keepdim leaves broadcast dims in their place.
    f16/bf16 inputs accumulate in f32 and round once at the end."""

    name = "fuser.reduction"
    kind = prop_def(ReductionKindAttr)
    assembly_format = "$kind $input `dims` $dims (`keepdim` $keepdim^)? attr-dict `:` type($input) `->` type($result)"

    def __init__(self, kind: ReductionKind, input: SSAValue, dims: list[int], keepdim: bool, result_type: TensorType):
        super().__init__(("kind", ReductionKindAttr(kind)), input, dims, keepdim, result_type)

    @property
    def op_kind(self) -> ReductionKind:
        return self.kind.data

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        _raise_if(compute_error(op_title(self), self.op_kind, t.dtype, COMPLEX_REDUCTION))
        check_result(self, result_dims(self), t.dtype, op_title(self))


def _raise_if(error: str | None) -> None:
    """The dtype rules of fuser_dialect.dtype_rules report errors as text; the verifier raises."""
    if error is not None:
        raise VerifyException(error)


OPS = [UnaryOp, BinaryOp, WhereOp, CastOp, ReductionOp]
"""The ops of this family, in the order the dialect lists them."""


# --- semantics, shared by the elementwise ops -------------------------------------------------


def _same_shape(op: IRDLOperation, type_of: TypeOf) -> Dims:
    return type_of(op.operands[0]).shape


def _elementwise_shape(op: IRDLOperation, type_of: TypeOf) -> Dims:
    return rules.elementwise(op_title(op), [type_of(v) for v in op.operands if isinstance(v.type, TensorType)])


def _plan_elementwise(op: Operation, plan: ExtentPlan) -> Step:
    tensors = [plan.slot[v] for v in op.operands if isinstance(v.type, TensorType)]
    out = plan.result_slot(op)
    if len(tensors) == 1:
        x = tensors[0]

        def unary_step(S, B, V, R):
            S[out], B[out] = S[x], B[x]

        return unary_step
    first, rest = tensors[0], tensors[1:]

    def step(S, B, V, R):
        shape, flags = S[first], B[first]
        for t in rest:
            s, f = S[t], B[t]
            if s == shape and f == flags:
                continue
            shape, flags = _join_extents(op, shape, flags, s, f, S, tensors)
        S[out], B[out] = shape, flags

    return step


def _join_extents(op: Operation, shape: Shape, flags: Flags, s: Shape, f: Flags, S: list, tensors: list[int]) -> tuple[Shape, Flags]:
    """Elementwise join: non-broadcast extents must agree; a broadcast dim takes the other's."""
    new_shape, new_flags = list(shape), list(flags)
    for d in range(len(s)):
        if f[d]:
            continue
        if new_flags[d]:
            new_shape[d], new_flags[d] = s[d], False
        elif new_shape[d] != s[d]:
            operands = [v for v in op.operands if isinstance(v.type, TensorType)]
            shown = ", ".join(f"{describe(v)} = {list(S[t])}" for v, t in zip(operands, tensors))
            hint = (f"; a dim of extent 1 broadcasts only when the definition says so: declare it 1 in "
                    f"define_tensor (shape=[..., 1, ...]) or broadcast it, as a `-1` dim never broadcasts"
                    if 1 in (new_shape[d], s[d]) else "")
            raise ExtentError(
                f"{op_title(op)}: dim {d} has extents {new_shape[d]} and {s[d]} at run time, which "
                f"neither match nor broadcast (operands {shown}){hint}"
            )
    return tuple(new_shape), tuple(new_flags)


_SAME_SHAPE = dict(shape=_same_shape, plan_extents=plan_same_shape, layout=same_position, dim_ties=same_dims)
"""The rules of unary and cast: the result is shaped like the input, dim for dim."""

_ELEMENTWISE = dict(shape=_elementwise_shape, plan_extents=_plan_elementwise, layout=same_position, dim_ties=same_dims)
"""The rules of binary and where: tensor operands join dim for dim (broadcast dims broadcast)."""


def _as_compute(value: SSAValue, x: Value, dtype: str) -> np.ndarray:
    # Scalars take the tensor operands' dtype; low-precision tensors compute in f32.
    return np.asarray(x).astype(compute_dtype(dtype))


# --- fuser.unary --------------------------------------------------------------------------------


def _per_element(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    """A math-module function over an array (numpy has no erf/erfc/lgamma)."""
    # asarray: on a 0-d array frompyfunc returns a Python float, which has no astype.
    return lambda x: np.asarray(np.frompyfunc(fn, 1, 1)(x)).astype(x.dtype)


def _lgamma(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:  # a pole (0, -1, -2, ...): +inf, as C's lgamma
        return math.inf


def _round_half_even(x: np.ndarray) -> np.ndarray:
    return np.rint(x)


def _relu(x: np.ndarray) -> np.ndarray:
    # `x < 0`, not `x > 0`: NaN and -0.0 pass through, as torch.relu.
    return x if x.dtype == np.bool_ else np.where(x < 0, np.zeros_like(x), x)


def _sign(x: np.ndarray) -> np.ndarray:
    # (x > 0) - (x < 0): sign(NaN) is 0, as torch.sign (numpy says NaN).
    if x.dtype == np.bool_:
        return x
    return ((x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)).astype(x.dtype)


def _is_float(x: np.ndarray) -> bool:
    return x.dtype.kind == "f"


UNARY: dict[UnaryKind, Callable[[np.ndarray], np.ndarray]] = {
    UnaryKind.NEG: np.negative,
    UnaryKind.ABS: np.abs,
    UnaryKind.EXP: np.exp,
    UnaryKind.EXP2: np.exp2,
    UnaryKind.EXPM1: np.expm1,
    UnaryKind.LOG: np.log,
    UnaryKind.LOG2: np.log2,
    UnaryKind.LOG1P: np.log1p,
    UnaryKind.SQRT: np.sqrt,
    UnaryKind.RSQRT: lambda x: 1 / np.sqrt(x),
    UnaryKind.RECIPROCAL: lambda x: 1 / x,
    UnaryKind.RELU: _relu,
    UnaryKind.SIGMOID: lambda x: 1 / (1 + np.exp(-x)),
    UnaryKind.TANH: np.tanh,
    UnaryKind.SIN: np.sin,
    UnaryKind.COS: np.cos,
    UnaryKind.ERF: _per_element(math.erf),
    UnaryKind.FLOOR: np.floor,
    UnaryKind.CEIL: np.ceil,
    UnaryKind.ROUND: _round_half_even,
    UnaryKind.TRUNC: np.trunc,
    UnaryKind.SIGN: _sign,
    UnaryKind.LOGICAL_NOT: lambda x: x == 0,
    UnaryKind.BITWISE_NOT: lambda x: ~x if x.dtype != np.bool_ else np.logical_not(x),
    UnaryKind.ISNAN: np.isnan,
    UnaryKind.ISINF: np.isinf,
    UnaryKind.SIGNBIT: lambda x: np.signbit(x) if _is_float(x) else x < 0,
    UnaryKind.FRAC: lambda x: x - np.trunc(x),
    UnaryKind.TAN: np.tan,
    UnaryKind.ASIN: np.arcsin,
    UnaryKind.ACOS: np.arccos,
    UnaryKind.ATAN: np.arctan,
    UnaryKind.SINH: np.sinh,
    UnaryKind.COSH: np.cosh,
    UnaryKind.ASINH: np.arcsinh,
    UnaryKind.ACOSH: np.arccosh,
    UnaryKind.ATANH: np.arctanh,
    UnaryKind.LOG10: np.log10,
    UnaryKind.ERFC: _per_element(math.erfc),
    UnaryKind.LGAMMA: _per_element(_lgamma),
    UnaryKind.ISFINITE: np.isfinite,
    UnaryKind.ISPOSINF: np.isposinf,
    UnaryKind.ISNEGINF: np.isneginf,
    UnaryKind.REAL: np.real,
    UnaryKind.IMAG: np.imag,
    UnaryKind.ISREAL: np.isreal,  # every element of a real tensor; imag == 0 on complex
    UnaryKind.ERFINV: _per_element(inverse_erf.erfinv),
    UnaryKind.ERFCINV: _per_element(inverse_erf.erfcinv),
}


def _interpret_unary(op: UnaryOp, args: list[Value]) -> Value:
    x = args[0]
    src = dtype_of(op.input)
    x = x.astype(compute_dtype(src)) if src in ("f16", "bf16") else x
    return cast_array(UNARY[op.op_kind](x), result_dtype(op))


register(UnaryOp, interpret=_interpret_unary, **_SAME_SHAPE)


# --- fuser.binary -------------------------------------------------------------------------------


def _check_divisor(kind: str, b: np.ndarray) -> None:
    # A kernel cannot raise: its lanes dividing by zero give 0 (fuser_idiv/fuser_imod).
    if np.any(b == 0):
        raise InterpreterError(f"fuser.binary {kind}: integer division by zero")


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C division (truncating), with fuser_idiv's MIN / -1 == MIN (wrapping negation)."""
    _check_divisor("div", b)
    floor = a // np.where(b == -1, 1, b)
    inexact = floor * b != a
    q = np.where(inexact & ((a < 0) != (b < 0)), floor + 1, floor)
    return np.where(b == -1, np.negative(a), q).astype(np.result_type(a, b))


def _int_fmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C remainder (the dividend's sign); x % -1 is 0 (never the trap of MIN % -1)."""
    _check_divisor("fmod", b)
    return np.where(b == -1, 0, a - _int_div(a, b) * b).astype(np.result_type(a, b))


def _remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch.remainder (the divisor's sign). Not np.remainder: that gives remainder(-0.0, 3) = +0.0."""
    if _is_float(a):
        mod = np.fmod(a, b)
    else:
        _check_divisor("remainder", b)
        mod = _int_fmod(a, b)
    return np.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod).astype(mod.dtype)


def _true_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_float(a):
        return np.divide(a, b)
    return np.divide(a.astype(np.float32), b.astype(np.float32))


def _unsigned(a: np.ndarray) -> np.ndarray:
    """The two's-complement bits of a signed integer array, as unsigned integers."""
    return a.astype(np.dtype(f"u{a.dtype.itemsize}"))


def _gcd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """As torch: Euclid on |a|, |b| in wrapping arithmetic (|MIN| stays MIN; gcd(MIN, MAX) is -1)."""
    x, y = np.broadcast_arrays(np.abs(a), np.abs(b))  # numpy's abs wraps as well
    while np.any(x != 0):
        live = x != 0
        divisor = np.where(live, x, 1)
        remainder = np.where(divisor == -1, 0, np.fmod(y, divisor))  # C's %, without MIN % -1
        x, y = np.where(live, remainder, x), np.where(live, divisor, y)
    return y.astype(a.dtype)


def _shift_counts(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(count in range?, the count where it is, else 0): counts < 0 or >= the bit width are
    out of range (undefined in C; torch defines their results, see the shift functions)."""
    in_range = (b >= 0) & (b < 8 * a.dtype.itemsize)
    return in_range, np.where(in_range, b, 0).astype(_unsigned(a).dtype)


def _left_shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    in_range, count = _shift_counts(a, b)
    return np.where(in_range, np.left_shift(_unsigned(a), count).astype(a.dtype), 0).astype(a.dtype)


def _right_shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Arithmetic (sign-filling); an out-of-range count fills every bit with the sign, as torch."""
    in_range, count = _shift_counts(a, b)
    return np.where(in_range, np.right_shift(a, count.astype(a.dtype)), np.where(a < 0, -1, 0)).astype(a.dtype)


def _logical_right_shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Zero-filling; an out-of-range count shifts every bit out (0)."""
    in_range, count = _shift_counts(a, b)
    return np.where(in_range, np.right_shift(_unsigned(a), count).astype(a.dtype), 0).astype(a.dtype)


def _is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iub"


_POW_BY_CONSTANT: dict[float, Callable[[np.ndarray], np.ndarray]] = {
    0.0: np.ones_like, 1.0: np.copy, 2.0: lambda a: a * a, 3.0: lambda a: a * a * a, 0.5: np.sqrt,
    -0.5: lambda a: 1 / np.sqrt(a), -1.0: lambda a: 1 / a, -2.0: lambda a: 1 / (a * a),
}
"""A float power by these constant exponents as ATen's pow(Tensor, Scalar) computes it (and the
generated code: lowering/codegen/cuda_exprs.py POW_BY_CONSTANT), not as the general pow."""


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.power, but integer powers with a negative exponent as torch computes them (numpy
    refuses them): 1 for a base of 1, -1 or 1 for a base of -1 (odd or even exponent), else 0
    (the integer part of 1 / base**|exponent|; 0 for a base of 0 too). Overflow wraps."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f" and b.ndim == 0 and float(b) in _POW_BY_CONSTANT:
        with np.errstate(all="ignore"):
            return _POW_BY_CONSTANT[float(b)](a).astype(a.dtype)
    if a.dtype.kind not in "iu" or b.dtype.kind not in "iu":
        return np.power(a, b)
    negative = b < 0
    if not np.any(negative):
        return np.power(a, b)
    powered = np.power(a, np.where(negative, 0, b).astype(b.dtype))
    one = np.ones((), a.dtype)
    inverse = np.where(a == 1, one, np.where(a == -1, np.where(b % 2 == 1, -one, one), 0 * one))
    return np.where(negative, inverse, powered).astype(a.dtype)


BINARY: dict[BinaryKind, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    BinaryKind.ADD: np.add,
    BinaryKind.SUB: np.subtract,
    BinaryKind.MUL: np.multiply,
    BinaryKind.DIV: lambda a, b: _int_div(a, b) if _is_int(a) else np.divide(a, b),
    BinaryKind.POW: _pow,
    BinaryKind.FMOD: lambda a, b: _int_fmod(a, b) if _is_int(a) else np.fmod(a, b),
    BinaryKind.MAXIMUM: np.maximum,
    BinaryKind.MINIMUM: np.minimum,
    BinaryKind.EQ: np.equal,
    BinaryKind.NE: np.not_equal,
    BinaryKind.LT: np.less,
    BinaryKind.LE: np.less_equal,
    BinaryKind.GT: np.greater,
    BinaryKind.GE: np.greater_equal,
    BinaryKind.LOGICAL_AND: lambda a, b: (a != 0) & (b != 0),
    BinaryKind.LOGICAL_OR: lambda a, b: (a != 0) | (b != 0),
    BinaryKind.BITWISE_AND: np.bitwise_and,
    BinaryKind.BITWISE_OR: np.bitwise_or,
    BinaryKind.BITWISE_XOR: np.bitwise_xor,
    BinaryKind.TRUEDIV: _true_divide,
    BinaryKind.REMAINDER: _remainder,
    BinaryKind.ATAN2: np.arctan2,
    BinaryKind.NEXTAFTER: np.nextafter,
    BinaryKind.GCD: _gcd,
    BinaryKind.BITWISE_LEFT_SHIFT: _left_shift,
    BinaryKind.BITWISE_RIGHT_SHIFT: _right_shift,
    BinaryKind.LOGICAL_RIGHT_SHIFT: _logical_right_shift,
}


def _interpret_binary(op: BinaryOp, args: list[Value]) -> Value:
    dtype = next(dtype_of(v) for v in op.operands if isinstance(v.type, TensorType))
    a, b = (_as_compute(v, x, dtype) for v, x in zip(op.operands, args))
    return cast_array(BINARY[op.op_kind](a, b), result_dtype(op))


register(BinaryOp, interpret=_interpret_binary, **_ELEMENTWISE)


# --- fuser.where --------------------------------------------------------------------------------


def _interpret_where(op: WhereOp, args: list[Value]) -> Value:
    dtype = result_dtype(op)
    cond = np.asarray(args[0]).astype(bool)
    a, b = (_as_compute(v, x, dtype) for v, x in zip(op.operands[1:], args[1:]))
    return cast_array(np.where(cond, a, b), dtype)


register(WhereOp, interpret=_interpret_where, **_ELEMENTWISE)


# --- fuser.cast ---------------------------------------------------------------------------------


def _interpret_cast(op: CastOp, args: list[Value]) -> Value:
    return cast_array(args[0], result_dtype(op))


register(CastOp, interpret=_interpret_cast, **_SAME_SHAPE)


# --- fuser.reduction ----------------------------------------------------------------------------


def _reduction_shape(op: ReductionOp, type_of: TypeOf) -> Dims:
    return rules.reduction(op_title(op), type_of(op.input), op.reduced_dims, op.keepdim is not None)


def _reduction_ties(op: ReductionOp) -> list[DimTie]:
    """Kept dims tie to their place in the result; reduced dims leave (or become `b`)."""
    reduced, rank = set(op.reduced_dims), op.input.type.rank
    kept = [d for d in range(rank) if d not in reduced]
    if op.keepdim is not None:
        return [DimTie(0, d, d) for d in kept]
    return [DimTie(0, d, k) for k, d in enumerate(kept)]


def _interpret_reduction(op: ReductionOp, args: list[Value]) -> Value:
    x = args[0]
    src = dtype_of(op.input)
    acc = compute_dtype(src) if src != "i32" else np.dtype(np.int64)
    x = x.astype(acc)
    axes = tuple(op.reduced_dims)
    keep = op.keepdim is not None
    kind = op.op_kind
    if kind == ReductionKind.SUM:
        r = np.sum(x, axis=axes, keepdims=keep, dtype=acc)
    elif kind == ReductionKind.PROD:
        r = np.prod(x, axis=axes, keepdims=keep, dtype=acc)
    else:
        fn = np.max if kind == ReductionKind.MAX else np.min
        if x.size == 0 or any(x.shape[a] == 0 for a in axes):
            info = np.finfo(acc) if acc.kind == "f" else np.iinfo(acc)
            init = (-np.inf if acc.kind == "f" else info.min) if kind == ReductionKind.MAX else (
                np.inf if acc.kind == "f" else info.max)
            r = fn(x, axis=axes, keepdims=keep, initial=init)
        else:
            r = fn(x, axis=axes, keepdims=keep)
    return cast_array(r, result_dtype(op))


def _plan_reduction(op: ReductionOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    dims = set(op.reduced_dims)
    keep = op.keepdim is not None

    def step(S, B, V, R):
        shape, flags = S[x], B[x]
        if keep:
            S[out] = tuple(1 if d in dims else e for d, e in enumerate(shape))
            B[out] = tuple(True if d in dims else b for d, b in enumerate(flags))
        else:
            S[out] = tuple(e for d, e in enumerate(shape) if d not in dims)
            B[out] = tuple(b for d, b in enumerate(flags) if d not in dims)

    return step


register(
    ReductionOp,
    shape=_reduction_shape,
    interpret=_interpret_reduction,
    plan_extents=_plan_reduction,
    layout=follow_ties(_reduction_ties),
    dim_ties=_reduction_ties,
)
