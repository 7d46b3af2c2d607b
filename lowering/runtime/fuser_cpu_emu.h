// fuser_cpu_emu.h -- run generated CUDA C on the CPU (g++ -std=c++20 -DFUSER_CPU).
//
// Included by fuser_prelude.cuh when FUSER_CPU is defined; lowering/backends/cpu_runtime.py puts this
// directory on the include path. Not meant to be included on its own by kernel sources.
//
// This header holds what a kernel needs inline: CUDA's types, built-in variables, intrinsics,
// atomics, the accessors' accounting and checks, and a launcher per kernel. The host runtime
// (grid loop, fibers, stacks, signal handling, barriers and warp operations) is
// fuser_cpu_runtime.cpp, compiled once per installation; every module links against it through
// the interface of fuser_cpu_abi.h (lowering/backends/prebuilt.py).
//
// Execution model
//   * A launch spreads its blocks over OS threads with OpenMP; one OS thread runs one block at a
//     time, so `__shared__` can be `static thread_local` and every fiber of a block sees it.
//   * needs_sync=true: every CUDA thread of a block is a fiber (own stack, x86-64 context switch
//     in assembly, ucontext elsewhere or with -DFUSER_EMU_UCONTEXT). Fibers run round-robin,
//     each until it blocks: at __syncthreads() (block barrier) or at a warp operation (shuffle,
//     vote, __syncwarp). Running every thread to its next barrier before the next thread starts is
//     deliberately hostile to a missing barrier: reads of not-yet-written shared memory see stale
//     data instead of the lucky timing a GPU often gives.
//   * Threads that return stop counting toward barriers and warp masks. If every live thread is
//     blocked and nothing can be released, the block is a deadlock and the launch fails with a
//     message instead of hanging. Threads meeting at different __syncthreads() lines (undefined
//     behaviour in CUDA) fail the launch as "barrier divergence".
//   * needs_sync=false: the block is a plain loop over threads, no fibers; a barrier or warp
//     operation in such a launch is reported as an error.
//   * Limits: a thread spinning on a value another thread of its block will write never yields,
//     so it hangs; static __shared__ memory keeps the previous block's contents (dynamic shared
//     memory is refilled with 0xff); a fiber that overflows its stack (FUSER_FIBER_STACK_BYTES)
//     faults in a guard page and fails its launch (see SharedStacks; an overflow inside a C library
//     call that holds a lock leaves it held); CPU-mode sources must not include C++ standard headers such as
//     <cmath> (their global `using std::...` declarations clash with the CUDA overloads here).
//   * Racecheck (-DFUSER_RACECHECK, for FUSER_RACECHECK=1): fuser_cpu_racecheck.h.
//   * Memcheck (-DFUSER_MEMCHECK, lowering/backends/cpu_runtime.py adds it for FUSER_MEMCHECK=1): every
//     fuser_ld*/fuser_st* must stay inside the pointer parameter it was derived from; the launcher
//     passes each pointer parameter's byte range (fuser_mem_region). A violation ends the block
//     before the access happens and fails the launch naming kernel, block, thread, parameter,
//     index and extent (compute-sanitizer's memcheck for the same source). Without the flag the
//     accessors compile exactly as before: the check costs nothing unless asked for.
//
// Deliberate departures from <atomic>/<cmath>: both headers cost 0.2-0.4 s of compile time per
// module, so atomics use the GCC __atomic builtins (what std::atomic_ref compiles to) and math
// comes from the C <math.h> plus the float overloads CUDA device code expects.
#ifndef FUSER_CPU_EMU_H
#define FUSER_CPU_EMU_H

// The plain C headers: libstdc++'s wrappers would pull in <cmath>/<cstdlib> (compile time) and
// `using std::abs` etc., which would clash with the CUDA-style overloads below.
#define _GLIBCXX_INCLUDE_NEXT_C_HEADERS
#include <math.h>
#include <stdlib.h>
#undef _GLIBCXX_INCLUDE_NEXT_C_HEADERS
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <type_traits>
#include <utility>

#include "fuser_cpu_abi.h"

#ifndef FUSER_FIBER_STACK_BYTES
#define FUSER_FIBER_STACK_BYTES (128 * 1024)
#endif
static_assert(FUSER_FIBER_STACK_BYTES >= 64 * 1024 && FUSER_FIBER_STACK_BYTES % 4096 == 0,
              "FUSER_FIBER_STACK_BYTES: a multiple of 4096, at least 64 KiB (fiber stacks are staggered by up to 32 KiB)");

