"""fuser-opt as a user runs it. `-t cuda` prints one program that a CUDA compiler takes as it is:
every kernel of the lit suites' inputs (test/lowering/cuda-*.mlir, each split) compiled for
sm_90 with NVRTC, and a few whole outputs with `nvcc -cubin`. Pathological input ends in one
line of error and exit status 1."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fuser.lowering.backends import compile as cc

LOWERING = Path(__file__).resolve().parents[2] / "lowering"  # the lit suite test/lowering
SPLITS = [(path.name, i, text) for path in sorted(LOWERING.glob("cuda-*.mlir"))
          for i, text in enumerate(path.read_text().split("// -----"))]


def fuser_opt_cuda(text: str, tmp_path: Path, *options: str) -> str:
    source = tmp_path / "in.mlir"
    source.write_text(text)
    done = subprocess.run([sys.executable, "-m", "fuser.tools.fuser_opt", str(source), "-t", "cuda", *options],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_split_of_the_lit_inputs_compiles_with_nvrtc(tmp_path, monkeypatch):
    """One fuser-opt run per file, with --split-input-file as the lit RUN lines run it (a split's
    program is the same as fuser-opt prints for that split alone; one process per split spent
    most of this test starting Python); each split's program is compiled on its own."""
    try:
        cc.find_compiler("nvrtc")
    except cc.CompilerUnavailable as e:
        pytest.skip(f"nvrtc unavailable: {e}")
    monkeypatch.setenv("FUSER_CACHE_DIR", str(tmp_path / "cache"))
    compiled = 0
    for path in sorted(LOWERING.glob("cuda-*.mlir")):
        done = subprocess.run([sys.executable, "-m", "fuser.tools.fuser_opt", str(path), "--split-input-file",
                               "-t", "cuda"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        programs = re.split(r"^// -----\n", done.stdout, flags=re.M)  # xDSL's separator of split outputs
        splits = [i for name, i, _ in SPLITS if name == path.name]
        assert len(programs) == len(splits), f"{path.name}: {len(programs)} programs for {len(splits)} splits"
        for i, program in zip(splits, programs):
            if "__global__" not in program:
                continue
            assert program.startswith(("// fuser_prelude.cuh", "#define ")), f"{path.name} split {i}: no prelude"
            result = cc.compile_cuda(program, "sm_90", backend="nvrtc")
            assert result.cubin[:4] == b"\x7fELF", f"{path.name} split {i}"
            compiled += 1
    assert compiled >= 10


@pytest.mark.parametrize("name", ["cuda-pointwise.mlir", "cuda-reduction.mlir", "cuda-persistent.mlir"])
def test_nvcc_compiles_the_output_as_it_is(name, tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    text = next(t for n, _, t in SPLITS if n == name)
    (tmp_path / "fusion.cu").write_text(fuser_opt_cuda(text, tmp_path))
    done = subprocess.run([nvcc, "-cubin", "-arch=sm_90", "fusion.cu", "-o", "fusion.cubin"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "fusion.cubin").read_bytes()[:4] == b"\x7fELF"


def test_prelude_false_prints_the_kernels_alone():
    text = next(t for n, _, t in SPLITS if n == "cuda-pointwise.mlir")
    alone = subprocess.run([sys.executable, "-m", "fuser.tools.fuser_opt", "-t", "cuda{prelude=false}"],
                           input=text, capture_output=True, text=True, timeout=120).stdout
    assert alone.startswith("// kernel 0 of @")
    assert "fuser_prelude.cuh" not in alone


@pytest.mark.parametrize("text", [
    "builtin.module {" * 5000 + "}" * 5000,
    "func.func @f() attributes {a = " + "[" * 100_000 + "]" * 100_000 + "} { func.return }",
], ids=["nested-modules", "nested-brackets"])  # short ids: pytest puts the id in PYTEST_CURRENT_TEST,
# and an environment variable over 128 KiB makes every subprocess fail with E2BIG
def test_deeply_nested_input_is_a_one_line_error(text, tmp_path):
    """5,000 nested modules or 100,000 nested `[` ended in a ~1,000-line RecursionError."""
    path = tmp_path / "deep.mlir"
    path.write_text(text)
    done = subprocess.run([sys.executable, "-m", "fuser.tools.fuser_opt", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-1000:]
    assert lines[0].startswith(f"fuser-opt: error: {path}:1:") and "nests too deeply" in lines[0]
