"""Scheduler kinds on the cpu backend: kernel counts, scheduler names, launch shapes, global
bytes moved (the CPU runtime counts every fuser_ld / fuser_st) and results vs the reference.

The must-show criteria: softmax and layer-norm forward over [rows, 4096..32768] run as exactly
one kernel whose DRAM traffic is at most 1.02 x the input bytes and whose stores are at most
1.02 x the output bytes.

Byte arithmetic of a row kernel (lowering/schedulers/rows/): a persistent schedule keeps each
thread's share of the row on chip across the max/sum (mean/variance) phases, so x is loaded
exactly once; a streaming one (rows beyond what a block holds) loads it once per pass, the
later passes finding it in L2. A load that is the same for every row (layer-norm's weight and
bias, indexed by the reduced dim only) is loaded with every row: other rows' loads of it are L2
hits. So the global loads the emulation counts are

    loaded = passes * rows*C*sizeof(x) + rows * C * (sizeof(w) + sizeof(b))

and the DRAM traffic (the performance model's, lowering/schedulers/rows/problem.py) is each input
once, plus the re-read rows L2 no longer holds.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from fuser.lowering.device import H100
from fuser.lowering.schedulers.performance import ctas_per_sm
from lowering_checks import BF16, check, compile_for_sm90, dram_bytes, generated_not_compiled, requires_cpu_backend

pytestmark = requires_cpu_backend

LIMIT = 1.02


def _nbytes(arrays) -> int:
    return sum(np.asarray(a).nbytes for a in arrays if isinstance(a, np.ndarray))


def body(source: str) -> str:
    """The kernel itself: the source after the prelude and the support functions."""
    return source[source.index("// scheduler:"):]


def run_checked(fd, inputs, tol=None):
    """Runs on both backends, compares; returns (kernels, cpu outputs)."""
    kernels = check(fd, inputs, tol=tol)
    outputs = fd.execute(inputs, backend="cpu")  # cached: no recompilation
    return kernels, outputs


def passes(k) -> int:
    """How many times the kernel's schedule loads each element of the row: once when persistent,
    once per pass that reads it when streamed."""
    from fuser.lowering.schedulers.rows.problem import row_problem

    if k.schedule.persistent:
        return 1
    plan = k.model.plan
    problem = row_problem(plan, k.model.extents.shape(plan.domain), k.schedule.vec)
    return 1 + sum(1 for b in problem.reread_bytes[1:] if b)


def assert_one_persistent_kernel(kernels, inputs, outputs, rows: int):
    assert len(kernels) == 1, [k.name for k in kernels]
    (k,) = kernels
    assert k.scheduler == "inner_persistent"
    # A grid of row groups (lowering/schedulers/rows/__init__.py): every row has a block's lanes.
    assert k.grid[0] == min(math.ceil(rows / k.schedule.rows_per_block), 65535), (k.grid, k.schedule.describe())
    assert dram_bytes(k) <= LIMIT * _nbytes(inputs + outputs), k.schedule.describe()
    assert k.bytes_stored <= LIMIT * _nbytes(outputs), f"stored {k.bytes_stored} B for {_nbytes(outputs)} B of outputs"
    return k


# ------------------------------------------------------------------------------------------------
# softmax / log-softmax
# ------------------------------------------------------------------------------------------------


def softmax_fusion(dt: DataType = DataType.Float, log: bool = False, dim: int = 1):
    with FusionDefinition() as fd:
        x0 = fd.define_tensor(shape=[-1, -1], dtype=dt)
        x = fd.ops.cast(x0, DataType.Float)
        m = fd.ops.max(x, dims=[dim], keepdim=True)
        d = fd.ops.sub(x, m)
        e = fd.ops.exp(d)
        s = fd.ops.sum(e, dims=[dim], keepdim=True)
        out = fd.ops.sub(d, fd.ops.log(s)) if log else fd.ops.div(e, s)
        fd.add_output(fd.ops.cast(out, dt))
    return fd


# rows > 132 make every block loop over rows; 10000 is no multiple of the block.
@pytest.mark.parametrize("rows,cols", [(300, 4096), (140, 10000), (140, 32768)], ids=lambda v: str(v))
def test_softmax_f32(rows, cols):
    x = np.random.default_rng(cols).standard_normal((rows, cols)).astype(np.float32)
    fd = softmax_fusion()
    kernels, outputs = run_checked(fd, [x])
    k = assert_one_persistent_kernel(kernels, [x], outputs, rows)
    assert k.bytes_loaded == passes(k) * x.nbytes and k.bytes_stored == x.nbytes
    # Kept on chip, the row is loaded once into a register array (buf0[k * 4 + j]) or a
    # shared-memory slot (buf0[(k * 4 + j) * block + threadIdx.x]), 16 bytes an access, by the
    # phase loop's load stage (pl<n>[k]: every load of the step issued before any is used).
    if k.schedule.persistent:
        assert re.search(r"buf0\[\(?k \* 4 \+ 0\)?( \* \d+ \+ threadIdx\.x)?\] = pl\d+\[kj?\]\[0\]", k.source)
    assert "fuser_ld_vec_if<4>(fuser_in" in k.source and "fuser_st_vec<4>" in k.source


@pytest.mark.parametrize("dt,npdt,log,cols", [
    (DataType.Float, np.float32, True, 4096),
    (DataType.BFloat16, BF16, False, 16384),
    (DataType.BFloat16, BF16, True, 8192),
], ids=["log_softmax-f32-4096", "softmax-bf16-16384", "log_softmax-bf16-8192"])
def test_softmax_variants(dt, npdt, log, cols):
    rows = 150
    x = (np.random.default_rng(1).standard_normal((rows, cols)) * 4).astype(npdt)
    fd = softmax_fusion(dt, log)
    kernels, outputs = run_checked(fd, [x])
    k = assert_one_persistent_kernel(kernels, [x], outputs, rows)
    assert k.bytes_loaded == passes(k) * x.nbytes and k.bytes_stored == outputs[0].nbytes


def test_softmax_edge_extents():
    """Rows of 1 element, one row, a row length that does not fill a warp, empty tensors."""
    fd = softmax_fusion()
    rng = np.random.default_rng(2)
    for shape in [(200, 1), (1, 5000), (7, 33), (3, 0), (0, 10)]:
        x = rng.standard_normal(shape).astype(np.float32)
        kernels, _ = run_checked(fd, [x])
        assert [k.scheduler for k in kernels] == ["inner_persistent"]


@pytest.mark.parametrize("cols", [300, 70000], ids=["registers", "online"])
def test_softmax_special_values(cols):
    """Rows of all -inf, with +inf, with NaN, constant rows: NaN where the reference has NaN.
    70000 floats a row exceed what a block holds on chip: max and sum of exp in one online pass."""
    x = np.random.default_rng(10).standard_normal((6, cols)).astype(np.float32)
    x[0, :] = -np.inf
    x[1, 5] = np.inf
    x[2, 7] = np.nan
    x[3, 0] = -np.inf
    x[4, :] = 3.0
    x[5, ::2] = -np.inf
    for log in (False, True):
        kernels, _ = run_checked(softmax_fusion(log=log), [x])
        assert [k.scheduler for k in kernels] == ["inner_persistent"]
    # Rows kept on chip take max and sum of exp in two phases; streamed ones in one online pass.
    assert ("fuser_online_update" in body(kernels[0].source)) == kernels[0].schedule.merged
    assert kernels[0].schedule.merged == (cols * 4 > H100.shared_per_block_optin)


def test_softmax_over_outer_dim():
    """A normalization over dim 0 (the innermost dim is kept): one kernel, a thread per column.
    (Its phases re-read x: 2x the input bytes; only inner normalizations keep rows in registers.)"""
    x = np.random.default_rng(3).standard_normal((1000, 37)).astype(np.float32)
    kernels, _ = run_checked(softmax_fusion(dim=0), [x])
    assert [k.scheduler for k in kernels] == ["inner_persistent"]
    assert "fuser_block_reduce" not in body(kernels[0].source)


# ------------------------------------------------------------------------------------------------
# layer-norm
# ------------------------------------------------------------------------------------------------


def layer_norm_fusion(dt: DataType = DataType.Float, affine: bool = True, stats: bool = False, eps=1e-5):
    """Layer-norm forward over the last dim, computed in f32; `stats` also returns mean and
    1/std per row (what nvFuser's layer_norm forward saves for the backward)."""
    with FusionDefinition() as fd:
        x0 = fd.define_tensor(shape=[-1, -1], dtype=dt)
        if affine:
            w0 = fd.define_tensor(shape=[-1], dtype=dt)
            b0 = fd.define_tensor(shape=[-1], dtype=dt)
        x = fd.ops.cast(x0, DataType.Float)
        n = x0.size(1)
        mean = fd.ops.div(fd.ops.sum(x, dims=[1], keepdim=True), n)
        d = fd.ops.sub(x, mean)
        var = fd.ops.div(fd.ops.sum(fd.ops.mul(d, d), dims=[1], keepdim=True), n)
        inv = fd.ops.rsqrt(fd.ops.add(var, eps))
        y = fd.ops.mul(d, inv)
        if affine:
            w = fd.ops.broadcast(fd.ops.cast(w0, DataType.Float), [True, False])
            b = fd.ops.broadcast(fd.ops.cast(b0, DataType.Float), [True, False])
            y = fd.ops.add(fd.ops.mul(y, w), b)
        fd.add_output(fd.ops.cast(y, dt))
        if stats:
            fd.add_output(fd.ops.squeeze(mean, [1]))
            fd.add_output(fd.ops.squeeze(inv, [1]))
    return fd


def _ln_inputs(rows, cols, npdt, affine=True, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * 2 + 0.5).astype(npdt)
    if not affine:
        return [x]
    return [x, rng.standard_normal(cols).astype(npdt), rng.standard_normal(cols).astype(npdt)]


@pytest.mark.parametrize("rows,cols", [(140, 4096), (133, 12000), (140, 32768)], ids=lambda v: str(v))
def test_layer_norm_without_affine(rows, cols):
    inputs = _ln_inputs(rows, cols, np.float32, affine=False)
    fd = layer_norm_fusion(affine=False)
    kernels, outputs = run_checked(fd, inputs, tol=(1e-4, 1e-4))
    k = assert_one_persistent_kernel(kernels, inputs, outputs, rows)
    assert k.bytes_loaded == passes(k) * inputs[0].nbytes and k.bytes_stored == outputs[0].nbytes


def test_layer_norm_affine_f32_16384_rows():
    """The must-show case with weight and bias: [16384, 4096] f32. Weight and bias are loaded
    with every row (L2 hits after the first): DRAM traffic = x once + w, b once + y once."""
    rows, cols = 16384, 4096
    inputs = _ln_inputs(rows, cols, np.float32)
    fd = layer_norm_fusion()
    kernels, outputs = run_checked(fd, inputs, tol=(1e-4, 1e-4))
    k = assert_one_persistent_kernel(kernels, inputs, outputs, rows)
    x, w, b = inputs
    assert k.schedule.persistent and k.schedule.vec == 4, k.schedule.describe()
    assert k.bytes_loaded == x.nbytes + rows * (w.nbytes + b.nbytes)
    assert k.bytes_stored == outputs[0].nbytes
    assert dram_bytes(k) == _nbytes(inputs + outputs)


@pytest.mark.parametrize("rows,cols", [(1000, 4096), (100, 8192)], ids=lambda v: str(v))
def test_layer_norm_bf16_with_stats(rows, cols):
    """bf16 in and out, f32 compute; also returns mean and 1/std (row outputs, stored by one
    thread per row). Exact bytes: x once per pass, weight and bias once per row, every output once."""
    inputs = _ln_inputs(rows, cols, BF16)
    fd = layer_norm_fusion(DataType.BFloat16, stats=True)
    kernels, outputs = run_checked(fd, inputs, tol=(1.6e-2, 2e-2))
    assert len(kernels) == 1 and kernels[0].scheduler == "inner_persistent"
    (k,) = kernels
    x, w, b = inputs
    assert k.bytes_loaded == passes(k) * x.nbytes + rows * (w.nbytes + b.nbytes)
    assert k.bytes_stored == _nbytes(outputs) == x.nbytes + 2 * rows * 4
    assert dram_bytes(k) <= LIMIT * _nbytes(inputs + outputs)


# ------------------------------------------------------------------------------------------------
# Plain reductions
# ------------------------------------------------------------------------------------------------


def _sum_fusion(dims, keepdim=False):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.sum(x, dims=dims, keepdim=keepdim))
    return fd


