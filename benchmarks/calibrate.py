"""`python -m fuser.benchmarks.calibrate [--fit]`: the performance model against every recorded
GPU run (benchmarks/gpu/*.json): per case, the measured kernel time beside the model's prediction
and its error; whether the model ranks the cases as measured; with --fit, the latency and launch
constants that minimise the worst error on the runs of each device, to copy into
lowering/device.py (docs/benchmarks.md#performance-model records each fit).

A run's JSON holds the kernels as that commit built them (benchmarks/gpu/extract_kernels.py):
schedule, grid, block, ptxas's registers and shared memory, bytes in flight per thread (as its
SASS has them, and as its schedule meant them), bytes moved; the model needs nothing else, so
runs of old commits stay usable after the code moves.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

from fuser.lowering.device import DeviceSpec, profile
from fuser.lowering.schedulers.performance import Resources, Traffic, predict

RUNS = Path(__file__).resolve().parent / "gpu"


def load_runs(folder: Path = RUNS) -> list[dict]:
    return [json.loads(p.read_text()) | {"file": p.name} for p in sorted(folder.glob("*.json"))]


def predicted_seconds(case: dict, device: DeviceSpec) -> float:
    total = 0.0
    for k in case["kernels"]:
        resources = Resources(k["registers"], k["shared_bytes"], k["spill_bytes"], measured=True)
        # The bytes the compiled code keeps in flight (its SASS), as the model takes them for
        # today's kernels; a run recorded before the SASS was counted has the schedule's only.
        in_flight = k.get("sass_in_flight_per_thread") or k["in_flight_per_thread"]
        traffic = Traffic(k["min_bytes"], in_flight, 16, k["min_bytes"], k["round_trips"], k["barriers"])
        total += predict(device, math.prod(k["grid"]), k["block"], resources, traffic).seconds
    return total


def errors(run: dict, device: DeviceSpec) -> list[tuple[str, float, float, float, float]]:
    """(case, measured µs, predicted µs, relative error, minimum bytes) per case of a run."""
    rows = []
    for case in run["cases"]:
        predicted = predicted_seconds(case, device) * 1e6
        rows.append((case["case"], case["measured_us"], predicted, predicted / case["measured_us"] - 1,
                     case["min_bytes"]))
    return rows


def same_ranking(rows) -> bool:
    """The model orders the cases by achieved bandwidth (minimum bytes / time) as the GPU did,
    where the measured ones differ by more than 10 %."""
    by_measured = sorted(rows, key=lambda r: r[4] / r[1])
    for a, b in zip(by_measured, by_measured[1:]):
        if b[4] / b[1] > 1.1 * a[4] / a[1] and not b[4] / b[2] > a[4] / a[2]:
            return False
    return True


def device_for(run: dict) -> DeviceSpec:
    return dataclasses.replace(profile(run["profile"]), copy_bandwidth=run["copy_bandwidth"])


def fit(runs: list[dict]) -> tuple[float, float, float, float]:
    """(latency s, launch s, reduction s, worst |error|) minimising the worst relative error
    among the constants that rank every run's cases as measured (among all, if none does)."""
    best = (0.0, 0.0, 0.0, math.inf)
    best_ranked = best
    for latency_ns in range(500, 2401, 20):
        for launch_us in (0.0, 2.0, 4.0):
            for reduction_ns in range(0, 4001, 50):
                worst, ranked = 0.0, True
                for run in runs:
                    device = dataclasses.replace(device_for(run), dram_latency_s=latency_ns * 1e-9,
                                                 launch_s=launch_us * 1e-6, reduction_s=reduction_ns * 1e-9)
                    rows = errors(run, device)
                    worst = max(worst, *(abs(row[3]) for row in rows))
                    ranked = ranked and same_ranking(rows)
                found = (latency_ns * 1e-9, launch_us * 1e-6, reduction_ns * 1e-9, worst)
                if worst < best[3]:
                    best = found
                if ranked and worst < best_ranked[3]:
                    best_ranked = found
    return best_ranked if math.isfinite(best_ranked[3]) else best


def report(run: dict, device: DeviceSpec) -> str:
    rows = errors(run, device)
    lines = [f"{run['file']}: {run['device']}, commit {run['commit']} ({run['date']}); model: latency "
             f"{device.dram_latency_s * 1e9:.0f} ns, launch {device.launch_s * 1e6:.1f} us, reduction "
             f"{device.reduction_s * 1e9:.0f} ns, copy "
             f"{device.copy_bandwidth / 1e9:.0f} GB/s",
             "| case | measured µs | predicted µs | error |", "|---|---|---|---|"]
    lines += [f"| {case} | {m:.1f} | {p:.1f} | {100 * e:+.0f} % |" for case, m, p, e, _ in rows]
    lines.append(f"worst error {100 * max(abs(r[3]) for r in rows):.0f} %; ranks the cases as measured: "
                 f"{'yes' if same_ranking(rows) else 'no'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuser.benchmarks.calibrate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="store_true", help="also fit latency and launch per device profile")
    args = parser.parse_args(argv)
    runs = load_runs()
    for run in runs:
        print(report(run, device_for(run)))
    if args.fit:
        for name in sorted({run["profile"] for run in runs}):
            latency, launch, reduction, worst = fit([r for r in runs if r["profile"] == name])
            print(f"fit for {name}: dram_latency_s={latency:.3g}, launch_s={launch:.3g}, reduction_s={reduction:.3g} "
                  f"(worst error {100 * worst:.0f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
