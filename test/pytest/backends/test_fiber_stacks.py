"""Fiber stacks of the cpu backend (issue #11 item 1): each stack has a guard page below it, an
overflow is reported as a LaunchError, and nothing else is ever taken for one.

Scenarios that could crash the interpreter, or that need a controlled heap, run in a child
process: a regression then fails its test instead of killing the test run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from fuser.lowering.backends import cpu_runtime as cr

pytestmark = pytest.mark.skipif(not cr.cpu_compiler_available(), reason="no g++ for the CPU backend")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

SOFTMAX = """
import numpy as np
from fuser import FusionDefinition, DataType

def softmax_fusion():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        m = fd.ops.max(t, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(t, m))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))
    return fd

def softmax_reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
"""

# Threads past n overflow: with 28000 floats of locals every stack of 128 KiB minus its stagger
# (up to 32 KiB) but the first few is too small.
OVERFLOW_KERNELS = r"""
extern "C" __global__ void big_locals(int n, float* out) {
  volatile float a[28000];
  for (int i = 0; i < n; ++i) a[i] = i;
  fuser_st(out, blockIdx.x * blockDim.x + threadIdx.x, a[n - 1]);
}
FUSER_HOST_LAUNCHER(big_locals)

// Unbounded recursion: the stack grows frame by frame until it meets the guard.
__device__ __noinline__ int deep(volatile int* p, int depth) {
  volatile int pad[64];
  pad[0] = depth;
  return depth <= 0 ? *p : deep(p, depth - 1) + pad[0];
}
extern "C" __global__ void recurse(int depth, int* out) {
  int v = 1;
  fuser_st(out, threadIdx.x, deep(&v, depth));
}
FUSER_HOST_LAUNCHER(recurse)

extern "C" __global__ void block_sum(const float* __restrict__ x, float* __restrict__ out) {
  __shared__ float s[1024];
  int t = threadIdx.x;
  s[t] = fuser_ld(x, blockIdx.x * blockDim.x + t);
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) fuser_st(out, blockIdx.x, s[0]);
}
FUSER_HOST_LAUNCHER(block_sum)

// A write to an unmapped address (given as a number: a literal null store would compile to a trap).
extern "C" __global__ void wild_write(long long address) {
  __syncthreads();
  if (threadIdx.x == 3) *(volatile int*)address = 1;
}
FUSER_HOST_LAUNCHER(wild_write)
"""

OVERFLOW_CHILD = """
import sys
import numpy as np
from fuser.lowering.backends.cpu import CpuBackend
from fuser.lowering.errors import LaunchError
from fuser.lowering.runtime import with_prelude

flags = sys.argv[1:]
source = with_prelude({kernels!r})
module = CpuBackend(extra_flags=flags).program(source)

def expect_overflow(kernel, grid, block, args, threads):
    try:
        module.launch(kernel, grid, block, args, num_threads=threads)
    except LaunchError as e:
        print("LaunchError:", e)
        return
    raise SystemExit(f"{{kernel}}: no LaunchError")

def block_sums_are_right():
    x = np.random.default_rng(3).random(8 * 1024, dtype=np.float32)
    out = np.zeros(8, np.float32)
    module.launch("block_sum", 8, 1024, [x, out], num_threads=2)
    np.testing.assert_allclose(out, x.reshape(8, 1024).sum(axis=1), rtol=1e-5)

block_sums_are_right()  # regions exist on both OS threads before the overflows
for threads in (1, 2):
    expect_overflow("big_locals", 16, 64, [28000, np.zeros(16 * 64, np.float32)], threads)
    expect_overflow("recurse", 4, 32, [1 << 30, np.zeros(32, np.int32)], threads)
    block_sums_are_right()  # the threads that recovered still run fibers, and fault again
