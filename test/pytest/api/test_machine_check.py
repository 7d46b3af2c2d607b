"""`python -m fuser.check` (fuser/check.py) and the suite's FUSER_TEST_BACKENDS switch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fuser import check
from fuser.lowering.backends import CPU, CUDA

pytestmark = pytest.mark.skipif(not CPU.available()[0], reason=CPU.available()[1] or "no cpu backend")


def test_check_passes_here_and_names_why_cuda_is_unusable(capsys):
    assert check.main(["--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    for case in check.CASES:
        assert f"ok   {case.name}" in out
    assert "nvrtc" in out and "nvcc" in out and "c++ (cpu backend)" in out and "gpu launcher" in out
    ok, why = CUDA.available()
    assert ("cuda       usable" in out) if ok else (f"cuda       UNUSABLE: {why}" in out)
    assert out.strip().splitlines()[-1].startswith(f"fuser.check: {len(check.CASES)} of {len(check.CASES)} checks passed")


def test_check_fails_when_a_fusion_is_wrong(monkeypatch, capsys):
    def wrong(outputs, expected):
        return 1.0  # as if every output were off by its whole magnitude

    monkeypatch.setattr(check, "worst_error", wrong)
    assert check.main(["--backend", "cpu", "--quiet"]) == 1
    assert f"0 of {len(check.CASES)} checks passed" in capsys.readouterr().out


def test_check_fails_when_a_fusion_raises(monkeypatch, capsys):
    def broken(case, backend, timer=None):
        raise RuntimeError("boom")

    monkeypatch.setattr(check, "run_case", broken)
    assert check.main(["--backend", "cpu"]) == 1
    out = capsys.readouterr().out
    assert "FAIL softmax            RuntimeError: boom" in out
    assert f"0 of {len(check.CASES)} checks passed" in out


@pytest.mark.parametrize("value, message", [("bogus", "unknown backend 'bogus'"),
                                            (",", "FUSER_TEST_BACKENDS=',' names no backend"),
                                            *([] if CUDA.available()[0] else [("cuda", "not usable here")])])
def test_an_unknown_or_unusable_test_backend_stops_the_session(value, message):
    suite = os.path.dirname(os.path.dirname(__file__))  # test/pytest
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                           os.path.join(suite, "execution", "test_streams.py")],
                          capture_output=True, text=True, env={**os.environ, "FUSER_TEST_BACKENDS": value}, timeout=120)
    assert done.returncode != 0
    assert message in done.stdout + done.stderr
