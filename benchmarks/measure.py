"""Measurements that need no GPU: kernels, global bytes, correctness, compile latency, host overhead.

How each figure is obtained
---------------------------
- kernels: `len(fd.last_kernels())` after a cached `execute`, with each kernel's scheduler.
- bytes: the cpu backend counts every global load and store the generated code makes
  (`fuser_ld*`/`fuser_st*` in the emulation; atomics excluded) per launch; we sum
  `bytes_loaded + bytes_stored` over the kernels of one `execute` and divide by the case's
  minimum (cases.py: each input read once, each output written once). 1.00 is the floor;
  2.00 means twice the traffic of an ideal single pass (e.g. a second read of the logits).
- compile latency (`compile_probe`): `python -m benchmarks.probe` in a fresh process with
  FUSER_CACHE_DIR set to an empty temporary folder (cold: no kernel or cubin cache on disk,
  nothing memoised in process), then once more with the same folder (warm: disk caches hit).
  The process times: import of fuser, the definition (`with FusionDefinition()`), and the first
  `execute`, whose executor records passes (concretize + pre-segmentation), segment (kernel
  planning), emission (CUDA C) and compile (the backend's compiler: g++ for cpu, NVRTC +
  module load for cuda). "Definition → cubin" = define + passes + segment + emission + cubin:
  on the cpu backend the cubin figure is NVRTC compiling the very sources the executor emitted
  (`lowering.backends.compile.compile_cuda`, arch sm_90 when no GPU), and g++ is reported beside it.
- host overhead (`host_overhead`): the row's own fusion, inputs and shape, already compiled;
  `execute` timed call by call (perf_counter_ns) after a warm-up while every kernel launch is
  swapped (EmptyLaunches) for: the real launch's argument checks and packing, then the launch of
  an EMPTY kernel through the same runtime. So the kernel's own time is excluded and everything
  else on the path stays: input checks, cache key and lookup, extents, output buffers,
  marshalling, the launch call. "+ launches" = the median wall time of such a call; "host" = the
  median of (wall - time inside the launch calls) = fuser's own share, the figure to compare.
  On the cuda backend the empty kernel gets the real grid and block (launches are asynchronous;
  the inputs are torch CUDA tensors, no copies, when torch is importable; the device is
  synchronised, untimed, every 64 calls). On the cpu backend the emulation runs every thread of
  a grid even when the kernel is empty (an empty 1024-block launch costs tens of ms: kernel
  work, not launch cost), so the empty kernel is launched as one block of one thread: the
  emulation's fixed dispatch cost, not a GPU's launch cost. The tiny fusion x + y on [8] f32
  gives the headline figure, with its real kernel too.
- memcheck overhead (`memcheck_overhead`): the median warm `execute` of a case on the cpu backend
  with FUSER_MEMCHECK=0 and =1, each on a fresh definition (an executor keeps the modules it
  compiled, so the setting must hold from the first call).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from fuser.benchmarks.cases import Case, check
from fuser.lowering.backends import Backend, get_backend
from fuser.lowering.runtime import with_prelude

REPO_ROOT = Path(__file__).resolve().parent.parent
SCHEDULER_ABBREV = {"pointwise": "pw", "reduction": "red", "inner_persistent": "pers"}


def error_text(e: BaseException) -> str:
    """One line: the exception type and the first line of its message (full text goes to JSON)."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}"[:300]


def compile_timings(fd) -> dict[str, float]:
    """Seconds spent in passes / segment / emission / compile for the last compilation."""
    return dict(fd.last_compile_info())


def median_ns(fn: Callable[[], object], calls: int, warmup: int, between: Callable[[], object] | None = None,
              every: int = 0) -> float:
    """Median wall time of one call of `fn` in ns; `between` (e.g. a GPU sync) runs untimed every
    `every` calls so queues never fill."""
    for _ in range(warmup):
        fn()
    if between:
        between()
    samples = []
    for i in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
        if between and every and (i + 1) % every == 0:
            between()
    if between:
        between()
    return float(statistics.median(samples))


# --------------------------------------------------------------------------- one case, cpu counters