# 40000 > 32 x 1024: the row is not held in registers (a dynamic loop), still read once.
@pytest.mark.parametrize("rows,cols", [(1000, 300), (5, 40000), (300, 1)], ids=lambda v: str(v))
def test_row_sums(rows, cols):
    x = np.random.default_rng(4).standard_normal((rows, cols)).astype(np.float32)
    kernels, outputs = run_checked(_sum_fusion([1]), [x], tol=(1e-4, 1e-4))
    assert len(kernels) == 1
    (k,) = kernels
    assert k.scheduler == "reduction"
    combine = "fuser_group_reduce<" if k.schedule.rows_per_block > 1 else "= fuser_block_reduce(acc0"
    assert combine in body(k.source), k.schedule.describe()
    assert k.bytes_loaded == x.nbytes and k.bytes_stored == rows * 4


@pytest.mark.parametrize("rows,cols", [(1000, 300), (3, 7)], ids=lambda v: str(v))
def test_outer_dim_sum(rows, cols):
    """sum over dim 0 (a column kernel, rows/columns.py): adjacent threads read adjacent columns
    (`vec` columns a thread, `columns` threads a block), the block's other threads and more
    blocks share each column's rows, their partials combined through shared memory and then by
    the column's last block; each element is read once, each sum written once."""
    x = np.random.default_rng(5).standard_normal((rows, cols)).astype(np.float32)
    kernels, outputs = run_checked(_sum_fusion([0], keepdim=True), [x], tol=(1e-4, 1e-4))
    assert len(kernels) == 1
    (k,) = kernels
    assert k.scheduler == "reduction"
    s = k.schedule
    assert "fuser_block_reduce(" not in body(k.source) and f"fuser_column_reduce<{s.columns}, " in body(k.source)
    assert k.grid[0] == -(-cols // (s.columns * s.vec)) and k.block[0] == s.columns * s.row_threads
    assert k.grid[1] == s.row_blocks
    # Besides x and the sums: each block's partials (f32, one a column) out and back in once,
    # and each column of blocks' counter reset (8 bytes) by its last block.
    split = k.grid[1] > 1
    partials = k.grid[0] * k.grid[1] * s.columns * s.vec * 4 if split else 0
    assert k.bytes_loaded == x.nbytes + partials
    assert k.bytes_stored == cols * 4 + partials + (8 * k.grid[0] if split else 0)


def test_reductions_over_different_dims_split():
    """Two reductions of one tensor over different dims cannot share a kernel: two reduction
    kernels, the second with the reason (also checked with FileCheck in test/lowering)."""
    from fuser.lowering.segmentation.segment import plan_kernels

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.sum(x, dims=[0]))
        fd.add_output(fd.ops.max(fd.ops.exp(x), dims=[1]))
    x = np.random.default_rng(6).standard_normal((70, 300)).astype(np.float32)
    kernels, _ = run_checked(fd, [x], tol=(1e-4, 1e-4))
    assert [k.scheduler for k in kernels] == ["reduction", "reduction"]
    plans = plan_kernels(fd.fusion)
    assert plans[1].split_reason == "split before fuser.reduction: reductions over different dims [0] and [1]"
    # x once per kernel (and the column kernel's partials: 32 f32 a block, read back once)
    partials = sum(k.grid[0] * k.grid[1] * 32 * 4 for k in kernels if not k.schedule.block_per_row and k.grid[1] > 1)
    assert sum(k.bytes_loaded for k in kernels) == 2 * x.nbytes + partials


