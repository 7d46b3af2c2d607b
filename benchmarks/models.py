"""`python -m fuser.benchmarks.models [--models gpt2,bert] [--steps 5] [--dtype float32]`: the
model zoo (benchmarks/model_zoo.py) through torch.compile, per model:

- ATen ops fused / total, forward and backward, with views and library calls (matmul,
  convolution, attention, pooling) counted apart from the compute ops;
- regions, kernels per training step, the most regions between two library calls, and the
  compute ops left eager with their reasons;
- compile seconds (the first training step, cold caches): fuser with its regions compiled in
  parallel (FUSER_COMPILE_THREADS=0, one per core) and one after another (=1), and Inductor;
- step ms (median of --steps training steps after the first): eager, fuser, Inductor.

Each (model, backend) runs in a fresh process with empty kernel caches, so compile times are
cold and one backend cannot warm another. CPU tensors: fuser runs its cpu backend (the CUDA
emulation) and Inductor its C++ backend, so step times compare implementations on this CPU,
not GPUs. Results are printed as a markdown table (and --json writes them). Not part of the
tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("eager", "fuser", "fuser_serial", "inductor")


def _child(name: str, mode: str, steps: int, dtype: str) -> dict:
    """One (model, mode) measurement, in this process (run by `main` in a fresh one)."""
    import torch

    from fuser.benchmarks import model_zoo

    case = model_zoo.build(name, getattr(torch, dtype))
    inputs = case.batch(0)
    reports: list = []

    def forward_loss(**inputs):  # the compiled program: the model and its loss (the LM head fuses)
        return case.loss(case.model(**inputs), inputs)

    run = forward_loss
    if mode.startswith("fuser"):
        from fuser.torch_backend import make_backend

        run = torch.compile(forward_loss, backend=make_backend(reports))
    elif mode == "inductor":
        run = torch.compile(forward_loss)

    def step() -> None:
        run(**inputs).backward()
        for p in case.model.parameters():
            p.grad = None

    start = time.perf_counter()
    step()
    first_s = time.perf_counter() - start
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    result = {"model": name, "mode": mode, "first_step_s": first_s, "step_ms": statistics.median(times) * 1e3}
    if reports:
        result["graphs"] = [_graph_summary(r) for r in reports]
    return result


def _graph_summary(report) -> dict:
    from fuser.torch_backend.report import op_kind

    eager = {op: (n, report.reasons.get(op, "")) for op, n in report.eager_ops.items() if op_kind(op) == "compute"}
    return {"kind": report.kind, "counts": report.counts(), "regions": len(report.fusions),
            "refused": len(report.regions) - len(report.fusions), "kernels": report.kernels or 0,
            "between": report.regions_between_library_calls, "eager_compute": eager}


def measure(name: str, mode: str, steps: int, dtype: str, timeout_s: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="fuser-models-") as cache:
        env = {**os.environ, "FUSER_CACHE_DIR": os.path.join(cache, "fuser"),
               "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "inductor"),
               "FUSER_COMPILE_THREADS": "1" if mode == "fuser_serial" else os.environ.get("FUSER_COMPILE_THREADS", "0")}
        code = ("import json, sys; from fuser.benchmarks.models import _child; "
                f"print('RESULT ' + json.dumps(_child({name!r}, {mode!r}, {steps}, {dtype!r})))")
        try:
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"model": name, "mode": mode, "error": f"timed out after {timeout_s:.0f} s"}
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if done.returncode != 0 or line is None:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"model": name, "mode": mode, "error": tail[:300]}
    return json.loads(line[len("RESULT "):])


def _fused(graphs: list[dict], kind: str, which: str) -> tuple[int, int]:
    pairs = [g["counts"][which] for g in graphs if g["kind"] == kind]
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def render(results: dict[str, dict[str, dict]]) -> str:
    head = ("| model | fwd compute fused | bwd compute fused | views fwd/bwd | library fwd/bwd | regions | "
            "kernels / step | max regions between library calls | compile s: fuser ∥ / serial / inductor | "
            "step ms: eager / fuser / inductor |")
    lines = [head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    eager_notes = []
    for name, by_mode in results.items():
        fuser = by_mode.get("fuser", {})
        graphs = fuser.get("graphs", [])
        if "error" in fuser or not graphs:
            lines.append(f"| {name} | fuser failed: {fuser.get('error', 'no graphs')} |" + " |" * 8)
            continue
        f, t = _fused(graphs, "forward", "compute")
        bf, bt = _fused(graphs, "backward", "compute")
        views = f"{_fused(graphs, 'forward', 'view')[1]}/{_fused(graphs, 'backward', 'view')[1]}"
        library = f"{_fused(graphs, 'forward', 'library')[1]}/{_fused(graphs, 'backward', 'library')[1]}"

        def seconds(mode: str) -> str:
            r = by_mode.get(mode, {})
            return "—" if "error" in r or not r else f"{r['first_step_s']:.1f}"

        def ms(mode: str) -> str:
            r = by_mode.get(mode, {})
            return "—" if "error" in r or not r else f"{r['step_ms']:.1f}"

        lines.append(
            f"| {name} | {f}/{t} ({100 * f / max(t, 1):.0f} %) | {bf}/{bt} ({100 * bf / max(bt, 1):.0f} %) | {views} | "
            f"{library} | {sum(g['regions'] for g in graphs)} | {sum(g['kernels'] for g in graphs)} | "
            f"{max(g['between'] for g in graphs)} | {seconds('fuser')} / {seconds('fuser_serial')} / "
            f"{seconds('inductor')} | {ms('eager')} / {ms('fuser')} / {ms('inductor')} |")
        eager = {}
        for g in graphs:
            for op, (n, why) in g["eager_compute"].items():
                eager[op] = (eager.get(op, (0, why))[0] + n, why)
        if eager:
            eager_notes.append(f"- {name}: " + "; ".join(f"{op.replace('aten.', '')} x{n} ({why})"
                                                          for op, (n, why) in sorted(eager.items())))
        for mode, r in by_mode.items():
            if "error" in r:
                eager_notes.append(f"- {name}, {mode}: failed: {r['error']}")
    if eager_notes:
        lines += ["", "Compute ops left eager, and failures:", *eager_notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from fuser.benchmarks import model_zoo

    p = argparse.ArgumentParser(prog="python -m fuser.benchmarks.models", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(model_zoo.MODELS), help="comma-separated model names")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    p.add_argument("--steps", type=int, default=5, help="timed training steps after the first")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per (model, mode) process")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)
    results: dict[str, dict[str, dict]] = {}
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            start = time.perf_counter()
            r = measure(name, mode, args.steps, args.dtype, args.timeout)
            results.setdefault(name, {})[mode] = r
            status = r.get("error") or f"first step {r['first_step_s']:.1f} s, step {r['step_ms']:.1f} ms"
            print(f"[{name} {mode}] {status} ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    print(f"### Models, {args.dtype}, one training step on the CPU ({os.cpu_count()} cores)\n")
    print(render(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
