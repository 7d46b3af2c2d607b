"""fuser's native launcher: a prebuilt kernel launch called from Python in one C call (the cuda
backend's launches, and the cpu backend's: `native_host_launch`, at the end).

A launch plan's launches (lowering/execution/launch_plan.py) have everything but their data
pointers fixed when they are bound. Through ctypes, each launch still packed its argument buffer
with `struct`, built three ctypes objects and converted eleven arguments of cuLaunchKernel: 5.6-6.2
us of Python per launch on the development machine, before the driver's own work (0.4 us through
this launcher; `python -m fuser.benchmarks.launch_path` measures both with the driver stubbed out). The native
launcher (runtime/fuser_gpu_launcher.cpp, a CPython extension module) takes a *launch record*
built once per bound launch (`launch_record`: the driver's entry points, CUfunction, context,
grid, block, shared memory, the argument template and where its pointers go) and the call's
pointers, and does the rest in C.

It is compiled once per installation, compiler and Python ABI (the per-user install root of
disk_cache, as the cpu backend's host runtime: lowering/backends/prebuilt.py), with the cpu
backend's C++ compiler (FUSER_CXX, default g++) and Python's headers. Where it cannot be built
(no compiler, no Python.h) or is turned off (FUSER_DISABLE=native_launcher), launches take the
Python path (gpu_runtime.BoundGpuLaunch); `status()` says which and why, and so does
`python -m fuser.check`.

The record carries the driver's entry points, so the module links against no libcuda and a test
can hand it a recording stub's instead (test/pytest/backends/test_gpu_launcher.py).

The cpu backend's bound launches (cpu_runtime.BoundLaunch) go through the same module's
`host_launch(record, on_error, *pointers)`: its record (cpu_runtime.host_record) holds the kernel
module's launcher, the launch config and every argument's value slot; the argument slots, config
and stats live on the C stack, and the kernel runs with the GIL released. Through ctypes the same
launch wrote its pointers into per-thread ctypes buffers and converted three arguments: 0.5-0.7 µs
more a launch on the 2-core development machine (2026-12-02)."""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
import struct
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from fuser.lowering import settings
from fuser.lowering.backends import temp_files
from fuser.lowering.backends.cxx import run_compiler
from fuser.lowering.backends.disk_cache import Binary, DiskCache, digest, install_roots
from fuser.lowering.errors import CompileError
from fuser.lowering.runtime import RUNTIME_DIR
from fuser.passes.concretize import DISABLE_NATIVE_LAUNCHER

SOURCE = RUNTIME_DIR / "fuser_gpu_launcher.cpp"
ABI_HEADER = RUNTIME_DIR / "fuser_cpu_abi.h"
"""The cpu backend's launch config and stats, which `host_launch` passes (its key covers it)."""
MODULE_NAME = "fuser_gpu_launcher"  # its PyInit_ function's name
FORMAT = "1"  # bump to rebuild every installed launcher
FLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden")

RECORD_VERSION = 1
RECORD_HEADER = struct.Struct("<6Q10I")
"""The record's header (runtime/fuser_gpu_launcher.cpp, RecordHeader): driver entry points
(cuLaunchKernel, cuCtxGetCurrent, cuCtxPushCurrent_v2, cuCtxPopCurrent_v2), CUfunction,
CUcontext; grid[3], block[3], dynamic shared bytes, parameter bytes, pointer slots, version."""
MAX_PARAM_BYTES = 4096
"""Kernel parameter buffers the native launcher takes (cuLaunchKernel's classic limit); a larger
one takes the Python path."""

