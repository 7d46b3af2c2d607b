"""Launching compiled kernels: buffers, kernel arguments from run-time extents, records.

Every kernel parameter (lowering.emit_cuda.Param) is filled from the call: tensor
pointers, element strides of the actual arrays, extents and scalar values from
`evaluate_extents` on the concretized fusion, normalised slice starts from its resize facts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import func
from xdsl.ir import SSAValue

from fuser_dialect.inputs import arg_label
from fuser_dialect.types import TensorType
from fuser.lowering.compiled import CompiledFusion, CompiledKernels
from fuser.lowering.emit_cuda import Param
from fuser.lowering.errors import MemcheckError

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


class Launcher:
    """Runs one call of a CompiledFusion."""

    def __init__(self, compiled: CompiledFusion, kernels: CompiledKernels, extents, checked: Sequence[object],
                 memory):
        self.compiled = compiled
        self.kernels = kernels
        self.rt = extents
        self.mem = memory  # the backend's allocator for this call
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
        if p.kind == "workspace":
            # Word 0: the finished-block counter; then `dim` partials per block (schedulers/grid.py).
            return self.mem.pointer(self.mem.workspace(1 + p.dim * self.grid[0]))
        raise AssertionError(p.kind)

    def run(self, backend) -> tuple[list[object], list[KernelRecord]]:
        records = []
        for plan, kernel, module in zip(self.compiled.plans, self.kernels.kernels, self.kernels.modules):
            for v in plan.outputs:
                self.allocate(v)
            grid = plan.unit.grid(plan, kernel.schedule, self.rt)  # None: nothing to compute
            block = kernel.schedule.block
            loaded = stored = None
            if grid is not None:
                self.grid = grid
                args = [self.argument(p) for p in kernel.params]
                try:
                    stats = module.launch(kernel.name, grid, block, args, needs_sync=kernel.needs_sync,
                                          shared_bytes=kernel.shared_bytes)
                except MemcheckError as e:
                    raise self.named(e, kernel.params) from None
                if stats is not None:  # backends that count global bytes
                    loaded, stored = stats.bytes_loaded, stats.bytes_stored
            elif backend.counts_bytes:
                loaded = stored = 0
            records.append(KernelRecord(kernel.name, plan.scheduler, grid or (0, 0, 0), (block, 1, 1),
                                        kernel.source, loaded, stored, kernel.needs_sync))
        return [self.result(v) for v in self.returned], records

    def named(self, error: MemcheckError, params: Sequence[Param]) -> MemcheckError:
        """`error` with the fusion value its kernel parameter holds (the runtime knows only "in3")."""
        param = next((p for p in params if p.name == error.param and p.value is not None), None)
        if param is None:
            return error
        facts = self.compiled.launch_facts
        if param.value in facts.args:
            what = f"fusion {arg_label(self.fusion, facts.args.index(param.value))}"
        elif param.value in self.returned:
            what = f"fusion output {self.returned.index(param.value)}"
        else:
            what = f"the result of {param.value.owner.name}"  # type: ignore[union-attr]
        return MemcheckError(f"{error}; {param.name} is {what}, shape {list(self.rt.shape(param.value))}",
                             kernel=error.kernel, code=error.code, param=f"{param.name} ({what})",
                             index=error.index, extent=error.extent)

    def result(self, v: SSAValue):
        if isinstance(v.type, TensorType):
            out = self.mem.output(self.buffers[v])
            # A fusion input returned as is: outputs never alias inputs.
            return np.array(out, copy=True) if v in self.compiled.launch_facts.tensor_args and isinstance(out, np.ndarray) else out
        return self.rt.scalars[v]

