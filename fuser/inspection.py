"""nvFuser's inspection methods on `FusionDefinition` that need the lowering: the CUDA source
and the scheduled fusion for some inputs or for the last execution, and a repro script.

The scheduled fusion is fuser's concretized, pre-segmented fusion (fuser-dialect MLIR) under
one comment line per kernel: its segment, scheduler and schedule (or, for the last
execution, its launch grid and block). nvFuser's `tensor_transforms` and `intrinsic_code`
flags are accepted; fuser's IR has no tensor transforms to show, and its sources are whole
programs already (the prelude included)."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

import numpy as np

from fuser_dialect.inputs import check_inputs, is_torch_tensor


class Inspection:
    """Mixed into fuser.FusionDefinition."""

    def cuda_code_for(self, inputs: Sequence[object], intrinsic_code: bool = False, backend: str | None = None) -> str:
        """The CUDA source `execute(inputs, backend)` runs (compiled now if it is not cached;
        nothing is launched and no input is written). Empty for the reference backend."""
        compiled = self._compiled_for(inputs, backend)
        if compiled is None:
            return ""
        return program_text(compiled[1].kernels)

    def scheduled_fusion_ir_for(self, inputs: Sequence[object], tensor_transforms: bool = False,
                                backend: str | None = None) -> str:
        """The scheduled fusion `execute(inputs, backend)` runs (see the module doc)."""
        compiled = self._compiled_for(inputs, backend)
        if compiled is None:
            return self.fusion_ir()
        fusion, kernels = compiled
        notes = [f"// segment {p.index}: {p.scheduler}{_why(p)}, kernel {k.name}, schedule {k.schedule}"
                 for p, k in zip(fusion.plans, kernels.kernels)]
        return "\n".join(notes + [str(fusion.module)])

    def last_scheduled_fusion_ir(self, tensor_transforms: bool = False) -> str:
        """The scheduled fusion of this thread's last `execute` (empty before one, or after one
        on the reference backend)."""
        last = getattr(self._get_executor()._local, "last", None)
        if last is None:
            return ""
        notes = [f"// segment {k}: {r.scheduler}, kernel {r.name}, grid {r.grid}, block {r.block}"
                 for k, r in enumerate(self.last_kernels())]
        return "\n".join(notes + [str(last[0].module)])

    def kernels_for(self, inputs: Sequence[object], backend: str | None = None) -> list:
        """The kernels `execute(inputs, backend)` would launch, as `last_kernels()` records
        without byte counts, compiled now if not cached and never launched: their grids,
        schedules and sources, and `.performance(device)`, the model's prediction on a named GPU.
        Only shapes, dtypes, strides and alignment of `inputs` are read (np.empty arrays do)."""
        from fuser.execution import _backend_named
        from fuser.lowering.execution.launch import KernelRecord
        from fuser.lowering.execution.performance_report import ModelInputs
        from fuser.lowering.segmentation.host_segments import is_host_plan

        chosen = _backend_named(backend)
        if not chosen.compiles:
            return []
        fusion, kernels, extents = self._compiled_with_extents(inputs, chosen)
        records = []
        for plan, kernel in zip(fusion.plans, kernels.kernels):
            if is_host_plan(plan):
                records.append(KernelRecord(kernel.name, plan.scheduler, None, None, "", needs_sync=False))
                continue
            grid = plan.unit.grid(plan, kernel.schedule, extents, chosen.device)
            model = ModelInputs(plan, kernel.schedule, extents, kernel.source, kernel.shared_bytes)
            records.append(KernelRecord(kernel.name, plan.scheduler, grid or (0, 0, 0), (kernel.schedule.block, 1, 1),
                                        kernel.source, None, None, kernel.needs_sync, kernel.schedule, model))
        return records

    def _compiled_for(self, inputs: Sequence[object], backend: str | None):
        """(the compiled fusion, its kernels) for these inputs, or None on the reference backend."""
        from fuser.execution import _backend_named

        chosen = _backend_named(backend)
        if not chosen.compiles:
            return None
        fusion, kernels, _ = self._compiled_with_extents(inputs, chosen)
        return fusion, kernels

    def _compiled_with_extents(self, inputs: Sequence[object], chosen):
        executor = self._get_executor()
        flat = self._flat_inputs(inputs) if self.vector_inputs else inputs
        checked = check_inputs(executor.fusion, flat)
        if chosen.on_gpu:
            with chosen.context():
                _, _, fusion, extents, kernels = executor._compile(checked, chosen, (), with_index_checks=False)
        else:
            _, _, fusion, extents, kernels = executor._compile(checked, chosen, (), with_index_checks=False)
        return fusion, kernels, extents

    def repro_script_for(self, inputs: Sequence[object] | None = None) -> str:
        """A Python script that rebuilds this fusion (from its IR: `FusionDefinition.from_ir`)
        and, given `inputs`, executes it on inputs of the same kinds, shapes, strides and dtypes
        (random values; Python scalars as they are)."""
        import fuser

        versions = [f"# fuser version: {fuser.version()}", f"# numpy version: {np.__version__}"]
        torch = sys.modules.get("torch")
        if torch is not None:
            versions.append(f"# torch version: {torch.__version__}")
        lines = [*versions, "import numpy as np", *(["import torch"] if torch is not None else []),
                 "from fuser import FusionDefinition", "", f"fd = FusionDefinition.from_ir('''\n{self.fusion_ir()}''')"]
        if inputs is not None:
            flat = self._flat_inputs(inputs) if self.vector_inputs else inputs
            lines += ["rng = np.random.default_rng(0)", "inputs = ["]
            lines += [f"    {_input_expression(x)}," for x in flat]
            lines += ["]", "fd.execute(inputs)"]
        return "\n".join(lines) + "\n"


def _why(plan) -> str:
    return f" ({plan.split_reason})" if plan.split_reason else ""


def _input_expression(x: object) -> str:
    """Python source making an input like `x`."""
    if is_torch_tensor(x):
        return _torch_expression(x)
    if isinstance(x, np.ndarray):
        return _numpy_expression(x)
    text = repr(x)
    text = re.sub(r"\binf\b", 'float("inf")', text)
    return re.sub(r"\bnan\b", 'float("nan")', text)


def _numpy_expression(x: np.ndarray) -> str:
    shape, strides = tuple(x.shape), tuple(s // x.itemsize for s in x.strides)
    dense = x.flags.c_contiguous or x.size == 0 or min(strides) < 0
    # a strided input: enough elements for its largest linear index, viewed with its strides
    count = shape if dense else 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    values = _numpy_values(x.dtype, count)
    return values if dense else f"np.lib.stride_tricks.as_strided({values}, {shape}, {tuple(x.strides)})"


def _numpy_values(dtype: np.dtype, count) -> str:
    if dtype.kind == "b":
        return f"rng.integers(0, 2, {count}).astype(bool)"
    if dtype.kind in "iu":
        return f"rng.integers(0, 10, {count}).astype(np.{dtype.name})"
    if dtype.kind == "c":
        return f"(rng.standard_normal({count}) + 1j * rng.standard_normal({count})).astype(np.{dtype.name})"
    if dtype.kind == "f":
        return f"rng.standard_normal({count}).astype(np.{dtype.name})"
    return f"rng.standard_normal({count}).astype(__import__('ml_dtypes').{dtype.name})"  # bf16, fp8


def _torch_expression(x) -> str:
    shape, dtype, device = tuple(x.size()), str(x.dtype), str(x.device)
    if x.is_contiguous():
        return f"torch.testing.make_tensor({shape}, dtype={dtype}, device='{device}')"
    # as nvFuser's repro: enough elements for the largest linear index, viewed with x's strides
    size = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, x.stride()))
    if x.dtype.is_floating_point or x.dtype.is_complex:
        base = f"torch.randn({size}, dtype={dtype}, device='{device}')"
    else:
        high = 2 if x.dtype is sys.modules["torch"].bool else 10
        base = f"torch.randint(0, {high}, ({size},), dtype={dtype}, device='{device}')"
    return f"{base}.as_strided({shape}, {tuple(x.stride())})"


def program_text(kernels: Sequence[object]) -> str:
    """The one CUDA program of a fusion's kernels (the shared head once, then each kernel), as
    the backends compile it: nvcc/NVRTC take it as it is. Host segments have no source."""
    from fuser.lowering.execution.compiled import fusion_source

    with_source = [k for k in kernels if getattr(k, "source", "")]
    return fusion_source(with_source) if with_source else ""
