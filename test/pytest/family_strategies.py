"""Shared by fuzz/test_fuzz_families.py: a fusion built twice at once — through `fd.ops` and as a
torch program — so every generated fusion has a torch eager oracle, plus the runner that executes
it on the reference and cpu backends, at two sets of extents and once more from the cache.

- `Mirror` wraps a `FusionDefinition` under construction: `m.tensor(...)`, `m.op(fd_op, torch_fn,
  *args)` and `m.output(...)` add the fuser op and remember the torch function of each value (`V`).
- `evaluate(m, inputs, wide)` runs the torch program on the inputs: `wide=False` in the inputs'
  own dtypes (gives each output's expected dtype and shape: torch's promotion), `wide=True` with
  every floating input widened to float64 (complex to complex128) and every cast to a narrower
  floating dtype rounded to it and widened again (gives the values: "float64 where precision
  matters").
- `float_pointwise(draw, m, v, ...)` draws a few pointwise ops (unary, tensor-scalar, tensor-tensor,
  an occasional segment_set) to mix with each family's op. Ops are Lipschitz-bounded on the
  bounded inputs used here, so the f64 oracle is close to any correctly rounded evaluation.
- Tolerances: each value carries an error estimate in units of "relative to the largest magnitude
  in the program": err(v) = max(err(args)) + cost * u(dtype), u the unit roundoff of the dtype an
  op rounds to (a sum of L terms costs L * u of its accumulation dtype). An output is compared with
  rtol = atol / scale = 8 * err + 4 u(output dtype), scale = max(1, largest |value| of the program).
  Integers and bools are exact; `exact=True` outputs (fp8 casts of exact values) bit for bit.
- `Case` + `run_case`: the fusion, an input maker, two size assignments (the second is the
  cache-reuse run at new extents of the `-1` dims) and what `fd.cache_info()` must show.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import torch
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from fuser import DataType, FusionDefinition
from fuser.lowering.execution.cache_key import layout_of
from suite_settings import example_count

BACKENDS = ("reference", "cpu")

log = logging.getLogger("fuser.fuzz")  # each case drawn: shown with --log-cli-level=INFO (or on failure)

TORCH_OF = {
    "f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
    "f8E4M3FN": torch.float8_e4m3fn, "f8E5M2": torch.float8_e5m2, "c64": torch.complex64,
    "c128": torch.complex128, "i64": torch.int64, "i32": torch.int32, "i1": torch.bool,
}
NUMPY_OF = {
    "f64": np.dtype(np.float64), "f32": np.dtype(np.float32), "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16), "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8E5M2": np.dtype(ml_dtypes.float8_e5m2), "c64": np.dtype(np.complex64), "c128": np.dtype(np.complex128),
    "i64": np.dtype(np.int64), "i32": np.dtype(np.int32), "i1": np.dtype(np.bool_),
}
DTYPE_OF_TORCH = {v: k for k, v in TORCH_OF.items()}
UNIT_ROUNDOFF = {
    "f64": 2.0**-53, "f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8, "f8E4M3FN": 2.0**-4,
    "f8E5M2": 2.0**-3, "c64": 2.0**-24, "c128": 2.0**-53,
}
FLOATS = ["f64", "f32", "f16", "bf16"]
NARROW = ("f16", "bf16", "f8E4M3FN", "f8E5M2")


def accumulation_u(dtype: str) -> float:
    """The unit roundoff sums of `dtype` accumulate in (f16/bf16/fp8: f32)."""
    return UNIT_ROUNDOFF["f32"] if dtype in NARROW else UNIT_ROUNDOFF.get(dtype, 0.0)


# --- example budgets -------------------------------------------------------------------------

CAMPAIGN = example_count("FUSER_FUZZ_EXAMPLES", None)


def examples(default: int, campaign_share: float = 1.0) -> int:
    """Examples per family: `default` (the CI budget), or FUSER_FUZZ_EXAMPLES times
    `campaign_share` (slow families take a share) when that variable is set."""
    if CAMPAIGN is None:
        return default
    return max(1, round(CAMPAIGN * campaign_share))


def fuzz_settings(default: int, campaign_share: float = 1.0) -> settings:
    return settings(max_examples=examples(default, campaign_share), deadline=None, derandomize=True,
                    database=None, print_blob=False,
                    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.large_base_example])


# --- numpy / torch interop -------------------------------------------------------------------


def to_torch(a) -> torch.Tensor:
    """A numpy array (bf16 and fp8 through ml_dtypes), numpy scalar or torch tensor as a tensor."""
    if isinstance(a, torch.Tensor):
        return a
    a = np.asarray(a)
    if a.dtype == NUMPY_OF["bf16"]:
        return torch.from_numpy(np.array(a, order="C").view(np.int16)).view(torch.bfloat16)
    if a.dtype in (NUMPY_OF["f8E4M3FN"], NUMPY_OF["f8E5M2"]):
        dt = DTYPE_OF_NUMPY[a.dtype]
        return torch.from_numpy(np.array(a, order="C").view(np.uint8)).view(TORCH_OF[dt])
    return torch.from_numpy(np.array(a, copy=True))


DTYPE_OF_NUMPY = {v: k for k, v in NUMPY_OF.items()}


def to_numpy(t: torch.Tensor) -> np.ndarray:
    dt = DTYPE_OF_TORCH[t.dtype]
    if dt == "bf16":
        return t.contiguous().view(torch.int16).numpy().copy().view(ml_dtypes.bfloat16)
    if dt in ("f8E4M3FN", "f8E5M2"):
        return t.contiguous().view(torch.uint8).numpy().copy().view(NUMPY_OF[dt])
    return t.numpy().copy()


def random_array(rng: np.random.Generator, dtype: str, shape, low=-2.0, high=2.0) -> np.ndarray:
    """Uniform values in [low, high) (integers: in [low, high] rounded), in `dtype`."""
    shape = tuple(shape)
    if dtype == "i1":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype in ("i32", "i64"):
        return rng.integers(int(low), int(high) + 1, shape).astype(NUMPY_OF[dtype])
    if dtype in ("c64", "c128"):
        return (rng.uniform(low, high, shape) + 1j * rng.uniform(low, high, shape)).astype(NUMPY_OF[dtype])
    return rng.uniform(low, high, shape).astype(NUMPY_OF[dtype])


def widen(t: torch.Tensor) -> torch.Tensor:
    if t.is_complex():
        return t.to(torch.complex128)
    if t.is_floating_point():
        return t.to(torch.float64)
    return t


# --- the mirrored program ----------------------------------------------------------------------


class V:
    """A value of the fusion (`t`: the builder's Tensor/Scalar, or None for a torch-only
    helper) with its torch function of the evaluation context and its error estimate."""

    __slots__ = ("t", "fn", "err", "index", "undecided")

    def __init__(self, t, fn: Callable[[Env], object], err: float = 0.0):
        self.t, self.fn, self.err = t, fn, err
        self.index: int | None = None  # the input position, for an input
        # for a float cast to an integer or bool: the elements whose source lies within its
        # rounding error of a cut (0 for bool, an integer for truncation), which either side
        # of the cut may legitimately give (fuser keeps 16-bit intermediates in float)
        self.undecided: Callable[[Env, float], torch.Tensor] | None = None

    def __call__(self, env: Env):
        memo = env.memo
        key = id(self)
        if key not in memo:
            memo[key] = self.fn(env)
        return memo[key]

    @property
    def dtype(self) -> str:
        return self.t.type.dtype if hasattr(self.t, "type") else self.t.dtype

    @property
    def ndim(self) -> int:
        return self.t.ndim


@dataclass
class Env:
    inputs: list
    wide: bool
    memo: dict = field(default_factory=dict)


def _arg(a, env: Env):
    return a(env) if isinstance(a, V) else a


class Mirror:
    """A FusionDefinition under construction (`with m.fd:` around the building) and the torch
    program of each of its values."""

    def __init__(self, fd: FusionDefinition):
        self.fd = fd
        self.n_inputs = 0
        self.input_dtypes: list[str | None] = []
        self.returned: list[V] = []
        self.aliases: list[tuple[V, int]] = []  # (value, input index it is written into)
        self.exact: set[int] = set()  # id(V) of outputs compared bit for bit with torch native
        self.steps: list[str] = []
        self.values: list[V] = []  # every value in creation order: evaluated in this order (no deep recursion)

    def _new(self, v: V) -> V:
        self.values.append(v)
        return v

    # inputs
    def tensor(self, shape, dtype: str, **kwargs) -> V:
        index = self.n_inputs
        self.n_inputs += 1
        self.input_dtypes.append(dtype)
        t = self.fd.define_tensor(shape=list(shape), dtype=DataType(dtype), **kwargs)
        v = V(t, lambda env: env.inputs[index])
        v.index = index
        return self._new(v)

    def scalar(self, dtype: str) -> V:
        index = self.n_inputs
        self.n_inputs += 1
        self.input_dtypes.append(None)
        v = V(self.fd.define_scalar(dtype=DataType(dtype)), lambda env: env.inputs[index])
        v.index = index
        return self._new(v)

    # ops
    def op(self, fd_op: Callable | str, torch_fn: Callable, *args, cost: float = 1.0, **fd_kwargs) -> V:
        """`fd_op(*fuser args)` (a name: `fd.ops.<name>`) mirrored by `torch_fn(*torch args)`;
        `cost`: rounding steps of the op in units of its result dtype's unit roundoff."""
        if isinstance(fd_op, str):
            fd_op = getattr(self.fd.ops, fd_op)
        t = fd_op(*[a.t if isinstance(a, V) else a for a in args], **fd_kwargs)
        err = max([a.err for a in args if isinstance(a, V)], default=0.0)
        v = V(t, lambda env: torch_fn(*[_arg(a, env) for a in args]), err)
        if t is not None and hasattr(t, "type") and hasattr(t.type, "dtype"):
            v.err += cost * UNIT_ROUNDOFF.get(t.type.dtype, 0.0)
        return self._new(v)

    def derived(self, t, fn: Callable[[Env], object], err: float) -> V:
        """A value whose fuser side was built by the caller (several outputs of one op)."""
        return self._new(V(t, fn, err))

    def cast(self, v: V, dtype: str) -> V:
        """fd.ops.cast; torch: .to(dtype), in the wide evaluation rounded to dtype and widened."""
        target = TORCH_OF[dtype]

        def fn(env, x):
            y = x.to(target)
            return widen(y) if env.wide else y

        t = self.fd.ops.cast(v.t, DataType(dtype))
        out = V(t, lambda env: fn(env, v(env)), v.err + UNIT_ROUNDOFF.get(dtype, 0.0))
        if v.dtype in FLOATS and dtype not in FLOATS:
            def undecided(wide_env: Env, scale: float) -> torch.Tensor:
                x = v(wide_env).to(torch.float64)
                cut = torch.zeros_like(x) if dtype == "i1" else torch.round(x)
                return (x - cut).abs() <= tolerance(v, v.dtype) * max(scale, 1.0)
            out.undecided = undecided
        self.steps.append(f"cast->{dtype}")
        return self._new(out)

    def output(self, v: V, alias: V | None = None, exact: bool = False) -> None:
        if alias is None:
            self.fd.add_output(v.t)
            self.returned.append(v)
        else:
            self.fd.add_output(v.t, alias_input=alias.t)
            self.aliases.append((v, alias.index))
        if exact:
            self.exact.add(id(v))


