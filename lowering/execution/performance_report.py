"""Per launched kernel, what the performance model says of it on a named GPU, without one:
ptxas's resources (registers, spills, shared memory), resident blocks and warps per SM, access
widths, bytes in flight per SM, DRAM traffic and the predicted time
(lowering/schedulers/performance.py). `fd.last_kernels()[i].performance("h100")` and the
benchmark tables read it.

Resources come from ptxas when a CUDA compiler is installed (NVRTC's or nvcc's `-v` report,
compiled for the device's architecture; no GPU needed), else from the scheduler's estimate,
and the report says which."""

from __future__ import annotations

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
    dram_bytes: int
    min_bytes: int
    predicted_s: float
    fraction_of_copy: float
    limiter: str

    def describe(self) -> str:
        return (f"{self.device}: {self.predicted_s * 1e6:.1f} us predicted ({100 * self.fraction_of_copy:.0f}% of copy, "
                f"{self.limiter}); {self.registers} registers ({self.resources_from}), {self.spill_bytes} B spilled, "
                f"{self.shared_bytes} B shared, {self.ctas_per_sm} CTA/SM, {self.warps_per_sm} warps/SM, "
                f"{self.load_bytes} B loads, {self.in_flight_per_sm / 1024:.1f} KiB in flight/SM")


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
    prediction = predict(spec, blocks, block, resources, traffic)
    load = widths[0] if widths else traffic.access_bytes
    return KernelPerformance(
        spec.name, inputs.schedule.describe(), resources.registers, resources.spill_bytes,  # type: ignore[attr-defined]
        resources.shared_bytes, "ptxas" if resources.measured else "estimate", prediction.ctas_per_sm,
        prediction.warps_per_sm, load, prediction.in_flight_per_sm, traffic.dram_bytes,
        traffic.min_bytes or traffic.dram_bytes, prediction.seconds, prediction.fraction_of_copy, prediction.limiter)


__all__ = ["KernelPerformance", "ModelInputs", "kernel_dram_bytes", "kernel_performance"]
