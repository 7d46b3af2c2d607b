"""GPU measurements (backend "cuda"; only where `lowering.backends.gpu_runtime.gpu_available()` is true).

How time is measured
--------------------
- Kernel time: CUDA events (`lowering.backends.gpu_runtime.time_kernel`: warm-up calls, then one event
  pair per call recorded back to back, read at the end), median of the per-call times. What is
  timed is a *replay* of the launches one `fd.execute` made (the same compiled kernels, grids,
  streams and argument buffers, captured at `cuda_driver.launch`, which the full path and launch
  plans both end in), so the executor's Python host overhead stays out of the kernel figure. The full `execute` is timed the same way
  too ("exec": if it is host-bound, its events include the GPU idling while Python runs).
- Inputs rotate over several sets (distinct buffers) whose total exceeds 2 x the L2 size, so a
  call never finds its inputs in L2 from the previous call. Data: normal logits (std 2),
  labels in range with ~5 % ignore_index, never all zeros; set 0 comes from cases.py, the other
  sets are scaled copies (labels rolled) made on the device.
- Achieved bandwidth = the case's minimum bytes / kernel time. The reference is a device-to-
  device copy of 1 GiB (cuMemcpyDtoD, bytes = 2 x size: read + write) timed in the same run.
- torch eager and torch.compile (if torch imports) run the same math (cases.torch_*) on the
  same input sets, timed with torch.cuda events the same way; ratio = torch time / fuser time
  (> 1: fuser faster). torch.compile's first calls (compilation) are warm-up, not timed.
- Correctness on the GPU: fuser's output for set 0 against torch eager's (or, without torch, the
  numpy reference), with the tolerances of cases.check.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence

import numpy as np

from fuser.benchmarks.cases import BF16, Case, check
from fuser.benchmarks.measure import error_text

COPY_BYTES = 1 << 30


def available() -> tuple[bool, str]:
    try:
        from fuser.lowering.backends.gpu_runtime import gpu_available
    except ImportError as e:
        return False, f"fuser.lowering.backends.gpu_runtime not importable: {e}"
    return gpu_available()


def import_torch():
    """torch if it imports and sees a CUDA device, else None (torch comparisons are optional)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


