"""Autotuning (lowering/execution/autotune.py) on the cpu backend: the mechanism, not the times
(the emulation's wall time says nothing of a GPU's): which candidates are tried, that values
never change, that a choice is stored and reused (in another process too) without timing, keyed
by the GPU, and that a candidate that cannot run is skipped with one log line."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from fuser.lowering import settings
from fuser.lowering.execution import autotune
from fuser.lowering.schedulers.rows import RowSchedule
from lowering_checks import requires_cpu_backend, softmax_expected as _expected, softmax_fusion as softmax

pytestmark = requires_cpu_backend


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "BUDGET_S", 10.0)  # every candidate, whatever the machine's load
    return tmp_path


def _entries(cache) -> list:
    return sorted((cache / "autotune").glob("*.json"))


def test_tuning_tries_candidates_keeps_values_and_says_what_it_found(cache):
    x = np.random.default_rng(0).standard_normal((64, 4096)).astype(np.float32)
    fd = softmax()
    (y,) = fd.execute([x], backend="cpu", autotune=True)
    np.testing.assert_allclose(y, _expected(x), rtol=1e-5, atol=1e-6)
    (record,) = fd.last_kernels()
    tuning = record.tuning
    assert tuning is not None and not tuning.from_cache
    assert tuning.candidates == autotune.MAX_CANDIDATES
    assert tuning.heuristic.startswith("block per row") or "rows of" in tuning.heuristic
    assert tuning.chosen == record.schedule.describe()  # what ran is what tuning chose
    assert tuning.speedup is not None and tuning.speedup >= 1.0
    assert len(_entries(cache)) == 1
    # A later call of the same shapes runs the choice, tuning nothing more.
    (again,) = fd.execute([x], backend="cpu", autotune=True)
    np.testing.assert_array_equal(again, y)


def test_without_autotune_nothing_is_tuned(cache):
    fd = softmax()
    fd.execute([np.ones((4, 256), np.float32)], backend="cpu")
    assert fd.last_kernels()[0].tuning is None and not (cache / "autotune").exists()


def test_a_stored_choice_is_reused_without_timing(cache, monkeypatch):
    x = np.random.default_rng(1).standard_normal((32, 2048)).astype(np.float32)
    first = softmax()
    first.execute([x], backend="cpu", autotune=True)
    chosen = first.last_kernels()[0].schedule

    def no_timing(*args, **kwargs):
        raise AssertionError("a stored choice must not be timed again")

    monkeypatch.setattr(autotune.Autotuner, "_measure", no_timing)
    second = softmax()  # another definition of the same fusion: a fresh executor, the disk entry
    (y,) = second.execute([x], backend="cpu", autotune=True)
    np.testing.assert_allclose(y, _expected(x), rtol=1e-5, atol=1e-6)
    record = second.last_kernels()[0]
    assert record.tuning.from_cache and record.schedule == chosen


def test_a_stored_choice_is_reused_by_another_process(cache):
    x = np.random.default_rng(2).standard_normal((16, 1024)).astype(np.float32)
    softmax().execute([x], backend="cpu", autotune=True)
    script = textwrap.dedent("""
        import sys
        import numpy as np
        sys.path.insert(0, sys.argv[1])
        from lowering_checks import softmax_fusion as softmax
        from fuser.lowering.execution import autotune
        def no_timing(*args, **kwargs):
            raise SystemExit("timed again")
        autotune.Autotuner._measure = no_timing
        fd = softmax()
        fd.execute([np.random.default_rng(2).standard_normal((16, 1024)).astype(np.float32)], backend="cpu",
                   autotune=True)
        print("from cache:", fd.last_kernels()[0].tuning.from_cache)
        """)
    helpers = os.path.dirname(os.path.dirname(__file__))  # test/pytest: lowering_checks
    done = subprocess.run([sys.executable, "-c", script, helpers], capture_output=True, text=True,
                          env=dict(os.environ), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "from cache: True" in done.stdout


def test_the_choice_is_keyed_by_the_gpu(cache, monkeypatch):
    x = np.ones((8, 512), np.float32)
    softmax().execute([x], backend="cpu", autotune=True)
    monkeypatch.setenv("FUSER_GPU_PROFILE", "h200")  # the cpu backend now schedules for an H200
    softmax().execute([x], backend="cpu", autotune=True)
    assert len(_entries(cache)) == 2
    devices = {json.loads(p.read_text())["kernels"]["0"]["schedule"]["type"] for p in _entries(cache)}
    assert devices == {"RowSchedule"}


def test_a_candidate_that_cannot_run_is_skipped_with_one_log_line(cache, monkeypatch, caplog):
    from fuser.lowering.schedulers.rows import RowScheduler

    def unfit(self, plan, schedule, extents, arrays, device):
        # A persistent row far too short for these rows: check_schedule refuses it.
        return [RowSchedule(128, True, iters=1, vec=4)]

    monkeypatch.setattr(RowScheduler, "alternatives", unfit)
    x = np.random.default_rng(3).standard_normal((8, 4096)).astype(np.float32)
    fd = softmax()
    with caplog.at_level(logging.INFO, logger="fuser.autotune"):
        (y,) = fd.execute([x], backend="cpu", autotune=True)
    np.testing.assert_allclose(y, _expected(x), rtol=1e-5, atol=1e-6)
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 1 and "ValueError" in skipped[0] and "a persistent row holds" in skipped[0]
    assert fd.last_kernels()[0].tuning.chosen == fd.last_kernels()[0].tuning.heuristic


def test_random_fusions_are_not_tuned(cache):
    def uniform():
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
            fd.add_output(fd.ops.add(x, fd.ops.uniform(0.0, 1.0, shape=fd.ops.shape(x), dtype=DataType.Float)))
        return fd

    x = np.zeros(1000, np.float32)
    tuned, plain = uniform(), uniform()
    assert tuned.execute([x], backend="cpu", autotune=True)[0].shape == (1000,)
    assert tuned.last_kernels()[0].tuning is None  # each launch would advance the generator
    assert not (cache / "autotune").exists()
    plain.execute([x], backend="cpu")


def test_the_setting_turns_it_on(cache, monkeypatch):
    monkeypatch.setenv("FUSER_AUTOTUNE", "1")
    settings.reload()
    try:
        fd = softmax()
        fd.execute([np.ones((4, 1024), np.float32)], backend="cpu")
        assert fd.last_kernels()[0].tuning is not None
        fd2 = softmax()
        fd2.execute([np.ones((4, 1024), np.float32)], backend="cpu", autotune=False)  # the argument wins
        assert fd2.last_kernels()[0].tuning is None
    finally:
        monkeypatch.delenv("FUSER_AUTOTUNE")
        settings.reload()
    monkeypatch.setenv("FUSER_AUTOTUNE", "yes")
    with pytest.raises(settings.SettingError, match="FUSER_AUTOTUNE='yes': expected 0, 1 or sass"):
        settings.reload()
    monkeypatch.delenv("FUSER_AUTOTUNE")
    settings.reload()


def test_torch_compile_takes_the_autotune_option(cache):
    import torch

    def fn(x):
        return torch.softmax(x * 2.0, dim=-1)

    x = torch.randn(16, 1024)
    compiled = torch.compile(fn, backend="fuser", options={"autotune": True})
    torch.testing.assert_close(compiled(x), fn(x))
    assert _entries(cache)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown option 'autotuning'"):
        torch.compile(fn, backend="fuser", options={"autotuning": True})(x)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="option 'autotune': autotune='yes': expected True, False, 'time'"):
        torch.compile(fn, backend="fuser", options={"autotune": "yes"})(x)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="option 'autotune' takes a bool or str, got 2"):
        torch.compile(fn, backend="fuser", options={"autotune": 2})(x)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="mode 'fastest' is not supported"):
        torch.compile(fn, backend="fuser", mode="fastest")(x)
    torch._dynamo.reset()


def test_explain_says_what_tuning_found(cache, capsys):
    import torch

    from fuser.torch_backend.explain import explain

    def fn(x):
        return torch.softmax(x * 2.0, dim=-1)

    record = explain(fn, torch.randn(16, 1024), options={"autotune": True}, quiet=True)
    (region,) = record.graphs[0].fusions
    assert region.tuned and region.tuned[0].startswith("kernel 0: ")
    assert "candidate(s) timed" in region.tuned[0]
    assert "autotune: kernel 0: " in str(record)
    torch._dynamo.reset()


def _gpu_ready() -> tuple[bool, str]:
    from fuser.lowering.backends import gpu_runtime

    return gpu_runtime.gpu_available()


def _sass_missing() -> str:
    return autotune._sass_tools_missing()


@pytest.mark.skipif(bool(_sass_missing()), reason=f"autotune='sass' needs {_sass_missing() or 'its tools'}")
def test_sass_mode_ranks_by_the_model_on_the_sass_keeps_values_and_stores_it(cache, monkeypatch):
    """No GPU: each candidate compiled for the profile's GPU, predicted from its SASS, the
    fastest prediction kept; it runs once on the inputs (values checked); the choice is stored
    under its own key (a timed entry is another) and reused without ranking again."""
    monkeypatch.setenv("FUSER_GPU_PROFILE", "h100")
    x = np.random.default_rng(3).standard_normal((256, 4096)).astype(np.float32)
    fd = softmax()
    (y,) = fd.execute([x], backend="cpu", autotune="sass")
    np.testing.assert_allclose(y, _expected(x), rtol=1e-5, atol=1e-6)
    (record,) = fd.last_kernels()
    tuning = record.tuning
    assert tuning.by == "sass" and tuning.candidates >= 1 and not tuning.from_cache
    assert tuning.chosen == record.schedule.describe()
    assert tuning.chosen_s <= tuning.heuristic_s
    assert tuning.chosen_s == pytest.approx(record.performance("h100").predicted_s)  # the model's figure
    assert record.performance("h100").in_flight_from == "sass"
    assert len(_entries(cache)) == 1

    def no_ranking(*args, **kwargs):
        raise AssertionError("a stored choice must not be ranked again")

    monkeypatch.setattr(autotune.Autotuner, "_measure", no_ranking)
    again = softmax()
    again.execute([x], backend="cpu", autotune="sass")
    assert again.last_kernels()[0].tuning.from_cache and again.last_kernels()[0].schedule == record.schedule


def test_sass_mode_without_its_tools_says_so(cache, monkeypatch):
    monkeypatch.setattr(autotune, "_sass_tools_missing", lambda: "nvdisasm (the nvrtc extra's nvidia-cuda-nvdisasm)")
    fd = softmax()
    (y,) = fd.execute([np.ones((4, 1024), np.float32)], backend="cpu", autotune="sass")
    assert fd.last_kernels()[0].tuning is None and not (cache / "autotune").exists()


def test_an_unknown_autotune_value_is_refused():
    with pytest.raises(ValueError, match="autotune='fast': expected True, False, 'time'"):
        softmax().execute([np.ones((4, 256), np.float32)], backend="cpu", autotune="fast")


def test_the_setting_takes_sass(cache, monkeypatch):
    monkeypatch.setenv("FUSER_AUTOTUNE", "sass")
    settings.reload()
    try:
        assert settings.launch_settings().autotune == "sass"
    finally:
        monkeypatch.delenv("FUSER_AUTOTUNE")
        settings.reload()


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_ready()[0], reason=f"needs a GPU: {_gpu_ready()[1]}")
def test_on_a_gpu_the_tuned_schedule_is_at_least_as_fast_as_the_heuristics(cache):
    """Measured again after tuning, interleaved: the tuned softmax against the heuristic's
    schedule forced, medians of CUDA-event times (5 % for the noise of one GPU's clocks)."""
    from fuser.lowering.backends.gpu_runtime import time_kernel

    x = np.random.default_rng(4).standard_normal((8192, 4096)).astype(np.float32)
    tuned = softmax()
    tuned.execute([x], backend="cuda", autotune=True)
    found = tuned.last_kernels()[0].tuning
    assert found is not None
    plain = softmax()
    plain.execute([x], backend="cuda")
    heuristic = plain.last_kernels()[0].schedule
    plain.override_schedule(0, heuristic)
    tuned_ms, plain_ms = [], []
    for _ in range(5):
        tuned_ms += time_kernel(lambda: tuned.execute([x], backend="cuda", autotune=True), warmup=2, iters=10)
        plain_ms += time_kernel(lambda: plain.execute([x], backend="cuda"), warmup=2, iters=10)
    assert np.median(tuned_ms) <= 1.05 * np.median(plain_ms), (found, np.median(tuned_ms), np.median(plain_ms))
