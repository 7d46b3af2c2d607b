"""Autotuning on the user's GPU, opt-in (`fd.execute(..., autotune=True)`, `FUSER_AUTOTUNE=1`,
`torch.compile(..., backend="fuser", options={"autotune": True})`), or without one by the
performance model on each candidate's SASS (`autotune="sass"`, `FUSER_AUTOTUNE=sass`).

The first call of a fusion whose heuristic schedules are new (a new extents bucket, a new GPU)
times, kernel by kernel, the heuristic's schedule against the unit's best-ranked alternatives
(`SchedulerUnit.alternatives`: the performance model's next row schedules, other pointwise
unrolls), each forced like `fd.override_schedule` and run on the call's own inputs, and keeps
the fastest. The choice is stored in the disk cache (`$FUSER_CACHE_DIR/autotune/`), keyed by the
GPU (its `DeviceSpec`: name, architecture, limits), the fusion's IR, the call's cache key and the
heuristic's schedules, so later processes reuse it without timing anything.

Guarantees: tuning never changes values (a candidate whose outputs differ from the heuristic's
is dropped), and a candidate that fails to compile or launch is skipped with one log line,
never an error. Fusions with random ops are not tuned (each launch advances the generator).
Budget: at most `MAX_CANDIDATES` alternatives a kernel and about `BUDGET_S` of timed runs a
fusion. Timing: the backend's (`KernelBackend.time_calls`: CUDA events on the cuda backend; on
the cpu backend wall time, which only tests the mechanism). Compiles run one after another (a
compiled fusion compiles under its lock).

Mode "sass": the candidates are ranked as the performance model predicts them from each one's
compiled kernel for the GPU being scheduled for (NVRTC for its architecture, the SASS's bytes in
flight and ptxas's registers: `KernelRecord.performance`), not timed; each still runs once on the
call's inputs, so values are checked as above. It needs NVRTC and nvdisasm (the nvrtc extra);
without them a fusion is not tuned, with the reason. A choice it stores is the model's, not a
measurement: `KernelTuning.by` says which.
"""

from __future__ import annotations

import dataclasses
import json
import math
import logging
import time
from dataclasses import dataclass, field

import numpy as np

from fuser_dialect import ops_random as RN
from fuser.lowering import settings
from fuser.lowering.backends.disk_cache import digest
from fuser.lowering.segmentation.host_segments import is_host_plan

log = logging.getLogger("fuser.autotune")

MAX_CANDIDATES = 3
"""Alternatives timed per kernel besides the heuristic's schedule (k <= 4 in all)."""
BUDGET_S = 0.05
"""Timed runs of one fusion's tuning stop once they have taken this long (the compiles aside)."""
REPS = 3
MODES = ("time", "sass")
"""`time`: the candidates timed on the device; `sass`: ranked by the performance model on their SASS."""


def autotune_mode(value) -> str:
    """'' (off), 'time' or 'sass' from `execute(autotune=...)`'s value or FUSER_AUTOTUNE's (True is 'time')."""
    if value is None or value is False:
        return ""
    if value is True:
        return "time"
    if isinstance(value, str) and value in MODES:
        return value
    raise ValueError(f"autotune={value!r}: expected True, False, 'time' (time the alternatives on the device) "
                     f"or 'sass' (rank them by the performance model on their SASS)")


@dataclass
class KernelTuning:
    """What tuning found for one kernel (`KernelRecord.tuning`)."""

    heuristic: str
    chosen: str
    heuristic_s: float | None
    chosen_s: float | None
    candidates: int
    from_cache: bool = False
    by: str = "time"
    """How the candidates were compared: "time" (measured on the device) or "sass" (predicted by
    the performance model from their SASS: heuristic_s and chosen_s are predictions)."""

    @property
    def speedup(self) -> float | None:
        """Heuristic time over the chosen schedule's (1.0: the heuristic won)."""
        if not self.heuristic_s or not self.chosen_s:
            return None
        return self.heuristic_s / self.chosen_s


@dataclass
class Tuning:
    overrides: dict[int, object] = field(default_factory=dict)
    kernels: dict[int, KernelTuning] = field(default_factory=dict)
    skipped: str = ""
    """Why the fusion was not tuned ("" when it was)."""


