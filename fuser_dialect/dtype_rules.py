"""Which ops take fp8 and complex operands, and the dtype of their results.

fp8 (f8E4M3FN, f8E5M2) is a storage dtype, as in torch: casts and data movement take it,
arithmetic does not (the frontend casts fp8 operands to f32; the verifier refuses fp8 in
compute ops). Complex tensors support the ops below; anything else is refused with the list.
real/imag of a real tensor have numpy's meaning: real(x) is x, imag(x) is zeros of x's dtype.
Kinds are compared by name: this module sits below ops_compute, which defines the enums.
"""

from __future__ import annotations

from fuser_dialect.types import COMPLEX_DTYPES, COMPLEX_PART, FP8_DTYPES

COMPLEX_UNARY = ("neg", "abs", "real", "imag", "isreal", "rsqrt")
COMPLEX_BINARY = ("add", "sub", "mul", "div", "eq", "ne")
COMPLEX_REDUCTION = ("sum",)
COMPLEX_WHERE = ("where",)
_PART_RESULT = ("abs", "real", "imag")
"""On a complex input these give the real dtype of its parts."""


def compute_error(title: str, kind: str, dtype: str, supported: tuple[str, ...]) -> str | None:
    """Why `kind` cannot compute on a `dtype` operand (None when it can). `supported` lists
    the kinds of this op family that take complex operands."""
    if dtype in FP8_DTYPES:
        return f"{title}: {dtype} is a storage dtype; cast it to f32 (or wider) before computing on it"
    if dtype in COMPLEX_DTYPES and kind not in supported:
        allowed = ", ".join(supported) if supported else "none"
        return f"{title}: not supported on complex operands ({dtype}); complex supports: {allowed}"
    return None


def unary_result_dtype(kind: str, dtype: str) -> str:
    """The result dtype of a unary op of `kind` on a `dtype` input (bool kinds aside)."""
    if dtype in COMPLEX_DTYPES and kind in _PART_RESULT:
        return COMPLEX_PART[dtype]
    return dtype


def cast_error(title: str, src: str, dst: str) -> str | None:
    """Casts go anywhere except from complex to a real dtype (it would drop the imaginary part)."""
    if src in COMPLEX_DTYPES and dst not in COMPLEX_DTYPES:
        return (
            f"{title}: cannot cast {src} to the real dtype {dst}: it would drop the imaginary part; "
            "use real, imag or abs"
        )
    return None


def promote_complex(a: str, b: str) -> str:
    """torch's promotion when one of `a`, `b` is complex: complex, as wide as the widest float."""
    wide = "c128" in (a, b) or "f64" in (a, b)
    return "c128" if wide else "c64"