def evaluate(m: Mirror, inputs: Sequence[object], wide: bool) -> Env:
    tensors = []
    for a, dt in zip(inputs, m.input_dtypes):
        if dt is None:
            tensors.append(a)
            continue
        t = to_torch(a).clone()
        tensors.append(widen(t) if wide else t)
    env = Env(tensors, wide)
    for v in m.values:
        v(env)
    return env


# --- pointwise mixing ----------------------------------------------------------------------------

FLOAT_UNARY = {
    "neg": torch.neg, "abs": torch.abs, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "sin": torch.sin,
    "cos": torch.cos, "relu": torch.relu, "silu": torch.nn.functional.silu, "erf": torch.erf, "atan": torch.atan,
}
FLOAT_SCALAR = [("mul", 0.5), ("mul", -1.5), ("mul", 2.0), ("add", 0.25), ("add", -1.0), ("sub", 0.75)]
FLOAT_BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
                "minimum": torch.minimum}
TORCH_BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}


def float_pointwise(draw, m: Mirror, v: V, max_ops: int = 3, partners: Sequence[V] = (), min_ops: int = 0) -> V:
    """`v` (a floating tensor) through 0..max_ops drawn pointwise ops; a partner (a floating tensor
    of v's shape and dtype) may be the other operand of a binary op."""
    for _ in range(draw(st.integers(min_ops, max_ops))):
        kinds = ["unary", "unary", "scalar", "clamp", "segment_set"] + ["binary"] * (2 if partners else 0)
        kind = draw(st.sampled_from(kinds))
        if kind == "unary":
            name = draw(st.sampled_from(sorted(FLOAT_UNARY)))
            v = m.op(name, FLOAT_UNARY[name], v, cost=2.0)
            m.steps.append(name)
        elif kind == "scalar":
            name, c = draw(st.sampled_from(FLOAT_SCALAR))
            v = m.op(name, TORCH_BINARY[name], v, c)
            m.steps.append(f"{name} {c}")
        elif kind == "clamp":
            v = m.op("clamp", lambda x, lo, hi: torch.clamp(x, lo, hi), v, -0.5, 1.0)
            m.steps.append("clamp")
        elif kind == "segment_set":
            v = m.op("segment_set", lambda x: x, v, cost=0.0)
            m.steps.append("segment_set")
        else:
            other = draw(st.sampled_from(list(partners)))
            name = draw(st.sampled_from(sorted(FLOAT_BINARY)))
            a, b = (v, other) if draw(st.booleans()) else (other, v)
            v = m.op(name, FLOAT_BINARY[name], a, b)
            m.steps.append(f"{name}(tensor)")
    return v


