// fuser_f16.h -- the 16-bit and 8-bit float types of kernels on the GPU, without the toolkit's
// cuda_fp16.h / cuda_bf16.h / cuda_fp8.h (as nvFuser's runtime does): NVRTC 13.5 took ~10 ms
// (fp16 + bf16) and ~30 ms (fp8) a program to parse those, and needed an include path for them
// (measured 2026-12-01 on the 2-core development machine: docs/benchmarks.md).
//
// runtime.prelude() pastes this text where the prelude includes it, for a source that defines
// FUSER_NEED_F16 or FUSER_NEED_FP8 (a kernel with such values: lowering/codegen/render.py); on
// the CPU (FUSER_CPU) fuser_cpu_emu.h defines the same names, and this text is compiled out.
//
// What it provides is the prelude's contract for 16-bit floats, with the CUDA headers' results:
//   __half, __nv_bfloat16      the bits in `__x` (unsigned short), 2-byte aligned; a trivial
//                              default constructor (allowed in __shared__ arrays, T() is +0),
//                              converting from and to float (round to nearest even)
//   __float2half(_rn), __half2float, __float2bfloat16(_rn), __bfloat162float,
//   __half_as_ushort, __ushort_as_half, __bfloat16_as_ushort, __ushort_as_bfloat16
//   __hadd __hsub __hmul __hdiv __hneg __hfma __habs __hmax __hmin, + - * / (and their
//   compound forms), == != < <= > >= on two values of one type: computed in float and rounded
//   back, which is exact for + - * / (float holds more than twice the digits of either type)
//   __ldg on pointers to them, and the warp shuffles
//   __nv_fp8_e4m3, __nv_fp8_e5m2   storage only, the bits in `__x` (unsigned char), as cuda_fp8.h's:
//                              kernels convert them with fuser_fp8.h (torch's semantics)
// Conversions are the PTX instructions cuda_fp16.h / cuda_bf16.h (13.5) emit: cvt.rn.f16.f32 and
// cvt.f32.f16; cvt.rn.bf16.f32 from sm_80 (below, the same round-to-nearest-even in integer
// arithmetic) and cvt.f32.bf16 from sm_90 (below, the bits moved into the high half). NaN becomes
// the canonical 0x7fff, as in those headers and the CPU emulation. A generated program compiles
// to the same cubin as with the toolkit's headers (test/pytest/backends/test_compile_latency.py).
#ifndef FUSER_F16_H
#define FUSER_F16_H
#if !defined(FUSER_CPU)

#if defined(FUSER_NEED_F16)
#define FUSER_F16_FN __device__ __forceinline__

