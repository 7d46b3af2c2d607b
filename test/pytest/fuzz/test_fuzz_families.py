"""Generated fusions for every op family, each compared with torch eager on the reference and cpu
backends, at two sets of extents of the `-1` dims and once more from the cache.

One hypothesis test per family; each draws fusions that mix the family's op with a few pointwise
ops (family_strategies.float_pointwise: unary, tensor-scalar, tensor-tensor, segment_set), inputs
as numpy arrays or torch tensors, contiguous or (a quarter of the cases) column-major views, and
extents that are 0 one time in ten where torch takes empty tensors (and sometimes larger: several
blocks), and checks them with family_strategies.run_case:

- every output (and every input updated through alias_input) against torch eager on CPU: dtype
  and shape exactly as torch's eager program in the inputs' dtypes, values against the same
  program in float64 (complex128), with a tolerance from the dtypes and the ops on the way
  (family_strategies module docstring); integers, bools and the declared exact outputs exactly;
- on both "reference" and "cpu" backends, first at one size assignment, then at a second one
  (new extents for every `-1` dim: the cache-reuse run of the same FusionDefinition);
- on the cpu backend, `fd.cache_info()`: every call a hit or a compile, one cache entry per
  distinct (input layouts, gather pattern) of the runs — new extents alone reuse the entry; a
  layout changes with extents only where a dim of extent <= 1 drops out of the stride order; a
  gather is made take_along_axis when its index matches its input off the gathered dim — and
  the first extents again served without compiling.

Budgets: `FUSER_FUZZ_EXAMPLES=N` runs N examples per family (the slow families a share of N);
unset, a small fixed CI budget (the `default` of each `fuzz_settings`). Hypothesis runs
derandomized, without an example database: the same examples every run.

Bugs found by these tests are kept as small deterministic repros marked
`xfail(strict=True)` at the end of this file; the generators avoid exactly that input class,
with a comment pointing at the repro.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from family_strategies import (
    BACKENDS, DTYPE_OF_TORCH, FLOATS, NUMPY_OF, TORCH_OF, UNIT_ROUNDOFF, Case, Mirror, V, accumulation_u,
    assert_output, evaluate, float_pointwise, fuzz_settings, program_scale, random_array, run_case, to_torch,
    tolerance,
)
from fuser import DataType, FusionDefinition
from lowering_checks import requires_cpu_backend

log = logging.getLogger("fuser.fuzz")

pytestmark = [requires_cpu_backend,
              pytest.mark.filterwarnings("ignore:var.*degrees of freedom:UserWarning")]


# --- helpers -----------------------------------------------------------------------------------------


class Inputs:
    """Input makers in definition order: `ins(rng, sizes)` gives one execute's inputs, numpy
    arrays or (as_torch) torch tensors; with `permuted`, every array of rank >= 2 is a view with
    its dims in reverse memory order (column-major: not contiguous)."""

    def __init__(self, as_torch: bool = False, permuted: bool = False):
        self.gens: list = []
        self.as_torch, self.permuted = as_torch, permuted

    def add(self, gen) -> None:
        self.gens.append(gen)

    def __call__(self, rng: np.random.Generator, sizes: dict) -> list:
        out = []
        for gen in self.gens:
            a = gen(rng, sizes)
            if isinstance(a, np.ndarray):
                reverse = tuple(range(a.ndim))[::-1]
                if self.permuted and a.ndim >= 2:
                    stored = np.ascontiguousarray(a.transpose(reverse))
                    a = to_torch(stored).permute(reverse) if self.as_torch else stored.transpose(reverse)
                elif self.as_torch:
                    a = to_torch(a)
            out.append(a)
        return out


def shape_of(names, sizes: dict) -> tuple[int, ...]:
    return tuple(sizes[n] if isinstance(n, str) else n for n in names)


def define(m: Mirror, ins: Inputs, names, dtype: str, gen=None, static: dict | None = None, low=-2.0,
           high=2.0) -> V:
    """A tensor input whose dims are the size symbols `names` (an int: that static extent;
    a symbol in `static`: declared with its extent there)."""
    static = static or {}
    shape = [n if isinstance(n, int) else static.get(n, -1) for n in names]
    v = m.tensor(shape, dtype)
    ins.add(gen or (lambda rng, s: random_array(rng, dtype, shape_of(names, s), low, high)))
    return v


def extent(draw, low: int, high: int, zero: bool = True, big: int | None = None) -> int:
    """An extent in [low, high]; with `zero`, 0 one time in ten (empty tensors); with `big`, one
    time in ten up to `big` (several blocks, vectorized loops)."""
    pick = draw(st.integers(0, 9))
    if zero and pick == 0:
        return 0
    if big is not None and pick == 1:
        return draw(st.integers(high + 1, big))
    return draw(st.integers(low, high))


def new_case(draw=None) -> tuple[FusionDefinition, Mirror, Inputs]:
    """A fusion, its mirror and its inputs: numpy or torch, contiguous or (a quarter) permuted
    views, as `draw` decides (without `draw`: contiguous numpy)."""
    fd = FusionDefinition()
    as_torch = draw is not None and draw(st.booleans())
    permuted = draw is not None and draw(st.integers(0, 3)) == 0
    return fd, Mirror(fd), Inputs(as_torch, permuted)


def sum_cost(dtype: str, length: int) -> float:
    """Rounding of a sum (or product) of `length` terms, in units of `dtype`'s unit roundoff."""
    u = UNIT_ROUNDOFF.get(dtype)
    return 0.0 if u is None else 1.0 + length * accumulation_u(dtype) / u


def opmath(x: torch.Tensor) -> torch.Tensor:
    """x in at least float32 (16-bit and fp8 compute in f32; f64 stays f64)."""
    if x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return x.to(torch.float32)
    return x.to(torch.promote_types(x.dtype, torch.float32))


INTS = ["i64", "i32"]


# --- scans -------------------------------------------------------------------------------------------

SCANS = {
    "cumsum": lambda x, d: torch.cumsum(x, d),
    "cumprod": lambda x, d: torch.cumprod(x, d),
    "cummax": lambda x, d: torch.cummax(x, d).values,
    "cummin": lambda x, d: torch.cummin(x, d).values,
}