DRIVER_ENTRY_POINTS = ("cuLaunchKernel", "cuCtxGetCurrent", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2")

_lock = threading.Lock()
_build_count = 0
_loaded: tuple | None = None  # (the extension module or None, why it is not there), once per process


def build_count() -> int:
    """How many times this process has compiled the native launcher."""
    return _build_count


def launch_record(entry_points: Sequence[int], function: int, context: int, grid: Sequence[int],
                  block: Sequence[int], shared_bytes: int, formats: str, template: Sequence[object],
                  slots: Sequence[int]) -> bytes | None:
    """The record of one bound launch: `formats`/`template` are the kernel's arguments as
    `struct` packs them with native alignment (the C parameter layout), `slots` the indices of
    the pointer arguments filled per call. None when its parameters exceed MAX_PARAM_BYTES."""
    if len(entry_points) != len(DRIVER_ENTRY_POINTS):
        raise ValueError(f"launch_record: {len(DRIVER_ENTRY_POINTS)} driver entry points "
                         f"({', '.join(DRIVER_ENTRY_POINTS)}), got {len(entry_points)}")
    params = struct.pack(formats, *template)
    if len(params) > MAX_PARAM_BYTES:
        return None
    offsets = []
    for i in slots:
        if formats[i] != "P":
            raise ValueError(f"launch_record: argument {i} is a pointer slot, its format is {formats[i]!r}")
        offsets.append(struct.calcsize(formats[:i + 1]) - struct.calcsize("P"))
    slot_table = struct.pack(f"<{len(offsets)}I", *offsets)
    slot_table += bytes(-len(slot_table) % 8)
    header = RECORD_HEADER.pack(*entry_points, function, context, *grid, *block, shared_bytes, len(params),
                                len(offsets), RECORD_VERSION)
    return header + slot_table + params


@functools.cache
def driver_entry_points() -> tuple[int, ...]:
    """The addresses of DRIVER_ENTRY_POINTS in libcuda (lowering/backends/cuda_driver.py loads it)."""
    import ctypes

    from fuser.lowering.backends import cuda_driver

    lib = cuda_driver.driver_library()
    return tuple(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in DRIVER_ENTRY_POINTS)


def native_launch() -> Callable[..., int] | None:
    """The native `launch(record, stream, *pointers) -> CUresult`, built on first use; None where
    launches take the Python path (`status()` says why)."""
    return _native("launch")


def native_host_launch() -> Callable[..., tuple[int, int]] | None:
    """The native `host_launch(record, on_error, *pointers) -> (bytes loaded, bytes stored)` of the
    cpu backend, built on first use; None where its launches take the Python path (`status()`)."""
    return _native("host_launch")


def _native(name: str):
    if DISABLE_NATIVE_LAUNCHER in _disabled():
        return None
    module, _ = _module()
    return None if module is None else getattr(module, name)


def status() -> str:
    """"native" or "python: <why>", as the next bind sees it."""
    if DISABLE_NATIVE_LAUNCHER in _disabled():
        return f"python: FUSER_DISABLE={DISABLE_NATIVE_LAUNCHER}"
    module, why = _module()
    return "native" if module is not None else f"python: {why}"


def _disabled() -> set[str]:
    return {o.strip() for o in settings.disable().split(",")}


def _module() -> tuple:
    """(the loaded extension module, "") or (None, why it is not there); built or found once per
    process, by the first thread that asks."""
    global _loaded
    with _lock:
        if _loaded is None:
            try:
                _loaded = _load(_binary()), ""
            except (CompileError, OSError, ImportError) as e:
                _loaded = None, str(e).splitlines()[0] if str(e) else type(e).__name__
        return _loaded


def _python_include() -> Path:
    return Path(sysconfig.get_paths()["include"])


def _key(identity: str) -> str:
    return digest(FORMAT, identity, "\0".join(FLAGS), SOURCE.read_text(), ABI_HEADER.read_text(),
                  sys.implementation.cache_tag, sysconfig.get_config_var("EXT_SUFFIX") or "", str(_python_include()))


def _binary() -> Binary:
    from fuser.lowering.backends.cpu_runtime import _compiler_identity

    cxx = settings.cxx()
    identity = _compiler_identity(cxx)
    if identity is None:
        raise CompileError(f"no C++ compiler to build it with (FUSER_CXX={cxx!r} not found or not runnable)")
    if not (_python_include() / "Python.h").is_file():
        raise CompileError(f"Python's headers are not installed ({_python_include()}/Python.h is missing;"
                           " install the python3-dev package of this Python)")
    key = _key(identity)
    caches = [DiskCache("gpu-launcher", ".so", root) for root in install_roots()]
    for cache in caches:
        found = cache.load(key)
        if found is not None:
            return found
    binary = _build(cxx, identity)
    for cache in caches:
        cache.store(key, binary)
        if cache.load(key) is not None:
            break
    return binary


def _build(cxx: str, identity: str) -> Binary:
    global _build_count
    with temp_files.scratch("launcher") as tmp:
        out = Path(tmp) / f"{MODULE_NAME}.so"
        cmd = [cxx, *FLAGS, "-I", str(_python_include()), "-I", str(RUNTIME_DIR), "-o", str(out), str(SOURCE)]
        _build_count += 1
        log = run_compiler(cxx, identity, cmd, out, "fuser's native launcher")
        return Binary(out.read_bytes(), log)


def _load(binary: Binary):
    """Imports a private copy of the verified bytes (unlinked once loaded: the file in the
    cache may be replaced by another process meanwhile)."""
    fd, path = tempfile.mkstemp(prefix="fuser-launcher-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(binary.data)
        loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, path)
        spec = importlib.util.spec_from_file_location(MODULE_NAME, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    finally:
        os.unlink(path)
    if module.record_version() != RECORD_VERSION:
        raise ImportError(f"the native launcher reads records of version {module.record_version()}, "
                          f"this fuser writes {RECORD_VERSION}")
    return module


__all__ = ["DISABLE_NATIVE_LAUNCHER", "MAX_PARAM_BYTES", "launch_record", "native_host_launch", "native_launch", "status"]
