"""Launch plans: a cached `execute` that only writes data pointers.

An executor keeps one `LaunchPlan` per *call signature* (lowering/execution/call_signature.py: per input,
for a tensor its type, shape, strides, dtype (torch: and device) and the alignment class of its
data pointer, which decides vector widths; for a scalar its type and value, as scalars are baked
into kernels and arguments, except one only random ops read as seed or offset: its type only,
its value read per call by launch.RngState); plus the backend, the `_disable_options`, and the
settings snapshot (`settings.launch_settings()`: memcheck build, threads, FUSER_DISABLE). Everything the full path
derives from a call is a function of that signature: the input checks' verdict, the extents, the
cache key, the schedules, the grids, the non-pointer kernel arguments, the output shapes and
layouts. So a plan built from one full-path call replays it for every later call with the same
signature:

- the index range checks (lowering/execution/gather_checks.py) — index VALUES are data, checked per call;
- per tensor input, its data address (read while computing the signature); an input the backend
  must copy (a strided view, a host array on the GPU) is adopted per call as the full path does;
- per kernel, its output buffers are allocated (shape, dtype and layout worked out once) and its
  prebuilt launch (`program.bind`: argument buffers, grid, block, config) is called with the data
  pointers; per-launch buffers (`launch.PerLaunch`, e.g. a grid reduction's zeroed workspace) are
  allocated before each launch — except where launches are synchronous (the cpu backend): there
  each thread keeps the workspace its last launch of that step left zeroed (a grid reduction's
  last block resets its counter; lowering/schedulers/grid.py), and a launch that fails gets a
  fresh one next time.

Most plans are *simple* (every step a launch, every result a kernel's buffer); their `run` is a
closure with every branch that cannot apply taken out (`_simple_run`).

A call whose signature has no plan (or cannot have one: an unhashable scalar, a NaN, an unknown
input type, a wrong count) takes the full path, which raises the same clear errors as always and
stores a plan for next time. Plans are read without a lock (a dict lookup); they are built and
stored under the executor's lock; their bound launches keep per-thread argument buffers.
"""

from __future__ import annotations

import dataclasses

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fuser.lowering.addresses import span_bytes
from fuser.lowering.errors import MemcheckError
from fuser.lowering.execution.host_calls import HostKernel
from fuser_dialect import philox
from fuser_dialect.ops_random import unseeded_random_ops
from fuser.lowering.execution.launch import (Buffer, IndexErrorWord, KernelLaunch, KernelRecord, MultiPassLaunch,
                                             PerLaunch, RngState, named, pass_arguments)

MAX_PLANS = 256
"""Signatures an executor keeps plans for (the oldest plan goes first)."""
_POINTERS = (Buffer, PerLaunch, RngState, IndexErrorWord)
"""Argument sources a bound launch takes as pointers, filled per call."""


@dataclass(frozen=True)
class _Step:
    """One kernel of a plan: buffers to allocate before it, then its bound launch (None: a
    kernel with nothing to compute)."""

    allocations: tuple[tuple[int, Callable[[], object]], ...]
    launch: Callable | None
    pointers: tuple  # per pointer argument: a buffer slot, or a PerLaunch
    per_launch: bool
    launched: KernelLaunch | None
    host: tuple | None = None
    """A host segment instead of a launch: (its HostCall, operand slots, output slot)."""


class KeptWorkspaces:
    """Where launches are synchronous: per thread and step, the workspaces its last launch left
    zeroed (a grid reduction's last block resets its counter), handed to its next launch; a
    fresh zeroed set after a launch that failed (`forget`)."""

    def __init__(self, new_workspace: Callable[[int], tuple[object, int]]):
        self.new_workspace = new_workspace
        self.held = threading.local()

    def of(self, step: int, words: tuple) -> tuple:
        """((position, address), ...) of the step's workspaces; `words`: ((position, words), ...)."""
        found = self.held.__dict__.get(step)
        if found is None:
            buffers = [(i, *self.new_workspace(w)) for i, w in words]
            found = self.held.__dict__[step] = (buffers, tuple((i, a) for i, _, a in buffers))
        return found[1]

    def forget(self, step: int) -> None:
        self.held.__dict__.pop(step, None)


