// fuser_prelude.cuh -- the text every generated kernel source starts with.
//
// The emitter prepends this file's TEXT (it does not #include it), so NVRTC needs no include path
// for it. The same kernel text then compiles in two modes:
//   GPU mode  NVRTC or nvcc (__CUDACC__): plain CUDA that includes no header (the 16-bit and
//             fp8 types are fuser_f16.h's, pasted in for a source that defines FUSER_NEED_F16 or
//             FUSER_NEED_FP8: lowering/codegen/render.py), so NVRTC needs no include path.
//   CPU mode  g++ -std=c++20 -fopenmp -DFUSER_CPU -I<this directory> (lowering/backends/cpu_runtime.py):
//             this file includes fuser_cpu_emu.h, which emulates the CUDA subset below.
//
// Contract for generated code (everything else CUDA offers is unsupported on the CPU):
//   Kernels     extern "C" __global__ void k(params...) { ... }
//               FUSER_HOST_LAUNCHER(k)            after each kernel, no semicolon; nothing on the GPU
//               Parameters: pointers and arithmetic/__half/__nv_bfloat16 scalars only.
//   Global memory: EVERY access goes through these (the CPU run counts their bytes):
//     T    fuser_ld(const T* ptr, I idx)                     ptr[idx]
//     T    fuser_ldg(const T* ptr, I idx)                    ptr[idx] through the read-only cache
//                                                            (__ldg; T arithmetic, __half, bf16)
//     void fuser_st(T* ptr, I idx, T value)                  ptr[idx] = value (value converts to T)
//     void fuser_ld_vec<N>(const T* ptr, I idx, T* out)      out[0..N) = ptr[idx..idx+N)
//     void fuser_st_vec<N>(T* ptr, I idx, const T* in)       ptr[idx..idx+N) = in[0..N)
//     T    fuser_ld_if(bool ok, const T* ptr, I idx)         ok ? ptr[idx] : T()  (no access if !ok)
//     void fuser_ld_vec_if<N>(bool ok, const T* ptr, I idx, T* out)   the same, N elements
//       I: any integer type. The vector forms are ONE access of N*sizeof(T) in {2,4,8,16} bytes:
//       ptr+idx must be aligned to that size (a misaligned access faults on the GPU and is
//       reported as an error on the CPU).
//   Shared memory   __shared__ __align__(16) T name[CONST];     static, per block
//                   FUSER_DYNAMIC_SHARED(T, name);              T* name = dynamic shared memory
//                   (size given at launch: dynamic_smem_bytes)
//   Sync            __syncthreads(), __syncthreads_count/and/or(pred), __syncwarp(mask)
//                   __shfl_sync/__shfl_up_sync/__shfl_down_sync/__shfl_xor_sync(mask, v, lane|delta[, width])
//                   for any 1-8 byte type; __ballot_sync, __all_sync, __any_sync.
//                   A kernel using any of these must be launched with needs_sync=true on the CPU.
//   Atomics         CUDA's overloads: atomicAdd (int, unsigned, unsigned long long, float, double),
//                   atomicExch (those but double), atomicAnd/Or/Xor/CAS (int, unsigned, unsigned
//                   long long), atomicMax/Min (those and long long), atomicSub (int, unsigned).
//                   Relaxed; not counted as bytes loaded/stored.
//   Math            <math.h> float and double functions (expf, tanhf, ... and the float
//                   overloads exp(float), ...), fmaxf, fminf, max/min, rsqrtf, rsqrt, __expf,
//                   __logf, __fdividef, __frcp_rn, __fsqrt_rn, __saturatef, __int_as_float,
//                   __float_as_int, __popc, __clz, __ffs, INFINITY, NAN, CUDART_INF_F, CUDART_NAN_F;
//                   __float2int_rn/rz/rd/ru, __double2int_rz, __float2ll_rz, __double2ll_rz
//                   (saturating, NaN -> 0, as cvt on the GPU).
//   16-bit floats   __half, __nv_bfloat16; __float2half(_rn), __half2float, __float2bfloat16(_rn),
//                   __bfloat162float (round-to-nearest-even); __hadd/__hmul/... and + - * / on
//                   two values of one type. Compute in float and convert explicitly: mixing
//                   __half with float in one expression is ambiguous in CUDA. On the GPU these
//                   are fuser_f16.h's (FUSER_NEED_F16): a source must not also include
//                   cuda_fp16.h / cuda_bf16.h / cuda_fp8.h, which define the same names.
//   Not emulated    CUDA vector types (float4, ...; use fuser_ld_vec), textures, cooperative groups,
//                   clusters, async copies, threads spinning on values other threads write.
//
// Running on the CPU (lowering/backends/cpu_runtime.py):
//   CpuModule.from_source(source).launch("k", grid, block, [arrays and numpy scalars],
//                                        needs_sync=<kernel uses any Sync op>, dynamic_smem_bytes=...)
//   returns the bytes loaded/stored through the accessors above; deadlocks, barrier divergence and
//   misaligned vector accesses raise lowering.errors.LaunchError; a launch the GPU would refuse
//   (static + dynamic shared memory, parameter bytes: lowering/device.py) LaunchLimitError. Compiled with -DFUSER_MEMCHECK
//   (FUSER_MEMCHECK=1), every accessor first checks that its elements lie inside the pointer
//   parameter ptr came from; a violation raises lowering.errors.MemcheckError instead.
#ifndef FUSER_PRELUDE_CUH
#define FUSER_PRELUDE_CUH

