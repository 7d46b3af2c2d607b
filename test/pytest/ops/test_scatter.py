"""fd.ops.scatter against torch.scatter, on the reference interpreter and the cpu backend: every
dim of a rank-3 input, an index smaller than the input and than src, a number as src, i32
indices and 16-bit dtypes, static and dynamic extents; colliding indices (the last along dim
wins, on both backends); fusion with producers and consumers in one kernel; out-of-range
indices and extents (clear errors before anything runs); torch.compile's scatter."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from lowering_checks import assert_matches, requires_cpu_backend

pytestmark = requires_cpu_backend

BACKENDS = ["reference", "cpu"]


def distinct_index(rng, index_shape, extent: int, dim: int) -> np.ndarray:
    """An index with distinct positions along `dim` (torch's result is then well defined)."""
    moved = list(index_shape)
    k = moved.pop(dim)
    rows = [rng.permutation(extent)[:k] for _ in range(int(np.prod(moved)))]
    return np.moveaxis(np.array(rows, np.int64).reshape(*moved, k), -1, dim)


def scatter_fusion(rank: int, dim: int, static_shapes=None, dtype=DataType.Float, index_dtype=DataType.Int):
    shapes = static_shapes or [[-1] * rank] * 3
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=shapes[0], dtype=dtype)
        i = fd.define_tensor(shape=shapes[1], dtype=index_dtype)
        s = fd.define_tensor(shape=shapes[2], dtype=dtype)
        fd.add_output(fd.ops.scatter(x, i, s, dim))
    return fd


def torch_scatter(x, index, src, dim):
    return torch.from_numpy(np.asarray(x, np.float32)).scatter(
        dim, torch.from_numpy(index.astype(np.int64)), torch.from_numpy(np.asarray(src, np.float32))).numpy()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_scatter_every_dim_with_a_smaller_index(dim, static, backend):
    rng = np.random.default_rng(dim)
    x = rng.standard_normal((5, 6, 7)).astype(np.float32)
    index_shape = [4, 5, 6]
    index_shape[dim] = 3
    index = distinct_index(rng, index_shape, x.shape[dim], dim)
    src = rng.standard_normal((5, 6, 7)).astype(np.float32)  # larger than the index everywhere
    shapes = [list(x.shape), list(index.shape), list(src.shape)] if static else None
    fd = scatter_fusion(3, dim, shapes)
    (got,) = fd.execute([x, index, src], backend=backend)
    assert_matches(got, torch_scatter(x, index, src, dim), f"scatter dim {dim} ({backend})")


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_of_a_number_builds_a_one_hot(backend):
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 10, size=(8, 1))
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        y = fd.define_tensor(shape=[-1, 1], dtype=DataType.Int)
        fd.add_output(fd.ops.scatter(fd.ops.mul(x, 0.0), y, 1.0, 1))
    (got,) = fd.execute([np.ones((8, 10), np.float32), labels], backend=backend)
    want = torch.zeros(8, 10).scatter(1, torch.from_numpy(labels), 1.0).numpy()
    assert_matches(got, want, f"one-hot ({backend})")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,npdt", [(DataType.BFloat16, ml_dtypes.bfloat16), (DataType.Half, np.float16)],
                         ids=["bf16", "f16"])
def test_scatter_16_bit_values_and_i32_index(dtype, npdt, backend):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 9)).astype(npdt)
    src = rng.standard_normal((6, 4)).astype(npdt)
    index = distinct_index(rng, (6, 4), 9, 1).astype(np.int32)
    fd = scatter_fusion(2, 1, dtype=dtype, index_dtype=DataType.Int32)
    (got,) = fd.execute([x, index, src], backend=backend)
    assert got.dtype == np.dtype(npdt)
    np.testing.assert_array_equal(got.astype(np.float32), torch_scatter(x.astype(np.float32), index,
                                                                        src.astype(np.float32), 1))


