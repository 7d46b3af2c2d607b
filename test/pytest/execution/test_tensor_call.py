"""TensorCalls (lowering/execution/tensor_call.py): a fused region called again with tensors like
the last call's runs its launch plan through a generated guard, with outputs from torch's
allocator. The guard decides exactly as the plan's key does; anything else goes through
`execute` and gets the plan (and TensorCall) of its own signature; values always equal eager."""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from fuser.lowering import settings
from fuser.lowering.execution.launch import PerLaunch
from fuser.lowering.execution.tensor_call import TensorCall
from fuser.torch_backend import make_backend

from torch_checks import F32_TOL, fresh_dynamo  # noqa: F401


def _compiled(fn, *args):
    """fn compiled with fuser, called three times (the third call runs a TensorCall); its region."""
    reports = []
    compiled = torch.compile(fn, backend=make_backend(reports))
    for _ in range(3):
        torch.testing.assert_close(compiled(*args), fn(*args), **F32_TOL)
    (fusion,) = reports[0].fusions
    return compiled, fusion.region


def _ran_tensor_call(region, *args) -> bool:
    """Whether a call of the region with `args` ran one of its TensorCalls (never reached execute)."""
    executor = region._executor
    executed = []
    execute = executor.execute
    executor.execute = lambda *a, **k: executed.append(1) or execute(*a, **k)
    try:
        region(*args)
    finally:
        del executor.execute
    return not executed


def _pointwise(x, y):
    return (x + y) * 2 - y.sin()


def test_the_third_call_runs_a_tensor_call_and_returns_torch_allocated_outputs():
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    compiled, region = _compiled(_pointwise, x, y)
    (call,) = region._tensor_calls
    assert isinstance(call, TensorCall) and call.kernel_names == region.fd.last_kernel_names()
    assert _ran_tensor_call(region, x, y)
    (out,) = region(x, y)
    assert out._base is None and out.is_contiguous() and out.device == x.device  # torch's own tensor
    torch.testing.assert_close(out, _pointwise(x, y), **F32_TOL)
    calls = region.stats.calls
    region(x, y)
    assert region.stats.calls == calls + 1
    assert [k.name for k in region.fd.last_kernels()] == list(call.kernel_names)  # fd.last_kernels() as after execute


@pytest.mark.parametrize("other", [
    lambda x: torch.randn(8, 4).t(),  # other strides
    lambda x: torch.randn(4 * 8 + 1)[1:].view(4, 8),  # another alignment class of the data address
], ids=["strides", "alignment"])
def test_the_guard_refuses_what_the_plan_is_not_for_and_the_call_is_still_right(other):
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    compiled, region = _compiled(_pointwise, x, y)
    x2 = other(x)
    y2 = torch.randn_like(x2)
    (call,) = region._tensor_calls
    assert call.run((x2, y2)) is None
    for _ in range(3):  # execute's path, then the new plan's own TensorCall
        (out,) = region(x2, y2)
        torch.testing.assert_close(out, _pointwise(x2, y2), **F32_TOL)
    assert len(region._tensor_calls) == 2 and _ran_tensor_call(region, x2, y2)
    (out,) = region(x, y)  # the first signature's TensorCall is kept
    torch.testing.assert_close(out, _pointwise(x, y), **F32_TOL)
    assert _ran_tensor_call(region, x, y)
    assert call.run((x.double(), y.double())) is None  # another dtype


def test_sizes_of_a_dynamic_graph_each_get_a_tensor_call():
    reports = []
    compiled = torch.compile(_pointwise, backend=make_backend(reports), dynamic=True)
    for rows in (3, 5, 3, 5, 3, 5, 7, 3):
        x, y = torch.randn(rows, 8), torch.randn(rows, 8)
        torch.testing.assert_close(compiled(x, y), _pointwise(x, y), **F32_TOL)
    region = reports[0].fusions[0].region
    assert len(reports) == 1 and len(region._tensor_calls) == 2  # rows 7 ran once: its plan has no TensorCall yet
    args = (torch.randn(5, 8), torch.randn(5, 8))
    assert _ran_tensor_call(region, *args)
    torch.testing.assert_close(region(*args)[0], _pointwise(*args), **F32_TOL)


