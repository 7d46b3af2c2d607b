"""The pointwise scheduler: fusions without reductions.

The output domain of each group splits into *outer* dims, looped over inside each thread,
and *inner* dims, one element per thread in a grid-stride loop (128 threads a block).
Loads that do not depend on the outer dims (a bias, RoPE's cos/sin table broadcast over
batch and heads) are hoisted out of the outer loop: read once per thread, not per element.
The outer dims are the longest prefix that leaves >= `MIN_INNER` inner elements (a dynamic
dim counting as long, so the choice holds for all its extents) and that some load does not
depend on (from the kernel analysis); blockIdx.y splits the outer loop
just enough to fill the GPU. Outputs of different iteration domains form *groups* of one
kernel (horizontal fusion: blockIdx.z picks the group), so q and k of a rotary embedding,
whose extents are unrelated symbols, still share one launch. Where the innermost dim is
dense, divisible and 16-byte aligned (checked per call), each thread moves 16 bytes per access.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fuser_dialect.types import DYNAMIC, numpy_dtype
from fuser.lowering.addresses import numpy_address
from fuser.lowering.codegen.analysis import GroupAccess
from fuser.lowering.codegen.emit_cuda import KernelEmitter
from fuser.lowering.codegen.index import vector_lane
from fuser.lowering.codegen.kernel import KernelPlan
from fuser.lowering.schedulers.base import MAX_GRID, Candidate, KernelBody, SchedulerUnit, Verdict
from fuser.lowering.schedulers.scan import refuse_scans

BLOCK = 128
MIN_INNER = 128
TARGET_BLOCKS = 1056
"""Blocks a pointwise launch aims for: 8 per SM of an H100."""
VECTOR_BYTES = 16
MAX_VECTOR_CONE_OPS = 256
"""Groups computing more ops per element are not vectorised: at ~64 flops per loaded float an
element is compute-bound on an H100, so wider accesses gain no bandwidth, while every vector
lane is an unrolled copy of the whole cone (source, registers and compile time × VEC)."""


@dataclass(frozen=True)
class PointwiseSchedule:
    block: int
    outer_dims: tuple[int, ...]
    """Per group: how many leading dims loop inside a thread."""
    vec: tuple[int, ...] = ()
    """Per group: elements per 16-byte access (empty: all 1)."""

    def describe(self) -> str:
        vec = f", vector: {list(self.vec)}" if self.vec else ""
        return f"block: {self.block}, outer dims: {list(self.outer_dims)}{vec}"


def _outer_dims(shape: tuple[int, ...], invariant_prefix: int, dynamic: Sequence[bool] = ()) -> int:
    """How many leading dims to loop over inside each thread. A dim whose extent is dynamic in
    the fusion (`?`) counts as long: the choice, and so the kernel, then does not change with its
    extent, and one compile serves every length (a sequence length under dynamic=True)."""
    sizes = [max(e, MIN_INNER) if d else e for e, d in zip(shape, tuple(dynamic) + (False,) * len(shape))]
    outer = 0
    while outer < invariant_prefix and math.prod(sizes[outer + 1:]) >= MIN_INNER:
        outer += 1
    return outer


def _element_strides_and_address(array) -> tuple[tuple[int, ...], int, int]:
    if hasattr(array, "data_ptr"):  # torch
        return tuple(array.stride()), array.data_ptr(), array.element_size()
    return tuple(s // array.itemsize for s in array.strides), numpy_address(array), array.itemsize


def vector_width(access: GroupAccess, outputs, shape: tuple[int, ...], arrays: dict, output_layout: dict) -> int:
    """Elements per 16-byte access for a pointwise group, or 1. Needs: loads of the innermost dim
    only (access.vector_values), an innermost extent divisible by the width, and every such input
    dense in that dim with rows starting on a 16-byte boundary. Buffers fuser allocates (outputs,
    intermediates) are aligned; an output laid out with another dim innermost is not vectorised."""
    if access.vector_values is None or not shape or access.cone_ops > MAX_VECTOR_CONE_OPS:
        return 1
    itemsize = max(numpy_dtype(v.type.dtype).itemsize for v in (*access.vector_values, *outputs))
    vec = VECTOR_BYTES // itemsize
    if vec < 2 or shape[-1] % vec:
        return 1
    for out in outputs:
        order = output_layout.get(out)
        if order is not None and order[-1] != 0:
            return 1
    for v in access.vector_values:
        array = arrays.get(v)
        if array is None:
            continue
        strides, address, size = _element_strides_and_address(array)
        if strides[-1] != 1 or address % (vec * size):
            return 1
        if any(s % vec for s, e in zip(strides[:-1], array.shape[:-1]) if e > 1):
            return 1
    return vec


class PointwiseScheduler(SchedulerUnit):
    name = "pointwise"

    def accepts(self, candidate: Candidate) -> Verdict:
        if (scan := refuse_scans(candidate)) is not None:
            return scan
        if candidate.reductions:
            return Verdict(False, "a reduction needs a row scheduler")
        return Verdict(True, scheduler=self.name)

    def choose(self, plan: KernelPlan, shapes: Sequence[tuple[int, ...]], arrays: dict | None,
               output_layout: dict) -> PointwiseSchedule:
        accesses = plan.analysis.groups
        dynamic = [[e == DYNAMIC for e in v.type.shape] for v in plan.domain_values()]
        outer = tuple(_outer_dims(s, a.invariant_prefix, d) for s, a, d in zip(shapes, accesses, dynamic))
        if arrays is None:  # no arrays to check alignment on (printing a kernel): scalar accesses
            return PointwiseSchedule(BLOCK, outer)
        vec = tuple(vector_width(a, g, s, arrays, output_layout) for a, g, s in zip(accesses, plan.groups, shapes))
        return PointwiseSchedule(BLOCK, outer, vec if any(v > 1 for v in vec) else ())

    def grid(self, plan: KernelPlan, schedule: PointwiseSchedule, extents) -> tuple[int, int, int] | None:
        """(blocks over the inner elements, blocks splitting the outer loop, groups): the
        largest need over the groups (each group's loops stride by the whole grid)."""
        shapes = [extents.shape(v) for v in plan.domain_values()]
        if not any(math.prod(s) for s in shapes):
            return None
        gx = gy = 1
        for shape, k, vec in zip(shapes, schedule.outer_dims, schedule.vec or (1,) * len(shapes)):
            inner, outer = math.prod(shape[k:]) // vec, math.prod(shape[:k])
            x = max(1, min(math.ceil(inner / schedule.block), MAX_GRID))
            gx = max(gx, x)
            gy = max(gy, min(outer, MAX_GRID, math.ceil(TARGET_BLOCKS / x)))
        return gx, gy, len(shapes)

    def emit(self, plan: KernelPlan, schedule: PointwiseSchedule) -> KernelBody:
        em = KernelEmitter(plan, schedule)
        groups = plan.groups
        vecs = schedule.vec or (1,) * len(groups)
        for g, (outputs, k, vec) in enumerate(zip(groups, schedule.outer_dims, vecs)):
            if len(groups) > 1:
                em.open(f"if (blockIdx.z == {g})")
            _emit_group(em, outputs, k, vec)
            if len(groups) > 1:
                em.close()
        return KernelBody(em.text(), [], tuple(em.params.values()), em.needs_sync)


def _emit_group(em: KernelEmitter, outputs, k: int, vec: int) -> None:
    dom = outputs[0]
    rank = dom.type.rank
    em.open("")  # a C scope per group: each declares its own `inner`, `outer` and index variables
    em.line(f"const long long inner = {em.numel(dom, range(k, rank))}" + (f" / {vec};" if vec > 1 else ";"))
    em.open("for (long long lin = (long long)blockIdx.x * blockDim.x + threadIdx.x; lin < inner; "
            "lin += (long long)gridDim.x * blockDim.x)")
    if vec > 1:
        # The innermost dim is walked VEC elements at a time: iv0 .. iv<VEC-1> are consecutive.
        row = f"{em.extent(dom, rank - 1)} / {vec}"
        em.line(f"const long long iv0 = (lin % ({row})) * {vec};")
        for j in range(1, vec):
            em.line(f"const long long iv{j} = iv0 + {j};")
        idx = em.unravel(dom, list(range(k, rank - 1)), f"(lin / ({row}))", "i") if rank - 1 > k else {}
        lanes = [vector_lane(rank - 1, j, f"iv{j}") for j in range(vec)]
        idx[rank - 1] = lanes[0]
    else:
        idx = em.unravel(dom, list(range(k, rank)), "lin", "i")
    if k:
        em.line(f"const long long outer = {em.numel(dom, range(k))};")
        em.hoist_here(allowed=set(range(k, rank)))
        em.open("for (long long olin = blockIdx.y; olin < outer; olin += gridDim.y)")
        idx.update(em.unravel(dom, list(range(k)), "olin", "i"))
    if vec > 1:
        em.vec = vec
        em.lane0 = lanes[0]
        em.vector_loads = {}
        staged = {out: em.stage(out, vec) for out in outputs}
        for j, lane in enumerate(lanes):
            for out in outputs:
                em.stage_value(out, staged[out], j, [*(idx[d] for d in range(rank - 1)), lane])
        for out in outputs:
            em.store_vector(out, staged[out], [idx[d] for d in range(rank)], vec)
        em.vec = 1
    else:
        for out in outputs:
            em.store(out, [idx[d] for d in range(rank)])
    if k:
        em.close()
    em.hoist = None
    em.close()
    em.close()


__all__ = ["PointwiseScheduler", "PointwiseSchedule", "vector_width"]
