"""fp8 conversions with torch's semantics, bit for bit (the reference for every backend).

torch converts to fp8 through float (a double or an integer is first rounded to f32), then
rounds to nearest even. Out-of-range values differ by format: float8_e4m3fn has no infinity
and SATURATES (|x| >= 464, infinities included, gives +-448), float8_e5m2 overflows to +-inf.
NaN keeps its sign (0x7f / 0xff). ml_dtypes disagrees on exactly those points (e4m3fn
overflow gives NaN, e5m2 NaN is 0x7e), hence this module. fp8 -> f32 is exact; NaN payloads
follow torch (c10's conversion): e4m3fn NaN -> 0x7ff00000, e5m2 NaN quietened.

The C spelling (lowering/runtime/fuser_fp8.h) is the same algorithm, step for step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fuser_dialect.types import numpy_dtype


@dataclass(frozen=True)
class Fp8Format:
    mantissa_bits: int
    bias: int
    max_finite: int
    """Bit pattern (sign excluded) of the largest finite value."""
    overflow: int
    """What an out-of-range value (or an infinity) becomes, sign excluded."""


FORMATS = {
    "f8E4M3FN": Fp8Format(mantissa_bits=3, bias=7, max_finite=0x7E, overflow=0x7E),
    "f8E5M2": Fp8Format(mantissa_bits=2, bias=15, max_finite=0x7B, overflow=0x7C),
}
NAN_BITS = 0x7F


def f32_to_fp8_bits(x: np.ndarray, dtype: str) -> np.ndarray:
    """The fp8 bit patterns (uint8) of f32 values `x`."""
    fmt = FORMATS[dtype]
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    sign = ((bits >> 24) & 0x80).astype(np.uint8)
    magnitude = bits & 0x7FFFFFFF
    shift = 23 - fmt.mantissa_bits
    # Normal range: round the f32 significand to nearest even, then rebias the exponent.
    rounded = (magnitude + ((1 << (shift - 1)) - 1) + ((magnitude >> shift) & 1)) >> shift
    normal = rounded.astype(np.int64) - ((127 - fmt.bias) << fmt.mantissa_bits)
    normal = np.where(normal > fmt.max_finite, fmt.overflow, normal)
    # Below the smallest normal: a count of subnormal steps, rounded to nearest even (the
    # scaling by a power of two is exact). A count of 2**M is the smallest normal's pattern.
    scale = np.float32(2.0 ** (fmt.bias - 1 + fmt.mantissa_bits))
    with np.errstate(all="ignore"):  # the lanes outside the subnormal range are discarded
        subnormal = np.rint(magnitude.view(np.float32) * scale).astype(np.int64)
    min_normal = (127 - fmt.bias + 1) << 23
    result = np.where(magnitude < min_normal, subnormal, normal)
    result = np.where(magnitude > 0x7F800000, NAN_BITS, result)
    return (result.astype(np.uint8) | sign).reshape(np.shape(x))


def fp8_bits_to_f32(bits: np.ndarray, dtype: str) -> np.ndarray:
    """The f32 values of fp8 bit patterns (exact; a lookup of the 256 patterns)."""
    return _TABLES[dtype][np.asarray(bits, dtype=np.uint8)]


def _decode(pattern: int, dtype: str) -> int:
    """f32 bits of one fp8 pattern, as c10 computes them."""
    fmt = FORMATS[dtype]
    m_bits, sign = fmt.mantissa_bits, (pattern & 0x80) << 24
    exponent, mantissa = (pattern & 0x7F) >> m_bits, pattern & ((1 << m_bits) - 1)
    top = (1 << (7 - m_bits)) - 1
    if dtype == "f8E4M3FN" and pattern & 0x7F == 0x7F:
        return sign | 0x7FF00000
    if dtype == "f8E5M2" and exponent == top:
        return sign | 0x7F800000 | ((0x400000 | mantissa << 21) if mantissa else 0)
    if exponent == 0:
        value = np.float32(mantissa * 2.0 ** (1 - fmt.bias - m_bits))
        return sign | int(np.array(value, np.float32).view(np.uint32))
    return sign | (exponent + 127 - fmt.bias) << 23 | mantissa << (23 - m_bits)


_TABLES = {
    name: np.array([_decode(p, name) for p in range(256)], dtype=np.uint32).view(np.float32) for name in FORMATS
}


def to_fp8(x: np.ndarray, dtype: str) -> np.ndarray:
    """Any real array cast to fp8 `dtype` as torch casts it (through f32)."""
    x = np.asarray(x)
    if x.dtype.name in ("float8_e4m3fn", "float8_e5m2"):
        x = from_fp8(x)
    with np.errstate(invalid="ignore", over="ignore"):
        f32 = x.astype(np.float32)
    return f32_to_fp8_bits(f32, dtype).view(numpy_dtype(dtype))


def from_fp8(x: np.ndarray) -> np.ndarray:
    """An fp8 array's values as f32."""
    name = "f8E4M3FN" if x.dtype.name == "float8_e4m3fn" else "f8E5M2"
    return fp8_bits_to_f32(x.view(np.uint8), name)


def is_fp8_array(x: np.ndarray) -> bool:
    return x.dtype.name in ("float8_e4m3fn", "float8_e5m2")