# --- comparison ----------------------------------------------------------------------------------


def program_scale(env: Env) -> float:
    """The largest finite magnitude among the evaluated values (at least 1)."""
    scale = 1.0
    for value in env.memo.values():
        if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()) and value.numel():
            a = value.abs().to(torch.float64)
            a = a[torch.isfinite(a)]
            if a.numel():
                scale = max(scale, float(a.max()))
    return scale


def tolerance(v: V, dtype: str, factor: float = 1.0) -> float:
    return factor * (8 * v.err + 4 * UNIT_ROUNDOFF.get(dtype, 0.0))


def assert_output(got, native: torch.Tensor, wide: torch.Tensor, what: str, tol: float, scale: float,
                  exact: bool = False, skip: torch.Tensor | None = None) -> None:
    """`got` against torch: exactly for integers, bools and `exact` outputs, else within `tol`
    of the float64 evaluation `wide`; elements where `skip` is true are not compared."""
    got = to_torch(got)
    native = native if isinstance(native, torch.Tensor) else torch.tensor(native)
    assert got.dtype == native.dtype, f"{what}: dtype {got.dtype}, torch {native.dtype}"
    assert tuple(got.shape) == tuple(native.shape), f"{what}: shape {tuple(got.shape)}, torch {tuple(native.shape)}"
    if skip is not None and bool(skip.any()):
        keep = ~skip.expand(native.shape)
        got, native, wide = got[keep], native[keep], wide[keep]
    if exact or not (native.is_floating_point() or native.is_complex()):
        if native.is_floating_point() or native.is_complex():
            g, w = got.to(torch.complex128 if native.is_complex() else torch.float64), \
                native.to(torch.complex128 if native.is_complex() else torch.float64)
            nan_g, nan_w = torch.isnan(g), torch.isnan(w)
            ok = torch.equal(nan_g, nan_w) and torch.equal(g[~nan_g], w[~nan_w])
        else:
            ok = torch.equal(got, native)
        if not ok:
            bad = (got != native).nonzero()
            first = tuple(bad[0].tolist()) if len(bad) else ()
            raise AssertionError(f"{what}: {len(bad)} of {native.numel()} elements differ (exact); first at {first}: "
                                 f"got {got[first].item() if first else got!r}, torch {native[first].item() if first else native!r}")
        return
    kind = torch.complex128 if native.is_complex() else torch.float64
    g, w = got.to(kind), wide.to(kind)
    close = torch.isclose(g, w, rtol=tol, atol=tol * scale, equal_nan=True)
    if not bool(close.all()):
        bad = (~close).nonzero()
        first = tuple(bad[0].tolist())
        raise AssertionError(
            f"{what}: {len(bad)} of {native.numel()} elements differ beyond rtol={tol:.3g} atol={tol * scale:.3g} "
            f"(dtype {got.dtype}); first at {first}: got {g[first].item()!r}, torch (f64) {w[first].item()!r}")


