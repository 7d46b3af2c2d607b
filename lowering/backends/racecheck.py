"""The source of a racecheck build (FUSER_RACECHECK=1) of the CPU emulation.

A shared array is tracked when its elements are proxies that record each read and write
(lowering/runtime/fuser_cpu_racecheck.h); `__shared__ T name[N];` declares a plain array, which
nothing can intercept. So a racecheck build's source has each one-dimensional shared array
declared through FUSER_RC_SHARED instead: a rewrite of declarations only, like a compiler flag
that instruments them, applied to generated and hand-written kernels alike. It decides nothing
about the kernel (the scheduling and emission never read C text). Arrays of several dims are
left as they are (not tracked)."""

from __future__ import annotations

import re

_SHARED_ARRAY = re.compile(r"__shared__\s+(?:__align__\([^)]*\)\s+)?(?P<type>[^;\[\]{}()=]+?)\s+"
                           r"(?:__align__\([^)]*\)\s+)?(?P<name>[A-Za-z_]\w*)\s*\[(?P<n>[^\]]+)\]\s*;")


def tracked_shared_arrays(source: str) -> str:
    """`source` with each `__shared__ T name[N];` declared as FUSER_RC_SHARED(T, name, N)."""
    return _SHARED_ARRAY.sub(lambda m: f"FUSER_RC_SHARED({m['type'].strip()}, {m['name']}, {m['n'].strip()});", source)