// What lowering/backends/cpu_runtime.py asks a module before launching anything.
extern "C" {
FUSER_EXPORT int fuser_cpu_abi_version(void) { return FUSER_CPU_ABI_VERSION; }
#if defined(FUSER_MEMCHECK)
FUSER_EXPORT int fuser_cpu_memcheck(void) { return 1; }
#else
FUSER_EXPORT int fuser_cpu_memcheck(void) { return 0; }
#endif
#if defined(FUSER_RACECHECK)
FUSER_EXPORT int fuser_cpu_racecheck(void) { return 1; }
#else
FUSER_EXPORT int fuser_cpu_racecheck(void) { return 0; }
#endif
}

// ---------------------------------------------------------------------------------------------
// CUDA keywords and built-in variables.
// ---------------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __shared__ static thread_local
#define __constant__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __ldg(p) (*(p))
// __restrict__ is already a g++ keyword.

static constexpr int warpSize = 32;

// Per OS thread and module (fuser_thread_vars): the runtime sets blockIdx before each block and
// threadIdx before resuming each fiber; loop mode sets threadIdx itself (run_block_loop).
static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local dim3 blockDim;
static thread_local dim3 gridDim;

namespace fuser_emu {
static thread_local uint64_t tls_bytes[2];  // global bytes loaded, stored by this OS thread
static thread_local unsigned char* tls_dynamic_smem;
static thread_local const fuser_launch_config* tls_config;
static thread_local uint64_t tls_block_serial;

inline void thread_vars(fuser_thread_vars* out) {
  *out = {&threadIdx, &blockIdx, &blockDim, &gridDim, tls_bytes, &tls_dynamic_smem, &tls_config, &tls_block_serial};
}

// ---------------------------------------------------------------------------------------------
// Global-memory accounting and checks (called by fuser_ld/fuser_st in the prelude).
// ---------------------------------------------------------------------------------------------
__forceinline__ void count_load(uint64_t bytes) { tls_bytes[0] += bytes; }
__forceinline__ void count_store(uint64_t bytes) { tls_bytes[1] += bytes; }

// A GPU faults on a misaligned vector access; the CPU would not, so check explicitly.
__forceinline__ void check_aligned(const void* p, unsigned bytes, const char* what) {
  if (__builtin_expect(((uintptr_t)p & (bytes - 1)) != 0, 0)) fuser_rt_report_misaligned(p, bytes, what, threadIdx);
}

// FUSER_DYNAMIC_SHARED: one buffer per OS thread, refilled with 0xff by the runtime before every
// block so that reads before writes produce NaN / -1 rather than stale data.
inline void* dynamic_smem() { return tls_dynamic_smem; }

#if defined(FUSER_MEMCHECK)
// The region an access through `p` belongs to: the parameter whose address p is (what generated
// code always passes), else one containing p, its one-past-the-end included (a pointer the kernel
// derived); -1: none.
inline int region_of(const fuser_launch_config* cfg, uint64_t p) {
  for (uint32_t i = 0; i < cfg->num_regions; ++i)
    if (cfg->regions[i].base == p) return (int)i;
  for (uint32_t i = 0; i < cfg->num_regions; ++i)
    if (p - cfg->regions[i].base <= cfg->regions[i].bytes) return (int)i;
  return -1;
}

// Checks that elements [idx, idx+n) of ptr lie inside the parameter ptr came from; a violation
// ends the block before the access happens (fuser_rt_out_of_bounds does not return).
template <class T, class I>
__forceinline__ void check_access(const T* ptr, I idx, int n, const char* what) {
  const fuser_launch_config* cfg = tls_config;
  const uint64_t p = (uint64_t)ptr;
  const int r = region_of(cfg, p);
  if (r >= 0) {
    const __int128 lo = (__int128)(p - cfg->regions[r].base) + (__int128)(long long)idx * (__int128)sizeof(T);
    if (__builtin_expect(lo >= 0 && lo + (__int128)(sizeof(T) * n) <= (__int128)cfg->regions[r].bytes, 1)) return;
  }
  fuser_rt_out_of_bounds(p, (long long)idx, sizeof(T), n, what, r, threadIdx);
}
#endif

// ---------------------------------------------------------------------------------------------
// Launch: the kernel's part of fuser_kernel_body; the runtime runs the grid.
// ---------------------------------------------------------------------------------------------
template <class Body>
__forceinline__ void run_block_loop(Body& body) {
  const dim3 bd = blockDim;
  for (unsigned z = 0; z < bd.z; ++z)
    for (unsigned y = 0; y < bd.y; ++y)
      for (unsigned x = 0; x < bd.x; ++x) {
        threadIdx = {x, y, z};
        body();
      }
}

#if defined(FUSER_MEMCHECK)
inline constexpr int32_t kModuleMemcheck = 1;
#else
inline constexpr int32_t kModuleMemcheck = 0;
#endif
#if defined(FUSER_RACECHECK)
inline constexpr int32_t kModuleRacecheck = 1;
#else
inline constexpr int32_t kModuleRacecheck = 0;
#endif

// Unpacks cuLaunchKernel-style arguments (args[i] points at the i-th parameter's value) by the
// kernel's own parameter types, copying them once per launch.
template <auto Kernel, class... P, size_t... I>
int launch_unpacked(std::index_sequence<I...>, const char* name, const fuser_launch_config* cfg, void** args,
                    fuser_launch_stats* stats) {
  (void)args;
  auto call = [... a = *static_cast<std::remove_cvref_t<P>*>(args[I])]() __attribute__((always_inline)) {
    Kernel(a...);
  };
  using Call = decltype(call);
  const fuser_kernel_body body{[](void* c) { (*static_cast<Call*>(c))(); },
                               [](void* c) { run_block_loop(*static_cast<Call*>(c)); },
                               &call,
                               thread_vars,
                               FUSER_FIBER_STACK_BYTES,
                               kModuleMemcheck,
                               kModuleRacecheck};
  return fuser_rt_run_grid(name, cfg, stats, &body);
}

template <auto Kernel, class... P>
int launch(void (*)(P...), const char* name, const fuser_launch_config* cfg, void** args,
           fuser_launch_stats* stats) {
  return launch_unpacked<Kernel, P...>(std::index_sequence_for<P...>{}, name, cfg, args, stats);
}

// ---------------------------------------------------------------------------------------------
// Kernel signatures for argument checking in Python: three characters per parameter,
//   [-|p|P] kind size   ('-' value, 'p' pointer, 'P' pointer to const)
//   kind: f float, i signed int, u unsigned int, ? bool, h __half, b __nv_bfloat16, v void, x other
//   size: sizeof the (pointed-to) type as one digit 1-9, or 'x'.
// ---------------------------------------------------------------------------------------------
template <class T>
constexpr char type_kind();

template <class T>
constexpr void describe_param(char* out) {
  using V = std::remove_cv_t<T>;
  using E = std::remove_cv_t<std::remove_pointer_t<V>>;
  constexpr bool ptr = std::is_pointer_v<V>;
  using S = std::conditional_t<ptr, E, V>;
  out[0] = !ptr ? '-' : std::is_const_v<std::remove_pointer_t<V>> ? 'P' : 'p';
  out[1] = type_kind<S>();
  if constexpr (std::is_void_v<S>)
    out[2] = '0';
  else
    out[2] = sizeof(S) <= 9 ? (char)('0' + sizeof(S)) : 'x';
}

template <class... P>
struct Signature {
  static constexpr auto text = [] {
    struct {
      char s[3 * sizeof...(P) + 1];
    } r{};
    int i = 0;
    ((describe_param<P>(r.s + 3 * i), ++i), ...);
    return r;
  }();
};

template <class... P>
const char* signature_of(void (*)(P...)) {
  return Signature<P...>::text.s;
}

}  // namespace fuser_emu

