"""Kernel parameter space: a launch passes at most 32,764 bytes of parameters (sm_70+, CUDA
12.1+). A kernel of 460 rank-8 f32 inputs took 33,256 (a pointer and 8 strides an input) and
NVRTC refused it ("Formal parameter space overflowed"). Segmentation now keeps each kernel
within the limit, splitting the fusion with the reason in the IR; render() checks the exact
figure, and the launch paths the driver's limit (backends/test_launch_limits.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from fuser.lowering import schedulers
from fuser.lowering.codegen import render
from fuser.lowering.codegen.render import param_size
from fuser.lowering.device import H100, LaunchLimitError, parameter_bytes
from fuser_dialect.inputs import check_inputs
from lowering_checks import requires_cpu_backend


def _sum_of_inputs(n: int, rank: int) -> FusionDefinition:
    with FusionDefinition() as fd:
        xs = [fd.define_tensor(shape=[-1] * rank, dtype=DataType.Float) for _ in range(n)]
        acc = xs[0]
        for x in xs[1:]:
            acc = fd.ops.add(acc, x)
        fd.add_output(acc)
    return fd


def _rendered(fd: FusionDefinition, inputs: list):
    """(compiled fusion, kernels) of `inputs` on the cpu backend, rendered but never built."""
    from fuser.lowering.backends.cpu import CpuBackend

    class SourcesOnly(CpuBackend):
        name = "sources-only"

        def program(self, source):
            return None

    executor = fd._get_executor()
    _, _, compiled, _, kernels = executor._compile(check_inputs(executor.fusion, inputs), SourcesOnly(), (),
                                                   with_index_checks=False)
    return compiled, kernels.kernels


def _parameter_bytes(kernel) -> int:
    return parameter_bytes([param_size(p.ctype) for p in kernel.params])


def test_460_rank8_inputs_are_split_into_kernels_within_the_parameter_space():
    fd = _sum_of_inputs(460, 8)
    compiled, kernels = _rendered(fd, [np.empty((2,) * 8, np.float32)] * 460)
    assert len(kernels) >= 2
    assert all(_parameter_bytes(k) <= H100.max_parameter_bytes for k in kernels)
    assert sum(len(p.inputs) for p in compiled.plans) >= 460
    reason = compiled.plans[1].split_reason
    assert reason.startswith("split before fuser.binary: its kernel would take about ") and \
        "bytes of parameters, more than the 31,740 this fusion's kernels may" in reason


@requires_cpu_backend
def test_a_split_sum_of_many_inputs_matches_numpy(monkeypatch):
    """The same split at a small budget, run: 40 rank-4 inputs, ~1,700 bytes of parameters, in
    kernels of at most 1,200."""
    monkeypatch.setattr(schedulers, "PARAMETER_BUDGET", 1200)
    fd = _sum_of_inputs(40, 4)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((2, 3, 4, 5)).astype(np.float32) for _ in range(40)]
    (got,) = fd.execute(inputs, backend="cpu")
    np.testing.assert_allclose(got, np.sum(np.stack(inputs).astype(np.float64), axis=0), rtol=1e-5, atol=1e-5)
    kernels = fd.last_kernels()
    assert len(kernels) >= 2 and all(_parameter_bytes_of(k) <= 1200 for k in kernels)


def _parameter_bytes_of(record) -> int:
    head = record.source.split(f"{record.name}(\n", 1)[1].split(") {", 1)[0]
    return parameter_bytes([param_size(p.strip().rsplit(" ", 1)[0]) for p in head.split(",")])


def test_render_refuses_a_kernel_over_the_parameter_space(monkeypatch):
    """Were segmentation's estimate ever short, render() raises before any compiler runs: the
    kernel, the limit and the value, on every backend."""
    monkeypatch.setattr(schedulers, "PARAMETER_BUDGET", 10**9)
    monkeypatch.setattr(render, "DEFAULT", dataclasses.replace(H100, max_parameter_bytes=600))
    fd = _sum_of_inputs(20, 4)
    with pytest.raises(LaunchLimitError, match=r"kernel 'fuser_kernel_0_pointwise' takes [0-9]{3} bytes of "
                                               r"parameters, more than the 600") as e:
        fd.execute([np.zeros((2, 2, 2, 2), np.float32)] * 20, backend="cpu")
    assert e.value.limit == 600 and e.value.value > 600
