"""C spellings of fuser dtypes and elementwise ops, matching the reference interpreter:
f16/bf16 compute in float and every op rounds its result to its dtype; max/min propagate
NaN; integer division truncates (C semantics)."""

from __future__ import annotations

from fuser_dialect.ops_compute import BinaryKind, ReductionKind, UnaryKind
from fuser_dialect.ops_random import OPS as RANDOM_OPS
from fuser.lowering.runtime import RUNTIME_DIR

STORAGE_TYPE = {
    "f64": "double", "f32": "float", "f16": "__half", "bf16": "__nv_bfloat16",
    "f8E4M3FN": "__nv_fp8_e4m3", "f8E5M2": "__nv_fp8_e5m2",
    "c64": "fuser_complex<float>", "c128": "fuser_complex<double>",
    "i64": "long long", "i32": "int", "i1": "bool",
}
COMPUTE_TYPE = {
    "f64": "double", "f32": "float", "f16": "float", "bf16": "float",
    "f8E4M3FN": "float", "f8E5M2": "float",
    "c64": "fuser_complex<float>", "c128": "fuser_complex<double>",
    "i64": "long long", "i32": "int", "i1": "bool",
}
_FP8_NAME = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}
NARROW_FLOATS = frozenset({"bf16", "f16"})
"""16-bit floats: a shared-memory row keeps their loads as loaded (rows/storage.py)."""
"""The suffix of the fp8 helpers of lowering/runtime/fuser_fp8.h."""
COMPLEX = ("c64", "c128")
FLOATS = ("f64", "f32", "f16", "bf16")
HEADER_MACRO = {"f16": "FUSER_NEED_F16", "bf16": "FUSER_NEED_F16", "f8E4M3FN": "FUSER_NEED_FP8",
                "f8E5M2": "FUSER_NEED_FP8", "c64": "FUSER_NEED_COMPLEX", "c128": "FUSER_NEED_COMPLEX"}
"""The macro a kernel with values of this dtype defines before the prelude, which then carries
the types its C type needs (runtime/fuser_f16.h, fuser_complex.h; dtypes not listed need none)."""
OP_HEADER_MACRO = {op.name: "FUSER_NEED_PHILOX" for op in RANDOM_OPS}
"""The macro a kernel containing an op of this name needs: with it, runtime.prelude() pastes in
the header the op's C calls (fuser_philox.h for the random ops)."""

