// fuser_complex.h -- complex64 / complex128 for kernels: storage and compute type in one.
//
// Part of the support text of kernel sources (lowering/codegen/cuda_exprs.py SUPPORT), compiled only when
// the source defines FUSER_NEED_COMPLEX (lowering/codegen/render.py). Plain C++ that NVRTC and g++ both
// take: no <complex>, no cuComplex.h. The layout is numpy's and torch's (real, then imaginary),
// aligned to 8 bytes: complex64 as float2 (one 8-byte access), complex128 as std::complex<double>
// (a grid reduction's 8-byte workspace slots hold it, lowering/schedulers/grid.py). The default
// constructor is trivial: __shared__ arrays of it are allowed.
//
// Supported ops (fuser_dialect/dtype_rules.py): + - * / (unary -), == !=, abs, real, imag, casts
// from real and complex dtypes, sum. Multiplication and division follow c10::complex (division
// scales by the larger part of the divisor, as numpy does).
#if defined(FUSER_NEED_COMPLEX)
template <class T>
struct alignas(8) fuser_complex {
  T re, im;
  fuser_complex() = default;
  __device__ __forceinline__ constexpr fuser_complex(T r, T i = T(0)) : re(r), im(i) {}
  template <class U>
  __device__ __forceinline__ explicit constexpr fuser_complex(fuser_complex<U> z) : re((T)z.re), im((T)z.im) {}
};

template <class T>
__device__ __forceinline__ fuser_complex<T> operator+(fuser_complex<T> a, fuser_complex<T> b) {
  return fuser_complex<T>(a.re + b.re, a.im + b.im);
}
template <class T>
__device__ __forceinline__ fuser_complex<T> operator-(fuser_complex<T> a, fuser_complex<T> b) {
  return fuser_complex<T>(a.re - b.re, a.im - b.im);
}
template <class T>
__device__ __forceinline__ fuser_complex<T> operator-(fuser_complex<T> a) {
  return fuser_complex<T>(-a.re, -a.im);
}
template <class T>
__device__ __forceinline__ fuser_complex<T> operator*(fuser_complex<T> a, fuser_complex<T> b) {
  return fuser_complex<T>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
template <class T>
__device__ __forceinline__ fuser_complex<T> operator/(fuser_complex<T> a, fuser_complex<T> b) {
  const T abs_c = b.re < T(0) ? -b.re : b.re, abs_d = b.im < T(0) ? -b.im : b.im;
  if (abs_c >= abs_d) {
    if (abs_c == T(0) && abs_d == T(0)) return fuser_complex<T>(a.re / abs_c, a.im / abs_d);  // inf or NaN
    const T rat = b.im / b.re, scl = T(1) / (b.re + b.im * rat);
    return fuser_complex<T>((a.re + a.im * rat) * scl, (a.im - a.re * rat) * scl);
  }
  const T rat = b.re / b.im, scl = T(1) / (b.im + b.re * rat);
  return fuser_complex<T>((a.re * rat + a.im) * scl, (a.im * rat - a.re) * scl);
}
template <class T>
__device__ __forceinline__ fuser_complex<T>& operator+=(fuser_complex<T>& a, fuser_complex<T> b) {
  return a = a + b;
}
template <class T>
__device__ __forceinline__ bool operator==(fuser_complex<T> a, fuser_complex<T> b) {
  return a.re == b.re && a.im == b.im;
}
template <class T>
__device__ __forceinline__ bool operator!=(fuser_complex<T> a, fuser_complex<T> b) {
  return !(a == b);
}
__device__ __forceinline__ float fuser_cabs(fuser_complex<float> z) { return hypotf(z.re, z.im); }
__device__ __forceinline__ double fuser_cabs(fuser_complex<double> z) { return hypot(z.re, z.im); }

// Warp shuffles move the two parts separately (the CUDA intrinsics take scalars only).
template <class T>
__device__ __forceinline__ fuser_complex<T> __shfl_sync(unsigned mask, fuser_complex<T> z, int lane, int width = 32) {
  return fuser_complex<T>(__shfl_sync(mask, z.re, lane, width), __shfl_sync(mask, z.im, lane, width));
}
template <class T>
__device__ __forceinline__ fuser_complex<T> __shfl_xor_sync(unsigned mask, fuser_complex<T> z, int lane_mask,
                                                            int width = 32) {
  return fuser_complex<T>(__shfl_xor_sync(mask, z.re, lane_mask, width), __shfl_xor_sync(mask, z.im, lane_mask, width));
}
template <class T>
__device__ __forceinline__ fuser_complex<T> __shfl_up_sync(unsigned mask, fuser_complex<T> z, unsigned delta,
                                                           int width = 32) {
  return fuser_complex<T>(__shfl_up_sync(mask, z.re, delta, width), __shfl_up_sync(mask, z.im, delta, width));
}
#endif  // FUSER_NEED_COMPLEX