def last_wins(x, index, src, dim):
    """The documented rule for colliding indices, element by element in index order along dim."""
    out = x.copy()
    for p in np.ndindex(*index.shape):
        target = list(p)
        target[dim] = index[p]
        out[tuple(target)] = src[p]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dim", [0, 1])
def test_colliding_indices_keep_the_last_along_dim(dim, backend):
    rng = np.random.default_rng(3 + dim)
    x = rng.standard_normal((6, 6)).astype(np.float32)
    index = rng.integers(0, 3, size=(6, 6))  # many collisions
    src = rng.standard_normal((6, 6)).astype(np.float32)
    fd = scatter_fusion(2, dim)
    (got,) = fd.execute([x, index, src], backend=backend)
    np.testing.assert_array_equal(got, last_wins(x, index, src, dim))


def test_producers_and_consumers_fuse_into_one_kernel_that_writes_only_the_result():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    index = distinct_index(rng, (64, 3), 256, 1)
    src = rng.standard_normal((64, 3)).astype(np.float32)
    with FusionDefinition() as fd:
        tx = fd.define_tensor(shape=[-1, -1])
        ti = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
        ts = fd.define_tensor(shape=[-1, -1])
        scattered = fd.ops.scatter(fd.ops.exp(tx), fd.ops.add(ti, 0), fd.ops.neg(ts), 1)
        fd.add_output(fd.ops.mul(scattered, 2.0))
    (got,) = fd.execute([x, index, src], backend="cpu")
    want = torch_scatter(np.exp(x), index, -src, 1) * 2
    assert_matches(got, want, "exp -> scatter -> mul")
    (kernel,) = fd.last_kernels()
    assert kernel.scheduler == "pointwise"
    assert kernel.bytes_stored == x.nbytes
    # x once, and the small index and src rows once per element that scans them.
    assert kernel.bytes_loaded <= x.nbytes + x.shape[1] * (index.nbytes + src.nbytes)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [-1, 7])
def test_out_of_range_index_is_an_index_error(bad, backend):
    x = np.zeros((3, 7), np.float32)
    index = np.array([[0], [bad], [2]])
    fd = scatter_fusion(2, 1)
    with pytest.raises(IndexError, match=rf"index {bad} is out of range") as error:
        fd.execute([x, index, np.ones((3, 1), np.float32)], backend=backend)
    assert "fuser.scatter" in str(error.value) and "extent 7" in str(error.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_beyond_src_at_run_time_is_a_clear_error(backend):
    fd = scatter_fusion(2, 1)
    inputs = [np.zeros((3, 7), np.float32), np.zeros((3, 4), np.int64), np.ones((3, 2), np.float32)]
    with pytest.raises(ValueError, match="fuser.scatter: index extent 4 exceeds src extent 2 in dim 1"):
        fd.execute(inputs, backend=backend)


def test_builder_rejects_mismatched_dtypes_with_the_shapes():
    with pytest.raises(ValueError, match="src dtype f16 differs from the input's f32"):
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1, -1])
            i = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
            s = fd.define_tensor(shape=[-1, -1], dtype=DataType.Half)
            fd.ops.scatter(x, i, s, 1)


def test_torch_compile_scatter_of_several_positions_per_row_is_fused():
    from fuser.torch_backend import make_backend

    def fn(x, index, src):
        return (torch.sigmoid(x).scatter(1, index, src * 3) + 1).sum(dim=0)

    torch._dynamo.reset()
    rng = np.random.default_rng(5)
    x = torch.randn(16, 12)
    index = torch.from_numpy(distinct_index(rng, (16, 4), 12, 1))
    src = torch.randn(16, 5)
    reports = []
    got = torch.compile(fn, backend=make_backend(reports))(x, index, src)
    torch.testing.assert_close(got, fn(x, index, src))
    (report,) = reports
    assert not report.eager_ops.get("aten.scatter.src")
    assert any("aten.scatter.src" in region.ops for region in report.fusions)
    torch._dynamo.reset()
