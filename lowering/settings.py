"""Every environment variable the lowering reads, read and checked here and nowhere else.

Each function reads its variable when called (not at import). The hot path of a cached
`execute` does not call them: it reads `launch_settings()`, a snapshot of the variables every
execute consults (FUSER_MEMCHECK, FUSER_CPU_THREADS, FUSER_DISABLE) taken on first use. After
changing one of those in a running process, call `settings.reload()` (tests do, after
monkeypatch.setenv); the others need nothing. A bad value raises `SettingError` naming the
variable, its value and what it accepts. (`FUSER_DISABLE` is parsed by `passes.concretize`,
which may not import the lowering; the snapshot only holds its text.)

| variable | accepts | default |
| --- | --- | --- |
| FUSER_CACHE_DIR | a folder (created on demand) for compiled kernels | ~/.cache/fuser |
| FUSER_SHARED_CACHE_DIR | a folder for what is built once per installation (cpu runtime, precompiled header, NVRTC headers) | ~/.cache/fuser |
| FUSER_CXX | the C++20 compiler of the cpu backend (name on PATH or path) | g++ |
| FUSER_CPU_THREADS | OS threads a cpu launch uses: an integer from 0 to 1024, 0 = one per core | 0 |
| FUSER_CACHE_SIZE | fusions an executor keeps compiled: an integer >= 1 | 100 |
| FUSER_COMPILE_THREADS | regions of a torch.compile graph compiled at once: an integer >= 0, 0 = one per core | 0 |
| FUSER_MEMCHECK | 1: cpu kernels check every global access against its buffer (0 or 1) | 0 |
| FUSER_RACECHECK | 1: cpu kernels report data races between the threads of a block (0 or 1) | 0 |
| FUSER_DISABLE | comma-separated disable options: concretize_resize_extents, kernel_index_checks, fused_linear_cross_entropy, native_launcher | none |
| FUSER_LOG | comma-separated log channels: recompile, torch | none |
| FUSER_GPU_PROFILE | the GPU the cpu backend schedules its kernels for: h100 or h200 (lowering/device.py) | h100 |
| FUSER_AUTOTUNE | 1: a fusion's first call at new schedules times alternatives, keeps the fastest; sass: ranks them by the performance model on their SASS (0, 1 or sass) | 0 |
| CUDA_HOME, CUDA_PATH | CUDA toolkit folders searched for nvcc and headers | /usr/local/cuda |
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path
from typing import NamedTuple

from fuser.lowering.errors import FuserError

LOG_CHANNELS = ("recompile", "torch")
DEFAULT_CACHE_SIZE = 100
"""As nvFuser's FusionExecutorCache."""


class SettingError(FuserError, ValueError):
    """An environment variable has a value fuser cannot use."""


def _text(name: str) -> str | None:
    """The variable's value, None when unset or blank (blank means "use the default" only
    where the variable names a path or program; numbers must be spelled out)."""
    value = os.environ.get(name)
    return value if value is not None and value.strip() else None


