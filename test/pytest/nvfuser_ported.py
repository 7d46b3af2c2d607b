"""Shared by the tests ported from NVIDIA/Fuser's Python frontend suite
(ported/test_nvfuser_ported_*.py): torch eager as the reference for a fusion definition.

`TorchFD` runs a definition function — `def definition(fd): ...`, written once against nvFuser's
API — with torch instead of fuser: each `define_tensor` / `from_pytorch` / `define_scalar(None)`
takes the next input (as fuser and nvFuser bind them), each `fd.ops.*` is the torch op of the same
meaning, and `add_output(out, alias_input)` writes `out` into that input after the definition
(nvFuser's in-place update, not returned). `check` runs the definition both ways and compares.

Definitions that are run by TorchFD spell shapes as `fd.ops.shape(t)` / `fd.ops.size(t, d)` (a
torch tensor's `.shape` is not callable) and keep to the ops `_TorchOps` knows.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from fuser import DataType, FusionDefinition

BACKENDS = ["reference", "cpu"]

TORCH_DTYPE = {
    DataType.Double: torch.float64, DataType.Float: torch.float32, DataType.Half: torch.float16,
    DataType.BFloat16: torch.bfloat16, DataType.Int: torch.int64, DataType.Int32: torch.int32,
    DataType.Bool: torch.bool, DataType.ComplexFloat: torch.complex64, DataType.ComplexDouble: torch.complex128,
    DataType.Float8_e4m3fn: torch.float8_e4m3fn, DataType.Float8_e5m2: torch.float8_e5m2,
}


def ports(*names: str) -> Callable:
    """Marks a test as the port of these upstream test names (checked by the coverage test)."""

    def mark(fn):
        fn.ports = names
        return fn

    return mark


def ported_names(*modules) -> set[str]:
    """The upstream names the tests of `modules` port."""
    return {name for m in modules for fn in vars(m).values() if isinstance(fn, types.FunctionType)
            for name in getattr(fn, "ports", ())}


def _python(value, dtype):
    """A Python scalar of `dtype` (nvFuser's scalar), or `value` as it is without a dtype."""
    if dtype is None or value is None:
        return value
    dtype = DataType(dtype)
    if dtype in (DataType.Int, DataType.Int32):
        return int(value)
    if dtype is DataType.Bool:
        return bool(value)
    if dtype in (DataType.ComplexFloat, DataType.ComplexDouble):
        return complex(value)
    return float(value)


def _both_scalars(*xs) -> bool:
    return not any(isinstance(x, torch.Tensor) for x in xs)


def _int_like(x) -> bool:
    if isinstance(x, torch.Tensor):
        return not (x.dtype.is_floating_point or x.dtype.is_complex)
    return isinstance(x, int)


class _TorchOps:
    """fd.ops with torch semantics (Python numbers for scalar-only arithmetic)."""

    def __init__(self, fd: TorchFD):
        self.fd = fd

    # elementwise
    def add(self, a, b): return a + b
    def sub(self, a, b): return a - b
    def mul(self, a, b): return a * b
    def truediv(self, a, b): return torch.true_divide(a, b) if not _both_scalars(a, b) else a / b
    def neg(self, a): return -a
    def abs(self, a): return abs(a)
    def pow(self, a, b): return torch.pow(a, b) if not _both_scalars(a, b) else a ** b
    def lt(self, a, b): return a < b
    def le(self, a, b): return a <= b
    def gt(self, a, b): return a > b
    def ge(self, a, b): return a >= b
    def eq(self, a, b): return a == b
    def ne(self, a, b): return a != b
    def bitwise_and(self, a, b): return a & b
    def bitwise_or(self, a, b): return a | b
    def logical_and(self, a, b): return torch.logical_and(torch.as_tensor(a), torch.as_tensor(b))
    def maximum(self, a, b): return torch.maximum(a, b)
    def minimum(self, a, b): return torch.minimum(a, b)
    def set(self, a): return a.clone()
    def segment_set(self, a): return a.clone()
    def stride_order(self, a, stride_order): return a

    def div(self, a, b):
        """nvFuser's div: truncating on integers, true division otherwise."""
        if _int_like(a) and _int_like(b):
            return torch.div(a, b, rounding_mode="trunc") if not _both_scalars(a, b) else int(a / b)
        return a / b

    def fmod(self, a, b):
        if not _both_scalars(a, b):
            return torch.fmod(a, b)
        return a - int(a / b) * b if _int_like(a) and _int_like(b) else math.fmod(a, b)

    def where(self, c, a, b):
        if not isinstance(c, torch.Tensor):
            return a if c else b
        return torch.where(c, a, b)

    def cast(self, a, dtype):
        if isinstance(a, torch.Tensor):
            return a.to(TORCH_DTYPE[DataType(dtype)])
        return _python(a, dtype)

    def __getattr__(self, name: str):
        """Other ops by their torch name; on Python scalars only, computed on float64 0-d tensors."""
        fn = getattr(torch, name)

        def op(*args):
            if not _both_scalars(*args):
                return fn(*args)
            return fn(*(torch.tensor(a, dtype=torch.float64) for a in args)).item()

        return op

    # reductions
    def _reduce(self, fn, a, dims, keepdim, dtype):
        dtype = None if dtype is None or DataType(dtype) is DataType.Null else TORCH_DTYPE[DataType(dtype)]
        dims = list(range(a.ndim)) if dims is None or dims == [] else [dims] if isinstance(dims, int) else list(dims)
        out = fn(a if dtype is None else a.to(dtype), dims, keepdim)
        return out if dtype is None else out.to(dtype)  # an integer sum stays in the dtype asked for

    def sum(self, a, dims=None, keepdim=False, dtype=None):
        return self._reduce(lambda x, d, k: torch.sum(x, d, keepdim=k), a, dims, keepdim, dtype)

    def max(self, a, dims=None, keepdim=False, dtype=None):
        return self._reduce(lambda x, d, k: torch.amax(x, d, keepdim=k), a, dims, keepdim, dtype)

    def min(self, a, dims=None, keepdim=False, dtype=None):
        return self._reduce(lambda x, d, k: torch.amin(x, d, keepdim=k), a, dims, keepdim, dtype)

    def var_mean(self, a, dims, correction=1, keepdim=False):
        return torch.var_mean(a, dims, correction=correction, keepdim=keepdim)

    def var(self, a, dims, correction=1, keepdim=False):
        return torch.var(a, dims, correction=correction, keepdim=keepdim)

    def addcmul(self, a, b, c, value=1.0): return torch.addcmul(a, b, c, value=value)
    def cumsum(self, a, dim): return torch.cumsum(a, dim)
    def cumprod(self, a, dim): return torch.cumprod(a, dim)
    def cummax(self, a, dim): return torch.cummax(a, dim).values
    def cummin(self, a, dim): return torch.cummin(a, dim).values
    def triu(self, a, diagonal=0): return torch.triu(a, diagonal)
    def scatter(self, a, index, src, dim): return torch.scatter(a, dim, index, src)
    def select(self, a, index, dim): return torch.select(a, dim, int(index))

    # shapes
    def size(self, a, dim): return a.size(dim)
    def shape(self, a): return list(a.shape)
    def permute(self, a, dims): return a.permute(list(dims))
    def expand(self, a, shape): return a.expand([int(e) for e in shape])
    def reshape(self, a, new_shape): return a.reshape([int(e) for e in new_shape])
    def cat(self, tensors, dim=0, manual_padding=False): return torch.cat(list(tensors), dim)

    def squeeze(self, a, dims, squeeze_expanded=False):
        dims = [dims] if isinstance(dims, int) else list(dims)
        return a.squeeze(tuple(d % a.ndim for d in dims)) if dims else a

    def broadcast(self, a, is_broadcast_dim):
        for d, new in enumerate(is_broadcast_dim):
            if new:
                a = a.unsqueeze(d)
        return a

    def broadcast_in_dim(self, a, shape, broadcast_dims):
        shape = [int(e) for e in shape]
        view = [1] * len(shape)
        for d, out_dim in enumerate(broadcast_dims):
            view[out_dim] = a.shape[d]
        return a.reshape(view).expand(shape)

    def slice(self, a, start_indices, end_indices, strides=None, manual_normalization=False, python_slicing=False):
        strides = strides or [1] * len(start_indices)
        return a[tuple(slice(int(s), int(e), int(st)) for s, e, st in zip(start_indices, end_indices, strides))]

    def pad(self, a, pad_widths, value=None):
        return F.pad(a, [int(w) for w in pad_widths], value=0.0 if value is None else value)

    # indexing, factories, matmul
    def index_select(self, a, index, dim): return torch.index_select(a, dim, index.reshape(-1))
    def gather(self, a, index, dim): return torch.gather(a, dim, index)
    def take_along_axis(self, a, index, dim): return torch.take_along_dim(a, index, dim)
    def matmul(self, a, b): return torch.matmul(a, b)
    def linear(self, a, b, bias=None): return F.linear(a, b, bias)

    def full(self, shape, fill_value, dtype):
        return torch.full([int(e) for e in shape], fill_value, dtype=TORCH_DTYPE[DataType(dtype)])

    def iota(self, length, start=None, step=None, dtype=DataType.Int):
        start, step = start or 0, 1 if step is None else step
        return torch.arange(length, dtype=TORCH_DTYPE[DataType(dtype)]) * step + start

    def uniform(self, low, high, shape, rng_seed=None, rng_offset=None, dtype=DataType.Float):
        """torch.rand without a seed; with one, fuser's own Philox stream (torch has none), drawn by
        a fusion of just this op on the reference backend."""
        shape = [int(e) for e in shape]
        if rng_seed is None:
            return torch.rand(shape, dtype=TORCH_DTYPE[DataType(dtype)]) * (high - low) + low
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.uniform(fd.define_scalar(float(low)), fd.define_scalar(float(high)), shape,
                                         rng_seed=fd.define_scalar(DataType.Int),
                                         rng_offset=fd.define_scalar(DataType.Int), dtype=dtype))
        return fd.execute([int(rng_seed), int(rng_offset)], backend="reference")[0]


