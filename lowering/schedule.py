"""Launch parameters of a kernel, chosen from its extents and dtypes (deterministically).

- pointwise: one thread per output element in a grid-stride loop, 128 threads a block.
- inner reduction (the reduced dims include the innermost one): one block per row,
  threads stride over the row (coalesced) and combine with warp shuffles + shared memory.
  Rows up to `MAX_PERSISTENT_ITERS` elements per thread are *persistent*: each thread
  keeps the inputs it loaded in registers (`iters` is a compile-time trip count), so a
  normalization reads its input once. Longer rows re-read the input in every phase
  (documented fallback; bytes grow with the number of phases).
- outer reduction (the innermost dim is kept): one thread per kept element, a serial loop
  over the reduced elements; adjacent threads read adjacent addresses.

The schedule is part of the cache key: a kernel is reused only with its own schedule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lowering.kernel import KernelPlan, Scheduler

MAX_PERSISTENT_ITERS = 32
MAX_GRID = 65535
PERSISTENT_GRID = 132
"""Blocks of an inner persistent kernel: one per SM of an H100, each looping over rows, so
row-invariant loads (weights, biases) are read once per block, not once per row."""


@dataclass(frozen=True)
class Schedule:
    mode: str  # "pointwise" | "inner" | "outer"
    block: int
    iters: int = 0  # inner: elements per thread held in registers (0 = dynamic loop)

    def grid(self, rows_or_elements: int) -> int:
        if self.mode == "inner":
            return max(1, min(rows_or_elements, PERSISTENT_GRID if self.iters else MAX_GRID))
        return max(1, min(math.ceil(rows_or_elements / self.block), MAX_GRID))


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def choose_schedule(plan: KernelPlan, domain_shape: tuple[int, ...]) -> Schedule:
    if plan.scheduler == Scheduler.POINTWISE:
        return Schedule("pointwise", 128)
    reduced = set(plan.reduced_dims)
    rank = len(domain_shape)
    row_len = math.prod(domain_shape[d] for d in reduced)
    if rank and (rank - 1) not in reduced:
        return Schedule("outer", 128)
    threads = min(1024, max(32, _round_up(math.ceil(row_len / 8), 32)))
    iters = math.ceil(row_len / threads) if row_len else 1
    return Schedule("inner", threads, iters if iters <= MAX_PERSISTENT_ITERS else 0)