class LaunchPlan:
    """The replay of one call signature's launches (see the module doc)."""

    def __init__(self, compiled, rt, memory, adopt_memory, launches: Sequence[KernelLaunch | None],
                 records: Sequence[KernelRecord], checked: Sequence[object], addresses: Sequence[int],
                 index_checks, cache_key):
        facts = compiled.launch_facts
        self.compiled = compiled
        self.rt = rt
        self.cache_key = cache_key
        self.index_checks = tuple(index_checks)
        self.records = tuple(records)
        self.kernel_names = tuple(r.name for r in self.records)
        # `memory` is the full-path call's (it may hold that call's inputs): only its allocators,
        # which keep no reference to them, are kept; the rest goes through a fresh `adopt_memory`.
        self.address = adopt_memory.address
        self.output = adopt_memory.output
        self.workspace = adopt_memory.workspace_address
        self.adopt = adopt_memory.adopt
        self.stream_of = adopt_memory.stream_of  # per call: the current torch stream may change
        self.synchronous = adopt_memory.launches_are_synchronous
        self.index_records = compiled.index_records if facts.has_index_ops else None
        self.index_record = adopt_memory.index_record
        self.after_checked_launch = adopt_memory.after_checked_launch
        self.before_call = adopt_memory.before_call
        self.n_draws = len(unseeded_random_ops(facts.fusion.body.block.ops))
        slots: dict = {a: i for i, a in enumerate(facts.args) if a in facts.tensor_args}
        self.n_inputs = len(facts.args)
        # Inputs used in place take the address the call signature read; the others are adopted
        # (copied) per call exactly as the full path does.
        self.adopted = tuple((i, adopt_memory.adopt) for a, i in slots.items()
                             if memory.address(memory.pointer(memory.adopt(checked[i]))) != addresses[i])
        steps = []
        next_slot = self.n_inputs  # slot i < n_inputs: fusion input i; then buffers in allocation order
        self.buffer_specs: dict[int, tuple] = {}
        """Buffer slot -> (shape, numpy dtype, stride order) of what its allocator returns."""
        for plan, launched in zip(compiled.plans, launches):
            allocations = []
            for v in plan.outputs:
                slots[v], next_slot = next_slot, next_slot + 1
                spec = self.buffer_specs[slots[v]] = (tuple(rt.shape(v)), np.dtype(facts.dtypes[v]),
                                                      facts.output_layout.get(v))
                allocations.append((slots[v], memory.allocator(*spec)))
            if launched is None:
                steps.append(_Step(tuple(allocations), None, (), False, None))
                continue
            if isinstance(launched, HostKernel):
                host = (launched.call, tuple(slots[v] for v in launched.call.operand_values), slots[plan.outputs[0]])
                steps.append(_Step(tuple(allocations), None, (), False, None, host))
                continue
            pointer_sources = tuple(slots[s.value] if isinstance(s, Buffer) else s
                                    for s in launched.sources if isinstance(s, _POINTERS))
            arguments = [_slot_for(s, rt, facts, checked) if isinstance(s, _POINTERS) else s for s in launched.sources]
            passes = [launched.program.bind(launched.kernel.name, launched.grid, launched.block,
                                            pass_arguments(arguments, k), needs_sync=launched.kernel.needs_sync,
                                            shared_bytes=launched.kernel.shared_bytes)
                      for k in range(launched.passes)]
            bound = passes[0] if len(passes) == 1 else MultiPassLaunch(passes)
            steps.append(_Step(tuple(allocations), bound, pointer_sources,
                               any(isinstance(s, (PerLaunch, RngState, IndexErrorWord)) for s in pointer_sources),
                               launched))
        self.steps = tuple(steps)
        self.n_slots = next_slot
        self._no_objects = (None,) * (next_slot - self.n_inputs)
        self._no_addresses = [0] * (next_slot - self.n_inputs)
        self.results = tuple(
            ("buffer", slots[v], v in facts.tensor_args) if v in slots else ("value", rt.scalars[v], False)
            for v in facts.returned)
        self.retired = False
        """Dropped by its executor (evicted, or its compiled fusion evicted): a TensorCall of it
        stops replaying it (lowering/execution/tensor_call.py)."""
        if self._is_simple():
            self.run = self._simple_run()

    def _is_simple(self) -> bool:
        """Every step a launch with its pointers in slots (or, where launches are synchronous,
        workspaces), every result a buffer a kernel wrote: what most fusions are, and what
        `_simple_run` replays."""
        def simple_pointer(source) -> bool:
            return isinstance(source, int) or (self.synchronous and isinstance(source, PerLaunch))

        return (not self.adopted
                and all(s.launch is not None and s.host is None and all(map(simple_pointer, s.pointers))
                        for s in self.steps)
                and all(kind == "buffer" and not is_input for kind, _, is_input in self.results))

    def run(self, inputs: Sequence[object], addresses: list[int]) -> tuple[list[object], list]:
        """The outputs of one call, and each kernel's (bytes loaded, bytes stored) or None."""
        for check, extent in self.index_checks:
            check.check(inputs, extent)
        if self.index_records is not None:
            self.before_call(self.index_records)
        objects = [*inputs, *self._no_objects]
        addr = addresses + self._no_addresses
        address = self.address
        for i, adopt in self.adopted:
            buf = objects[i] = adopt(inputs[i])
            addr[i] = address(buf)
        counts = []
        draws = None  # this call's (seed, offset) per unseeded random op, drawn at first need
        stream = self.stream_of()
        for step in self.steps:
            for slot, allocate in step.allocations:
                buf = objects[slot] = allocate()
                addr[slot] = address(buf)
            if step.host is not None:
                call, operands, out = step.host
                counts.append(call([objects[s] for s in operands], objects[out]))
                continue
            if step.launch is None:
                counts.append(None)
                continue
            if step.per_launch:
                keep = []
                pointers = []
                for s in step.pointers:
                    if isinstance(s, PerLaunch):
                        buf, a = self.workspace(s.words)
                        keep.append(buf)
                        pointers.append(a)
                    elif isinstance(s, RngState):
                        if draws is None:
                            draws = philox.draw_states(self.n_draws)
                        buf = self.adopt(s.words(inputs, draws))
                        keep.append(buf)
                        pointers.append(address(buf))
                    elif isinstance(s, IndexErrorWord):
                        pointers.append(self.index_record(self.index_records)[1])
                    else:
                        pointers.append(addr[s])
            else:
                pointers = [addr[s] for s in step.pointers]
            try:
                counts.append(step.launch(pointers, stream))
            except MemcheckError as e:
                raise named(e, step.launched.kernel.params, self.compiled, self.rt) from None
            if step.per_launch and any(isinstance(s, IndexErrorWord) for s in step.pointers):
                self.after_checked_launch(self.index_records)
        outputs = []
        for kind, what, is_input in self.results:
            if kind == "value":
                outputs.append(what)
                continue
            out = self.output(objects[what])
            # A fusion input returned as is: outputs never alias inputs.
            outputs.append(np.array(out, copy=True) if is_input and isinstance(out, np.ndarray) else out)
        return outputs, counts

    def _simple_run(self) -> Callable:
        """`run` for a simple plan (`_is_simple`): the same steps with every branch that cannot
        apply taken out and what it reads bound once (a cached call's path, per call)."""
        checks = self.index_checks
        no_objects, no_addresses = self._no_objects, self._no_addresses
        address, output, new_workspace = self.address, self.output, self.workspace
        result_slots = tuple(what for _, what, _ in self.results)
        compiled, rt = self.compiled, self.rt
        stream_of = self.stream_of
        steps = []
        for step in self.steps:
            # A workspace position reads slot 0 and is then overwritten with the workspace.
            slots = tuple(0 if isinstance(p, PerLaunch) else p for p in step.pointers)
            workspaces = tuple((i, p.words) for i, p in enumerate(step.pointers) if isinstance(p, PerLaunch))
            steps.append((step.allocations, step.launch, slots, step.launched, workspaces))
        kept = KeptWorkspaces(new_workspace)
        workspaces_of = kept.of

        def run(inputs: Sequence[object], addresses: list[int]) -> tuple[list[object], list]:
            for check, extent in checks:
                check.check(inputs, extent)
            objects = [*inputs, *no_objects]
            addr = addresses + no_addresses
            counts = []
            stream = stream_of()
            for k, (allocations, launch, pointers, launched, workspaces) in enumerate(steps):
                for slot, allocate in allocations:
                    buf = objects[slot] = allocate()
                    addr[slot] = address(buf)
                pointer_values = [addr[s] for s in pointers]
                if workspaces:
                    for i, a in workspaces_of(k, workspaces):
                        pointer_values[i] = a
                try:
                    counts.append(launch(pointer_values, stream))
                except BaseException as e:
                    kept.forget(k)
                    if isinstance(e, MemcheckError):
                        raise named(e, launched.kernel.params, compiled, rt) from None
                    raise
            return [output(objects[s]) for s in result_slots], counts

        return run

    def kernel_records(self, counts: Sequence) -> list[KernelRecord]:
        """fd.last_kernels() of a plan call (built only when asked for)."""
        out = []
        for record, count in zip(self.records, counts):
            if count is not None and record.bytes_loaded is not None:
                record = dataclasses.replace(record, bytes_loaded=count[0], bytes_stored=count[1])
            out.append(record)
        return out