def test_per_row_values_after_a_whole_tensor_reduction_join_the_row_kernel():
    """GPT-2's layer norm and loss: a row kernel (the statistic), a whole-tensor sum, then a
    per-row value of the statistic and one of an input. Both per-row values are written by the
    row kernel, once a row (in the whole-tensor reduction's loop every lane along the row stored
    them again: 768 stores of each element at GPT-2's width), and the values are the reference's."""
    rows, cols = 64, 768
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[rows, cols])
        y = fd.define_tensor(shape=[rows, 1])
        s = fd.ops.sum(x, dims=[1], keepdim=True)
        fd.add_output(s)
        fd.add_output(fd.ops.sum(fd.ops.mul(x, x), dims=[0, 1]))
        fd.add_output(fd.ops.div(s, float(cols)))
        fd.add_output(fd.ops.div(y, float(cols)))
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((rows, cols)).astype(np.float32), rng.standard_normal((rows, 1)).astype(np.float32)
    kernels, outputs = run_checked(fd, [x, y], tol=(1e-4, 1e-4))
    assert [k.scheduler for k in kernels] == ["reduction", "reduction"]
    row_kernel, total = kernels
    # the row kernel stores the row sums and both per-row values once a row
    assert row_kernel.bytes_stored == 3 * rows * 4
    assert total.schedule.split and total.schedule.vec == 4
    np.testing.assert_allclose(outputs[2], x.sum(1, keepdims=True) / cols, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outputs[3], y / cols, rtol=1e-6)


