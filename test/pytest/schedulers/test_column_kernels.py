"""Column kernels (lowering/schedulers/rows/columns.py): row kernels whose innermost dim is kept
(a bias's gradient: the sum of [tokens, hidden] over the tokens), with threads and blocks along
the reduced dims, against the reference interpreter on the cpu backend (memcheck and racecheck
on: conftest.py), under the heuristic's schedule and under forced ones."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from fuser.lowering.schedulers.rows.schedule import RowSchedule
from lowering_checks import check, requires_cpu_backend

pytestmark = requires_cpu_backend

SUMS = (1e-4, 1e-3)
"""f32 sums of up to 8192 unit normals, in another order than the reference's: rounding of the
order of sqrt(rows) ulps of the terms."""


def _bias_and_weight_grads(dtype=DataType.Float):
    """sum(dy, 0) and sum(dy * x, 0), with dy + x kept as a full output beside them."""
    with FusionDefinition() as fd:
        dy = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        dyf, xf = fd.ops.cast(dy, DataType.Float), fd.ops.cast(x, DataType.Float)
        fd.add_output(fd.ops.sum(dyf, dims=[0]))
        fd.add_output(fd.ops.sum(fd.ops.mul(dyf, xf), dims=[0]))
        fd.add_output(fd.ops.add(dyf, xf))
    return fd


def _inputs(rows, cols, np_dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((rows, cols)).astype(np_dtype) for _ in range(2)]


@pytest.mark.parametrize("rows,cols", [(8192, 96), (1000, 77), (3, 5), (1, 34), (0, 7), (7, 0), (40, 1)])
def test_the_heuristic_schedule(rows, cols):
    fd = _bias_and_weight_grads()
    kernels = check(fd, _inputs(rows, cols), tol=SUMS)
    for k in kernels:
        if k.schedule is not None and not k.schedule.block_per_row:
            assert k.block[0] == k.schedule.columns * k.schedule.row_threads


FORCED = [RowSchedule(256, False, unroll=4, row_threads=8, row_blocks=8),
          RowSchedule(64, False, unroll=1, row_threads=2, row_blocks=3),
          RowSchedule(1024, False, unroll=8, row_threads=32, row_blocks=1),
          RowSchedule(32, False, unroll=2, row_threads=1, row_blocks=16)]


@pytest.mark.parametrize("schedule", FORCED, ids=lambda s: s.describe())
@pytest.mark.parametrize("rows,cols", [(1000, 77), (5, 33), (513, 32)])
def test_forced_schedules_give_the_reference_values(schedule, rows, cols):
    """Every split of the rows over threads and blocks, including blocks with nothing to do
    and partial tiles of rows, gives the reference's values; the workspace is left zeroed for
    the next launch (a second call with other values agrees too)."""
    fd = _bias_and_weight_grads()
    inputs = _inputs(rows, cols)
    (plan_kernel,) = [k for k in fd.kernels_for(inputs, backend="cpu") if not k.schedule.block_per_row]
    index = [k.name for k in fd.kernels_for(inputs, backend="cpu")].index(plan_kernel.name)
    forced = dataclasses.replace(schedule, block=schedule.block)
    fd.override_schedule(index, forced)
    check(fd, inputs, tol=SUMS)
    check(fd, _inputs(rows, cols, seed=1), tol=SUMS)
    assert fd.last_kernels()[index].grid[1] == schedule.row_blocks


@pytest.mark.parametrize("dtype,np_dtype", [(DataType.BFloat16, ml_dtypes.bfloat16), (DataType.Double, np.float64)])
def test_narrow_and_wide_dtypes(dtype, np_dtype):
    check(_bias_and_weight_grads(dtype), _inputs(600, 40, np_dtype))


def test_integer_and_max_reductions_split_over_blocks():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
        fd.add_output(fd.ops.sum(x, dims=[0]))
        fd.add_output(fd.ops.max(x, dims=[0]))
    x = np.random.default_rng(3).integers(-1000, 1000, (3000, 50))
    check(fd, [x])


def test_a_column_normalization_combines_within_the_block():
    """x - mean(x, 0): the mean flows back onto the rows, so blocks do not split them, but the
    block's threads along them still combine (every thread gets the mean)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        m = fd.ops.div(fd.ops.sum(x, dims=[0], keepdim=True), fd.ops.cast(fd.ops.size(x, 0), DataType.Float))
        fd.add_output(fd.ops.sub(x, m))
    (x,) = _inputs(2000, 70)[:1]
    (k,) = check(fd, [x], tol=SUMS)
    assert k.scheduler == "inner_persistent" and k.grid[1] == 1


def test_override_refuses_blocks_along_the_rows_of_a_normalization():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sub(x, fd.ops.max(x, dims=[0], keepdim=True)))
    fd.override_schedule(0, RowSchedule(256, False, unroll=4, row_threads=8, row_blocks=4))
    with pytest.raises(ValueError, match="blocks along the rows"):
        fd.execute(_inputs(100, 40)[:1], backend="cpu")


# --- several rows a thread (vec): one 16-byte access for all of them ------------------------------

