"""`execute(..., profile=True)` and `fd.profile()`: nvFuser's FusionProfile, per kernel.

Each kernel's time is the wall time of its launch call on the calling thread: on the cpu
backend that is the kernel's run (launches are synchronous), a host segment's is its library
call. On the cuda backend launches are asynchronous, so the times are launch (enqueue) times,
not kernel times: fuser has no CUDA-event timing yet. The reference backend launches nothing:
its profile holds the host time only. Launches are found by watching, with `sys.setprofile`
on the calling thread during the profiled call only, the Python functions every backend
launches through (a kernel program's `launch`, a launch plan's bound launch, a host call)."""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

_LAUNCHERS = (
    ("fuser.lowering.backends.cpu_runtime", "CpuModule", "launch"),
    ("fuser.lowering.backends.cpu_runtime", "BoundLaunch", "__call__"),
    ("fuser.lowering.backends.gpu_runtime", "GpuModule", "launch"),
    ("fuser.lowering.backends.gpu_runtime", "BoundGpuLaunch", "__call__"),
    ("fuser.lowering.execution.host_calls", "HostCall", "__call__"),
)
"""(module, class, method) of each function a kernel or host segment is launched through."""

_fusion_ids = itertools.count()


@dataclass
class KernelProfile:
    """One launched kernel (nvFuser's KernelProfile fields that fuser can fill)."""

    name: str
    scheduler: str
    segment_id: int
    device: str
    time_ms: float | None
    grid_str: str
    block_str: str
    input_bytes: int | None = None
    output_bytes: int | None = None

    @property
    def effective_bandwidth_gbs(self) -> float | None:
        """Global bytes moved per second (cpu backend: counted bytes over the launch's time)."""
        if not self.time_ms or self.input_bytes is None or self.output_bytes is None:
            return None
        return (self.input_bytes + self.output_bytes) / (self.time_ms * 1e6)


@dataclass
class FusionProfile:
    """The profile of one `execute(..., profile=True)` (nvFuser's FusionProfile)."""

    fusion_id: int
    host_time_ms: float
    """The whole execute call, wall time."""
    kernel_profiles: list[KernelProfile] = field(default_factory=list)

    @property
    def segments(self) -> int:
        return len(self.kernel_profiles)

    @property
    def kernel_time_ms(self) -> float:
        return sum(k.time_ms or 0.0 for k in self.kernel_profiles)


def _watched_codes() -> set:
    codes = set()
    for module_name, cls, method in _LAUNCHERS:
        module = sys.modules.get(module_name)  # a backend not loaded launches nothing
        target = getattr(getattr(module, cls, None), method, None)
        if target is not None:
            codes.add(target.__code__)
    return codes


def profiled(run: Callable[[], list], fd, device: Callable[[], str]) -> tuple[list, FusionProfile]:
    """(run()'s outputs, the profile of the kernels it launched); device() names the backend
    that ran them, once run() returned."""
    codes, starts, times = _watched_codes(), [], []

    def watch(frame, event, arg):
        if frame.f_code not in codes:
            return
        if event == "call":
            starts.append(time.perf_counter())
        elif event == "return" and starts:
            start = starts.pop()
            if not starts:  # the outermost launch call only
                times.append((time.perf_counter() - start) * 1e3)

    previous = sys.getprofile()
    begin = time.perf_counter()
    sys.setprofile(watch)
    try:
        outputs = run()
    finally:
        sys.setprofile(previous)
    host_ms = (time.perf_counter() - begin) * 1e3
    fusion_id = fd.__dict__.setdefault("_profile_id", next(_fusion_ids))
    launched = [r for r in fd.last_kernels() if r.grid is None or tuple(r.grid) != (0, 0, 0)]
    if len(launched) != len(times):  # a launch path this module does not know: no per-kernel times
        times = [None] * len(launched)
    kernels = [KernelProfile(r.name, r.scheduler, k, device(), t, str(tuple(r.grid)) if r.grid else "",
                             str(tuple(r.block)) if r.block else "", r.bytes_loaded, r.bytes_stored)
               for k, (r, t) in enumerate(zip(launched, times))]
    return outputs, FusionProfile(fusion_id, host_ms, kernels)
