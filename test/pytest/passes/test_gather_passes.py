"""The gather rewrites preserve results: the reference interpreter before and after each
pass, on random inputs (indices in range, several shapes), plus the shapes they act on."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context

from fuser import DataType, FusionDefinition
from fuser_dialect.interpreter import interpret
from fuser.passes.gather_sum_to_one_hot import GatherSumToOneHotPass
from fuser.passes.gather_to_take_along_axis import GatherToTakeAlongAxisPass
from fuser.passes.move_gather import MoveGatherPass


def _ops(module) -> list[str]:
    return [op.name for op in module.walk()]


def _rewritten(fd: FusionDefinition, pass_):
    module = fd.module.clone()
    pass_.apply(Context(), module)
    module.verify()
    return module


def _same(fd, module, inputs):
    before = interpret(fd.fusion, inputs)
    after = interpret(module.ops.first, inputs)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _gather_fusion(rows: int, cols: int, take: bool, keep_sum: bool | None):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[rows, cols], dtype=DataType.Float)
        i = fd.define_tensor(shape=[rows, 1], dtype=DataType.Int)
        g = fd.ops.take_along_axis(x, i, 1) if take else fd.ops.gather(x, i, 1)
        fd.add_output(g if keep_sum is None else fd.ops.sum(g, [1], keepdim=keep_sum))
    return fd


@pytest.mark.parametrize("rows,cols", [(1, 2), (3, 5), (16, 33)])
@pytest.mark.parametrize("seed", range(3))
def test_gather_to_take_along_axis_preserves_results(rows, cols, seed):
    rng = np.random.default_rng(seed)
    fd = _gather_fusion(rows, cols, take=False, keep_sum=None)
    module = _rewritten(fd, GatherToTakeAlongAxisPass())
    assert "fuser.take_along_axis" in _ops(module) and "fuser.gather" not in _ops(module)
    inputs = [rng.standard_normal((rows, cols)).astype(np.float32), rng.integers(0, cols, (rows, 1))]
    _same(fd, module, inputs)


def test_gather_with_a_smaller_index_is_left_alone_and_still_right():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[8, 16], dtype=DataType.Float)
        i = fd.define_tensor(shape=[4, 2], dtype=DataType.Int)
        fd.add_output(fd.ops.gather(x, i, 1))
    module = _rewritten(fd, GatherToTakeAlongAxisPass(exact=(0,)))
    assert "fuser.gather" in _ops(module)
    rng = np.random.default_rng(0)
    _same(fd, module, [rng.standard_normal((8, 16)).astype(np.float32), rng.integers(0, 16, (4, 2))])


@pytest.mark.parametrize("take", [True, False])
@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_gather_sum_to_one_hot_preserves_results(take, keep, seed):
    rng = np.random.default_rng(seed)
    rows, cols = 7, 13
    fd = _gather_fusion(rows, cols, take=take, keep_sum=keep)
    module = _rewritten(fd, GatherSumToOneHotPass())
    names = _ops(module)
    assert "fuser.iota" in names and "fuser.where" in names
    assert "fuser.gather" not in names and "fuser.take_along_axis" not in names
    inputs = [rng.standard_normal((rows, cols)).astype(np.float32), rng.integers(0, cols, (rows, 1))]
    # A masked sum adds exact zeros: the result is bit-identical.
    _same(fd, module, inputs)


@pytest.mark.parametrize("dtype", [DataType.BFloat16, DataType.Half, DataType.Double])
def test_move_gather_reads_the_unconverted_tensor_with_equal_results(dtype):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        i = fd.define_tensor(shape=[-1, 1], dtype=DataType.Int)
        fd.add_output(fd.ops.neg(fd.ops.take_along_axis(fd.ops.exp(fd.ops.cast(x, DataType.Float)), i, 1)))
    module = _rewritten(fd, MoveGatherPass())
    take = next(op for op in module.walk() if op.name == "fuser.take_along_axis")
    assert take.input.type.dtype == DataType(dtype).value  # picks from the original tensor
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 9)).astype(DataType(dtype).numpy)
    _same(fd, module, [x, rng.integers(0, 9, (6, 1))])