def _scan_ints(dtype: str, kind: str, names):
    def gen(rng, s):
        shape = shape_of(names, s)
        if dtype == "i1":
            return rng.integers(0, 2, shape).astype(bool)
        if kind != "cumprod":
            return rng.integers(-5, 6, shape).astype(NUMPY_OF[dtype])
        x = rng.choice(np.array([-1, 1], NUMPY_OF[dtype]), size=shape)  # products of ±1 and a few 2s
        x.flat[:: max(1, x.size // 20)] = 2
        return x
    return gen


@st.composite
def scan_cases(draw) -> Case:
    rank = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(FLOATS + ["i64", "i32", "i1"]))
    kind = draw(st.sampled_from(sorted(SCANS)))
    dim = draw(st.integers(-rank, rank - 1))
    axis = dim % rank
    names = [f"d{i}" for i in range(rank)]
    static_dim = draw(st.one_of(st.none(), st.integers(0, rank - 1)))
    long_scan = draw(st.integers(0, 3)) == 0  # a quarter: a scan line of ~1000 (blocks with a carry)

    def draw_sizes(first=None):
        s = {}
        for i, n in enumerate(names):
            if first is not None and i == static_dim:
                s[n] = first[n]
            elif i == axis:
                s[n] = draw(st.integers(900, 1100)) if long_scan else extent(draw, 1, 40)
            else:
                s[n] = extent(draw, 1, 5, big=70)
        return s

    sizes = [draw_sizes()]
    sizes.append(draw_sizes(sizes[0]))
    static = {names[static_dim]: sizes[0][names[static_dim]]} if static_dim is not None else {}
    length = {n: max(s[n] for s in sizes) for n in names}
    fd, m, ins = new_case(draw)
    floating = dtype in FLOATS
    with fd:
        x = define(m, ins, names, dtype, None if floating else _scan_ints(dtype, kind, names), static)
        v = x
        if floating:
            v = float_pointwise(draw, m, v, 2)
            if kind == "cumprod":  # factors near 1: products of ~1000 stay in every dtype's range
                v = m.op("exp", torch.exp, m.op("mul", torch.mul, v, 0.02))
        elif dtype != "i1" and draw(st.booleans()):
            v = m.op("neg", torch.neg, v)
        if draw(st.integers(0, 3)) == 0:
            m.output(v)  # the scan's producer is an output too
        v = m.op(kind, SCANS[kind], v, dim, cost=0.0 if kind in ("cummax", "cummin") else
                 sum_cost(dtype, length[names[axis]]))
        m.steps.append(f"{kind} dim {dim}")
        if floating and rank >= 2 and draw(st.integers(0, 2)) == 0:
            dim2 = draw(st.sampled_from([d for d in range(rank) if d != axis]))
            kind2 = draw(st.sampled_from(["cumsum", "cummax", "cummin"]))
            v = m.op(kind2, SCANS[kind2], v, dim2, cost=0.0 if kind2 != "cumsum" else
                     sum_cost(v.dtype, length[names[dim2]]))
            m.steps.append(f"{kind2} dim {dim2}")
        if v.dtype in FLOATS:
            v = float_pointwise(draw, m, v, 2)
        elif draw(st.booleans()) and v.dtype != "i1":
            v = m.op("add", torch.add, v, 1)
        m.output(v)
    return Case(m, ins, sizes, note=f"{kind} of {dtype}")


@fuzz_settings(default=6)
@given(case=scan_cases())
def test_fuzz_scans(case):
    """Draws cumsum / cumprod / cummax / cummin of a rank-1..3 tensor of every dtype (f64, f32,
    f16, bf16, i64, i32, bool) along any dim (negative too), lines of 1..40 or ~1000 (a block
    with a carry), one dim sometimes static, with pointwise ops before and after, sometimes a
    second scan along another dim and the scan's producer as a second output. Checks values
    against torch.cumsum / cumprod / cummax().values / cummin().values (float64 oracle,
    tolerance growing with the line length; integers exact), torch's result dtypes (integer
    sums and products are i64), and the cache at new extents."""
    run_case(case)


# --- scatter -----------------------------------------------------------------------------------------


def _distinct_index(rng, shape, extent: int, axis: int, dtype: str) -> np.ndarray:
    """Distinct positions along `axis` (torch's scatter is then well defined)."""
    moved = list(shape)
    k = moved.pop(axis)
    rows = [rng.permutation(extent)[:k] for _ in range(int(np.prod(moved)))]
    return np.moveaxis(np.array(rows, np.int64).reshape(*moved, k), -1, axis).astype(NUMPY_OF[dtype])


@st.composite
def scatter_cases(draw) -> Case:
    rank = draw(st.integers(1, 3))
    dim = draw(st.integers(-rank, rank - 1))
    axis = dim % rank
    dtype = draw(st.sampled_from(FLOATS + INTS))
    index_dtype = draw(st.sampled_from(INTS))
    src_kind = draw(st.sampled_from(["tensor", "number", "from_x"]))
    floating = dtype in FLOATS

    def draw_sizes():
        s = {}
        for d in range(rank):
            s[f"x{d}"] = extent(draw, 1, 6)
            s[f"k{d}"] = extent(draw, min(1, s[f"x{d}"]), s[f"x{d}"])  # <= x: off dim (torch's rule), on dim (distinct)
            s[f"s{d}"] = s[f"k{d}"] + draw(st.integers(0, 2))  # src at least the index
        return s

    sizes = [draw_sizes(), draw_sizes()]
    xn, kn, sn = ([f"{p}{d}" for d in range(rank)] for p in "xks")
    fd, m, ins = new_case(draw)
    with fd:
        x = define(m, ins, xn, dtype)
        index = define(m, ins, kn, index_dtype,
                       lambda rng, s: _distinct_index(rng, shape_of(kn, s), s[xn[axis]], axis, index_dtype))
        if src_kind == "tensor":
            src = define(m, ins, sn, dtype)
            if floating:
                src = float_pointwise(draw, m, src, 2)
        elif src_kind == "from_x":
            src = float_pointwise(draw, m, x, 2, min_ops=1) if floating else m.op("neg", torch.neg, x)
        else:
            src = draw(st.sampled_from([1.5, -0.25, 0.0])) if floating else draw(st.sampled_from([3, -2]))
        v = float_pointwise(draw, m, x, 2) if floating else x
        v = m.op("scatter", lambda a, i, s, d: torch.scatter(a, d, i.long(), s), v, index, src, dim, cost=0.0)
        m.steps.append(f"scatter dim {dim} src {src_kind}")
        if floating:
            v = float_pointwise(draw, m, v, 2)
        if draw(st.integers(0, 2)) == 0:
            m.output(m.op("sum", lambda a, d: torch.sum(a, d), v, [axis], cost=sum_cost(v.dtype, 6)))
        m.output(v)
    return Case(m, ins, sizes, note=f"scatter {dtype} index {index_dtype}")


@fuzz_settings(default=6)
@given(case=scatter_cases())
def test_fuzz_scatter(case):
    """Draws fd.ops.scatter of a rank-1..3 tensor (f64/f32/f16/bf16/i64/i32) along any dim with
    an i64 or i32 index of distinct positions along dim, smaller than the input and than src
    (torch's rule), src a tensor, a pointwise function of the input, or a number; pointwise ops
    before (on input and src) and after, sometimes a sum of the result. Checks against
    torch.scatter (exact where only data moves), torch's dtypes, and the cache at new extents."""
    run_case(case)


# --- select / index_select / gather / take_along_axis ----------------------------------------------


@st.composite
def index_cases(draw) -> Case:
    rank = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(FLOATS + INTS))
    floating = dtype in FLOATS
    n_ops = draw(st.integers(1, 2))
    bounds: dict[str, list] = {}  # symbol -> [low, high or the symbol it must not exceed]
    order: list[str] = []

    def symbol(name, low, high):
        bounds[name] = [low, high]
        order.append(name)
        return name

    cur = [symbol(f"x{d}", 1, 6) for d in range(rank)]
    gathers = []  # (input names, index names, axis) per gather, for the cache expectation
    fd, m, ins = new_case(draw)
    with fd:
        x = define(m, ins, cur, dtype)
        v = float_pointwise(draw, m, x, 2) if floating else x
        for j in range(n_ops):
            if not cur:
                break
            op = draw(st.sampled_from(["select", "index_select", "gather", "take_along_axis"]))
            dim = draw(st.integers(-len(cur), len(cur) - 1))
            axis = dim % len(cur)
            index_dtype = draw(st.sampled_from(INTS))
            bound = cur[axis]
            bounds[bound][0] = max(bounds[bound][0], 1)  # an index into it: not empty
            if op == "select":
                if draw(st.booleans()):  # a run-time index, negative too
                    i = m.scalar(index_dtype)
                    ins.add(lambda rng, s, b=bound: int(rng.integers(-s[b], s[b])))
                else:  # a constant: valid for every size drawn (the extent's floor is raised)
                    i = draw(st.integers(-3, 2))
                    bounds[bound][0] = max(bounds[bound][0], i + 1 if i >= 0 else -i)
                v = m.op("select", lambda a, i, d: torch.select(a, d, i), v, i, dim, cost=0.0)
                cur = cur[:axis] + cur[axis + 1:]
            elif op == "index_select":
                n = symbol(f"m{j}", 0, 8)
                i = define(m, ins, [n], index_dtype,
                           lambda rng, s, n=n, b=bound, t=index_dtype: rng.integers(0, s[b], s[n]).astype(NUMPY_OF[t]))
                v = m.op("index_select", lambda a, i, d: torch.index_select(a, d, i.long()), v, i, dim, cost=0.0)
                cur = cur[:axis] + [n] + cur[axis + 1:]
            else:
                if op == "gather":  # index extents <= the input's off dim (torch's rule)
                    names = [symbol(f"k{j}_{d}", 0, 6 if d == axis else c) for d, c in enumerate(cur)]
                    gathers.append((list(cur), names, axis))
                else:  # take_along_axis: the input's extents off dim
                    names = [symbol(f"t{j}", 0, 6) if d == axis else c for d, c in enumerate(cur)]
                i = define(m, ins, names, index_dtype,
                           lambda rng, s, nm=names, b=bound, t=index_dtype:
                           rng.integers(0, s[b], shape_of(nm, s)).astype(NUMPY_OF[t]))
                v = m.op(op, lambda a, i, d: torch.gather(a, d, i.long()), v, i, dim, cost=0.0)
                cur = names
            m.steps.append(f"{op} dim {dim} index {index_dtype}")
            if floating:
                v = float_pointwise(draw, m, v, 2)
        m.output(v)

    def draw_sizes():
        s = {}
        for n in order:  # an index's own extents (low 0) may be 0: an empty index, an empty result
            low, high = bounds[n]
            high = s[high] if isinstance(high, str) else high
            if high <= 0 or (low == 0 and draw(st.integers(0, 9)) == 0):
                s[n] = 0
            else:
                s[n] = draw(st.integers(max(low, 1), max(low, 1, high)))
        return s

    sizes = [draw_sizes(), draw_sizes()]
    # A gather whose index matches its input off the gathered dim becomes take_along_axis:
    # one cache entry per distinct pattern (lowering/execution/cache_key.py, exact_gathers).
    def pattern(s):
        return tuple(all(s[a] == s[b] for d, (a, b) in enumerate(zip(xs, ks)) if d != ax) for xs, ks, ax in gathers)

    return Case(m, ins, sizes, pattern=pattern, note=f"index ops on {dtype}")


