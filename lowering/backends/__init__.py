"""The execution backends, one object per name, looked up with `get_backend`:

- "reference": the numpy interpreter of fuser_dialect (no kernels);
- "cpu": the generated CUDA C compiled by g++ against the emulation layer, run on the host,
  counting every kernel's global bytes;
- "cuda": the same source compiled to a cubin (NVRTC / nvcc) and launched through pycuda.

A kernel backend splits as tinygrad's runtimes do: its compiler turns a source into a binary
(cached on disk by source hash: lowering.backends.disk_cache), `program(source)` loads that binary once per
process, and the program's `launch(name, grid, block, args, needs_sync=...)` runs a kernel and
returns its byte counters where the backend has them (else None). `allocator(inputs)` gives the
buffers a call's kernels read and write. Nothing outside this package compares backend names:
code asks a backend what it does (`compiles`, `on_gpu`, `counts_bytes`, `returns_numpy`).

`get_backend(None)` picks "cuda" when a GPU and pycuda are usable, else "cpu" (needs a C++20
compiler), else "reference" — with a warning, since that is slow and runs no generated code."""

from __future__ import annotations

import glob
import os
import warnings
from functools import lru_cache

from fuser.lowering.backends.base import Backend, KernelBackend, Program
from fuser.lowering.backends.cpu import CpuBackend
from fuser.lowering.backends.cuda import CudaBackend
from fuser.lowering.backends.reference import ReferenceBackend

REFERENCE = ReferenceBackend()
CPU = CpuBackend()
CUDA = CudaBackend()
BACKENDS: dict[str, Backend] = {b.name: b for b in (REFERENCE, CPU, CUDA)}


@lru_cache(maxsize=1)
def default_backend() -> Backend:
    """The first usable of cuda, cpu, reference (decided once per process)."""
    reasons = []
    for backend in (CUDA, CPU):
        usable, why = backend.available()
        if usable:
            if backend is not CUDA and reasons and gpu_present():
                warnings.warn(f"backend=None runs the {backend.name} backend (the CUDA emulation on the host) although "
                              f"this machine has an NVIDIA GPU: {reasons[0]} (`python -m fuser.check` says more)",
                              RuntimeWarning, stacklevel=3)
            return backend
        reasons.append(f"{backend.name}: {why}")
    warnings.warn(f"backend=None falls back to 'reference' (the numpy interpreter; no generated kernels "
                  f"run): {'; '.join(reasons)}", RuntimeWarning, stacklevel=3)
    return REFERENCE


def gpu_present() -> bool:
    """Whether the machine has an NVIDIA GPU its driver exposes (a device node or the driver's
    /proc entry), whether or not fuser can use it."""
    return os.path.exists("/dev/nvidia0") or bool(glob.glob("/proc/driver/nvidia/gpus/*"))


def get_backend(name: "str | Backend | None") -> Backend:
    if name is None:
        return default_backend()
    if isinstance(name, Backend):
        return name
    found = BACKENDS.get(name)
    if found is None:
        raise ValueError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)} or None")
    return found


__all__ = ["BACKENDS", "CPU", "CUDA", "REFERENCE", "Backend", "KernelBackend", "Program", "default_backend",
           "get_backend"]