SUPPORT = r"""
#if defined(FUSER_NEED_F16)  // 16-bit helpers only where the 16-bit headers are (lowering/codegen/render.py)
__device__ __forceinline__ float fuser_round_bf16(float v) { return __bfloat162float(__float2bfloat16(v)); }
__device__ __forceinline__ float fuser_round_f16(float v) { return __half2float(__float2half(v)); }
#endif
// Float -> integer conversions with CUDA's semantics (cvt.rzi: toward zero, saturating, NaN -> 0).
__device__ __forceinline__ int fuser_to_i32(float v) { return __float2int_rz(v); }
__device__ __forceinline__ int fuser_to_i32(double v) { return __double2int_rz(v); }
__device__ __forceinline__ long long fuser_to_i64(float v) { return __float2ll_rz(v); }
__device__ __forceinline__ long long fuser_to_i64(double v) { return __double2ll_rz(v); }
template <typename T> __device__ __forceinline__ T fuser_max(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> __device__ __forceinline__ T fuser_min(T a, T b) { return (a < b || a != a) ? a : b; }
template <typename T> __device__ __forceinline__ T fuser_sum(T a, T b) { return a + b; }
template <typename T> __device__ __forceinline__ T fuser_prod(T a, T b) { return a * b; }
// Integer division and remainder that never trap (the CPU backend would die of SIGFPE): a zero
// divisor gives 0 (the reference raises; a kernel cannot), MIN / -1 wraps as on the GPU.
template <typename T> __device__ __forceinline__ T fuser_idiv(T a, T b) {
  return b == (T)0 ? (T)0 : b == (T)-1 ? (T)(0ULL - (unsigned long long)a) : (T)(a / b);
}
template <typename T> __device__ __forceinline__ T fuser_imod(T a, T b) {
  return (b == (T)0 || b == (T)-1) ? (T)0 : (T)(a % b);
}
// torch.remainder from a C remainder `mod` of a by b: the result takes the divisor's sign.
template <typename T> __device__ __forceinline__ T fuser_remainder_fix(T mod, T b) {
  return (mod != (T)0 && ((b < (T)0) != (mod < (T)0))) ? (T)(mod + b) : mod;
}
// An index read by a gather, take_along_axis, index_select or scatter, checked against the extent
// it indexes: out of range, the first fault of the call is recorded in `err` ([fault, site, value,
// extent], lowering/execution/index_errors.py) and 0 is used instead, so nothing is read out of bounds.
__device__ __forceinline__ long long fuser_checked_index(long long* err, int site, long long value,
                                                         long long extent) {
  if ((unsigned long long)value < (unsigned long long)extent) return value;
  if (atomicCAS((unsigned long long*)err, 0ULL, 1ULL) == 0ULL) {
    err[1] = site; err[2] = value; err[3] = extent;
  }
  return 0;
}
// Integer power by squaring in T's wrapping arithmetic, as torch computes it (a double pow
// rounds: on the GPU pow(-19.0, 3.0) truncates to -6858). A negative exponent gives what torch
// gives: 1 for a base of 1, +-1 for -1, else 0.
template <typename T> __device__ __forceinline__ T fuser_ipow(T a, T b) {
  if (b < (T)0) return a == (T)1 ? (T)1 : a == (T)-1 ? ((b & (T)1) ? (T)-1 : (T)1) : (T)0;
  unsigned long long result = 1ULL, base = (unsigned long long)a;
  for (unsigned long long e = (unsigned long long)b; e != 0ULL; e >>= 1) {
    if (e & 1ULL) result *= base;
    base *= base;
  }
  return (T)result;
}
// gcd as torch computes it (Euclid on |a|, |b| in T's wrapping arithmetic, so |MIN| stays MIN and
// gcd(MIN, MAX) is -1), without C's undefined cases (-MIN, MIN % -1).
template <typename T> __device__ __forceinline__ T fuser_gcd(T a, T b) {
  T x = a < (T)0 ? (T)(0ULL - (unsigned long long)a) : a;
  T y = b < (T)0 ? (T)(0ULL - (unsigned long long)b) : b;
  while (x != (T)0) { const T r = fuser_imod<T>(y, x); y = x; x = r; }
  return y;
}
// Shifts by counts < 0 or >= the width are undefined in C; these give torch's results instead
// (a left or logical right shift loses every bit, an arithmetic right shift fills with the sign).
// U is the unsigned type of T's width: shifting its bits never overflows a signed value.
template <typename T> __device__ __forceinline__ bool fuser_shift_in_range(T b) {
  return b >= (T)0 && b < (T)(8 * sizeof(T));
}
template <typename T, typename U> __device__ __forceinline__ T fuser_shl(T a, T b) {
  return fuser_shift_in_range(b) ? (T)((U)a << b) : (T)0;
}
template <typename T> __device__ __forceinline__ T fuser_ashr(T a, T b) {
  return fuser_shift_in_range(b) ? (T)(a >> b) : (a < (T)0 ? (T)-1 : (T)0);
}
template <typename T, typename U> __device__ __forceinline__ T fuser_lshr(T a, T b) {
  return fuser_shift_in_range(b) ? (T)((U)a >> b) : (T)0;
}
struct FuserSumOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; } };
struct FuserProdOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a * b; } };
struct FuserMaxOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return fuser_max(a, b); } };
struct FuserMinOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return fuser_min(a, b); } };
// Online normaliser (max, sum of exp(x - max)) for one more element / another partial pair.
template <typename T> __device__ __forceinline__ void fuser_online_merge(T& m, T& s, T m2, T s2) {
  const T mn = fuser_max(m, m2);
  if (mn == (T)-INFINITY) { s = s + s2; return; }
  s = s * exp(m - mn) + s2 * exp(m2 - mn);
  m = mn;
}
template <typename T> __device__ __forceinline__ void fuser_online_update(T& m, T& s, T x) {
  fuser_online_merge(m, s, x, (T)1);
}
// N more elements at once (a vector's lanes): one rescale for the vector, then one exp per element;
// the same sum as N updates (a row of -inf counts each element as exp(0), as the update does).
template <typename T, int N> __device__ __forceinline__ void fuser_online_update_vec(T& m, T& s, const T (&x)[N]) {
  T mn = m;
#pragma unroll
  for (int j = 0; j < N; ++j) mn = fuser_max(mn, x[j]);
  if (mn == (T)-INFINITY) { s = s + (T)N; return; }
  T sum = s * exp(m - mn);
#pragma unroll
  for (int j = 0; j < N; ++j) sum = sum + exp(x[j] - mn);
  s = sum;
  m = mn;
}
// Welford / Chan et al.: (count, mean, M2 = sum of squared deviations from the mean) of one
// more element / another partial triple. One pass, and stable where sum(x^2) - sum(x)^2 / n
// cancels catastrophically.
template <typename T> __device__ __forceinline__ void fuser_welford_merge(T& n, T& mean, T& m2, T n2, T mean2, T m22) {
  const T total = n + n2;
  if (total == (T)0) return;
  const T delta = mean2 - mean, w = n2 / total;
  mean = mean + delta * w;
  m2 = m2 + m22 + delta * delta * n * w;
  n = total;
}
// One more element, the statistics kept of x - shift, shift = the first element folded.
template <typename T> __device__ __forceinline__ void fuser_welford_update(T& n, T& mean, T& m2, T& shift, T x) {
  if (n == (T)0) shift = x;
  const T y = x - shift;
  n = n + (T)1;
  const T delta = y - mean;
  mean = mean + delta / n;
  m2 = m2 + delta * (y - mean);
}
// N more elements at once (a vector's lanes), folded one after another: the per-element update
// keeps f32 variances of rows like 1e4 + noise within a few ulps (merging the vector's own mean
// and M2, two divisions a vector, lost 30 % more digits there).
template <typename T, int N> __device__ __forceinline__ void fuser_welford_update_vec(T& n, T& mean, T& m2, T& shift, const T (&x)[N]) {
#pragma unroll
  for (int j = 0; j < N; ++j) fuser_welford_update(n, mean, m2, shift, x[j]);
}
// Before a block merges its threads' Welford partials: every thread's mean re-expressed against
// thread 0's shift (shifts are elements of one row, so their difference is nearly exact), so the
// merge works on values of the row's spread, not its magnitude. Uses smem[0].
template <typename T, typename S> __device__ __forceinline__ void fuser_welford_common_shift(T n, T& mean, T& shift, S&& smem) {
  if (threadIdx.x == 0) smem[0] = shift;
  __syncthreads();
  const T common = smem[0];
  __syncthreads();
  mean = n == (T)0 ? (T)0 : mean + (shift - common);
  shift = common;
}
// Lane 0's value for each group of W lanes of a warp (a row-level load done once per warp,
// or per row when several rows share a warp, not per thread).
template <int W, typename T> __device__ __forceinline__ T fuser_lane0(T v) { return __shfl_sync(0xffffffffu, v, 0, W); }
template <int W> __device__ __forceinline__ bool fuser_lane0(bool v) { return __shfl_sync(0xffffffffu, (int)v, 0, W) != 0; }
// Reductions over groups of W consecutive lanes (W a power of two <= 32; rows of W lanes, several
// rows a warp): every lane of a group gets its group's value. All 32 lanes take part.
template <int W, typename T, typename Op> __device__ __forceinline__ T fuser_group_reduce(T v, Op op) {
  for (int off = W / 2; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
template <int W, typename T> __device__ __forceinline__ void fuser_group_reduce_online(T& m, T& s) {
  for (int off = W / 2; off > 0; off >>= 1) {
    const T m2 = __shfl_xor_sync(0xffffffffu, m, off), s2 = __shfl_xor_sync(0xffffffffu, s, off);
    fuser_online_merge(m, s, m2, s2);
  }
}
template <int W, typename T> __device__ __forceinline__ void fuser_group_reduce_welford(T& n, T& mean, T& m2) {
  for (int off = W / 2; off > 0; off >>= 1) {
    const T n2 = __shfl_xor_sync(0xffffffffu, n, off), mean2 = __shfl_xor_sync(0xffffffffu, mean, off),
            m22 = __shfl_xor_sync(0xffffffffu, m2, off);
    fuser_welford_merge(n, mean, m2, n2, mean2, m22);
  }
}
// fuser_welford_common_shift for a group of W lanes: the group's lane 0 gives the common shift.
template <int W, typename T> __device__ __forceinline__ void fuser_group_common_shift(T n, T& mean, T& shift) {
  const T common = __shfl_sync(0xffffffffu, shift, 0, W);
  mean = n == (T)0 ? (T)0 : mean + (shift - common);
  shift = common;
}
// Block-wide reduction; every thread gets the result. blockDim.x must be a multiple of 32.
// `smem` is a T* or T[N] (in a racecheck build of the CPU emulation, a tracked shared array).
template <typename T, typename Op, typename S>
__device__ __forceinline__ T fuser_block_reduce(T v, Op op, T identity, S&& smem) {
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < warps ? smem[lane] : identity;
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  __syncthreads();
  return v;
}
// A column kernel's combine (lowering/schedulers/rows/columns.py): the block holds C rows (threads
// tx = threadIdx.x % C) of R threads each (ty = threadIdx.x / C, R a power of two); every thread
// gets its row's total. `smem` holds C * R values.
template <int C, int R, typename T, typename Op, typename S>
__device__ __forceinline__ T fuser_column_reduce(T v, Op op, S&& smem) {
  const int tx = threadIdx.x % C, ty = threadIdx.x / C;
  smem[ty * C + tx] = v;
  __syncthreads();
  for (int half = R / 2; half > 0; half >>= 1) {
    if (ty < half) smem[ty * C + tx] = op((T)smem[ty * C + tx], (T)smem[(ty + half) * C + tx]);
    __syncthreads();
  }
  v = (T)smem[tx];
  __syncthreads();
  return v;
}
template <typename T, typename S>
__device__ __forceinline__ void fuser_block_reduce_online(T& m, T& s, S&& smem) {
  for (int off = 16; off > 0; off >>= 1) {
    const T m2 = __shfl_xor_sync(0xffffffffu, m, off), s2 = __shfl_xor_sync(0xffffffffu, s, off);
    fuser_online_merge(m, s, m2, s2);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) { smem[warp] = m; smem[32 + warp] = s; }
  __syncthreads();
  m = lane < warps ? smem[lane] : (T)-INFINITY;
  s = lane < warps ? smem[32 + lane] : (T)0;
  for (int off = 16; off > 0; off >>= 1) {
    const T m2 = __shfl_xor_sync(0xffffffffu, m, off), s2 = __shfl_xor_sync(0xffffffffu, s, off);
    fuser_online_merge(m, s, m2, s2);
  }
  __syncthreads();
}
template <typename T, typename S>
__device__ __forceinline__ void fuser_block_reduce_welford(T& n, T& mean, T& m2, S&& smem) {
  for (int off = 16; off > 0; off >>= 1) {
    const T n2 = __shfl_xor_sync(0xffffffffu, n, off), mean2 = __shfl_xor_sync(0xffffffffu, mean, off),
            m22 = __shfl_xor_sync(0xffffffffu, m2, off);
    fuser_welford_merge(n, mean, m2, n2, mean2, m22);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) { smem[warp] = n; smem[32 + warp] = mean; smem[64 + warp] = m2; }
  __syncthreads();
  n = lane < warps ? smem[lane] : (T)0;
  mean = lane < warps ? smem[32 + lane] : (T)0;
  m2 = lane < warps ? smem[64 + lane] : (T)0;
  for (int off = 16; off > 0; off >>= 1) {
    const T n2 = __shfl_xor_sync(0xffffffffu, n, off), mean2 = __shfl_xor_sync(0xffffffffu, mean, off),
            m22 = __shfl_xor_sync(0xffffffffu, m2, off);
    fuser_welford_merge(n, mean, m2, n2, mean2, m22);
  }
  __syncthreads();
}
"""
SUPPORT += "".join((RUNTIME_DIR / header).read_text() for header in ("fuser_fp8.h", "fuser_complex.h"))
"""The fp8 and complex helpers follow, each compiled only under its HEADER_MACRO."""
SUPPORT += r"""
#if defined(FUSER_NEED_COMPLEX)
// rsqrt of a complex value as torch computes it: 1 / sqrt(z), with sqrt on the principal branch
// (as std::sqrt: a non-negative real part, the imaginary part keeping Im z's sign).
#define FUSER_CSQRT(T, SQRT, FABS, HYPOT, COPYSIGN)                                  \
  __device__ __forceinline__ fuser_complex<T> fuser_csqrt(fuser_complex<T> z) {      \
    if (z.re == T(0) && z.im == T(0)) return fuser_complex<T>(T(0), z.im);          \
    const T t = SQRT((FABS(z.re) + HYPOT(z.re, z.im)) * T(0.5));                   \
    if (z.re >= T(0)) return fuser_complex<T>(t, z.im / (T(2) * t));                \
    return fuser_complex<T>(FABS(z.im) / (T(2) * t), COPYSIGN(t, z.im));            \
  }                                                                                   \
  __device__ __forceinline__ fuser_complex<T> fuser_crsqrt(fuser_complex<T> z) {     \
    return fuser_complex<T>(T(1)) / fuser_csqrt(z);                                   \
  }
FUSER_CSQRT(float, sqrtf, fabsf, hypotf, copysignf)
FUSER_CSQRT(double, sqrt, fabs, hypot, copysign)
#undef FUSER_CSQRT
#endif  // FUSER_NEED_COMPLEX
"""