@fuzz_settings(default=8)
@given(case=index_cases())
def test_fuzz_index_ops(case):
    """Draws one or two of select (constant or run-time Scalar index, negative too, i64 or i32),
    index_select (1-D index), gather (index extents <= the input's off dim) and take_along_axis
    (the input's extents off dim), each with an int64 or int32 index tensor and any dim, on a
    rank-1..3 tensor of f64/f32/f16/bf16/i64/i32, with pointwise ops around them. Checks against
    torch.select / index_select / gather (exact: they move data), torch's dtypes, and the cache:
    one entry per distinct gather-exactness pattern of the two extents drawn."""
    run_case(case)


# --- welford / var / var_mean ------------------------------------------------------------------------


@st.composite
def welford_cases(draw) -> Case:
    rank = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(FLOATS))
    op = draw(st.sampled_from(["var", "var_mean", "welford"]))
    names = [f"d{i}" for i in range(rank)]
    dims = draw(st.one_of(st.none(), st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True)))
    axes = sorted(range(rank) if dims is None else dims)
    if dims is not None and draw(st.booleans()):
        dims = [d - rank for d in dims]  # negative dims
    correction = draw(st.sampled_from([0, 1, 2]))
    keepdim = draw(st.booleans())
    static_dim = draw(st.one_of(st.none(), st.integers(0, rank - 1)))
    long_rows = draw(st.integers(0, 4)) == 0

    def draw_sizes(first=None):
        s = {n: draw(st.integers(1, 300)) if long_rows and i == axes[-1] else extent(draw, 1, 7)
             for i, n in enumerate(names)}
        if first is not None and static_dim is not None:
            s[names[static_dim]] = first[names[static_dim]]
        return s

    sizes = [draw_sizes()]
    sizes.append(draw_sizes(sizes[0]))
    static = {names[static_dim]: sizes[0][names[static_dim]]} if static_dim is not None else {}
    count = max(math.prod(s[names[a]] for a in axes) for s in sizes)
    fd, m, ins = new_case(draw)
    with fd:
        x = define(m, ins, names, dtype, static=static, low=-1.0, high=3.0)
        v = float_pointwise(draw, m, x, 2)
        cost = 4 + sum_cost(dtype, count)
        kw = dict(correction=correction, keepdim=keepdim)
        if op == "var":
            out = m.op("var", lambda a, d: torch.var(a, axes, **kw), v, dims, cost=cost, **kw)
            m.output(float_pointwise(draw, m, out, 1))
        elif op == "var_mean":
            both = fd.ops.var_mean(v.t, dims, **kw)
            pair = m.derived(None, lambda env: torch.var_mean(v(env), axes, **kw), v.err)
            var = m.derived(both[0], lambda env: pair(env)[0], v.err + cost * UNIT_ROUNDOFF[dtype])
            mean = m.derived(both[1], lambda env: pair(env)[1], v.err + cost * UNIT_ROUNDOFF[dtype])
            m.output(var)
            m.output(mean)
            if draw(st.booleans()):  # normalize, as a layer norm does (eps 1e-2: rsqrt stays <= 10)
                bcast = [d in axes for d in range(rank)]
                mb = mean if keepdim else m.op("broadcast", lambda a, f: a.reshape(_kept_shape(a, v, axes)),
                                               mean, bcast, cost=0.0)
                vb = var if keepdim else m.op("broadcast", lambda a, f: a.reshape(_kept_shape(a, v, axes)),
                                              var, bcast, cost=0.0)
                y = m.op("mul", torch.mul, m.op("sub", torch.sub, v, mb),
                         m.op("rsqrt", torch.rsqrt, m.op("add", torch.add, vb, 1e-2)))
                m.output(float_pointwise(draw, m, y, 1))
        else:
            avg_t, var_sum_t, n_t = fd.ops.welford(v.t, dims)
            acc = cost * UNIT_ROUNDOFF["f32" if dtype in ("f16", "bf16") else dtype]
            avg = m.derived(avg_t, lambda env: opmath(v(env)).mean(axes), v.err + acc)
            var_sum = m.derived(var_sum_t, lambda env: ((opmath(v(env)) - opmath(v(env)).mean(axes, keepdim=True))
                                                        ** 2).sum(axes), v.err + acc)  # 0 over no elements
            n = m.derived(n_t, lambda env: torch.full([e for d, e in enumerate(v(env).shape) if d not in axes],
                                                      math.prod(v(env).shape[a] for a in axes), dtype=torch.int64), 0.0)
            m.output(avg)
            m.output(float_pointwise(draw, m, var_sum, 1))
            m.output(n)
        m.steps.append(f"{op} dims {dims} correction {correction} keepdim {keepdim}")
    return Case(m, ins, sizes, note=f"{op} of {dtype}")