// ---------------------------------------------------------------------------------------------
// Synchronisation and warp intrinsics.
// ---------------------------------------------------------------------------------------------
#define __syncthreads() ((void)::fuser_emu::sync_block(__LINE__, 0))
#define __syncthreads_count(pred) ((int)(uint32_t)::fuser_emu::sync_block(__LINE__, (pred)))
#define __syncthreads_and(pred) ((int)::fuser_emu::all_of(::fuser_emu::sync_block(__LINE__, (pred))))
#define __syncthreads_or(pred) ((int)((uint32_t)::fuser_emu::sync_block(__LINE__, (pred)) != 0))

#if defined(FUSER_RACECHECK)
#include "fuser_cpu_racecheck.h"
#endif

namespace fuser_emu {
#if defined(FUSER_RACECHECK)
inline uint64_t sync_block(int line, int pred) {
  const uint64_t r = fuser_rt_sync_block(line, pred);
  rc::passed_barrier();
  return r;
}
inline uint64_t warp_op(uint8_t op, unsigned mask, uint64_t in, int b, int c) {
  const uint64_t r = fuser_rt_warp_op(op, mask, in, b, c);
  rc::passed_warp_op();
  return r;
}
#else
inline uint64_t sync_block(int line, int pred) { return fuser_rt_sync_block(line, pred); }
inline uint64_t warp_op(uint8_t op, unsigned mask, uint64_t in, int b, int c) { return fuser_rt_warp_op(op, mask, in, b, c); }
#endif
inline bool all_of(uint64_t r) { return (uint32_t)r == (uint32_t)(r >> 32); }

template <class T>
inline T shfl(uint8_t op, unsigned mask, T var, int b, int c) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of a type wider than 8 bytes");
  uint64_t bits = 0;
  memcpy(&bits, &var, sizeof(T));
  bits = warp_op(op, mask, bits, b, c);
  T r;
  memcpy(&r, &bits, sizeof(T));
  return r;
}
}  // namespace fuser_emu

