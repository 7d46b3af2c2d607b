"""`FusionCache`: the executor's LRU cache of compiled fusions, safe under concurrent `execute`.

- `lookup_or_build(key, build)` returns the entry of `key`, building it on a miss. `build` runs
  outside the lock (other keys stay served while one compiles) but never twice for one key:
  threads asking for a key being built wait for that build and share its result (or its
  exception: a failed build is not cached, so a later call tries again).
- Bounded LRU: `maxsize` entries (default: env FUSER_CACHE_SIZE, else 100 as nvFuser; read by
  lowering.settings).
- `info()` → `CacheInfo(hits, misses, entries, maxsize, evictions)`: misses count builds started
  (compilations), hits every lookup served without building (including waiting for another
  thread's build); entries are the keys, least recently used first.
- Every miss logs WHY on the logger `fuser.recompile` (INFO): which parts of the key differ from
  the nearest cached key (`CacheKey.differences`), e.g. "recompiling: resize extents of
  fuser.slice #2 (dim 3) changed: (64, 0, 32) -> (80, 0, 40)". Env FUSER_LOG=recompile
  (comma-separated list) attaches a stderr handler; or configure `logging` yourself.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from fuser.lowering import settings

T = TypeVar("T")

logger = logging.getLogger("fuser.recompile")


def enable_recompile_log_from_env() -> None:
    """Attaches a stderr handler to `fuser.recompile` when env FUSER_LOG lists `recompile`
    (once, however often it is called)."""
    wanted = "recompile" in settings.log_channels()
    if not wanted or any(getattr(h, "_fuser_env", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[fuser] %(message)s"))
    handler._fuser_env = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def maxsize_from_env() -> int:
    """FUSER_CACHE_SIZE, else 100."""
    return settings.cache_size()


@dataclass(frozen=True)
class CacheInfo:
    hits: int
    misses: int
    entries: list
    """The cached keys, least recently used first."""
    maxsize: int
    evictions: int


class _Pending:
    """A build in progress: threads wanting the same key wait on `done`."""

    __slots__ = ("done", "value", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: object = None
        self.error: BaseException | None = None


class FusionCache(Generic[T]):
    def __init__(self, maxsize: int | None = None, on_evict: Callable[[Hashable], object] | None = None):
        """on_evict(key) runs after an entry is evicted (outside the lock): owners drop what they
        derived from it (an executor, its launch plans)."""
        if maxsize is None:
            maxsize = maxsize_from_env()
        if not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"FusionCache: maxsize must be a positive integer, got {maxsize!r}")
        enable_recompile_log_from_env()
        self.maxsize = maxsize
        self._on_evict = on_evict
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, T] = OrderedDict()
        self._pending: dict[Hashable, _Pending] = {}
        # Keys evicted and not rebuilt since: a miss on one of them says so.
        self._evicted: OrderedDict[Hashable, None] = OrderedDict()
        self._hits = 0
        self._misses = 0
        self._evictions = 0

    def lookup_or_build(self, key: Hashable, build: Callable[[], T]) -> T:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self._hits += 1
                return self._entries[key]
            pending = self._pending.get(key)
            if pending is None:
                pending = self._pending[key] = _Pending()
                self._misses += 1
                owner = True
                if logger.isEnabledFor(logging.INFO):
                    logger.info("%s", self._miss_reason(key))
            else:
                self._hits += 1
                owner = False
        if not owner:
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            return pending.value  # type: ignore[return-value]
        try:
            value = build()
        except BaseException as e:
            with self._lock:
                del self._pending[key]
            pending.error = e
            pending.done.set()
            raise
        evicted = []
        with self._lock:
            del self._pending[key]
            self._evicted.pop(key, None)
            self._entries[key] = value
            while len(self._entries) > self.maxsize:
                old, _ = self._entries.popitem(last=False)
                evicted.append(old)
                self._evictions += 1
                self._evicted[old] = None
                if len(self._evicted) > max(4 * self.maxsize, 64):  # a record, not a second cache
                    self._evicted.popitem(last=False)
                logger.debug("evicted (LRU, maxsize %d): %s", self.maxsize, _describe(old))
        if self._on_evict is not None:
            for old in evicted:
                self._on_evict(old)
        pending.value = value
        pending.done.set()
        return value

    def _miss_reason(self, key: Hashable) -> str:
        """Which parts of `key` differ from the nearest cached key (called under the lock)."""
        nearest = self._nearest_differences(key)
        if key in self._evicted:
            reason = f"recompiling: this key was evicted earlier (LRU bound {self.maxsize} reached)"
            return reason + (f"; the nearest cached key differs: {'; '.join(nearest)}" if nearest else
                             f": {_describe(key)}")
        if not self._entries:
            return f"compiling: first execution (no cached entry): {_describe(key)}"
        if nearest is None:
            return f"recompiling: new key {_describe(key)}"
        return "recompiling: " + "; ".join(nearest)

    def _nearest_differences(self, key: Hashable) -> list[str] | None:
        differences = getattr(key, "differences", None)
        if differences is None or not self._entries:
            return None
        best: list[str] | None = None
        # Most recently used first, so ties go to the entry the caller ran last.
        for other in reversed(self._entries):
            diff = differences(other)
            if best is None or len(diff) < len(best):
                best = diff
        return best

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, list(self._entries), self.maxsize, self._evictions)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._evicted.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def values(self) -> list[T]:
        """The cached entries now (a copy), least recently used first."""
        with self._lock:
            return list(self._entries.values())

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries


def _describe(key: Hashable) -> str:
    describe = getattr(key, "describe", None)
    return describe() if describe is not None else repr(key)


__all__ = ["CacheInfo", "FusionCache", "enable_recompile_log_from_env", "logger", "maxsize_from_env"]
