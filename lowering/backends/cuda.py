"""The "cuda" backend: generated CUDA C compiled to a cubin (lowering.backends.compile: NVRTC or nvcc) and
launched through pycuda (lowering.backends.gpu_runtime) on device buffers; torch CUDA tensors in place."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fuser.lowering.backends.base import KernelBackend
from fuser.lowering.backends.disk_cache import Binary


class DeviceMemory:
    """Buffers of the cuda backend for one call. With torch tensors among the inputs ("torch
    mode") every buffer is a torch CUDA tensor from torch's caching allocator and kernels run on
    torch's current stream; with numpy inputs buffers are pooled pycuda memory and kernels run on
    fuser's own stream (lowering/backends/gpu_runtime.py)."""

    launches_are_synchronous = False
    """Launches are queued on a stream: each gets its own zeroed workspace (lowering/execution/launch_plan.py)."""

    def __init__(self, inputs: Sequence[object], torch_mode: bool | None = None):
        from fuser.lowering.backends import gpu_runtime

        gpu = self.gpu = gpu_runtime
        self.torch_mode = any(gpu._is_tensor(x) for x in inputs) if torch_mode is None else torch_mode
        self.device = f"cuda:{gpu._device_ordinal()}" if self.torch_mode else None
        self.stream_of = gpu.torch_stream(gpu._device_ordinal()) if self.torch_mode else gpu.own_stream
        """The handle of the stream this call's kernels go to, read per call."""
        self.stream = self.stream_of()

    def detached(self) -> "DeviceMemory":
        """The same decisions without this call's inputs (what a launch plan keeps)."""
        return DeviceMemory((), self.torch_mode)

    def adopt(self, value):
        if self.torch_mode and isinstance(value, np.ndarray):  # stream-ordered by torch's allocator
            return self.gpu.torch_copy(value, self.device)
        return self.gpu.to_device(value)

    def pointer(self, buf):
        return buf

    def empty(self, shape, dtype, order, like):
        return self.allocator(shape, dtype, order)()

    def workspace(self, words: int):
        """Zero-filled scratch memory of a launch (8-byte words; grid reductions), zeroed on the
        stream the launch goes to."""
        if self.torch_mode:
            import torch

            t = torch.zeros(words, dtype=torch.int64, device=self.device)
            return self.gpu.DeviceArray(t.data_ptr(), (words,), np.uint64, (1,), t)
        return self.gpu.zeros_on_own_stream(words)

    def element_strides(self, buf) -> tuple[int, ...]:
        return tuple(buf.strides)

    def output(self, buf):
        return buf.output()

    # What launch plans use (lowering/execution/launch_plan.py): everything decided once per signature.

    def allocator(self, shape, dtype, order):
        """A function allocating an output buffer (torch's allocator in torch mode, the pool
        otherwise). Keeps no reference to the inputs."""
        gpu = self.gpu
        shape, order = tuple(shape), None if order is None else tuple(order)
        if not self.torch_mode:
            return lambda: gpu.empty(shape, dtype, stride_order=order)
        import torch

        device, strides = self.device, gpu.dense_strides(shape, order)
        torch_dtype = gpu._torch_dtype(np.dtype(dtype))

        def allocate():
            t = torch.empty_strided(shape, strides, dtype=torch_dtype, device=device)
            return gpu.DeviceArray(t.data_ptr(), shape, dtype, strides, t)

        return allocate

    @staticmethod
    def address(buf) -> int:
        return buf.ptr

    # In-kernel index checks (lowering/execution/index_errors.py): the record is mapped host memory, read
    # without a copy at the next call (launches stay asynchronous and graph-capturable).
    def index_record(self, records) -> tuple[object, int]:
        host, device_address = records.gpu_record()
        return self.gpu.DevicePtr(device_address), device_address

    @staticmethod
    def after_checked_launch(records) -> None:
        pass

    @staticmethod
    def before_call(records) -> None:
        records.check_pending_gpu()

    def workspace_address(self, words: int) -> tuple[object, int]:
        buf = self.workspace(words)
        return buf, buf.ptr


class CudaBackend(KernelBackend):
    name = "cuda"
    returns_numpy = False
    on_gpu = True

    def available(self) -> tuple[bool, str]:
        from fuser.lowering.backends.gpu_runtime import gpu_available

        return gpu_available()

    def compiler(self):
        from fuser.lowering.backends.compile import CudaCompiler, default_arch, find_compiler

        return CudaCompiler(find_compiler(), default_arch(), ())

    def load(self, binary: Binary, source: str):
        from fuser.lowering.backends.gpu_runtime import GpuModule

        return GpuModule(binary.data)

    def allocator(self, inputs: Sequence[object], torch_outputs: bool = False) -> DeviceMemory:
        return DeviceMemory(inputs, True if torch_outputs else None)

    def time_calls(self, fn, reps: int) -> float:
        """Median seconds of GPU time of `reps` calls of `fn` (CUDA events, after one warm-up)."""
        import statistics

        from fuser.lowering.backends.gpu_runtime import time_kernel

        return statistics.median(time_kernel(fn, warmup=1, iters=reps)) * 1e-3

    @property
    def device(self):
        from fuser.lowering.backends.gpu_runtime import device_spec

        return device_spec()

    def context(self):
        """The primary context current for the span of a call (lowering/backends/gpu_runtime.py)."""
        from fuser.lowering.backends.gpu_runtime import context

        return context()
