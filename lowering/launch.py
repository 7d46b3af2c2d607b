"""Launching compiled kernels: buffers, kernel arguments from run-time extents, records.

Every kernel parameter (lowering.emit_cuda.Param) is filled from the call: tensor
pointers, element strides of the actual arrays, extents and scalar values from
`evaluate_extents` on the concretized fusion, normalised slice starts from its resize facts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import func
from xdsl.ir import SSAValue

from fuser_dialect.inputs import to_numpy
from fuser_dialect.types import TensorType
from fuser.lowering.compiled import CompiledFusion, CompiledKernels
from fuser.lowering.emit_cuda import EmittedKernel, Param

_SCALAR_CTYPES = {"double": np.float64, "float": np.float32, "long long": np.int64, "int": np.int32, "bool": np.bool_}


@dataclass(frozen=True)
class KernelRecord:
    """One launched kernel (fd.last_kernels())."""

    name: str
    scheduler: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    source: str
    bytes_loaded: int | None = None
    bytes_stored: int | None = None
    needs_sync: bool = True
    """Uses barriers or warp shuffles (the cpu backend then runs threads as fibers)."""


def empty_like_layout(shape: Sequence[int], dtype: np.dtype, order: Sequence[int] | None) -> np.ndarray:
    """An uninitialised array of `shape` laid out in stride `order` (0 = fastest dim)."""
    if order is None:
        return np.empty(shape, dtype)
    slowest_first = sorted(range(len(shape)), key=lambda d: -order[d])
    dense = np.empty([shape[d] for d in slowest_first], dtype)
    return dense.transpose(np.argsort(slowest_first))


def _launch_size(kernel: EmittedKernel, plan, extents) -> int:
    """Elements (pointwise) or rows (reductions) this launch covers; 0 skips the launch."""
    if kernel.schedule.mode == "pointwise":
        return sum(math.prod(extents.shape(v)) for v in plan.domain_values())
    domain = extents.shape(plan.domain)
    return math.prod(e for d, e in enumerate(domain) if d not in plan.reduced_dims)


def _dense_view(a: np.ndarray) -> np.ndarray | None:
    """`a` as a C-contiguous array over the same memory (its dims reordered by decreasing stride),
    or None when `a` is not dense in any stride order (a strided or reversed view)."""
    if a.flags.c_contiguous:
        return a
    view = a.transpose(sorted(range(a.ndim), key=lambda d: -a.strides[d]))
    return view if view.flags.c_contiguous else None


class HostMemory:
    """Buffers of the cpu backend: numpy arrays."""

    def adopt(self, value):
        value = to_numpy(value)
        # Kernels index a tensor through its element strides from one base pointer: an input
        # dense in some stride order is used in place, any other view is copied.
        return value if _dense_view(value) is not None else np.ascontiguousarray(value)

    def pointer(self, buf):
        """What a pointer parameter receives: the same memory as a C-contiguous array (the
        kernel's stride parameters carry the layout; the CPU runtime checks contiguity)."""
        view = _dense_view(buf)
        return buf if view is None else view

    def empty(self, shape, dtype, order, like):
        return empty_like_layout(shape, dtype, order)

    def element_strides(self, buf) -> tuple[int, ...]:
        return tuple(s // buf.itemsize for s in buf.strides)

    def output(self, buf):
        return buf


class DeviceMemory:
    """Buffers of the cuda backend: device arrays (torch CUDA tensors are used in place)."""

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

    def element_strides(self, buf) -> tuple[int, ...]:
        return tuple(buf.strides)

    def output(self, buf):
        return buf.output()


class Launcher:
    """Runs one call of a CompiledFusion."""

    def __init__(self, compiled: CompiledFusion, kernels: CompiledKernels, extents, checked: Sequence[object],
                 memory=None):
        self.compiled = compiled
        self.kernels = kernels
        self.rt = extents
        self.mem = memory or HostMemory()
        facts = compiled.launch_facts
        self.fusion: func.FuncOp = facts.fusion
        self.buffers = {a: self.mem.adopt(v) for a, v in zip(facts.args, checked) if a in facts.tensor_args}
        self.slice_facts = {f.op: f for f in extents.resizes if f.name == "fuser.slice"} if facts.has_slices else {}
        self.output_layout = facts.output_layout
        self.returned = facts.returned

    def allocate(self, v: SSAValue):
        shape = self.rt.shape(v)
        dtype = self.compiled.launch_facts.dtypes[v]
        buf = self.mem.empty(shape, dtype, self.output_layout.get(v), None)
        self.buffers[v] = buf
        return buf

    def argument(self, p: Param):
        if p.kind in ("input", "output"):
            return self.mem.pointer(self.buffers[p.value])
        if p.kind == "stride":
            return np.int64(self.mem.element_strides(self.buffers[p.value])[p.dim])
        if p.kind == "extent":
            return np.int64(self.rt.shape(p.value)[p.dim])
        if p.kind == "scalar":
            value = self.rt.scalars[p.value]
            if value is None:
                raise ValueError(f"scalar {p.value} has no value at run time")
            return _SCALAR_CTYPES[p.ctype](value)
        if p.kind == "slice_start":
            return np.int64(self.slice_facts[p.op].bounds[2 * p.dim])
        raise AssertionError(p.kind)

    def run(self, backend: str) -> tuple[list[object], list[KernelRecord]]:
        records = []
        for plan, kernel, module in zip(self.compiled.plans, self.kernels.kernels, self.kernels.modules):
            for v in plan.outputs:
                self.allocate(v)
            size = _launch_size(kernel, plan, self.rt)
            if kernel.schedule.mode == "pointwise":
                grid = kernel.schedule.pointwise_grid([self.rt.shape(v) for v in plan.domain_values()])
            else:
                grid = (kernel.schedule.grid(size), 1, 1)
            block = kernel.schedule.block
            loaded = stored = None
            if size > 0:
                args = [self.argument(p) for p in kernel.params]
                if backend == "cpu":
                    stats = module.launch(kernel.name, grid, block, args, needs_sync=kernel.needs_sync)
                    loaded, stored = stats.bytes_loaded, stats.bytes_stored
                else:
                    module.launch(kernel.name, grid, block, args)
            elif backend == "cpu":
                loaded = stored = 0
            records.append(KernelRecord(kernel.name, plan.scheduler.value, grid, (block, 1, 1),
                                        kernel.source, loaded, stored, kernel.needs_sync))
        return [self.result(v) for v in self.returned], records

    def result(self, v: SSAValue):
        if isinstance(v.type, TensorType):
            out = self.mem.output(self.buffers[v])
            # A fusion input returned as is: outputs never alias inputs.
            return np.array(out, copy=True) if v in self.compiled.launch_facts.tensor_args and isinstance(out, np.ndarray) else out
        return self.rt.scalars[v]

