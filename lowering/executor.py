"""`FusionExecutor`: what `FusionDefinition.execute` runs, on any backend (lowering.backends).

The reference backend interprets the fusion. On a kernel backend, per call: check inputs → evaluate extents → cache key (lowering/cache_key.py: exactly what
concretization and code generation consume) → on a miss, concretize + preseg + segment →
schedules from the extents → kernels (compiled once per schedule tuple) → launch.
A miss is logged with its reason (FUSER_LOG=recompile)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp

from fuser_dialect.extents import ExtentPlan, runtime_arguments
from fuser_dialect.fusion import the_fusion
from fuser_dialect.inputs import check_inputs
from fuser.lowering.backends import Backend
from fuser.lowering.cache import CacheInfo, FusionCache
from fuser.lowering.cache_key import make_key
from fuser.lowering.compiled import build_compiled_fusion
from fuser.lowering.gather_checks import check_index_ranges, index_ops
from fuser.lowering.launch import KernelRecord, Launcher
from fuser.passes.concretize import resize_extents_enabled


class FusionExecutor:
    def __init__(self, module: ModuleOp):
        self.module = module
        self.fusion = the_fusion(module)
        self.plan = ExtentPlan(self.fusion)
        self.has_index_ops = bool(index_ops(self.fusion))
        self.cache = FusionCache()
        self._compiles = 0
        self._reuses = 0
        self._lock = threading.Lock()
        self._local = threading.local()

    def execute(self, inputs: Sequence[object], backend: Backend, disable: Sequence[str] = ()):
        if not backend.compiles:
            outputs = backend.run(self.fusion, inputs)
            self._local.records = []
            self._local.last = None
            return outputs
        resize_extents = resize_extents_enabled(disable)
        checked = check_inputs(self.fusion, inputs)
        shapes, scalars = runtime_arguments(self.plan, checked)
        source_extents = self.plan.evaluate(shapes, scalars)
        if self.has_index_ops:
            check_index_ranges(self.fusion, checked, source_extents)
        key = make_key(self.plan, checked, backend.name, resize_extents, extents=source_extents)
        compiled = self.cache.lookup_or_build(
            key, lambda: build_compiled_fusion(self.module, shapes, scalars, backend, resize_extents)
        )
        extents = compiled.extent_plan.evaluate(shapes, scalars)
        kernels, compiled_now = compiled.kernels_for(compiled.schedules(extents, checked))
        with self._lock:
            if compiled_now:
                self._compiles += 1
            else:
                self._reuses += 1
        memory = backend.allocator(inputs)
        outputs, records = Launcher(compiled, kernels, extents, checked, memory).run(backend)
        self._local.records = records
        self._local.last = compiled
        return outputs

    def cache_info(self) -> CacheInfo:
        """hits / misses count executions that reused / compiled kernels (a new concretization
        or a new schedule); entries = the key of each cached concretization."""
        with self._lock:
            return dataclasses.replace(self.cache.info(), hits=self._reuses, misses=self._compiles)

    def last_compile_info(self) -> dict[str, float]:
        """Seconds the last execution's entry spent compiling: passes_s, segment_s (when it was
        built), emission_s and compile_s (its latest kernel compilation)."""
        last = getattr(self._local, "last", None)
        return dict(last.timings) if last is not None else {}

    def last_kernels(self) -> list[KernelRecord]:
        return list(getattr(self._local, "records", []))