def run_case(case: Case, backend: str | Backend, shape: Sequence[int] | None = None, exec_reps: int = 2,
             seed: int = 0, empty: "EmptyKernel | None" = None, host_calls: int = 1000) -> dict:
    """Build, execute, check against the numpy reference, count kernels and bytes; with `empty`,
    also the host overhead of a cached execute of this very fusion."""
    backend = get_backend(backend)
    shape = tuple(shape or case.shape)
    row: dict = {"shape": list(shape)}
    fd = case.build(shape)
    inputs = case.inputs(seed=seed, shape=shape)
    t0 = time.perf_counter()
    outputs = fd.execute(inputs, backend=backend)
    row["first_execute_s"] = time.perf_counter() - t0
    ok, err = check(outputs, case.reference(inputs))
    row["check_ok"], row["check_err"] = ok, err
    times = []
    for _ in range(exec_reps):
        t0 = time.perf_counter()
        fd.execute(inputs, backend=backend)
        times.append(time.perf_counter() - t0)
    row["exec_s_median"] = statistics.median(times) if times else None
    kernels = fd.last_kernels()
    row["kernels"] = len(kernels)
    row["schedulers"] = [k.scheduler for k in kernels]
    # A host segment (matmul/linear run by a library) has no grid or block.
    row["launch"] = [{"name": k.name, "grid": k.grid and list(k.grid), "block": k.block and list(k.block)}
                     for k in kernels]
    loaded = [k.bytes_loaded for k in kernels]
    stored = [k.bytes_stored for k in kernels]
    if kernels and None not in loaded and None not in stored:
        row["bytes_loaded"] = int(sum(loaded))
        row["bytes_stored"] = int(sum(stored))
        row["bytes_per_kernel"] = [[int(a), int(b)] for a, b in zip(loaded, stored)]
        row["min_bytes"] = case.min_bytes(shape)
        row["bytes_ratio"] = (row["bytes_loaded"] + row["bytes_stored"]) / row["min_bytes"]
        dram = [k.dram_bytes() for k in kernels if k.grid]
        if dram and None not in dram:  # the model's DRAM traffic: re-reads served by L2 counted once
            row["dram_bytes"] = int(sum(dram))
            row["dram_ratio"] = row["dram_bytes"] / row["min_bytes"]
    info = fd.cache_info()
    row["cache"] = {"hits": info.hits, "misses": info.misses, "entries": len(info.entries)}
    row["timings_in_process"] = compile_timings(fd)
    if empty is not None:
        try:
            row["host"] = host_overhead(fd, inputs, backend, empty, host_calls)
        except Exception as e:
            row["host"] = {"error": error_text(e)}
    return row


# --------------------------------------------------------------------------- compile latency


def compile_probe(case: Case, backend: str | Backend, cache_dir: str, timeout: float = 600.0) -> dict:
    """One probe process (see module doc). Returns its JSON record or {"error": ...}."""
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as tmp:
        out_path = tmp.name
    env = dict(os.environ, FUSER_CACHE_DIR=cache_dir, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    cmd = [sys.executable, "-m", "fuser.benchmarks.probe", case.key, get_backend(backend).name, out_path]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)
        record = json.loads(Path(out_path).read_text() or "{}")
        if proc.returncode != 0 and "error" not in record:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
            record["error"] = f"probe exited {proc.returncode}: {tail[0][:300]}"
    except subprocess.TimeoutExpired:
        record = {"error": f"probe timed out after {timeout:.0f} s"}
    except (OSError, json.JSONDecodeError) as e:
        record = {"error": error_text(e)}
    finally:
        Path(out_path).unlink(missing_ok=True)
    record["process_s"] = time.perf_counter() - t0
    return record


def compile_latency(case: Case, backend: str | Backend, cache_dir: str) -> dict:
    """{"cold": probe, "warm": probe} with an empty, then populated, cache folder."""
    cold = compile_probe(case, backend, cache_dir)
    warm = compile_probe(case, backend, cache_dir) if "error" not in cold else {"error": "skipped: cold failed"}
    return {"cold": cold, "warm": warm}


def definition_to_cubin_s(probe: dict) -> float | None:
    """define + passes + segment + emission + cubin compile, from one probe record."""
    parts = [probe.get(k) for k in ("define_s", "passes_s", "segment_s", "emission_s", "cubin_s")]
    return None if None in parts else float(sum(parts))


# --------------------------------------------------------------------------- host overhead


