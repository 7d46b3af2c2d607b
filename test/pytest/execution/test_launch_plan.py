"""Launch plans (lowering/execution/launch_plan.py): a cached execute replays a per-signature plan; any
change of signature takes the full path; index values are checked on every call."""

from __future__ import annotations

import os
import statistics
import threading
import time

import numpy as np
import pytest
from fuser.benchmarks import cases
from fuser.lowering.execution.gather_checks import IndexChecks, RangeSource

from fuser import DataType, FusionDefinition

try:
    import torch
except ImportError:  # the torch tests skip
    torch = None


TIMING_BATCHES = 5
"""Timing tests take the best of several batch medians: a shared machine's speed changes by up to
2x from second to second (neighbours, frequency), which only ever adds time (as timeit's min)."""


def _add() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.add(x, y))
    return fd


def _scaled() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        s = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(fd.ops.mul(x, s))
    return fd


def _used_plan(fd) -> bool:
    return fd._get_executor().last_call_used_plan()


def test_same_signature_hits_and_changed_signature_misses():
    fd = _add()
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    fd.execute([x, x], backend="cpu")
    assert not _used_plan(fd)
    (out,) = fd.execute([x + 1, x], backend="cpu")  # new arrays, same signature
    assert _used_plan(fd)
    np.testing.assert_array_equal(out, 2 * x + 1)
    for other in (np.ones((4, 9), np.float32),                     # shape
                  np.asfortranarray(x),                            # strides
                  np.ones((8, 16), np.float32)[::2, ::2]):         # a strided view (copied per call)
        (out,) = fd.execute([other, other], backend="cpu")
        assert not _used_plan(fd)
        np.testing.assert_array_equal(out, 2 * other)
        (out,) = fd.execute([other, other], backend="cpu")
        assert _used_plan(fd)
        np.testing.assert_array_equal(out, 2 * other)
    with pytest.raises(TypeError, match="expected dtype float32"):  # dtype: full path, same error
        fd.execute([x.astype(np.float64), x], backend="cpu")
    info = fd.cache_info()
    assert info.hits + info.misses == 8


def test_alignment_class_is_part_of_the_signature():
    fd = _add()
    buf = np.zeros(4 * 64 + 1, np.float32)
    aligned = np.ones((4, 64), np.float32)
    shifted = buf[1:].reshape(4, 64)  # 4 bytes off a 16-byte boundary: no vector accesses
    shifted[:] = 1
    for a in (aligned, shifted, aligned, shifted):
        (out,) = fd.execute([a, a], backend="cpu")
        np.testing.assert_array_equal(out, 2)
    executor = fd._get_executor()
    assert executor.plan_count() == 2


def test_scalar_values_are_baked_into_the_signature():
    fd = _scaled()
    x = np.arange(8, dtype=np.float32)
    for s in (2.0, 2.0, 3.0, 3.0, 2.0):
        (out,) = fd.execute([x, s], backend="cpu")
        np.testing.assert_allclose(out, x * s)
    (out,) = fd.execute([x, float("nan")], backend="cpu")  # a NaN never equals itself: no plan, still right
    assert not _used_plan(fd) and np.isnan(out).all()


def test_out_of_range_label_on_a_cached_signature_still_raises():
    shape = (8, 64)
    fd = cases.build_ce_fwd_nvf("f32", shape)
    x, y = cases.inputs_ce_fwd_nvf(np.random.default_rng(0), shape, "f32")
    fd.execute([x, y], backend="cpu")
    fd.execute([x, y], backend="cpu")
    assert _used_plan(fd)
    for bad in (64, -1):
        y_bad = y.copy()
        y_bad[3] = bad
        with pytest.raises(IndexError, match=f"index {bad} is out of range for fuser.take_along_axis"):
            fd.execute([x, y_bad], backend="cpu")


