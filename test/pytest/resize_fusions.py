"""Fusions with dynamic resize ops, their numpy oracles and input samplers, and a memoizing
stand-in executor — shared by passes/test_concretize.py, execution/test_cache.py and
fuzz/test_executor_property.py.

Each `Case` has: `build()` → a FusionDefinition; `oracle(inputs)` → the expected outputs,
written directly in numpy (independent of the interpreter, with nvFuser's semantics: a resized
dim of extent 1 broadcasts); `sample(rng)` → one valid list of inputs.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from xdsl.printer import Printer

from fuser import DataType, FusionDefinition
from fuser_dialect.extents import ExtentPlan, runtime_arguments
from fuser_dialect.fusion import the_fusion
from fuser_dialect.inputs import check_inputs
from fuser_dialect.interpreter import interpret
from fuser.lowering.execution.cache import FusionCache
from fuser.lowering.execution.cache_key import CacheKey, make_key
from fuser.passes.concretize import concretize


def printed(op) -> str:
    stream = io.StringIO()
    Printer(stream=stream).print_op(op)
    return stream.getvalue()


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def np_pad(x: np.ndarray, widths: list[tuple[int, int]]) -> np.ndarray:
    """F.pad per dim (left, right) in dim order; negative widths crop."""
    index = tuple(slice(max(-lo, 0), x.shape[d] - max(-hi, 0)) for d, (lo, hi) in enumerate(widths))
    x = x[index]
    return np.pad(x, [(max(lo, 0), max(hi, 0)) for lo, hi in widths])


# --- the cases ----------------------------------------------------------------------------------


def pad_to_broadcast() -> FusionDefinition:
    """nvFuser's example: pad [?, 3, 2, 5, 6]-like by (0,-1),(-4,0),(1,1),(-1,-1), times y."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * 5)
        y = fd.define_tensor(shape=[-1] * 5)
        p = fd.ops.pad(x, [0, -1, -4, 0, 1, 1, -1, -1])
        fd.add_output(fd.ops.mul(p, y))
    return fd


def pad_to_broadcast_oracle(inputs):
    x, y = inputs
    return [np_pad(x, [(0, 0), (-1, -1), (1, 1), (-4, 0), (0, -1)]) * y]


def pad_to_broadcast_sample(rng):
    b, a, c, d, e = rng.integers(1, 4), rng.integers(2, 5), rng.integers(1, 4), rng.integers(4, 7), rng.integers(2, 5)
    out = [b, a - 2, c + 2, d - 4, e - 1]
    # Where a padded dim has extent 1 it broadcasts: y may have any extent there (not in the
    # batch dim 0: it is not resized, so a batch of 1 is an ordinary extent).
    y_shape = [out[0]] + [rng.integers(1, 4) if o == 1 else o for o in out[1:]]
    return [_f32(rng, b, a, c, d, e), _f32(rng, *y_shape)]


def pad_scalar_widths() -> FusionDefinition:
    """The last dim padded by (w, r), two scalar inputs; the result times y."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        y = fd.define_tensor(shape=[-1, -1])
        w = fd.define_scalar(dtype=DataType.Int)
        r = fd.define_scalar(dtype=DataType.Int)
        p = fd.ops.pad(x, [w, r], 0.5)
        fd.add_output(fd.ops.mul(fd.ops.exp(p), y))
    return fd


def pad_scalar_widths_oracle(inputs):
    x, y, w, r = inputs
    p = np_pad(x, [(0, 0), (w, r)])
    p[:, : max(w, 0)] = 0.5
    if r > 0:
        p[:, p.shape[1] - r:] = 0.5
    return [np.exp(p) * y]


def pad_scalar_widths_sample(rng):
    rows, cols = int(rng.integers(1, 4)), int(rng.integers(1, 6))
    w = int(rng.integers(-cols, 3))
    out = int(rng.integers(1, 5))
    r = out - cols - w
    if max(-w, 0) + max(-r, 0) > cols:  # keep crops within the extent
        w, r = 0, out - cols
    y_cols = int(rng.integers(1, 4)) if out == 1 else out
    return [_f32(rng, rows, cols), _f32(rng, rows, y_cols), w, r]


def rope() -> FusionDefinition:
    """RoPE-like: out = x * cos[:S] + rotate_half(x) * sin[:S]; rotate_half = cat(-x2, x1)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1, -1])
        cos = fd.define_tensor(shape=[-1, -1])
        sin = fd.define_tensor(shape=[-1, -1])
        b, h, s, d = x.shape()
        half = d // 2
        c = fd.ops.slice(cos, [0, 0], [s, cos.size(1)])
        sn = fd.ops.slice(sin, [0, 0], [s, sin.size(1)])
        x1 = fd.ops.slice(x, [0, 0, 0, 0], [b, h, s, half])
        x2 = fd.ops.slice(x, [0, 0, 0, half], [b, h, s, d])
        rot = fd.ops.cat([fd.ops.neg(x2), x1], -1)
        cb = fd.ops.broadcast_in_dim(c, [1, 1, s, d], [2, 3])
        sb = fd.ops.broadcast_in_dim(sn, [1, 1, s, d], [2, 3])
        fd.add_output(x * cb + rot * sb)
    return fd