class EmptyKernel:
    """An empty kernel on a backend's runtime, launched like the executor launches kernels."""

    NAME = "fuser_bench_empty"

    def __init__(self, backend: str | Backend):
        self.backend = get_backend(backend)
        body = f'extern "C" __global__ void {self.NAME}() {{}}\nFUSER_HOST_LAUNCHER({self.NAME})\n'
        self.program = self.backend.program(with_prelude(body))
        self._medians: dict[tuple, float] = {}

    def launch(self, grid, block, needs_sync: bool = True):
        return self.program.launch(self.NAME, grid, block, [], needs_sync=needs_sync)

    def median_us(self, grid, block, needs_sync: bool, calls: int, sync=None) -> float:
        key = (tuple(grid), tuple(block), needs_sync)
        if key not in self._medians:
            self._medians[key] = median_ns(lambda: self.launch(grid, block, needs_sync), calls,
                                           warmup=max(10, calls // 20), between=sync, every=64) / 1e3
        return self._medians[key]


class EmptyLaunches:
    """While active, every kernel launch is replaced by the launch of an empty kernel (on the GPU:
    the same grid and block; emulated on the host: one block of one thread, see below), and the
    time inside those launch calls is accumulated ("in launch"). Two paths are swapped:

    - the full path's `program.launch(...)`: the real launch's argument checks and packing
      (`pack_args`) run, then the empty kernel; both count as "in launch" (as before launch plans);
    - a launch plan's prebuilt launches (`BoundLaunch` / `BoundGpuLaunch`): only the raw C
      launcher call (cpu, Python path), the cuLaunchKernel call (cuda, Python path) or the native
      launcher's call (lowering/backends/gpu_launcher.py, given the empty kernel's launch record) is
      swapped and timed, so writing the data pointers into the argument buffers and everything
      else in Python count as fuser's own share: "in launch" is the bare launch of the empty
      kernel (natively: with the launcher's own few instructions around it) and nothing of ours."""

    def __init__(self, empty: EmptyKernel):
        self.empty = empty
        self.program_type = type(empty.program)
        self.ns = 0
        self._swapped: list = []

    def __enter__(self):
        original = self.original = self.program_type.launch
        swap = self

        def launch(program, kernel_name, grid, block, args, **options):
            if program is swap.empty.program:
                return original(program, kernel_name, grid, block, args, **options)
            t0 = time.perf_counter_ns()
            try:
                program.pack_args(kernel_name, args)
                if not swap.empty.backend.on_gpu:
                    # Every emulated thread costs CPU time even in an empty kernel (that is kernel
                    # work, not launch cost): one block of one thread = the fixed dispatch cost.
                    return swap.empty.launch(1, 1, False)
                return swap.empty.launch(grid, block)
            finally:
                swap.ns += time.perf_counter_ns() - t0

        self.program_type.launch = launch
        self._swap_bound_launches()
        return self

    def _swap_bound_launches(self) -> None:
        if self.empty.backend.on_gpu:
            from fuser.lowering.backends.gpu_runtime import BoundGpuLaunch

            empty_bound = self.empty.program.bind(self.empty.NAME, 1, 1, [])
            empty_handle, launch = empty_bound.fn, empty_bound.launcher
            swap = self

            def timed_empty(function, grid, block, shared_bytes, stream, params, kernel_name=""):
                t0 = time.perf_counter_ns()
                launch(empty_handle, grid, block, 0, stream, b"", kernel_name)
                swap.ns += time.perf_counter_ns() - t0

            def timed_native(empty_native, empty_record):
                def timed(record, stream, *pointers):  # the pointers go nowhere: the empty kernel has none
                    t0 = time.perf_counter_ns()
                    code = empty_native(empty_record, stream)
                    swap.ns += time.perf_counter_ns() - t0
                    return code
                return timed

            for bound in list(BoundGpuLaunch.instances):
                if bound is empty_bound:
                    continue
                if bound.native is not None and empty_bound.native is not None:
                    # A native launch: the empty kernel's launch record, same grid and block.
                    record = empty_bound.launch_record(empty_handle, bound.grid, bound.block, 0, "", [], [])
                    self._swapped.append((bound, "native", bound.native))
                    bound.native = timed_native(empty_bound.native, record)
                else:
                    self._swapped.append((bound, "launcher", bound.launcher))
                    bound.launcher = timed_empty
            return
        from fuser.lowering.backends.cpu_runtime import BoundLaunch

        empty = self.empty.program.bind(self.empty.NAME, 1, 1, [], needs_sync=False)
        empty_state = empty._state()
        self._empty = (empty, empty_state)  # call_args are raw addresses into these: keep them alive
        raw, raw_args = empty._call, empty_state.call_args
        swap = self

        def timed_empty(*_args):
            t0 = time.perf_counter_ns()
            code = raw(*raw_args)
            swap.ns += time.perf_counter_ns() - t0
            return code

        empty_native = empty.native

        def timed_native(*_pointers):  # the pointers go nowhere: the empty kernel has none
            t0 = time.perf_counter_ns()
            counts = empty_native()
            swap.ns += time.perf_counter_ns() - t0
            return counts

        for bound in list(BoundLaunch.instances):
            if bound is not empty:
                self._swapped += [(bound, "_call", bound._call), (bound, "native", bound.native)]
                bound._call = timed_empty
                if bound.native is not None and empty_native is not None:
                    bound.native = timed_native  # the native launcher's call of the empty kernel
                else:
                    bound.native = None

    def __exit__(self, *exc):
        self.program_type.launch = self.original
        for bound, name, value in self._swapped:
            setattr(bound, name, value)
        self._swapped.clear()


def host_overhead(fd, inputs, backend: str | Backend, empty: EmptyKernel, calls: int = 1000, sync=None,
                  budget_s: float = 1.0, min_calls: int = 20) -> dict:
    """A cached `execute` of `fd` on `inputs` (already compiled) with every kernel swapped for an
    empty one of the same geometry (module doc): medians of the wall time per call
    ("with_empty_kernels_us"), of the time inside the launch calls, and of their difference
    ("host_us", fuser's own share). The number of calls adapts to about `budget_s`."""
    with EmptyLaunches(empty) as swap:
        t0 = time.perf_counter()
        for _ in range(3):
            fd.execute(inputs, backend=backend)
        if sync:
            sync()
        per_call = (time.perf_counter() - t0) / 3
        calls = max(min_calls, min(calls, int(budget_s / max(per_call, 1e-9))))
        for _ in range(max(3, calls // 20)):
            fd.execute(inputs, backend=backend)
        if sync:
            sync()
        walls, hosts, launches = [], [], []
        for i in range(calls):
            before = swap.ns
            t0 = time.perf_counter_ns()
            fd.execute(inputs, backend=backend)
            wall = time.perf_counter_ns() - t0
            walls.append(wall)
            launches.append(swap.ns - before)
            hosts.append(wall - launches[-1])
            if sync and (i + 1) % 64 == 0:
                sync()
        if sync:
            sync()
    med = statistics.median
    return {"calls": calls, "kernels": len(fd.last_kernels()), "with_empty_kernels_us": med(walls) / 1e3,
            "in_launch_us": med(launches) / 1e3, "host_us": med(hosts) / 1e3}


MEMCHECK_CASES = ("softmax:f32:64x8192", "bcast_chain:f32:256x4096")
"""Cases whose memcheck overhead a cpu run reports: a row reduction and a pointwise chain."""


@contextlib.contextmanager
def env(name: str, value: str):
    """`name`=value for the block, then as before."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def warm_execute_ms(case: Case, backend: str | Backend, reps: int, inputs=None, sync=None) -> float:
    """Median ms of `reps` cached `execute` calls of a fresh definition of `case` (each call
    followed by `sync`, on a GPU, so the time is the kernels' too)."""
    fd = case.build()
    inputs = case.inputs() if inputs is None else inputs
    fd.execute(inputs, backend=backend)  # compiles (or loads) under the current settings
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fd.execute(inputs, backend=backend)
        if sync is not None:
            sync()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def memcheck_overhead(case: Case, reps: int = 15) -> dict:
    """Warm execute time of `case` on the cpu backend without and with FUSER_MEMCHECK=1."""
    record: dict = {"case": case.label}
    try:
        for key, value in (("off_ms", "0"), ("on_ms", "1")):
            with env("FUSER_MEMCHECK", value):
                record[key] = warm_execute_ms(case, "cpu", reps)
    except Exception as e:
        record["error"] = error_text(e)
    return record


INDEX_CHECK_CASES = ("ce_fwd_aot:f32:64x32000", "ce_fwd_nvf:f32:64x32000")
"""Cases whose in-kernel index check cost a run reports (the gather of cross-entropy's target)."""


def index_check_overhead(case: Case, backend: str | Backend, reps: int = 21, inputs=None, sync=None) -> dict:
    """Warm execute time of `case` with the in-kernel index checks (the default) and without
    (`_disable_options=["kernel_index_checks"]`): what the checks cost. One definition, the two
    variants' calls interleaved, so drift in the machine's load falls on both alike (timed one
    after the other, a loaded 2-core machine showed x0.87 and x2.55 for the same kernels)."""
    record: dict = {"case": case.label}
    unchecked = ["kernel_index_checks"]
    try:
        fd = case.build()
        inputs = case.inputs() if inputs is None else inputs
        fd.execute(inputs, backend=backend)  # compiles (or loads) both variants
        fd.execute(inputs, backend=backend, _disable_options=unchecked)
        times: dict[str, list[float]] = {"checked_ms": [], "unchecked_ms": []}
        for _ in range(reps):
            for key, disable in (("checked_ms", ()), ("unchecked_ms", unchecked)):
                t0 = time.perf_counter()
                fd.execute(inputs, backend=backend, _disable_options=disable)
                if sync is not None:
                    sync()
                times[key].append(time.perf_counter() - t0)
        record.update({key: 1e3 * statistics.median(t) for key, t in times.items()})
    except Exception as e:
        record["error"] = error_text(e)
    return record


def tiny_fusion_overhead(backend: str | Backend, empty: EmptyKernel, calls: int, array_fn=None, sync=None) -> dict:
    """The headline host overhead: z = x + y on [8] f32, one pointwise kernel: a cached `execute`
    with its real kernel, the same with the kernel swapped for an empty one, and the empty
    kernel's launch alone."""
    from fuser import DataType, FusionDefinition

    backend = get_backend(backend)
    with FusionDefinition("tiny_add") as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(x, y))
    inputs = [np.arange(1, 9, dtype=np.float32), np.full(8, 0.5, np.float32)]
    if array_fn:
        inputs = [array_fn(a) for a in inputs]
    fd.execute(inputs, backend=backend)
    k = fd.last_kernels()[0]
    needs_sync = any(k.needs_sync for k in fd.last_kernels())
    record = {"fusion": "x + y, [8] f32", "grid": list(k.grid), "block": list(k.block),
              "real_kernel_us": median_ns(lambda: fd.execute(inputs, backend=backend), calls,
                                          warmup=max(10, calls // 20), between=sync, every=64) / 1e3}
    record.update(host_overhead(fd, inputs, backend, empty, calls, sync, budget_s=5.0))
    grid, block = (tuple(k.grid), tuple(k.block)) if backend.on_gpu else ((1, 1, 1), (1, 1, 1))
    record["empty_grid"], record["empty_block"] = list(grid), list(block)
    record["empty_launch_us"] = empty.median_us(grid, block, needs_sync and backend.on_gpu, calls, sync)
    return record


def region_overhead(device: str, empty: EmptyKernel, calls: int = 2000, budget_s: float = 2.0) -> dict:
    """The host overhead of one fused region under torch.compile: `(x + y) * 2 - sin(y)` on [8]
    f32 tensors of `device`, compiled with backend="fuser" (one region, one kernel). Medians of
    the region's call (FusedRegion, as the compiled graph calls it) with its kernel swapped for an
    empty one: "with_empty_kernels_us", the launch's share "in_launch_us" and fuser's own
    "host_us"; beside them the whole compiled call ("compiled_call_us": Dynamo's guards and
    AOTAutograd's wrapper included, real kernel) and an eager `torch.add` of the same tensors
    ("eager_add_us"), timed interleaved with the region so that load slows both alike."""
    import torch

    from fuser.torch_backend import make_backend

    def program(x, y):
        return (x + y) * 2 - y.sin()

    x = torch.arange(1, 9, dtype=torch.float32, device=device)
    y = torch.full((8,), 0.5, device=device)
    reports: list = []
    torch._dynamo.reset()
    compiled = torch.compile(program, backend=make_backend(reports))
    compiled(x, y)
    region = reports[0].fusions[0].region
    record = {"program": "(x + y) * 2 - sin(y), [8] f32", "compiled_call_us":
              median_ns(lambda: compiled(x, y), calls, warmup=max(10, calls // 20)) / 1e3}
    with EmptyLaunches(empty) as swap:
        for _ in range(max(20, calls // 20)):
            region(x, y)
        walls, hosts, adds = [], [], []
        deadline = time.perf_counter() + budget_s
        for i in range(calls):
            before = swap.ns
            t0 = time.perf_counter_ns()
            region(x, y)
            wall = time.perf_counter_ns() - t0
            walls.append(wall)
            hosts.append(wall - (swap.ns - before))
            t0 = time.perf_counter_ns()
            torch.add(x, y)
            adds.append(time.perf_counter_ns() - t0)
            if i >= 100 and time.perf_counter() > deadline:
                break
    med = statistics.median
    record.update(calls=len(walls), with_empty_kernels_us=med(walls) / 1e3, host_us=med(hosts) / 1e3,
                  in_launch_us=(med(walls) - med(hosts)) / 1e3, eager_add_us=med(adds) / 1e3)
    return record
