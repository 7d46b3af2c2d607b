"""Where a persistent row kernel keeps its row (lowering/schedulers/rows/storage.py): register
arrays while a thread keeps a few dozen words, shared memory beyond (slots shared by values
whose phases do not overlap), streaming rows past that; and whatever the row length, the
schedule the heuristic picks does not spill. ptxas reports the spills of the emitted sm_90
code (NVRTC or nvcc, whichever is installed; the suite skips, saying why, if neither is)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fuser import FusionDefinition
from fuser.lowering.backends import compile as cc
from fuser.lowering.codegen.render import render
from fuser.lowering.device import H100
from fuser.lowering.schedulers.rows import RowSchedule, SharedRowStorage
from fuser.lowering.schedulers.rows.heuristic import REGISTER_BUDGET
from fuser.lowering.schedulers.rows.storage import kept_words, row_storage
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


def _kernel(build, row_length: int, rows: int = 4096):
    """The kernel the heuristic picks for dense aligned inputs ({}: no array to check)."""
    (plan,) = plan_kernels(build().fusion)
    schedule = plan.unit.choose(plan, [(rows, row_length)], {}, {})
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
def test_row_kernels_do_not_spill(build, row_length):
    backend = _ptxas_compiler()
    options = ("--ptxas-options=-v",) if backend == "nvrtc" else ("-Xptxas", "-v")
    _, schedule, kernel = _kernel(build, row_length)
    log = cc.compile_cuda(kernel.source, "sm_90", options, backend=backend).log
    spills = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert spills, f"ptxas printed no spill report:\n{log}"
    assert all(n == "0" for report in spills for n in report), f"{schedule.describe()}:\n{log}"


def test_kept_rows_fit_their_storage():
    """Kept in registers, a thread's share stays within the register budget; kept in shared
    memory, the block's slots fit what a block may have; too long for either, the row streams."""
    for build in (softmax, layer_norm):
        for row_length in [*ROW_LENGTHS, 65536]:
            plan, schedule, kernel = _kernel(build, row_length)
            if not schedule.persistent:
                assert kernel.shared_bytes == 0 and "buf0" not in kernel.source
                continue
            access = row_storage(plan, schedule.keep)
            if schedule.shared:
                storage = SharedRowStorage(access, schedule)
                assert 0 < kernel.shared_bytes == storage.bytes <= H100.shared_per_block_optin
                assert "FUSER_DYNAMIC_SHARED" in kernel.source
            else:
                assert kernel.shared_bytes == 0
                assert kept_words(access, schedule.iters, schedule.vec) <= REGISTER_BUDGET, schedule.describe()
    # 65536 floats (256 KB) fit neither: streamed.
    assert not _kernel(softmax, 65536)[1].persistent


def test_chained_reductions_share_two_slots():
    """t = 1.5 t - max(t), 12 times: each link is written by one phase and read by the next,
    so two shared-memory slots hold the whole chain."""
    (plan,) = plan_kernels(chained_max(12).fusion)
    schedule = RowSchedule(1024, True, iters=4, vec=4, shared=True)
    kernel = render(plan, schedule)
    _, slots = plan.analysis.rows.slots()
    assert slots == 2
    assert kernel.shared_bytes == 2 * schedule.iters * schedule.vec * schedule.block * 4


@requires_cpu_backend
@pytest.mark.parametrize("row_length", [16384, 32768])
def test_shared_memory_rows_match_the_reference(row_length):
    """Forced shared-memory schedules (override_schedule): values, and x loaded once."""
    rng = np.random.default_rng(row_length)
    x = rng.standard_normal((3, row_length), dtype=np.float32)
    w, b = rng.random(row_length, dtype=np.float32), rng.random(row_length, dtype=np.float32)
    shared = RowSchedule(1024, True, iters=row_length // 4096, vec=4, shared=True, keep="loads")
    for fd, inputs in ((softmax(), [x]), (layer_norm(), [x, w, b]), (chained_max(5), [x])):
        fd.override_schedule(0, shared)
        (kernel,) = check(fd, inputs, tol=(1e-4, 1e-4))
        assert kernel.schedule == shared and "row in shared memory" in kernel.source
        # x once; weights with every row (L2 hits after the first).
        assert kernel.bytes_loaded == x.nbytes + sum(a.nbytes for a in inputs[1:]) * x.shape[0]


def _bf16_softmax() -> FusionDefinition:
    from fuser import DataType

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        xf = fd.ops.cast(x, DataType.Float)
        m = fd.ops.max(xf, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(xf, m))
        fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)), DataType.BFloat16))
    return fd


def test_a_shared_memory_row_keeps_16_bit_loads_as_loaded():
    """A bf16 row kept in shared memory: its loads are kept as bf16 (2 bytes an element, half of
    what the float they compute in took: the cross-entropy backward at 32,064 goes from one block
    an SM to three), computed values still as float."""
    (plan,) = plan_kernels(_bf16_softmax().fusion)
    loads = RowSchedule(1024, True, iters=4, vec=8, shared=True, keep="loads")
    kernel = render(plan, loads)
    _, slots = plan.analysis.rows_loads_only.slots()
    assert kernel.shared_bytes == slots * loads.iters * loads.vec * loads.block * 2
    assert "FUSER_SHARED_VIEW(__nv_bfloat16," in kernel.source
    values = RowSchedule(1024, True, iters=4, vec=8, shared=True, keep="values")
    storage = SharedRowStorage(row_storage(plan, "values"), values, plan.inputs)
    computed = [v for v, _ in plan.analysis.rows.kept if v not in plan.inputs]
    assert storage.element_bytes == (4 if computed else 2)


@requires_cpu_backend
@pytest.mark.parametrize("keep", ["loads", "values", "prefetch"])
def test_bf16_shared_memory_rows_match_the_reference(keep):
    """Forced bf16 shared-memory schedules: the reference's values (the bf16 -> float -> bf16
    round trip of a kept load is exact), x loaded once."""
    import ml_dtypes

    x = np.random.default_rng(9).standard_normal((3, 16384)).astype(ml_dtypes.bfloat16)
    fd = _bf16_softmax()
    schedule = RowSchedule(512, True, iters=4, vec=8, shared=True, keep=keep)
    fd.override_schedule(0, schedule)
    (kernel,) = check(fd, [x])
    assert kernel.schedule == schedule and kernel.bytes_loaded == x.nbytes
