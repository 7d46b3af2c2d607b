"""Launching compiled kernels: buffers, kernel arguments from run-time extents, records.

Every kernel parameter (lowering.codegen.emit_cuda.Param) is filled from the call through
`ARGUMENT_SOURCES`, a table keyed by `Param.kind`: each entry turns a parameter into an
argument *source* — `Buffer(value)` (the pointer of a call buffer: an input, an output or an
intermediate), `PerLaunch(words)` (a zero-filled scratch buffer allocated for every launch, e.g.
a grid reduction's workspace) or a constant (a numpy scalar: element strides of the actual
arrays, extents and scalar values from `evaluate_extents` on the concretized fusion, normalised
slice starts from its resize facts). A new kind is one entry here; one whose buffer is allocated
per launch returns a `PerLaunch`, which both the full path (`Launcher.run`) and launch plans
(lowering/execution/launch_plan.py) allocate before each launch.

The full path (`Launcher.run`) resolves the sources and launches through the program's checked
`launch`; it also returns the `KernelLaunch` specs a launch plan is built from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from xdsl.dialects import func
from xdsl.ir import SSAValue

from fuser_dialect import philox
from fuser_dialect.inputs import arg_label
from fuser_dialect.ops_random import unseeded_random_ops
from fuser_dialect.types import TensorType
from fuser.lowering.execution.compiled import CompiledFusion, CompiledKernels
from fuser.lowering.codegen.emit_cuda import Param
from fuser.lowering.errors import MemcheckError
from fuser.lowering.execution.host_calls import HostKernel
from fuser.lowering.execution.performance_report import ModelInputs

_SCALAR_CTYPES = {"double": np.float64, "float": np.float32, "long long": np.int64, "int": np.int32, "bool": np.bool_}


@dataclass(frozen=True)
class Buffer:
    """Argument source: the data pointer of the call buffer holding `value`."""

    value: SSAValue


@dataclass(frozen=True)
class PerLaunch:
    """Argument source: a fresh zero-filled buffer of `words` 8-byte words for each launch."""

    words: int


@dataclass(frozen=True)
class IndexErrorWord:
    """Argument source: the record a kernel's in-kernel index checks write a fault into
    (lowering/execution/index_errors.py): one per compiled fusion (and thread, on the host)."""


@dataclass(frozen=True)
class Pass:
    """Argument source: which launch of a kernel's passes this is (0, 1, ...: SchedulerUnit.passes),
    an int constant of each pass's launch (`pass_arguments`)."""


def pass_arguments(values: Sequence[object], k: int) -> list[object]:
    """`values` (arguments or sources) with each Pass the int constant of pass `k`."""
    return [np.int32(k) if isinstance(v, Pass) else v for v in values]


class MultiPassLaunch:
    """The bound launches of a kernel's passes, called in order on the same pointers (so a
    workspace the first pass writes is the one the next reads); returns the summed byte counts
    where the backend counts them."""

    def __init__(self, launches: Sequence):
        self.launches = tuple(launches)

    def __call__(self, pointers: Sequence[int], stream=None):
        counts = [launch(pointers, stream) for launch in self.launches]
        if counts[0] is None:
            return None
        return tuple(sum(c[i] for c in counts) for i in range(2))


@dataclass(frozen=True)
class RngState:
    """Argument source: a pointer to a random op's (seed, offset), two 8-byte words in a buffer
    made for every call, so that neither the compiled kernel nor a launch plan holds them (a new
    seed is neither a recompile nor a new plan). `seed` and `offset` are each ("input", k):
    fusion input k, read per call, or ("fixed", value): a value the call signature covers. An op
    given neither has `draw`: its position among the fusion's unseeded random ops, whose (seed,
    offset) pairs every call draws from the process generator (fuser_dialect/philox.py)."""

    seed: tuple[str, int] | None
    offset: tuple[str, int] | None
    draw: int | None = None

    def words(self, inputs: Sequence[object], draws: Sequence[tuple[int, int]]) -> np.ndarray:
        if self.draw is not None:
            pair = draws[self.draw]
        else:
            pair = tuple(int(inputs[v]) if how == "input" else v for how, v in (self.seed, self.offset))
        return np.array([philox.as_u64(x) for x in pair], np.uint64)


def _rng_state(launcher: "Launcher", p: Param):
    op = p.op
    if not op.seeded:
        return RngState(None, None, launcher.unseeded.index(op))
    return RngState(launcher.rng_part(op.rng_seed), launcher.rng_part(op.rng_offset))


def _workspace(launcher: "Launcher", p: Param):
    # Word 0: the finished-block counter; then `dim` partials per block (schedulers/grid.py).
    return PerLaunch(1 + p.dim * launcher.grid[0])


