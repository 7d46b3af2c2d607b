"""Runs a training step on several gloo ranks (CPU, 127.0.0.1) for the distributed tests
(test_distributed.py: DDP; test_distributed_fsdp_tp.py: FSDP2 and tensor parallelism).

`run_ranks(tmp_path, step_source)`: `step_source` defines `step(rank, world) -> dict`, run by every
rank after the process group is up (gloo, a free port on 127.0.0.1; destroyed afterwards). Each
rank is a subprocess (`python -c`, one torch thread) in its own process group, killed with
everything it started (compilers) at the deadline or as soon as another rank fails (it would
only wait for it); it inherits os.environ (so FUSER_CACHE_DIR is the parent's) and writes its
step's dict (torch.save), or its traceback, to a result file the parent reads. The ranks finish
with a barrier, so a rank's collectives never outlive its peers'. A port taken between choosing
and binding it ("address already in use") is retried once on another.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import torch

WORLD = 2

_MAIN = textwrap.dedent(
    """
    import datetime, os, sys, traceback
    import torch

    rank, world, port, out_path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    result = {"rank": rank}
    try:
        torch.set_num_threads(1)
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        try:
            result.update(step(rank, world))
            dist.barrier()
        finally:
            dist.destroy_process_group()
    except BaseException:
        result["error"] = traceback.format_exc()
    torch.save(result, out_path + ".tmp")
    os.replace(out_path + ".tmp", out_path)
    sys.exit(1 if "error" in result else 0)
    """
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the rank and anything it started (compilers)
        except ProcessLookupError:
            pass
    proc.wait()


def _launch(tmp_path: Path, child: str, env: dict, timeout_s: float, world: int,
            attempt: int) -> tuple[list[dict | None], list[str], bool]:
    """Runs the ranks; each one's result (None where it wrote none), its output, and whether they
    were killed at the deadline."""
    port = free_port()
    outs = [tmp_path / f"try{attempt}-rank{r}.pt" for r in range(world)]
    logs = [tmp_path / f"try{attempt}-rank{r}.log" for r in range(world)]
    procs, timed_out = [], False
    try:
        for r in range(world):
            with open(logs[r], "wb") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", child, str(r), str(world), str(port), str(outs[r])],
                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + timeout_s
        while any(p.poll() is None for p in procs):
            if any(p.poll() not in (None, 0) for p in procs):
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.1)
    finally:
        for p in procs:
            _kill(p)
    results = [torch.load(o, weights_only=False) if o.exists() else None for o in outs]
    return results, [log.read_text(errors="replace")[-4000:] for log in logs], timed_out


def run_ranks(tmp_path: Path, step_source: str, *, env: dict | None = None, timeout_s: float = 100,
              world: int = WORLD) -> list[dict]:
    """Every rank's `step` result (with "rank"), in rank order; an AssertionError with the rank's
    traceback and output if one failed, or with their output if they timed out or died.
    `env`: variables added to os.environ for the ranks; `timeout_s`: for all ranks together,
    compilation included."""
    child = textwrap.dedent(step_source) + "\n" + _MAIN
    env = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    for attempt in range(2):
        results, logs, timed_out = _launch(tmp_path, child, env, timeout_s, world, attempt)
        errors = [res.get("error", "") if res else "" for res in results]
        if attempt == 0 and any("address already in use" in e.lower() for e in errors):
            continue  # the free port was taken before rank 0 bound it: once more on another
        break
    # a rank's own failure first: the others then fail (or were stopped) only because of it
    for r in range(world):
        if errors[r]:
            raise AssertionError(f"rank {r} failed:\n{errors[r]}\nits output:\n{logs[r]}")
    missing = [r for r in range(world) if results[r] is None]
    if missing:
        why = f"were killed after {timeout_s} s" if timed_out else "were stopped or died"
        raise AssertionError(f"rank(s) {missing} {why} and wrote no result; their output:\n"
                             + "\n".join(f"--- rank {r}:\n{logs[r]}" for r in missing))
    return results


def assert_grads_close(name: str, got: torch.Tensor, want: torch.Tensor, scale: float, what: str,
                       rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """|got - want| <= rtol * |want| + atol * scale everywhere, `scale` being the largest reference
    gradient of the model: fp32's summation-order differences, nothing more."""
    assert got.shape == want.shape, f"{name}: {what} has shape {tuple(got.shape)}, eager {tuple(want.shape)}"
    excess = (got - want).abs() - rtol * want.abs() - atol * scale
    if float(excess.max()) > 0:
        i = int(excess.argmax())
        raise AssertionError(f"{name}: {what} differs from the eager reference: element {i} is "
                             f"{float(got.flatten()[i]):.9g}, eager {float(want.flatten()[i]):.9g} (tolerance "
                             f"{rtol:g} of it + {atol:g} * largest gradient {scale:.3g}); max |diff| "
                             f"{float((got - want).abs().max()):.3g}")
