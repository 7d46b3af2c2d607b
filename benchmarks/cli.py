"""`python -m fuser.benchmarks [--quick | --full] ...`: measure fuser against the floor and against torch.

Without a flag: --full where a GPU is usable, else --quick.
--quick  cpu-sized shapes on the cpu backend (a few minutes on 2 cores): kernels, bytes / minimum,
         compile latency (cold / warm processes), host overhead, correctness. Where a GPU is
         usable (and --backend is not cpu): "gpu-quick", each kind once at a GPU shape on the cuda
         backend with the GPU figures of --full, within about 3 minutes.
--gpu-sweep  each case under the heuristic's schedule and variants forced on it, timed on a GPU
         (benchmarks/sweep.py; --out DIR for its JSON, --budget S); without a GPU, values only.
--full   the issue's shapes; backend cuda (needs a GPU and pycuda): adds CUDA-event kernel times,
         achieved bandwidth vs a device-to-device copy, torch eager and torch.compile. Bytes are
         still counted by the cpu backend, at the full row length with fewer rows.
Both modes add the memcheck overhead (FUSER_MEMCHECK=1 vs 0) of two cases on the cpu backend.

Results are appended to ./benchmarks-out/results.{md,json} (untracked); --save appends to the
tracked benchmarks/results.{md,json} instead, --update-readme also rewrites this backend's section of
docs/benchmarks.md (the flag keeps its old name: the section used to be in the README).

Never part of the test run. Entry point for a console script: `benchmarks.cli:main`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time
import traceback

from fuser.benchmarks import measure, report
from fuser.benchmarks.cases import Case, all_cases
from fuser.lowering.backends import CPU, Backend, get_backend

BYTES_SHAPE_LIMIT = 64 << 20  # full mode: count bytes on the cpu backend at most this much minimum traffic
GPU_QUICK_BYTES_LIMIT = 8 << 20  # gpu-quick mode: the same, smaller (seconds matter in a GPU session)
GPU_QUICK_BUDGET_S = 170.0  # gpu-quick mode: start no case after this (the GPU check gives the step 240 s)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m fuser.benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="cpu-sized shapes (default without a GPU)")
    mode.add_argument("--full", action="store_true", help="the issue's shapes (default with a GPU)")
    p.add_argument("--backend", choices=["cpu", "cuda"], default=None,
                   help="default: cpu for --quick, cuda for --full")
    p.add_argument("--cases", default="", help="comma-separated substrings of case keys "
                   "(kind:dtype:shape, e.g. 'ce_bwd:bf16,softmax')")
    p.add_argument("--no-compile-latency", action="store_true", help="skip the cold/warm probe processes")
    p.add_argument("--no-torch-compile", action="store_true", help="GPU: skip torch.compile")
    p.add_argument("--calls", type=int, default=None, help="calls per host-overhead median")
    p.add_argument("--iters", type=int, default=50, help="GPU: timed calls per figure")
    p.add_argument("--warmup", type=int, default=5, help="GPU: warm-up calls per figure")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds: start no new case after this (GPU sessions with a time limit); "
                   "the cases left are listed")
    p.add_argument("--no-memcheck", action="store_true", help="skip the memcheck overhead (cpu backend)")
    save = p.add_mutually_exclusive_group()
    save.add_argument("--save", action="store_true",
                      help="append to the tracked benchmarks/results.{md,json} (default: ./benchmarks-out/, untracked)")
    save.add_argument("--no-save", action="store_true", help="write no results file at all")
    p.add_argument("--update-readme", action="store_true",
                   help="replace the <!-- fuser-bench:BACKEND:begin/end --> section of docs/benchmarks.md with this run")
    p.add_argument("--keep-cache", action="store_true", help="keep the temporary FUSER_CACHE_DIR folders")
    p.add_argument("--gpu-sweep", action="store_true",
                   help="time each case under the heuristic's schedule and its variants (benchmarks/sweep.py); "
                        "without a GPU: the cpu backend at cpu shapes, values only")
    p.add_argument("--out", default=None, help="--gpu-sweep: folder of its JSON (default ./benchmarks-out)")
    return p.parse_args(argv)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def select(cases: list[Case], spec: str) -> list[Case]:
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    return [c for c in cases if not wanted or any(w in c.key for w in wanted)]


class Harness:
    def __init__(self, args, backend: Backend, mode: str):
        self.args = args
        self.backend = backend
        self.mode = mode
        self.root = tempfile.mkdtemp(prefix="fuser-bench-")
        self.shared_cache = os.path.join(self.root, "shared")
        self.calls = args.calls or 1000  # upper bound per host-overhead median (adapts to ~1 s)
        self.empty = None
        self.gpu = None

    def use_cache(self, path: str) -> None:
        os.environ["FUSER_CACHE_DIR"] = path  # read on every compile (lowering.settings)

    # -- one row -------------------------------------------------------------------------------------
    def run_row(self, case: Case, copy_gbps: float | None) -> dict:
        row: dict = {"kind": case.kind, "dtype": case.dtype, "shape": list(case.shape), "backend": self.backend.name,
                     "min_bytes": case.min_bytes(), "errors": []}
        cache = os.path.join(self.root, case.key.replace(":", "_"))
        if not self.args.no_compile_latency:
            lat = measure.compile_latency(case, self.backend, cache)
            row["compile"] = lat
            for which in ("cold", "warm"):
                if "error" in lat[which]:
                    if which == "cold" or "skipped" not in lat[which]["error"]:
                        row["errors"].append(f"compile probe ({which}): {lat[which]['error']}")
                else:
                    row[f"{which}_total_s"] = measure.definition_to_cubin_s(lat[which])
        self.use_cache(cache)  # the probes' kernels: the in-process run loads them from disk

        # kernels, bytes and correctness on the cpu backend, which counts bytes (fewer rows on GPU machines)
        counted_here = self.backend.counts_bytes
        limit = GPU_QUICK_BYTES_LIMIT if self.mode == "gpu-quick" else BYTES_SHAPE_LIMIT
        bytes_shape = case.shape if counted_here else case.with_rows(limit)
        row["bytes_shape"] = list(bytes_shape)
        try:
            if counted_here or CPU.available()[0]:
                empty = self.empty if counted_here else None  # the GPU path's is measured below
                counted = measure.run_case(case, CPU, shape=bytes_shape, empty=empty, host_calls=self.calls)
                counted.pop("shape")
                counted["bytes_min_bytes"] = counted.pop("min_bytes", None)
                row.update(counted)
                if not counted["check_ok"]:
                    row["errors"].append(f"wrong result on the cpu backend: error {counted['check_err']:.2e}")
        except Exception as e:
            row["errors"].append(f"execute (cpu): {measure.error_text(e)}")
            row["traceback_cpu"] = traceback.format_exc()

        if "error" in (row.get("host") or {}):
            row["errors"].append(f"host overhead: {row['host']['error']}")

        if self.gpu is not None:
            try:
                g = self.gpu.measure_case(case, self.args.warmup, self.args.iters, not self.args.no_torch_compile,
                                          self.empty, self.calls)
                row["gpu"] = g
                row["copy_gbps"] = copy_gbps
                row["kernels"] = g.get("kernels", row.get("kernels"))
                row["check_ok"], row["check_err"] = g.get("check_ok"), g.get("check_err")
                row["host"] = g.get("host")
                if "error" in (row["host"] or {}):
                    row["errors"].append(f"host overhead (cuda): {row['host']['error']}")
                if g.get("check_ok") is False:
                    row["errors"].append(f"wrong result on the GPU vs {g['check_against']}: error {g['check_err']:.2e}")
                for k in ("eager_error", "torch_compile_error"):
                    if k in g:
                        row["errors"].append(f"{k.replace('_', ' ')}: {g[k]}")
            except Exception as e:
                row["errors"].append(f"execute (cuda): {measure.error_text(e)}")
                row["traceback_cuda"] = traceback.format_exc()
            finally:
                self.gpu.release()

        return row

    def close(self) -> None:
        if not self.args.keep_cache:
            shutil.rmtree(self.root, ignore_errors=True)


def memcheck_overheads(spec: str) -> list[dict]:
    """The memcheck overhead of the MEMCHECK_CASES that --cases selects (cpu-sized shapes)."""
    chosen = [c for c in select(all_cases("quick"), spec) if c.key in measure.MEMCHECK_CASES]
    records = []
    for case in chosen:
        records.append(measure.memcheck_overhead(case))
        r = records[-1]
        log(f"memcheck overhead {case.label}: {r['off_ms']:.2f} -> {r['on_ms']:.2f} ms")
    return records


def index_check_overheads(spec: str, backend, harness) -> list[dict]:
    """The in-kernel index check cost of the INDEX_CHECK_CASES that --cases selects (cpu-sized
    shapes, on the run's backend; on a GPU each call is synchronized)."""
    chosen = [c for c in select(all_cases("quick"), spec) if c.key in measure.INDEX_CHECK_CASES]
    sync = harness.gpu.synchronize if harness.gpu else None
    records = []
    for case in chosen:
        to_device = harness.gpu.tensor_fn() if harness.gpu else None  # else host copies would dominate
        inputs = [to_device(x) for x in case.inputs()] if to_device else None
        records.append(measure.index_check_overhead(case, backend, inputs=inputs, sync=sync))
        r = records[-1]
        log(f"index checks {case.label}: " + (r["error"] if "error" in r else
                                              f"{r['unchecked_ms']:.3f} -> {r['checked_ms']:.3f} ms"))
    return records


def save_results(run: dict, markdown: str, args) -> None:
    """The tracked benchmarks/results.{md,json} only with --save; else an untracked folder."""
    if args.no_save:
        return
    if args.save:
        md, js = report.RESULTS_MD, report.RESULTS_JSON
    else:
        out = report.default_out_dir()
        md, js = out / "results.md", out / "results.json"
    report.append_results(run, markdown, md, js)
    log(f"appended to {md} and {js}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.gpu_sweep:
        from fuser.benchmarks import sweep

        return sweep.main(args.out, args.budget, args.cases)
    start = time.perf_counter()
    from fuser.benchmarks import gpu as gpu_mod

    has_gpu, why = gpu_mod.available()
    if args.full or args.quick:
        mode = "full" if args.full else "quick"
    else:  # no flag: the full shapes where a GPU can run them, the cpu-sized ones elsewhere
        mode = "full" if has_gpu else "quick"
        log(f"mode {mode}: " + (f"GPU {why}" if has_gpu else f"no GPU ({why})"))
    if mode == "quick" and has_gpu and args.backend in (None, "cuda"):
        # A GPU session's quick run: each kind once at a GPU shape, against a copy, torch eager and
        # torch.compile, within a few minutes (no cold/warm compile probes: a cpu-machine figure).
        mode = "gpu-quick"
        args.no_compile_latency = True
        args.no_memcheck = True
        args.budget = args.budget if args.budget is not None else GPU_QUICK_BUDGET_S
        log(f"mode gpu-quick: GPU {why}; budget {args.budget:.0f} s")
    backend = get_backend(args.backend or ("cuda" if mode in ("full", "gpu-quick") else "cpu"))
    ok, why = backend.available()
    if not ok:
        log(f"backend {backend.name} unavailable here: {why}. Use --quick (cpu backend) or --backend cpu.")
        return 2
    cases = select(all_cases(mode), args.cases)
    if not cases:
        log(f"no case matches --cases {args.cases!r}")
        return 2
    if mode == "full" and not backend.on_gpu:
        log("warning: full shapes on the cpu backend emulate gigabytes of GPU work; this takes very long")

    harness = Harness(args, backend, mode)
    run: dict = {"command": "python -m fuser.benchmarks " + shlex.join(sys.argv[1:] if argv is None else argv),
                 "mode": mode, "backend": backend.name, "machine": report.machine_info(), "rows": []}
    try:
        if backend.on_gpu:
            harness.gpu = gpu_mod.Gpu()
            run["gpu_info"] = harness.gpu.info()
            run["copy"] = harness.gpu.copy_bandwidth()
            log(f"GPU {harness.gpu.name}: d2d copy {run['copy']['gbps']:.0f} GB/s")
        copy_gbps = (run.get("copy") or {}).get("gbps")
        harness.use_cache(harness.shared_cache)
        try:
            harness.empty = measure.EmptyKernel(backend)
        except Exception as e:  # then no host-overhead figures, everything else still runs
            run["empty_kernel_error"] = measure.error_text(e)
            log(f"no empty kernel on {backend.name}: {run['empty_kernel_error']}")
        try:
            if harness.empty is None:
                raise RuntimeError(f"no empty kernel: {run['empty_kernel_error']}")
            sync = harness.gpu.synchronize if harness.gpu else None
            array_fn = harness.gpu.tensor_fn() if harness.gpu else None
            run["tiny_overhead"] = measure.tiny_fusion_overhead(backend, harness.empty, harness.calls, array_fn, sync)
        except Exception as e:
            run["tiny_overhead"] = {"error": measure.error_text(e), "traceback": traceback.format_exc()}
        if harness.empty is not None and _torch_available():
            try:  # a fused region under torch.compile, on the tensors of the backend's device
                run["region_overhead"] = measure.region_overhead("cuda" if backend.on_gpu else "cpu", harness.empty,
                                                                 harness.calls)
            except Exception as e:
                run["region_overhead"] = {"error": measure.error_text(e)}
        for i, case in enumerate(cases):
            if args.budget is not None and time.perf_counter() - start > args.budget:
                run["not_run"] = [c.key for c in cases[i:]]
                log(f"budget of {args.budget:.0f} s spent: {len(cases) - i} case(s) not run")
                break
            t0 = time.perf_counter()
            row = harness.run_row(case, copy_gbps)
            row["wall_s"] = time.perf_counter() - t0
            run["rows"].append(row)
            status = "; ".join(row["errors"]) or "ok"
            log(f"[{i + 1}/{len(cases)}] {case.label}: {row['wall_s']:.1f} s, {status}")
        if not args.no_memcheck and "not_run" not in run and CPU.available()[0]:
            harness.use_cache(harness.shared_cache)
            run["memcheck"] = memcheck_overheads(args.cases)
        if "not_run" not in run:
            run["index_checks"] = index_check_overheads(args.cases, backend, harness)
    finally:
        harness.close()
    run["wall_s"] = time.perf_counter() - start
    try:
        run["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    markdown = report.render_markdown(run)
    print(markdown)
    save_results(run, markdown, args)
    if args.update_readme:
        log(report.update_readme(markdown, backend.name))
    log(f"total {run['wall_s']:.0f} s")
    return 0


def _torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None
