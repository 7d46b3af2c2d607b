"""The host cost of a compiled call, fuser against Inductor and eager, measured interleaved.

`python -m fuser.benchmarks.call_overhead` compiles one small program (by default
`(x * 2 + 1).relu()` on an [8] f32 CPU tensor, one fused region) with `torch.compile(backend=
"fuser")` and with Inductor (torch.compile's default backend), and times rounds of `--calls`
calls of each and of the eager function, one round of each in turn (`--rounds` times), so that a
machine whose speed drifts slows all three alike; one thread (torch.set_num_threads(1)). It
prints per mode the median and the minimum of the rounds' µs per call, and the median of the
per-round ratio fuser / Inductor. On CPU tensors the kernels are the cpu backend's emulation and
Inductor's C++: what is compared is mostly the per-call work on the host (Dynamo's guards and
AOTAutograd's wrapper are common to both).

`--device cuda` runs the same on a GPU (each timed round ends with a synchronize). Never part
of the test run (the CI test counts the Python functions a call enters instead:
test/pytest/torch_backend/test_torch_backend.py)."""

from __future__ import annotations

import argparse
import json
import statistics
import time


def measure(device: str = "cpu", size: int = 8, calls: int = 1000, rounds: int = 15) -> dict:
    import torch

    import fuser  # noqa: F401  (registers the backend)

    torch.set_num_threads(1)

    def program(x):
        return (x * 2 + 1).relu()

    x = torch.randn(size, device=device)
    compiled = {"fuser": torch.compile(program, backend="fuser"), "inductor": torch.compile(program),
                "eager": program}
    for f in compiled.values():
        for _ in range(max(100, calls // 5)):
            f(x)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    rounds_us: dict[str, list[float]] = {name: [] for name in compiled}
    for _ in range(rounds):
        for name, f in compiled.items():
            sync()
            start = time.perf_counter_ns()
            for _ in range(calls):
                f(x)
            sync()
            rounds_us[name].append((time.perf_counter_ns() - start) / calls / 1e3)
    record = {"program": f"(x * 2 + 1).relu(), [{size}] f32 {device}", "calls": calls, "rounds": rounds}
    for name, values in rounds_us.items():
        record[name] = {"median_us": statistics.median(values), "min_us": min(values)}
    record["fuser_over_inductor"] = statistics.median(
        [a / b for a, b in zip(rounds_us["fuser"], rounds_us["inductor"])])
    return record


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fuser.benchmarks.call_overhead", description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print the record as JSON")
    args = parser.parse_args(argv)
    record = measure(args.device, args.size, args.calls, args.rounds)
    if args.json:
        print(json.dumps(record))
        return
    print(f"{record['program']}: {record['rounds']} rounds of {record['calls']} calls, interleaved")
    for name in ("fuser", "inductor", "eager"):
        print(f"  {name:9s} median {record[name]['median_us']:6.2f} µs   min {record[name]['min_us']:6.2f} µs")
    print(f"  fuser / Inductor (median of the rounds' ratios): {record['fuser_over_inductor']:.2f}")


if __name__ == "__main__":
    main()