# --- cases ---------------------------------------------------------------------------------------------


class Case:
    """A generated fusion: `make_inputs(rng, sizes)` gives inputs for one size assignment;
    `sizes[0]` is the first run, `sizes[1:]` the runs at new extents (cache reuse).
    The cpu runs must leave one cache entry per distinct (input layouts, `pattern(sizes)`):
    `pattern` gives the run-time decisions of the concretization besides layouts (gathers:
    which match their input off the gathered dim); `check_entries=False` skips that count."""

    def __init__(self, m: Mirror, make_inputs: Callable[[np.random.Generator, dict], list], sizes: list[dict],
                 pattern: Callable[[dict], object] = lambda sizes: (), check_entries: bool = True,
                 tol_factor: float = 1.0, note: str = ""):
        self.m, self.make_inputs, self.sizes = m, make_inputs, sizes
        self.pattern, self.check_entries = pattern, check_entries
        self.tol_factor, self.note = tol_factor, note

    def _repr_pretty_(self, p, cycle) -> None:  # what hypothesis prints for a failing example
        p.text(repr(self))

    @property
    def fd(self) -> FusionDefinition:
        return self.m.fd

    def __repr__(self) -> str:
        text = str(self.fd)
        if len(text) > 6000:
            text = text[:3000] + "\n  ...\n" + text[-2000:]
        return f"Case({self.note}, sizes={self.sizes}, steps={self.m.steps})\n{text}"


