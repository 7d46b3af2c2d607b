"""A fusion compiled for one concretization: the concretized IR, its kernel plans, and the
kernels rendered and compiled per schedule.

Building one (on a cache miss): clone the fusion → `concretize` for the call's extents →
`fuser-preseg` → segment → per call, schedules from the extents → render → compile.
Compiling (source → module) is separate from launching (lowering/execution/launch.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from fuser_dialect.extents import ExtentPlan
from fuser_dialect.fusion import make_context, output_order, the_fusion
from fuser_dialect.ops_resize import SliceOp
from fuser_dialect.types import TensorType, numpy_dtype
from fuser.lowering.backends.base import KernelBackend
from fuser.lowering.codegen.emit_cuda import EmittedKernel
from fuser.lowering.execution.host_calls import host_kernel
from fuser.lowering.segmentation.host_segments import is_host_plan
from fuser.lowering.codegen.kernel import KernelPlan
from fuser.lowering.codegen.render import header_macros, render
from fuser.lowering.segmentation.segment import plan_kernels


@dataclass
class CompiledKernels:
    """Rendered + compiled kernels of every plan, for one tuple of schedules."""

    kernels: list[EmittedKernel]
    modules: list[object]
    """The program (CpuModule or GpuModule) holding each kernel: one program per fusion, so
    every entry is the same object (one NVRTC program / one g++ run for all its kernels)."""
    compile_seconds: float
    source: str = ""
    """The source of that one program: the shared head once, then every kernel."""


def fusion_source(kernels: Sequence[EmittedKernel]) -> str:
    """One source for all kernels of a fusion: each rendered source is the shared head (prelude
    and support functions, lowering/codegen/render.py) followed by its kernel, so the head is kept once.
    Kernel names are unique within a fusion (plan names)."""
    if len(kernels) == 1:
        return kernels[0].source
    head = _common_head(kernels[0].source)
    if not head or not all(k.source.startswith(head) for k in kernels):
        raise AssertionError("rendered kernels do not share the prelude head: cannot form one program")
    return head + "".join(k.source[len(head):] for k in kernels)


def _common_head(source: str) -> str:
    """The head a rendered source starts with: everything before its scheduler comment line."""
    marker = source.find("\n// scheduler: ")
    return source[:marker + 1] if marker >= 0 else ""


@dataclass(frozen=True)
class LaunchFacts:
    """What every launch of a compiled fusion needs from its IR, read once."""

    fusion: func.FuncOp
    args: tuple
    tensor_args: frozenset
    returned: list
    output_layout: dict
    dtypes: dict
    has_slices: bool
    has_index_ops: bool


@dataclass
class CompiledFusion:
    module: ModuleOp
    plans: list[KernelPlan]
    backend: KernelBackend
    timings: dict[str, float] = field(default_factory=dict)
    variants: dict[tuple, CompiledKernels] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    written_as: dict = field(default_factory=dict)
    """Each index op of the compiled fusion as the author wrote it (index_errors.WrittenAs)."""

    @cached_property
    def fusion(self) -> func.FuncOp:
        return the_fusion(self.module)

    @cached_property
    def launch_facts(self) -> LaunchFacts:
        f = self.fusion
        args = tuple(f.body.block.args)
        ret = f.body.block.last_op
        assert isinstance(ret, func.ReturnOp)
        values = [v for p in self.plans for v in p.outputs]
        return LaunchFacts(
            fusion=f,
            args=args,
            tensor_args=frozenset(a for a in args if isinstance(a.type, TensorType)),
            returned=list(ret.arguments),
            output_layout={v: output_order(f, i)[0] for i, v in enumerate(ret.arguments)},
            dtypes={v: numpy_dtype(v.type.dtype) for v in values},
            has_slices=any(isinstance(op, SliceOp) for op in f.body.block.ops),
            has_index_ops=bool(self.index_records.sites),
        )

    @cached_property
    def index_records(self):
        """Where the in-kernel index checks of this fusion's kernels record a fault."""
        from fuser.lowering.codegen.emit_cuda import index_ops
        from fuser.lowering.execution.index_errors import IndexErrorRecords, WrittenAs

        sites = index_ops(self.fusion)
        return IndexErrorRecords(sites, [self.written_as.get(op) or WrittenAs(None, op.name) for op in sites])

    @cached_property
    def extent_plan(self) -> ExtentPlan:
        """Run-time extents of the concretized fusion (kernel arguments), read once."""
        return ExtentPlan(self.fusion)

    def schedules(self, extents, checked: Sequence[object] = (), overrides: dict | None = None) -> tuple:
        """The schedule of every kernel for these run-time extents (and input arrays, whose
        strides and alignment may decide vector widths), each chosen by its scheduler unit,
        unless `overrides` forces one (kernel number -> schedule), which its unit checks first."""
        arrays = dict(zip(self.launch_facts.args, checked))
        layout = self.launch_facts.output_layout
        device = self.backend.device
        overrides = overrides or {}
        if overrides and max(overrides) >= len(self.plans):
            raise ValueError(f"override_schedule: kernel {max(overrides)} does not exist: this call has "
                             f"{len(self.plans)} kernel(s)")
        chosen = []
        for k, p in enumerate(self.plans):
            shapes = [extents.shape(v) for v in p.domain_values()]
            if k in overrides:
                if not hasattr(p.unit, "check_schedule"):
                    raise ValueError(f"override_schedule: kernel {k} runs on the host ({p.scheduler}): it has no "
                                     "schedule to force")
                p.unit.check_schedule(p, overrides[k], shapes, arrays, layout, device)
                chosen.append(overrides[k])
            else:
                chosen.append(p.unit.choose(p, shapes, arrays, layout, device))
        return tuple(chosen)

    def kernels_for(self, schedules: tuple, index_checks: bool = True) -> tuple[CompiledKernels, bool]:
        """(kernels, compiled_now). Compiles under the entry's lock: once per schedule tuple,
        build variant of the backend and choice of in-kernel index checks."""
        key = (schedules, self.backend.variant(), self.backend.device.key(), index_checks)
        with self.lock:
            found = self.variants.get(key)
            if found is not None:
                return found, False
            start = time.perf_counter()
            device_plans = [p for p in self.plans if not is_host_plan(p)]
            macros = frozenset().union(*map(header_macros, device_plans))  # one head for the program
            kernels = [host_kernel(p, s) if is_host_plan(p) else render(p, s, macros, index_checks)
                       for p, s in zip(self.plans, schedules)]
            device_kernels = [k for p, k in zip(self.plans, kernels) if not is_host_plan(p)]
            source = fusion_source(device_kernels) if device_kernels else ""
            emitted = time.perf_counter()
            program = self.backend.program(source) if source else None  # host segments only: nothing to compile
            done = time.perf_counter()
            self.timings["emission_s"] = emitted - start
            self.timings["compile_s"] = done - emitted
            compiled = CompiledKernels(kernels, [program] * len(kernels), done - start, source)
            self.variants[key] = compiled
            return compiled, True