def _column_workspace(launcher: "Launcher", p: Param):
    # A counter per blockIdx.x, then `dim` words of partials per block (schedulers/rows/columns.py).
    grid = launcher.grid
    return PerLaunch(grid[0] + p.dim * grid[0] * grid[1])


def _scalar(launcher: "Launcher", p: Param):
    value = launcher.rt.scalars[p.value]
    if value is None:
        raise ValueError(f"scalar {p.value} has no value at run time")
    return _SCALAR_CTYPES[p.ctype](value)


ARGUMENT_SOURCES = {
    "input": lambda launcher, p: Buffer(p.value),
    "output": lambda launcher, p: Buffer(p.value),
    "stride": lambda launcher, p: np.int64(launcher.mem.element_strides(launcher.buffers[p.value])[p.dim]),
    "extent": lambda launcher, p: np.int64(launcher.rt.shape(p.value)[p.dim]),
    "scalar": _scalar,
    "slice_start": lambda launcher, p: np.int64(launcher.slice_facts[p.op].bounds[2 * p.dim]),
    "workspace": _workspace,
    "column_workspace": _column_workspace,
    "rng": _rng_state,
    "index_error": lambda launcher, p: IndexErrorWord(),
    "pass": lambda launcher, p: Pass(),
}
"""Param.kind -> (launcher, param) -> the argument's source (see the module doc)."""


@dataclass(frozen=True)
class KernelLaunch:
    """One launch of a call, its arguments as sources: what a launch plan replays."""

    kernel: object  # EmittedKernel
    program: object
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    sources: tuple
    allocates: tuple
    """The values whose buffers are allocated just before this launch (its plan's outputs)."""
    passes: int = 1
    """Launches of the kernel per call, on the same arguments but the Pass (a split scan's two)."""