class TorchFD:
    """A definition function's fd, evaluated with torch on `inputs` (see the module doc)."""

    def __init__(self, inputs: Sequence[object]):
        self._inputs = iter(inputs)
        self._aliases: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.outputs: list[torch.Tensor] = []
        self.ops = _TorchOps(self)

    def _next(self):
        return next(self._inputs)

    def define_tensor(self, *args, **kwargs):
        return self._next()

    def from_pytorch(self, tensor, static_sizes=False):
        return self._next()

    def define_scalar(self, value=None, dtype=None):
        if isinstance(value, DataType):
            value, dtype = None, value
        return _python(self._next() if value is None else value, dtype)

    def define_vector(self, values, dtype=DataType.Int):
        return [self._next() for _ in range(values)] if isinstance(values, int) else list(values)

    def add_output(self, out, alias_input=None, stride_order=None):
        if isinstance(alias_input, torch.Tensor):
            self._aliases.append((alias_input, out))
        else:
            self.outputs.append(out)

    def finish(self) -> list[torch.Tensor]:
        values = [out.clone() for _, out in self._aliases]  # every output first, then the writes
        for (target, _), value in zip(self._aliases, values):
            target.copy_(value)
        return self.outputs


def _clone(x):
    return x.clone() if isinstance(x, torch.Tensor) else x


