"""`python -m fuser.benchmarks.predict [--device h100|h200] [--cases ...] [--json OUT]`: every
kernel of every benchmark case at its GPU shape, as the performance model sees it on a named
GPU, without one: schedule, ptxas's registers and spills, local-memory accesses, resident
blocks and warps per SM, load width, bytes in flight per SM as the SASS has them and as the
schedule means them (the prediction takes the SASS's), predicted time and share of a device copy
(lowering/schedulers/performance.py, fitted in docs/benchmarks.md#performance-model).

Kernels are compiled for the device's architecture (NVRTC or nvcc; no GPU) and never run; the
inputs are cheap arrays of the GPU shapes (only shapes, dtypes and alignment are read).
A case's prediction: its minimum bytes over the sum of its kernels' predicted times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass

import numpy as np

from fuser.benchmarks.cases import Case, all_cases
from fuser.benchmarks.probe import ConstantRng
from fuser.lowering.device import profile


@dataclass(frozen=True)
class CasePrediction:
    case: str
    device: str
    seconds: float
    fraction_of_copy: float
    kernels: tuple


def gpu_inputs(case: Case) -> list:
    return case.spec.make_inputs(ConstantRng(), case.shape, case.dtype)


def predict_case(case: Case, device: str = "h100", planned: bool = False) -> CasePrediction:
    """The case's kernels as scheduled for the profile `device` (FUSER_GPU_PROFILE for the cpu
    backend that builds them), and the model's prediction of each on it: with its fitted
    constants, or (`planned`) with those schedules are planned for (DeviceSpec.planning)."""
    spec = profile(device).planning() if planned else profile(device)
    fd = case.build()
    previous = os.environ.get("FUSER_GPU_PROFILE")
    os.environ["FUSER_GPU_PROFILE"] = device
    try:
        kernels = [k.performance(spec) for k in fd.kernels_for(gpu_inputs(case), backend="cpu")]
    finally:
        if previous is None:
            del os.environ["FUSER_GPU_PROFILE"]
        else:
            os.environ["FUSER_GPU_PROFILE"] = previous
    modelled = [k for k in kernels if k is not None]
    seconds = sum(k.predicted_s for k in modelled)
    fraction = case.min_bytes() / seconds / spec.copy_bandwidth if seconds else 0.0
    return CasePrediction(case.label, spec.name, seconds, fraction, tuple(modelled))


def table(predictions: list[CasePrediction]) -> str:
    rows = ["| case | kernel schedule | regs | spill B | local | smem B | CTA/SM | warps/SM | load B | "
            "KiB in flight/SM: SASS | schedule | predicted µs | % copy |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in predictions:
        for k in p.kernels:
            sass = f"{k.sass_in_flight_per_sm / 1024:.1f}" if k.sass_in_flight_per_sm is not None else f"— ({k.in_flight_from})"
            local = "" if k.local_memory_accesses is None else k.local_memory_accesses
            rows.append(f"| {p.case} | {k.schedule} | {k.registers} | {k.spill_bytes} | {local} | {k.shared_bytes} | "
                        f"{k.ctas_per_sm} | {k.warps_per_sm} | {k.load_bytes} | {sass} | "
                        f"{k.schedule_in_flight_per_sm / 1024:.1f} | {k.predicted_s * 1e6:.1f} | {100 * k.fraction_of_copy:.0f} |")
        rows.append(f"| **{p.case}** | all kernels | | | | | | | | | | **{p.seconds * 1e6:.1f}** | "
                    f"**{100 * p.fraction_of_copy:.0f}** |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuser.benchmarks.predict", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="h100", help="GPU profile: h100 or h200")
    parser.add_argument("--cases", default="", help="comma-separated substrings of case keys")
    parser.add_argument("--json", default="", help="also write the predictions to this JSON file")
    args = parser.parse_args(argv)
    wanted = [w for w in args.cases.split(",") if w]
    cases = [c for c in all_cases("gpu-quick") if not wanted or any(w in c.key for w in wanted)]
    predictions = [predict_case(c, args.device) for c in cases]
    print(table(predictions))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(p) for p in predictions], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