@dataclass(frozen=True)
class KernelRecord:
    """One launched kernel (fd.last_kernels()). A host segment (scheduler "host") has grid and block
    None and no source; its byte counts are its operands read once and its result written once."""

    name: str
    scheduler: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    source: str
    bytes_loaded: int | None = None
    bytes_stored: int | None = None
    needs_sync: bool = True
    """Uses barriers or warp shuffles (the cpu backend then runs threads as fibers)."""
    schedule: object = None
    """The scheduler unit's schedule (its `describe()` says every decision); None for a host segment."""
    model: object = field(default=None, repr=False, compare=False)
    """What `performance()` models (lowering/execution/performance_report.py ModelInputs)."""
    tuning: object = None
    """When the call autotuned: what it found for this kernel (autotune.KernelTuning: the
    heuristic's schedule and the chosen one, their times, `speedup`), else None."""

    def performance(self, device="h100"):
        """The performance model's view of this launch on `device` (a profile name, "h100" or
        "h200", or a DeviceSpec): registers and spills from ptxas, resident blocks, bytes in
        flight, DRAM traffic, predicted time. None for a host segment or an empty launch."""
        if self.model is None or not self.grid or not all(self.grid):
            return None
        from fuser.lowering.execution.performance_report import kernel_performance

        return kernel_performance(self.model, self.name, self.grid, self.block[0], device)

    def dram_bytes(self, device="h100") -> int | None:
        """The DRAM traffic the performance model counts for this launch (each tensor once, plus
        re-reads L2 no longer holds: a weight that every row reads again counts once, where
        `bytes_loaded` counts every load); None for a host segment or an empty launch."""
        if self.model is None or not self.grid or not all(self.grid):
            return None
        from fuser.lowering.execution.performance_report import kernel_dram_bytes

        return kernel_dram_bytes(self.model, self.block[0], device)


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
        self.checked = checked

    @cached_property
    def unseeded(self) -> list:
        """The fusion's random ops without a seed, in the order each call draws for them."""
        return unseeded_random_ops(self.fusion.body.block.ops)

    @cached_property
    def draws(self) -> list[tuple[int, int]]:
        """This call's (seed, offset) per unseeded random op: drawn once, shared by its kernels."""
        return philox.draw_states(len(self.unseeded))

    def rng_part(self, v: SSAValue) -> tuple[str, int]:
        """A random op's seed or offset as RngState holds it: a fusion input read per call, or a
        value computed from the call's signature."""
        args = self.compiled.launch_facts.args
        return ("input", args.index(v)) if v in args else ("fixed", int(self.rt.scalars[v]))

    def allocate(self, v: SSAValue):
        shape = self.rt.shape(v)
        dtype = self.compiled.launch_facts.dtypes[v]
        buf = self.mem.empty(shape, dtype, self.output_layout.get(v), None)
        self.buffers[v] = buf
        return buf

    def source(self, p: Param):
        make = ARGUMENT_SOURCES.get(p.kind)
        if make is None:
            raise AssertionError(f"no argument source for kernel parameter kind {p.kind!r} (launch.ARGUMENT_SOURCES)")
        return make(self, p)

    def argument(self, source):
        """The launch argument of one source (the full path)."""
        if isinstance(source, Buffer):
            return self.mem.pointer(self.buffers[source.value])
        if isinstance(source, PerLaunch):
            return self.mem.pointer(self.mem.workspace(source.words))
        if isinstance(source, RngState):
            return self.mem.pointer(self.mem.adopt(source.words(self.checked, self.draws)))
        if isinstance(source, IndexErrorWord):
            return self.mem.index_record(self.compiled.index_records)[0]
        return source

    def run(self, backend) -> tuple[list[object], list[KernelRecord], list[KernelLaunch | None]]:
        """Launches every kernel; returns the outputs, the records and the launches (None for a
        kernel with nothing to compute) that a launch plan replays."""
        records, launches = [], []
        for plan, kernel, module in zip(self.compiled.plans, self.kernels.kernels, self.kernels.modules):
            for v in plan.outputs:
                self.allocate(v)
            if isinstance(kernel, HostKernel):
                records.append(self.run_host(plan, kernel, backend))
                launches.append(kernel)  # a launch plan replays its call
                continue
            grid = plan.unit.grid(plan, kernel.schedule, self.rt, backend.device)  # None: nothing to compute
            block = kernel.schedule.block
            loaded = stored = None
            if grid is not None:
                self.grid = grid
                sources = tuple(self.source(p) for p in kernel.params)
                args = [s if isinstance(s, Pass) else self.argument(s) for s in sources]
                passes = plan.unit.passes(plan, kernel.schedule)
                for k in range(passes):
                    try:
                        stats = module.launch(kernel.name, grid, block, pass_arguments(args, k),
                                              needs_sync=kernel.needs_sync, shared_bytes=kernel.shared_bytes,
                                              stream=self.mem.stream)
                    except MemcheckError as e:
                        raise named(e, kernel.params, self.compiled, self.rt) from None
                    if any(isinstance(s, IndexErrorWord) for s in sources):
                        self.mem.after_checked_launch(self.compiled.index_records)
                    if stats is not None:  # backends that count global bytes
                        loaded = (loaded or 0) + stats.bytes_loaded
                        stored = (stored or 0) + stats.bytes_stored
                launches.append(KernelLaunch(kernel, module, tuple(grid), (block, 1, 1), sources, tuple(plan.outputs),
                                             passes))
            else:
                if backend.counts_bytes:
                    loaded = stored = 0
                launches.append(None)
            model = ModelInputs(plan, kernel.schedule, self.rt, kernel.source, kernel.shared_bytes)
            records.append(KernelRecord(kernel.name, plan.scheduler, grid or (0, 0, 0), (block, 1, 1),
                                        kernel.source, loaded, stored, kernel.needs_sync, kernel.schedule, model))
        return [self.result(v) for v in self.returned], records, launches

    def run_host(self, plan, kernel: HostKernel, backend) -> KernelRecord:
        """Runs a host segment (lowering/segmentation/host_segments.py): a library call, no grid, no CUDA C."""
        counts = kernel.call([self.buffers[v] for v in kernel.call.operand_values], self.buffers[plan.outputs[0]])
        loaded, stored = counts if backend.counts_bytes else (None, None)
        return KernelRecord(kernel.name, plan.scheduler, None, None, "", loaded, stored, False)

    def result(self, v: SSAValue):
        if isinstance(v.type, TensorType):
            out = self.mem.output(self.buffers[v])
            # A fusion input returned as is: outputs never alias inputs.
            return np.array(out, copy=True) if v in self.compiled.launch_facts.tensor_args and isinstance(out, np.ndarray) else out
        return self.rt.scalars[v]



def named(error: MemcheckError, params: Sequence[Param], compiled: CompiledFusion, rt) -> MemcheckError:
    """`error` with the fusion value its kernel parameter holds (the runtime knows only "in3")."""
    param = next((p for p in params if p.name == error.param and p.value is not None), None)
    if param is None:
        return error
    facts = compiled.launch_facts
    if param.value in facts.args:
        what = f"fusion {arg_label(facts.fusion, facts.args.index(param.value))}"
    elif param.value in facts.returned:
        what = f"fusion output {facts.returned.index(param.value)}"
    else:
        what = f"the result of {param.value.owner.name}"  # type: ignore[union-attr]
    return MemcheckError(f"{error}; {param.name} is {what}, shape {list(rt.shape(param.value))}",
                         kernel=error.kernel, code=error.code, param=f"{param.name} ({what})",
                         index=error.index, extent=error.extent)
