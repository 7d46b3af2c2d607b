"""The GPU's launch limits, enforced where the GPU enforces them, on every kernel backend.

- shared memory a block: static (the compiler's) + dynamic; more than 48 KiB in all needs the
  kernel's opt-in (the cuda backend opts in; the decision is on the total, not the dynamic part
  alone), more than the device's opt-in maximum cannot run, and more than 48 KiB of static
  shared memory does not compile (ptxas);
- parameter bytes of a launch (32,764 on sm_70+).

The cuda backend's decisions are checked against a fake driver (no GPU needed); the cpu
backend's emulation raises the same LaunchLimitError a GPU launch would fail with.
"""

from __future__ import annotations

import contextlib
import dataclasses

import ml_dtypes
import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from fuser.lowering.backends import cuda_driver
from fuser.lowering.backends import gpu_runtime as gr
from fuser.lowering.backends.cpu_runtime import CpuCompiler, CpuModule
from fuser.lowering.backends.static_shared import static_shared_bytes
from fuser.lowering.device import H100, H200, LaunchLimitError, parameter_bytes, shared_memory_optin
from lowering_checks import requires_cpu_backend

BF16 = np.dtype(ml_dtypes.bfloat16)


def _softmax_of_a_sum():
    with FusionDefinition() as fd:
        a, b, c = (fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16) for _ in range(3))
        x = fd.ops.add(fd.ops.add(a, b), c)
        m = fd.ops.max(x, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(x, m))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))
    return fd


# --------------------------------------------------------------------------- the rule


def test_the_opt_in_is_decided_on_the_total():
    assert not shared_memory_optin(H100, "k", 0, 48 * 1024)
    assert shared_memory_optin(H100, "k", 256, 48 * 1024)  # 49,408 B: over 48 KiB in all
    assert shared_memory_optin(H100, "k", 0, 48 * 1024 + 1)
    assert shared_memory_optin(H100, "k", 1024, H100.shared_per_block_optin - 1024)
    with pytest.raises(LaunchLimitError, match=r"kernel 'k' needs 232,449 bytes .* \(1,024 static \+ 231,425 "
                                               r"dynamic\), more than the 232,448 bytes \(227 KiB\)") as e:
        shared_memory_optin(H100, "k", 1024, H100.shared_per_block_optin - 1023)
    assert (e.value.limit, e.value.value, e.value.kernel) == (232448, 232449, "k")
    with pytest.raises(LaunchLimitError, match=r"declares 51,200 bytes .* static shared memory, more than the "
                                               r"49,152 bytes \(48 KiB\)"):
        shared_memory_optin(H200, "k", 200 * 32 * 8, 0)


def test_parameter_layout():
    assert parameter_bytes([8, 4, 8]) == 24  # the long long after the int is 8-aligned
    assert parameter_bytes([4, 4, 1, 2]) == 12


# --------------------------------------------------------------------------- cuda backend (fake driver)


class FakeDriver:
    """The cuda_driver calls GpuModule makes, answering for one kernel of `static` bytes of
    static shared memory; records the opt-ins."""

    def __init__(self, static: int, max_threads: int = 1024, registers: int = 32):
        self.attributes = {cuda_driver.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: static,
                           cuda_driver.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: max_threads,
                           cuda_driver.CU_FUNC_ATTRIBUTE_NUM_REGS: registers}
        self.optins: list[int] = []
        self.launches: list[tuple] = []


@pytest.fixture
def fake_gpu(monkeypatch):
    def make(static: int, **kwargs) -> tuple[gr.GpuModule, FakeDriver]:
        fake = FakeDriver(static, **kwargs)
        monkeypatch.setattr(gr, "context", contextlib.nullcontext)
        monkeypatch.setattr(cuda_driver, "get_function", lambda module, name: 0x1000)
        monkeypatch.setattr(cuda_driver, "function_attribute", lambda fn, attribute: fake.attributes[attribute])
        monkeypatch.setattr(cuda_driver, "set_max_dynamic_shared", lambda fn, n: fake.optins.append(n))
        monkeypatch.setattr(gr, "launch_kernel", lambda *args: fake.launches.append(args))
        monkeypatch.setattr(gr, "own_stream", lambda: 0)
        module = gr.GpuModule.__new__(gr.GpuModule)
        module._module, module._functions, module._resources, module._shared_optin = 0xBEEF, {}, {}, {}
        module._device = H100
        return module, fake

    return make


def test_cuda_backend_opts_in_when_static_plus_dynamic_exceed_48k(fake_gpu):
    """softmax(a + b + c) of bf16 [64, 4096] rows, a block a row: the row's computed values kept
    in 49,152 B of dynamic shared memory, plus the kernel's static shared memory (the block
    reduction's partials): the block needs the opt-in."""
    from fuser.lowering.schedulers.rows import RowSchedule

    fd = _softmax_of_a_sum()
    fd.override_schedule(0, RowSchedule(128, True, iters=6, vec=8, shared=True, keep="values"))
    (kernel,) = fd.kernels_for([np.empty((64, 4096), BF16)] * 3)
    static = static_shared_bytes(kernel.source, kernel.name)
    dynamic = kernel.model.shared_dynamic
    assert static > 0 and dynamic == 48 * 1024
    module, fake = fake_gpu(static)
    module.launch(kernel.name, 1, 128, [], shared_bytes=dynamic)
    assert fake.optins == [dynamic]
    module.launch(kernel.name, 1, 128, [], shared_bytes=dynamic)  # opted in once per kernel
    assert fake.optins == [dynamic] and len(fake.launches) == 2


