"""`python -m fuser.benchmarks --gpu-sweep [--out DIR] [--budget S] [--cases ...]`: every
benchmark case under the schedule the heuristics choose and under a designed set of variants,
each forced with `fd.override_schedule`, so that one GPU session measures what the heuristics
and the performance model need (how time moves with lanes, rows per block, storage, unroll).

Per case and kernel, the variants are those its scheduler offers autotuning
(`SchedulerUnit.alternatives`): a row kernel's best-ranked other schedules by the performance
model (other lanes, storage, unroll), a pointwise kernel's other unrolls. Each variant's outputs must equal the heuristic
schedule's (the case's tolerance), its kernels carry ptxas's resources and the model's
prediction, and on a GPU its kernels are timed: CUDA events over replays of the recorded
launches, inputs rotated past 2x L2, median (benchmarks/gpu.py). Without a GPU the sweep runs
on the cpu backend at cpu-sized shapes: values are checked, nothing is timed (what CI runs).

Writes `sweep-<device>-<date>.json` under --out (default ./benchmarks-out) and prints a table;
a --budget cuts the sweep cleanly (no case starts after it; the ones left are listed).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import time
from pathlib import Path

from fuser.benchmarks.cases import Case, all_cases, check

ROW_VARIANTS = 5
"""Variants per kernel besides the heuristic's (more than autotuning's: the sweep feeds the model)."""
WARMUP, ITERS = 3, 15


def variants(record, device) -> list:
    """The schedules to try for one kernel (a launch record of the heuristic's run): what its
    scheduler offers autotuning (`SchedulerUnit.alternatives`), the best-ranked first."""
    if record.schedule is None or record.model is None:
        return []
    plan = record.model.plan
    return plan.unit.alternatives(plan, record.schedule, record.model.extents, None, device)[:ROW_VARIANTS]


def _kernel_rows(records, device) -> list[dict]:
    rows = []
    for k in records:
        performance = k.performance(device) if k.model is not None else None
        rows.append({"name": k.name, "scheduler": k.scheduler, "schedule": k.schedule.describe() if k.schedule else None,
                     "grid": list(k.grid) if k.grid else None, "block": k.block[0] if k.block else None,
                     "model": dataclasses.asdict(performance) if performance else None})
    return rows


class _Timer:
    """Times one fusion's launches on the GPU, or nothing on the cpu backend."""

    def __init__(self, gpu, case: Case, host_inputs):
        self.gpu = gpu
        self.sets = gpu.input_sets(case, host_inputs) if gpu else [host_inputs]

    def run(self, fd, backend: str):
        """(outputs of the first input set as numpy, median µs of the fusion's kernels or None)."""
        if self.gpu is None:
            return [o for o in fd.execute(self.sets[0], backend=backend)], None
        fd.execute(self.sets[0], backend=backend)  # compile
        replays, first = [], None
        for s in self.sets:
            outputs, replay = self.gpu.capture(fd, s)
            first = outputs if first is None else first
            replays.append(replay)
        self.gpu.synchronize()
        microseconds = self.gpu.time_rotating(replays, WARMUP, ITERS) * 1e3
        return [self.gpu.to_numpy(o) for o in first], microseconds


def sweep_case(case: Case, backend: str, gpu, device) -> dict:
    fd = case.build()
    host_inputs = case.inputs(seed=0)
    timer = _Timer(gpu, case, host_inputs)
    expected, base_us = timer.run(fd, backend)
    ok, err = check(expected, case.reference(host_inputs))
    records = fd.last_kernels()
    row = {"case": case.key, "min_bytes": case.min_bytes(), "heuristic": {
        "kernel_us": base_us, "check_ok": ok, "check_err": err, "kernels": _kernel_rows(records, device)},
        "variants": []}
    for index, record in enumerate(records):
        for schedule in variants(record, device):
            entry = {"kernel": index, "schedule": schedule.describe()}
            try:
                fd.override_schedule(index, schedule)
                outputs, us = timer.run(fd, backend)
                entry["kernel_us"] = us
                entry["check_ok"], entry["check_err"] = check(outputs, expected)
                entry["kernels"] = _kernel_rows(fd.last_kernels(), device)
            except Exception as e:  # a variant that cannot run is data, not the end of the sweep
                entry["error"] = f"{type(e).__name__}: {e}"
            finally:
                fd.override_schedule(index, None)
            row["variants"].append(entry)
    return row


def run_sweep(out: str, budget: float | None, cases_spec: str = "") -> dict:
    from fuser.benchmarks import gpu as gpu_mod
    from fuser.lowering.backends import get_backend

    start = time.perf_counter()
    has_gpu, _ = gpu_mod.available()
    gpu = gpu_mod.Gpu() if has_gpu else None
    backend = "cuda" if gpu else "cpu"
    device = get_backend(backend).device
    mode = "gpu-quick" if gpu else "quick"
    wanted = [w for w in cases_spec.split(",") if w]
    cases = [c for c in all_cases(mode) if not wanted or any(w in c.key for w in wanted)]
    if not gpu:  # cpu: one row length per kind, so the sweep is about mechanism, not volume
        seen: set[str] = set()
        cases = [c for c in cases if not (c.kind in seen or seen.add(c.kind))]  # type: ignore[func-returns-value]
    run: dict = {"device": device.name, "backend": backend, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), "copy": gpu.copy_bandwidth() if gpu else None, "cases": []}
    for i, case in enumerate(cases):
        if budget is not None and time.perf_counter() - start > budget:
            run["not_run"] = [c.key for c in cases[i:]]
            break
        run["cases"].append(sweep_case(case, backend, gpu, device))
        if gpu:
            gpu.release()
    run["wall_s"] = time.perf_counter() - start
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"sweep-{device.name.replace(' ', '_')}-{run['date'][:10]}.json"
    (folder / name).write_text(json.dumps(run, indent=1, default=str))
    run["file"] = str(folder / name)
    return run