def test_normalization_then_pointwise_tail_is_one_kernel():
    """Everything after the reductions that stays row-consistent joins the kernel: softmax, a
    keepdim=False statistic broadcast back, and a pointwise epilogue with a broadcast operand."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        bias = fd.define_tensor(shape=[1, -1])
        mean = fd.ops.div(fd.ops.sum(x, dims=[1]), x.size(1))  # [rows]: "drop" form
        centered = fd.ops.sub(x, fd.ops.broadcast(mean, [False, True]))
        fd.add_output(fd.ops.relu(fd.ops.add(centered, bias)))
        fd.add_output(mean)
    rng = np.random.default_rng(7)
    x, bias = rng.standard_normal((200, 777)).astype(np.float32), rng.standard_normal((1, 777)).astype(np.float32)
    kernels, outputs = run_checked(fd, [x, bias], tol=(1e-4, 1e-4))
    assert [k.scheduler for k in kernels] == ["inner_persistent"]
    (k,) = kernels
    # x once per pass; the row-invariant bias with every row (L2 hits after the first).
    assert k.bytes_loaded == passes(k) * x.nbytes + 200 * bias.nbytes
    assert k.bytes_stored == _nbytes(outputs)


def test_every_generated_kernel_compiles_with_nvrtc(tmp_path, monkeypatch):
    """Every kernel the tests above ran (in this process), compiled for sm_90 with NVRTC."""
    sources = generated_not_compiled("nvrtc")
    if not sources:
        pytest.skip("no kernels were generated in this process (run the whole file)")
    compile_for_sm90(sources, "nvrtc", tmp_path, monkeypatch)


# ------------------------------------------------------------------------------------------------
# Segmentation bugs found while writing these tests (lowering/segmentation/segment.py). These fail until
# segment.py is fixed; they are last so that `pytest -x` runs everything else first.
# ------------------------------------------------------------------------------------------------


def test_expand_of_reduction_result_to_another_extent():
    """sum(x, keepdim) expanded to an extent other than x's reduced extent is classified "full"
    (row-consistent) without comparing extents, so the kernel stores it over x's row length:
    with x [4, 3] expanded to [4, 5] two columns are never written; with x [4, 9] it writes 9
    elements into rows of 5 (out of bounds on the last row)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        s = fd.ops.sum(x, dims=[1], keepdim=True)
        fd.add_output(fd.ops.expand(s, [-1, 5]))
    check(fd, [np.random.default_rng(8).standard_normal((4, 3)).astype(np.float32)])