def test_cuda_backend_does_not_opt_in_within_48k(fake_gpu):
    module, fake = fake_gpu(256)
    module.launch("k", 1, 128, [], shared_bytes=48 * 1024 - 256)
    assert fake.optins == []


def test_cuda_backend_refuses_what_no_opt_in_fits(fake_gpu):
    module, fake = fake_gpu(4096)
    with pytest.raises(LaunchLimitError, match=r"kernel 'k' needs .*4,096 static"):
        module.launch("k", 1, 128, [], shared_bytes=H100.shared_per_block_optin)
    assert not fake.launches
    module, fake = fake_gpu(0, max_threads=256, registers=255)
    with pytest.raises(LaunchLimitError, match=r"blocks of 512 threads: it uses 255 registers"):
        module.bind("k", 1, 512, [])


def test_cuda_backend_refuses_parameters_over_the_limit(fake_gpu):
    module, fake = fake_gpu(0)
    with pytest.raises(LaunchLimitError, match=r"takes 32,768 bytes of parameters, more than the 32,764"):
        module.launch("k", 1, 32, [np.int64(k) for k in range(4096)])
    assert not fake.launches


# --------------------------------------------------------------------------- cpu backend (emulation)

STATIC_AND_DYNAMIC = """
extern "C" __global__ void big(float* out) {
  __shared__ float tile[%d];
  FUSER_DYNAMIC_SHARED(float, rest);
  tile[threadIdx.x] = 1.0f;
  rest[threadIdx.x] = 2.0f;
  __syncthreads();
  fuser_st(out, threadIdx.x, tile[threadIdx.x] + rest[threadIdx.x]);
}
FUSER_HOST_LAUNCHER(big)
"""


def _cpu_module(source: str, device=H100) -> CpuModule:
    from fuser.lowering.runtime import prelude

    full = prelude(frozenset()) + source
    compiler = CpuCompiler()
    return CpuModule(compiler.compile(full, compiler.key(full)).data, full, device)


@requires_cpu_backend
def test_emulator_enforces_the_shared_memory_of_the_device_it_runs_for():
    module = _cpu_module(STATIC_AND_DYNAMIC % 1024)  # 4 KiB static
    assert static_shared_bytes(module.source, "big") == 4096
    out = np.zeros(32, np.float32)
    module.launch("big", 1, 32, [out], shared_bytes=100 * 1024)  # 104 KiB: the opt-in makes it fit
    np.testing.assert_array_equal(out, 3.0)
    with pytest.raises(LaunchLimitError, match=r"kernel 'big' needs 233,472 bytes .*\(4,096 static \+ 229,376 "
                                               r"dynamic\), more than the 232,448 bytes"):
        module.launch("big", 1, 32, [out], shared_bytes=224 * 1024)
    with pytest.raises(LaunchLimitError, match="more than the 232,448"):
        module.bind("big", 1, 32, [np.zeros(32, np.float32)], shared_bytes=224 * 1024)
    smaller = dataclasses.replace(H100, name="a GPU with 99 KiB a block", shared_per_block_optin=99 * 1024)
    with pytest.raises(LaunchLimitError, match=r"more than the 101,376 bytes \(99 KiB\) .* a GPU with 99 KiB"):
        _cpu_module(STATIC_AND_DYNAMIC % 1024, smaller).launch("big", 1, 32, [out], shared_bytes=96 * 1024)


@requires_cpu_backend
def test_emulator_refuses_static_shared_memory_ptxas_refuses():
    module = _cpu_module(STATIC_AND_DYNAMIC % (13 * 1024))  # 52 KiB of static shared memory
    with pytest.raises(LaunchLimitError, match=r"kernel 'big' declares 53,248 bytes .* static shared memory"):
        module.launch("big", 1, 32, [np.zeros(32, np.float32)])


@requires_cpu_backend
def test_emulator_refuses_more_parameter_bytes_than_a_launch_may_pass():
    """520 long longs and a pointer: 4,168 bytes, past the 4 KiB launches took before CUDA 12.1
    (a device record with that limit; the H100's, 32,764 bytes, is the same check)."""
    n = 520
    params = ", ".join(f"long long p{k}" for k in range(n))
    source = (f'extern "C" __global__ void many({params}, long long* out) {{ fuser_st(out, 0, p0 + p{n - 1}); }}\n'
              "FUSER_HOST_LAUNCHER(many)\n")
    old_driver = dataclasses.replace(H100, name="a GPU with 4 KiB of parameters", max_parameter_bytes=4096)
    args = [np.int64(1)] * n + [np.zeros(1, np.int64)]
    _cpu_module(source).launch("many", 1, 1, args, needs_sync=False)  # within the H100's limit
    with pytest.raises(LaunchLimitError, match=r"kernel 'many' takes 4,168 bytes of parameters, more than the "
                                               r"4,096 a launch may pass on a GPU with 4 KiB"):
        _cpu_module(source, old_driver).launch("many", 1, 1, args, needs_sync=False)