def load_expr(raw: str, dtype: str) -> str:
    """Storage value -> compute value."""
    if dtype in _FP8_NAME:
        return f"fuser_{_FP8_NAME[dtype]}_to_float({raw})"
    if dtype == "bf16":
        return f"__bfloat162float({raw})"
    if dtype == "f16":
        return f"__half2float({raw})"
    return raw


def store_expr(value: str, dtype: str) -> str:
    """Compute value -> storage value."""
    if dtype in _FP8_NAME:
        return f"fuser_to_{_FP8_NAME[dtype]}({value})"
    if dtype == "bf16":
        return f"__float2bfloat16({value})"
    if dtype == "f16":
        return f"__float2half({value})"
    return value


def round_expr(value: str, dtype: str) -> str:
    """Rounds a compute value to what its dtype can hold (f16/bf16 results of ops)."""
    if dtype in _FP8_NAME:
        return f"fuser_round_{_FP8_NAME[dtype]}({value})"
    if dtype == "bf16":
        return f"fuser_round_bf16({value})"
    if dtype == "f16":
        return f"fuser_round_f16({value})"
    return value


def convert_expr(value: str, src: str, dst: str) -> str:
    """A cast between dtypes, on compute values."""
    if src == dst:
        return value
    if dst == "i1":
        return f"({value} != 0)"
    if dst in _TO_INT and (src in FLOATS or src in _FP8_NAME):
        return f"{_TO_INT[dst]}({value})"  # CUDA's conversion, saturating, on every backend
    return round_expr(f"({COMPUTE_TYPE[dst]})({value})", dst)


