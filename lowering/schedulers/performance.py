"""A GPU-free performance model of a memory-bound kernel: occupancy, bytes in flight, time.

Memory-bound kernels are limited by how many bytes each SM keeps in flight (Little's law:
bandwidth = bytes in flight / latency) up to what DRAM delivers (a device-to-device copy).
So the model needs, per kernel:
- resources per thread and block (registers, shared memory): from ptxas's report after
  compiling (lowering/backends/resources.py), or the scheduler's estimate before;
- how many bytes a thread has in flight: the global loads it issues before it first waits
  on one (a phase's unrolled loads; the scheduler states them in its schedule);
- the DRAM traffic: what the kernel moves between DRAM and the SMs, re-reads that hit L2 left out.

time = launch + max(dram_bytes / min(copy bandwidth, SMs busy × bytes in flight per SM / latency),
                   waves × (round trips per block × latency + reductions per block × reduction time))

The second term is the chain of dependent waits each block goes through (a row's load, then its
reductions, then the next row): with few blocks resident, it, not bandwidth, sets the time.

The constants (latency, launch) live in the `DeviceSpec` and are fitted to the recorded GPU
runs (docs/benchmarks.md#performance-model). Schedulers score candidate schedules with it;
`fd.last_kernels()` and the benchmark tables report its prediction next to what ptxas says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fuser.lowering.device import DeviceSpec


@dataclass(frozen=True)
class Resources:
    """What one thread and one block of a kernel hold on an SM."""

    registers: int
    shared_bytes: int = 0
    """Static + dynamic shared memory per block."""
    spill_bytes: int = 0
    """Spill stores + loads ptxas reports (0 for an estimate)."""
    measured: bool = False
    """Read from ptxas (True) or estimated by the scheduler (False)."""


@dataclass(frozen=True)
class Traffic:
    """The memory side of one launch."""

    dram_bytes: int
    """Bytes between DRAM and the SMs (data several blocks re-read that stays in L2 counted once)."""
    in_flight_per_thread: int
    """Bytes of global loads a thread issues before it waits on the first of them."""
    access_bytes: int
    """The width of the kernel's widest global access (16: one 128-bit vector)."""
    min_bytes: int = 0
    """Each input read once and each output written once (0: same as dram_bytes)."""
    round_trips: float = 1.0
    """Dependent DRAM waits of a block over its life: loads a thread must see before it goes on
    (a step of a streamed row, a persistent row's first phase, an iteration of a loop)."""
    barriers: float = 0.0
    """Reductions across a block's (or a row's) lanes over its life, each chained behind the
    loads before it."""
    loads: bool = True
    """Whether the kernel reads global memory at all. One that only stores (a fill) waits on no
    load: its stores are posted, and DRAM's rate alone bounds it."""


@dataclass(frozen=True)
class Prediction:
    seconds: float
    ctas_per_sm: int
    warps_per_sm: int
    in_flight_per_sm: int
    """Bytes of loads in flight per busy SM."""
    bandwidth: float
    """Minimum bytes / predicted time."""
    fraction_of_copy: float
    """bandwidth / the device's copy bandwidth."""
    limiter: str
    """"dram" (at the copy bandwidth) or "latency" (too few bytes in flight)."""

    def describe(self) -> str:
        return (f"{self.seconds * 1e6:.1f} us, {100 * self.fraction_of_copy:.0f}% of copy, "
                f"{self.ctas_per_sm} CTA/SM, {self.warps_per_sm} warps/SM, "
                f"{self.in_flight_per_sm / 1024:.1f} KiB in flight/SM ({self.limiter})")


def ctas_per_sm(device: DeviceSpec, block: int, registers: int, shared_bytes: int) -> int:
    """Blocks of `block` threads one SM holds at once (0: the block does not fit), as the CUDA
    occupancy calculator counts: by threads, registers (per warp, in allocation units), shared
    memory (plus the driver's reservation per block) and the block limit."""
    warps = math.ceil(block / 32)
    if block > device.max_threads_per_block or registers > device.max_registers_per_thread:
        return 0
    if shared_bytes > device.shared_per_block_optin:
        return 0
    by_threads = device.max_threads_per_sm // (warps * 32)
    unit = device.register_allocation_unit
    per_warp = math.ceil(max(registers, 1) * 32 / unit) * unit
    by_registers = device.registers_per_sm // (per_warp * warps)
    by_shared = (device.shared_per_sm // (shared_bytes + device.shared_reserved_per_block)
                 if shared_bytes else device.max_blocks_per_sm)
    return max(0, min(by_threads, by_registers, by_shared, device.max_blocks_per_sm))


def predict(device: DeviceSpec, blocks: int, block: int, resources: Resources, traffic: Traffic) -> Prediction:
    """The predicted time of one launch of `blocks` blocks of `block` threads."""
    ctas = ctas_per_sm(device, block, resources.registers, resources.shared_bytes)
    min_bytes = traffic.min_bytes or traffic.dram_bytes
    if ctas == 0 or blocks <= 0:
        return Prediction(math.inf, ctas, 0, 0, 0.0, 0.0, "does not fit")
    busy_sms = min(device.sms, blocks)
    resident = min(ctas, math.ceil(blocks / device.sms))
    in_flight = resident * block * traffic.in_flight_per_thread
    # Spilled registers go through L1/L2 in local memory: each spill byte is traffic a
    # thread waits on; charged as DRAM-latency-bound bytes.
    latency_bound = busy_sms * in_flight / device.dram_latency_s if in_flight else 0.0
    if not traffic.loads:
        bandwidth = device.copy_bandwidth
    else:
        bandwidth = min(device.copy_bandwidth, latency_bound) if latency_bound else device.copy_bandwidth * 1e-3
    limiter = "dram" if bandwidth >= device.copy_bandwidth else "latency"
    waves = math.ceil(blocks / (ctas * device.sms))
    chain = waves * (traffic.round_trips * device.dram_latency_s + traffic.barriers * device.reduction_s)
    if chain > traffic.dram_bytes / bandwidth:
        limiter = "dependent waits"
    seconds = device.launch_s + max(traffic.dram_bytes / bandwidth, chain)
    if resources.spill_bytes:
        seconds += blocks * block * resources.spill_bytes / device.copy_bandwidth
    achieved = min_bytes / seconds
    return Prediction(seconds, ctas, resident * math.ceil(block / 32), in_flight, achieved,
                      achieved / device.copy_bandwidth, limiter)


__all__ = ["Prediction", "Resources", "Traffic", "ctas_per_sm", "predict"]