def _copy(a):
    if isinstance(a, torch.Tensor):
        return a.clone()
    if isinstance(a, np.ndarray):
        return np.array(a, copy=True, order="K")  # keeps a column-major view column-major
    return a


def check_run(case: Case, inputs: list, backend: str, what: str) -> list:
    """Executes once on copies of `inputs` and compares every output and every in-place update
    with torch; returns the outputs."""
    m = case.m
    args = [_copy(a) for a in inputs]
    got = case.fd.execute(args, backend=backend)
    native = evaluate(m, inputs, wide=False)
    wide = evaluate(m, inputs, wide=True)
    alias_of = {index: v for v, index in m.aliases}
    assert len(got) == len(m.returned), f"{what}: {len(got)} outputs, expected {len(m.returned)}"
    # an aliased input that is also an output comes back updated
    expected = [alias_of[v.index] if v.index in alias_of else v for v in m.returned]
    scale = program_scale(wide)

    def compare(g, v: V, label: str) -> None:
        n = v(native)
        dtype = DTYPE_OF_TORCH[n.dtype] if isinstance(n, torch.Tensor) else "f64"
        skip = v.undecided(wide, scale) if v.undecided is not None else None
        assert_output(g, n, v(wide), f"{what}: {label}", tolerance(v, dtype, case.tol_factor), scale,
                      id(v) in m.exact, skip)

    for k, (g, v) in enumerate(zip(got, expected)):
        compare(g, v, f"output {k}")
    for v, index in m.aliases:
        compare(args[index], v, f"input {index} updated in place (alias_input)")
    return got


def run_case(case: Case, backends: Sequence[str] = BACKENDS, seed: int = 0) -> None:
    """Every size assignment on every backend against torch; on the cpu backend then: one cache
    key per expected concretization, one compile-or-reuse per call, and the first extents again
    served from the cache (a hit, no compile)."""
    log.info("%s, sizes %s, %d ops: %s", case.note, case.sizes, len(case.m.values), " ".join(case.m.steps)[:300])
    for backend in backends:
        keys = set()
        for r, sizes in enumerate(case.sizes):
            inputs = case.make_inputs(np.random.default_rng(seed + r), sizes)
            keys.add((tuple(layout_of(a) for a in inputs if hasattr(a, "shape") and np.ndim(a) > 0),
                      case.pattern(sizes)))
            check_run(case, inputs, backend, f"{backend}, run {r}, sizes {sizes}")
        if backend == "cpu":
            info = case.fd.cache_info()
            assert info.hits + info.misses == len(case.sizes), info
            if case.check_entries:
                assert len(info.entries) == len(keys), \
                    f"{len(info.entries)} cache entries, expected {len(keys)} (layouts, pattern): {keys}; {info.entries}"
            inputs = case.make_inputs(np.random.default_rng(seed), case.sizes[0])
            check_run(case, inputs, backend, f"{backend}, run 0 again (cache), sizes {case.sizes[0]}")
            after = case.fd.cache_info()
            assert (after.hits, after.misses) == (info.hits + 1, info.misses), \
                f"the first extents again compiled: {info} -> {after}"


def extents(draw, names: Sequence[str], low: int = 1, high: int = 6) -> dict:
    return {n: draw(st.integers(low, high)) for n in names}