_TO_INT = {"i32": "fuser_to_i32", "i64": "fuser_to_i64"}
"""Float -> integer conversions (SUPPORT): cvt.rzi, toward zero, saturating to the type's range,
NaN -> 0 -- what torch eager gives on a GPU and the reference interpreter computes
(fuser_dialect/interpreter.py float_to_int). A C cast of an out-of-range value is undefined (x86
gives the type's minimum), so the intrinsics, which the CPU emulation implements exactly."""


def _fn(name: str, dtype: str) -> str:
    return name + "f" if dtype != "f64" else name


def unary_expr(kind: UnaryKind, x: str, dtype: str) -> str:
    t = COMPUTE_TYPE[dtype]
    is_float = dtype in FLOATS
    one = "1.0" if dtype == "f64" else "1.0f"
    if dtype in COMPLEX or kind in _PART_OF_REAL:
        return _complex_unary_expr(kind, x, t)
    match kind:
        case UnaryKind.NEG:
            return f"(-{x})" if dtype != "i1" else x
        case UnaryKind.ABS:
            return f"{_fn('fabs', dtype)}({x})" if is_float else f"({x} < 0 ? -{x} : {x})"
        case UnaryKind.RELU | UnaryKind.SIGN if dtype == "i1":
            return x
        case UnaryKind.RELU:
            return f"({x} < 0 ? ({t})0 : {x})"  # NaN and -0.0 pass through, as torch.relu
        case UnaryKind.SIGMOID:
            return f"({one} / ({one} + {_fn('exp', dtype)}(-{x})))"
        case UnaryKind.RSQRT:
            return f"{_fn('rsqrt', dtype)}({x})"
        case UnaryKind.RECIPROCAL:
            return f"({one} / {x})"
        case UnaryKind.ROUND:
            return f"{_fn('rint', dtype)}({x})"
        case UnaryKind.SIGN:
            return f"(({t})(({x}) > 0) - ({t})(({x}) < 0))"  # sign(NaN) is 0, as torch.sign
        case UnaryKind.LOGICAL_NOT:
            return f"({x} == 0)"
        case UnaryKind.BITWISE_NOT:
            return f"(!{x})" if dtype == "i1" else f"(~{x})"
        case UnaryKind.FRAC:
            return f"({x} - {_fn('trunc', dtype)}({x}))"
        case UnaryKind.FLOOR | UnaryKind.CEIL | UnaryKind.TRUNC if not is_float:
            return x
        case _ if kind in _PREDICATES:
            return _predicate_expr(kind, x, dtype)
        case _:
            return f"{_fn(str(kind), dtype)}({x})"