def test_the_guard_decides_as_the_launch_plan_signature_does():
    """For inputs of many kinds: the guard lets a call through exactly when execute's signature
    of it is the signature of the plan the TensorCall replays."""
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    _, region = _compiled(_pointwise, x, y)
    (call,) = region._tensor_calls
    executor = region._executor
    reference = executor.signature([x, y])[0]
    base = torch.randn(64)
    candidates = [torch.randn(4, 8), torch.randn(4, 8, dtype=torch.float64), torch.randn(8, 4).t(), torch.randn(5, 8),
                  base[:32].view(4, 8), base[1:33].view(4, 8), base[4:36].view(4, 8), torch.nn.Parameter(torch.randn(4, 8)),
                  torch.randn(4, 8).requires_grad_(), torch.randn(1, 8).expand(4, 8), torch.randn(32)]
    for a in candidates:
        for b in candidates[:3]:
            signature = executor.signature([a, b])
            expected = signature is not None and signature[0] == reference
            assert (call.run((a, b)) is not None) == expected, (a.shape, a.stride(), b.shape, b.stride())


def test_a_changed_setting_or_forced_schedule_goes_back_through_execute(monkeypatch):
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    _, region = _compiled(_pointwise, x, y)
    (call,) = region._tensor_calls
    monkeypatch.setenv("FUSER_CPU_THREADS", "1")
    settings.reload()
    try:
        assert call.run((x, y)) is None
        torch.testing.assert_close(region(x, y)[0], _pointwise(x, y), **F32_TOL)
    finally:
        monkeypatch.delenv("FUSER_CPU_THREADS")
        settings.reload()
    schedule = region.fd.last_kernels()[0].schedule
    region.fd.override_schedule(0, schedule)
    assert call.run((x, y)) is None
    region.fd.override_schedule(0, None)


def test_a_plan_the_executor_dropped_is_not_replayed():
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    _, region = _compiled(_pointwise, x, y)
    (call,) = region._tensor_calls
    executor = region._executor
    executor._forget_plans_of(call.plan.cache_key)
    assert call.plan.retired and call.run((x, y)) is None
    torch.testing.assert_close(region(x, y)[0], _pointwise(x, y), **F32_TOL)


def test_bf16_outputs_and_several_outputs_in_the_region_order():
    def fn(x, y):
        s = x + y
        return s * 2, (s - 1).to(torch.bfloat16), s.exp()

    x, y = torch.randn(3, 5), torch.randn(3, 5)
    compiled, region = _compiled(fn, x, y)
    assert _ran_tensor_call(region, x, y)
    got = compiled(x, y)
    assert got[1].dtype == torch.bfloat16
    for g, e in zip(got, fn(x, y)):
        torch.testing.assert_close(g, e, **F32_TOL)


def test_an_out_of_range_index_raises_eagers_error_from_a_tensor_call():
    def fn(x, i):
        return torch.gather(x * 2, 1, i) + 1

    x = torch.randn(4, 6)
    i = torch.randint(0, 6, (4, 3))
    compiled, region = _compiled(fn, x, i)
    assert region._tensor_calls and _ran_tensor_call(region, x, i)
    bad = i.clone()
    bad[2, 1] = 6
    with pytest.raises(RuntimeError) as eager:
        fn(x, bad)
    with pytest.raises(RuntimeError, match="index 6 is out of bounds for dimension 1 with size 6") as fused:
        compiled(x, bad)
    assert "gather" in str(fused.value) and "out of bounds" in str(eager.value)
    torch.testing.assert_close(compiled(x, i), fn(x, i), **F32_TOL)  # the fault belongs to that call only
    assert _ran_tensor_call(region, x, i)


def _executor_call(fd, inputs):
    """The TensorCall of the plan fd's executor replays for `inputs` on the cpu backend."""
    from fuser.execution import _backend_named

    executor, backend = fd._get_executor(), _backend_named("cpu")
    for _ in range(2):  # the first call builds the plan, the second replays it
        executor.execute(inputs, backend)
    return executor.tensor_call(inputs, backend)