def _slot_for(source, rt, facts, checked):
    """The PointerSlot standing for a pointer argument in a bound launch (its byte size, for
    memcheck regions): a fusion input's is the span of the input it was built from (a call of
    the same signature has the same shape and strides), a buffer's its dense size."""
    from fuser.lowering.backends.cpu_runtime import PointerSlot

    if isinstance(source, PerLaunch):
        return PointerSlot(8 * source.words)
    if isinstance(source, RngState):
        return PointerSlot(16)  # (seed, offset)
    if isinstance(source, IndexErrorWord):
        return PointerSlot(32)  # [fault, site, value, extent]
    v = source.value
    if v in facts.tensor_args:
        array = checked[facts.args.index(v)]
        if isinstance(array, np.ndarray) and min(array.strides, default=0) >= 0:
            return PointerSlot(span_bytes(array.shape, array.strides, array.itemsize))
    dtype = facts.dtypes.get(v) or np.dtype(_arg_dtype(v))
    return PointerSlot(int(np.prod(rt.shape(v), dtype=np.int64)) * dtype.itemsize)


def _arg_dtype(v):
    from fuser_dialect.types import numpy_dtype

    return numpy_dtype(v.type.dtype)


__all__ = ["MAX_PLANS", "KeptWorkspaces", "LaunchPlan"]