def _kept_shape(a: torch.Tensor, v: V, axes) -> list[int]:
    """The keepdim shape of a reduction of `a` (reduced dims as 1)."""
    shape, it = [], iter(a.shape)
    for d in range(v.ndim):
        shape.append(1 if d in axes else next(it))
    return shape


@fuzz_settings(default=6)
@given(case=welford_cases())
def test_fuzz_welford(case):
    """Draws var, var_mean or welford of a rank-1..3 f64/f32/f16/bf16 tensor over any set of
    dims (None: every dim; negative dims), correction 0/1/2 (also >= the count: inf/NaN as
    torch), keepdim, rows up to 300 (one Welford pass) or short (two phases), a static dim,
    pointwise ops before and after, and sometimes a layer-norm style normalization with the
    statistics broadcast back. Checks against torch.var / var_mean (float64 oracle; welford:
    mean, sum of squared deviations in f32 for 16-bit inputs, i64 counts) and the cache."""
    run_case(case)


# --- matmul / linear (host segments with fused ops around them) -----------------------------------------

MATMUL_SHAPES = [  # (a, b) as size symbols; 1: a broadcast batch dim
    (["K"], ["K"]), (["M", "K"], ["K"]), (["K"], ["K", "N"]), (["M", "K"], ["K", "N"]),
    (["B", "M", "K"], ["B", "K", "N"]), (["B", "M", "K"], ["K", "N"]), (["M", "K"], ["B", "K", "N"]),
    ([1, "M", "K"], ["B", "K", "N"]), (["B", "M", "K"], ["K"]),
]
LINEAR_SHAPES = [  # (x, weight, bias or None)
    (["M", "K"], ["N", "K"], ["N"]), (["M", "K"], ["N", "K"], None), (["B", "M", "K"], ["N", "K"], ["N"]),
    (["K"], ["N", "K"], ["N"]), (["M", "K"], ["K"], None), (["M", "K"], ["N", "K"], []),
]


def _result_names(a, b, op: str) -> list:
    if op == "linear":
        return list(a[:-1]) + ([b[0]] if len(b) == 2 else [])
    if len(a) == 1 and len(b) == 1:
        return []
    if len(b) == 1:
        return list(a[:-1])
    if len(a) == 1:
        return list(b[:-2]) + [b[-1]]
    batch_a, batch_b = a[:-2], b[:-2]
    batch = batch_b if len(batch_b) >= len(batch_a) else batch_a
    batch = ["B" if "B" in (x, y) else x for x, y in zip(batch_a or batch, batch_b or batch)]
    return batch + [a[-2], b[-1]]


@st.composite
def matmul_cases(draw) -> Case:
    dtype = draw(st.sampled_from(FLOATS))
    op = draw(st.sampled_from(["matmul", "linear"]))
    a_names, b_names, bias_names = (draw(st.sampled_from(MATMUL_SHAPES)) + (None,) if op == "matmul"
                                    else draw(st.sampled_from(LINEAR_SHAPES)))
    sizes = [{n: extent(draw, 1, 40) if n == "K" else extent(draw, 1, 6, big=70) for n in "BMKN"} for _ in range(2)]
    k_max = max(s["K"] for s in sizes)
    fd, m, ins = new_case(draw)
    with fd:
        a = define(m, ins, a_names, dtype)
        b = define(m, ins, b_names, dtype)
        a = float_pointwise(draw, m, a, 2)  # a prologue: a kernel before the host segment
        b = float_pointwise(draw, m, b, 1)
        cost = sum_cost(dtype, k_max) + 2
        if op == "matmul":
            v = m.op("matmul", torch.matmul, a, b, cost=cost)
        else:
            bias = None if bias_names is None else define(m, ins, bias_names, dtype)
            v = m.op("linear", lambda x, w, c: F.linear(x, w, c), a, b, bias, cost=cost)
        m.steps.append(f"{op} {a_names} {b_names} {bias_names}")
        names = _result_names(a_names, b_names, op)
        v = float_pointwise(draw, m, v, 2)  # the epilogue
        if names and draw(st.booleans()):  # a bias row broadcast over the result
            row = define(m, ins, [names[-1]], dtype)
            rb = m.op("broadcast", lambda r, f: r, row, [True] * (len(names) - 1) + [False], cost=0.0)
            v = m.op("add", torch.add, v, rb)
        if names and draw(st.integers(0, 2)) == 0:
            m.output(m.op("sum", lambda t, d: torch.sum(t, d), v, [len(names) - 1],
                          cost=sum_cost(dtype, 6)))
        if draw(st.integers(0, 2)) == 0:
            v = m.cast(v, draw(st.sampled_from([d for d in FLOATS if d != dtype])))
        m.output(v)
    return Case(m, ins, sizes, note=f"{op} {dtype}")


@fuzz_settings(default=6)
@given(case=matmul_cases())
def test_fuzz_matmul_linear(case):
    """Draws fd.ops.matmul (1-D, 2-D, batched, broadcast batch) or fd.ops.linear (1-D/2-D/3-D
    input, 1-D or 2-D weight, bias [N], 0-d or none) in f64/f32/f16/bf16 with K up to 40 — a
    host segment — with fused pointwise ops on both operands before it and an epilogue after
    it (pointwise ops, a broadcast bias row, a row sum, a cast). Checks against torch.matmul /
    F.linear in float64 (tolerance K ulps of the accumulation dtype), torch's dtypes, and the
    cache at new M, K, N, B."""
    run_case(case)


# --- batch_norm with running statistics updated in place ------------------------------------------------