#if defined(FUSER_CPU)
#include "fuser_cpu_emu.h"
#define FUSER_COUNT_LOAD(bytes) ::fuser_emu::count_load(bytes)
#define FUSER_COUNT_STORE(bytes) ::fuser_emu::count_store(bytes)
#if defined(FUSER_RACECHECK)
#define FUSER_DYNAMIC_SHARED(T, name) FUSER_RC_DYNAMIC_SHARED(T, name)
#define FUSER_SHARED_VIEW(T, base, byte_offset) (base).view<T>(byte_offset)
// stored: the values a store writes, nullptr for a load.
#define FUSER_RACE_ACCESS(ptr, idx, n, stored) ::fuser_emu::rc::global(ptr, (long long)(idx), n, stored)
#else
#define FUSER_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::fuser_emu::dynamic_smem())
#define FUSER_RACE_ACCESS(ptr, idx, n, stored) ((void)0)
#endif
#if defined(FUSER_MEMCHECK)
#define FUSER_CHECK_ACCESS(ptr, idx, n, what) ::fuser_emu::check_access(ptr, idx, n, what)
#else
#define FUSER_CHECK_ACCESS(ptr, idx, n, what) ((void)0)
#endif
#else
// __half, __nv_bfloat16 and the fp8 storage types: fuser's own (fuser_f16.h), never the
// toolkit's headers, which cost NVRTC 10-30 ms a program to parse and an include path. For a
// source defining FUSER_NEED_F16 or FUSER_NEED_FP8 runtime.prelude() pastes the header's text
// in place of this line; for any other it drops the line.
#include "fuser_f16.h"
#define FUSER_COUNT_LOAD(bytes) ((void)0)
#define FUSER_COUNT_STORE(bytes) ((void)0)
#define FUSER_CHECK_ACCESS(ptr, idx, n, what) ((void)0)
#define FUSER_RACE_ACCESS(ptr, idx, n, stored) ((void)0)
#define FUSER_DYNAMIC_SHARED(T, name)                                 \
  extern __shared__ __align__(16) unsigned char fuser_dynamic_smem[]; \
  T* name = reinterpret_cast<T*>(fuser_dynamic_smem)
#define FUSER_HOST_LAUNCHER(name)
#endif

#if !defined(FUSER_SHARED_VIEW)
// Elements of type T from `byte_offset` bytes into shared memory `base` (a T* to index).
#define FUSER_SHARED_VIEW(T, base, byte_offset) reinterpret_cast<T*>(reinterpret_cast<char*>(base) + (byte_offset))
#endif

