"""Type promotion of the frontend's elementwise ops: one rule, torch's (`torch.result_type`).

The operands of an op fall into three tiers, strongest first:

1. tensors with at least one dim;
2. 0-d tensors;
3. scalars: fuser Scalars (`define_scalar` inputs and constants, sizes) and Python numbers.

A Python number is the Scalar `define_scalar` makes of it (`scalar_dtype_of`: bool, Int,
Double, ComplexDouble), as nvFuser's frontend converts it: `where(cond, 3.0, 5.0)` and
`where(cond, define_scalar(3.0), define_scalar(5.0))` are one definition.

Within a tier dtypes promote as `torch.promote_types` does (f16 with bf16 is f32, a float
beats every integer, complex beats both). A weaker tier counts only when its category
(bool < integer < floating point < complex) is higher than that of every stronger one:

- a 0-d tensor then brings its dtype (i64 tensor * f64 0-d tensor is f64, as in torch);
- scalars bring their category's default dtype — i64, f32, c64 (c128 with an f64 tensor) —
  never their width: i32 tensor * define_scalar(2.0) is f32, bool tensor + 0.5 is f32, f16
  tensor * 2.0 stays f16. (torch treats Python numbers so; nvFuser keeps a Double Scalar's width
  over an integer tensor, giving f64: fuser follows torch there.)

Without a tensor operand (`where(cond, a, b)` with scalar branches) the scalars decide among
themselves, as in nvFuser's test_where_dtypes: two Float Scalars give f32, Double ones (or
Python floats) f64, Int32 ones i32, Python ints i64. fp8 tensors compute in f32, and
f16/bf16 Scalars count as Float (as in nvFuser).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fuser_dialect.values import Scalar, Tensor
from fuser_dialect.dtype_rules import promote_complex
from fuser_dialect.types import COMPLEX_DTYPES, FP8_DTYPES

FLOAT_RANK = {"bf16": 1, "f16": 1, "f32": 2, "f64": 3}
INT_RANK = {"i1": 0, "i32": 1, "i64": 2}
CATEGORY_DEFAULT = {0: "i1", 1: "i64", 2: "f32", 3: "c64"}
"""The dtype a scalar brings when it lifts a tensor's category (torch's defaults)."""


def promote(a: str, b: str) -> str:
    """torch.promote_types of two dtypes."""
    if a == b:
        return a
    if a in COMPLEX_DTYPES or b in COMPLEX_DTYPES:
        return promote_complex(a, b)
    fa, fb = a in FLOAT_RANK, b in FLOAT_RANK
    if fa and fb:
        if {a, b} == {"f16", "bf16"}:
            return "f32"
        return max(a, b, key=FLOAT_RANK.__getitem__)
    if fa or fb:
        return a if fa else b
    return max(a, b, key=INT_RANK.__getitem__)


def category(dtype: str) -> int:
    """0 bool, 1 integer, 2 floating point, 3 complex."""
    if dtype in COMPLEX_DTYPES:
        return 3
    return 2 if dtype in FLOAT_RANK else 1 if dtype in ("i32", "i64") else 0


def computed(dtype: str) -> str:
    """The dtype a tensor computes in: fp8 is storage only and computes in f32."""
    return "f32" if dtype in FP8_DTYPES else dtype


def scalar_dtype_of(value: object) -> str:
    """The dtype of `define_scalar(value)` and so of a Python number operand: Bool, Int, Double
    or ComplexDouble (nvFuser's frontend makes a Python number that Scalar)."""
    if isinstance(value, (bool, np.bool_)):
        return "i1"
    if isinstance(value, (int, np.integer)):
        return "i64"
    if isinstance(value, (float, np.floating)):
        return "f64"
    if isinstance(value, (complex, np.complexfloating)):
        return "c128"
    raise TypeError(f"expected a Tensor, Scalar or Python number, got {type(value).__name__}")


def scalar_dtype(value: Scalar) -> str:
    """The dtype a Scalar promotes as: f16/bf16 count as f32, as in nvFuser."""
    dtype = value.dtype
    return "f32" if dtype in ("f16", "bf16") or dtype in FP8_DTYPES else dtype


def _join(a: str | None, b: str) -> str:
    return b if a is None else promote(a, b)


def _lift(stronger: str | None, weaker: str | None) -> str | None:
    """`stronger`, unless `weaker` is of a higher category: then both promoted."""
    if stronger is None:
        return weaker
    if weaker is None or category(weaker) <= category(stronger):
        return stronger
    return promote(stronger, weaker)


def result_dtype(values: Sequence[object]) -> str | None:
    """The dtype a mix of Tensors, Scalars and Python numbers computes in (the module doc's
    rule); None when `values` is empty."""
    dims = zero_dim = scalars = None
    for v in values:
        if isinstance(v, Tensor):
            if v.ndim:
                dims = _join(dims, computed(v.type.dtype))
            else:
                zero_dim = _join(zero_dim, computed(v.type.dtype))
        else:
            scalars = _join(scalars, scalar_dtype(v) if isinstance(v, Scalar) else scalar_dtype_of(v))
    if dims is None and zero_dim is None:
        return scalars
    weak = None if scalars is None else CATEGORY_DEFAULT[category(scalars)]
    return _lift(dims, _lift(zero_dim, weak))
