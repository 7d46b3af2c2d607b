"""fd.ops.select against torch.select, on the reference interpreter and the cpu backend: every
dim of a rank-3 tensor, constant and run-time indices, negative indices (counted from the end),
static and dynamic extents, and out-of-range indices (an IndexError before anything runs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from lowering_checks import assert_matches, requires_cpu_backend

pytestmark = requires_cpu_backend

BACKENDS = ["reference", "cpu"]


def _x(shape=(5, 7, 9), dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(dtype)


def select_fusion(shape=(-1, -1, -1), dtype=DataType.Float):
    """select(x, k, d) for a run-time k on every dim d, and constants 1 and -2 on dims 0 and 2."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=list(shape), dtype=dtype)
        k = fd.define_scalar(dtype=DataType.Int)
        for d in range(3):
            fd.add_output(fd.ops.select(x, k, d))
        fd.add_output(fd.ops.select(x, 1, 0))
        fd.add_output(fd.ops.select(x, -2, 2))
    return fd


def expected(x: np.ndarray, k: int) -> list[np.ndarray]:
    t = torch.from_numpy(x)
    return [torch.select(t, d, k).numpy() for d in range(3)] + [torch.select(t, 0, 1).numpy(),
                                                               torch.select(t, 2, -2).numpy()]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_select_every_dim(static, backend):
    x = _x()
    fd = select_fusion(x.shape if static else (-1, -1, -1))
    for k in (0, 3, 4, -1, -5):
        outputs = fd.execute([x, k], backend=backend)
        for i, (got, want) in enumerate(zip(outputs, expected(x, k))):
            assert_matches(got, want, f"output {i}, index {k} ({backend})")
    if backend == "cpu":
        assert [k.scheduler for k in fd.last_kernels()] == ["pointwise"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,npdt", [(DataType.Half, np.float16), (DataType.Bool, np.bool_),
                                        (DataType.Int32, np.int32)], ids=["f16", "bool", "i32"])
def test_select_keeps_the_dtype(dtype, npdt, backend):
    x = (_x() * 10).astype(npdt)
    fd = select_fusion(dtype=dtype)
    outputs = fd.execute([x, 2], backend=backend)
    for i, (got, want) in enumerate(zip(outputs, expected(x, 2))):
        assert_matches(got, want, f"output {i} ({backend})")


@pytest.mark.parametrize("backend", BACKENDS)
def test_select_fuses_with_producers_and_consumers(backend):
    """exp(x) selected, then scaled: one pointwise kernel reading one slice of x; the selected
    row then scanned: cumsum(select(x, -1, 0), 0) in a scan kernel."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.select(fd.ops.exp(x), -1, 0) * 2)
        fd.add_output(fd.ops.cumsum(fd.ops.select(x, 2, 1), 0))
    x = _x((40, 6))
    t = torch.from_numpy(x)
    row, scanned = fd.execute([x], backend=backend)
    assert_matches(row, (torch.exp(t)[-1] * 2).numpy(), f"exp row ({backend})")
    assert_matches(scanned, torch.cumsum(t[:, 2], 0).numpy(), f"cumsum column ({backend})")
    if backend == "cpu":
        kernels = fd.last_kernels()
        assert sorted(k.scheduler for k in kernels) == ["pointwise", "scan"]
        # Each kernel reads only the slice it selects.
        assert sorted(k.bytes_loaded for k in kernels) == [4 * 6, 4 * 40]


def test_select_of_a_rank1_tensor_is_rank0():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Double)
        fd.add_output(fd.ops.select(x, -3, 0))
    x = np.arange(10, dtype=np.float64)
    for backend in BACKENDS:
        (got,) = fd.execute([x], backend=backend)
        assert_matches(got, torch.select(torch.from_numpy(x), 0, -3).numpy(), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [9, -10, 100])
def test_run_time_index_out_of_range_is_an_index_error(bad, backend):
    x = _x()
    fd = select_fusion()
    fd.execute([x, 4], backend=backend)  # a valid call first: a replayed launch plan must still check
    with pytest.raises(IndexError, match=rf"fuser.select: index {bad} is out of range for dim \d of extent \d"):
        fd.execute([x, bad], backend=backend)
    with pytest.raises(IndexError):
        torch.select(torch.from_numpy(x), 2, bad)  # torch agrees


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_index_out_of_range_for_a_dynamic_extent(backend):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.select(x, -4, 1))
    (got,) = fd.execute([_x((2, 4))], backend=backend)
    assert_matches(got, _x((2, 4))[:, 0], backend)
    with pytest.raises(IndexError, match=r"fuser.select: index -4 is out of range for dim 1 of extent 3 \(valid: -3..2\)"):
        fd.execute([_x((2, 3))], backend=backend)


def test_bad_arguments():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[4, -1], dtype=DataType.Float)
        with pytest.raises(IndexError, match=r"select: index 4 is out of range for dim 0 of extent 4 \(valid: -4..3\)"):
            fd.ops.select(x, 4, 0)
        with pytest.raises(ValueError, match="select: dim 2 is out of range for a tensor of rank 2"):
            fd.ops.select(x, 0, 2)
        with pytest.raises(TypeError, match=r"select: index = 1.0: expected an int"):
            fd.ops.select(x, 1.0, 0)
        with pytest.raises(TypeError, match="select: index must be an integer Scalar, got a f64 Scalar"):
            fd.ops.select(x, fd.define_scalar(dtype=DataType.Double), 0)
        with pytest.raises(TypeError, match="select: arg must be a Tensor"):
            fd.ops.select(3, 0, 0)
        fd.add_output(fd.ops.select(x, 1, 1))