// NVRTC has no <math.h>; these spellings work in both modes.
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#ifndef CUDART_INF_F
#define CUDART_INF_F __int_as_float(0x7f800000)
#endif
#ifndef CUDART_NAN_F
#define CUDART_NAN_F __int_as_float(0x7fffffff)
#endif

// Philox random numbers (fuser.uniform / fuser.normal): for a kernel with a random op
// (FUSER_NEED_PHILOX, lowering/codegen/render.py) runtime.prelude() pastes the header's text in place of
// this line, so NVRTC and nvcc need no include path for it; for any other kernel it drops the line.
#include "fuser_philox.h"

template <class T>
struct fuser_identity {
  using type = T;
};

// The unit of a vector access: the alignment makes the GPU issue one wide load/store.
template <class T, int N>
struct alignas(sizeof(T) * N) fuser_vec {
  T v[N];
};

template <class T, int N>
__device__ __forceinline__ constexpr bool fuser_vec_ok() {
  return N >= 1 && (sizeof(T) * N == 2 || sizeof(T) * N == 4 || sizeof(T) * N == 8 || sizeof(T) * N == 16);
}

template <class T, class I>
__device__ __forceinline__ T fuser_ld(const T* ptr, I idx) {
  FUSER_CHECK_ACCESS(ptr, idx, 1, "load");
  FUSER_RACE_ACCESS(ptr, idx, 1, (const T*)nullptr);
  FUSER_COUNT_LOAD(sizeof(T));
  return ptr[idx];
}

template <class T, class I>
__device__ __forceinline__ T fuser_ldg(const T* ptr, I idx) {
  FUSER_CHECK_ACCESS(ptr, idx, 1, "load");
  FUSER_RACE_ACCESS(ptr, idx, 1, (const T*)nullptr);
  FUSER_COUNT_LOAD(sizeof(T));
  return __ldg(ptr + idx);
}

template <class T, class I>
__device__ __forceinline__ void fuser_st(T* ptr, I idx, typename fuser_identity<T>::type value) {
  FUSER_CHECK_ACCESS(ptr, idx, 1, "store");
#if defined(FUSER_RACECHECK)
  const T converted = value;
  FUSER_RACE_ACCESS(ptr, idx, 1, &converted);
#endif
  FUSER_COUNT_STORE(sizeof(T));
  ptr[idx] = value;
}

template <int N, class T, class I>
__device__ __forceinline__ void fuser_ld_vec(const T* ptr, I idx, T* out) {
  static_assert(fuser_vec_ok<T, N>(), "fuser_ld_vec: N*sizeof(T) must be 2, 4, 8 or 16 bytes");
#if defined(FUSER_CPU)
  // Element loop: the same bytes as one wide access without breaking strict aliasing.
  FUSER_CHECK_ACCESS(ptr, idx, N, "load");
  FUSER_RACE_ACCESS(ptr, idx, N, (const T*)nullptr);
  ::fuser_emu::check_aligned(ptr + idx, sizeof(T) * N, "fuser_ld_vec");
  FUSER_COUNT_LOAD(sizeof(T) * N);
  for (int k = 0; k < N; ++k) out[k] = ptr[idx + k];
#else
  const fuser_vec<T, N> v = *reinterpret_cast<const fuser_vec<T, N>*>(ptr + idx);
#pragma unroll
  for (int k = 0; k < N; ++k) out[k] = v.v[k];
#endif
}

