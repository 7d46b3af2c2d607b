"""`FusionExecutor`: what `FusionDefinition.execute` runs, on any backend (lowering.backends).

The reference backend interprets the fusion. On a kernel backend a call first computes its
signature (lowering/execution/launch_plan.py) and, when a launch plan exists for it, replays the plan:
index checks, output buffers, prebuilt launches — nothing else. Otherwise the full path: check
inputs → evaluate extents → index checks → cache key (lowering/execution/cache_key.py: exactly what
concretization and code generation consume) → on a miss, concretize + preseg + segment →
schedules from the extents → kernels (compiled once per schedule tuple) → launch; then a plan is
stored for the signature. A compile is logged with its reason (FUSER_LOG=recompile)."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import logging
import os
import threading
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp

from fuser_dialect.extents import ExtentPlan, runtime_arguments
from fuser_dialect.fusion import the_fusion
from fuser_dialect.inputs import check_inputs
from fuser.lowering import settings
from fuser.lowering.backends import Backend
from fuser.lowering.execution.autotune import Autotuner, autotune_mode
from fuser.lowering.execution.cache import CacheInfo, FusionCache
from fuser.lowering.execution.cache_key import make_key
from fuser.lowering.gc_pause import paused_gc
from fuser.lowering.execution.compiled import build_compiled_fusion
from fuser.lowering.execution.gather_checks import IndexChecks
from fuser.lowering.execution.launch import KernelRecord, Launcher
from fuser.lowering.execution.call_signature import argument_kinds, signature_function
from fuser.lowering.execution.launch_plan import MAX_PLANS, LaunchPlan
from fuser.lowering.execution.tensor_call import TensorCall
from fuser.passes.concretize import kernel_index_checks_enabled, resize_extents_enabled


log = logging.getLogger("fuser.autotune")


class FusionExecutor:
    def __init__(self, module: ModuleOp):
        self.module = module
        self.fusion = the_fusion(module)
        with paused_gc():  # walks of the whole fusion (lowering/gc_pause.py)
            self.plan = ExtentPlan(self.fusion)
            self.index_checks = IndexChecks(self.fusion)
        self.has_index_ops = bool(self.index_checks)
        self.tensor_args = argument_kinds(self.fusion)  # None: a random seed/offset, read per call
        self.signature = signature_function(self.tensor_args)
        self.cache = FusionCache(on_evict=self._forget_plans_of)
        self._compiles = 0
        self._reuses = 0
        self._plan_hits = itertools.count()  # next() is atomic: no lock on the hot path
        self._lock = threading.Lock()
        self._local = threading.local()
        self._plans: dict[tuple, LaunchPlan] = {}
        self._tuner: Autotuner | None = None
        self.schedule_overrides: dict[int, object] = {}
        """Kernel number -> the schedule forced on it (FusionDefinition.override_schedule)."""
        self._overrides_key: tuple = ()

    def execute(self, inputs: Sequence[object], backend: Backend, disable: Sequence[str] = (),
                torch_outputs: bool = False, autotune: bool | str | None = None):
        """torch_outputs: a fusion without tensor inputs hands back torch tensors (on the cuda
        backend, allocated by torch on the GPU). autotune: compare alternative schedules on this
        call if its heuristic schedules are new (True or "time": timed; "sass": by the
        performance model on their SASS; lowering/execution/autotune.py); None: FUSER_AUTOTUNE."""
        if not backend.compiles:
            outputs = backend.run(self.fusion, inputs)
            self._local.last = None
            return outputs
        if backend.on_gpu:
            with backend.context():  # on any thread: pushed for the call, popped after it
                return self._execute(inputs, backend, disable, torch_outputs, autotune)
        return self._execute(inputs, backend, disable, torch_outputs, autotune)

    def tensor_call(self, inputs: Sequence[object], backend: Backend, order: tuple[int, ...] | None = None):
        """The TensorCall (lowering/execution/tensor_call.py) of the launch plan this thread's last
        `execute` replayed, for later calls with torch tensors like `inputs` (returning the
        outputs `order` selects); None when that call replayed no plan (it built one: the next
        call replays it) or the plan has no TensorCall."""
        last = getattr(self._local, "last", None)
        if last is None or last[1] is None or not backend.compiles:
            return None
        return TensorCall.of(self, last[1], inputs, backend, order)

    def raise_pending_index_fault(self) -> None:
        """Raises the IndexRangeError an in-kernel index check of an earlier call recorded and no
        call has read yet (the cuda backend reads a record at the next call of its plan; a CUDA
        graph replay calls no plan: torch_backend/cudagraphs.py asks here before each replay)."""
        for plan in list(self._plans.values()):
            if plan.index_records is not None:
                plan.before_call(plan.index_records)

    def override_schedule(self, kernel: int, schedule) -> None:
        if not isinstance(kernel, int) or kernel < 0:
            raise ValueError(f"override_schedule: kernel must be a kernel number (>= 0), got {kernel!r}")
        with self._lock:
            if schedule is None:
                self.schedule_overrides.pop(kernel, None)
            else:
                self.schedule_overrides[kernel] = schedule
            self._overrides_key = tuple(sorted(self.schedule_overrides.items(), key=lambda item: item[0]))

    def _execute(self, inputs: Sequence[object], backend: Backend, disable: Sequence[str], torch_outputs: bool,
                 autotune: bool | str | None = None):
        snapshot = settings.launch_settings()
        tuned = autotune_mode(snapshot.autotune if autotune is None else autotune)
        signature = self.signature(inputs)
        if signature is not None:
            # The forced schedules are part of a launch plan's key: a plan holds its kernels.
            key = (backend, disable, snapshot, signature[0], self._overrides_key, tuned, True) if torch_outputs else \
                (backend, disable, snapshot, signature[0], self._overrides_key, tuned)
            plan = self._plans.get(key)
            if plan is not None:
                outputs, counts = plan.run(inputs, signature[1])
                next(self._plan_hits)
                self._local.last = (plan.compiled, plan, counts)
                return outputs
        else:
            key = None
        return self._execute_full(inputs, backend, disable, snapshot, key, signature, torch_outputs, tuned)

    def prepare(self, inputs: Sequence[object], backend: Backend, disable: Sequence[str] = ()) -> None:
        """Everything the first `execute` of these inputs does before launching — input checks,
        concretization, segmentation, schedules, compilation — but no index checks (the values
        need not be real) and no launch. The kernels stay cached for the calls to come."""
        if not backend.compiles:
            return
        if backend.on_gpu:
            with backend.context():
                self._compile(check_inputs(self.fusion, inputs), backend, disable, with_index_checks=False)
            return
        self._compile(check_inputs(self.fusion, inputs), backend, disable, with_index_checks=False)

    def _compile(self, checked, backend, disable, with_index_checks: bool = True, tuned: dict | None = None):
        """(the bound index checks, the cache key, the compiled fusion, its extents, its kernels)
        of checked inputs, compiling what is not cached yet; `tuned`: schedules autotuning chose
        (the forced ones, fd.override_schedule, come first)."""
        resize_extents = resize_extents_enabled(disable)
        shapes, scalars = runtime_arguments(self.plan, checked)
        source_extents = self.plan.evaluate(shapes, scalars)
        index_checks = ()
        if with_index_checks and self.has_index_ops:
            index_checks = self.index_checks.bind(checked, source_extents)
            for check, extent in index_checks:
                check.check(checked, extent)
        key = make_key(self.plan, checked, backend.name, resize_extents, extents=source_extents)
        with paused_gc():  # passes, segmentation, schedules, emission: no collection on the way
            compiled = self.cache.lookup_or_build(
                key, lambda: build_compiled_fusion(self.module, shapes, scalars, backend, resize_extents)
            )
            extents = compiled.extent_plan.evaluate(shapes, scalars)
            overrides = {**(tuned or {}), **self.schedule_overrides}
            kernels, compiled_now = compiled.kernels_for(compiled.schedules(extents, checked, overrides),
                                                         kernel_index_checks_enabled(disable))
        with self._lock:
            if compiled_now:
                self._compiles += 1
            else:
                self._reuses += 1
        return index_checks, key, compiled, extents, kernels

    def _execute_full(self, inputs, backend, disable, snapshot, plan_key, signature, torch_outputs=False,
                      autotune: str = ""):
        checked = check_inputs(self.fusion, inputs)
        tuning = self._autotune(inputs, checked, backend, disable, torch_outputs, autotune) if autotune else None
        index_checks, key, compiled, extents, kernels = self._compile(
            checked, backend, disable, tuned=tuning.overrides if tuning is not None else None)
        memory = backend.allocator(inputs, torch_outputs)
        if compiled.launch_facts.has_index_ops:
            memory.before_call(compiled.index_records)  # a fault an earlier call's kernels recorded
        outputs, records, launches = Launcher(compiled, kernels, extents, checked, memory).run(backend)
        if tuning is not None and tuning.kernels:
            records = [dataclasses.replace(r, tuning=tuning.kernels.get(i)) for i, r in enumerate(records)]
        self._local.last = (compiled, None, records)
        # FUSER_DISABLE changed without settings.reload(): this call's decisions do not match the
        # snapshot the key holds, so no plan is stored under it.
        if plan_key is not None and os.environ.get("FUSER_DISABLE", "") == snapshot.disable:
            plan = LaunchPlan(compiled, extents, memory, memory.detached(), launches, records, checked,
                              signature[1], index_checks, key)
            with self._lock:
                if len(self._plans) >= MAX_PLANS:
                    self._plans.pop(next(iter(self._plans))).retired = True
                self._plans[plan_key] = plan
        return outputs

    def _autotune(self, inputs, checked, backend, disable, torch_outputs, mode: str = "time"):
        """The schedules autotuning picks for this call (computed on the first call whose
        heuristic schedules are new; lowering/execution/autotune.py), or None when a tuning run
        fails as the call itself will (the call then raises it)."""
        _, key, compiled, extents, _ = self._compile(checked, backend, disable, with_index_checks=False)
        index_checks = kernel_index_checks_enabled(disable)

        def run(overrides: dict):
            kernels, _ = compiled.kernels_for(compiled.schedules(extents, checked, overrides), index_checks)
            memory = backend.allocator(inputs, torch_outputs)
            if compiled.launch_facts.has_index_ops:
                memory.before_call(compiled.index_records)
            outputs, records, _ = Launcher(compiled, kernels, extents, checked, memory).run(backend)
            return outputs, records

        with self._lock:
            if self._tuner is None:
                self._tuner = Autotuner(str(self.module))
        try:
            return self._tuner.tune(compiled, extents, checked, backend, key, dict(self.schedule_overrides), run, mode)
        except Exception as e:  # the heuristic's own run failed: the call reports it, not tuning
            log.info("autotune: not tuned (%s: %s)", type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            return None

    def _forget_plans_of(self, cache_key) -> None:
        """The cache evicted `cache_key`'s compiled fusion: its plans go too (they hold it)."""
        with self._lock:
            for k in [k for k, p in self._plans.items() if p.cache_key == cache_key]:
                self._plans.pop(k).retired = True

    def cache_info(self) -> CacheInfo:
        """hits / misses count executions that reused / compiled kernels (a new concretization
        or a new schedule; a launch-plan call is a hit); entries = the key of each cached
        concretization."""
        plan_hits = next(copy.copy(self._plan_hits))
        with self._lock:
            return dataclasses.replace(self.cache.info(), hits=self._reuses + plan_hits, misses=self._compiles)

    def check_index_errors(self) -> None:
        """Raises the IndexError an in-kernel index check of an earlier call recorded and that
        no call has raised yet (cuda: after waiting for the GPU; lowering/execution/index_errors.py)."""
        pending = [c.__dict__["index_records"] for c in self.cache.values() if "index_records" in c.__dict__]
        if any(records.on_gpu for records in pending):
            from fuser.lowering.backends import gpu_runtime

            gpu_runtime.synchronize()  # the primary context: every stream, torch's included
        for records in pending:
            records.check_pending_gpu()

    def plan_count(self) -> int:
        """Launch plans kept (one per call signature seen since the last eviction)."""
        return len(self._plans)

    def last_compile_info(self) -> dict[str, float]:
        """Seconds the last execution's entry spent compiling: passes_s, segment_s (when it was
        built), emission_s and compile_s (its latest kernel compilation)."""
        last = getattr(self._local, "last", None)
        return dict(last[0].timings) if last is not None else {}

    def last_kernels(self) -> list[KernelRecord]:
        last = getattr(self._local, "last", None)
        if last is None:
            return []
        _, plan, records = last
        return plan.kernel_records(records) if plan is not None else list(records)

    def last_kernel_names(self) -> tuple[str, ...]:
        """The names of the kernels this thread's last `execute` launched, without building
        their records (the same tuple object for every call of one launch plan)."""
        last = getattr(self._local, "last", None)
        if last is None:
            return ()
        _, plan, records = last
        return plan.kernel_names if plan is not None else tuple(r.name for r in records)

    def last_call_used_plan(self) -> bool:
        """Whether this thread's last `execute` was served by a launch plan (for tests)."""
        last = getattr(self._local, "last", None)
        return last is not None and last[1] is not None