def build_compiled_fusion(
    original: ModuleOp,
    input_shapes: Sequence[tuple[int, ...] | None],
    scalar_values: Sequence[object],
    backend: KernelBackend,
    resize_extents: bool,
) -> CompiledFusion:
    from fuser.passes.concretize import concretize
    from fuser.passes.preseg import PresegPass

    start = time.perf_counter()
    module = original.clone()
    concretize(module, list(input_shapes), list(scalar_values), resize_extents=resize_extents)
    PresegPass().apply(make_context(), module)
    written_as = _index_ops_as_written(original, module)
    passes_done = time.perf_counter()
    plans = plan_kernels(the_fusion(module))
    done = time.perf_counter()
    return CompiledFusion(module, plans, backend, {"passes_s": passes_done - start, "segment_s": done - passes_done},
                          written_as=written_as)


def _index_ops_as_written(original: ModuleOp, compiled: ModuleOp) -> dict:
    """Each index op of the compiled fusion -> the op its author wrote (its index errors name that)."""
    from fuser.lowering.codegen.emit_cuda import index_ops
    from fuser.lowering.execution.index_errors import as_written

    sites = index_ops(the_fusion(compiled))
    if not sites:
        return {}
    return dict(zip(sites, as_written(index_ops(the_fusion(original)), sites)))
