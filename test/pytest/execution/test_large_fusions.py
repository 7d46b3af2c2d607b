"""Fusions as frameworks generate them: thousands of ops. No stage may recurse once per op
(the recursion limit is lowered to 400 frames here while a 3,000-op chain goes through
parsing, the passes, segmentation, emission, the cpu backend and the interpreter), and
chained reductions emit source linear in their number. Stage timings over sizes are a
benchmark (`python -m fuser.benchmarks.scaling`), not a test."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from lowering_checks import check, requires_cpu_backend

SHALLOW_STACK = 400


@pytest.fixture
def shallow_stack():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(SHALLOW_STACK)
    yield
    sys.setrecursionlimit(old)


def _pointwise_chain(n: int) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        v = x
        for i in range(n):
            v = fd.ops.add(fd.ops.mul(v, 0.999), 0.001) if i % 3 else fd.ops.tanh(v)
        fd.add_output(v)
    return fd


def _reduction_chain(n: int) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        v = x
        for _ in range(n):
            v = fd.ops.sub(fd.ops.mul(v, 1.01), fd.ops.max(v, [1], keepdim=True))
        fd.add_output(v)
        fd.add_output(fd.ops.sum(v, [1]))
    return fd


@requires_cpu_backend
def test_a_long_pointwise_chain_runs_without_deep_recursion(shallow_stack):
    fd = _pointwise_chain(1500)  # 2,500 tensor ops
    data = np.random.default_rng(0).standard_normal((5, 64), dtype=np.float32)
    (kernel,) = check(fd, [data], tol=(1e-4, 1e-5))
    # A compute-bound cone is not vectorised: vector lanes would copy it VEC times.
    body = kernel.source[kernel.source.index("// scheduler:"):]
    assert "fuser_ld_vec" not in body


@requires_cpu_backend
def test_a_long_chain_of_dependent_reductions_is_one_kernel(shallow_stack):
    fd = _reduction_chain(40)
    data = np.random.default_rng(1).standard_normal((6, 300), dtype=np.float32)
    kernels = check(fd, [data], tol=(1e-3, 1e-3))
    assert len(kernels) == 1


def test_fuser_opt_segments_a_long_chain(tmp_path):
    """The driver, in a fresh process with the default recursion limit, on 10,000 ops."""
    t = "!fuser.tensor<?x?xf32>"
    lines = ["builtin.module {", f"  func.func @chain(%0: {t}) -> {t} {{", "    %c = arith.constant 0.5 : f64"]
    for i in range(1, 10001):
        op = f"fuser.unary neg %{i - 1} : {t} -> {t}" if i % 2 else f"fuser.binary mul %{i - 1}, %c : ({t}, f64) -> {t}"
        lines.append(f"    %{i} = {op}")
    lines += [f"    func.return %10000 : {t}", "  }", "}"]
    path = tmp_path / "chain.mlir"
    path.write_text("\n".join(lines))
    out = subprocess.run(["fuser-opt", str(path), "-p", "fuser-preseg,segment"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count('scheduler = "pointwise"') == 1