@st.composite
def batch_norm_cases(draw) -> Case:
    rank = draw(st.integers(2, 4))
    dtype = draw(st.sampled_from(FLOATS))
    training = draw(st.integers(0, 3)) != 0
    channels_last = draw(st.booleans())
    affine = draw(st.booleans())
    running = True if not training else draw(st.integers(0, 3)) != 0
    momentum_kind = draw(st.sampled_from(["constant", "scalar"]))
    momentum_value = draw(st.sampled_from([0.1, 0.3, 1.0]))
    eps = draw(st.sampled_from([1e-5, 1e-3]))
    spatial = [f"s{i}" for i in range(rank - 2)]
    names = ["N"] + spatial + ["C"] if channels_last else ["N", "C"] + spatial
    channel = rank - 1 if channels_last else 1
    axes = [d for d in range(rank) if d != channel]

    def draw_sizes():
        # N >= 2: torch refuses training statistics of one value per channel.
        s = {"N": draw(st.integers(2, 5)), "C": draw(st.integers(1, 5))}
        s.update({n: draw(st.integers(1, 5)) for n in spatial})
        return s

    sizes = [draw_sizes(), draw_sizes()]
    count = max(math.prod(s[names[a]] for a in axes) for s in sizes)
    fd, m, ins = new_case(draw)
    with fd:
        x = define(m, ins, names, dtype)
        w, b = (define(m, ins, ["C"], "f32", low=0.5, high=1.5), define(m, ins, ["C"], "f32")) if affine else (None, None)
        rm, rv = ((define(m, ins, ["C"], "f32"), define(m, ins, ["C"], "f32", low=0.5, high=2.0)) if running
                  else (None, None))
        if momentum_kind == "scalar":
            momentum = m.scalar("f64")
            ins.add(lambda rng, s: momentum_value)
        else:
            momentum = momentum_value
        xv = float_pointwise(draw, m, x, 2)

        def torch_bn(env):
            xt = opmath(xv(env))
            if channels_last:
                xt = xt.movedim(-1, 1)
            get = (lambda t: None if t is None else t(env).to(xt.dtype))
            wt, bt = get(w), get(b)
            mom = momentum(env) if isinstance(momentum, V) else momentum
            rmt = None if rm is None else rm(env).clone().to(xt.dtype)
            rvt = None if rv is None else rv(env).clone().to(xt.dtype)
            y = F.batch_norm(xt, rmt, rvt, wt, bt, training=training, momentum=mom, eps=eps)
            red = [d for d in range(xt.ndim) if d != 1]
            if training:
                mean, invstd = xt.mean(red), torch.rsqrt(xt.var(red, correction=0) + eps)
            else:
                mean, invstd = rm(env).clone(), torch.rsqrt(rv(env) + eps)
            if channels_last:
                y = y.movedim(1, -1)
            return y.to(xv(env).dtype), mean, invstd, rmt, rvt

        t_of = (lambda v: None if v is None else v.t)  # noqa: E731
        y_t, mean_t, invstd_t = fd.ops.batch_norm(xv.t, t_of(w), t_of(b), t_of(rm), t_of(rv),
                                                  momentum.t if isinstance(momentum, V) else momentum, eps, training,
                                                  channels_last)
        # f64 inference normalizes with the f32 running statistics: f32 roundings
        u = UNIT_ROUNDOFF["f32" if dtype == "f64" and not training else dtype]
        err = xv.err + (6 + sum_cost("f32" if dtype != "f64" else "f64", count)) * u
        bn = m.derived(None, torch_bn, err)
        y = m.derived(y_t, lambda env: bn(env)[0], err)
        mean = m.derived(mean_t, lambda env: bn(env)[1], err)
        invstd = m.derived(invstd_t, lambda env: bn(env)[2], err)
        if training and running:  # aliased outputs added by batch_norm itself; running stats stay f32
            def stat(k):
                return lambda env: bn(env)[k].to(torch.float64 if env.wide else torch.float32)
            m.aliases.append((m.derived(None, stat(3), err), rm.index))
            m.aliases.append((m.derived(None, stat(4), err), rv.index))
        m.steps.append(f"batch_norm training={training} channels_last={channels_last} affine={affine} "
                       f"running={running} momentum={momentum_kind} {momentum_value} eps={eps}")
        m.output(float_pointwise(draw, m, y, 2))
        m.output(mean)
        m.output(invstd)
        if training and running and draw(st.booleans()):
            m.output(rm)  # an aliased input as an output: returned updated
    return Case(m, ins, sizes, note=f"batch_norm {dtype}")


@fuzz_settings(default=6)
@given(case=batch_norm_cases())
def test_fuzz_batch_norm(case):
    """Draws fd.ops.batch_norm of a rank-2..4 f64/f32/f16/bf16 input (channels at dim 1 or
    last), training (running statistics given or not) or inference, affine or not, momentum a
    constant or a run-time Double Scalar, eps 1e-5 or 1e-3, pointwise ops before and after, and
    sometimes the running_mean input itself as an output. Checks the output, mean and invstd
    against F.batch_norm (and torch's batch statistics, or nvFuser's inference statistics) in
    float64, and that running_mean / running_var were updated in place (aliased outputs) as
    F.batch_norm(training=True) updates them; the returned running_mean is the updated one;
    then the cache at new N, C and spatial extents."""
    run_case(case)


# --- random numbers ---------------------------------------------------------------------------------------


@st.composite
def rng_cases(draw):
    return dict(
        op=draw(st.sampled_from(["uniform", "normal", "rand_like", "randn_like"])),
        dtype=draw(st.sampled_from(FLOATS)),
        rank=draw(st.integers(1, 3)),
        seeding=draw(st.sampled_from(["scalars", "scalars", "constants", "none"])),
        params=draw(st.sampled_from([(0.0, 1.0), (-2.5, 3.0), (1.0, 1.5), (-1e3, 1e3)])),
        mix=draw(st.sampled_from(["dropout", "noise", "none"])),
        seeds=draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=4, max_size=4)),
        small=[draw(st.integers(1, 9)) for _ in range(3)],
        large=[draw(st.integers(16, 40)) for _ in range(3)],
    )


def _rng_fusion(c):
    """(fd, index of the random output): x, [seed, offset], a random tensor shaped like x
    (through x.shape() / size(), or the `*_like` ops), mixed with x."""
    rank, dtype = c["rank"], DataType(c["dtype"])
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * rank, dtype=dtype)
        if c["seeding"] == "scalars":
            seed, offset = fd.define_scalar(dtype=DataType.Int), fd.define_scalar(dtype=DataType.Int)
        elif c["seeding"] == "constants":
            seed, offset = c["seeds"][0], c["seeds"][1] & (2**40 - 1)
        else:
            seed = offset = None
        lo, hi = c["params"]
        shape = [fd.ops.size(x, d) for d in range(rank)] if rank % 2 else x.shape()
        if c["op"] == "uniform":
            r = fd.ops.uniform(lo, hi, shape, seed, offset, dtype=dtype)
        elif c["op"] == "normal":
            r = fd.ops.normal(lo, hi - lo, shape, seed, offset, dtype=dtype)
        elif c["op"] == "rand_like":
            r = fd.ops.rand_like(x, seed, offset)
        else:
            r = fd.ops.randn_like(x, seed, offset)
        fd.add_output(r)
        if c["mix"] == "dropout":  # where(r < p, x / p, 0): the random tensor as a mask
            p = (lo + hi) / 2 if c["op"] == "uniform" else 0.5
            fd.add_output(fd.ops.where(fd.ops.lt(r, p), fd.ops.mul(x, 2.0), 0.0))
        elif c["mix"] == "noise":
            fd.add_output(fd.ops.add(fd.ops.mul(r, 0.1), fd.ops.tanh(x)))
    return fd


def _rng_inputs(c, extents, seed_pair):
    x = np.random.default_rng(7).uniform(-2, 2, extents).astype(NUMPY_OF[c["dtype"]])
    return [x] + (list(seed_pair) if c["seeding"] == "scalars" else [])


