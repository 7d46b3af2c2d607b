"""Where a persistent row kernel keeps its row (lowering/schedulers/rows.py): register arrays up
to 8 elements a thread, shared memory beyond (slots shared by values whose phases do not
overlap), so that no row up to 32768 f32 spills. ptxas reports the spills of the emitted sm_90
code (NVRTC or nvcc, whichever is installed; the suite skips, saying why, if neither is)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fuser import FusionDefinition
from fuser.lowering.backends import compile as cc
from fuser.lowering.codegen.render import render
from fuser.lowering.schedulers.rows import REGISTER_ITERS, SHARED_ROW_BYTES, SharedRowStorage
from fuser.lowering.segmentation.segment import plan_kernels
from lowering_checks import check, requires_cpu_backend

ROW_LENGTHS = [1024, 4096, 8192, 16384, 32768]


def softmax() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        m = fd.ops.max(x, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(x, m))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))
    return fd


def layer_norm() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        w = fd.define_tensor(shape=[-1])
        b = fd.define_tensor(shape=[-1])
        mean = fd.ops.div(fd.ops.sum(x, dims=[1], keepdim=True), x.size(1))
        c = fd.ops.sub(x, mean)
        var = fd.ops.div(fd.ops.sum(fd.ops.mul(c, c), dims=[1], keepdim=True), x.size(1))
        y = fd.ops.mul(c, fd.ops.rsqrt(fd.ops.add(var, 1e-5)))
        fd.add_output(fd.ops.add(fd.ops.mul(y, fd.ops.broadcast(w, [True, False])), fd.ops.broadcast(b, [True, False])))
    return fd


def chained_max(links: int) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        t = x
        for _ in range(links):
            t = fd.ops.sub(fd.ops.mul(t, 1.5), fd.ops.max(t, dims=[1], keepdim=True))
        fd.add_output(t)
    return fd


def _kernel(build, row_length: int):
    (plan,) = plan_kernels(build().fusion)
    schedule = plan.unit.choose(plan, [(64, row_length)], None, {})
    return plan, schedule, render(plan, schedule)


def _ptxas_compiler() -> str:
    for backend in ("nvrtc", "nvcc"):
        try:
            cc.find_compiler(backend)
            return backend
        except cc.CompilerUnavailable:
            continue
    pytest.skip("neither NVRTC (the nvrtc extra) nor nvcc is installed: ptxas cannot report spills")


@pytest.mark.parametrize("build", [softmax, layer_norm], ids=["softmax", "layer_norm"])
@pytest.mark.parametrize("row_length", ROW_LENGTHS)
def test_persistent_rows_do_not_spill(build, row_length):
    backend = _ptxas_compiler()
    options = ("--ptxas-options=-v",) if backend == "nvrtc" else ("-Xptxas", "-v")
    _, schedule, kernel = _kernel(build, row_length)
    assert schedule.iters, f"{row_length} floats should be a persistent row: {schedule.describe()}"
    log = cc.compile_cuda(kernel.source, "sm_90", options, backend=backend).log
    spills = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert spills, f"ptxas printed no spill report:\n{log}"
    assert all(n == "0" for report in spills for n in report), f"{schedule.describe()}:\n{log}"


def test_long_rows_live_in_shared_memory_within_the_budget():
    for build in (softmax, layer_norm):
        for row_length in ROW_LENGTHS:
            plan, schedule, kernel = _kernel(build, row_length)
            assert schedule.shared == (schedule.iters > REGISTER_ITERS)
            if schedule.shared:
                storage = SharedRowStorage(plan.analysis.rows if schedule.keep == "values" else
                                           plan.analysis.rows_loads_only, schedule)
                assert 0 < kernel.shared_bytes == storage.bytes <= SHARED_ROW_BYTES
                assert "FUSER_DYNAMIC_SHARED" in kernel.source
            else:
                assert kernel.shared_bytes == 0


def test_chained_reductions_share_two_slots():
    """t = 1.5 t - max(t), 12 times: each link is written by one phase and read by the next,
    so two shared-memory slots hold the whole chain."""
    plan, schedule, kernel = _kernel(lambda: chained_max(12), 16384)
    assert schedule.shared and schedule.keep == "values"
    _, slots = plan.analysis.rows.slots()
    assert slots == 2
    assert kernel.shared_bytes == 2 * schedule.iters * schedule.block * 4


@requires_cpu_backend
@pytest.mark.parametrize("row_length", [16384, 32768])
def test_shared_memory_rows_match_the_reference(row_length):
    rng = np.random.default_rng(row_length)
    x = rng.standard_normal((3, row_length), dtype=np.float32)
    w, b = rng.random(row_length, dtype=np.float32), rng.random(row_length, dtype=np.float32)
    for fd, inputs in ((softmax(), [x]), (layer_norm(), [x, w, b]), (chained_max(5), [x])):
        (kernel,) = check(fd, inputs, tol=(1e-4, 1e-4))
        assert "row in shared memory" in kernel.source
        # x read once; weights once per block when kept, else once per row.
        weight_reads = x.shape[0] if "weights re-read" in kernel.source else kernel.grid[0]
        assert kernel.bytes_loaded == x.nbytes + sum(a.nbytes for a in inputs[1:]) * weight_reads