def _integer(name: str, default: int, minimum: int, meaning: str, maximum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError:
        number = None
    if number is None or number < minimum or (maximum is not None and number > maximum):
        raise SettingError(f"{name}={value!r}: expected {meaning}")
    return number


def cache_root() -> Path:
    """FUSER_CACHE_DIR: where compiled kernels are kept (per backend in a subfolder)."""
    return Path(_text("FUSER_CACHE_DIR") or Path.home() / ".cache" / "fuser")


def shared_cache_root() -> Path | None:
    """FUSER_SHARED_CACHE_DIR: where what is built once per installation is kept (the cpu
    runtime, its precompiled header, NVRTC's headers), shared by every FUSER_CACHE_DIR; None
    when unset and there is no home folder."""
    text = _text("FUSER_SHARED_CACHE_DIR")
    if text:
        return Path(text)
    try:
        return Path.home() / ".cache" / "fuser"
    except RuntimeError:  # no home directory to be found
        return None


def cxx() -> str:
    """FUSER_CXX: the C++ compiler of the cpu backend."""
    return _text("FUSER_CXX") or "g++"


MAX_CPU_THREADS = 1024
"""Above the cores of any usual host: far past it libgomp kills the process ("Thread creation
failed"), and past 2**31 the launch config's int32 would wrap."""


def cpu_threads() -> int:
    """FUSER_CPU_THREADS: OS threads per cpu launch; 0 = one per core."""
    return _integer("FUSER_CPU_THREADS", 0, 0, f"an integer from 0 to {MAX_CPU_THREADS} (OS threads per cpu "
                    "launch; 0 = one per core)", maximum=MAX_CPU_THREADS)


def compile_threads() -> int:
    """FUSER_COMPILE_THREADS: regions of a graph compiled concurrently at partition time (g++
    runs as processes, NVRTC releases the GIL); 0 = one per core, 1 = one after another."""
    value = _integer("FUSER_COMPILE_THREADS", 0, 0, "an integer >= 0 (regions compiled at once; 0 = one per core)")
    return value or os.cpu_count() or 1


def _switch(name: str, meaning: str) -> bool:
    """A 0/1 variable (unset: 0); `meaning` says what 1 does, in the error of a bad value."""
    value = os.environ.get(name)
    if value is None:
        return False
    if value.strip() not in ("0", "1"):
        raise SettingError(f"{name}={value!r}: expected 0 or 1 (1 {meaning})")
    return value.strip() == "1"


def racecheck() -> bool:
    """FUSER_RACECHECK: build cpu kernels that report races between the threads of a block
    (lowering/runtime/fuser_cpu_racecheck.h)."""
    return _switch("FUSER_RACECHECK", "reports data races between the threads of a block of cpu kernels")


def autotune() -> bool | str:
    """FUSER_AUTOTUNE: a fusion's first call at new heuristic schedules compares alternatives and
    keeps the fastest (lowering/execution/autotune.py) unless `execute(autotune=False)`: 1 times
    them on the device, `sass` ranks them by the performance model on their SASS (no GPU needed)."""
    value = os.environ.get("FUSER_AUTOTUNE")
    if value is None:
        return False
    if value.strip() not in ("0", "1", "sass"):
        raise SettingError(f"FUSER_AUTOTUNE={value!r}: expected 0, 1 or sass (1 times each fusion's alternative "
                           f"schedules on its first call, sass ranks them by the performance model on their SASS)")
    return "sass" if value.strip() == "sass" else value.strip() == "1"


def memcheck() -> bool:
    """FUSER_MEMCHECK: compile cpu kernels with bounds checks on every global access."""
    return _switch("FUSER_MEMCHECK", "checks every global access of cpu kernels")


def disable() -> str:
    """FUSER_DISABLE: comma-separated disable options (nvFuser's NVFUSER_DISABLE), each one
    that fuser has (passes.concretize.KNOWN_DISABLE_OPTIONS); the raw text is returned."""
    from fuser.passes.concretize import KNOWN_DISABLE_OPTIONS

    value = os.environ.get("FUSER_DISABLE", "")
    unknown = [o.strip() for o in value.split(",") if o.strip() and o.strip() not in KNOWN_DISABLE_OPTIONS]
    if unknown:
        raise SettingError(f"FUSER_DISABLE={value!r}: unknown option {unknown[0]!r}; expected a comma-separated "
                           f"list of {', '.join(KNOWN_DISABLE_OPTIONS)}")
    return value


def gpu_profile():
    """FUSER_GPU_PROFILE: the GPU (a DeviceSpec) the cpu backend schedules for, so that the
    kernels it runs and checks are those that GPU would run (the cuda backend asks its driver)."""
    from fuser.lowering.device import DEFAULT, PROFILES

    value = _text("FUSER_GPU_PROFILE")
    if value is None:
        return DEFAULT
    if value.strip().lower() not in PROFILES:
        raise SettingError(f"FUSER_GPU_PROFILE={value!r}: expected one of {', '.join(sorted(PROFILES))} (the GPU the "
                           "cpu backend schedules its kernels for)")
    return PROFILES[value.strip().lower()]


def cache_size() -> int:
    """FUSER_CACHE_SIZE: compiled fusions an executor keeps (LRU)."""
    return _integer("FUSER_CACHE_SIZE", DEFAULT_CACHE_SIZE, 1, "a positive integer (fusions kept per executor)")


def log_channels() -> frozenset[str]:
    """FUSER_LOG: the log channels to print to stderr. An unknown channel is ignored with a
    warning, not an error: a log switch should never stop a run."""
    value = os.environ.get("FUSER_LOG", "")
    channels = frozenset(c.strip() for c in value.split(",") if c.strip())
    unknown = channels - set(LOG_CHANNELS)
    if unknown:
        warnings.warn(f"FUSER_LOG={value!r}: unknown channel(s) {', '.join(sorted(unknown))} ignored; "
                      f"accepted: {', '.join(LOG_CHANNELS)} (comma-separated)", stacklevel=2)
    return channels & set(LOG_CHANNELS)


def cuda_homes() -> list[str]:
    """CUDA toolkit folders: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda (those that exist)."""
    homes = [_text(v) for v in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    return [h for h in dict.fromkeys(homes) if h and os.path.isdir(h)]


# --- the snapshot of the settings every execute reads -------------------------------------------


class LaunchSettings(NamedTuple):
    """The variables a cached `execute` depends on, read once (see the module doc)."""

    memcheck: bool
    cpu_threads: int
    disable: str
    """FUSER_DISABLE's raw text (parsed by passes.concretize)."""
    racecheck: bool = False
    autotune: bool | str = False
    """FUSER_AUTOTUNE: executions autotune unless told (lowering/execution/autotune.py): True
    (timed) or "sass"."""


_snapshot: LaunchSettings | None = None
_snapshot_lock = threading.Lock()


def launch_settings() -> LaunchSettings:
    """The snapshot (read from the environment on first use, or after `reload()`)."""
    snapshot = _snapshot
    return snapshot if snapshot is not None else _take_snapshot()


def _read_snapshot() -> LaunchSettings:
    return LaunchSettings(memcheck(), cpu_threads(), disable(), racecheck(), autotune())


def _take_snapshot() -> LaunchSettings:
    global _snapshot
    with _snapshot_lock:
        if _snapshot is None:
            _snapshot = _read_snapshot()
        return _snapshot


def reload() -> LaunchSettings:
    """Re-read the snapshotted variables now (after changing os.environ in this process).
    Executors key their launch plans by the snapshot, so a changed memcheck setting or
    FUSER_DISABLE takes effect from the next `execute`. Raises SettingError for a bad value
    (the previous snapshot is then kept)."""
    global _snapshot
    fresh = _read_snapshot()
    with _snapshot_lock:
        _snapshot = fresh
    return fresh
