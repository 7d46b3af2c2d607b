"""Inputs of any non-negative strides are read where they are, never made dense: an expanded
(stride-0) input of 2**31 + 5 float64 elements is its 8 bytes, a slice reaches past its dense
size (memcheck's region is the span the strides reach), on the full path and a launch plan's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from lowering_checks import requires_cpu_backend

pytestmark = requires_cpu_backend


def _sum_and_exp() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.mul(x, 2.0), [0, 1]))
        fd.add_output(fd.ops.exp(x))
    return fd


BASE = np.arange(30, dtype=np.float32).reshape(5, 6) / 10


@pytest.mark.parametrize("make", [
    lambda: np.broadcast_to(np.float32(0.3), (4, 7)),
    lambda: BASE[:, 1:4],
    lambda: BASE[::2, ::3],
    lambda: BASE.T,
    lambda: np.broadcast_to(BASE[:, :1], (5, 9)),
], ids=["expanded", "slice", "step", "transposed", "broadcast column"])
def test_strided_inputs_are_read_in_place(make, monkeypatch):
    from fuser.lowering import settings

    monkeypatch.setenv("FUSER_MEMCHECK", "1")  # every access checked against the span of the view
    settings.reload()
    fd = _sum_and_exp()
    x = make()
    monkeypatch.setattr(np, "ascontiguousarray", _no_copy)
    expected = fd.execute([x], backend="reference")
    for used_plan in (False, True):  # the full path, then the launch plan
        got = fd.execute([x], backend="cpu")
        assert fd._get_executor().last_call_used_plan() == used_plan
        for g, want in zip(got, expected):
            np.testing.assert_allclose(g, want, rtol=1e-6)
    monkeypatch.undo()
    settings.reload()


def _no_copy(*args, **kwargs):
    raise AssertionError("a strided input was copied")


def test_an_expanded_input_of_two_billion_elements_sums_within_4_gib():
    """`torch.ones(1, dtype=torch.float64).expand(2**31 + 5)` (8 bytes of storage) was copied in
    full: 16 GiB, OOM-killed. Under a 4 GiB address-space limit it now sums right."""
    script = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        import torch
        from fuser import FusionDefinition, DataType
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1], dtype=DataType.Double)
            fd.add_output(fd.ops.sum(x, [0]))
        (total,) = fd.execute([torch.ones(1, dtype=torch.float64).expand(2**31 + 5)], backend="cpu")
        print(float(total))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "FUSER_MEMCHECK": "0"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.strip()) == 2**31 + 5