inline void __syncwarp(unsigned mask = 0xffffffffu) { ::fuser_emu::warp_op(::fuser_emu::kSyncWarp, mask, 0, 0, 0); }

// width must be a power of two <= 32, as in CUDA; c encodes it like the CUDA headers do.
template <class T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  return ::fuser_emu::shfl(::fuser_emu::kShflIdx, mask, var, src_lane, ((warpSize - width) << 8) | 31);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::fuser_emu::shfl(::fuser_emu::kShflUp, mask, var, (int)delta, (warpSize - width) << 8);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::fuser_emu::shfl(::fuser_emu::kShflDown, mask, var, (int)delta, ((warpSize - width) << 8) | 31);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  return ::fuser_emu::shfl(::fuser_emu::kShflXor, mask, var, lane_mask, ((warpSize - width) << 8) | 31);
}

inline unsigned __ballot_sync(unsigned mask, int pred) {
  return (unsigned)::fuser_emu::warp_op(::fuser_emu::kVote, mask, pred != 0, 0, 0);
}
inline int __all_sync(unsigned mask, int pred) {
  uint64_t r = ::fuser_emu::warp_op(::fuser_emu::kVote, mask, pred != 0, 0, 0);
  return (unsigned)r == (unsigned)(r >> 32);
}
inline int __any_sync(unsigned mask, int pred) {
  return (unsigned)::fuser_emu::warp_op(::fuser_emu::kVote, mask, pred != 0, 0, 0) != 0;
}

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

// ---------------------------------------------------------------------------------------------
// Atomics: relaxed, like CUDA's; return the old value.
// ---------------------------------------------------------------------------------------------
namespace fuser_emu {
template <class T, class F>
inline T atomic_update(T* p, F f) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &old, f(old), true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
template <class T>
inline T atomic_add_float(T* p, T v) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8);
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  U old = __atomic_load_n((U*)p, __ATOMIC_RELAXED);
  for (;;) {
    U next = __builtin_bit_cast(U, __builtin_bit_cast(T, old) + v);
    if (__atomic_compare_exchange_n((U*)p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      return __builtin_bit_cast(T, old);
  }
}
}  // namespace fuser_emu

// Exactly CUDA's overload set, so that code compiling here also compiles for the GPU.
#define FUSER_EMU_ATOMIC(name, T, expr)                                                       \
  inline T name(T* p, T v) { return expr; }
#define FUSER_EMU_ATOMIC_RMW(T)                                                               \
  FUSER_EMU_ATOMIC(atomicAdd, T, __atomic_fetch_add(p, v, __ATOMIC_RELAXED))                  \
  FUSER_EMU_ATOMIC(atomicExch, T, __atomic_exchange_n(p, v, __ATOMIC_RELAXED))                \
  FUSER_EMU_ATOMIC(atomicAnd, T, __atomic_fetch_and(p, v, __ATOMIC_RELAXED))                  \
  FUSER_EMU_ATOMIC(atomicOr, T, __atomic_fetch_or(p, v, __ATOMIC_RELAXED))                    \
  FUSER_EMU_ATOMIC(atomicXor, T, __atomic_fetch_xor(p, v, __ATOMIC_RELAXED))                  \
  inline T atomicCAS(T* p, T expected, T desired) {                                           \
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
    return expected;                                                                          \
  }
