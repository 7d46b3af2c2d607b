// fuser_fp8.h -- fp8 <-> float conversions with torch's semantics, bit for bit.
//
// Part of the support text of kernel sources (lowering/codegen/cuda_exprs.py SUPPORT), compiled only when
// the source defines FUSER_NEED_FP8 (a kernel with fp8 values, lowering/codegen/render.py). The storage
// types __nv_fp8_e4m3 / __nv_fp8_e5m2 are fuser_f16.h's on the GPU (cuda_fp8.h's layout; the
// toolkit header is never included) and fuser_cpu_emu.h's on the CPU; both hold the bits in `__x`.
//
// Not cuda_fp8.h's conversions: they differ from torch. Its float -> fp8 turns every NaN into
// +NaN (torch keeps the sign), and one saturation mode cannot serve both formats: torch saturates
// e4m3fn (|x| >= 464 and +-inf give +-448) but lets e5m2 overflow to +-inf. The algorithm below is
// fuser_dialect/float8.py's, step for step: round the float significand to nearest even and
// rebias; below the smallest normal, count subnormal steps with rintf (the scaling is exact).
#if defined(FUSER_NEED_FP8)
__device__ __forceinline__ unsigned char fuser_float_to_fp8_bits(float f, int mantissa_bits, int bias,
                                                                 int max_finite, int overflow) {
  const unsigned x = (unsigned)__float_as_int(f);
  const unsigned char sign = (unsigned char)((x >> 24) & 0x80u);
  const unsigned magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7f;  // NaN keeps its sign
  if (magnitude < ((unsigned)(127 - bias + 1) << 23)) {
    const float scale = __int_as_float((127 + bias - 1 + mantissa_bits) << 23);
    return sign | (unsigned char)rintf(__int_as_float((int)magnitude) * scale);
  }
  const int shift = 23 - mantissa_bits;
  const unsigned rounded = (magnitude + (1u << (shift - 1)) - 1u + ((magnitude >> shift) & 1u)) >> shift;
  const int code = (int)rounded - ((127 - bias) << mantissa_bits);
  return sign | (unsigned char)(code > max_finite ? overflow : code);
}

__device__ __forceinline__ __nv_fp8_e4m3 fuser_to_e4m3(float v) {
  __nv_fp8_e4m3 r;
  r.__x = fuser_float_to_fp8_bits(v, 3, 7, 0x7e, 0x7e);  // saturates to +-448
  return r;
}
__device__ __forceinline__ __nv_fp8_e5m2 fuser_to_e5m2(float v) {
  __nv_fp8_e5m2 r;
  r.__x = fuser_float_to_fp8_bits(v, 2, 15, 0x7b, 0x7c);  // overflows to +-inf
  return r;
}

// fp8 -> float is exact; NaNs come out as c10 makes them (e4m3fn 0x7ff00000, e5m2 quietened).
__device__ __forceinline__ float fuser_e4m3_to_float(__nv_fp8_e4m3 v) {
  const unsigned b = v.__x, sign = (b & 0x80u) << 24, e = (b >> 3) & 0xfu, m = b & 0x7u;
  if ((b & 0x7fu) == 0x7fu) return __int_as_float((int)(sign | 0x7ff00000u));
  if (e == 0) return sign ? -(float)m * 0x1p-9f : (float)m * 0x1p-9f;
  return __int_as_float((int)(sign | ((e + 120u) << 23) | (m << 20)));
}
__device__ __forceinline__ float fuser_e5m2_to_float(__nv_fp8_e5m2 v) {
  const unsigned b = v.__x, sign = (b & 0x80u) << 24, e = (b >> 2) & 0x1fu, m = b & 0x3u;
  if (e == 31) return __int_as_float((int)(sign | 0x7f800000u | (m ? 0x400000u | (m << 21) : 0u)));
  if (e == 0) return sign ? -(float)m * 0x1p-16f : (float)m * 0x1p-16f;
  return __int_as_float((int)(sign | ((e + 112u) << 23) | (m << 21)));
}

// A float rounded to what fp8 holds (a cast to fp8 whose value stays in registers).
__device__ __forceinline__ float fuser_round_e4m3(float v) { return fuser_e4m3_to_float(fuser_to_e4m3(v)); }
__device__ __forceinline__ float fuser_round_e5m2(float v) { return fuser_e5m2_to_float(fuser_to_e5m2(v)); }
#endif  // FUSER_NEED_FP8
