"""Call signatures (lowering/execution/call_signature.py): the function an executor generates for its
argument kinds returns exactly what the definition, `call_signature`, returns, for any inputs:
numpy arrays of any dtype and layout, torch tensors, scalars of every accepted type, NaN, inputs
of unknown types and wrong counts. And grid-reduction workspaces that launch plans reuse per
thread stay correct across calls, threads and failed launches."""

from __future__ import annotations

import ctypes
import math
import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fuser.benchmarks import cases
from fuser.lowering import addresses
from fuser.lowering.execution.call_signature import call_signature, signature_function

KINDS = st.lists(st.sampled_from([True, False, None]), max_size=5).map(tuple)


def _array(draw_dtype: str, shape: tuple[int, ...], layout: str) -> np.ndarray:
    base = np.arange(int(np.prod(shape)) * 4 + 3).astype(draw_dtype)
    if layout == "contiguous":
        return base[: int(np.prod(shape))].reshape(shape)
    if layout == "offset":  # a different alignment class
        return base[1: 1 + int(np.prod(shape))].reshape(shape)
    if layout == "strided":
        return base[: 2 * int(np.prod(shape))][::2].reshape(shape)
    return base[: int(np.prod(shape))].reshape(shape).T  # transposed


TENSORS = st.builds(
    _array,
    st.sampled_from(["float32", "float64", "int64", "int32", "float16", "bool"]),
    st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple),
    st.sampled_from(["contiguous", "offset", "strided", "transposed"]),
)
SCALARS = st.one_of(
    st.integers(-10, 10), st.floats(allow_nan=True, allow_infinity=True, width=64), st.booleans(),
    st.sampled_from([np.float32(1.5), np.int64(3), np.int32(-2), np.bool_(True), np.float16(0.5), np.uint8(7),
                     np.float32("nan"), np.float64(2.0)]),
)
OTHERS = st.sampled_from([None, "text", [1, 2], (3,), 1 + 2j, object()])


def _value(kind):
    """Mostly what the kind expects, sometimes something else (the signature must say None)."""
    fitting = TENSORS | st.builds(lambda a: torch.from_numpy(np.ascontiguousarray(a)), TENSORS) if kind else SCALARS
    return st.one_of(fitting, fitting, fitting, SCALARS if kind else TENSORS, OTHERS)


@settings(max_examples=400, deadline=None)
@given(data=st.data(), kinds=KINDS)
def test_generated_signature_is_the_definition(data, kinds):
    inputs = [data.draw(_value(k)) for k in kinds]
    if data.draw(st.booleans(), label="wrong count") and inputs:
        inputs = inputs[:-1] if data.draw(st.booleans()) else [*inputs, 1.0]
    generated = signature_function(kinds)
    assert generated(inputs) == call_signature(inputs, kinds)
    assert generated(tuple(inputs)) == call_signature(tuple(inputs), kinds)


def test_generated_signature_reads_addresses_and_alignment():
    if not addresses.FAST:
        pytest.skip("no direct read of numpy's data pointer on this interpreter")
    kinds = (True, False, None, True)
    f = signature_function(kinds)
    a = np.zeros(9, np.float32)
    t = torch.zeros(2, 3)
    key, addrs = f([a[1:], 2.5, 7, t])
    assert addrs == [a[1:].ctypes.data, 0, 0, t.data_ptr()]
    assert key[0] == ((8,), (4,), np.dtype(np.float32), a[1:].ctypes.data & 15)
    assert key[1] == (float, 2.5) and key[2] is int  # a seed's value is not part of the key
    assert key[3] == (torch.Tensor, torch.Size([2, 3]), (3, 1), torch.float32, torch.device("cpu"),
                      t.data_ptr() & 15)
    assert f([a, math.nan, 7, t]) is None and f([a, 2.5, 7]) is None and f([a, 2.5, 7, [1.0]]) is None


# --------------------------------------------------------------------------- reused workspaces


def _ce(shape=(64, 256)):
    """A cross-entropy forward: a grid reduction (its mean over rows) with a workspace."""
    fd = cases.build_ce_fwd_aot("f32", shape)
    x, y = cases.inputs_ce_fwd_aot(np.random.default_rng(3), shape, "f32")
    return fd, x, y


def _workspace_launches(fd) -> int:
    executor = fd._get_executor()
    (plan,) = executor._plans.values()
    return sum(1 for step in plan.steps if any(type(p).__name__ == "PerLaunch" for p in step.pointers))


def test_reused_workspace_gives_the_same_result_every_call():
    fd, x, y = _ce()
    expected = cases.ref_ce_fwd_aot(x, y)[0]
    results = [fd.execute([x, y], backend="cpu")[0] for _ in range(5)]
    assert _workspace_launches(fd) == 1 and fd._get_executor().last_call_used_plan()
    for r in results:
        np.testing.assert_allclose(r, expected, rtol=1e-5)
    assert len({r.item() for r in results}) == 1  # deterministic: the same bits every call


def test_reused_workspace_per_thread():
    fd, x, y = _ce()
    fd.execute([x, y], backend="cpu")
    expected = fd.execute([x, y], backend="cpu")[0].item()
    labels = [np.roll(y, k) for k in range(4)]
    wanted = [fd.execute([x, lab], backend="cpu")[0].item() for lab in labels]
    errors = []

    def worker(k: int) -> None:
        for _ in range(40):
            got = fd.execute([x, labels[k]], backend="cpu")[0].item()
            if got != wanted[k]:
                errors.append((k, got, wanted[k]))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert fd.execute([x, y], backend="cpu")[0].item() == expected


def test_a_failed_launch_gets_a_fresh_workspace(monkeypatch):
    fd, x, y = _ce()
    expected = fd.execute([x, y], backend="cpu")[0].item()
    fd.execute([x, y], backend="cpu")
    assert fd.last_kernels()[0].grid[0] > 1  # several blocks meet in the workspace
    (plan,) = fd._get_executor()._plans.values()
    (step,) = plan.steps
    bound = step.launch

    def fail_after_counting(pointers):
        # What a launch that dies part-way leaves: the finished-block counter not reset.
        workspace = next(p for p, s in zip(pointers, step.pointers) if type(s).__name__ == "PerLaunch")
        ctypes.c_uint64.from_address(workspace).value = 5
        raise RuntimeError("launch failed")

    monkeypatch.setattr(type(bound), "__call__", lambda self, pointers, stream=None: fail_after_counting(pointers))
    with pytest.raises(RuntimeError, match="launch failed"):
        fd.execute([x, y], backend="cpu")
    monkeypatch.undo()
    # Other labels, the same signature: a stale counter would combine this call's partials with
    # the last call's (the last block would arrive early).
    y2 = np.roll(y, 7)
    for labels in (y2, y):
        got = fd.execute([x, labels], backend="cpu")[0]
        np.testing.assert_allclose(got, cases.ref_ce_fwd_aot(x, labels)[0], rtol=1e-5)
    assert got.item() == expected
