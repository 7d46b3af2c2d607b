"""The headers generated kernels are built against: `fuser_prelude.cuh` (the text every kernel
source starts with, plain CUDA on the GPU) and `fuser_cpu_emu.h` (the CUDA subset emulated on the
CPU, included by the prelude under -DFUSER_CPU)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

RUNTIME_DIR = Path(__file__).resolve().parent
PRELUDE_PATH = RUNTIME_DIR / "fuser_prelude.cuh"
EMU_HEADER_PATH = RUNTIME_DIR / "fuser_cpu_emu.h"


@lru_cache(maxsize=1)
def prelude() -> str:
    """The text the emitter prepends to every kernel source (read once per process)."""
    return PRELUDE_PATH.read_text()


def with_prelude(body: str) -> str:
    """`body` (kernels and FUSER_HOST_LAUNCHER lines) preceded by the prelude."""
    return prelude() + "\n" + body
