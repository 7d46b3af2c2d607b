"""`fd.ops` calls whose operands are all scalars: they yield a Scalar, built from builtin
`arith` ops and computed on the host like every extent (fuser_dialect/ops_arith.py holds
their semantics), never a kernel.

Operands are normalised first: f32 widens to f64 and i32 to i64 (Python numbers become
constants); a binary op computes in f64 when either side is a float, else in i64 (bools
count as integers). Ops that arith cannot express (exp, sqrt, a float fmod, a non-integer
power, ...) raise a TypeError listing the supported ones; nextafter of two constants is folded
here, in their promoted dtype (f32 for two Float constants, as nvFuser)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import Float64Type, FloatAttr, IntegerAttr, i1, i64
from xdsl.ir import Operation, SSAValue

from fuser_dialect.values import Scalar
from fuser_dialect.types import DataType, dtype_name

if TYPE_CHECKING:
    from fuser_dialect.builder import FusionBuilder

F64 = Float64Type()

_ARITH: dict[str, tuple[type[Operation], type[Operation] | None]] = {
    "add": (arith.AddiOp, arith.AddfOp),
    "sub": (arith.SubiOp, arith.SubfOp),
    "mul": (arith.MuliOp, arith.MulfOp),
    "div": (arith.DivSIOp, arith.DivfOp),
    "fmod": (arith.RemSIOp, None),
    "maximum": (arith.MaxSIOp, arith.MaximumfOp),
    "minimum": (arith.MinSIOp, arith.MinimumfOp),
}
"""(integer op, float op) per binary op; None where arith has no float form."""

_COMPARE: dict[str, tuple[str, str]] = {
    "eq": ("eq", "oeq"), "ne": ("ne", "une"), "lt": ("slt", "olt"),
    "le": ("sle", "ole"), "gt": ("sgt", "ogt"), "ge": ("sge", "oge"),
}
"""(cmpi predicate, cmpf predicate) per comparison; `ne` is true on NaN, as in torch."""

_BITWISE = {"bitwise_and": arith.AndIOp, "bitwise_or": arith.OrIOp, "bitwise_xor": arith.XOrIOp}
_LOGICAL = {"logical_and": arith.AndIOp, "logical_or": arith.OrIOp}

_SCALAR_CAST_TARGETS = ("f64", "f32", "f16", "bf16", "i64", "i32", "i1")

SUPPORTED_UNARY = ("neg", "abs", "reciprocal", "logical_not", "bitwise_not", "signbit")
SUPPORTED_BINARY = (*_ARITH, *_COMPARE, *_BITWISE, *_LOGICAL, "pow", "nextafter")


def _kind(v: SSAValue) -> str:
    """'f', 'i' or 'b' for a float, integer or bool scalar."""
    name = dtype_name(v.type)
    return "b" if name == "i1" else "f" if name.startswith("f") else "i"


class ScalarBuilder:
    """Builds scalar arithmetic into one FusionBuilder."""

    def __init__(self, fd: FusionBuilder):
        self.fd = fd

    def _emit(self, op: Operation) -> SSAValue:
        return self.fd._append(op).results[0]

    def operand(self, x: object, what: str) -> SSAValue:
        """`x` as an f64, i64 or i1 SSA value (Python numbers become constants)."""
        if isinstance(x, bool):
            return self.fd._scalar(x, i1).value
        if isinstance(x, int):
            return self.fd._scalar(x, i64).value
        if isinstance(x, float):
            return self.fd._scalar(x, F64).value
        if not isinstance(x, Scalar):
            raise TypeError(f"{what} must be a Scalar or a Python number, got {type(x).__name__}")
        name = dtype_name(x.value.type)  # a Float constant is an f64 value (x.dtype says f32)
        if name == "f32":
            return self._emit(arith.ExtFOp(x.value, F64))
        if name == "i32":
            return self._emit(arith.ExtSIOp(x.value, i64))
        return x.value

    def constant(self, value: int, kind: str) -> SSAValue:
        """A constant of kind 'f', 'i' or 'b'."""
        if kind == "f":
            return self.fd._scalar(float(value), F64).value
        return self.fd._scalar(bool(value) if kind == "b" else int(value), i1 if kind == "b" else i64).value

    def convert(self, v: SSAValue, kind: str) -> SSAValue:
        """An f64/i64/i1 value as another of those kinds (float -> int truncates, as a cast does)."""
        have = _kind(v)
        if have == kind:
            return v
        if kind == "b":
            zero = self.constant(0, have)
            if have == "f":
                return self._emit(arith.CmpfOp(v, zero, "une"))
            return self._emit(arith.CmpiOp(v, zero, "ne"))
        if have == "b":
            v = self._emit(arith.ExtUIOp(v, i64))
            have = "i"
        if kind == "i":
            return v if have == "i" else self._emit(arith.FPToSIOp(v, i64))
        return self._emit(arith.SIToFPOp(v, F64))

    # -- the ops ---------------------------------------------------------------------
    def unary(self, name: str, x: object) -> Scalar:
        v = self.operand(x, f"{name}: arg")
        build = _UNARY.get(name)
        if build is None:
            raise TypeError(
                f"{name}: not supported on scalars (all operands are scalars, so it would run on the host); "
                f"supported scalar ops: {', '.join(SUPPORTED_UNARY + SUPPORTED_BINARY)}, cast and where"
            )
        return Scalar(self.fd, build(self, v))

    def binary(self, name: str, a: object, b: object) -> Scalar:
        if name == "nextafter":
            return self.nextafter(a, b)
        lhs, rhs = self.operand(a, f"{name}: lhs"), self.operand(b, f"{name}: rhs")
        if name == "pow":
            return Scalar(self.fd, self._pow(lhs, b))
        kinds = {_kind(lhs), _kind(rhs)}
        if name in _LOGICAL:
            return self._apply(_LOGICAL[name], self.convert(lhs, "b"), self.convert(rhs, "b"))
        if name in _BITWISE:
            if "f" in kinds:
                raise TypeError(f"{name}: needs integer or bool scalars, got {dtype_name(lhs.type)} and {dtype_name(rhs.type)}")
            kind = "b" if kinds == {"b"} else "i"
            return self._apply(_BITWISE[name], self.convert(lhs, kind), self.convert(rhs, kind))
        kind = "f" if "f" in kinds else "i"
        lhs, rhs = self.convert(lhs, kind), self.convert(rhs, kind)
        if name in _COMPARE:
            int_pred, float_pred = _COMPARE[name]
            op = arith.CmpfOp(lhs, rhs, float_pred) if kind == "f" else arith.CmpiOp(lhs, rhs, int_pred)
            return Scalar(self.fd, self._emit(op))
        if name not in _ARITH:
            raise TypeError(
                f"{name}: not supported on scalars; supported scalar ops: "
                f"{', '.join(SUPPORTED_UNARY + SUPPORTED_BINARY)}, cast and where"
            )
        int_op, float_op = _ARITH[name]
        op_type = float_op if kind == "f" else int_op
        if op_type is None:
            raise TypeError(f"{name}: not supported on float scalars (arith has no float form); cast to Int first")
        return self._apply(op_type, lhs, rhs)

    def cast(self, x: object, dtype: DataType) -> Scalar:
        """Float targets give an f64 scalar (as float constants are); Int32 an i32."""
        if DataType(dtype).value not in _SCALAR_CAST_TARGETS:
            raise TypeError(f"cast: a scalar cannot be cast to {DataType(dtype).name} (scalars are float, int or bool)")
        v = self.convert(self.operand(x, "cast: arg"), _dtype_kind(DataType(dtype)))
        if DataType(dtype) == DataType.Int32:
            v = self._emit(arith.TruncIOp(v, DataType.Int32.element_type))
        return Scalar(self.fd, v)

    def where(self, cond: object, x: object, y: object) -> Scalar:
        c = self.convert(self.operand(cond, "where: cond"), "b")
        a, b = self.operand(x, "where: x"), self.operand(y, "where: y")
        kind = "f" if "f" in (_kind(a), _kind(b)) else "i"
        return Scalar(self.fd, self._emit(arith.SelectOp(c, self.convert(a, kind), self.convert(b, kind))))

    def nextafter(self, a: object, b: object) -> Scalar:
        """The next value after `a` towards `b` in their promoted dtype (f32 or f64, as nvFuser
        requires). arith has no nextafter, so both must be constants: it is folded here."""
        from fuser_dialect.promotion import result_dtype

        dtype = result_dtype([a, b])
        if dtype not in ("f32", "f64"):
            raise TypeError(f"nextafter: needs Float or Double operands, got {dtype} (promoted from {a!r}, {b!r})")
        values = [_constant_value(v) for v in (a, b)]
        if None in values:
            raise TypeError("nextafter: on scalars both operands must be constants (define_scalar(value) or Python "
                            "numbers): arith has no nextafter to compute it at execution; use a tensor operand")
        if dtype == "f32":
            value = float(np.nextafter(np.float32(values[0]), np.float32(values[1])))
        else:
            value = math.nextafter(float(values[0]), float(values[1]))
        return self.fd._scalar(value, DataType(dtype).element_type)

    def floordiv(self, a: object, b: object) -> Scalar:
        lhs, rhs = (self.operand(v, "floordiv operand") for v in (a, b))
        if "f" in (_kind(lhs), _kind(rhs)):
            raise TypeError(f"//: needs integer scalars, got {dtype_name(lhs.type)} and {dtype_name(rhs.type)}")
        return self._apply(arith.FloorDivSIOp, self.convert(lhs, "i"), self.convert(rhs, "i"))

    # -- helpers ---------------------------------------------------------------------
    def _apply(self, op_type: type[Operation], lhs: SSAValue, rhs: SSAValue) -> Scalar:
        return Scalar(self.fd, self._emit(op_type(lhs, rhs)))

    def _pow(self, base: SSAValue, exponent: object) -> SSAValue:
        """base ** n for a constant integer n, by squaring (arith has no pow)."""
        n = _constant_int(exponent)
        if n is None:
            raise TypeError(
                f"pow: on scalars the exponent must be a constant integer (arith has no general pow), got {exponent!r}"
            )
        kind = "i" if _kind(base) in "ib" else "f"
        base = self.convert(base, kind)
        if n < 0 and kind == "i":
            raise ValueError(f"pow: integer scalar to the negative power {n}")
        result: SSAValue | None = None
        square, mul = base, arith.MuliOp if kind == "i" else arith.MulfOp
        bits = bin(abs(n))[2:][::-1]  # least significant first
        for k, bit in enumerate(bits):
            if bit == "1":
                result = square if result is None else self._emit(mul(result, square))
            if k + 1 < len(bits):
                square = self._emit(mul(square, square))
        if result is None:  # n == 0
            return self.constant(1, kind)
        if n < 0:
            result = self._emit(arith.DivfOp(self.constant(1, "f"), result))
        return result


def _dtype_kind(dtype: DataType) -> str:
    return "b" if dtype == DataType.Bool else "i" if dtype in (DataType.Int, DataType.Int32) else "f"


def _constant_int(x: object) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, Scalar):
        value = _folded(x.value)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer():
            return int(value)
    return None


def _folded(v: SSAValue, depth: int = 0) -> object:
    """The value of a scalar computed from constants only (e.g. `-c` of a constant c, as nvFuser's
    `c ** -c`), by the host semantics of its arith ops; None when an input feeds it."""
    from fuser_dialect.ops_arith import SCALAR_FNS

    owner = v.owner
    if isinstance(owner, arith.ConstantOp):
        attr = owner.value
        return attr.value.data if isinstance(attr, (IntegerAttr, FloatAttr)) else None
    scalar = SCALAR_FNS.get(type(owner)) if isinstance(owner, Operation) and depth < 16 else None
    if scalar is None:
        return None
    values = [_folded(operand, depth + 1) for operand in owner.operands]
    if None in values or (scalar.divides and values[1] == 0):
        return None
    return scalar.fn(*values)


def _constant_value(x: object) -> float | int | None:
    """A Python number, or the value of a constant Scalar; None for a value known at execution."""
    if isinstance(x, (int, float)):
        return x
    if isinstance(x, Scalar) and isinstance(x.value.owner, arith.ConstantOp):
        attr = x.value.owner.value
        if isinstance(attr, (IntegerAttr, FloatAttr)):
            return attr.value.data
    return None


def _neg(b: ScalarBuilder, v: SSAValue) -> SSAValue:
    if _kind(v) == "f":
        return b._emit(arith.NegfOp(v))
    return b._emit(arith.SubiOp(b.constant(0, "i"), b.convert(v, "i")))


def _abs(b: ScalarBuilder, v: SSAValue) -> SSAValue:
    if _kind(v) == "b":
        return v
    zero = b.constant(0, _kind(v))
    negative = b._emit(arith.CmpfOp(v, zero, "olt") if _kind(v) == "f" else arith.CmpiOp(v, zero, "slt"))
    return b._emit(arith.SelectOp(negative, _neg(b, v), v))


def _reciprocal(b: ScalarBuilder, v: SSAValue) -> SSAValue:
    return b._emit(arith.DivfOp(b.constant(1, "f"), b.convert(v, "f")))


def _logical_not(b: ScalarBuilder, v: SSAValue) -> SSAValue:
    return b._emit(arith.XOrIOp(b.convert(v, "b"), b.constant(1, "b")))


def _bitwise_not(b: ScalarBuilder, v: SSAValue) -> SSAValue:
    if _kind(v) == "f":
        raise TypeError("bitwise_not: needs an integer or bool scalar, got a float")
    return b._emit(arith.XOrIOp(v, b.constant(1 if _kind(v) == "b" else -1, _kind(v))))


def _signbit(b: ScalarBuilder, v: SSAValue) -> SSAValue:
    """The sign bit, as torch.signbit: set for -0.0 and negative NaNs too (floats: their bits)."""
    if _kind(v) == "b":
        return b.constant(0, "b")
    bits = b._emit(arith.BitcastOp(v, i64)) if _kind(v) == "f" else v
    return b._emit(arith.CmpiOp(bits, b.constant(0, "i"), "slt"))


_UNARY: dict[str, Callable[[ScalarBuilder, SSAValue], SSAValue]] = {
    "neg": _neg, "abs": _abs, "reciprocal": _reciprocal, "logical_not": _logical_not, "bitwise_not": _bitwise_not,
    "signbit": _signbit,
}
