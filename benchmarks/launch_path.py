"""The per-launch host cost of the cuda backend's two launch paths, measured without a GPU.

`python -m fuser.benchmarks.launch_path` binds one launch of a kernel with three pointer
arguments and three scalars (gpu_runtime.BoundGpuLaunch, as a launch plan binds them) and times a
call of it through the native launcher (lowering/backends/gpu_launcher.py) and through the Python
path (struct + ctypes), with a stub in place of the CUDA driver: a library compiled here whose
cuLaunchKernel records its arguments and returns. What is timed is therefore fuser's own share
of a launch, everything but the driver's work (a GPU adds the driver's cuLaunchKernel, about 2 us
on an H100 by NVIDIA's figures: measure it there with the benchmark's host-overhead column).

`StubDriver` is also what test/pytest/backends/test_gpu_launcher.py checks both paths against,
byte for byte."""

from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

STUB_SOURCE = r"""
#include <string.h>
typedef struct { void* function; unsigned grid[3], block[3], shared; void* stream; void* context;
                 size_t size; unsigned char params[8192]; } call;
static call calls[64]; static int count, result, pushes, pops;
static void* current; static void* saved;
extern "C" {
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
  if (result) return result;
  call* c = &calls[count++ % 64];
  c->function = f; c->grid[0] = gx; c->grid[1] = gy; c->grid[2] = gz;
  c->block[0] = bx; c->block[1] = by; c->block[2] = bz; c->shared = shared; c->stream = stream;
  c->context = current; c->size = 0;
  if (params == 0 && extra && extra[0] == (void*)1 && extra[2] == (void*)2 && extra[4] == 0) {
    c->size = *(size_t*)extra[3];
    if (c->size > sizeof c->params) return 1;
    memcpy(c->params, extra[1], c->size);
  } else c->size = (size_t)-1;
  return 0;
}
int cuCtxGetCurrent(void** c) { *c = current; return 0; }
int cuCtxPushCurrent_v2(void* c) { saved = current; current = c; pushes++; return 0; }
int cuCtxPopCurrent_v2(void** c) { *c = current; current = saved; pops++; return 0; }
int cuGetErrorName(int code, const char** s) { *s = code == 1 ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_STUB"; return 0; }
void stub_reset(void* ctx, int r) { count = 0; result = r; pushes = pops = 0; current = ctx; }
int stub_count(void) { return count; }
int stub_pushes(void) { return pushes; }
int stub_pops(void) { return pops; }
void* stub_current(void) { return current; }
call* stub_call(int i) { return &calls[i]; }
}
"""
"""A recording stand-in for libcuda's launch and context entry points (C ABI)."""


class _Call(ctypes.Structure):
    _fields_ = [("function", ctypes.c_void_p), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared", ctypes.c_uint), ("stream", ctypes.c_void_p), ("context", ctypes.c_void_p),
                ("size", ctypes.c_size_t), ("params", ctypes.c_ubyte * 8192)]


class StubDriver:
    """The stub library, loaded; `calls()`: what cuLaunchKernel received since `reset` (the last 64)."""

    def __init__(self, path: Path):
        from fuser.lowering.backends import gpu_launcher

        lib = self.lib = ctypes.CDLL(str(path))
        lib.stub_call.restype = ctypes.POINTER(_Call)
        lib.stub_current.restype = ctypes.c_void_p
        lib.stub_reset.argtypes = [ctypes.c_void_p, ctypes.c_int]
        p, u, i = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
        lib.cuLaunchKernel.argtypes, lib.cuLaunchKernel.restype = [p, u, u, u, u, u, u, u, p, p, p], i
        lib.cuGetErrorName.argtypes, lib.cuGetErrorName.restype = [i, ctypes.POINTER(ctypes.c_char_p)], i
        self.entry_points = tuple(ctypes.cast(getattr(lib, n), ctypes.c_void_p).value
                                  for n in gpu_launcher.DRIVER_ENTRY_POINTS)

    @classmethod
    def build(cls, folder: Path) -> "StubDriver":
        """Compiles the stub into `folder` with the cpu backend's C++ compiler and loads it."""
        from fuser.lowering import settings

        source, library = Path(folder) / "stub_cuda.cpp", Path(folder) / "libstub_cuda.so"
        source.write_text(STUB_SOURCE)
        subprocess.run([settings.cxx(), "-O1", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
        return cls(library)

    def reset(self, current_context: int = 0xC0, result: int = 0) -> None:
        """No calls recorded; `current_context` current; every launch returns `result` from now."""
        self.lib.stub_reset(current_context, result)

    def calls(self) -> list[dict]:
        out = []
        for k in range(min(self.lib.stub_count(), 64)):
            c = self.lib.stub_call(k).contents
            out.append({"function": c.function, "grid": tuple(c.grid), "block": tuple(c.block), "shared": c.shared,
                        "stream": c.stream or 0, "context": c.context, "params": bytes(c.params[:c.size])})
        return out


def _per_call_us(fn, calls: int, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter_ns() - t0) / calls / 1e3)
    return out


def measure(calls: int = 100_000, repeats: int = 7) -> dict:
    """Per-launch microseconds of both paths (best and median of `repeats` runs of `calls`),
    alternated so that a machine's drift reaches both alike."""
    from fuser.lowering.backends import cuda_driver, gpu_launcher
    from fuser.lowering.backends.gpu_runtime import BoundGpuLaunch

    with tempfile.TemporaryDirectory(prefix="fuser-stub-driver-") as tmp:
        stub = StubDriver.build(Path(tmp))
        saved = gpu_launcher.driver_entry_points, cuda_driver._lib
        gpu_launcher.driver_entry_points, cuda_driver._lib = (lambda: stub.entry_points), (lambda: stub.lib)
        try:
            stub.reset()
            args = ("k", (132, 1, 1), (256, 1, 1), "PPPiiq", [0, 0, 0, 4096, 1024, 1 << 33], [0, 1, 2], 0, 0xC0)
            native = BoundGpuLaunch(0xF00D, *args)
            with BoundGpuLaunch.through_python():
                python = BoundGpuLaunch(0xF00D, *args)
            if native.native is None:
                raise RuntimeError(f"no native launcher here: {gpu_launcher.status()}")
            pointers = [0x7F00_0000_1000, 0x7F00_0000_2000, 0x7F00_0000_3000]
            runs: dict[str, list[float]] = {"native": [], "python": []}
            for _ in range(repeats):
                runs["native"] += _per_call_us(lambda: native(pointers, 0x51), calls, 1)
                runs["python"] += _per_call_us(lambda: python(pointers, 0x51), calls, 1)
        finally:
            gpu_launcher.driver_entry_points, cuda_driver._lib = saved
    return {path: {"best_us": min(v), "median_us": statistics.median(v)} for path, v in runs.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuser.benchmarks.launch_path", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100_000, help="launches per timed run")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per path, alternated")
    args = parser.parse_args(argv)
    result = measure(args.calls, args.repeats)
    for path, figures in result.items():
        print(f"{path:7} launch path: {figures['best_us']:.2f} us per launch (best), {figures['median_us']:.2f} us "
              f"(median of {args.repeats}), the CUDA driver stubbed out")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