def test_ignore_index_is_checked_exactly_without_the_interpreter():
    shape = (8, 64)
    fd = cases.build_ce_fwd_aot("f32", shape)
    (check,) = IndexChecks(fd.module.body.block.first_op).checks
    assert check.range == RangeSource(arg=1, ignore=-100, fill=0)
    x, y = cases.inputs_ce_fwd_aot(np.random.default_rng(0), shape, "f32")
    y[:2] = -100
    for _ in range(2):
        (loss,) = fd.execute([x, y], backend="cpu")
        np.testing.assert_allclose(loss, cases.ref_ce_fwd_aot(x, y)[0], rtol=1e-5)
    y[5] = -7
    with pytest.raises(IndexError, match="index -7 is out of range"):
        fd.execute([x, y], backend="cpu")


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_plans_with_torch_tensors():
    fd = _add()
    x = torch.arange(32, dtype=torch.float32).reshape(4, 8)
    for _ in range(3):
        (out,) = fd.execute([x, x], backend="cpu")
        assert isinstance(out, torch.Tensor)
        torch.testing.assert_close(out, 2 * x)
    assert _used_plan(fd)
    (out,) = fd.execute([x.t(), x.t()], backend="cpu")  # strides changed: a new plan
    assert not _used_plan(fd)
    torch.testing.assert_close(out, 2 * x.t())
    (out,) = fd.execute([x.numpy(), x.numpy()], backend="cpu")  # numpy again: numpy out
    assert isinstance(out, np.ndarray)


def test_threads_share_plans():
    fd = _add()
    errors = []
    start = threading.Barrier(6)

    def run(i: int) -> None:
        a = np.full((3, 5), float(i), np.float32)
        start.wait()
        try:
            for _ in range(50):
                (out,) = fd.execute([a, a], backend="cpu")
                np.testing.assert_array_equal(out, 2 * a)
                assert [k.scheduler for k in fd.last_kernels()] == ["pointwise"]
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    info = fd.cache_info()
    assert info.hits + info.misses == 300 and info.misses == 1


def test_records_of_a_plan_call_count_bytes():
    fd = _add()
    x = np.ones((4, 8), np.float32)
    fd.execute([x, x], backend="cpu")
    first = fd.last_kernels()
    fd.execute([x, x], backend="cpu")
    assert _used_plan(fd) and fd.last_kernels() == first
    assert first[0].bytes_loaded == 2 * x.nbytes and first[0].bytes_stored == x.nbytes


@pytest.mark.skipif(os.environ.get("FUSER_PERF") != "1", reason="timing test: set FUSER_PERF=1")
@pytest.mark.parametrize("case", ["softmax:f32:64x8192", "ce_fwd_aot:f32:64x4096", "ce_fwd_nvf:f32:64x4096",
                                  "layer_norm:f32:64x4096"])
def test_cached_execute_host_share_is_at_most_10us(case, memcheck_off):
    from fuser.benchmarks.measure import EmptyKernel, host_overhead

    c = cases.parse_case(case)
    fd, inputs = c.build(), c.inputs()
    fd.execute(inputs, backend="cpu")
    records = [host_overhead(fd, inputs, "cpu", EmptyKernel("cpu"), calls=600, budget_s=0.5)
               for _ in range(TIMING_BATCHES)]
    best = min(records, key=lambda r: r["host_us"])
    assert best["host_us"] <= 10.0, records


@pytest.mark.skipif(os.environ.get("FUSER_PERF") != "1", reason="timing test: set FUSER_PERF=1")
def test_tiny_add_cached_execute_wall_is_at_most_15us(memcheck_off):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.add(x, y))
    a = np.arange(8, dtype=np.float32)
    fd.execute([a, a], backend="cpu")
    medians = []
    for _ in range(TIMING_BATCHES):
        samples = []
        for _ in range(600):
            t0 = time.perf_counter_ns()
            fd.execute([a, a], backend="cpu")
            samples.append(time.perf_counter_ns() - t0)
        medians.append(statistics.median(samples) / 1e3)
    assert min(medians) <= 15.0, medians


def test_range_check_covers_every_element_of_a_2d_index():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        i = fd.define_tensor(shape=[-1, 1], dtype=DataType.Int)
        fd.add_output(fd.ops.take_along_axis(x, i, 1))
    x = np.zeros((3, 4), np.float32)
    fd.execute([x, np.array([[0], [3], [1]])], backend="cpu")
    fd.execute([x, np.array([[0], [3], [1]])], backend="cpu")
    assert _used_plan(fd)
    with pytest.raises(IndexError, match="index 4 is out of range"):
        fd.execute([x, np.array([[0], [4], [1]])], backend="cpu")
