"""Per launched kernel, what the performance model says of it on a named GPU, without one:
ptxas's resources (registers, spills, shared memory), resident blocks and warps per SM, access
widths, bytes in flight per SM, DRAM traffic and the predicted time
(lowering/schedulers/performance.py). `fd.last_kernels()[i].performance("h100")` and the
benchmark tables read it.

Resources come from ptxas when a CUDA compiler is installed (NVRTC's or nvcc's `-v` report,
compiled for the device's architecture; no GPU needed), else from the scheduler's estimate,
and the report says which. The bytes a thread keeps in flight come from the same cubin's SASS
(lowering/backends/sass.py: loads issued before the first use of any of them, in the loops a
thread spends its time in); where nvdisasm cannot run, from the schedule's intent, and the
report says so (`in_flight_from`). Both figures are reported."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fuser.lowering.device import DeviceSpec, profile
from fuser.lowering.errors import FuserError
from fuser.lowering.schedulers.performance import Resources, ctas_per_sm, predict


@dataclass(frozen=True)
class KernelPerformance:
    device: str
    schedule: str
    registers: int
    spill_bytes: int
    shared_bytes: int
    """Static + dynamic shared memory per block."""
    resources_from: str
    """"ptxas" (compiled for the device's architecture) or "estimate" (no CUDA compiler here)."""
    ctas_per_sm: int
    warps_per_sm: int
    load_bytes: int
    """Width of the widest global access (from the PTX; the schedule's when not compiled)."""
    in_flight_per_sm: int
    """Bytes of loads in flight per busy SM, as the prediction takes it: from the SASS where it
    was read (`in_flight_from`), else the schedule's intent."""
    dram_bytes: int
    min_bytes: int
    predicted_s: float
    fraction_of_copy: float
    limiter: str
    in_flight_from: str = "schedule"
    """"sass" (counted in the compiled kernel: lowering/backends/sass.py) or "schedule" (the
    schedule's intent: unroll x vector), with why the SASS was not read."""
    schedule_in_flight_per_sm: int = 0
    """What the schedule means to keep in flight per SM (unroll x vector x resident threads)."""
    sass_in_flight_per_sm: int | None = None
    """What the SASS keeps in flight per SM (None: not read)."""
    local_memory_accesses: int | None = None
    """LDL/STL instructions in the SASS (spills, run-time indexed arrays); None: not read."""
    stack_bytes: int = 0
    """ptxas's stack frame."""

    def describe(self) -> str:
        schedule = (f"; the schedule means {self.schedule_in_flight_per_sm / 1024:.1f}"
                    if self.schedule_in_flight_per_sm != self.in_flight_per_sm else "")
        return (f"{self.device}: {self.predicted_s * 1e6:.1f} us predicted ({100 * self.fraction_of_copy:.0f}% of copy, "
                f"{self.limiter}); {self.registers} registers ({self.resources_from}), {self.spill_bytes} B spilled, "
                f"{self.shared_bytes} B shared, {self.ctas_per_sm} CTA/SM, {self.warps_per_sm} warps/SM, "
                f"{self.load_bytes} B loads, {self.in_flight_per_sm / 1024:.1f} KiB in flight/SM "
                f"(from the {self.in_flight_from}{schedule})")


@dataclass(frozen=True)
class ModelInputs:
    """What a launch record keeps to be modelled later (only when asked: it compiles)."""

    plan: object
    schedule: object
    extents: object
    source: str
    shared_dynamic: int


def _ptxas(source: str, name: str, arch: str):
    from fuser.lowering.backends import compile as cc
    from fuser.lowering.backends.resources import access_widths, ptxas_reports

    try:
        return ptxas_reports(source, arch).get(name), access_widths(source, arch).get(name)
    except (cc.CompilerUnavailable, FuserError):
        return None, None


def _sass(source: str, name: str, arch: str):
    """(the kernel's SassReport, "") or (None, why it was not read)."""
    from fuser.lowering.backends import compile as cc
    from fuser.lowering.backends.resources import sass_of
    from fuser.lowering.backends.sass import SassUnavailable

    try:
        report = sass_of(source, arch).get(name)
    except (cc.CompilerUnavailable, FuserError, SassUnavailable) as e:
        return None, str(e).splitlines()[0] if str(e) else type(e).__name__
    return (report, "") if report is not None else (None, f"no SASS for {name} in the cubin")


def kernel_dram_bytes(inputs: ModelInputs, block: int, device: DeviceSpec | str = "h100") -> int | None:
    """The DRAM traffic the model counts for one launch (each tensor once, plus re-reads that L2
    no longer holds), from the scheduler's resource estimate (no compile); None when the unit
    does not model its kernels."""
    spec = profile(device) if isinstance(device, str) else device
    unit = inputs.plan.unit  # type: ignore[attr-defined]
    estimate = unit.estimated_resources(inputs.plan, inputs.schedule, inputs.extents)
    ctas = ctas_per_sm(spec, block, estimate.registers, max(estimate.shared_bytes, inputs.shared_dynamic))
    traffic = unit.traffic(inputs.plan, inputs.schedule, inputs.extents, spec, ctas)
    return None if traffic is None else traffic.dram_bytes


def kernel_performance(inputs: ModelInputs, name: str, grid: tuple[int, int, int], block: int,
                       device: DeviceSpec | str = "h100") -> KernelPerformance | None:
    """The model's view of one launch on `device` (a DeviceSpec or a profile name); None for a
    unit that does not model its kernels."""
    spec = profile(device) if isinstance(device, str) else device
    unit = inputs.plan.unit  # type: ignore[attr-defined]
    estimate = unit.estimated_resources(inputs.plan, inputs.schedule, inputs.extents)
    report, widths = _ptxas(inputs.source, name, spec.arch)
    if report is not None:
        resources = Resources(report.registers, report.static_shared_bytes + inputs.shared_dynamic,
                              report.spill_bytes, measured=True)
    else:
        resources = Resources(estimate.registers, max(estimate.shared_bytes, inputs.shared_dynamic))
    ctas = ctas_per_sm(spec, block, resources.registers, resources.shared_bytes)
    traffic = unit.traffic(inputs.plan, inputs.schedule, inputs.extents, spec, ctas)
    if traffic is None:
        return None
    blocks = grid[0] * grid[1] * grid[2]
    intended = predict(spec, blocks, block, resources, traffic)
    sass, why_not = _sass(inputs.source, name, spec.arch)
    if sass is not None and sass.global_loads:
        # What the compiled code keeps in flight, not what the schedule means to.
        traffic = dataclasses.replace(traffic, in_flight_per_thread=sass.in_flight_per_thread)
        source_of_flight = "sass"
    elif sass is not None:
        traffic = dataclasses.replace(traffic, loads=False)
        source_of_flight = "sass (no global loads: stores only, bound by DRAM's rate)"
    else:
        source_of_flight = f"schedule ({why_not})"
    prediction = predict(spec, blocks, block, resources, traffic)
    load = widths[0] if widths else traffic.access_bytes
    return KernelPerformance(
        spec.name, inputs.schedule.describe(), resources.registers, resources.spill_bytes,  # type: ignore[attr-defined]
        resources.shared_bytes, "ptxas" if resources.measured else "estimate", prediction.ctas_per_sm,
        prediction.warps_per_sm, load, prediction.in_flight_per_sm, traffic.dram_bytes,
        traffic.min_bytes or traffic.dram_bytes, prediction.seconds, prediction.fraction_of_copy, prediction.limiter,
        source_of_flight, intended.in_flight_per_sm,
        prediction.in_flight_per_sm if sass is not None and sass.global_loads else None,
        sass.local_loads + sass.local_stores if sass is not None else None,
        report.stack_bytes if report is not None else 0)


__all__ = ["KernelPerformance", "ModelInputs", "kernel_dram_bytes", "kernel_performance"]