def _rng_distribution(c) -> tuple[str, float, float]:
    lo, hi = c["params"]
    if c["op"] == "uniform":
        return "uniform", lo, hi
    if c["op"] == "normal":
        return "normal", lo, hi - lo
    return ("uniform", 0.0, 1.0) if c["op"] == "rand_like" else ("normal", 0.0, 1.0)


def _check_random(c, r: np.ndarray, extents, what: str) -> None:
    r_t = to_torch(r)
    assert r_t.dtype == TORCH_OF[c["dtype"]], f"{what}: dtype {r_t.dtype}"
    assert tuple(r_t.shape) == tuple(extents), f"{what}: shape {tuple(r_t.shape)}, expected {extents}"
    values = r_t.double()
    assert bool(torch.isfinite(values).all()), f"{what}: non-finite values"
    kind, a, b = _rng_distribution(c)
    n = values.numel()
    if kind == "uniform":
        assert float(values.min()) >= a and float(values.max()) < b, \
            f"{what}: uniform({a}, {b}) drew values in [{float(values.min())}, {float(values.max())}]"
    else:
        assert float((values - a).abs().max()) <= 10 * b, f"{what}: normal({a}, {b}) drew a value 10 sd away"
    if n >= 4096:  # loose statistics: 6 standard errors of the mean, 10% of the deviation
        mean, std = float(values.mean()), float(values.std())
        want_mean, want_std = ((a + b) / 2, (b - a) / math.sqrt(12)) if kind == "uniform" else (a, b)
        slack = 2 * UNIT_ROUNDOFF[c["dtype"]] * max(abs(a), abs(b), 1.0)
        assert abs(mean - want_mean) <= 6 * want_std / math.sqrt(n) + slack, f"{what}: mean {mean}, expected {want_mean}"
        assert abs(std - want_std) <= 0.1 * want_std + slack, f"{what}: std {std}, expected {want_std}"


def _check_mix(c, outputs, x: np.ndarray, what: str) -> None:
    if c["mix"] == "none":
        return
    r, mixed = to_torch(outputs[0]).double(), to_torch(outputs[1])
    xt = to_torch(x)
    lo, hi = c["params"]
    if c["mix"] == "dropout":
        p = (lo + hi) / 2 if c["op"] == "uniform" else 0.5
        want = torch.where(r < p, xt.double() * 2.0, 0.0)
        tol = 4 * UNIT_ROUNDOFF[c["dtype"]]
    else:
        want = r * 0.1 + torch.tanh(xt.double())
        tol = 16 * UNIT_ROUNDOFF[c["dtype"]] * max(1.0, float(r.abs().max()) * 0.1)
    assert mixed.dtype == xt.dtype, f"{what}: mixed output dtype {mixed.dtype}"
    torch.testing.assert_close(mixed.double(), want, rtol=tol, atol=tol, msg=lambda s: f"{what}: {s}")


@fuzz_settings(default=8)
@given(c=rng_cases())
def test_fuzz_random(c):
    """Draws uniform(lo, hi) / normal(mean, std) over x's extents (a Vector from x.shape() or
    size() Scalars) or rand_like / randn_like(x), in f64/f32/f16/bf16, seeded by run-time Int
    Scalars, by constants, or not at all, mixed with x (a dropout-style where(r < p, 2x, 0), or
    0.1 r + tanh(x)). Checks dtype, shape, finiteness, the range [lo, hi) of uniform values and
    a 10-sd bound for normal ones, and for n >= 4096 the mean (6 standard errors) and standard
    deviation (10%); seeded: bit-identical values on reference and cpu, at small and at large
    extents, other values for another seed, and a new seed or new extents compile nothing new
    beyond one cache entry; the mixed output against torch computed from the random tensor."""
    small, large = tuple(c["small"][: c["rank"]]), tuple(c["large"][: c["rank"]])
    if math.prod(large) < 4096:
        large = large[:-1] + (math.ceil(4096 / math.prod(large[:-1])),)
    fd = _rng_fusion(c)
    log.info("random: %s", c)
    seeds = [(c["seeds"][0], c["seeds"][1]), (c["seeds"][2], c["seeds"][3])]
    for extents in (small, large):
        results = {}
        for backend in BACKENDS:
            inputs = _rng_inputs(c, extents, seeds[0])
            outputs = fd.execute(inputs, backend=backend)
            _check_random(c, outputs[0], extents, f"{backend} {extents}")
            _check_mix(c, outputs, inputs[0], f"{backend} {extents}")
            results[backend] = to_torch(outputs[0])
        if c["seeding"] != "none":
            ref, cpu = results["reference"], results["cpu"]
            assert torch.equal(ref.view(_int_view(ref)), cpu.view(_int_view(cpu))), \
                f"{extents}: reference and cpu draw different bits for the same seed and offset"
    if c["seeding"] == "scalars":
        before = fd.cache_info()
        other = fd.execute(_rng_inputs(c, large, seeds[1]), backend="cpu")[0]
        after = fd.cache_info()
        assert after.misses == before.misses, "a new seed compiled again"
        if seeds[1] != seeds[0]:
            assert not torch.equal(to_torch(other), results["cpu"]), "another seed drew the same values"
    info = fd.cache_info()
    assert len(info.entries) == 1, info.entries


def _int_view(t: torch.Tensor):
    return {8: torch.int64, 4: torch.int32, 2: torch.int16}[t.element_size()]


# --- fp8 casts --------------------------------------------------------------------------------------------

FP8 = ["f8E4M3FN", "f8E5M2"]
EXACT_FLOAT_OPS = {  # exact in every dtype (a power-of-two scale may round subnormals: torch does too)
    "neg": (lambda fd, t: fd.ops.neg(t), torch.neg),
    "abs": (lambda fd, t: fd.ops.abs(t), torch.abs),
    "mul 2": (lambda fd, t: fd.ops.mul(t, 2.0), lambda x: x * 2.0),
    "mul 0.25": (lambda fd, t: fd.ops.mul(t, 0.25), lambda x: x * 0.25),
}


def _wide_range(dtype: str, with_specials: bool):
    def gen(rng, s):
        shape = shape_of(["a", "b"], s)
        if dtype in INTS:
            return rng.integers(-600, 601, shape).astype(NUMPY_OF[dtype])
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(-18, 17, shape)
        if with_specials and x.size:
            specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 448.0, 464.0, 480.0, 57344.0, 61440.0, 1e30,
                                 2.0**-9, 2.0**-10, 2.0**-16, 2.0**-17])
            mask = rng.random(shape) < 0.2
            x = np.where(mask, rng.choice(specials, shape) * rng.choice([-1.0, 1.0], shape), x)
        return x.astype(NUMPY_OF[dtype])
    return gen


def _fp8_patterns(dtype: str):
    def gen(rng, s):
        bits = rng.integers(0, 256, shape_of(["a", "b"], s)).astype(np.uint8)
        values = bits.view(NUMPY_OF[dtype])
        finite = np.isfinite(values.astype(np.float32))
        return np.where(finite, values, np.zeros_like(values))  # every finite pattern
    return gen


