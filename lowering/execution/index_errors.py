"""In-kernel index checks: the record a kernel writes when an index leaves its extent.

Every gather / take_along_axis / index_select (embedding) / scatter index a kernel reads is
compared with the extent it indexes (`fuser_checked_index` in the kernel support code): an index
out of range is replaced by 0 (nothing is read out of bounds) and the first such fault of a call
is recorded — site, value, extent — in a record of four 8-byte words, [fault, site, value,
extent], that the kernel receives as a parameter (kind "index_error"). The site is the index op's
position among the compiled fusion's index ops; `IndexErrorRecords.check` turns a fault into
the same IndexRangeError the host checks raise, naming the op as the fusion's author wrote it (a
gather the passes made a take_along_axis is reported as the gather: `as_written`), the index
value and the extent.

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
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from fuser.lowering.errors import IndexRangeError

WORDS = 4
_FAULT, _SITE, _VALUE, _EXTENT = range(WORDS)


class WrittenAs(NamedTuple):
    """An index op as the fusion's author wrote it: its position among the author's index ops
    (None where it cannot be told) and its name."""

    site: int | None
    name: str


class IndexErrorRecords:
    """The records of one compiled fusion: per thread on the host (cpu backend), one mapped
    record on the GPU (cuda backend, created on first use)."""

    def __init__(self, sites, written: Sequence[WrittenAs] | None = None):
        self.sites = tuple(sites)  # the compiled fusion's index ops, in site order
        self.written = tuple(written) if written is not None else tuple(WrittenAs(None, op.name) for op in self.sites)
        """Each site as its author wrote it (by default: as compiled)."""
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
        raise self.fault(site, value, extent)

    def fault(self, site: int, value: int, extent: int) -> IndexRangeError:
        """The error of a fault the record names, with the op as its author wrote it."""
        if not 0 <= site < len(self.sites):
            return IndexRangeError(f"an index {value} is out of range for an extent of {extent} "
                                   f"({valid_indices(extent)})", op="an index op", site=None, dim=-1,
                                   index=value, extent=extent)
        from fuser.lowering.execution.gather_checks import IndexCheck

        op, written = self.sites[site], self.written[site]
        source = IndexCheck(op.parent_op(), op).source()
        return IndexRangeError(f"{source}: index {value} is out of range for {written.name} along dim {op.axis} of "
                               f"extent {extent} ({valid_indices(extent)}; found by the in-kernel check)",
                               op=written.name, site=written.site, dim=op.axis, index=value, extent=extent)

    @property
    def on_gpu(self) -> bool:
        """Whether a cuda kernel has been given this fusion's record."""
        return self._gpu is not None

    def check_pending_gpu(self) -> None:
        """The cuda backend's lazy check: a fault of an earlier call, if its kernel has written it."""
        if self._gpu is not None:
            self.check(self._gpu[0])


def valid_indices(extent: int) -> str:
    """The valid indices of an extent, for an index error ("valid: 0..-1" says nothing)."""
    return f"valid: 0..{extent - 1}" if extent > 0 else "the extent is empty: no index is valid"


# ------------------------------------------------------------------------------------------------
# The compiled fusion's index ops as the author wrote them.
# ------------------------------------------------------------------------------------------------

_BECOMES = {"fuser.gather": ("fuser.gather", "fuser.take_along_axis")}
"""What an index op may be compiled into (an exact gather is a take_along_axis); others stay."""


def _may_become(written: str, compiled: str) -> bool:
    return compiled in _BECOMES.get(written, (written,))


def as_written(author_ops: Sequence, compiled_ops: Sequence) -> tuple[WrittenAs, ...]:
    """Each index op of the compiled fusion as the author wrote it.

    The passes replace an index op in place (gather-to-take-along-axis, move-gather), add none
    and keep their order; dead ones are erased. So the compiled ops are the author's in order,
    some left out. A compiled op is the author's op at position k in every such matching when
    the earliest matching and the latest agree on k; where they differ, its position is not
    known, and its name only where every candidate between the two has the same one."""
    written = [op.name for op in author_ops]
    compiled = [op.name for op in compiled_ops]
    earliest = _first_matching(written, compiled)
    latest = _first_matching(written[::-1], compiled[::-1])
    if earliest is None or latest is None:  # not what the passes do: name the ops as compiled
        return tuple(WrittenAs(None, name) for name in compiled)
    latest = [len(written) - 1 - k for k in reversed(latest)]
    found = []
    for name, low, high in zip(compiled, earliest, latest):
        if low == high:
            found.append(WrittenAs(low, written[low]))
            continue
        candidates = sorted({written[k] for k in range(low, high + 1) if _may_become(written[k], name)})
        found.append(WrittenAs(None, " or ".join(candidates)))
    return tuple(found)


def _first_matching(written: list[str], compiled: list[str]) -> list[int] | None:
    """Each compiled op matched to the first author's op after the previous match that it may
    have been compiled from; None when some cannot be matched."""
    positions, k = [], 0
    for name in compiled:
        while k < len(written) and not _may_become(written[k], name):
            k += 1
        if k == len(written):
            return None
        positions.append(k)
        k += 1
    return positions
