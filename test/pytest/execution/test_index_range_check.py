"""The per-call range check of an index input (lowering/execution/gather_checks.py): the host runtime's
one-pass C loop and the numpy reduction give the same verdict as the definition, element by
element, on every dtype, ignore value, fill and extent - including extents beyond what the
index type can hold, where a negative value's unsigned view would otherwise look in range."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fuser import DataType, FusionDefinition
from fuser.benchmarks import cases
from fuser.lowering.execution import gather_checks
from fuser.lowering.execution.gather_checks import IndexChecks, RangeSource


def violates(values: np.ndarray, extent: int, ignore: int | None, fill: int | None) -> bool:
    """The definition: an element outside [0, extent), an ignored element standing for `fill`."""
    for v in values.ravel().tolist():
        if ignore is not None and v == ignore:
            v = fill
        if not 0 <= v < extent:
            return True
    return False


def _fusion(dtype: DataType, ignore: int | None, fill: int) -> FusionDefinition:
    """take_along_axis of x by labels, with `where(labels != ignore, labels, fill)` when ignoring."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        labels = fd.define_tensor(shape=[-1], dtype=dtype)
        index = labels
        if ignore is not None:
            index = fd.ops.where(fd.ops.ne(labels, ignore), labels, fill)
        fd.add_output(fd.ops.take_along_axis(x, fd.ops.broadcast_in_dim(index, [labels.size(0), 1], [0]), 1))
    return fd


def _check(dtype: DataType, ignore: int | None, fill: int):
    fd = _fusion(dtype, ignore, fill)
    (check,) = IndexChecks(fd.module.body.block.first_op).checks
    assert check.range == RangeSource(arg=1, ignore=ignore, fill=None if ignore is None else fill)
    return check


@pytest.fixture(scope="module")
def native():
    """The host runtime's check, loaded the way the cpu backend loads it (by running a kernel)."""
    fd = _fusion(DataType.Int, None, 0)
    fd.execute([np.zeros((2, 3), np.float32), np.array([0, 2])], backend="cpu")
    found = gather_checks._native_range_check()
    assert found is not None, "the cpu backend ran, so its host runtime is loaded"
    return found


def _verdicts(check, values, extent: int, monkeypatch) -> tuple[bool, bool]:
    """(native verdict, numpy verdict) of `check` on `values` as input 1."""
    inputs = [None, values]
    with_native = check._range_violated(inputs, extent)
    with monkeypatch.context() as m:
        m.setattr(gather_checks, "_native_range_check", lambda: None)
        with_numpy = check._range_violated(inputs, extent)
    return with_native, with_numpy


CASES = [
    # (dtype, ignore, fill, values, extent)
    (DataType.Int, None, 0, [0, 1, 2], 3),
    (DataType.Int, None, 0, [0, 3, 2], 3),
    (DataType.Int, None, 0, [0, -1, 2], 3),
    (DataType.Int, None, 0, [], 0),
    (DataType.Int, None, 0, [0], 0),
    (DataType.Int, -100, 0, [-100, 1, -100], 3),
    (DataType.Int, -100, 0, [-100, 1, -99], 3),
    (DataType.Int, -100, 5, [-100, 1], 3),  # an ignored element reads as an out-of-range fill
    (DataType.Int, -100, 5, [0, 1], 3),  # ... but only when one is present
    (DataType.Int, 2, 0, [2, 2, 1], 2),  # an in-range ignore value
    (DataType.Int, None, 0, [-1], 1 << 63),  # -1 as unsigned is 2**64 - 1: still out of range
    (DataType.Int32, None, 0, [-1, 0], (1 << 32) + 5),  # int32 -1 as uint32 is below this extent
    (DataType.Int32, None, 0, [2**31 - 1], 1 << 40),
    (DataType.Int32, -100, 0, [-100, 7], 8),
    (DataType.Int32, 1 << 40, 0, [3, -3], 8),  # an ignore value no int32 can hold matches nothing
]


@pytest.mark.parametrize("dtype, ignore, fill, values, extent", CASES)
def test_native_and_numpy_checks_follow_the_definition(native, monkeypatch, dtype, ignore, fill, values, extent):
    np_dtype = np.int64 if dtype == DataType.Int else np.int32
    array = np.array(values, np_dtype)
    expected = violates(array, extent, ignore, fill)
    assert _verdicts(_check(dtype, ignore, fill), array, extent, monkeypatch) == (expected, expected)


@settings(max_examples=200, deadline=None)
@given(
    is_int32=st.booleans(),
    values=st.lists(st.integers(-300, 300), max_size=40),
    ignore=st.one_of(st.none(), st.integers(-300, 300)),
    fill=st.integers(-5, 300),
    extent=st.integers(0, 260),
)
def test_generated_index_inputs_get_the_definitions_verdict(native, is_int32, values, ignore, fill, extent):
    dtype = DataType.Int32 if is_int32 else DataType.Int
    array = np.array(values, np.int32 if is_int32 else np.int64)
    check = _check(dtype, ignore, fill)
    expected = violates(array, extent, ignore, fill)
    assert check._range_violated([None, array], extent) == expected
    saved = gather_checks._native_check
    gather_checks._native_check = None
    try:
        from fuser.lowering.backends import prebuilt

        loaded = dict(prebuilt._loaded)
        prebuilt._loaded.clear()  # no runtime: the numpy reduction
        try:
            assert check._range_violated([None, array], extent) == expected
        finally:
            prebuilt._loaded.update(loaded)
    finally:
        gather_checks._native_check = saved


def test_strided_and_torch_inputs(native, monkeypatch):
    check = _check(DataType.Int, -100, 0)
    strided = np.array([0, 99, 1, 99, 2, 99], np.int64)[::2]  # the 99s are skipped
    assert gather_checks.contiguous_host_data(strided) is None
    assert _verdicts(check, strided, 3, monkeypatch) == (False, False)
    labels = torch.tensor([0, -100, 2])
    assert gather_checks.contiguous_host_data(labels) == (labels.data_ptr(), 3)
    # A contiguous torch CPU tensor is read in place: never converted to numpy.
    monkeypatch.setattr(gather_checks, "to_numpy", lambda v: pytest.fail("converted a CPU tensor"))
    assert check._range_violated([None, labels], 3) is False
    assert check._range_violated([None, torch.tensor([0, 3])], 3) is True


def test_cached_ce_with_torch_labels_reports_the_bad_label():
    shape = (8, 64)
    fd = cases.build_ce_fwd_aot("f32", shape)
    x, y = cases.inputs_ce_fwd_aot(np.random.default_rng(1), shape, "f32")
    y[:3] = -100
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for _ in range(2):
        (loss,) = fd.execute([xt, yt], backend="cpu")
        np.testing.assert_allclose(loss.numpy(), cases.ref_ce_fwd_aot(x, y)[0], rtol=1e-5)
    assert fd._get_executor().last_call_used_plan()
    bad = yt.clone()
    bad[6] = 64
    with pytest.raises(IndexError, match="index 64 is out of range"):
        fd.execute([xt, bad], backend="cpu")
