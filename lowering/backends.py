"""Which backend `execute(backend=None)` uses: "cuda" when a GPU and pycuda are usable,
else "cpu" (the same CUDA C on the host, needs a C++20 compiler), else "reference"."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def pick_backend() -> str:
    from lowering.gpu_runtime import gpu_available

    if gpu_available()[0]:
        return "cuda"
    from lowering.cpu_runtime import cpu_compiler_available

    return "cpu" if cpu_compiler_available() else "reference"
