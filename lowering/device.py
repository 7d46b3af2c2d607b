"""The GPU a kernel is scheduled for: one frozen record of the limits every heuristic reads.

Schedulers receive a `DeviceSpec` in `choose()` and `grid()` and never hold a GPU constant of
their own (learned from Inductor's `DeviceProperties` and tinygrad's renderer limits: device
facts in one place, carried into the decisions). The cuda backend reads the record from the
driver (lowering/backends/gpu_runtime.py); the cpu backend, which runs the same CUDA source,
schedules for an H100, so the kernels it checks are the kernels an H100 would run.

`copy_bandwidth` and `dram_latency_s` are performance-model constants, not driver facts: the
device-to-device copy measured on that GPU (benchmarks/results.md) and the effective latency
fitted to the recorded runs (docs/benchmarks.md#performance-model); the `plan_*` constants are
what row schedules are planned for (design constants, not fits: `planning()`). A GPU without a profile
gets its peak from the driver's memory clock and bus width, derated as a copy is.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fuser.lowering.errors import LaunchError


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    arch: str
    """Real architecture, e.g. "sm_90"."""
    sms: int
    max_threads_per_sm: int = 2048
    max_threads_per_block: int = 1024
    max_blocks_per_sm: int = 32
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    register_allocation_unit: int = 256
    """Registers are allocated per warp in units of this many."""
    shared_per_sm: int = 228 * 1024
    shared_per_block: int = 48 * 1024
    """Static + dynamic shared memory a block may use without opting in; also the most static
    shared memory a kernel may declare (ptxas refuses more: "uses too much shared data")."""
    shared_per_block_optin: int = 227 * 1024
    """The most dynamic + static shared memory one block may opt in to (the runtime opts a
    kernel in, per kernel, when its block needs more than `shared_per_block`)."""
    shared_reserved_per_block: int = 1024
    """Shared memory the driver reserves per resident block (sm_80 and later)."""
    l2_bytes: int = 50 * 1024 * 1024
    max_grid_x: int = 2**31 - 1
    max_grid_yz: int = 65535
    max_parameter_bytes: int = 32764
    """Bytes of kernel parameters a launch may pass (sm_70+ with CUDA 12.1+; NVRTC refuses more:
    "Formal parameter space overflowed")."""
    copy_bandwidth: float = 3.0e12
    """Bytes per second (read + write) of a device-to-device copy: the bandwidth a memory-bound
    kernel is measured against."""
    dram_latency_s: float = 1.0e-6
    """Effective latency of a DRAM access under load (Little's law: bandwidth = bytes in flight
    / latency); fitted, not read from the device."""
    launch_s: float = 3.0e-6
    """Fixed cost of a kernel on the device (launch, ramp-up, the last wave's drain)."""
    reduction_s: float = 0.5e-6
    """A reduction across a block's threads (shuffles, shared memory, barriers) as a block waits
    on it; fitted."""
    plan_latency_s: float = 1.5e-6
    """The DRAM latency row schedules are planned for (rows/heuristic.py scores candidates on
    `planning()`): a loaded DRAM's with margin, so that a schedule just at the bandwidth limit
    on paper loses to one with more in flight; 1.5 us asks for about 32 KiB in flight per SM
    at an H100's copy bandwidth, nvFuser's target."""
    plan_reduction_s: float = 1.4e-6
    """The block reduction's wait schedules are planned for."""
    plan_launch_s: float = 2e-6
    """The launch cost schedules are planned for."""

    def planning(self) -> "DeviceSpec":
        """This device as row schedules are planned for: the `plan_*` constants in place of the
        fitted ones. They are design constants, not fits: the fitted constants predict, and a
        refit on the kernels of an older commit (which kept less in flight than planned, in
        other shapes) must not move today's schedules; a GPU run of today's kernels may."""
        return dataclasses.replace(self, dram_latency_s=self.plan_latency_s, reduction_s=self.plan_reduction_s,
                                   launch_s=self.plan_launch_s)

    @property
    def warps_per_sm(self) -> int:
        return self.max_threads_per_sm // 32

    def key(self) -> tuple:
        """What of the device decides a schedule (the kernel cache keys on it)."""
        return (self.name, self.arch, self.sms, self.max_threads_per_sm, self.registers_per_sm,
                self.shared_per_sm, self.shared_per_block_optin, self.l2_bytes)


H100 = DeviceSpec(name="NVIDIA H100 80GB HBM3", arch="sm_90", sms=132, l2_bytes=50 * 1024 * 1024,
                  copy_bandwidth=3.009e12, dram_latency_s=6.6e-7, launch_s=4e-6, reduction_s=3.25e-6)
"""H100 SXM; copy bandwidth measured on one (benchmarks/results.md, 2026-11-26); latency, launch
and reduction time fitted to the 8 kernels of that run with the bytes in flight their SASS
keeps (python -m fuser.benchmarks.calibrate --fit, 2026-12-01: worst error 46 %, the cases
ranked as measured; with the schedule's figures, which those kernels did not deliver, the fit
had been 1.2 us / 2 us / 1.4 us within 30 %). The kernels of that run are an older commit's;
the next GPU run refits on today's (docs/benchmarks.md#performance-model)."""

H200 = dataclasses.replace(H100, name="NVIDIA H200", sms=132, l2_bytes=60 * 1024 * 1024, copy_bandwidth=4.3e12)
"""H200: the H100's SM, a larger L2 and HBM3e (copy bandwidth as noted in the project's GPU notes)."""

PROFILES = {"h100": H100, "h200": H200}
DEFAULT = H100


def profile(name: str) -> DeviceSpec:
    """A named profile ("h100", "h200"), for predictions on a GPU that is not here."""
    try:
        return PROFILES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown GPU profile {name!r}: expected one of {', '.join(sorted(PROFILES))}") from None


def from_attributes(name: str, major: int, minor: int, *, sms: int, max_threads_per_sm: int,
                    max_threads_per_block: int, max_blocks_per_sm: int, registers_per_sm: int,
                    shared_per_sm: int, shared_per_block_optin: int, l2_bytes: int,
                    memory_clock_khz: int = 0, bus_width_bits: int = 0,
                    shared_per_block: int = 48 * 1024) -> DeviceSpec:
    """The record of a GPU from its driver attributes. Model constants come from the profile of
    the same name when there is one, else from the memory interface (peak derated to a copy)."""
    base = next((p for p in PROFILES.values() if p.name.lower() in name.lower() or name.lower() in p.name.lower()),
                None)
    if base is not None:
        bandwidth = base.copy_bandwidth
    elif memory_clock_khz and bus_width_bits:
        bandwidth = 0.9 * 2 * memory_clock_khz * 1e3 * bus_width_bits / 8  # DDR: 2 transfers a clock
    else:
        bandwidth = DEFAULT.copy_bandwidth
    return DeviceSpec(
        name=name, arch=f"sm_{major}{minor}", sms=sms, max_threads_per_sm=max_threads_per_sm,
        max_threads_per_block=max_threads_per_block, max_blocks_per_sm=max_blocks_per_sm,
        registers_per_sm=registers_per_sm, shared_per_sm=shared_per_sm, shared_per_block=shared_per_block,
        shared_per_block_optin=shared_per_block_optin, l2_bytes=l2_bytes, copy_bandwidth=bandwidth,
        dram_latency_s=(base or DEFAULT).dram_latency_s, launch_s=(base or DEFAULT).launch_s,
        reduction_s=(base or DEFAULT).reduction_s)


# --------------------------------------------------------------------------- launch limits


class LaunchLimitError(LaunchError):
    """A launch the GPU would refuse (or a kernel its compiler would refuse): too much shared
    memory or too many parameter bytes for the device. Raised on every kernel backend where the
    GPU would fail; `limit` and `value` are the numbers, `what` names the resource."""

    def __init__(self, message: str, kernel: str | None = None, *, what: str, limit: int, value: int):
        super().__init__(message, kernel=kernel)
        self.what = what
        self.limit = limit
        self.value = value


def _kib(n: int) -> str:
    return f"{n:,} bytes ({n / 1024:g} KiB)"


def shared_memory_optin(device: DeviceSpec, kernel: str, static_bytes: int, dynamic_bytes: int) -> bool:
    """Whether a block of `kernel` with this static (the compiler's report) and dynamic shared
    memory needs the per-kernel opt-in (more than `shared_per_block` in all); raises
    LaunchLimitError where no opt-in makes it fit: static memory over `shared_per_block` (the
    compiler refuses it) or a total over `shared_per_block_optin`."""
    total = static_bytes + dynamic_bytes
    if static_bytes > device.shared_per_block:
        raise LaunchLimitError(
            f"kernel {kernel!r} declares {_kib(static_bytes)} of static shared memory, more than the "
            f"{_kib(device.shared_per_block)} a kernel may declare on {device.name} ({device.arch}: ptxas refuses it; "
            "larger buffers must be dynamic shared memory)", kernel, what="static shared memory",
            limit=device.shared_per_block, value=static_bytes)
    if total > device.shared_per_block_optin:
        raise LaunchLimitError(
            f"kernel {kernel!r} needs {_kib(total)} of shared memory a block ({static_bytes:,} static + "
            f"{dynamic_bytes:,} dynamic), more than the {_kib(device.shared_per_block_optin)} a block may opt in to "
            f"on {device.name} ({device.arch})", kernel, what="shared memory per block",
            limit=device.shared_per_block_optin, value=total)
    return total > device.shared_per_block


def check_parameter_bytes(device: DeviceSpec, kernel: str, nbytes: int) -> None:
    """Raises LaunchLimitError when `kernel`'s parameters take more bytes than a launch may pass."""
    if nbytes > device.max_parameter_bytes:
        raise LaunchLimitError(
            f"kernel {kernel!r} takes {nbytes:,} bytes of parameters, more than the {device.max_parameter_bytes:,} "
            f"a launch may pass on {device.name} ({device.arch}; NVRTC: formal parameter space overflowed)",
            kernel, what="parameter bytes", limit=device.max_parameter_bytes, value=nbytes)


def parameter_bytes(sizes) -> int:
    """Bytes of a kernel's parameter buffer: each parameter at an offset aligned to its size
    (sizes are 1, 2, 4, 8 or 16), as the driver lays them out."""
    offset = 0
    for size in sizes:
        align = min(max(size, 1), 16)
        offset = (offset + align - 1) // align * align + size
    return offset


__all__ = ["DEFAULT", "DeviceSpec", "H100", "H200", "LaunchLimitError", "PROFILES", "check_parameter_bytes",
           "from_attributes", "parameter_bytes", "profile", "shared_memory_optin"]
