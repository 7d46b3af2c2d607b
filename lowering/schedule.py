"""Launch parameters of a kernel, chosen from its extents and dtypes (deterministically).

- pointwise: the output domain splits into *outer* dims, looped over inside each thread,
  and *inner* dims, one element per thread in a grid-stride loop (128 threads a block).
  Loads that do not depend on the outer dims (a bias, RoPE's cos/sin table broadcast over
  batch and heads) are hoisted out of the outer loop: read once per thread, not per
  element. The outer dims are the longest prefix that leaves >= `MIN_INNER` inner elements;
  blockIdx.y splits the outer loop just enough to fill the GPU (a launch-time choice).
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

from fuser_dialect.types import numpy_dtype
from fuser.lowering.kernel import KernelPlan, Scheduler

MAX_PERSISTENT_ITERS = 32
MIN_INNER = 128
TARGET_BLOCKS = 1056
"""Blocks a pointwise launch aims for: 8 per SM of an H100."""
MAX_GRID = 65535
PERSISTENT_GRID = 132
"""Blocks of an inner persistent kernel: one per SM of an H100, each looping over rows, so
row-invariant loads (weights, biases) are read once per block, not once per row."""


@dataclass(frozen=True)
class Schedule:
    mode: str  # "pointwise" | "inner" | "outer"
    block: int
    iters: int = 0  # inner: elements per thread held in registers (0 = dynamic loop)
    outer_dims: tuple[int, ...] = ()  # pointwise: per group, leading dims looped over in a thread
    vec: tuple[int, ...] = ()  # pointwise: per group, elements per 16-byte access (empty: all 1)

    def grid(self, rows_or_elements: int) -> int:
        if self.mode == "inner":
            return max(1, min(rows_or_elements, PERSISTENT_GRID if self.iters else MAX_GRID))
        return max(1, min(math.ceil(rows_or_elements / self.block), MAX_GRID))

    def pointwise_grid(self, shapes: list[tuple[int, ...]]) -> tuple[int, int, int]:
        """(blocks over the inner elements, blocks splitting the outer loop, groups): the
        largest need over the groups (each group's loops stride by the whole grid)."""
        gx = gy = 1
        for shape, k, vec in zip(shapes, self.outer_dims, self.vec or (1,) * len(shapes)):
            inner, outer = math.prod(shape[k:]) // vec, math.prod(shape[:k])
            x = self.grid(inner)
            gx = max(gx, x)
            gy = max(gy, min(outer, MAX_GRID, math.ceil(TARGET_BLOCKS / x)))
        return gx, gy, len(shapes)


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def _outer_dims(shape: tuple[int, ...], invariant_prefix: int) -> int:
    outer = 0
    while outer < invariant_prefix and math.prod(shape[outer + 1:]) >= MIN_INNER:
        outer += 1
    return outer


def choose_schedule(plan: KernelPlan, shapes: list[tuple[int, ...]],
                    invariant_prefixes: tuple[int, ...] = (), vec: tuple[int, ...] = ()) -> Schedule:
    """`shapes`: the run-time shape of each of `plan.domain_values()`; pointwise only:
    `invariant_prefixes`, per group how many leading dims some load does not depend on, and
    `vec`, per group the vector width the run-time strides and alignment allow."""
    if plan.scheduler == Scheduler.POINTWISE:
        prefixes = invariant_prefixes or (0,) * len(shapes)
        outer = tuple(_outer_dims(s, p) for s, p in zip(shapes, prefixes))
        return Schedule("pointwise", 128, outer_dims=outer, vec=vec if any(v > 1 for v in vec) else ())
    domain_shape = shapes[0]
    reduced = set(plan.reduced_dims)
    rank = len(domain_shape)
    row_len = math.prod(domain_shape[d] for d in reduced)
    if rank and (rank - 1) not in reduced:
        return Schedule("outer", 128)
    threads = min(1024, max(32, _round_up(math.ceil(row_len / 8), 32)))
    iters = math.ceil(row_len / threads) if row_len else 1
    return Schedule("inner", threads, iters if iters <= MAX_PERSISTENT_ITERS else 0)


VECTOR_BYTES = 16


def _element_strides_and_address(array) -> tuple[tuple[int, ...], int, int]:
    if hasattr(array, "data_ptr"):  # torch
        return tuple(array.stride()), array.data_ptr(), array.element_size()
    return tuple(s // array.itemsize for s in array.strides), array.ctypes.data, array.itemsize


def vector_width(facts, outputs, shape: tuple[int, ...], arrays: dict, output_layout: dict) -> int:
    """Elements per 16-byte access for a pointwise group, or 1. Needs: loads of the innermost dim
    only (facts.vector_values), an innermost extent divisible by the width, and every such input
    dense in that dim with rows starting on a 16-byte boundary. Buffers fuser allocates (outputs,
    intermediates) are aligned; an output laid out with another dim innermost is not vectorised."""
    if facts.vector_values is None or not shape:
        return 1
    itemsize = max(numpy_dtype(v.type.dtype).itemsize for v in (*facts.vector_values, *outputs))
    vec = VECTOR_BYTES // itemsize
    if vec < 2 or shape[-1] % vec:
        return 1
    for out in outputs:
        order = output_layout.get(out)
        if order is not None and order[-1] != 0:
            return 1
    for v in facts.vector_values:
        array = arrays.get(v)
        if array is None:
            continue
        strides, address, size = _element_strides_and_address(array)
        if strides[-1] != 1 or address % (vec * size):
            return 1
        if any(s % vec for s, e in zip(strides[:-1], array.shape[:-1]) if e > 1):
            return 1
    return vec
