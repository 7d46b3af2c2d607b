"""C spellings of fuser dtypes and elementwise ops, matching the reference interpreter:
f16/bf16 compute in float and every op rounds its result to its dtype; max/min propagate
NaN; integer division truncates (C semantics)."""

from __future__ import annotations

from fuser_dialect.ops_compute import BinaryKind, ReductionKind, UnaryKind

STORAGE_TYPE = {
    "f64": "double", "f32": "float", "f16": "__half", "bf16": "__nv_bfloat16",
    "i64": "long long", "i32": "int", "i1": "bool",
}
COMPUTE_TYPE = {
    "f64": "double", "f32": "float", "f16": "float", "bf16": "float",
    "i64": "long long", "i32": "int", "i1": "bool",
}
FLOATS = ("f64", "f32", "f16", "bf16")

SUPPORT = r"""
__device__ __forceinline__ float fuser_round_bf16(float v) { return __bfloat162float(__float2bfloat16(v)); }
__device__ __forceinline__ float fuser_round_f16(float v) { return __half2float(__float2half(v)); }
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
// Lane 0's value for the whole warp (a row-level load done once per warp, not per thread).
template <typename T> __device__ __forceinline__ T fuser_lane0(T v) { return __shfl_sync(0xffffffffu, v, 0); }
__device__ __forceinline__ bool fuser_lane0(bool v) { return __shfl_sync(0xffffffffu, (int)v, 0) != 0; }
// Block-wide reduction; every thread gets the result. blockDim.x must be a multiple of 32.
template <typename T, typename Op>
__device__ __forceinline__ T fuser_block_reduce(T v, Op op, T identity, T* smem) {
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < warps ? smem[lane] : identity;
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  __syncthreads();
  return v;
}
template <typename T>
__device__ __forceinline__ void fuser_block_reduce_online(T& m, T& s, T* smem) {
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
"""


def load_expr(raw: str, dtype: str) -> str:
    """Storage value -> compute value."""
    if dtype == "bf16":
        return f"__bfloat162float({raw})"
    if dtype == "f16":
        return f"__half2float({raw})"
    return raw


def store_expr(value: str, dtype: str) -> str:
    """Compute value -> storage value."""
    if dtype == "bf16":
        return f"__float2bfloat16({value})"
    if dtype == "f16":
        return f"__float2half({value})"
    return value


def round_expr(value: str, dtype: str) -> str:
    """Rounds a compute value to what its dtype can hold (f16/bf16 results of ops)."""
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
    return round_expr(f"({COMPUTE_TYPE[dst]})({value})", dst)


def _fn(name: str, dtype: str) -> str:
    return name + "f" if dtype != "f64" else name


def unary_expr(kind: UnaryKind, x: str, dtype: str) -> str:
    t = COMPUTE_TYPE[dtype]
    is_float = dtype in FLOATS
    one = "1.0" if dtype == "f64" else "1.0f"
    match kind:
        case UnaryKind.NEG:
            return f"(-{x})" if dtype != "i1" else x
        case UnaryKind.ABS:
            return f"{_fn('fabs', dtype)}({x})" if is_float else f"({x} < 0 ? -{x} : {x})"
        case UnaryKind.RELU:
            return f"({x} > 0 ? {x} : ({t})0)"
        case UnaryKind.SIGMOID:
            return f"({one} / ({one} + {_fn('exp', dtype)}(-{x})))"
        case UnaryKind.RSQRT:
            return f"{_fn('rsqrt', dtype)}({x})"
        case UnaryKind.RECIPROCAL:
            return f"({one} / {x})"
        case UnaryKind.ROUND:
            return f"{_fn('rint', dtype)}({x})"
        case UnaryKind.SIGN:
            sign = f"(({t})(({x}) > 0) - ({t})(({x}) < 0))"
            return f"(({x}) != ({x}) ? ({x}) : {sign})" if is_float else sign  # NaN stays NaN
        case UnaryKind.LOGICAL_NOT:
            return f"({x} == 0)"
        case UnaryKind.BITWISE_NOT:
            return f"(!{x})" if dtype == "i1" else f"(~{x})"
        case UnaryKind.ISNAN:
            return f"isnan({x})" if is_float else "false"
        case UnaryKind.ISINF:
            return f"isinf({x})" if is_float else "false"
        case UnaryKind.FLOOR | UnaryKind.CEIL | UnaryKind.TRUNC if not is_float:
            return x
        case _:
            return f"{_fn(str(kind), dtype)}({x})"


_INFIX = {
    BinaryKind.ADD: "+", BinaryKind.SUB: "-", BinaryKind.MUL: "*", BinaryKind.DIV: "/",
    BinaryKind.EQ: "==", BinaryKind.NE: "!=", BinaryKind.LT: "<", BinaryKind.LE: "<=",
    BinaryKind.GT: ">", BinaryKind.GE: ">=",
    BinaryKind.BITWISE_AND: "&", BinaryKind.BITWISE_OR: "|", BinaryKind.BITWISE_XOR: "^",
}


def binary_expr(kind: BinaryKind, a: str, b: str, dtype: str) -> str:
    """`dtype` is the operands' (compute) dtype."""
    is_float = dtype in FLOATS
    if kind == BinaryKind.DIV and not is_float:
        return f"fuser_idiv<{COMPUTE_TYPE[dtype]}>({a}, {b})"
    if kind in _INFIX:
        return f"({a} {_INFIX[kind]} {b})"
    match kind:
        case BinaryKind.POW:
            if is_float:
                return f"{_fn('pow', dtype)}({a}, {b})"
            return f"(({COMPUTE_TYPE[dtype]})pow((double)({a}), (double)({b})))"
        case BinaryKind.FMOD:
            return f"{_fn('fmod', dtype)}({a}, {b})" if is_float else f"fuser_imod<{COMPUTE_TYPE[dtype]}>({a}, {b})"
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