_COMPLEX_UNARY = {UnaryKind.NEG: "(-{x})", UnaryKind.ABS: "fuser_cabs({x})", UnaryKind.REAL: "({x}).re",
                  UnaryKind.IMAG: "({x}).im", UnaryKind.ISREAL: "(({x}).im == 0)",
                  UnaryKind.RSQRT: "fuser_crsqrt({x})"}
"""The unary kinds complex supports (fuser_dialect/dtype_rules.py), spelled on fuser_complex."""


_PART_OF_REAL = {UnaryKind.REAL: "{x}", UnaryKind.IMAG: "(({t})0)"}
"""real/imag of a real value: numpy's meaning (the value itself, zero)."""


def _complex_unary_expr(kind: UnaryKind, x: str, t: str) -> str:
    spelling = _PART_OF_REAL[kind] if not t.startswith("fuser_complex") else _COMPLEX_UNARY[kind]
    return spelling.format(x=x, t=t)


_PREDICATES = {
    # kind: (spelling on floats, value on integers and bools)
    UnaryKind.ISNAN: ("isnan({x})", "false"),
    UnaryKind.ISINF: ("isinf({x})", "false"),
    UnaryKind.ISFINITE: ("isfinite({x})", "true"),
    UnaryKind.ISPOSINF: ("(isinf({x}) && {x} > 0)", "false"),
    UnaryKind.ISNEGINF: ("(isinf({x}) && {x} < 0)", "false"),
    UnaryKind.SIGNBIT: ("signbit({x})", "({x} < 0)"),
    UnaryKind.ISREAL: ("true", "true"),  # a real value is real (complex: _COMPLEX_UNARY)
}