def _grads_only(dtype=DataType.Float, scale: bool = False, variance: bool = False):
    """A bias's and a weight's gradient (no full output: the rows may be read as vectors);
    `scale`: dy times a per-token scale [tokens, 1] (a load broadcast along the vector);
    `variance`: a second phase reading the first's result (x - mean)^2, a normalization."""
    with FusionDefinition() as fd:
        dy = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        dyf, xf = fd.ops.cast(dy, DataType.Float), fd.ops.cast(x, DataType.Float)
        if scale:
            s = fd.define_tensor(shape=[-1, 1], dtype=DataType.Float)
            dyf = fd.ops.mul(dyf, s)
        fd.add_output(fd.ops.sum(dyf, dims=[0]))
        if variance:
            mean = fd.ops.div(fd.ops.sum(xf, dims=[0], keepdim=True), fd.ops.cast(fd.ops.size(x, 0), DataType.Float))
            centered = fd.ops.sub(xf, mean)
            fd.add_output(fd.ops.sum(fd.ops.mul(centered, centered), dims=[0]))
        else:
            fd.add_output(fd.ops.sum(fd.ops.mul(dyf, xf), dims=[0]))
    return fd


def _column_kernel(fd, inputs):
    return next(k for k in fd.kernels_for(inputs, backend="cpu") if k.schedule is not None and not k.schedule.block_per_row)


@pytest.mark.parametrize("dtype,np_dtype,vec", [(DataType.Float, np.float32, 4), (DataType.BFloat16, ml_dtypes.bfloat16, 8)])
def test_the_heuristic_reads_several_rows_a_thread_in_16_byte_accesses(dtype, np_dtype, vec):
    """GPT-2's bias gradients ([8192 tokens, 768]): 4 f32 or 8 bf16 rows a thread, one 16-byte
    load each step of each input, and the reference's values."""
    fd = _grads_only(dtype)
    inputs = _inputs(2048, 768, np_dtype)
    k = _column_kernel(fd, inputs)
    assert k.schedule.vec == vec, k.schedule.describe()
    assert f"fuser_ld_vec_if<{vec}>" in k.source
    check(fd, inputs, tol=SUMS if dtype == DataType.Float else (1e-2, 1e-2))


VEC_FORCED = [RowSchedule(1024, False, vec=4, unroll=4, row_threads=32, row_blocks=2),
              RowSchedule(256, False, vec=4, unroll=2, row_threads=8, row_blocks=8),
              RowSchedule(64, False, vec=2, unroll=1, row_threads=2, row_blocks=3),
              RowSchedule(32, False, vec=4, unroll=8, row_threads=1, row_blocks=16),
              RowSchedule(128, False, vec=4, unroll=4, row_threads=4, row_blocks=1)]


@pytest.mark.parametrize("schedule", VEC_FORCED, ids=lambda s: s.describe())
@pytest.mark.parametrize("rows,cols", [(1000, 76), (5, 36), (513, 4), (3, 1024)])
@pytest.mark.parametrize("scale", [False, True], ids=["plain", "per-token scale"])
def test_forced_vector_schedules_give_the_reference_values(schedule, rows, cols, scale):
    """Vectors of rows with threads and blocks along the reduced dims (the partials a slot a
    lane), a partial last tile of row groups, steps past the rows' end, a load broadcast along
    the vector; twice (the workspace is left zeroed)."""
    fd = _grads_only(scale=scale)
    rng = np.random.default_rng(4)
    inputs = _inputs(rows, cols) + ([rng.standard_normal((rows, 1)).astype(np.float32)] if scale else [])
    fd.override_schedule(0, schedule)
    check(fd, inputs, tol=SUMS)
    inputs2 = _inputs(rows, cols, seed=1) + inputs[2:]
    check(fd, inputs2, tol=SUMS)
    assert fd.last_kernels()[0].schedule.vec == schedule.vec


def test_a_vector_column_normalization():
    """A second phase reading the first's per-row result, a register a lane: the variance
    about the mean of each of a thread's 4 rows."""
    fd = _grads_only(variance=True)
    inputs = _inputs(3000, 96)
    k = _column_kernel(fd, inputs)
    assert k.schedule.vec == 4 and k.schedule.row_blocks == 1, k.schedule.describe()
    check(fd, inputs, tol=SUMS)


@pytest.mark.parametrize("cols,view,widest", [(770, False, 2), (77, False, 1), (768, True, 1)])
def test_rows_a_thread_follow_what_the_arrays_allow(cols, view, widest):
    """770 columns: at most 2 rows a thread (4 does not divide them); 77: one; a view starting
    one element into its buffer (not 16-byte aligned): one. The widest they allow runs forced
    and gives the reference's values; twice that is refused."""
    fd = _grads_only()
    dy, x = _inputs(300, cols + (1 if view else 0))
    inputs = [dy[:, 1:], x[:, 1:]] if view else [dy, x]
    assert _column_kernel(fd, inputs).schedule.vec <= widest
    check(fd, inputs, tol=SUMS)
    fd.override_schedule(0, RowSchedule(256, False, vec=widest, unroll=2, row_threads=8, row_blocks=2))
    check(fd, inputs, tol=SUMS)
    fd.override_schedule(0, RowSchedule(256, False, vec=2 * widest, unroll=2, row_threads=8, row_blocks=2))
    with pytest.raises(ValueError, match=f"vectors of {widest} elements"):
        fd.execute(inputs, backend="cpu")


def test_override_refuses_rows_a_thread_the_arrays_do_not_allow():
    fd = _grads_only()
    fd.override_schedule(0, RowSchedule(256, False, vec=4, unroll=2, row_threads=8, row_blocks=2))
    with pytest.raises(ValueError, match="vectors of 2 elements"):
        fd.execute(_inputs(100, 38), backend="cpu")
    fd.override_schedule(0, RowSchedule(32, False, vec=4, unroll=2, row_threads=1, row_blocks=1))
    with pytest.raises(ValueError, match="walking its row alone"):
        fd.execute(_inputs(100, 40), backend="cpu")
