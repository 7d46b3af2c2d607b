"""The "cuda" backend: generated CUDA C compiled to a cubin (lowering.compile: NVRTC or nvcc) and
launched through pycuda (lowering.gpu_runtime) on device buffers; torch CUDA tensors in place."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fuser.lowering.backends.base import KernelBackend
from fuser.lowering.disk_cache import Binary


class DeviceMemory:
    """Buffers of the cuda backend: device arrays (torch CUDA tensors are used in place)."""

    launches_are_synchronous = False
    """Launches are queued on a stream: each gets its own zeroed workspace (lowering/launch_plan.py)."""

    def __init__(self, inputs: Sequence[object]):
        from fuser.lowering import gpu_runtime

        self.gpu = gpu_runtime
        self.like = [x for x in inputs if hasattr(x, "data_ptr")]

    def adopt(self, value):
        return self.gpu.to_device(value)

    def pointer(self, buf):
        return buf

    def empty(self, shape, dtype, order, like):
        return self.gpu.empty(shape, dtype, stride_order=order, like=self.like)

    def workspace(self, words: int):
        """Zero-filled scratch memory of a launch (8-byte words; grid reductions)."""
        import numpy as np

        return self.gpu.to_device(np.zeros(words, np.uint64))

    def element_strides(self, buf) -> tuple[int, ...]:
        return tuple(buf.strides)

    def output(self, buf):
        return buf.output()

    # What launch plans use (lowering/launch_plan.py): everything decided once per signature.

    def allocator(self, shape, dtype, order):
        """A function allocating the buffer `empty` would (torch when this call's inputs were
        torch tensors; the plan's signature fixes that). Keeps no reference to the inputs."""
        gpu = self.gpu
        shape, order = tuple(shape), None if order is None else tuple(order)
        if not any(gpu._is_tensor(t) for t in self.like):
            return lambda: gpu.empty(shape, dtype, stride_order=order)
        import torch

        device, strides = f"cuda:{gpu._device_ordinal()}", gpu.dense_strides(shape, order)
        torch_dtype = gpu._torch_dtype(np.dtype(dtype))

        def allocate():
            t = torch.empty_strided(shape, strides, dtype=torch_dtype, device=device)
            return gpu.DeviceArray(t.data_ptr(), shape, dtype, strides, t)

        return allocate

    @staticmethod
    def address(buf) -> int:
        return buf.ptr

    def workspace_address(self, words: int) -> tuple[object, int]:
        buf = self.workspace(words)
        return buf, buf.ptr


class CudaBackend(KernelBackend):
    name = "cuda"
    returns_numpy = False
    on_gpu = True

    def available(self) -> tuple[bool, str]:
        from fuser.lowering.gpu_runtime import gpu_available

        return gpu_available()

    def compiler(self):
        from fuser.lowering.compile import CudaCompiler, default_arch, find_compiler

        return CudaCompiler(find_compiler(), default_arch(), ())

    def load(self, binary: Binary, source: str):
        from fuser.lowering.gpu_runtime import GpuModule

        return GpuModule(binary.data)

    def allocator(self, inputs: Sequence[object]) -> DeviceMemory:
        return DeviceMemory(inputs)
