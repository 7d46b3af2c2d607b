"""The GPU a kernel is scheduled for: one frozen record of the limits every heuristic reads.

Schedulers receive a `DeviceSpec` in `choose()` and `grid()` and never hold a GPU constant of
their own (learned from Inductor's `DeviceProperties` and tinygrad's renderer limits: device
facts in one place, carried into the decisions). The cuda backend reads the record from the
driver (lowering/backends/gpu_runtime.py); the cpu backend, which runs the same CUDA source,
schedules for an H100, so the kernels it checks are the kernels an H100 would run.

`copy_bandwidth` and `dram_latency_s` are performance-model constants, not driver facts: the
device-to-device copy measured on that GPU (benchmarks/results.md) and the effective latency
fitted to the recorded runs (docs/benchmarks.md#performance-model). A GPU without a profile
gets its peak from the driver's memory clock and bus width, derated as a copy is.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


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
    shared_per_block_optin: int = 227 * 1024
    """The most dynamic + static shared memory one block may opt in to."""
    shared_reserved_per_block: int = 1024
    """Shared memory the driver reserves per resident block (sm_80 and later)."""
    l2_bytes: int = 50 * 1024 * 1024
    max_grid_x: int = 2**31 - 1
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

    @property
    def warps_per_sm(self) -> int:
        return self.max_threads_per_sm // 32

    def key(self) -> tuple:
        """What of the device decides a schedule (the kernel cache keys on it)."""
        return (self.name, self.arch, self.sms, self.max_threads_per_sm, self.registers_per_sm,
                self.shared_per_sm, self.shared_per_block_optin, self.l2_bytes)


H100 = DeviceSpec(name="NVIDIA H100 80GB HBM3", arch="sm_90", sms=132, l2_bytes=50 * 1024 * 1024,
                  copy_bandwidth=3.009e12, dram_latency_s=1.2e-6, launch_s=2e-6, reduction_s=1.4e-6)
"""H100 SXM; copy bandwidth measured on one (benchmarks/results.md, 2026-11-26); latency and
reduction time fitted to the 8 kernels of that run (python -m fuser.benchmarks.calibrate --fit)."""

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
                    memory_clock_khz: int = 0, bus_width_bits: int = 0) -> DeviceSpec:
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
        registers_per_sm=registers_per_sm, shared_per_sm=shared_per_sm,
        shared_per_block_optin=shared_per_block_optin, l2_bytes=l2_bytes, copy_bandwidth=bandwidth,
        dram_latency_s=(base or DEFAULT).dram_latency_s, launch_s=(base or DEFAULT).launch_s,
        reduction_s=(base or DEFAULT).reduction_s)


__all__ = ["DEFAULT", "DeviceSpec", "H100", "H200", "PROFILES", "from_attributes", "profile"]