def run_torch(definition: Callable, inputs: Sequence[object]) -> list[torch.Tensor]:
    fd = TorchFD(inputs)
    definition(fd)
    return fd.finish()


def define(definition: Callable) -> FusionDefinition:
    with FusionDefinition() as fd:
        definition(fd)
    return fd


def check(definition: Callable, inputs: Sequence[object] | Callable[[], Sequence[object]], backend: str,
          **tol) -> tuple[FusionDefinition, list]:
    """Runs `definition` on `backend` and with torch (TorchFD), on the same inputs (a list, used
    as given by fuser and cloned for torch, or a function making fresh inputs for each run);
    compares every output (dtype included) with torch.testing.assert_close(**tol)."""
    make = inputs if callable(inputs) else (lambda: [_clone(x) for x in inputs])
    torch_inputs = make()
    want = run_torch(definition, torch_inputs)
    fd = define(definition)
    fuser_inputs = inputs() if callable(inputs) else list(inputs)
    got = fd.execute(fuser_inputs, backend=backend)
    assert len(got) == len(want), f"{len(got)} outputs, torch gives {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, **tol, msg=lambda m, k=k: f"output {k}: {m}")
    for k, (g, w) in enumerate(zip(fuser_inputs, torch_inputs)):  # inputs written by alias_input outputs
        if isinstance(g, torch.Tensor):
            torch.testing.assert_close(g, w, **tol, msg=lambda m, k=k: f"input {k} afterwards: {m}")
    return fd, got


def randn(*shape, dtype=torch.float32, seed: int = 0) -> torch.Tensor:
    """Reproducible test data (values in about [-3, 3])."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(*shape, generator=g, dtype=torch.float32 if dtype.itemsize < 4 else dtype).to(dtype)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-10, 10, shape, generator=g, dtype=dtype)


def strided(shape: Sequence[int], strides: Sequence[int], dtype=torch.float32, seed: int = 0) -> torch.Tensor:
    """A tensor viewing just enough elements with these strides (upstream's `.as_strided` inputs)."""
    size = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    return randn(size, dtype=dtype, seed=seed).as_strided(tuple(shape), tuple(strides))


__all__ = ["BACKENDS", "TORCH_DTYPE", "TorchFD", "check", "define", "math", "ports", "ported_names", "randn",
           "run_torch", "strided"]


def tensor(fd, shape, dtype=DataType.Float, **kwargs):
    """fd.define_tensor, shortened for the repro ports."""
    return fd.define_tensor(shape=shape, dtype=dtype, **kwargs)


def double(fd, value):
    """A Double scalar constant, as the repros spell `fd.define_scalar(x, dtype=DataType.Double)`."""
    return fd.define_scalar(value, dtype=DataType.Double)