@pytest.mark.parametrize("x_shape,y_shape", [((4, 9), (4, 1)), ((4, 3, 5), (4, 1, 5))], ids=["keep", "partial"])
def test_reduction_of_input_broadcast_in_the_reduced_dim(x_shape, y_shape):
    """y, broadcast in (some of) the reduced dims, reduced in the same kernel as x: the
    reduction loop runs over x's reduced extent and combines y's single element that many
    times (sum = 9*y, prod = y**9 for "keep"; sum = 3*sum for "partial")."""
    dims = list(range(1, len(x_shape)))
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=list(x_shape))
        y = fd.define_tensor(shape=list(y_shape))
        fd.add_output(fd.ops.sum(x, dims=dims))
        fd.add_output(fd.ops.sum(y, dims=dims))
        fd.add_output(fd.ops.prod(y, dims=dims))
    rng = np.random.default_rng(9)
    check(fd, [rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(y_shape).astype(np.float32)])


@pytest.mark.parametrize("cols, weights", [(1024, False), (4096, False), (1024, True), (32768, False)], ids=str)
def test_row_grid_covers_every_row_group_with_loads_in_flight(cols, weights):
    """A block per row group (the rows of one block), over as many waves as it takes: weights do
    not change the grid (they are re-read from L2, not kept per block), and the blocks an SM
    holds keep at least 32 KiB of loads in flight (the model, with the scheduler's estimate of
    registers: 16 B a thread at 2048 threads, the bandwidth limit of an H100)."""
    from fuser.lowering.schedulers.performance import predict

    rows = 2048
    inputs = _ln_inputs(rows, cols, np.float32, affine=weights)
    fd = layer_norm_fusion(affine=weights)
    (k,) = check(fd, inputs, tol=(1e-4, 1e-4))
    assert k.grid[0] == math.ceil(rows / k.schedule.rows_per_block), (k.grid, k.schedule.describe())
    plan, schedule, extents = k.model.plan, k.model.schedule, k.model.extents
    resources = plan.unit.estimated_resources(plan, schedule, extents)
    ctas = ctas_per_sm(H100, k.block[0], resources.registers, resources.shared_bytes)
    traffic = plan.unit.traffic(plan, schedule, extents, H100, ctas)
    prediction = predict(H100, math.prod(k.grid), k.block[0], resources, traffic)
    assert prediction.in_flight_per_sm >= 32 * 1024, prediction.describe()