def test_random_ops_read_their_seed_per_call_and_draw_anew():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        seed, offset = fd.define_scalar(dtype=DataType.Int), fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.add(fd.ops.rand_like(x, seed, offset), x))  # seeded: values of the seed
        fd.add_output(fd.ops.rand_like(x))  # unseeded: a new draw of the process generator per call
    x = torch.randn(9, 33)
    call = _executor_call(fd, [x, 1, 2])
    assert call is not None
    draws = set()
    for s in (5, 6, 5):
        seeded, unseeded = call.run([x, s, 100 - s])
        (expected, _) = fd.execute([x.numpy(), s, 100 - s], backend="reference")
        np.testing.assert_array_equal(seeded.numpy(), expected)
        draws.add(unseeded.numpy().tobytes())
    assert len(draws) == 3
    assert call.run([x, 5.0, 2]) is None  # a float seed: another signature


def test_a_grid_reduction_keeps_its_zeroed_workspace_across_tensor_calls():
    fn = lambda x: (x * 2).sum()  # noqa: E731
    x = torch.randn(1000, 333)
    compiled, region = _compiled(fn, x)
    (call,) = region._tensor_calls
    assert any(isinstance(p, PerLaunch) for step in call.plan.steps for p in step.pointers)
    first = compiled(x)
    for _ in range(3):
        again = compiled(x)
        assert again.item() == first.item()  # same bits: the counter and partial sums start at zero
    torch.testing.assert_close(first, fn(x), rtol=1e-4, atol=1e-3)


def test_tensor_calls_from_several_threads():
    x, y = torch.randn(64, 32), torch.randn(64, 32)
    _, region = _compiled(_pointwise, x, y)
    expected = _pointwise(x, y)
    errors = []

    def work():
        try:
            for _ in range(200):
                torch.testing.assert_close(region(x, y)[0], expected, **F32_TOL)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _gpu_shaped_backend(entered: list):
    """A backend that says it is on a GPU; its context() appends to `entered`."""

    class GpuShaped:
        on_gpu = True
        compiles = True

        @staticmethod
        @contextlib.contextmanager
        def context():
            entered.append(1)
            yield

    return GpuShaped


def test_the_gpu_form_runs_its_launches_inside_the_backends_context(monkeypatch):
    """The generated code on a GPU enters the backend's context around the launches (execute
    does the same): checked here with the cpu plan, its launches on their Python path (not
    native), and a backend that says it is on a GPU."""
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    _, region = _compiled(_pointwise, x, y)
    (call,) = region._tensor_calls
    for step in call.plan.steps:
        monkeypatch.setattr(step.launch, "native", None)
    entered = []
    GpuShaped = _gpu_shaped_backend(entered)
    gpu_form = TensorCall(region._executor, call.plan, (x, y), GpuShaped(), region.fusion_outputs)
    (out,) = gpu_form.run((x, y))
    assert entered == [1]
    torch.testing.assert_close(out, _pointwise(x, y), **F32_TOL)
    assert gpu_form.run((x, y.double())) is None and entered == [1]


def _gather(x, i):
    return torch.gather(x * 2, 1, i) + 1


@pytest.mark.parametrize("fn, args, at_build", [
    (_pointwise, (torch.randn(4, 8), torch.randn(4, 8)), []),
    # in-kernel index checks: the context once, at build, where the record is made
    (_gather, (torch.randn(4, 6), torch.randint(0, 6, (4, 3))), [1]),
])
def test_the_gpu_form_leaves_the_context_to_native_launches(monkeypatch, fn, args, at_build):
    """Where every launch of the plan is native (lowering/backends/gpu_launcher.py makes the
    context current itself), a call enters no context."""
    _, region = _compiled(fn, *args)
    (call,) = region._tensor_calls
    assert (call.plan.index_records is not None) == bool(at_build)
    entered = []
    GpuShaped = _gpu_shaped_backend(entered)
    for step in call.plan.steps:  # the cpu launches' native launcher, or the Python path standing for one
        if step.launch.native is None:
            monkeypatch.setattr(step.launch, "native", lambda *p, launch=step.launch: launch._python_path(p))
    gpu_form = TensorCall(region._executor, call.plan, args, GpuShaped(), region.fusion_outputs)
    assert entered == at_build
    for _ in range(2):
        (out,) = gpu_form.run(args)
        torch.testing.assert_close(out, fn(*args), **F32_TOL)
    assert entered == at_build