#define FUSER_EMU_ATOMIC_MINMAX(T)                                                            \
  FUSER_EMU_ATOMIC(atomicMax, T, ::fuser_emu::atomic_update(p, [v](T o) { return o < v ? v : o; })) \
  FUSER_EMU_ATOMIC(atomicMin, T, ::fuser_emu::atomic_update(p, [v](T o) { return v < o ? v : o; }))
FUSER_EMU_ATOMIC_RMW(int)
FUSER_EMU_ATOMIC_RMW(unsigned int)
FUSER_EMU_ATOMIC_RMW(unsigned long long)
FUSER_EMU_ATOMIC_MINMAX(int)
FUSER_EMU_ATOMIC_MINMAX(unsigned int)
FUSER_EMU_ATOMIC_MINMAX(long long)
FUSER_EMU_ATOMIC_MINMAX(unsigned long long)
FUSER_EMU_ATOMIC(atomicSub, int, __atomic_fetch_sub(p, v, __ATOMIC_RELAXED))
FUSER_EMU_ATOMIC(atomicSub, unsigned int, __atomic_fetch_sub(p, v, __ATOMIC_RELAXED))
#undef FUSER_EMU_ATOMIC_MINMAX
#undef FUSER_EMU_ATOMIC_RMW
#undef FUSER_EMU_ATOMIC

inline float atomicAdd(float* p, float v) { return ::fuser_emu::atomic_add_float(p, v); }
inline double atomicAdd(double* p, double v) { return ::fuser_emu::atomic_add_float(p, v); }
inline float atomicExch(float* p, float v) {
  return __builtin_bit_cast(float, atomicExch((unsigned*)p, __builtin_bit_cast(unsigned, v)));
}

// ---------------------------------------------------------------------------------------------
// Bit casts and integer intrinsics.
// ---------------------------------------------------------------------------------------------
inline float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
inline int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
inline float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
inline unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
inline double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }
inline long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }

// ---------------------------------------------------------------------------------------------
// Math: CUDA device code gets float overloads of the <math.h> names, fast intrinsics, min/max.
// ---------------------------------------------------------------------------------------------
#if !defined(_GLIBCXX_CMATH)  // with <cmath>, `using std::f` already provides these overloads
#define FUSER_EMU_UNARY(fn)                                                                   \
  inline float fn(float x) { return fn##f(x); }                                               \
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>                        \
  inline double fn(I x) { return fn((double)x); }
FUSER_EMU_UNARY(acos) FUSER_EMU_UNARY(acosh) FUSER_EMU_UNARY(asin) FUSER_EMU_UNARY(asinh)
FUSER_EMU_UNARY(atan) FUSER_EMU_UNARY(atanh) FUSER_EMU_UNARY(cbrt) FUSER_EMU_UNARY(ceil)
FUSER_EMU_UNARY(cos) FUSER_EMU_UNARY(cosh) FUSER_EMU_UNARY(erf) FUSER_EMU_UNARY(erfc)
FUSER_EMU_UNARY(exp) FUSER_EMU_UNARY(exp2) FUSER_EMU_UNARY(expm1) FUSER_EMU_UNARY(fabs)
FUSER_EMU_UNARY(floor) FUSER_EMU_UNARY(lgamma) FUSER_EMU_UNARY(log) FUSER_EMU_UNARY(log10)
FUSER_EMU_UNARY(log1p) FUSER_EMU_UNARY(log2) FUSER_EMU_UNARY(logb) FUSER_EMU_UNARY(nearbyint)
FUSER_EMU_UNARY(rint) FUSER_EMU_UNARY(round) FUSER_EMU_UNARY(sin) FUSER_EMU_UNARY(sinh)
FUSER_EMU_UNARY(sqrt) FUSER_EMU_UNARY(tan) FUSER_EMU_UNARY(tanh) FUSER_EMU_UNARY(tgamma)
FUSER_EMU_UNARY(trunc)
#undef FUSER_EMU_UNARY
#define FUSER_EMU_BINARY(fn) \
  inline float fn(float x, float y) { return fn##f(x, y); }
FUSER_EMU_BINARY(atan2) FUSER_EMU_BINARY(copysign) FUSER_EMU_BINARY(fdim) FUSER_EMU_BINARY(fmax)
FUSER_EMU_BINARY(fmin) FUSER_EMU_BINARY(fmod) FUSER_EMU_BINARY(hypot) FUSER_EMU_BINARY(pow)
FUSER_EMU_BINARY(remainder) FUSER_EMU_BINARY(nextafter)
#undef FUSER_EMU_BINARY
inline float fma(float x, float y, float z) { return fmaf(x, y, z); }
inline float ldexp(float x, int e) { return ldexpf(x, e); }
inline float frexp(float x, int* e) { return frexpf(x, e); }
inline float abs(float x) { return fabsf(x); }
inline double abs(double x) { return fabs(x); }
inline long abs(long x) { return x < 0 ? -x : x; }
inline long long abs(long long x) { return x < 0 ? -x : x; }
#endif

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }

// erfinv / erfcinv (CUDA has them, C's libm does not): the reference interpreter's steps
// (fuser_dialect/inverse_erf.py), in double: Giles' estimate refined by Newton's method.
namespace fuser_emu {
inline double erfinv_estimate(double y) {
  static constexpr double central[] = {2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                                       0.00021858087,  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941};
  static constexpr double tail[] = {-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                                    -0.0076224613,   0.00943887047,  1.00167406,    2.83297682};
  double w = -::log((1.0 - y) * (1.0 + y));
  const double* c = central;
  if (w < 5.0) {
    w -= 2.5;
  } else {
    w = ::sqrt(w) - 3.0;
    c = tail;
  }
  double p = 0.0;
  for (int i = 0; i < 9; ++i) p = c[i] + p * w;
  return p * y;
}
constexpr double kTwoOverSqrtPi = 1.1283791670955126;
constexpr int kNewtonSteps = 3;
}  // namespace fuser_emu
inline double erfinv(double y) {
  if (::isnan(y) || ::fabs(y) > 1.0) return NAN;
  if (::fabs(y) == 1.0) return ::copysign(INFINITY, y);
  if (y == 0.0) return y;
  double x = ::fuser_emu::erfinv_estimate(y);
  for (int i = 0; i < ::fuser_emu::kNewtonSteps; ++i)
    x -= (::erf(x) - y) / (::fuser_emu::kTwoOverSqrtPi * ::exp(-x * x));
  return x;
}
inline double erfcinv(double y) {
  if (::isnan(y) || y < 0.0 || y > 2.0) return NAN;
  if (y == 0.0) return INFINITY;
  if (y == 2.0) return -INFINITY;
  if (y > 1.0) return -erfcinv(2.0 - y);
  if (y >= 0.0625) {
    double x = ::fuser_emu::erfinv_estimate(1.0 - y);
    for (int i = 0; i < ::fuser_emu::kNewtonSteps; ++i)
      x -= (::erfc(x) - y) / (-::fuser_emu::kTwoOverSqrtPi * ::exp(-x * x));
    return x;
  }
  const double log_y = ::log(y);
  double x = ::sqrt(-log_y);
  x = ::sqrt(::fmax(-log_y - ::log(x * 1.7724538509055159), 0.25));
  for (int i = 0; i < 2 * ::fuser_emu::kNewtonSteps; ++i) {
    const double tail = ::erfc(x);
    if (tail == 0.0) break;
    x -= (::log(tail) - log_y) / (-::fuser_emu::kTwoOverSqrtPi * ::exp(-x * x) / tail);
  }
  return x;
}
inline float erfinvf(float y) { return (float)erfinv((double)y); }
inline float erfcinvf(float y) { return (float)erfcinv((double)y); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline double rcbrt(double x) { return 1.0 / cbrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0
// Float -> integer conversions as cvt does them on the GPU: rounded as named, saturated to the
// type's range, NaN -> 0 (a C cast of such a value is undefined; x86 gives the minimum).
namespace fuser_emu {
inline int saturate_i32(double x) {
  return x != x ? 0 : x >= 2147483648.0 ? 2147483647 : x <= -2147483649.0 ? (-2147483647 - 1) : (int)x;
}
inline long long saturate_i64(double x) {
  return x != x ? 0LL
         : x >= 9223372036854775808.0 ? 9223372036854775807LL
         : x < -9223372036854775808.0 ? (-9223372036854775807LL - 1)
                                      : (long long)x;
}
}  // namespace fuser_emu
inline int __float2int_rn(float x) { return ::fuser_emu::saturate_i32(nearbyint((double)x)); }
inline int __float2int_rz(float x) { return ::fuser_emu::saturate_i32((double)x); }
inline int __float2int_rd(float x) { return ::fuser_emu::saturate_i32(floor((double)x)); }
inline int __float2int_ru(float x) { return ::fuser_emu::saturate_i32(ceil((double)x)); }
inline int __double2int_rz(double x) { return ::fuser_emu::saturate_i32(x); }
inline long long __float2ll_rz(float x) { return ::fuser_emu::saturate_i64((double)x); }
inline long long __double2ll_rz(double x) { return ::fuser_emu::saturate_i64(x); }
inline float __int2float_rn(int x) { return (float)x; }

// CUDA's device max/min: the usual arithmetic conversions, NaN-ignoring for floating point.
template <class A, class B>
inline auto max(A a, B b) -> decltype(a + b) {
  using R = decltype(a + b);
  if constexpr (std::is_floating_point_v<R>)
    return fmax((R)a, (R)b);
  else
    return (R)a < (R)b ? (R)b : (R)a;
}
template <class A, class B>
inline auto min(A a, B b) -> decltype(a + b) {
  using R = decltype(a + b);
  if constexpr (std::is_floating_point_v<R>)
    return fmin((R)a, (R)b);
  else
    return (R)b < (R)a ? (R)b : (R)a;
}

// ---------------------------------------------------------------------------------------------
// __half and __nv_bfloat16: storage plus correctly rounded (round-to-nearest-even) conversions.
// NaN converts to the canonical 0x7fff like the CUDA headers.
// ---------------------------------------------------------------------------------------------
namespace fuser_emu {
inline unsigned short float_to_half_bits(float f) {
  uint32_t x = __builtin_bit_cast(uint32_t, f);
  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7fff;
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {                                          // below 2^-14: subnormal
    uint32_t e = ax >> 23;
    if (e < 102) return (unsigned short)sign;  // below 2^-25 (ties at 2^-25 go to even 0)
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    q += rem > halfway || (rem == halfway && (q & 1));
    return (unsigned short)(sign | q);
  }
  uint32_t h = (ax >> 13) - (112u << 10), rem = ax & 0x1fffu;
  h += rem > 0x1000u || (rem == 0x1000u && (h & 1));
  return (unsigned short)(sign | h);
}
inline float half_bits_to_float(unsigned short h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31) return __builtin_bit_cast(float, sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = (float)m * 0x1p-24f;
    return sign ? -v : v;
  }
  return __builtin_bit_cast(float, sign | ((e + 112u) << 23) | (m << 13));
}
inline unsigned short float_to_bf16_bits(float f) {
  uint32_t x = __builtin_bit_cast(uint32_t, f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float bf16_bits_to_float(unsigned short b) { return __builtin_bit_cast(float, (uint32_t)b << 16); }
}  // namespace fuser_emu

// Arithmetic on the 16-bit types rounds each result back, as the GPU's half instructions do
// (float has enough precision that rounding twice is exact for + - * /).
#define FUSER_EMU_HALF_TYPE(T, TO_BITS, TO_FLOAT)                                                     \
  struct T {                                                                                          \
    unsigned short __x;                                                                               \
    T() = default;                                                                                    \
    T(float f) : __x(::fuser_emu::TO_BITS(f)) {}                                                      \
    operator float() const { return ::fuser_emu::TO_FLOAT(__x); }                                     \
    static T from_bits(unsigned short b) {                                                            \
      T r;                                                                                            \
      r.__x = b;                                                                                      \
      return r;                                                                                       \
    }                                                                                                 \
  };                                                                                                  \
  inline T operator+(T a, T b) { return T((float)a + (float)b); }                                     \
  inline T operator-(T a, T b) { return T((float)a - (float)b); }                                     \
  inline T operator*(T a, T b) { return T((float)a * (float)b); }                                     \
  inline T operator/(T a, T b) { return T((float)a / (float)b); }                                     \
  inline T operator-(T a) { return T::from_bits((unsigned short)(a.__x ^ 0x8000u)); }                 \
  inline T& operator+=(T& a, T b) { return a = a + b; }                                               \
  inline T& operator-=(T& a, T b) { return a = a - b; }                                               \
  inline T& operator*=(T& a, T b) { return a = a * b; }                                               \
  inline T& operator/=(T& a, T b) { return a = a / b; }                                               \
  inline bool operator==(T a, T b) { return (float)a == (float)b; }                                   \
  inline bool operator!=(T a, T b) { return (float)a != (float)b; }                                   \
  inline bool operator<(T a, T b) { return (float)a < (float)b; }                                     \
  inline bool operator<=(T a, T b) { return (float)a <= (float)b; }                                   \
  inline bool operator>(T a, T b) { return (float)a > (float)b; }                                     \
  inline bool operator>=(T a, T b) { return (float)a >= (float)b; }
FUSER_EMU_HALF_TYPE(__half, float_to_half_bits, half_bits_to_float)
FUSER_EMU_HALF_TYPE(__nv_bfloat16, float_to_bf16_bits, bf16_bits_to_float)
#undef FUSER_EMU_HALF_TYPE

inline float __half2float(__half h) { return (float)h; }
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short b) { return __half::from_bits(b); }
inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { return __nv_bfloat16::from_bits(b); }

#define FUSER_EMU_HALF_OPS(T)                                                                         \
  inline T __hadd(T a, T b) { return a + b; }                                                         \
  inline T __hsub(T a, T b) { return a - b; }                                                         \
  inline T __hmul(T a, T b) { return a * b; }                                                         \
  inline T __hdiv(T a, T b) { return a / b; }                                                         \
  inline T __hneg(T a) { return -a; }                                                                 \
  inline T __hfma(T a, T b, T c) { return T(fmaf((float)a, (float)b, (float)c)); }                    \
  inline T __habs(T a) { return T::from_bits((unsigned short)(a.__x & 0x7fffu)); }                    \
  inline T __hmax(T a, T b) { return T(fmaxf((float)a, (float)b)); }                                  \
  inline T __hmin(T a, T b) { return T(fminf((float)a, (float)b)); }
FUSER_EMU_HALF_OPS(__half)
FUSER_EMU_HALF_OPS(__nv_bfloat16)
#undef FUSER_EMU_HALF_OPS

// ---------------------------------------------------------------------------------------------
// __nv_fp8_e4m3 and __nv_fp8_e5m2: storage only, the bits in `__x` as in cuda_fp8.h. Kernels
// convert with the helpers of lowering/runtime/fuser_fp8.h (torch's semantics), never with
// cuda_fp8.h's own conversions, so nothing else is emulated.
// ---------------------------------------------------------------------------------------------
struct __nv_fp8_e4m3 {
  unsigned char __x;
};
struct __nv_fp8_e5m2 {
  unsigned char __x;
};

namespace fuser_emu {
template <class T>
constexpr char type_kind() {
  if constexpr (std::is_same_v<T, __half>) return 'h';
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return 'b';
  else if constexpr (std::is_same_v<T, bool>) return '?';
  else if constexpr (std::is_floating_point_v<T>) return 'f';
  else if constexpr (std::is_integral_v<T>) return std::is_signed_v<T> ? 'i' : 'u';
  else if constexpr (std::is_void_v<T>) return 'v';
  else return 'x';
}
}  // namespace fuser_emu

// ---------------------------------------------------------------------------------------------
// Host launcher: FUSER_HOST_LAUNCHER(k) after `extern "C" __global__ void k(...)` exports
//   int k__launch(const fuser_launch_config*, void** args, fuser_launch_stats*)
//   const char* k__signature(void)
// ---------------------------------------------------------------------------------------------
#define FUSER_HOST_LAUNCHER(name)                                                                   \
  extern "C" FUSER_EXPORT int name##__launch(const fuser_launch_config* cfg, void** args,          \
                                              fuser_launch_stats* stats) {                          \
    return ::fuser_emu::launch<&name>(&name, #name, cfg, args, stats);                              \
  }                                                                                                 \
  extern "C" FUSER_EXPORT const char* name##__signature(void) { return ::fuser_emu::signature_of(&name); }

#endif  // FUSER_CPU_EMU_H