#define FUSER_F16_TYPE(T, TO_BITS, TO_FLOAT)                                                        \
  struct __align__(2) T {                                                                           \
    unsigned short __x;                                                                             \
    T() = default;                                                                                  \
    FUSER_F16_FN T(float f) : __x(TO_BITS(f)) {}                                                    \
    FUSER_F16_FN operator float() const { return TO_FLOAT(__x); }                                   \
    static FUSER_F16_FN T from_bits(unsigned short b) {                                             \
      T r;                                                                                          \
      r.__x = b;                                                                                    \
      return r;                                                                                     \
    }                                                                                               \
  };                                                                                                \
  FUSER_F16_FN T operator+(T a, T b) { return T((float)a + (float)b); }                             \
  FUSER_F16_FN T operator-(T a, T b) { return T((float)a - (float)b); }                             \
  FUSER_F16_FN T operator*(T a, T b) { return T((float)a * (float)b); }                             \
  FUSER_F16_FN T operator/(T a, T b) { return T((float)a / (float)b); }                             \
  FUSER_F16_FN T operator-(T a) { return T::from_bits((unsigned short)(a.__x ^ 0x8000u)); }         \
  FUSER_F16_FN T& operator+=(T& a, T b) { return a = a + b; }                                       \
  FUSER_F16_FN T& operator-=(T& a, T b) { return a = a - b; }                                       \
  FUSER_F16_FN T& operator*=(T& a, T b) { return a = a * b; }                                       \
  FUSER_F16_FN T& operator/=(T& a, T b) { return a = a / b; }                                       \
  FUSER_F16_FN bool operator==(T a, T b) { return (float)a == (float)b; }                           \
  FUSER_F16_FN bool operator!=(T a, T b) { return (float)a != (float)b; }                           \
  FUSER_F16_FN bool operator<(T a, T b) { return (float)a < (float)b; }                             \
  FUSER_F16_FN bool operator<=(T a, T b) { return (float)a <= (float)b; }                           \
  FUSER_F16_FN bool operator>(T a, T b) { return (float)a > (float)b; }                             \
  FUSER_F16_FN bool operator>=(T a, T b) { return (float)a >= (float)b; }                           \
  FUSER_F16_FN T __hadd(T a, T b) { return a + b; }                                                 \
  FUSER_F16_FN T __hsub(T a, T b) { return a - b; }                                                 \
  FUSER_F16_FN T __hmul(T a, T b) { return a * b; }                                                 \
  FUSER_F16_FN T __hdiv(T a, T b) { return a / b; }                                                 \
  FUSER_F16_FN T __hneg(T a) { return -a; }                                                         \
  FUSER_F16_FN T __hfma(T a, T b, T c) { return T(fmaf((float)a, (float)b, (float)c)); }            \
  FUSER_F16_FN T __habs(T a) { return T::from_bits((unsigned short)(a.__x & 0x7fffu)); }            \
  FUSER_F16_FN T __hmax(T a, T b) { return T(fmaxf((float)a, (float)b)); }                          \
  FUSER_F16_FN T __hmin(T a, T b) { return T(fminf((float)a, (float)b)); }                          \
  FUSER_F16_FN T __ldg(const T* p) {                                                                \
    unsigned short b;                                                                               \
    asm("ld.global.nc.b16 %0, [%1];" : "=h"(b) : "l"(p));                                           \
    return T::from_bits(b);                                                                         \
  }                                                                                                 \
  FUSER_F16_FN T __shfl_sync(unsigned mask, T v, int lane, int width = 32) {                        \
    return T::from_bits((unsigned short)__shfl_sync(mask, (int)v.__x, lane, width));                \
  }                                                                                                 \
  FUSER_F16_FN T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {               \
    return T::from_bits((unsigned short)__shfl_up_sync(mask, (int)v.__x, delta, width));            \
  }                                                                                                 \
  FUSER_F16_FN T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {             \
    return T::from_bits((unsigned short)__shfl_down_sync(mask, (int)v.__x, delta, width));          \
  }                                                                                                 \
  FUSER_F16_FN T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {               \
    return T::from_bits((unsigned short)__shfl_xor_sync(mask, (int)v.__x, lane_mask, width));       \
  }

FUSER_F16_FN unsigned short fuser_float_to_half_bits(float f) {
  unsigned short b;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
}
FUSER_F16_FN float fuser_half_bits_to_float(unsigned short b) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(b));
  return f;
}
FUSER_F16_FN unsigned short fuser_float_to_bf16_bits(float f) {
#if __CUDA_ARCH__ >= 800
  unsigned short b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
#else
  const unsigned x = (unsigned)__float_as_int(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
#endif
}
FUSER_F16_FN float fuser_bf16_bits_to_float(unsigned short b) {
#if __CUDA_ARCH__ >= 900
  float f;
  asm("cvt.f32.bf16 %0, %1;" : "=f"(f) : "h"(b));
  return f;
#else
  float f;
  asm("mov.b32 %0, {0, %1};" : "=f"(f) : "h"(b));
  return f;
#endif
}

FUSER_F16_TYPE(__half, fuser_float_to_half_bits, fuser_half_bits_to_float)
FUSER_F16_TYPE(__nv_bfloat16, fuser_float_to_bf16_bits, fuser_bf16_bits_to_float)
#undef FUSER_F16_TYPE

FUSER_F16_FN float __half2float(__half h) { return fuser_half_bits_to_float(h.__x); }
FUSER_F16_FN __half __float2half(float f) { return __half::from_bits(fuser_float_to_half_bits(f)); }
FUSER_F16_FN __half __float2half_rn(float f) { return __float2half(f); }
FUSER_F16_FN unsigned short __half_as_ushort(__half h) { return h.__x; }
FUSER_F16_FN __half __ushort_as_half(unsigned short b) { return __half::from_bits(b); }
FUSER_F16_FN float __bfloat162float(__nv_bfloat16 h) { return fuser_bf16_bits_to_float(h.__x); }
FUSER_F16_FN __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16::from_bits(fuser_float_to_bf16_bits(f)); }
FUSER_F16_FN __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }
FUSER_F16_FN unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
FUSER_F16_FN __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { return __nv_bfloat16::from_bits(b); }
#undef FUSER_F16_FN
#endif  // FUSER_NEED_F16

#if defined(FUSER_NEED_FP8)
struct __nv_fp8_e4m3 {
  unsigned char __x;
};
struct __nv_fp8_e5m2 {
  unsigned char __x;
};
#endif  // FUSER_NEED_FP8

#endif  // !FUSER_CPU
#endif  // FUSER_F16_H