class Gpu:
    def __init__(self):
        from fuser.lowering.backends import gpu_runtime

        self.rt = gpu_runtime
        self.drv = gpu_runtime.driver()  # pycuda.driver with the primary context current
        dev = self.drv.Context.get_device()
        self.name = dev.name()
        self.capability = "sm_%d%d" % dev.compute_capability()
        self.l2_bytes = int(dev.get_attribute(self.drv.device_attribute.L2_CACHE_SIZE))
        self.memory_bytes = int(dev.total_memory())
        try:
            self.driver_version = self.drv.get_driver_version()
        except Exception:
            self.driver_version = None
        self.torch = import_torch()

    def synchronize(self) -> None:
        self.drv.Context.synchronize()

    # -- device-to-device copy: the bandwidth we compare against --------------------------------
    def copy_bandwidth(self, nbytes: int = COPY_BYTES, iters: int = 30) -> dict:
        return self.rt.copy_bandwidth(nbytes, iters)

    # -- input sets --------------------------------------------------------------------------
    def _to_device(self, x):
        torch = self.torch
        if torch is None or not isinstance(x, np.ndarray):
            return x
        if x.dtype == BF16:
            return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).cuda()
        return torch.from_numpy(x).cuda()

    def _variant(self, x, i: int):
        """Set i from set 0: floats scaled by (1 + 1e-3 i), integer labels rolled by i rows."""
        torch = self.torch
        if torch is not None and isinstance(x, torch.Tensor):
            if x.dtype.is_floating_point:
                return (x.float() * (1.0 + 1e-3 * i)).to(x.dtype)
            return torch.roll(x, i, 0)
        if isinstance(x, np.ndarray):
            if x.dtype.kind == "f" or x.dtype == BF16:
                return (x.astype(np.float32) * np.float32(1.0 + 1e-3 * i)).astype(x.dtype)
            return np.roll(x, i, 0)
        return x  # runtime scalars

    def input_sets(self, case: Case, host_inputs: list) -> list[list]:
        first = [self._to_device(x) for x in host_inputs]
        set_bytes = sum(int(getattr(x, "nbytes", 0)) for x in host_inputs)
        n_sets = max(2, math.floor(2 * self.l2_bytes / max(set_bytes, 1)) + 1)
        n_sets = min(n_sets, 256)
        return [first] + [[self._variant(x, i) for x in first] for i in range(1, n_sets)]

    # -- fuser: capture the launches of one execute, replay them --------------------------------
    def capture(self, fd, inputs: list) -> tuple[list, Callable[[], None]]:
        """Runs fd.execute once, recording every kernel launch (the full path's and a launch
        plan's alike: both end in cuda_driver.launch) and keeping the per-launch workspaces alive;
        returns (outputs, replay). The outputs hold the buffers the recorded launches write."""
        from fuser.lowering.backends import cuda_driver
        from fuser.lowering.backends.cuda import DeviceMemory
        from fuser.lowering.backends.gpu_runtime import BoundGpuLaunch

        original_launch, original_workspace = cuda_driver.launch, DeviceMemory.workspace
        calls: list[tuple] = []
        kept: list = []  # grid reductions' workspaces: the last block leaves them zeroed for a replay

        def recording(*args):
            calls.append(args)
            return original_launch(*args)

        def keeping(memory, words):
            kept.append(original_workspace(memory, words))
            return kept[-1]

        cuda_driver.launch, DeviceMemory.workspace = recording, keeping
        try:
            with BoundGpuLaunch.through_python():  # native launches do not pass cuda_driver.launch
                outputs = fd.execute(inputs, backend="cuda")
        finally:
            cuda_driver.launch, DeviceMemory.workspace = original_launch, original_workspace

        def replay() -> None:
            for args in calls:
                original_launch(*args)

        replay.kept = (kept, outputs)  # type: ignore[attr-defined]  # what the replayed launches write
        replay.launches = [functools.partial(original_launch, *args) for args in calls]  # type: ignore[attr-defined]
        return outputs, replay

    def time_rotating(self, fns: Sequence[Callable[[], object]], warmup: int, iters: int) -> float:
        """Median ms per call, CUDA events (pycuda), cycling through fns (one per input set)."""
        state = {"i": 0}

        def step():
            fns[state["i"] % len(fns)]()
            state["i"] += 1

        return float(statistics.median(self.rt.time_kernel(step, warmup=warmup, iters=iters)))

    def torch_time_rotating(self, fn, sets, warmup: int, iters: int) -> float:
        torch = self.torch
        for i in range(warmup):
            fn(*sets[i % len(sets)])
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for i, (start, end) in enumerate(events):
            start.record()
            fn(*sets[i % len(sets)])
            end.record()
        torch.cuda.synchronize()
        return float(statistics.median(s.elapsed_time(e) for s, e in events))

    def to_numpy(self, x):
        torch = self.torch
        if torch is not None and isinstance(x, torch.Tensor):
            x = x.detach()
            if x.dtype == torch.bfloat16:
                return x.view(torch.int16).cpu().numpy().view(BF16)
            return x.cpu().numpy()
        return np.asarray(x)

    # -- one case ----------------------------------------------------------------------------
    def measure_case(self, case: Case, warmup: int, iters: int, torch_compile: bool, empty=None,
                     host_calls: int = 1000) -> dict:
        row: dict = {}
        host_inputs = case.inputs(seed=0)
        sets = self.input_sets(case, host_inputs)
        row["input_sets"] = len(sets)
        row["input_set_bytes"] = int(sum(int(getattr(x, "nbytes", 0)) for x in host_inputs))
        fd = case.build()
        fd.execute(sets[0], backend="cuda")  # compile
        replays, outputs0 = [], None
        for s in sets:
            outs, replay = self.capture(fd, s)
            outputs0 = outs if outputs0 is None else outputs0
            replays.append(replay)
        self.synchronize()
        row["kernels"] = len(fd.last_kernels())
        kernel_ms = self.time_rotating(replays, warmup, iters)
        row["kernel_us"] = kernel_ms * 1e3
        row["kernel_detail"] = self.each_kernel(fd, replays, warmup, iters)
        predicted = [k["predicted_us"] for k in row["kernel_detail"] if k.get("predicted_us") is not None]
        row["predicted_us"] = sum(predicted) if predicted else None
        row["achieved_gbps"] = case.min_bytes() / (kernel_ms * 1e-3) / 1e9
        row["exec_us"] = self.time_rotating([lambda s=s: fd.execute(s, backend="cuda") for s in sets],
                                            warmup, iters) * 1e3
        if empty is not None:
            from fuser.benchmarks.measure import host_overhead

            try:
                if self.torch is not None:  # zero-copy inputs: the row's own fusion and inputs
                    row["host"] = host_overhead(fd, sets[0], "cuda", empty, host_calls, sync=self.synchronize)
                else:  # numpy inputs are copied on every call: measure at the tiny shape instead
                    small = case.build(case.spec.tiny)
                    small_inputs = case.inputs(seed=1, shape=case.spec.tiny)
                    small.execute(small_inputs, backend="cuda")
                    row["host"] = host_overhead(small, small_inputs, "cuda", empty, host_calls, sync=self.synchronize)
                    row["host"]["shape"] = list(case.spec.tiny)
            except Exception as e:
                row["host"] = {"error": error_text(e)}
        fuser_out = [self.to_numpy(o) for o in outputs0]
        if self.torch is None:
            row["check_against"] = "numpy reference"
            row["check_ok"], row["check_err"] = check(fuser_out, case.reference(host_inputs))
            return row
        torch = self.torch
        fn = case.spec.torch_fn(torch)
        try:
            with torch.no_grad():
                expected = fn(*sets[0])
                expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
                row["check_against"] = "torch eager"
                row["check_ok"], row["check_err"] = check(fuser_out, [self.to_numpy(e) for e in expected])
                row["eager_us"] = self.torch_time_rotating(fn, sets, warmup, iters) * 1e3
        except Exception as e:
            row["eager_error"] = error_text(e)
        if torch_compile:
            try:
                try:  # every case's function shares its kind's code object: start clean
                    torch._dynamo.reset()
                except AttributeError:
                    pass
                compiled = torch.compile(fn, dynamic=False)
                with torch.no_grad():
                    for s in sets[:2]:
                        compiled(*s)  # compilation happens here, untimed
                    row["compile_us"] = self.torch_time_rotating(compiled, sets, warmup, iters) * 1e3
            except Exception as e:
                row["torch_compile_error"] = error_text(e)
        for name in ("eager", "compile"):
            if row.get(f"{name}_us"):
                row[f"vs_{name}"] = row[f"{name}_us"] / row["kernel_us"]
        return row

    def each_kernel(self, fd, replays, warmup: int, iters: int) -> list[dict]:
        """Per kernel of the fusion: its schedule, its own time (its launch alone, replayed over
        the input sets) and the performance model's prediction on this GPU, with ptxas's view."""
        from fuser.lowering.backends.gpu_runtime import device_spec

        device = device_spec()
        launched = [k for k in fd.last_kernels() if k.grid is not None]
        detail = []
        for j, record in enumerate(launched):
            entry: dict = {"name": record.name, "schedule": record.schedule.describe() if record.schedule else None}
            if all(j < len(r.launches) for r in replays):
                entry["kernel_us"] = self.time_rotating([r.launches[j] for r in replays], warmup, iters) * 1e3
            try:
                performance = record.performance(device)
            except Exception as e:  # the model is a report: its failure does not lose the timing
                entry["model_error"] = error_text(e)
                performance = None
            if performance is not None:
                entry.update(predicted_us=performance.predicted_s * 1e6, registers=performance.registers,
                             spill_bytes=performance.spill_bytes, ctas_per_sm=performance.ctas_per_sm,
                             in_flight_per_sm=performance.in_flight_per_sm, load_bytes=performance.load_bytes)
            detail.append(entry)
        return detail

    def release(self) -> None:
        """Hand cached device memory back between cases (the probe processes need room too)."""
        self.synchronize()
        if self.torch is not None:
            self.torch.cuda.empty_cache()
        try:
            self.rt.free_pool()
        except Exception:
            pass

    def tensor_fn(self):
        """numpy array -> CUDA tensor (host-overhead runs use zero-copy torch inputs)."""
        return self._to_device if self.torch is not None else None

    def info(self) -> dict:
        return {"name": self.name, "capability": self.capability, "l2_bytes": self.l2_bytes,
                "memory_bytes": self.memory_bytes, "driver_version": self.driver_version,
                "torch": getattr(self.torch, "__version__", None)}