def _predicate_expr(kind: UnaryKind, x: str, dtype: str) -> str:
    on_float, on_int = _PREDICATES[kind]
    if dtype in FLOATS:
        return f"(bool){on_float.format(x=x)}"
    return on_int.format(x=x)


_INFIX = {
    BinaryKind.ADD: "+", BinaryKind.SUB: "-", BinaryKind.MUL: "*", BinaryKind.DIV: "/",
    BinaryKind.EQ: "==", BinaryKind.NE: "!=", BinaryKind.LT: "<", BinaryKind.LE: "<=",
    BinaryKind.GT: ">", BinaryKind.GE: ">=",
    BinaryKind.BITWISE_AND: "&", BinaryKind.BITWISE_OR: "|", BinaryKind.BITWISE_XOR: "^",
}

_UNSIGNED = {"i64": "unsigned long long", "i32": "unsigned int"}
_INT_HELPERS = {
    BinaryKind.GCD: "fuser_gcd<{t}>({a}, {b})",
    BinaryKind.BITWISE_LEFT_SHIFT: "fuser_shl<{t}, {u}>({a}, {b})",
    BinaryKind.BITWISE_RIGHT_SHIFT: "fuser_ashr<{t}>({a}, {b})",
    BinaryKind.LOGICAL_RIGHT_SHIFT: "fuser_lshr<{t}, {u}>({a}, {b})",
}
"""Integer-only ops (i32/i64 operands, checked by the verifier), spelled with SUPPORT's helpers."""


