"""Smoke test of the benchmark harness (benchmarks/): one case at its smallest shape on the cpu
backend, plus the table rendering. The benchmarks themselves are never part of the test run
(`python -m benchmarks --quick`)."""

from __future__ import annotations

import pytest

from fuser.benchmarks import cases, measure, report
from fuser.lowering.backends.cpu_runtime import cpu_compiler_available


def test_every_case_matches_its_reference_on_the_interpreter():
    # The numpy references and the fusion definitions agree (no compiler involved).
    for kind in cases.KINDS.values():
        dtype = kind.quick[0][0]
        case = cases.Case(kind.name, dtype, kind.tiny)
        inputs = case.inputs()
        ok, err = cases.check(case.build().execute(inputs, backend="reference"), case.reference(inputs))
        assert ok, f"{case.label}: error {err}"


def test_minimum_bytes_and_row_cutting():
    case = cases.Case("softmax", "f32", (8192, 32768))
    assert case.min_bytes() == 2 * 4 * 8192 * 32768
    cut = case.with_rows(64 << 20)
    assert cut[1] == 32768 and case.spec.min_bytes(cut, "f32") <= 64 << 20


@pytest.mark.skipif(not cpu_compiler_available(), reason="no g++ for the CPU backend")
def test_one_case_on_the_cpu_backend(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSER_CACHE_DIR", str(tmp_path))
    case = cases.Case("bcast_chain", "f32", cases.KINDS["bcast_chain"].tiny)
    row = measure.run_case(case, "cpu", exec_reps=1, empty=measure.EmptyKernel("cpu"), host_calls=50)
    assert row["check_ok"], row
    assert row["kernels"] >= 1
    assert row["bytes_ratio"] > 0
    assert "error" not in row["host"], row["host"]
    assert row["host"]["with_empty_kernels_us"] >= row["host"]["host_us"] > 0
    row.update(kind=case.kind, dtype=case.dtype, backend="cpu")
    text = report.table([row], gpu=False)
    assert "bcast_chain" in text and text.count("\n") == 2


@pytest.mark.skipif(not cpu_compiler_available(), reason="no g++ for the CPU backend")
def test_memcheck_overhead_is_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSER_CACHE_DIR", str(tmp_path))
    case = cases.Case("bcast_chain", "f32", cases.KINDS["bcast_chain"].tiny)
    record = measure.memcheck_overhead(case, reps=1)
    assert record["off_ms"] > 0 and record["on_ms"] > 0, record
    assert "bcast_chain f32" in report.memcheck_line([record])


def test_results_go_to_an_untracked_folder_unless_saved(tmp_path, monkeypatch):
    from fuser.benchmarks import cli

    monkeypatch.chdir(tmp_path)
    tracked = report.RESULTS_MD.stat().st_mtime_ns if report.RESULTS_MD.exists() else None
    cli.save_results({"rows": []}, "### a run\n", cli.parse_args(["--quick"]))
    assert (tmp_path / "benchmarks-out" / "results.md").read_text().endswith("### a run\n\n")
    assert (tmp_path / "benchmarks-out" / "results.json").exists()
    assert (report.RESULTS_MD.stat().st_mtime_ns if report.RESULTS_MD.exists() else None) == tracked


REAL_PARAMETERS_M = {"gpt2": 124.4, "llama": 1235.8, "bert": 109.5, "vit": 86.6, "resnet50": 25.6}
"""Parameters (millions) of the GPU table's models (`--size real`): GPT-2 small, Llama 3.2 1B's
shape with a tied 128,256-word head, BERT-base, ViT-B/16, ResNet-50."""


def test_the_real_size_models_have_their_published_sizes():
    """The configurations the GPU run builds, on the meta device (no memory, no GPU): the GPU
    minutes go to timing, not to finding a misspelt config."""
    torch = pytest.importorskip("torch")
    from fuser.benchmarks.model_zoo import REAL_SIZES

    assert set(REAL_SIZES) == set(REAL_PARAMETERS_M)
    for name, real in REAL_SIZES.items():
        with torch.device("meta"):
            model = real.build()
        millions = sum(p.numel() for p in model.parameters()) / 1e6
        assert millions == pytest.approx(REAL_PARAMETERS_M[name], abs=0.1), name
        batch = real.batch("meta")
        assert all(t.device.type == "meta" for t in batch.values())


def _fake_result(name, mode):
    return {"model": name, "mode": mode, "first_step_s": 1.0, "step_ms": 10.0 if mode == "fuser" else 12.0,
            "peak_gib": 1.5, "launches": 7, "graphs": [{"regions": 2, "kernels": 3}] if mode == "fuser" else []}


def test_the_models_table_keeps_what_ran_when_the_run_is_stopped(tmp_path, monkeypatch, capsys):
    """The GPU check gives the models step a fixed time: a SIGTERM at any point leaves the table
    and the JSON of the runs that finished; --budget starts no run after it."""
    import json
    import os
    import signal

    from fuser.benchmarks import models

    calls = []

    def fake_measure(name, mode, steps, dtype, timeout_s, device="cpu", size="tiny"):
        calls.append((name, mode))
        on_disk = json.loads((tmp_path / "m.json").read_text()) if (tmp_path / "m.json").exists() else {}
        assert sum(len(v) for v in on_disk.values()) == len(calls) - 1  # written after every run
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # as `timeout` stops the step
        return _fake_result(name, mode)

    monkeypatch.setattr(models, "measure", fake_measure)
    before = signal.getsignal(signal.SIGTERM)
    assert models.main(["--size", "real", "--models", "gpt2,llama", "--json", str(tmp_path / "m.json")]) == 0
    assert signal.getsignal(signal.SIGTERM) is before
    out = capsys.readouterr()
    assert calls == [("gpt2", "eager"), ("gpt2", "fuser"), ("gpt2", "inductor")]
    assert "stopped by SIGTERM" in out.err
    assert "| gpt2 | 12.0 / 10.0 / — |" in out.out and "llama" not in out.out
    assert set(json.loads((tmp_path / "m.json").read_text())["gpt2"]) == {"eager", "fuser"}

    calls.clear()
    monkeypatch.setattr(models, "measure", lambda name, mode, *a, **k: (calls.append(1), _fake_result(name, mode))[1])
    models.main(["--size", "real", "--models", "gpt2", "--budget", "0"])
    assert calls == [] and "not run: past the 0 s --budget" in capsys.readouterr().out
