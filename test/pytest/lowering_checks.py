"""Shared by the lowering tests: run a fusion on the kernel backends under test (by default the
cpu backend — the generated CUDA C compiled with g++ and run on the host — plus cuda where a GPU
is usable; FUSER_TEST_BACKENDS=cuda,cpu names them) and on the numpy reference interpreter (the
oracle), and compare the outputs with a tolerance per dtype.

Tolerances. f16/bf16 ops compute in f32 and round once to their dtype (both sides), so the
outputs differ by at most one unit in the last place of the narrow dtype where the f32 results
straddle a rounding boundary (libm and numpy differ by an f32 ulp or two): 2^-10 relative for
f16, 2^-7 for bf16. f32 and f64 allow a few ulps of libm difference and reduction order.
Integers and bools must be equal.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

import ml_dtypes
import numpy as np
import pytest

from fuser.lowering.backends.cpu_runtime import cpu_compiler_available

BF16 = np.dtype(ml_dtypes.bfloat16)

# (rtol, atol) per output dtype.
TOLERANCE = {
    np.dtype(np.float64): (1e-11, 1e-13),
    np.dtype(np.float32): (2e-5, 1e-5),
    np.dtype(np.float16): (2e-3, 1e-3),
    BF16: (1.6e-2, 1e-2),
}

requires_cpu_backend = pytest.mark.skipif(not cpu_compiler_available(), reason="no g++ (C++20) for the cpu backend")

GENERATED: dict[str, str] = {}
"""Every kernel source `check` has run in this process (by sha256), for the NVRTC compile tests."""
COMPILED: dict[str, set[str]] = {"nvrtc": set(), "nvcc": set()}
"""sha256 of the sources `compile_for_sm90` compiled, per compiler."""


def _sha(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def generated_not_compiled(backend: str) -> dict[str, str]:
    return {h: src for h, src in GENERATED.items() if h not in COMPILED[backend]}


def assert_matches(got, expected, what: str, tol: tuple[float, float] | None = None) -> None:
    """`got` (a kernel backend) equals `expected` (reference) in shape, dtype and values."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, reference {expected.shape}"
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype}, reference {expected.dtype}"
    if expected.dtype in TOLERANCE:
        rtol, atol = tol or TOLERANCE[expected.dtype]
        g, e = got.astype(np.float64), expected.astype(np.float64)
        close = np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    else:
        close = got == expected
    if not np.all(close):
        bad = np.argwhere(~close)
        first = tuple(int(i) for i in bad[0])
        raise AssertionError(
            f"{what}: {len(bad)} of {expected.size} elements differ (dtype {expected.dtype}); first at "
            f"{first}: got {got[first]!r}, reference {expected[first]!r}"
        )


KERNEL_BACKENDS = ("cpu", "cuda")


def backends_under_test() -> list[str]:
    """The kernel backends tests compare with the reference: $FUSER_TEST_BACKENDS (comma-separated,
    e.g. "cuda,cpu"), by default the cpu backend plus cuda where a GPU is usable. conftest.py
    refuses unknown or unusable names at the start of the session; a list naming none (",") stops
    it here, as it would otherwise run no backend test at all."""
    listed = os.environ.get("FUSER_TEST_BACKENDS", "").strip()
    if listed:
        names = [name.strip() for name in listed.split(",") if name.strip()]
        if not names:
            raise pytest.UsageError(f"FUSER_TEST_BACKENDS={listed!r} names no backend; expected some of "
                                    f"{', '.join(KERNEL_BACKENDS)}, comma-separated (unset: the default)")
        return names
    from fuser.lowering.backends.gpu_runtime import gpu_available

    return ["cpu"] + (["cuda"] if gpu_available()[0] else [])


def check(fd, inputs: Sequence[object], names: Sequence[str] | None = None, tol=None, **execute_kwargs):
    """Runs `fd` on the reference and on every backend under test, compares every output; returns
    the kernel records of the cpu run (fd.last_kernels()), which count global bytes: the cpu
    backend also runs when it is not under test but can, for those counts."""
    expected = fd.execute(inputs, backend="reference", **execute_kwargs)
    backends = backends_under_test()
    if "cpu" not in backends and cpu_compiler_available():
        backends.append("cpu")
    kernels = []
    for backend in backends:
        got = fd.execute(inputs, backend=backend, **execute_kwargs)
        if backend == "cpu" or not kernels:
            kernels = fd.last_kernels()
        for k in fd.last_kernels():
            GENERATED[_sha(k.source)] = k.source
        assert len(got) == len(expected)
        for i, (g, e) in enumerate(zip(got, expected)):
            label = f"{backend} output {i}" + (f" ({names[i]})" if names and i < len(names) else "")
            assert_matches(as_numpy(g), e, label, tol)
    return kernels


def as_numpy(x):
    """A backend's output as numpy (the cuda backend returns torch tensors for torch inputs)."""
    if hasattr(x, "detach"):
        t = x.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            import torch

            return t.view(torch.int16).numpy().view(BF16)
        return t.numpy()
    return x


def tie(fd, tensors) -> None:
    """Adds one output that combines `tensors` elementwise (cast to f32).

    Segmentation compares iteration domains symbolically: every `?` extent of a fusion input is
    its own symbol, so reductions of different inputs would land in different kernels (and
    pointwise outputs in different groups of one kernel). An elementwise op joins the symbols of
    the dims it combines, so after this every output shaped like these tensors shares one domain
    (the combined output is itself checked against the reference like any other)."""
    from fuser_dialect import DataType

    total = fd.ops.cast(tensors[0], DataType.Float)
    for t in tensors[1:]:
        total = fd.ops.add(total, fd.ops.cast(t, DataType.Float))
    fd.add_output(total)


def compile_for_sm90(sources: dict[str, str], backend: str, cache_dir, monkeypatch) -> int:
    """Compiles every source for sm_90 with `backend` ("nvrtc" or "nvcc"), for real (a fresh
    cubin cache); skips, saying why, when that compiler is missing. Returns how many compiled."""
    from fuser.lowering.backends import compile as cc

    try:
        label = cc.find_compiler(backend).label
    except cc.CompilerUnavailable as e:
        pytest.skip(f"{backend} unavailable: {e}")
    monkeypatch.setenv("FUSER_CACHE_DIR", str(cache_dir))
    cc.clear_memory_cache()
    for name, source in sources.items():
        result = cc.compile_cuda(source, "sm_90", backend=backend)
        assert result.cubin[:4] == b"\x7fELF", f"{name}: {label} produced no cubin"
        assert result.origin == "compiled"
        COMPILED[backend].add(_sha(source))
    cc.clear_memory_cache()
    return len(sources)


def dram_bytes(record) -> int:
    """The DRAM traffic the performance model counts for a launch record on an H100: each
    tensor once, plus re-reads L2 no longer holds (a weight every row re-reads counts once)."""
    return record.dram_bytes("h100")


def softmax_fusion():
    """softmax over the last dim of a dynamic 2-d f32 tensor: the row kernel tests use it."""
    from fuser import DataType, FusionDefinition

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        m = fd.ops.max(x, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(x, m))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))
    return fd


def softmax_expected(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)

