"""The execution backends, one object per name: "reference" (the numpy interpreter),
"cpu" (the generated CUDA C compiled for the host under the emulation layer) and "cuda"
(the same source compiled to a cubin and launched through pycuda).

`get_backend(None)` picks "cuda" when a GPU and pycuda are usable, else "cpu" (needs a C++20
compiler), else "reference". Nothing outside this module compares backend names."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Backend:
    name: str
    compiles: bool
    """Runs generated kernels (so it has a kernel cache, schedules and launch records)."""
    returns_numpy: bool
    """Outputs are host numpy arrays (turned into torch tensors when an input was one)."""
    device: bool = False
    """Buffers live on the GPU."""

    def available(self) -> tuple[bool, str]:
        if self.name == "cuda":
            from fuser.lowering.gpu_runtime import gpu_available

            return gpu_available()
        if self.name == "cpu":
            from fuser.lowering.cpu_runtime import cpu_compiler_available

            return (True, "") if cpu_compiler_available() else (False, "no C++20 compiler found (FUSER_CXX / g++)")
        return True, ""


REFERENCE = Backend("reference", compiles=False, returns_numpy=True)
CPU = Backend("cpu", compiles=True, returns_numpy=True)
CUDA = Backend("cuda", compiles=True, returns_numpy=False, device=True)
BACKENDS = {b.name: b for b in (REFERENCE, CPU, CUDA)}


@lru_cache(maxsize=1)
def default_backend() -> Backend:
    for backend in (CUDA, CPU):
        if backend.available()[0]:
            return backend
    return REFERENCE


def get_backend(name: "str | Backend | None") -> Backend:
    if name is None:
        return default_backend()
    if isinstance(name, Backend):
        return name
    found = BACKENDS.get(name)
    if found is None:
        raise ValueError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)} or None")
    return found


def pick_backend() -> str:
    """The name of the default backend."""
    return default_backend().name
