"""Type promotion of the frontend's elementwise ops: one rule, torch's (`torch.result_type`).

The operands of an op fall into four tiers, strongest first:

1. tensors with at least one dim;
2. 0-d tensors;
3. fuser Scalars (`define_scalar` inputs and constants, sizes);
4. Python numbers.

Within a tier dtypes promote as `torch.promote_types` does (f16 with bf16 is f32, a float
beats every integer, complex beats both). A weaker tier counts only when its category
(bool < integer < floating point < complex) is higher than that of every stronger one:

- a 0-d tensor then brings its dtype (i64 tensor * f64 0-d tensor is f64, as in torch);
- Scalars and numbers bring their category's default dtype — i64, f32, c64 (c128 with an f64
  tensor) — never their width: i32 tensor * define_scalar(2.0) is f32, bool tensor + 0.5 is
  f32, f16 tensor * define_scalar(2.0) stays f16. (torch treats Python numbers so; nvFuser keeps
  a Double Scalar's width over an integer tensor, giving f64: fuser follows torch there.)

Without a tensor operand (`where(cond, a, b)` with scalar branches) the Scalars decide among
themselves — two Float Scalars give f32, Double ones f64 — and Python numbers only lift the
category to its default (`where(cond, 2.0, 3.0)` is f32). fp8 tensors compute in f32, and
f16/bf16 Scalars count as Float (as in nvFuser).
"""

from __future__ import annotations

from collections.abc import Sequence

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


def number_dtype(value: object) -> str:
    """The dtype of a Python number operand: its category's default."""
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i64"
    if isinstance(value, float):
        return "f32"
    if isinstance(value, complex):
        return "c64"
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
    dims = zero_dim = scalars = numbers = None
    for v in values:
        if isinstance(v, Tensor):
            if v.ndim:
                dims = _join(dims, computed(v.type.dtype))
            else:
                zero_dim = _join(zero_dim, computed(v.type.dtype))
        elif isinstance(v, Scalar):
            scalars = _join(scalars, scalar_dtype(v))
        else:
            numbers = _join(numbers, number_dtype(v))
    weak = _lift(scalars, numbers)
    if dims is None and zero_dim is None:
        return weak
    if weak is not None:
        weak = CATEGORY_DEFAULT[category(weak)]
    return _lift(dims, _lift(zero_dim, weak))
