"""The headers generated kernels are built against: `fuser_prelude.cuh` (the text every kernel
source starts with, plain CUDA on the GPU) and `fuser_cpu_emu.h` (the CUDA subset emulated on the
CPU, included by the prelude under -DFUSER_CPU)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

RUNTIME_DIR = Path(__file__).resolve().parent
PRELUDE_PATH = RUNTIME_DIR / "fuser_prelude.cuh"
EMU_HEADER_PATH = RUNTIME_DIR / "fuser_cpu_emu.h"
RACECHECK_HEADER_PATH = RUNTIME_DIR / "fuser_cpu_racecheck.h"


INLINED_HEADERS = {"fuser_f16.h": ("FUSER_NEED_F16", "FUSER_NEED_FP8"), "fuser_philox.h": ("FUSER_NEED_PHILOX",)}
"""Headers the prelude includes that `prelude()` pastes in as text, and the header macros that
ask for each (any one of them; lowering/codegen/cuda_exprs.py): the GPU compilers get no include
path for this folder, and the CPU module cache keys on the source text. Without its macros a
header's line is dropped, so a kernel that does not use it neither carries nor compiles its text."""


@lru_cache(maxsize=None)
def prelude(macros: frozenset[str] = frozenset()) -> str:
    """The text the emitter prepends to a kernel source with these header macros (read once per
    process and macro set)."""
    text = PRELUDE_PATH.read_text()
    for name, wanted_by in INLINED_HEADERS.items():
        pasted = (RUNTIME_DIR / name).read_text() if macros.intersection(wanted_by) else ""
        text = text.replace(f'#include "{name}"', pasted, 1)
    return text


def with_prelude(body: str) -> str:
    """`body` (kernels and FUSER_HOST_LAUNCHER lines) preceded by the prelude. A hand-written
    body may use anything, so it gets the 16-bit headers and every inlined header (generated
    kernels get them only when their dtypes and ops need them: lowering/codegen/render.py)."""
    return "#define FUSER_NEED_F16\n" + prelude(frozenset({"FUSER_NEED_F16", "FUSER_NEED_PHILOX"})) + "\n" + body
