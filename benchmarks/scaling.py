"""`python -m fuser.benchmarks.scaling`: how each compile stage grows with the fusion's size.

Generated fusions of n ops — a pointwise chain, and a chain of dependent row reductions
(t = t - max(t), the worst case for row kernels) — go through every stage; per stage the
seconds at each n and the exponent k of the least-squares fit t ~ n^k over the sizes (goal:
k <= 1.1, i.e. no quadratic stage). Stages: define (the builder), print + parse (MLIR text
round trip, what fuser-opt does), passes (concretize + fuser-preseg), segment, emission (CUDA C
of every kernel), reference (the numpy interpreter on a tiny input). The host C++ compile of
the cpu backend is g++'s, not ours: `--compile` adds it for information.

`--paths N` times the two ways an N-op fusion arrives, stage by stage (best of two runs), for a
pointwise chain and a mixed chain (casts, broadcasts, a row reduction every 300 ops): fuser-opt
(parse, verify after the parse and after each pass, fuser-preseg, segment, print) and the
Python API (define, fuser-preseg, segment), as docs/benchmarks.md quotes them for N = 20,000.

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


def mixed_chain(n: int) -> FusionDefinition:
    """Casts that fold (f32 -> f16 -> f32), a broadcast bias, pointwise ops, and every 300 ops a
    row reduction: what the pre-segmentation passes and the segmenter have work on."""
    with FusionDefinition("mixed") as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        bias = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        v, count = x, 0
        while count < n:
            v = fd.ops.cast(fd.ops.cast(fd.ops.mul(v, 0.5), DataType.Half), DataType.Float)
            v = fd.ops.neg(fd.ops.add(v, fd.ops.broadcast_in_dim(bias, shape=fd.ops.shape(v), broadcast_dims=[1])))
            count += 6
            if count % 300 == 0:
                v = fd.ops.sub(v, fd.ops.max(v, [1], keepdim=True))
                count += 2
        fd.add_output(v)
    return fd


def arrival_paths(build: Callable[[int], FusionDefinition], n: int) -> dict[str, float]:
    """Seconds per stage of the two ways an n-op fusion arrives: fuser-opt's (text) and the
    Python API's (builder)."""
    import io

    from xdsl.parser import Parser
    from xdsl.printer import Printer

    from fuser.passes.registry import get_pass
    from fuser_dialect.fusion import make_context

    times: dict[str, float] = {}

    def stage(name: str, fn: Callable):
        start = time.perf_counter()
        result = fn()
        times[name] = times.get(name, 0.0) + time.perf_counter() - start
        return result

    text = str(build(n))
    ctx = make_context()
    module = stage("fuser-opt: parse", lambda: Parser(ctx, text).parse_module())
    for name in ("fuser-preseg", "segment"):
        stage("fuser-opt: verify (x3)", module.verify)
        stage(f"fuser-opt: {name}", lambda: get_pass(name)().apply(ctx, module))
    stage("fuser-opt: verify (x3)", module.verify)
    stage("fuser-opt: print", lambda: Printer(stream=io.StringIO()).print_op(module))
    fd = stage("API: define (verifies once)", lambda: build(n))
    built = fd.module.clone()
    stage("API: fuser-preseg", lambda: get_pass("fuser-preseg")().apply(ctx, built))
    stage("API: segment", lambda: get_pass("segment")().apply(ctx, built))
    return times


def paths_report(n: int) -> list[str]:
    lines = [f"### {n} ops: fuser-opt and the Python API, seconds (best of 2)", "",
             "| stage | pointwise chain | mixed chain |", "|---|---|---|"]
    columns = []
    for build in (pointwise_chain, mixed_chain):
        runs = [arrival_paths(build, n) for _ in range(2)]
        columns.append({stage: min(r[stage] for r in runs) for stage in runs[0]})
    for stage in columns[0]:
        lines.append(f"| {stage} | " + " | ".join(f"{c[stage]:.2f}" for c in columns) + " |")
    for path in ("fuser-opt", "API"):
        totals = [sum(v for k, v in c.items() if k.startswith(path + ":")) for c in columns]
        lines.append(f"| **{path}, all stages** | " + " | ".join(f"**{t:.2f}**" for t in totals) + " |")
    return lines + [""]


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
    p.add_argument("--paths", type=int, metavar="N", help="only the stages of fuser-opt and the Python API at N ops")
    args = p.parse_args(argv)
    if args.paths is not None:
        if args.paths < 1:
            p.error("--paths takes a number of ops >= 1")
        print("\n".join(paths_report(args.paths)))
        return 0
    pointwise = POINTWISE_SIZES[:-1] if args.quick else POINTWISE_SIZES
    reductions = REDUCTION_SIZES[:-1] if args.quick else REDUCTION_SIZES
    sys.setrecursionlimit(1000)  # the default: nothing may depend on deep recursion
    lines = run("pointwise chain (n ops)", pointwise_chain, pointwise, args.compile)
    lines += run("dependent row reductions (n ops, n/2 reductions)", reduction_chain, reductions, args.compile)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