@st.composite
def fp8_cases(draw) -> Case:
    src = draw(st.sampled_from(FLOATS + ["i32"] + FP8))
    target = draw(st.sampled_from(FP8))
    sizes = [{"a": extent(draw, 1, 8), "b": extent(draw, 1, 40, big=600)} for _ in range(2)]
    fd, m, ins = new_case(draw)
    with fd:
        gen = _fp8_patterns(src) if src in FP8 else _wide_range(src, with_specials=draw(st.booleans()))
        x = define(m, ins, ["a", "b"], src, gen)
        v = x
        if src in FLOATS:  # exact ops: the fp8 cast after them is compared bit for bit with torch
            for name in draw(st.lists(st.sampled_from(sorted(EXACT_FLOAT_OPS)), max_size=2)):
                build, fn = EXACT_FLOAT_OPS[name]
                v = m.op(lambda t, b=build: b(fd, t), fn, v, cost=0.0)
                m.steps.append(name)
        q = m.cast(v, target) if src != target else v
        m.output(q, exact=True)
        back = draw(st.sampled_from(FLOATS + [d for d in FP8 if d != target]))
        m.output(m.cast(q, back), exact=True)  # fp8 -> wider (or the other fp8): exact
        # arithmetic on fp8 operands computes in f32 (the result is f32); torch: on .float()
        y = m.op("mul", lambda a, c: opmath(a) * c, q, 0.5, cost=0.0)
        m.output(y, exact=True)
        z = float_pointwise(draw, m, m.op("tanh", lambda a: torch.tanh(opmath(a)), q), 2)
        m.output(z)
        if draw(st.booleans()):  # an inexact value to fp8: one fp8 rounding away from torch at worst
            m.output(m.cast(z, draw(st.sampled_from(FP8))))
    return Case(m, ins, sizes, note=f"{src} -> {target}")


@fuzz_settings(default=8)
@given(case=fp8_cases())
def test_fuzz_fp8_casts(case):
    """Draws a [-1, -1] input of f64/f32/f16/bf16 (values over 2^-18..2^16, sometimes with
    0, -0, ±inf, NaN, fp8 range boundaries and subnormals), i32, or fp8 (every finite pattern),
    exact ops (neg, abs, *2, *0.25), a cast to Float8_e4m3fn / Float8_e5m2, back to a wider
    dtype or the other fp8, arithmetic on the fp8 value (in f32, as documented), pointwise ops,
    and sometimes a cast of an inexact value to fp8. Checks bit for bit against torch's .to()
    (NaN as NaN) where the value cast is exact on both sides, within one fp8 rounding where it
    is not; numpy (ml_dtypes) or torch inputs; the cache at new extents."""
    run_case(case)


# --- complex -----------------------------------------------------------------------------------------------

COMPLEX = ["c64", "c128"]


@st.composite
def complex_cases(draw) -> Case:
    cdtype = draw(st.sampled_from(COMPLEX))
    rdtype = draw(st.sampled_from(["f32", "f64", "i32"]))
    sizes = [{"a": extent(draw, 1, 6), "b": extent(draw, 1, 9, big=300)} for _ in range(2)]
    b_max = max(s["b"] for s in sizes)
    fd, m, ins = new_case(draw)
    with fd:
        z = define(m, ins, ["a", "b"], cdtype)
        r = define(m, ins, ["a", "b"], rdtype)
        rv = float_pointwise(draw, m, r, 2) if rdtype in FLOATS else r
        pool = [z, m.cast(rv, draw(st.sampled_from(COMPLEX)))]
        ops = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["binary", "binary", "neg", "scalar", "real_operand"]))
            if kind == "binary":
                name = draw(st.sampled_from(sorted(ops)))
                a, b = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
                if name == "div":
                    b = m.op("add", torch.add, b, 3.0)  # |denominator| >= 3 - |b|: away from 0 mostly
                v = m.op(name, ops[name], a, b, cost=4.0)
            elif kind == "neg":
                v = m.op("neg", torch.neg, draw(st.sampled_from(pool)), cost=0.0)
            elif kind == "scalar":
                name, c = draw(st.sampled_from([("mul", 2.5), ("add", 1), ("sub", -0.5)]))
                v = m.op(name, ops[name], draw(st.sampled_from(pool)), c)
            else:  # complex with a real tensor: torch's promotion
                v = m.op("mul", torch.mul, draw(st.sampled_from(pool)), rv, cost=2.0)
            m.steps.append(kind)
            pool.append(v)
        last = pool[-1]
        m.output(last)
        m.output(m.op("real", torch.real, last, cost=0.0))
        m.output(m.op("imag", torch.imag, last, cost=0.0))
        m.output(m.op("abs", torch.abs, last, cost=2.0))
        m.output(m.op("eq", torch.eq, z, pool[1]), exact=True)
        if draw(st.booleans()):
            m.output(m.op("sum", lambda t, d: torch.sum(t, d), last, [1], cost=sum_cost(last.dtype, b_max)))
    return Case(m, ins, sizes, note=f"{cdtype} with {rdtype}")


@fuzz_settings(default=6)
@given(case=complex_cases())
def test_fuzz_complex(case):
    """Draws a ComplexFloat / ComplexDouble input and a real (f32/f64/i32) input through pointwise
    ops, cast to complex, then 1..4 of add/sub/mul/div (denominators shifted away from 0), neg,
    a real scalar, a complex-times-real product (promotion), with real/imag/abs/eq outputs and
    sometimes a row sum (rows up to 300). Checks against torch complex eager in complex128,
    torch's promoted dtypes, and the cache at new extents."""
    run_case(case)


# --- long pointwise chains ---------------------------------------------------------------------------------

CHAIN_STEPS = ["tanh", "sin", "sigmoid", "mul", "mix", "maximum", "minimum", "neg", "abs", "clamp", "add"]


def _chain_step(m: Mirror, v: V, y: V, step: str, c: float) -> V:
    """One Lipschitz <= 1 op: errors grow at most linearly along the chain."""
    if step in ("tanh", "sin", "sigmoid", "neg", "abs"):
        return m.op(step, getattr(torch, step), v, cost=2.0)
    if step == "mul":
        return m.op("mul", torch.mul, v, c)
    if step == "add":
        return m.op("add", torch.add, v, c)
    if step == "mix":
        return m.op("add", torch.add, m.op("mul", torch.mul, v, 0.5), m.op("mul", torch.mul, y, 0.5))
    if step == "clamp":
        return m.op("clamp", lambda t, lo, hi: torch.clamp(t, lo, hi), v, -0.75, 0.75)
    return m.op(step, getattr(torch, step), v, y)


@st.composite
def chain_cases(draw) -> Case:
    n = draw(st.integers(200, 2000))
    structure = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))  # n steps: drawn from a seed
    io = draw(st.sampled_from(["f32", "f64", "f16", "bf16"]))
    sizes = [{"a": draw(st.integers(1, 9)), "b": draw(st.integers(1, 70))} for _ in range(2)]
    fd, m, ins = new_case()
    with fd:
        x = define(m, ins, ["a", "b"], io)
        y = define(m, ins, ["a", "b"], io)
        compute = "f64" if io == "f64" else "f32"
        v = m.cast(x, compute) if io != compute else x
        yc = m.cast(y, compute) if io != compute else y
        taps = set(structure.choice(n, size=min(3, n), replace=False).tolist())
        for i in range(n):
            step = CHAIN_STEPS[structure.integers(len(CHAIN_STEPS))]
            v = _chain_step(m, v, yc, step, float(structure.choice([0.5, -0.75, 0.9, 0.25])))
            if i in taps:
                m.output(v)
        m.steps.append(f"{n} steps")
        m.output(m.cast(v, io) if io != compute else v)
    return Case(m, ins, sizes, note=f"chain of {n} in {io}")