def table(run: dict) -> str:
    lines = [f"gpu-sweep on {run['device']} ({run['backend']}), {run['wall_s']:.0f} s -> {run.get('file')}",
             "| case | kernel | schedule | µs | model µs | check |", "|---|---|---|---|---|---|"]

    def model_us(kernels, index):
        model = kernels[index]["model"] if kernels and index < len(kernels) else None
        return f"{model['predicted_s'] * 1e6:.1f}" if model else "—"

    for case in run["cases"]:
        h = case["heuristic"]
        for k, kernel in enumerate(h["kernels"]):
            us = f"{h['kernel_us']:.1f}" if h["kernel_us"] is not None else "—"
            lines.append(f"| {case['case']} | {k} | heuristic: {kernel['schedule']} | {us} | {model_us(h['kernels'], k)} | "
                         f"{'ok' if h['check_ok'] else 'FAIL'} |")
        for v in case["variants"]:
            us = f"{v['kernel_us']:.1f}" if v.get("kernel_us") is not None else "—"
            state = v.get("error") or ("ok" if v.get("check_ok") else "FAIL")
            lines.append(f"| {case['case']} | {v['kernel']} | {v['schedule']} | {us} | "
                         f"{model_us(v.get('kernels'), v['kernel'])} | {state} |")
    if run.get("not_run"):
        lines.append(f"not run (budget): {', '.join(run['not_run'])}")
    return "\n".join(lines)


def failures(run: dict) -> list[str]:
    """Variants (or heuristic runs) whose values differ, or that failed to run."""
    bad = [c["case"] for c in run["cases"] if not c["heuristic"]["check_ok"]]
    bad += [f"{c['case']} kernel {v['kernel']}: {v['schedule']}: {v.get('error') or v.get('check_err')}"
            for c in run["cases"] for v in c["variants"] if v.get("error") or not v.get("check_ok")]
    return bad


def main(out: str | None, budget: float | None, cases_spec: str = "") -> int:
    run = run_sweep(out or os.path.join(os.getcwd(), "benchmarks-out"), budget, cases_spec)
    print(table(run))
    bad = failures(run)
    for line in bad:
        print(f"FAILED: {line}")
    return 1 if bad else 0
