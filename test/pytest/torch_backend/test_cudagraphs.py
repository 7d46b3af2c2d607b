"""CUDA graphs (fuser/torch_backend/cudagraphs.py): options={"cudagraphs": True} or
mode="reduce-overhead". On the CPU a graph is never captured and its report says why (it runs
fused as without the option); on a GPU (tests marked gpu, skipped here with the reason) replays
equal eager, dropout included, new sizes record again, and an out-of-range index found during a
replay is raised as eager raises it."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from fuser.torch_backend import make_backend
from fuser.torch_backend.explain import explain

from torch_checks import F32_TOL, fresh_dynamo  # noqa: F401


def _softmax_of_scaled(x):
    return torch.softmax(x * 2.0, dim=-1) + 1


def test_on_the_cpu_a_graph_runs_fused_without_capture_and_its_report_says_why():
    reports = []
    compiled = torch.compile(_softmax_of_scaled, backend=make_backend(reports, {"cudagraphs": True}))
    x = torch.randn(8, 32)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), _softmax_of_scaled(x), **F32_TOL)
    (report,) = reports
    assert report.fusions and report.cudagraphs.startswith("not captured: ")
    assert "cpu device" in report.cudagraphs
    assert "CUDA graph: not captured" in str(report)


def test_without_the_option_the_report_has_no_cuda_graph_line():
    reports = []
    torch.compile(_softmax_of_scaled, backend=make_backend(reports))(torch.randn(4, 8))
    assert reports[0].cudagraphs is None and "CUDA graph" not in str(reports[0])


def test_explain_says_whether_each_graph_is_captured():
    text = str(explain(_softmax_of_scaled, torch.randn(4, 8), options={"cudagraphs": True}))
    assert "CUDA graph: not captured" in text


@pytest.mark.parametrize("mode, captured, tuned", [
    ("reduce-overhead", True, False), ("max-autotune", True, True), ("max-autotune-no-cudagraphs", False, True),
    ("default", False, False)])
def test_torch_compile_modes_mean_what_inductors_do(mode, captured, tuned, monkeypatch):
    from fuser.torch_backend import registration

    seen = {}
    real = registration.make_backend
    monkeypatch.setattr(registration, "make_backend", lambda reports=None, options=None: (
        seen.update(options or {}) or real(reports, options)))
    compiled = torch.compile(_softmax_of_scaled, backend="fuser", mode=mode)
    x = torch.randn(4, 8)
    torch.testing.assert_close(compiled(x), _softmax_of_scaled(x), **F32_TOL)
    assert seen.get("cudagraphs", False) is captured and seen.get("autotune", False) is tuned


def test_an_unknown_mode_or_a_wrong_option_is_a_clear_error():
    x = torch.randn(4, 8)
    with pytest.raises(Exception, match="mode 'fastest' is not supported; fuser takes default, reduce-overhead"):
        torch.compile(_softmax_of_scaled, backend="fuser", mode="fastest")(x)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="option 'cudagraphs' takes a bool, got 1"):
        torch.compile(_softmax_of_scaled, backend="fuser", options={"cudagraphs": 1})(x)


# --------------------------------------------------------------------------- on a GPU


def _gpu_ready() -> tuple[bool, str]:
    if not torch.cuda.is_available():
        return False, "torch sees no CUDA device"
    from fuser.lowering.backends.gpu_runtime import gpu_available

    return gpu_available()


def gpu(test):
    ready, why = _gpu_ready()
    return pytest.mark.gpu(pytest.mark.skipif(not ready, reason=f"needs a GPU: {why}")(test))


class _Block(nn.Module):
    def __init__(self, width: int = 64):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.down(F.gelu(self.up(self.norm(x)))))


def _train_steps(model, batches, seed: int):
    """Losses and the parameters after one SGD step per batch, from torch's generator at `seed`."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(seed)
    losses = []
    for x in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().clone())
    return losses, [p.detach().clone() for p in model.parameters()]


@gpu
def test_replays_equal_eager_over_three_training_steps_with_dropout():
    torch.manual_seed(0)
    eager = _Block().cuda()
    compiled = _Block().cuda()
    compiled.load_state_dict(eager.state_dict())
    reports = []
    fast = torch.compile(compiled, backend=make_backend(reports, {"cudagraphs": True}))
    batches = [torch.randn(8, 16, 64, device="cuda") for _ in range(3)]
    want_losses, want_params = _train_steps(eager, batches, seed=7)
    got_losses, got_params = _train_steps(fast, batches, seed=7)
    for got, want in zip(got_losses + got_params, want_losses + want_params):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert {r.kind for r in reports} == {"forward", "backward"}
    assert all(r.cudagraphs.startswith("captured") for r in reports), [r.cudagraphs for r in reports]
    regions = [f.region for r in reports for f in r.fusions]
    calls = [r.stats.calls for r in regions]
    _train_steps(fast, batches, seed=8)  # replays: no region's Python runs
    assert [r.stats.calls for r in regions] == calls


@gpu
def test_new_sizes_record_again_and_every_size_replays_right():
    reports = []
    compiled = torch.compile(_softmax_of_scaled, backend=make_backend(reports, {"cudagraphs": True}), dynamic=False)
    for rows in (8, 8, 8, 16, 16, 16, 8):
        x = torch.randn(rows, 256, device="cuda")
        torch.testing.assert_close(compiled(x).clone(), _softmax_of_scaled(x), **F32_TOL)
    assert len(reports) == 2 and all(r.cudagraphs.startswith("captured") for r in reports)


@gpu
def test_an_out_of_range_index_during_a_replay_is_raised_as_eager_raises_it():
    def fn(x, i):
        return torch.gather(x * 2, 1, i) + 1

    compiled = torch.compile(fn, backend=make_backend(options={"cudagraphs": True}))
    x = torch.randn(64, 100, device="cuda")
    good = torch.randint(0, 100, (64, 8), device="cuda")
    for _ in range(3):  # warm-up, record, replay
        torch.testing.assert_close(compiled(x, good).clone(), fn(x, good), **F32_TOL)
    bad = good.clone()
    bad[5, 3] = 100
    with pytest.raises(RuntimeError, match="out of bounds"):
        compiled(x, bad)  # the replay that meets it
        torch.cuda.synchronize()
        compiled(x, good)  # at the latest, the next call reports it
    torch.cuda.synchronize()
    torch.testing.assert_close(compiled(x, good).clone(), fn(x, good), **F32_TOL)