POW_BY_CONSTANT = {
    0.0: "(({t})1)",
    1.0: "({a})",
    2.0: "({a} * {a})",
    3.0: "({a} * {a} * {a})",
    0.5: "{sqrt}({a})",
    -0.5: "(({t})1 / {sqrt}({a}))",
    -1.0: "(({t})1 / ({a}))",
    -2.0: "(({t})1 / ({a} * {a}))",
}
"""A float power by a constant exponent as torch computes it (ATen's pow(Tensor, Scalar): 0 a
fill of ones, 1 a copy, 2 and 3 products, 0.5 a square root, -0.5 its reciprocal, -1 and -2
reciprocals; powf(-inf, -0.5) would be 0 where torch gives NaN), not the
general powf: a few multiplies where powf is some forty instructions and a dozen registers
(RMSNorm's backward at Llama's size: 191 registers a thread with powf(x, 1.0f) and (x, 2.0f))."""


def pow_by_constant(a: str, exponent: float, dtype: str) -> str | None:
    """torch's spelling of `a ** exponent` for a float `a`, or None for any other exponent."""
    form = POW_BY_CONSTANT.get(exponent)
    if form is None or dtype not in FLOATS or dtype in COMPLEX:
        return None
    return form.format(a=a, t=COMPUTE_TYPE[dtype], sqrt=_fn("sqrt", dtype))


def binary_expr(kind: BinaryKind, a: str, b: str, dtype: str) -> str:
    """`dtype` is the operands' (compute) dtype."""
    is_float = dtype in FLOATS
    t = COMPUTE_TYPE[dtype]
    if dtype in COMPLEX:  # every binary kind complex supports is an operator of fuser_complex.h
        return f"({a} {_INFIX[kind]} {b})"
    if kind == BinaryKind.DIV and not is_float:
        return f"fuser_idiv<{t}>({a}, {b})"
    if kind == BinaryKind.TRUEDIV:
        return f"({a} / {b})" if is_float else f"((float)({a}) / (float)({b}))"
    if kind in _INT_HELPERS:
        return _INT_HELPERS[kind].format(t=t, u=_UNSIGNED[dtype], a=a, b=b)
    if kind in _INFIX:
        return f"({a} {_INFIX[kind]} {b})"
    match kind:
        case BinaryKind.POW:
            if is_float:
                return f"{_fn('pow', dtype)}({a}, {b})"
            return f"fuser_ipow<{t}>({a}, {b})"
        case BinaryKind.FMOD:
            return f"{_fn('fmod', dtype)}({a}, {b})" if is_float else f"fuser_imod<{t}>({a}, {b})"
        case BinaryKind.REMAINDER:
            mod = f"{_fn('fmod', dtype)}({a}, {b})" if is_float else f"fuser_imod<{t}>({a}, {b})"
            return f"fuser_remainder_fix<{t}>({mod}, {b})"
        case BinaryKind.ATAN2 | BinaryKind.NEXTAFTER:
            return f"{_fn(str(kind), dtype)}({a}, {b})"
        case BinaryKind.MAXIMUM:
            return f"fuser_max({a}, {b})"
        case BinaryKind.MINIMUM:
            return f"fuser_min({a}, {b})"
        case BinaryKind.LOGICAL_AND:
            return f"(({a} != 0) && ({b} != 0))"
        case BinaryKind.LOGICAL_OR:
            return f"(({a} != 0) || ({b} != 0))"
    raise NotImplementedError(f"binary {kind}")


def reduction_identity(kind: ReductionKind, dtype: str) -> str:
    t = COMPUTE_TYPE[dtype]
    if kind == ReductionKind.SUM:
        return f"({t})0"
    if kind == ReductionKind.PROD:
        return f"({t})1"
    big = {"f64": "INFINITY", "f32": "INFINITY", "f16": "INFINITY", "bf16": "INFINITY",
           "i64": "9223372036854775807LL", "i32": "2147483647", "i1": "true"}[dtype]
    if kind == ReductionKind.MIN:
        return f"({t}){big}"
    small = {"i64": "(-9223372036854775807LL - 1)", "i32": "(-2147483647 - 1)", "i1": "false"}.get(dtype, "-INFINITY")
    return f"({t}){small}"


def reduction_combine(kind: ReductionKind) -> str:
    """Name of the device function combining two partial results."""
    return f"fuser_{kind}"