fits = np.zeros(32, np.int32)
module.launch("recurse", 4, 32, [100, fits], num_threads=2)  # ~30 KiB deep: no false overflow
assert (fits == 1 + 100 * 101 // 2).all()
print("survived")
"""


def _run_child(script: str, *args: str, env: dict[str, str] | None = None,
               python_flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = dict(os.environ, **(env or {}))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [ROOT, os.environ.get("PYTHONPATH", "")] if p)
    return subprocess.run([sys.executable, *python_flags, "-c", script, *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)


def test_resident_heap_pages_are_not_an_overflow():
    """Regression: the overflow check took a stack whose lowest page was resident for overflowed;
    stacks from the heap could start out resident (pages numpy had freed), so a 4x8 softmax failed
    with "thread 0 used all of its 131072-byte fiber stack"."""
    script = SOFTMAX + """
a = np.ones(2_000_000); del a
b = np.ones(1_500_000); del b
x = np.random.default_rng(0).random((4, 8), dtype=np.float32)
(out,) = softmax_fusion().execute([x], backend="cpu")
np.testing.assert_allclose(out, softmax_reference(x), rtol=1e-5)
print("ok")
"""
    proc = _run_child(script, env={"FUSER_CPU_THREADS": "1"})
    assert proc.returncode == 0 and "ok" in proc.stdout, (proc.returncode, proc.stderr[-3000:])


def test_concurrent_executions_are_all_correct():
    """Regression: with 8 threads executing at once, 10-14 of 40 executions failed with a false
    stack overflow."""
    namespace: dict = {}
    exec(SOFTMAX, namespace)
    fd = namespace["softmax_fusion"]()
    rng = np.random.default_rng(1)
    inputs = [rng.random((4 + i, 8 * (1 + i % 3)), dtype=np.float32) for i in range(8)]
    failures: list[BaseException] = []

    def worker(x: np.ndarray) -> None:
        try:
            for _ in range(5):
                (out,) = fd.execute([x], backend="cpu")
                np.testing.assert_allclose(out, namespace["softmax_reference"](x), rtol=1e-5)
        except BaseException as e:  # noqa: BLE001 - reported below, with every other failure
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(x,)) for x in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures


@pytest.mark.parametrize("flags", [(), ("-DFUSER_EMU_UCONTEXT",)], ids=["asm", "ucontext"])
def test_real_overflow_is_a_launch_error(flags):
    script = OVERFLOW_CHILD.format(kernels=OVERFLOW_KERNELS)
    proc = _run_child(script, *flags)
    assert proc.returncode == 0 and "survived" in proc.stdout, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    errors = [line for line in proc.stdout.splitlines() if line.startswith("LaunchError")]
    assert len(errors) == 4
    for line in errors:
        assert "used all of its 131072-byte fiber stack" in line, line
        assert "-DFUSER_FIBER_STACK_BYTES=" in line, line
    assert "kernel 'big_locals' block (" in errors[0] and "thread (" in errors[0]
    assert "kernel 'recurse' block (" in errors[1]


def test_other_faults_still_reach_the_previous_handler():
    """A segfault that is no stack overflow (a wild write inside a fiber) is not swallowed: it goes
    on to the handler installed before ours (Python's faulthandler) and the process dies of
    SIGSEGV, as it would without fuser."""
    script = f"""
import numpy as np
from fuser.lowering.backends.cpu import CpuBackend
from fuser.lowering.runtime import with_prelude
module = CpuBackend().program(with_prelude({OVERFLOW_KERNELS!r}))
print("launching", flush=True)
module.launch("wild_write", 1, 32, [np.int64(64)], num_threads=1)
print("survived")
"""
    proc = _run_child(script, python_flags=("-X", "faulthandler"))
    assert proc.returncode == -11 and "launching" in proc.stdout and "survived" not in proc.stdout, (
        proc.returncode, proc.stdout, proc.stderr[-3000:])
    assert "Fatal Python error: Segmentation fault" in proc.stderr  # the chain reached faulthandler