// Predicated loads (a loop's load stage: lowering/codegen/emit_cuda.py _LoadStage): the access
// is made only when `ok`, else the elements are T() and nothing is read. On the GPU one
// predicated `ld.global.nc` (inline PTX: NVVM would make `if (ok)` a branch around the load,
// and ptxas then schedules each load in its own block, used before the next is issued), so
// the stage's loads stay one run of LDGs.
#if !defined(FUSER_CPU)
template <int B>
__device__ __forceinline__ void fuser_ld_pred(bool ok, const void* p, void* out) {
  if constexpr (B == 16) {
    unsigned int a = 0, b = 0, c = 0, d = 0;
    asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %4, 0;\n @q ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%5];\n}"
                 : "+r"(a), "+r"(b), "+r"(c), "+r"(d) : "r"((int)ok), "l"(p));
    unsigned int* w = reinterpret_cast<unsigned int*>(out);
    w[0] = a; w[1] = b; w[2] = c; w[3] = d;
  } else if constexpr (B == 8) {
    unsigned long long a = 0;
    asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %1, 0;\n @q ld.global.nc.u64 %0, [%2];\n}"
                 : "+l"(a) : "r"((int)ok), "l"(p));
    *reinterpret_cast<unsigned long long*>(out) = a;
  } else if constexpr (B == 4) {
    unsigned int a = 0;
    asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %1, 0;\n @q ld.global.nc.u32 %0, [%2];\n}"
                 : "+r"(a) : "r"((int)ok), "l"(p));
    *reinterpret_cast<unsigned int*>(out) = a;
  } else if constexpr (B == 2) {
    unsigned short a = 0;
    asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %1, 0;\n @q ld.global.nc.u16 %0, [%2];\n}"
                 : "+h"(a) : "r"((int)ok), "l"(p));
    *reinterpret_cast<unsigned short*>(out) = a;
  } else {
    static_assert(B == 1, "fuser_ld_pred: 1, 2, 4, 8 or 16 bytes");
    unsigned short a = 0;
    asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %1, 0;\n @q ld.global.nc.u8 %0, [%2];\n}"
                 : "+h"(a) : "r"((int)ok), "l"(p));
    *reinterpret_cast<unsigned char*>(out) = (unsigned char)a;
  }
}
#endif

template <class T, class I>
__device__ __forceinline__ T fuser_ld_if(bool ok, const T* ptr, I idx) {
#if defined(FUSER_CPU)
  return ok ? fuser_ld(ptr, idx) : T();
#else
  fuser_vec<T, 1> v;
  fuser_ld_pred<(int)sizeof(T)>(ok, ptr + idx, &v);
  return v.v[0];
#endif
}

template <int N, class T, class I>
__device__ __forceinline__ void fuser_ld_vec_if(bool ok, const T* ptr, I idx, T* out) {
#if defined(FUSER_CPU)
  if (ok) {
    fuser_ld_vec<N>(ptr, idx, out);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] = T();
  }
#else
  static_assert(fuser_vec_ok<T, N>(), "fuser_ld_vec_if: N*sizeof(T) must be 2, 4, 8 or 16 bytes");
  fuser_vec<T, N> v;
  fuser_ld_pred<(int)(sizeof(T) * N)>(ok, ptr + idx, &v);
#pragma unroll
  for (int k = 0; k < N; ++k) out[k] = v.v[k];
#endif
}

template <int N, class T, class I>
__device__ __forceinline__ void fuser_st_vec(T* ptr, I idx, const T* in) {
  static_assert(fuser_vec_ok<T, N>(), "fuser_st_vec: N*sizeof(T) must be 2, 4, 8 or 16 bytes");
#if defined(FUSER_CPU)
  FUSER_CHECK_ACCESS(ptr, idx, N, "store");
  FUSER_RACE_ACCESS(ptr, idx, N, in);
  ::fuser_emu::check_aligned(ptr + idx, sizeof(T) * N, "fuser_st_vec");
  FUSER_COUNT_STORE(sizeof(T) * N);
  for (int k = 0; k < N; ++k) ptr[idx + k] = in[k];
#else
  fuser_vec<T, N> v;
#pragma unroll
  for (int k = 0; k < N; ++k) v.v[k] = in[k];
  *reinterpret_cast<fuser_vec<T, N>*>(ptr + idx) = v;
#endif
}

#endif  // FUSER_PRELUDE_CUH
