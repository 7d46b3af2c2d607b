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