def rope_oracle(inputs):
    x, cos, sin = inputs
    s, d = x.shape[2], x.shape[3]
    half = d // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return [x * cos[:s] + rot * sin[:s]]


def rope_inputs(rng, b: int, h: int, s: int, d: int, p: int):
    return [_f32(rng, b, h, s, d), _f32(rng, p, d), _f32(rng, p, d)]


def rope_sample(rng):
    s = int(rng.integers(1, 7))
    return rope_inputs(rng, int(rng.integers(1, 3)), int(rng.integers(1, 3)), s,
                       int(rng.choice([2, 4, 6])), int(rng.integers(s, 9)))


def slice_rows() -> FusionDefinition:
    """Rows lo:hi of x (torch bounds: negative from the end, clamped) plus y."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        y = fd.define_tensor(shape=[-1, -1])
        lo = fd.define_scalar(dtype=DataType.Int)
        hi = fd.define_scalar(dtype=DataType.Int)
        rows = fd.ops.slice(x, [lo, 0], [hi, x.size(1)])
        fd.add_output(fd.ops.add(rows, y))
    return fd


def slice_rows_oracle(inputs):
    x, y, lo, hi = inputs
    return [x[lo:hi] + y]


def slice_rows_sample(rng):
    n, cols = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    lo, hi = int(rng.integers(-n - 1, n + 1)), int(rng.integers(-n - 1, n + 2))
    out = len(range(n)[lo:hi])
    if out == 0:  # keep the result non-empty, so y's extent is constrained
        lo, hi = 0, n
        out = n
    y_rows = int(rng.integers(1, 4)) if out == 1 else out
    return [_f32(rng, n, cols), _f32(rng, y_rows, cols), lo, hi]


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], FusionDefinition]
    oracle: Callable
    sample: Callable


CASES = [
    Case("pad_to_broadcast", pad_to_broadcast, pad_to_broadcast_oracle, pad_to_broadcast_sample),
    Case("pad_scalar_widths", pad_scalar_widths, pad_scalar_widths_oracle, pad_scalar_widths_sample),
    Case("rope", rope, rope_oracle, rope_sample),
    Case("slice_rows", slice_rows, slice_rows_oracle, slice_rows_sample),
]


# --- the stand-in executor ----------------------------------------------------------------------------


@dataclass
class Built:
    """What a miss builds: the concretized module (the stand-in for compiled kernels)."""

    module: object
    info: object
    text: str


@dataclass
class ReferenceExecutor:
    """check inputs → key (make_key on an ExtentPlan) → cached concretized module (built on a miss
    by `concretize` on a clone) → the reference interpreter on that module. A stale entry
    (a key that misses something the concretization consumed) fails here: the concretized
    module's static extents reject the inputs, or its static widths give wrong results."""

    fd: FusionDefinition
    resize_extents: bool = True
    maxsize: int | None = None
    builds: int = 0
    keys: list[CacheKey] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.fusion = self.fd.fusion
        self.plan = ExtentPlan(self.fusion)
        self.cache: FusionCache[Built] = FusionCache(self.maxsize)

    def key(self, inputs) -> tuple[CacheKey, list, list]:
        checked = check_inputs(self.fusion, inputs)
        shapes, scalars = runtime_arguments(self.plan, checked)
        extents = self.plan.evaluate(shapes, scalars)
        return make_key(self.plan, checked, "reference", self.resize_extents, extents=extents), shapes, scalars

    def execute(self, inputs) -> tuple[list, CacheKey, Built]:
        key, shapes, scalars = self.key(inputs)
        self.keys.append(key)

        def build() -> Built:
            self.builds += 1
            module = self.fd.module.clone()
            info = concretize(module, shapes, scalars, self.resize_extents)
            return Built(module, info, printed(module))

        built = self.cache.lookup_or_build(key, build)
        return interpret(the_fusion(built.module), inputs), key, built
