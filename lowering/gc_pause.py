"""`paused_gc()`: Python's cyclic garbage collector held off while fuser builds and compiles.

A fusion's IR is millions of small objects (xDSL ops, values, uses, attributes), and building,
cloning and rewriting it allocates steadily, so the collector runs its full collections again
and again over all of them while it finds nothing to free: at 20,000 ops 2.7 of the 7.6 s of
fuser's own time (define, passes, segmentation, emission; measured 2026-12-01 on the 2-core
development machine, docs/benchmarks.md). Inside the context no collection runs; reference
counting still frees what is not in a cycle, and the collector, enabled again at the exit,
reclaims the cycles left behind at its next run.

Process-wide and safe to nest or to enter from several threads at once (the torch backend
compiles regions in parallel): the collector is disabled by the first entry and enabled again
by the last exit, and only if it was enabled at the first entry (a collector the program
disabled before stays disabled)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_reenable = False


@contextmanager
def paused_gc() -> Iterator[None]:
    global _depth, _reenable
    with _lock:
        if _depth == 0:
            _reenable = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _reenable:
                _reenable = False
                gc.enable()


__all__ = ["paused_gc"]
