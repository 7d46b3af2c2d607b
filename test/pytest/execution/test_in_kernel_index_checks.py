"""Indices computed inside a fusion are checked in the kernel (lowering/execution/index_errors.py): an
index that leaves its extent is an IndexError naming the op, the value and the extent — never
a silent read out of bounds — on the full path and a launch plan's, and the next call works."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from fuser.lowering import settings
from fuser.lowering.errors import LaunchError, RaceError
from lowering_checks import requires_cpu_backend

pytestmark = requires_cpu_backend

X = np.arange(12, dtype=np.float32).reshape(3, 4)
GOOD = np.array([[0, 0], [0, 1], [0, 0]])
BAD = np.array([[1, 1], [2, 3], [0, 0]])  # doubled: 2, 2 / 4, 6 / 0, 0: 4 and 6 leave [0, 4)


def _computed_take_along_axis() -> FusionDefinition:
    """The issue's repro, with an index the host cannot check without running the fusion."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        i = fd.define_tensor([-1, -1], dtype=DataType.Int)
        fd.add_output(fd.ops.take_along_axis(x, fd.ops.mul(i, 2), 1))
    return fd


def test_a_computed_index_out_of_range_is_an_index_error():
    fd = _computed_take_along_axis()
    np.testing.assert_array_equal(fd.execute([X, GOOD], backend="cpu")[0], [[0, 0], [4, 6], [8, 8]])
    for _ in range(2):  # the full path raised; now a launch plan's call
        with pytest.raises(IndexError, match=r"index (4|6) is out of range for fuser.take_along_axis along dim 1 "
                                             r"of extent 4 \(valid: 0..3; found by the in-kernel check\)"):
            fd.execute([X, BAD], backend="cpu")
    np.testing.assert_array_equal(fd.execute([X, GOOD], backend="cpu")[0], [[0, 0], [4, 6], [8, 8]])



@pytest.mark.parametrize("interruption", [KeyboardInterrupt, LaunchError, RaceError], ids=lambda e: e.__name__)
def test_the_next_call_after_an_interrupted_one_does_not_raise_its_fault(monkeypatch, interruption):
    """A launch that raises (Ctrl-C, a failed launch, a race) never reads the record its kernels
    wrote: the next call, with good indices, must not raise the interrupted call's IndexError —
    on the full path and a launch plan's. The launch is interrupted right after its kernel ran
    (where a real Ctrl-C leaves the record: written, unread)."""
    from fuser.lowering.backends.cpu import HostMemory

    armed = []
    read_record = HostMemory.after_checked_launch

    def after_checked_launch(records):
        if armed:
            raise armed.pop()
        read_record(records)

    monkeypatch.setattr(HostMemory, "after_checked_launch", staticmethod(after_checked_launch))
    fd = _computed_take_along_axis()
    for path in ("full", "launch plan"):
        armed.append(interruption("interrupted"))
        with pytest.raises(interruption):
            fd.execute([X, BAD], backend="cpu")
        got = fd.execute([X, GOOD], backend="cpu")[0]
        np.testing.assert_array_equal(got, [[0, 0], [4, 6], [8, 8]], err_msg=path)


def test_the_message_names_the_index_source():
    fd = _computed_take_along_axis()
    with pytest.raises(IndexError, match=r"input 1.*through fuser.binary"):
        fd.execute([X, BAD], backend="cpu")


@pytest.mark.parametrize("op", ["gather", "index_select", "scatter"])
def test_every_index_op_checks_in_the_kernel(op):
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        i = fd.define_tensor([-1, -1] if op != "index_select" else [-1], dtype=DataType.Int)
        index = fd.ops.sub(i, 1)
        if op == "gather":
            fd.add_output(fd.ops.gather(x, index, 1))
        elif op == "index_select":
            fd.add_output(fd.ops.index_select(x, index, 0))
        else:
            fd.add_output(fd.ops.scatter(x, index, 5.0, 1))
    good = np.array([[1, 2], [3, 4], [1, 1]]) if op != "index_select" else np.array([1, 3, 2])
    bad = np.array([[1, 2], [0, 4], [1, 1]]) if op != "index_select" else np.array([1, 0, 2])  # -1 after sub
    np.testing.assert_allclose(fd.execute([X, good], backend="cpu")[0], fd.execute([X, good], backend="reference")[0])
    with pytest.raises(IndexError, match=r"index -1 is out of range"):
        fd.execute([X, bad], backend="cpu")


def test_the_check_costs_one_compare_per_index_read():
    fd = _computed_take_along_axis()
    fd.execute([X, GOOD], backend="cpu")
    source = fd.last_cuda_code()
    assert source.count("fuser_checked_index(") == 1 + source.count("__device__ __forceinline__ long long "
                                                                      "fuser_checked_index(")


CHECKED_READ = re.compile(r"fuser_checked_index\(\w+, \d+, ")


def test_the_checks_can_be_disabled_for_speed(monkeypatch):
    """_disable_options=["kernel_index_checks"] (or FUSER_DISABLE) renders the index read as it
    is, like nvFuser's kernels: same results for valid indices, another compiled variant."""
    fd = _computed_take_along_axis()
    expected = fd.execute([X, GOOD], backend="cpu")[0]
    assert CHECKED_READ.search(fd.last_cuda_code())
    got = fd.execute([X, GOOD], backend="cpu", _disable_options=["kernel_index_checks"])[0]
    np.testing.assert_array_equal(got, expected)
    assert not CHECKED_READ.search(fd.last_cuda_code())
    monkeypatch.setenv("FUSER_DISABLE", "kernel_index_checks")
    settings.reload()  # FUSER_* are read into a snapshot (lowering/settings.py)
    try:
        np.testing.assert_array_equal(fd.execute([X, GOOD], backend="cpu")[0], expected)
        assert not CHECKED_READ.search(fd.last_cuda_code())
    finally:
        monkeypatch.undo()
        settings.reload()


def test_check_index_errors_raises_what_no_call_has_raised(monkeypatch):
    """The cuda backend's record is read lazily (lowering/execution/index_errors.py): a fault a kernel
    recorded is raised by the next call of the fusion or by fd.check_index_errors(). Here the
    record is the one a cuda launch would get, filled as the kernel would fill it."""
    from fuser.lowering.backends import gpu_runtime

    fd = _computed_take_along_axis()
    fd.execute([X, GOOD], backend="cpu")
    fd.check_index_errors()  # nothing pending
    records = fd._get_executor().cache.values()[0].index_records
    record = np.zeros(4, np.int64)
    waited = []
    monkeypatch.setattr(gpu_runtime, "synchronize", lambda: waited.append(True))
    monkeypatch.setattr(records, "_gpu", (record, 0))  # gpu_record(): the mapped host array, its device address
    record[:] = [1, 0, 6, 4]  # fault, site 0, value 6, extent 4
    with pytest.raises(IndexError, match=r"index 6 is out of range for fuser.take_along_axis along dim 1 of extent 4"):
        fd.check_index_errors()
    assert waited and not record.any()  # waited for the GPU; raised once, then cleared
    fd.check_index_errors()