@fuzz_settings(default=2, campaign_share=0.05)
@given(case=chain_cases())
def test_fuzz_long_pointwise_chains(case):
    """Draws a chain of 200..2,000 pointwise ops (tanh, sin, sigmoid, neg, abs, scalar mul/add,
    clamp, maximum/minimum with and averages with a second input; each Lipschitz <= 1) over
    f32/f64, the inputs and the last output f32/f64/f16/bf16 (cast in and out), with three
    intermediate values as extra outputs. The steps come from a drawn seed (a chain that long is
    not shrunk op by op). Checks against the same chain in torch float64 (tolerance linear in
    the length) and the cache at new extents. Slow to compile: a few examples only."""
    run_case(case)


# --- many outputs --------------------------------------------------------------------------------------------


@st.composite
def many_output_cases(draw) -> Case:
    n_out = draw(st.integers(20, 150))
    dtypes = [draw(st.sampled_from(FLOATS)) for _ in range(draw(st.integers(1, 3)))]
    sizes = [{"a": extent(draw, 1, 6), "b": extent(draw, 1, 33, big=500)} for _ in range(2)]
    b_max = max(s["b"] for s in sizes)
    fd, m, ins = new_case(draw)
    with fd:
        inputs = [define(m, ins, ["a", "b"], dt) for dt in dtypes]
        pool = list(inputs)
        for k in range(n_out):
            kind = draw(st.sampled_from(["unary", "unary", "binary", "cast", "reduce", "reuse"]))
            a = draw(st.sampled_from(pool))
            if kind == "unary":
                v = float_pointwise(draw, m, a, 1, min_ops=1)
                pool.append(v)
            elif kind == "binary":
                b = draw(st.sampled_from(pool))
                name = draw(st.sampled_from(["add", "mul", "maximum"]))
                v = m.op(name, getattr(torch, name), a, b)  # mixed dtypes: torch's promotion
                pool.append(v)
            elif kind == "cast":
                v = m.cast(a, draw(st.sampled_from(FLOATS + ["i32", "i1"])))
            elif kind == "reduce":
                dim = draw(st.integers(0, 1))
                # max over an empty dim: torch refuses it (no identity); sum is 0
                empty = any(sz["ab"[dim]] == 0 for sz in sizes)
                name = "sum" if empty else draw(st.sampled_from(["sum", "max"]))
                fn = (lambda t, d: torch.sum(t, d)) if name == "sum" else (lambda t, d: torch.amax(t, d))
                v = m.op(name, fn, a, [dim], cost=sum_cost(a.dtype, max(6, b_max)) if name == "sum" else 0.0)
            else:
                v = a  # an input or an earlier value as another output
            m.output(v)
        m.steps.append(f"{n_out} outputs")
    return Case(m, ins, sizes, note=f"{n_out} outputs")


@fuzz_settings(default=3, campaign_share=0.25)
@given(case=many_output_cases())
def test_fuzz_many_outputs(case):
    """Draws fusions of 1..3 [-1, -1] float inputs (mixed dtypes) with 20..150 outputs, each a
    new pointwise value (unary/scalar/binary on earlier values, torch's promotion for mixed
    dtypes), a cast (to floats, i32, bool), a sum or max over a dim, or again an input or an
    earlier output (the same value returned twice). Checks every output against torch (float64
    oracle; casts to i32 and bool exactly against torch in the inputs' dtypes) and the cache at
    new extents."""
    run_case(case)


# --- in-place updates (alias_input) -------------------------------------------------------------------------------


@st.composite
def alias_cases(draw):
    dtype = draw(st.sampled_from(FLOATS + INTS))
    floating = dtype in FLOATS
    n_targets = draw(st.integers(1, 2))
    sizes = [{"a": extent(draw, 1, 6), "b": extent(draw, 1, 20, big=300)} for _ in range(2)]
    b_max = max(s["b"] for s in sizes)
    fd, m, ins = new_case(draw)  # permuted: the targets are non-contiguous views (numpy or torch)
    with fd:
        targets = [define(m, ins, ["a", "b"], dtype) for _ in range(n_targets)]
        y = define(m, ins, ["a", "b"], dtype)
        updates = []
        for t in targets:
            if floating:
                u = float_pointwise(draw, m, t, 3, partners=[y] + targets, min_ops=1)
            else:
                name = draw(st.sampled_from(["add", "sub", "mul", "maximum"]))
                u = m.op(name, getattr(torch, name), t, draw(st.sampled_from([y] + targets)))
            updates.append(u)
        for t, u in zip(targets, updates):
            m.output(u, alias=t)  # written after every output is computed: reads see the old values
        for t in targets:
            if draw(st.booleans()):
                m.output(t)  # returned updated
        if draw(st.booleans()):
            other = m.op("neg", torch.neg, targets[0], cost=0.0)  # reads the old value
            m.output(other)
        if draw(st.booleans()):
            m.output(m.op("sum", lambda t, d: torch.sum(t, d), updates[-1], [1], cost=sum_cost(dtype, max(6, b_max))))
        if not m.returned:
            m.output(m.op("abs", torch.abs, y, cost=0.0))
        m.steps.append(f"{n_targets} aliased inputs, permuted={ins.permuted}, torch={ins.as_torch}")
    return Case(m, ins, sizes, note=f"alias_input {dtype}")


@fuzz_settings(default=6)
@given(case=alias_cases())
def test_fuzz_alias_input(case):
    """Draws one or two inputs updated in place (fd.add_output(update, alias_input=input)) by
    pointwise functions of the inputs (floats: through float_pointwise, partners among the
    inputs; integers: add/sub/mul/maximum), numpy or torch inputs (column-major, non-contiguous
    views as targets too), empty and 300-wide rows, the target also added as an output (returned updated),
    another output reading the old value, a row sum of the update. Checks every returned output
    and every updated buffer against torch (update computed from the old values), the cache at
    new extents, then two steps on the same buffers (each step reading the last one's update)."""
    run_case(case)
    for backend in BACKENDS:  # two steps on the same buffers: the second reads the first's update
        inputs = case.make_inputs(np.random.default_rng(5), case.sizes[1])
        for step in range(2):
            before = [_copy_like(a) for a in inputs]
            case.fd.execute(inputs, backend=backend)  # updates the targets among `inputs` in place
            native, wide = evaluate(case.m, before, wide=False), evaluate(case.m, before, wide=True)
            scale = program_scale(wide)
            for v, index in case.m.aliases:
                dtype = DTYPE_OF_TORCH[v(native).dtype]
                assert_output(inputs[index], v(native), v(wide), f"{backend} step {step}: input {index}",
                              tolerance(v, dtype), scale)


def _copy_like(a):
    return a.clone() if isinstance(a, torch.Tensor) else np.array(a, copy=True, order="K")


# --- repros of bugs found by the fuzz tests -------------------------------------------------------------------------
