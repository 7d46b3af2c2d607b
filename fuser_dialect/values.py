"""The values a fusion is defined with: `Tensor`, `Scalar` and `Vector` (nvFuser's frontend
types), and `static_int`.

Every `fd.ops` module takes and returns these; they reach the builder only through `self.fd`
(its `ops` and `scalars`), so this module imports no builder module and the builder modules
import each other in one direction: values <- scalar_ops, promotion, builder_* <- builder_ops
<- builder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from xdsl.ir import SSAValue

from fuser_dialect.types import INT64_MAX, DataType, TensorType, dtype_name

if TYPE_CHECKING:
    from fuser_dialect.builder import FusionBuilder


class Scalar:
    """A scalar value of the fusion (an input, a constant, or a size)."""

    def __init__(self, fd: FusionBuilder, value: SSAValue, declared: str | None = None):
        self.fd = fd
        self.value = value
        self.declared = declared
        """The dtype a constant was defined with, where its IR type differs: f32, f16 and bf16
        constants are f64 values in the IR, but promote as the dtype they were given."""

    @property
    def dtype(self) -> str:
        t = self.value.type
        return self.declared or (t.dtype if isinstance(t, TensorType) else dtype_name(t))

    def is_tensor(self) -> bool:
        return False

    @property
    def zero_dim(self) -> Tensor | None:
        """The 0-d tensor a complex Scalar is carried as (None for the others): kernels take no
        complex scalar parameters, so ops use it as the 0-d tensor it is, promoting as a Scalar."""
        return Tensor(self.fd, self.value) if isinstance(self.value.type, TensorType) else None

    # Arithmetic goes through fd.ops (scalar-only calls build arith ops: fuser_dialect/scalar_ops.py);
    # a Tensor on the other side makes it a tensor op (Tensor's reflected method).
    def _op(self, name: str, other: object, reverse: bool = False):
        if isinstance(other, Tensor):
            return NotImplemented
        lhs, rhs = (other, self) if reverse else (self, other)
        return getattr(self.fd.ops, name)(lhs, rhs)

    def __add__(self, o): return self._op("add", o)
    def __radd__(self, o): return self._op("add", o, reverse=True)
    def __sub__(self, o): return self._op("sub", o)
    def __rsub__(self, o): return self._op("sub", o, reverse=True)
    def __mul__(self, o): return self._op("mul", o)
    def __rmul__(self, o): return self._op("mul", o, reverse=True)
    def __truediv__(self, o): return self._op("div", o)
    def __rtruediv__(self, o): return self._op("div", o, reverse=True)
    def __mod__(self, o): return self._op("fmod", o)
    def __pow__(self, o): return self._op("pow", o)
    def __lt__(self, o): return self._op("lt", o)
    def __le__(self, o): return self._op("le", o)
    def __gt__(self, o): return self._op("gt", o)
    def __ge__(self, o): return self._op("ge", o)
    def __abs__(self): return self.fd.ops.abs(self)
    def __neg__(self): return self.fd.ops.neg(self)

    def __floordiv__(self, o):
        if isinstance(o, Tensor):
            return NotImplemented
        return self.fd.scalars.floordiv(self, o)

    def __bool__(self) -> bool:
        # `if s >= 0:` would build a comparison Scalar and read it as always true: a silent bug.
        raise TypeError("a fuser Scalar has no truth value while the fusion is being defined (it is known only "
                        "at execution); branch with fd.ops.where, or compare Python ints")

    def __repr__(self) -> str:
        return f"Scalar({self.dtype})"


class Tensor:
    """A tensor value of the fusion; arithmetic operators map to `fd.ops`."""

    def __init__(self, fd: FusionBuilder, value: SSAValue):
        self.fd = fd
        self.value = value

    @property
    def type(self) -> TensorType:
        t = self.value.type
        assert isinstance(t, TensorType)
        return t

    @property
    def ndim(self) -> int:
        return self.type.rank

    @property
    def dtype(self) -> DataType:
        return DataType(self.type.dtype)

    def size(self, dim: int) -> Scalar:
        return self.fd.ops.size(self, dim)

    def is_tensor(self) -> bool:
        return True

    def shape(self) -> Vector:
        """The extents as a Vector of Int scalars (usable wherever a shape is)."""
        return self.fd.ops.shape(self)

    def __repr__(self) -> str:
        return f"Tensor({self.type.describe()})"

    def __add__(self, o): return self.fd.ops.add(self, o)
    def __radd__(self, o): return self.fd.ops.add(o, self)
    def __sub__(self, o): return self.fd.ops.sub(self, o)
    def __rsub__(self, o): return self.fd.ops.sub(o, self)
    def __mul__(self, o): return self.fd.ops.mul(self, o)
    def __rmul__(self, o): return self.fd.ops.mul(o, self)
    def __truediv__(self, o): return self.fd.ops.div(self, o)
    def __rtruediv__(self, o): return self.fd.ops.div(o, self)
    def __neg__(self): return self.fd.ops.neg(self)
    def __lt__(self, o): return self.fd.ops.lt(self, o)
    def __le__(self, o): return self.fd.ops.le(self, o)
    def __gt__(self, o): return self.fd.ops.gt(self, o)
    def __ge__(self, o): return self.fd.ops.ge(self, o)
    # As nvFuser's Tensor: == and != build comparisons, so identity is the hash.
    def __eq__(self, o): return self.fd.ops.eq(self, o)  # type: ignore[override]
    def __ne__(self, o): return self.fd.ops.ne(self, o)  # type: ignore[override]
    __hash__ = object.__hash__
    def __abs__(self): return self.fd.ops.abs(self)
    def __pow__(self, o): return self.fd.ops.pow(self, o)
    def __rpow__(self, o): return self.fd.ops.pow(o, self)
    def __mod__(self, o): return self.fd.ops.fmod(self, o)
    def __rmod__(self, o): return self.fd.ops.fmod(o, self)
    def __and__(self, o): return self.fd.ops.bitwise_and(self, o)
    def __rand__(self, o): return self.fd.ops.bitwise_and(o, self)
    def __or__(self, o): return self.fd.ops.bitwise_or(self, o)
    def __ror__(self, o): return self.fd.ops.bitwise_or(o, self)
    def __xor__(self, o): return self.fd.ops.bitwise_xor(self, o)
    def __rxor__(self, o): return self.fd.ops.bitwise_xor(o, self)
    def __invert__(self): return self.fd.ops.bitwise_not(self)
    def __lshift__(self, o): return self.fd.ops.bitwise_left_shift(self, o)
    def __rshift__(self, o): return self.fd.ops.bitwise_right_shift(self, o)


class Vector(list):
    """A vector of Int scalars (nvFuser's Vector): a shape, from `fd.define_vector` or
    `t.shape()`. It is a list of Scalars, so every op taking a shape takes it."""

    def __repr__(self) -> str:
        return f"Vector(size={len(self)})"


def static_int(value: object, what: str) -> int:
    """`value` as a Python int that fits the kernels' 64-bit index arithmetic."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} = {value!r}: expected an int")
    if not -INT64_MAX - 1 <= int(value) <= INT64_MAX:
        raise ValueError(f"{what} = {int(value)} does not fit in 64 bits (|value| < 2**63)")
    return int(value)


__all__ = ["Scalar", "Tensor", "Vector", "static_int"]
