"""`python -m fuser.benchmarks.scaling`: how each compile stage grows with the fusion's size.

Generated fusions of n ops — a pointwise chain, and a chain of dependent row reductions
(t = t - max(t), the worst case for row kernels) — go through every stage; per stage the
seconds at each n and the exponent k of the least-squares fit t ~ n^k over the sizes (goal:
k <= 1.1, i.e. no quadratic stage). Stages: define (the builder), print + parse (MLIR text
round trip, what fuser-opt does), passes (concretize + fuser-preseg), segment, emission (CUDA C
of every kernel), reference (the numpy interpreter on a tiny input). The host C++ compile of
the cpu backend is g++'s, not ours: `--compile` adds it for information.

Never part of the test run.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable

import numpy as np

from fuser import DataType, FusionDefinition

POINTWISE_SIZES = (100, 300, 1000, 3000, 10000)
REDUCTION_SIZES = (10, 30, 100, 300, 1000)
ROWS, ROW_LENGTH = 4, 256


def pointwise_chain(n: int) -> FusionDefinition:
    with FusionDefinition("chain") as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        v = x
        for i in range(n):
            v = fd.ops.neg(v) if i % 2 else fd.ops.mul(v, 0.5)
        fd.add_output(v)
    return fd


def reduction_chain(n: int) -> FusionDefinition:
    with FusionDefinition("reductions") as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        v = x
        for _ in range(n // 2):
            v = fd.ops.sub(v, fd.ops.max(v, [1], keepdim=True))
        fd.add_output(v)
    return fd


def _stages(build: Callable[[int], FusionDefinition], n: int, compile_too: bool) -> dict[str, float]:
    from xdsl.parser import Parser

    from fuser.lowering.backends import get_backend
    from fuser.lowering.execution.compiled import build_compiled_fusion
    from fuser.lowering.codegen.render import render
    from fuser_dialect.fusion import make_context

    times: dict[str, float] = {}
    start = time.perf_counter()
    fd = build(n)
    times["define"] = time.perf_counter() - start

    start = time.perf_counter()
    Parser(make_context(), str(fd)).parse_module()
    times["print + parse"] = time.perf_counter() - start

    data = np.random.default_rng(0).standard_normal((ROWS, ROW_LENGTH), dtype=np.float32)
    compiled = build_compiled_fusion(fd.module, [data.shape], [None], get_backend("cpu"), True)
    times["passes"] = compiled.timings["passes_s"]
    times["segment"] = compiled.timings["segment_s"]

    extents = compiled.extent_plan.evaluate([data.shape], [None])
    schedules = compiled.schedules(extents, [data])
    start = time.perf_counter()
    kernels = [render(p, s) for p, s in zip(compiled.plans, schedules)]
    times["emission"] = time.perf_counter() - start
    times["source bytes"] = float(sum(len(k.source) for k in kernels))

    start = time.perf_counter()
    fd.execute([data], backend="reference")
    times["reference"] = time.perf_counter() - start
    if compile_too:
        start = time.perf_counter()
        fd.execute([data], backend="cpu")
        times["execute cpu (g++)"] = time.perf_counter() - start
    return times


def fitted_exponent(sizes, seconds) -> float:
    """k of the least-squares line log t = k log n + c (the sizes where t is measurable)."""
    points = [(math.log(n), math.log(t)) for n, t in zip(sizes, seconds) if t > 1e-5]
    if len(points) < 2:
        return float("nan")
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def _best_of(repeats: int, build, n: int, compile_too: bool) -> dict[str, float]:
    """Per stage the fastest of `repeats` runs (a shared machine's pauses are not the stage's)."""
    runs = [_stages(build, n, compile_too) for _ in range(repeats)]
    return {stage: min(r[stage] for r in runs) for stage in runs[0]}


def run(name: str, build, sizes, compile_too: bool) -> list[str]:
    rows = {n: _best_of(2, build, n, compile_too) for n in sizes}
    stages = list(next(iter(rows.values())))
    lines = [f"### {name}", "", "| stage | " + " | ".join(f"n={n}" for n in sizes) + " | exponent |",
             "|---|" + "---|" * (len(sizes) + 1)]
    for stage in stages:
        values = [rows[n][stage] for n in sizes]
        cells = [f"{v:.0f}" if stage == "source bytes" else f"{v * 1e3:.1f} ms" for v in values]
        lines.append(f"| {stage} | " + " | ".join(cells) + f" | {fitted_exponent(sizes, values):.2f} |")
    return lines + [""]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m fuser.benchmarks.scaling", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smaller sizes (up to 3000 / 300 ops)")
    p.add_argument("--compile", action="store_true", help="also run the cpu backend (g++ compile included)")
    args = p.parse_args(argv)
    pointwise = POINTWISE_SIZES[:-1] if args.quick else POINTWISE_SIZES
    reductions = REDUCTION_SIZES[:-1] if args.quick else REDUCTION_SIZES
    sys.setrecursionlimit(1000)  # the default: nothing may depend on deep recursion
    lines = run("pointwise chain (n ops)", pointwise_chain, pointwise, args.compile)
    lines += run("dependent row reductions (n ops, n/2 reductions)", reduction_chain, reductions, args.compile)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
