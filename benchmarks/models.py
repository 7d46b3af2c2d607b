"""`python -m fuser.benchmarks.models [--models gpt2,bert] [--steps 5] [--dtype float32]
[--size tiny|real] [--device cpu|cuda]`: the model zoo (benchmarks/model_zoo.py) through
torch.compile, per model:

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

`--size real --device cuda` (the GPU run: `--models gpt2,llama --dtype bfloat16` is what the GPU
check runs): GPT-2 small at 8x1024 tokens, a 1B Llama at 4x2048, BERT-base, ViT-B/16 and
ResNet-50 at batch 64, random weights, one AdamW training step (bf16 through autocast), against
eager and Inductor (`inductor_max_autotune` on request): step ms (CUDA events, median of 20
after two untimed steps), first-step seconds (compiles), peak memory
(torch.cuda.max_memory_allocated over the timed steps), fuser's regions and kernels, and the
CUDA kernels each mode launches per step (torch's profiler).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("eager", "fuser", "fuser_serial", "inductor", "inductor_max_autotune")
DEFAULT_MODES = {"tiny": ("eager", "fuser", "fuser_serial", "inductor"), "real": ("eager", "fuser", "inductor")}


def _child(name: str, mode: str, steps: int, dtype: str, device: str = "cpu", size: str = "tiny") -> dict:
    """One (model, mode) measurement, in this process (run by `main` in a fresh one).

    tiny: the model in `dtype`, forward + backward per step. real: the model in f32, bf16 through
    autocast when dtype is bfloat16, and an AdamW step (forward, backward, optimizer), as a
    training loop runs it."""
    import contextlib

    import torch

    from fuser.benchmarks import model_zoo

    real = size == "real"
    case = model_zoo.build_real(name, device) if real else model_zoo.build(name, getattr(torch, dtype), device)
    inputs = case.batch(0)
    reports: list = []
    autocast = torch.autocast(device, dtype=torch.bfloat16) if real and dtype == "bfloat16" else \
        contextlib.nullcontext()

    def forward_loss(**inputs):  # the compiled program: the model and its loss (the LM head fuses)
        return case.loss(case.model(**inputs), inputs)

    run = forward_loss
    if mode.startswith("fuser"):
        from fuser.torch_backend import make_backend

        run = torch.compile(forward_loss, backend=make_backend(reports))
    elif mode == "inductor":
        run = torch.compile(forward_loss)
    elif mode == "inductor_max_autotune":
        run = torch.compile(forward_loss, mode="max-autotune-no-cudagraphs")
    optimizer = torch.optim.AdamW(case.model.parameters(), lr=1e-5) if real else None

    def step() -> None:
        with autocast:
            loss = run(**inputs)
        loss.backward()
        if optimizer is not None:
            optimizer.step()
        for p in case.model.parameters():
            p.grad = None

    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    start = time.perf_counter()
    step()
    sync()
    first_s = time.perf_counter() - start
    step()  # the optimizer's state exists from here on
    sync()
    times = []
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    for _ in range(steps):
        if cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            step()
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) / 1e3)
        else:
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
    result = {"model": name, "mode": mode, "size": size, "device": device, "first_step_s": first_s,
              "step_ms": statistics.median(times) * 1e3}
    if cuda:
        result["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        result["launches"] = _launches_per_step(step)
    if reports:
        result["graphs"] = [_graph_summary(r) for r in reports]
    return result


def _launches_per_step(step) -> int | None:
    """CUDA kernels launched by one step (torch's profiler), or None where it cannot count them."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    except Exception:
        return None


def _graph_summary(report) -> dict:
    from fuser.torch_backend.report import op_kind

    eager = {op: (n, report.reasons.get(op, "")) for op, n in report.eager_ops.items() if op_kind(op) == "compute"}
    return {"kind": report.kind, "counts": report.counts(), "regions": len(report.fusions),
            "refused": len(report.regions) - len(report.fusions), "kernels": report.kernels or 0,
            "between": report.regions_between_library_calls, "eager_compute": eager}


def measure(name: str, mode: str, steps: int, dtype: str, timeout_s: float, device: str = "cpu",
            size: str = "tiny") -> dict:
    with tempfile.TemporaryDirectory(prefix="fuser-models-") as cache:
        env = {**os.environ, "FUSER_CACHE_DIR": os.path.join(cache, "fuser"),
               "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "inductor"),
               "FUSER_COMPILE_THREADS": "1" if mode == "fuser_serial" else os.environ.get("FUSER_COMPILE_THREADS", "0")}
        code = ("import json, sys; from fuser.benchmarks.models import _child; "
                f"print('RESULT ' + json.dumps(_child({name!r}, {mode!r}, {steps}, {dtype!r}, {device!r}, {size!r})))")
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
        if "fuser" not in by_mode:
            lines.append(f"| {name} | fuser not run |" + " |" * 8)
            continue
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


def render_real(results: dict[str, dict[str, dict]]) -> str:
    """The real-size table: step time (median, CUDA events on a GPU), fuser against Inductor,
    first-step (compile) seconds, peak memory, and per step fuser's regions and kernels and the
    CUDA launches of every mode."""
    head = ("| model | step ms: eager / fuser / inductor | fuser ÷ inductor | first step s: fuser / inductor | "
            "peak GiB: eager / fuser / inductor | fuser regions / kernels | launches: eager / fuser / inductor |")
    lines = [head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    failures = []

    def cell(by_mode, mode, key, fmt):
        r = by_mode.get(mode, {})
        return "—" if "error" in r or r.get(key) is None else format(r[key], fmt)

    for name, by_mode in results.items():
        fuser, inductor = by_mode.get("fuser", {}), by_mode.get("inductor", {})
        ratio = f"{fuser['step_ms'] / inductor['step_ms']:.2f}" if "step_ms" in fuser and "step_ms" in inductor else "—"
        graphs = fuser.get("graphs", [])
        lines.append(
            f"| {name} | {cell(by_mode, 'eager', 'step_ms', '.1f')} / {cell(by_mode, 'fuser', 'step_ms', '.1f')} / "
            f"{cell(by_mode, 'inductor', 'step_ms', '.1f')} | {ratio} | {cell(by_mode, 'fuser', 'first_step_s', '.1f')} / "
            f"{cell(by_mode, 'inductor', 'first_step_s', '.1f')} | {cell(by_mode, 'eager', 'peak_gib', '.2f')} / "
            f"{cell(by_mode, 'fuser', 'peak_gib', '.2f')} / {cell(by_mode, 'inductor', 'peak_gib', '.2f')} | "
            f"{sum(g['regions'] for g in graphs)} / {sum(g['kernels'] for g in graphs)} | "
            f"{cell(by_mode, 'eager', 'launches', 'd')} / {cell(by_mode, 'fuser', 'launches', 'd')} / "
            f"{cell(by_mode, 'inductor', 'launches', 'd')} |")
        failures += [f"- {name}, {mode}: failed: {r['error']}" for mode, r in by_mode.items() if "error" in r]
    return "\n".join(lines + (["", *failures] if failures else []))


def _gpu_name() -> str:
    try:
        import torch

        return torch.cuda.get_device_name(0)
    except Exception:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    from fuser.benchmarks import model_zoo

    p = argparse.ArgumentParser(prog="python -m fuser.benchmarks.models", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", help="comma-separated model names (default: all of the size)")
    p.add_argument("--modes", help=f"comma-separated, of {', '.join(MODES)} (default: "
                                   f"{', '.join(DEFAULT_MODES['tiny'])}; real: {', '.join(DEFAULT_MODES['real'])})")
    p.add_argument("--size", default="tiny", choices=["tiny", "real"],
                   help="tiny: the test configs (CPU table); real: GPT-2 small, a 1B Llama, BERT-base, ViT-B/16, "
                        "ResNet-50 with random weights, an AdamW step, bf16 through autocast")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--steps", type=int, help="timed training steps after two untimed ones (default 5; real: 20)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per (model, mode) process")
    p.add_argument("--json", help="also write the results to this file (rewritten after every run)")
    p.add_argument("--budget", type=float, help="seconds: no (model, mode) run starts after them, and none "
                                                "runs past them (default: no limit; a SIGTERM also stops the "
                                                "runs and prints the table of those that finished)")
    args = p.parse_args(argv)
    known = model_zoo.REAL_SIZES if args.size == "real" else model_zoo.MODELS
    names = [m.strip() for m in (args.models or ",".join(known)).split(",") if m.strip()]
    modes = [m.strip() for m in (args.modes or ",".join(DEFAULT_MODES[args.size])).split(",") if m.strip()]
    for what, given, allowed in (("model", names, known), ("mode", modes, MODES)):
        unknown = [g for g in given if g not in allowed]
        if unknown:
            p.error(f"unknown {what} {unknown[0]!r} for --size {args.size}; known: {', '.join(allowed)}")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            p.error(f"--device cuda: torch {torch.__version__} sees no GPU "
                    f"({'built without CUDA' if torch.version.cuda is None else 'no device or driver'})")
    steps = args.steps if args.steps is not None else (20 if args.size == "real" else 5)
    results: dict[str, dict[str, dict]] = {}
    began = time.perf_counter()
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        for name in names:
            for mode in modes:
                start = time.perf_counter()
                left = None if args.budget is None else args.budget - (start - began)
                if left is not None and left <= 0:
                    r = {"model": name, "mode": mode, "error": f"not run: past the {args.budget:.0f} s --budget"}
                else:
                    r = measure(name, mode, steps, args.dtype, args.timeout if left is None else min(args.timeout, left),
                                args.device, args.size)
                results.setdefault(name, {})[mode] = r
                print(f"[{name} {mode}] {_status(r)} ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
                _write_json(args.json, results)  # after every run: a step killed later keeps what ran
    except _Stopped:
        print("[models] stopped by SIGTERM: the table holds what finished", file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    where = f"the GPU ({_gpu_name()})" if args.device == "cuda" else f"the CPU ({os.cpu_count()} cores)"
    print(f"### Models ({args.size}), {args.dtype}, one training step on {where}\n")
    print(render(results) if args.size == "tiny" else render_real(results))
    _write_json(args.json, results)
    return 0


class _Stopped(Exception):
    """SIGTERM arrived (a time limit around the whole run, as the GPU check's): stop, keep what ran."""


def _stop_on_sigterm(signum, frame):
    raise _Stopped()


def _status(r: dict) -> str:
    if "error" in r:
        return r["error"]
    peak = f", peak {r['peak_gib']:.2f} GiB" if r.get("peak_gib") is not None else ""
    return f"first step {r['first_step_s']:.1f} s, step {r['step_ms']:.1f} ms{peak}"


def _write_json(path: str | None, results: dict) -> None:
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump(results, f, indent=1)
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())
