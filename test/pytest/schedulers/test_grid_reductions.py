"""Grid reductions (lowering/schedulers/grid.py): a reduction over every row of a per-row value
(cross-entropy's mean), or over a whole tensor, runs in the kernel that computes its input —
one launch, no float atomics, the same bits on every run — and matches the reference."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.cases import build_ce_fwd_aot
from fuser import DataType, FusionDefinition
from lowering_checks import check, requires_cpu_backend

pytestmark = requires_cpu_backend


def _ce_inputs(n: int, v: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, v), dtype=np.float32)
    y = rng.integers(0, v, n).astype(np.int64)
    if n > 3:
        y[3] = -100  # ignored row: neither in the sum nor in the count
    return x, y


@pytest.mark.parametrize("n, v", [(37, 1000), (300, 64), (5, 40000)])
def test_cross_entropy_mean_is_one_kernel(n, v):
    fd = build_ce_fwd_aot("f32", (n, v))
    x, y = _ce_inputs(n, v)
    (kernel,) = check(fd, [x, y])
    assert "gacc0" in kernel.source and "atomicAdd" in kernel.source
    # Logits read once (plus the picked logit of each row, re-read by the gather), labels once,
    # one f32 written; the workspace: the counter bumped and reset, and per block a partial sum
    # (f32) and a partial count (i64), each written once and read once by the last block.
    floor = x.nbytes + y.nbytes + 4 + n * 4
    workspace = 2 * 8 + 2 * kernel.grid[0] * (4 + 8)
    assert kernel.bytes_loaded + kernel.bytes_stored <= floor + workspace


def test_grid_reduction_is_deterministic():
    fd = build_ce_fwd_aot("f32", (513, 300))
    x, y = _ce_inputs(513, 300, seed=1)
    first = fd.execute([x, y], backend="cpu")[0]
    for _ in range(3):
        again = fd.execute([x, y], backend="cpu")[0]
        assert np.asarray(again).tobytes() == np.asarray(first).tobytes()


def test_cross_entropy_mean_of_no_rows_is_nan_like_torch():
    fd = build_ce_fwd_aot("f32", (0, 10))
    x, y = np.zeros((0, 10), np.float32), np.zeros((0,), np.int64)
    (got,) = fd.execute([x, y], backend="cpu")
    assert np.isnan(got)
    assert fd.last_kernels()[0].grid == (1, 1, 1)  # one block writes the totals of no rows


@pytest.mark.parametrize("shape", [(1000, 333), (7,), (3, 4, 5000), (0, 5)])
def test_sum_of_everything_is_split_over_the_grid(shape):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * len(shape), dtype=DataType.Float)
        dims = list(range(len(shape)))
        fd.add_output(fd.ops.sum(x, dims))
        fd.add_output(fd.ops.max(x, dims, keepdim=True))
        fd.add_output(fd.ops.mul(x, 2.0))
    data = np.random.default_rng(2).standard_normal(shape, dtype=np.float32)
    kernels = check(fd, [data], tol=(1e-4, 1e-3))
    (kernel,) = kernels
    assert kernel.scheduler == "reduction" and "one row split over the grid" in kernel.source
    if data.size >= 512 * 8 * 2:
        assert kernel.grid[0] > 1


def test_grid_reduction_with_a_thread_per_row():
    """Rows reduced along a non-innermost dim (a thread per row), then all rows summed."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        col = fd.ops.sum(x, [0])                       # per column: a thread per row of x^T
        fd.add_output(fd.ops.sum(fd.ops.mul(col, col), [0]))
    data = np.random.default_rng(3).standard_normal((50, 700), dtype=np.float32)
    (kernel,) = check(fd, [data], tol=(1e-4, 1e-2))
    assert "gacc0" in kernel.source


def test_integer_and_bool_grid_totals():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
        row_max = fd.ops.max(x, [1])
        fd.add_output(fd.ops.sum(row_max, [0]))
        fd.add_output(fd.ops.min(fd.ops.sum(x, [1]), [0]))
    data = np.random.default_rng(4).integers(-1000, 1000, (333, 77)).astype(np.int64)
    (kernel,) = check(fd, [data])
    assert "gacc1" in kernel.source


def test_a_grid_total_cannot_flow_back_onto_rows():
    """x / sum(all of row sums): the rows would need the total before it exists: 2 kernels."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        total = fd.ops.sum(fd.ops.sum(x, [1]), [0])
        fd.add_output(fd.ops.div(x, fd.ops.broadcast(total, [True, True])))
    data = np.random.default_rng(5).random((20, 30), dtype=np.float32) + 0.5
    kernels = check(fd, [data])
    assert len(kernels) == 2


def _sum_max_min(dtype) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        xf = fd.ops.cast(x, DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.mul(xf, xf), dims=[0, 1]))
        fd.add_output(fd.ops.max(xf, dims=[0, 1]))
        fd.add_output(fd.ops.min(xf, dims=[0, 1]))
    return fd


def _views(shape, np_dtype):
    """A dense array, a transposed one (innermost stride not 1: scalar loads) and one at an
    element's offset (16-byte vectors misaligned: narrower ones)."""
    rng = np.random.default_rng(sum(shape))
    base = rng.standard_normal((shape[0], shape[1] + 1)).astype(np_dtype)
    return {"dense": np.ascontiguousarray(base[:, :shape[1]]), "transposed": base[:, :shape[1]].T.copy().T,
            "offset": base.reshape(-1)[1:1 + shape[0] * shape[1]].reshape(shape)}


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (7, 64), (33, 1000), (2, 8), (1000, 1003), (65, 4096)])
def test_a_whole_tensor_reduction_reads_vectors_a_step(dtype, shape):
    """One row split over the grid, `unroll` vectors a thread a step, every element once: sums,
    maxima and minima of every length around the vector and the step, of dense, transposed and
    misaligned inputs (the last two narrow the vector), match the reference."""
    import ml_dtypes

    fuser_dtype, np_dtype = {"f32": (DataType.Float, np.float32), "bf16": (DataType.BFloat16, ml_dtypes.bfloat16)}[dtype]
    for name, x in _views(shape, np_dtype).items():
        fd = _sum_max_min(fuser_dtype)
        (kernel,) = check(fd, [x])
        assert kernel.schedule.split, (name, kernel.schedule.describe())
        # Each of the three reductions reads every element once (and the last block the partials).
        assert 3 * x.nbytes <= kernel.bytes_loaded <= 3 * x.nbytes + 65536, (name, kernel.bytes_loaded, x.nbytes)
    assert kernel.schedule.unroll > 1
