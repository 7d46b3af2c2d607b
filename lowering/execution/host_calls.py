"""Running host segments (planned by lowering/segmentation/host_segments.py): a `HostCall` on
the call's buffers, from lowering/execution/launch.py and from launch plans, which replay it
like a kernel launch:
- numpy buffers (the cpu backend): `numpy.matmul` in f32 for f16/bf16 inputs, or, when the
  fusion's inputs are torch tensors, `torch.matmul` / `F.linear` on zero-copy views;
- the cuda backend with torch CUDA tensors: torch.matmul / F.linear (cuBLAS) on the tensors in
  place, on torch's current stream, the stream the call's kernels are launched on, so the call
  is ordered after the kernels that wrote its operands;
- the cuda backend with numpy inputs (pycuda memory): the operands are COPIED to the host,
  multiplied with numpy and copied back — correct, synchronous and slow; pass torch CUDA
  tensors for cuBLAS. A mix of pycuda memory and torch tensors in one call is refused.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fuser_dialect.ops_matmul import LinearOp
from fuser_dialect.types import numpy_dtype
from fuser.lowering.segmentation.host_segments import HostPlan, HostSchedule, is_torch


@dataclass(frozen=True)
class HostKernel:
    """What kernels_for holds for a host segment in place of a compiled kernel."""

    name: str
    schedule: HostSchedule
    call: HostCall
    source: str = ""
    params: tuple = ()
    needs_sync: bool = False
    shared_bytes: int = 0


def host_kernel(plan: HostPlan, schedule: HostSchedule) -> HostKernel:
    return HostKernel(plan.name, schedule, HostCall(plan, schedule))


class HostCall:
    """Runs one host segment on buffers: `call(operands, out)` writes `out` and returns the
    (bytes loaded, bytes stored) of the library call: each operand read once, the result
    written once (the least any library moves; what it really moves is its own business)."""

    def __init__(self, plan: HostPlan, schedule: HostSchedule):
        op = plan.op
        self.op_name = op.name
        self.is_linear = isinstance(op, LinearOp)
        self.operand_values = list(op.operands)
        self.dtype = op.results[0].type.dtype
        self.torch = schedule.library == "torch"
        self.low_precision = self.dtype in ("f16", "bf16")
        self.operand_bytes = [numpy_dtype(v.type.dtype).itemsize for v in self.operand_values]
        self.out_itemsize = numpy_dtype(self.dtype).itemsize

    def __call__(self, operands: Sequence[object], out) -> tuple[int, int]:
        if _device_array(out):
            self._run_on_device(operands, out)
        elif self.torch:
            _as_torch(out).copy_(self._torch_result([_as_torch(b) for b in operands]))
        else:
            self._numpy_into([np.asarray(b) for b in operands], out)
        loaded = sum(math.prod(b.shape) * n for b, n in zip(operands, self.operand_bytes))
        return loaded, math.prod(out.shape) * self.out_itemsize

    def _numpy_into(self, arrays: list[np.ndarray], out: np.ndarray) -> None:
        """The product written into `out`: in place for f32/f64; f16/bf16 operands go through f32
        and round once (the interpreter's semantics, without its per-call dtype lookups)."""
        if self.low_precision:
            with np.errstate(over="ignore"):
                out[...] = self._numpy_product([a.astype(np.float32) for a in arrays])
            return
        self._numpy_product(arrays, out)

    def _numpy_product(self, arrays: list[np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
        if not self.is_linear:
            return np.matmul(arrays[0], arrays[1], out=out)
        result = np.matmul(arrays[0], arrays[1].T, out=out)
        if len(arrays) > 2:
            result += arrays[2]
        return result

    def _torch_result(self, tensors: list):
        torch = sys.modules["torch"]
        if self.is_linear:
            return torch.nn.functional.linear(*tensors)
        return torch.matmul(tensors[0], tensors[1])

    def _run_on_device(self, operands: Sequence[object], out) -> None:
        # Launch plans pass torch inputs used in place as the tensors themselves.
        tensors = [b if is_torch(b) else b.tensor for b in operands]
        if out.tensor is not None and all(t is not None for t in tensors):
            out.tensor.copy_(self._torch_result(tensors))  # cuBLAS, on the tensors in place
            return
        if out.tensor is not None or any(t is not None for t in tensors):
            raise TypeError(
                f"{self.op_name} (a host segment) on the cuda backend got pycuda memory and torch tensors in one "
                "call; pass every input as a torch CUDA tensor (cuBLAS) or every input as numpy (host copy)"
            )
        host = np.empty(out.shape, out.dtype)
        self._numpy_into([b.to_numpy() for b in operands], host)
        _copy_to_device(out, host)


def _device_array(buf: object) -> bool:
    return type(buf).__name__ == "DeviceArray"


def _as_torch(buf):
    """A torch view of a host buffer (numpy arrays are shared, not copied; bf16 through int16)."""
    if is_torch(buf):
        return buf
    torch = sys.modules["torch"]
    if buf.dtype == numpy_dtype("bf16"):
        return torch.from_numpy(buf.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(buf)


def _copy_to_device(out, result: np.ndarray) -> None:
    """Writes a host result into a pycuda DeviceArray in its dense stride order."""
    from fuser.lowering.backends import gpu_runtime

    host = np.empty(math.prod(out.shape), out.dtype)
    gpu_runtime.from_dense(host, out.shape, out.strides)[...] = result
    if host.size:
        gpu_runtime.driver().memcpy_htod(out.ptr, host.view(np.uint8))


__all__ = ["HostCall", "HostKernel", "host_kernel"]
