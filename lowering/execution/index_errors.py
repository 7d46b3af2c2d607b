"""In-kernel index checks: the record a kernel writes when an index leaves its extent.

Every gather / take_along_axis / index_select (embedding) / scatter index a kernel reads is
compared with the extent it indexes (`fuser_checked_index` in the kernel support code): an index
out of range is replaced by 0 (nothing is read out of bounds) and the first such fault of a call
is recorded — site, value, extent — in a record of four 8-byte words, [fault, site, value,
extent], that the kernel receives as a parameter (kind "index_error"). The site is the index op's
position among the fusion's index ops; `IndexErrorRecords.check` turns a fault into the same
IndexError the host checks raise, naming the op, the index value and the extent.

When the record is read:
- cpu backend: right after each launch that has index sites (launches are synchronous); the
  thread's record is cleared before each call, so a launch that raised before its record was
  read (Ctrl-C, a failed launch, a race) leaves its fault to no later call;
- cuda backend: the record lives in page-locked host memory mapped into the device, so reading
  it needs no copy and launches stay asynchronous and capturable in a CUDA graph. A fault is
  raised at the next `execute` of the same compiled fusion (or by `FusionDefinition.
  check_index_errors()`, which synchronizes first) — as CUDA's device-side asserts surface at
  a later synchronization. Concurrent calls of one compiled fusion on several streams share its
  record, so a fault may be reported by another of those calls.

The host's range checks of indices that are fusion inputs on the host (lowering/execution/gather_checks.py)
still run before launch: they raise before anything is written.
"""

from __future__ import annotations

import threading

import numpy as np

WORDS = 4
_FAULT, _SITE, _VALUE, _EXTENT = range(WORDS)


class IndexErrorRecords:
    """The records of one compiled fusion: per thread on the host (cpu backend), one mapped
    record on the GPU (cuda backend, created on first use)."""

    def __init__(self, sites):
        self.sites = tuple(sites)  # the fusion's index ops, in site order
        self._local = threading.local()
        self._gpu = None
        self._lock = threading.Lock()

    # -- the records -------------------------------------------------------------------
    def host_record(self) -> np.ndarray:
        """This thread's record (zeroed) for cpu launches."""
        record = getattr(self._local, "record", None)
        if record is None:
            record = self._local.record = np.zeros(WORDS, np.int64)
        return record

    def gpu_record(self):
        """(the page-locked host array, its device address), created once."""
        if self._gpu is None:
            with self._lock:
                if self._gpu is None:
                    from fuser.lowering.backends import gpu_runtime

                    self._gpu = gpu_runtime.mapped_zeros(WORDS, np.int64)
        return self._gpu

    # -- faults --------------------------------------------------------------------------
    def check(self, record: np.ndarray) -> None:
        """Raises the recorded fault (and clears the record for the next call)."""
        if not record[_FAULT]:
            return
        site, value, extent = int(record[_SITE]), int(record[_VALUE]), int(record[_EXTENT])
        record[:] = 0
        raise IndexError(describe_fault(self.sites, site, value, extent))

    @property
    def on_gpu(self) -> bool:
        """Whether a cuda kernel has been given this fusion's record."""
        return self._gpu is not None

    def check_pending_gpu(self) -> None:
        """The cuda backend's lazy check: a fault of an earlier call, if its kernel has written it."""
        if self._gpu is not None:
            self.check(self._gpu[0])


def describe_fault(sites, site: int, value: int, extent: int) -> str:
    op = sites[site] if 0 <= site < len(sites) else None
    if op is None:
        return f"an index {value} is out of range for an extent of {extent} (valid: 0..{extent - 1})"
    from fuser.lowering.execution.gather_checks import IndexCheck

    source = IndexCheck(op.parent_op(), op).source()
    return (f"{source}: index {value} is out of range for {op.name} along dim {op.axis} of extent {extent} "
            f"(valid: 0..{extent - 1}; found by the in-kernel check)")