def _schedule_to_json(schedule) -> dict:
    fields = {f.name: getattr(schedule, f.name) for f in dataclasses.fields(schedule)}
    return {"type": type(schedule).__name__, "fields": fields}


def _schedule_from_json(data: dict):
    from fuser.lowering.schedulers import SCHEDULE_TYPES

    cls = SCHEDULE_TYPES[data["type"]]
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in data["fields"].items()}
    return cls(**fields)


def _same_values(a, b) -> bool:
    """The outputs of two schedules of one fusion agree (the order of a reduction may differ)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = _to_numpy(x), _to_numpy(y)
        if x.shape != y.shape:
            return False
        if x.dtype.kind in "fcV":  # floats, complex, bfloat16 (ml_dtypes)
            if not np.allclose(x.astype(np.float64), y.astype(np.float64), rtol=2e-2, atol=1e-5, equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def _to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch
        x = x.detach()
        if str(x.dtype) == "torch.bfloat16":
            import ml_dtypes

            return x.float().cpu().numpy().astype(ml_dtypes.bfloat16)
        return x.cpu().numpy()
    return np.asarray(x)


class Autotuner:
    """One executor's tuning: choices kept in memory and on disk."""

    def __init__(self, module_text: str):
        self.module_text = module_text
        self._memory: dict[tuple, Tuning] = {}

    def tune(self, compiled, extents, checked, backend, cache_key, user_overrides: dict, run,
             mode: str = "time") -> Tuning:
        """The tuned schedules (kernel index -> schedule) of this call. `run(overrides)` runs the
        fusion once under those forced schedules and returns (its outputs, the launches' kernel
        records), raising what a launch raises. `mode`: MODES."""
        heuristic = compiled.schedules(extents, checked, user_overrides)
        memory_key = (cache_key, heuristic, backend.device.key(), mode)
        found = self._memory.get(memory_key)
        if found is not None:
            return found
        if any(isinstance(op, RN.RandomOp) for op in compiled.fusion.body.block.ops):
            tuning = Tuning(skipped="a random op: each launch advances the generator")
            self._memory[memory_key] = tuning
            return tuning
        if mode == "sass" and (missing := _sass_tools_missing()):
            tuning = Tuning(skipped=f"autotune='sass' needs {missing}")
            self._memory[memory_key] = tuning
            return tuning
        path = settings.cache_root() / "autotune" / f"{self._disk_key(backend, cache_key, heuristic, mode)}.json"
        tuning = self._load(path, heuristic, mode)
        if tuning is None:
            tuning = self._measure(compiled, extents, checked, backend, heuristic, user_overrides, run, mode)
            self._store(path, tuning, heuristic)
        self._memory[memory_key] = tuning
        return tuning

    # -- disk ----------------------------------------------------------------------------------
    def _disk_key(self, backend, cache_key, heuristic, mode: str = "time") -> str:
        tag = "autotune 1" if mode == "time" else f"autotune 1 {mode}"
        return digest(tag, repr(backend.device.key()), self.module_text, repr(cache_key), repr(heuristic))

    def _load(self, path, heuristic, mode: str = "time") -> Tuning | None:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        try:
            tuning = Tuning()
            for k, entry in data["kernels"].items():
                index = int(k)
                chosen = _schedule_from_json(entry["schedule"])
                if chosen != heuristic[index]:
                    tuning.overrides[index] = chosen
                tuning.kernels[index] = KernelTuning(heuristic[index].describe(), chosen.describe(),
                                                     entry.get("heuristic_s"), entry.get("chosen_s"),
                                                     entry.get("candidates", 0), from_cache=True, by=mode)
            return tuning
        except (KeyError, TypeError, ValueError, IndexError) as e:
            log.warning("autotune: ignoring the unreadable entry %s (%s)", path, e)
            return None

    def _store(self, path, tuning: Tuning, heuristic: tuple) -> None:
        kernels = {}
        for index, found in tuning.kernels.items():
            chosen = tuning.overrides.get(index, heuristic[index])
            kernels[str(index)] = {"schedule": _schedule_to_json(chosen),
                                   "heuristic_s": found.heuristic_s, "chosen_s": found.chosen_s,
                                   "candidates": found.candidates, "by": found.by}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(f".{time.monotonic_ns()}.tmp")
            temporary.write_text(json.dumps({"kernels": kernels}, default=str))
            temporary.replace(path)
        except OSError as e:  # an unwritable cache: the choice holds for this process only
            log.warning("autotune: cannot store %s (%s)", path, e)

    # -- timing ---------------------------------------------------------------------------------
    def _measure(self, compiled, extents, checked, backend, heuristic, user_overrides, run,
                 mode: str = "time") -> Tuning:
        """Kernel by kernel, the heuristic's schedule (with the earlier kernels' choices) against
        the unit's alternatives, each run on the call's inputs: the fastest whose values agree
        (timed, or predicted from its SASS)."""
        arrays = dict(zip(compiled.launch_facts.args, checked))
        spent = 0.0
        chosen: dict[int, object] = {}
        scoring: list[int] = [0]  # the kernel being tuned (mode "sass" scores that kernel's launch)

        def timed(overrides: dict) -> tuple[list, float]:
            nonlocal spent
            outputs, records = run({**overrides, **user_overrides})  # compiles, and warms up
            if mode == "sass":
                return outputs, _predicted_seconds(records, scoring[0], backend.device)
            seconds = backend.time_calls(lambda: run({**overrides, **user_overrides}), REPS)
            spent += seconds * REPS
            return outputs, seconds

        reference, current_s = timed({})
        tuning = Tuning()
        for index, plan in enumerate(compiled.plans):
            if is_host_plan(plan) or index in user_overrides:
                continue
            if mode == "sass":  # this kernel's prediction under the schedules chosen so far
                scoring[0] = index
                _, current_s = timed(chosen)
                if current_s == math.inf:
                    continue  # no SASS prediction of the heuristic's kernel: nothing to rank against
            before_s = current_s
            best = heuristic[index]
            tried = 0
            for candidate in plan.unit.alternatives(plan, heuristic[index], extents, arrays, backend.device)[:MAX_CANDIDATES]:
                if spent > BUDGET_S:
                    break
                tried += 1
                try:
                    outputs, seconds = timed({**chosen, index: candidate})
                except Exception as e:  # a candidate that cannot run is skipped, never an error
                    first_line = str(e).splitlines()[0] if str(e) else ""
                    log.info("autotune: kernel %d: skipped %s (%s: %s)", index, candidate.describe(),
                             type(e).__name__, first_line)
                    continue
                if not _same_values(outputs, reference):
                    log.info("autotune: kernel %d: skipped %s (its values differ from the heuristic's)", index,
                             candidate.describe())
                    continue
                if seconds < current_s:
                    best, current_s = candidate, seconds
            if best != heuristic[index]:
                chosen[index] = best
            tuning.kernels[index] = KernelTuning(heuristic[index].describe(), best.describe(), before_s, current_s, tried,
                                                 by=mode)
        tuning.overrides = chosen
        return tuning


def _sass_tools_missing() -> str:
    """What mode "sass" lacks here ("" when NVRTC and nvdisasm are both found)."""
    from fuser.lowering.backends import compile as cc
    from fuser.lowering.backends.sass import nvdisasm

    try:
        cc.find_compiler("nvrtc")
    except cc.CompilerUnavailable:
        return "NVRTC (the nvrtc extra)"
    return "" if nvdisasm() is not None else "nvdisasm (the nvrtc extra's nvidia-cuda-nvdisasm)"


def _predicted_seconds(records, index: int, device) -> float:
    """The performance model's time for kernel `index`'s launch from its SASS (inf: none, e.g.
    an empty launch, or a kernel nvdisasm could not read)."""
    p = records[index].performance(device) if index < len(records) else None
    if p is None or p.in_flight_from != "sass":
        return math.inf
    return p.predicted_s


__all__ = ["MODES", "Autotuner", "KernelTuning", "Tuning", "autotune_mode"]
