"""The pointwise scheduler: fusions without reductions.

The output domain of each group splits into *outer* dims, looped over inside each thread,
and *inner* dims, one element per thread in a grid-stride loop (128 threads a block; a launch
with fewer elements than that, all its extents static, takes a block of its elements rounded up
to a warp: the threads it would leave idle cost the cpu backend's emulation ~5 ns each a call).
Loads that do not depend on the outer dims (a bias, RoPE's cos/sin table broadcast over
batch and heads) are hoisted out of the outer loop: read once per thread, not per element.
The outer dims are the longest prefix that leaves >= `MIN_INNER` inner elements (a dynamic
dim counting as long, so the choice holds for all its extents) and that some load does not
depend on (from the kernel analysis); blockIdx.y splits the outer loop
just enough to fill the GPU. Outputs of different iteration domains form *groups* of one
kernel (horizontal fusion: blockIdx.z picks the group), so q and k of a rotary embedding,
whose extents are unrelated symbols, still share one launch. Where the innermost dim is
dense, divisible and 16-byte aligned (checked per call), each thread moves 16 bytes per access.
A thread's loop is unrolled into steps whose loads, those under a cat's piece or a pad's inside
included (predicated on where the piece lies), are all issued before any is used
(KernelEmitter.open_staged_loop); the arithmetic on what is hoisted out of the outer loop (a
RoPE table's cos and sin) is hoisted with it; the inner loop's index is 32-bit where it fits.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from fuser_dialect import ops_resize as R
from fuser_dialect.types import DYNAMIC, numpy_dtype
from fuser.lowering.codegen.analysis import GroupAccess, global_loads
from fuser.lowering.codegen.index import loop_var, vector_lane
from fuser.lowering.codegen.emit_cuda import EmitOptions, KernelEmitter, StagePipeline
from fuser.lowering.codegen.kernel import KernelPlan
from fuser.lowering.device import DEFAULT, DeviceSpec
from fuser.lowering.schedulers.base import MAX_GRID, Candidate, KernelBody, SchedulerUnit, Verdict
from fuser.lowering.schedulers.performance import Traffic
from fuser.lowering.schedulers.scan import refuse_scans
from fuser.lowering.schedulers.vectorize import vector_width

BLOCK = 128
WARP = 32
MIN_INNER = 128
TARGET_THREADS_PER_SM = 2048
"""Threads a pointwise launch aims to keep on each SM (a full H100 SM: a 16-byte vector each
is 32 KiB in flight, the bandwidth limit)."""
TARGET_IN_FLIGHT_PER_THREAD = 32
"""Bytes of loads a pointwise thread should have in flight: two 16-byte vectors, so that an SM
whose registers leave room for three quarters of its threads still has 32 KiB in flight."""
MAX_UNROLL = 4
MAX_PREFETCH_BYTES = 32
"""Steps of at most this many bytes a thread prefetch the next step (PointwiseSchedule.prefetch):
twice a step's registers are live then (a larger one costs more warps than it keeps in flight:
Llama's rotary forward, 192 bytes a step, 90 -> 50 KiB in flight an SM prefetched). Kernels with
an outer loop are not prefetched: what is hoisted out of it stays live beside both steps (the
rope case 52 -> 72 registers, 36 -> 28 KiB in flight an SM in the SASS; a GELU epilogue's bias
kernel 48 -> 40), while the flat kernels it serves gain (BERT's backward 32 -> 48, GPT-2's
forward 32 -> 64)."""
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
    unroll: int = 1
    """Iterations of a thread's loop (the outer loop when there is one) a step: their loads are
    in flight together."""
    index32: bool = False
    """The inner loop's linear index and its division into the inner dims' indices are unsigned
    32-bit (every group has fewer than 2^31 inner elements): a 64-bit division by a constant is a
    dozen instructions and twice the registers, and ptxas then issues a step's loads apart
    (addresses stay 64-bit). The outer loop (blockIdx.y's, the same for a warp: ptxas computes it
    on the uniform datapath) stays 64-bit: in 32 bits ptxas placed the step's later loads after
    the arithmetic on its first (a GELU epilogue's bias kernel: 48 -> 24 KiB in flight an SM)."""
    prefetch: bool = False
    """The hot loop's load stage loads the next step while the body computes this one
    (StagePipeline): ptxas cannot sink a step's later loads below the arithmetic on its first."""

    def describe(self) -> str:
        vec = f", vector: {list(self.vec)}" if self.vec else ""
        unroll = f", unroll: {self.unroll}" if self.unroll > 1 else ""
        index = ", 32-bit index" if self.index32 else ""
        prefetch = ", prefetch" if self.prefetch else ""
        return f"block: {self.block}, outer dims: {list(self.outer_dims)}{vec}{unroll}{index}{prefetch}"


def _outer_dims(shape: tuple[int, ...], invariant_prefix: int, dynamic: Sequence[bool] = ()) -> int:
    """How many leading dims to loop over inside each thread. A dim whose extent is dynamic in
    the fusion (`?`) counts as long: the choice, and so the kernel, then does not change with its
    extent, and one compile serves every length (a sequence length under dynamic=True)."""
    sizes = [max(e, MIN_INNER) if d else e for e, d in zip(shape, tuple(dynamic) + (False,) * len(shape))]
    outer = 0
    while outer < invariant_prefix and math.prod(sizes[outer + 1:]) >= MIN_INNER:
        outer += 1
    return outer


def _block(shapes: Sequence[tuple[int, ...]], outer: Sequence[int], vec: Sequence[int],
           dynamic: Sequence[Sequence[bool]]) -> int:
    """Threads a block: BLOCK, unless every group has fewer work items (elements, or vectors of
    them) than BLOCK and no extent is dynamic; then the most items a group spreads over threads
    (its inner dims), rounded up to a warp. The launch is one block either way, and a block of
    one warp is as valid on a GPU as one of four; larger or dynamic launches keep BLOCK (their
    schedule, and so their kernel, does not change with the extent)."""
    if any(any(d) for d in dynamic) or any(math.prod(s) // v > BLOCK for s, v in zip(shapes, vec)):
        return BLOCK
    items = max((math.prod(s[k:]) // v for s, k, v in zip(shapes, outer, vec)), default=0)
    return min(BLOCK, max(WARP, -(-items // WARP) * WARP))


def _fits_index32(shapes: Sequence[tuple[int, ...]], outer: Sequence[int]) -> bool:
    """Every group's inner loop stays in unsigned 32 bits: fewer than 2^31 elements in its inner
    dims (a linear index plus the grid's stride then stays below 2^32)."""
    return all(math.prod(s[k:]) < 2 ** 31 for s, k in zip(shapes, outer))


def group_vector_width(access: GroupAccess, outputs, shape: tuple[int, ...], arrays: dict, output_layout: dict) -> int:
    """Elements per 16-byte access for a pointwise group, or 1. Needs: loads of the innermost dim
    only (access.vector_values), and what lowering/schedulers/vectorize.py requires of every
    array and output. Groups with long cones stay scalar (MAX_VECTOR_CONE_OPS)."""
    if access.vector_values is None or not shape or access.cone_ops > MAX_VECTOR_CONE_OPS:
        return 1
    return vector_width(access.vector_values, outputs, shape[-1], arrays, output_layout,
                        alignment=access.vector_alignment)


class PointwiseScheduler(SchedulerUnit):
    name = "pointwise"

    def accepts(self, candidate: Candidate) -> Verdict:
        if (scan := refuse_scans(candidate)) is not None:
            return scan
        if candidate.reductions:
            return Verdict(False, "a reduction needs a row scheduler")
        return Verdict(True, scheduler=self.name)

    def choose(self, plan: KernelPlan, shapes: Sequence[tuple[int, ...]], arrays: dict | None,
               output_layout: dict, device: DeviceSpec = DEFAULT) -> PointwiseSchedule:
        accesses = plan.analysis.groups
        dynamic = [[e == DYNAMIC for e in v.type.shape] for v in plan.domain_values()]
        outer = tuple(_outer_dims(s, a.invariant_prefix, d) for s, a, d in zip(shapes, accesses, dynamic))
        if arrays is None:  # no arrays to check alignment on (printing a kernel): scalar accesses
            return PointwiseSchedule(_block(shapes, outer, (1,) * len(shapes), dynamic), outer)
        vec = tuple(group_vector_width(a, g, s, arrays, output_layout) for a, g, s in zip(accesses, plan.groups, shapes))
        schedule = PointwiseSchedule(_block(shapes, outer, vec, dynamic), outer, vec if any(v > 1 for v in vec) else ())
        per_iteration = min(_in_flight(plan, schedule))
        unroll = max(1, min(MAX_UNROLL, TARGET_IN_FLIGHT_PER_THREAD // max(per_iteration, 1)))
        step = max(_in_flight(plan, schedule)) * unroll
        return dataclasses.replace(schedule, unroll=unroll, index32=_fits_index32(shapes, outer),
                                   prefetch=0 < step <= MAX_PREFETCH_BYTES and not any(outer))

    def check_schedule(self, plan: KernelPlan, schedule, shapes: Sequence[tuple[int, ...]], arrays: dict | None,
                       output_layout: dict, device: DeviceSpec = DEFAULT) -> None:
        super().check_schedule(plan, schedule, shapes, arrays, output_layout, device)
        if schedule.index32 and not _fits_index32(shapes, schedule.outer_dims):
            inner = [math.prod(s[k:]) for s, k in zip(shapes, schedule.outer_dims)]
            raise ValueError(f"override_schedule: kernel {plan.index} (pointwise): index32 needs fewer than 2^31 "
                             f"inner elements a group; the groups have {inner}")

    def grid(self, plan: KernelPlan, schedule: PointwiseSchedule, extents, device: DeviceSpec = DEFAULT
             ) -> tuple[int, int, int] | None:
        """(blocks over the inner elements, blocks splitting the outer loop, groups): the
        largest need over the groups (each group's loops stride by the whole grid)."""
        shapes = [extents.shape(v) for v in plan.domain_values()]
        if not any(math.prod(s) for s in shapes):
            return None
        gx = gy = 1
        u = schedule.unroll  # iterations of the outer loop a step, or of the inner one without
        for shape, k, vec in zip(shapes, schedule.outer_dims, schedule.vec or (1,) * len(shapes)):
            inner, outer = math.prod(shape[k:]) // vec, math.prod(shape[:k])
            x = max(1, min(math.ceil(inner / (schedule.block * (1 if k else u))), MAX_GRID))
            gx = max(gx, x)
            target = math.ceil(TARGET_THREADS_PER_SM // schedule.block * device.sms / x)
            gy = max(gy, min(math.ceil(outer / u), MAX_GRID, target))
        return gx, gy, len(shapes)

    def alternatives(self, plan: KernelPlan, schedule: PointwiseSchedule, extents, arrays: dict | None,
                     device: DeviceSpec) -> list[PointwiseSchedule]:
        """Other unrolls of the same loops."""
        return [dataclasses.replace(schedule, unroll=u) for u in (2, 1, 4) if u != schedule.unroll]

    def traffic(self, plan: KernelPlan, schedule: PointwiseSchedule, extents, device: DeviceSpec,
                ctas_per_sm: int) -> Traffic:
        """Each input and output once (loads hoisted out of the outer loop, or re-read by other
        blocks, are L2 hits); in flight: what a thread loads per element (a vector per load
        when vectorised), the loads hoisted out of the outer loop left out when there is one."""
        values = [*plan.inputs, *plan.outputs]
        moved = sum(math.prod(extents.shape(v)) * numpy_dtype(v.type.dtype).itemsize for v in values)
        vecs = schedule.vec or (1,) * len(plan.groups)
        widest = max([4, *(numpy_dtype(v.type.dtype).itemsize * vec  # type: ignore[union-attr]
                           for access, vec in zip(plan.analysis.groups, vecs) for v in (access.vector_values or ()))])
        in_flight = max(_in_flight(plan, schedule)) * schedule.unroll
        # Dependent waits: one per step of a thread's loop (its unrolled iterations overlap).
        grid = self.grid(plan, schedule, extents, device) or (1, 1, 1)
        steps = 1
        for shape, k, vec in zip([extents.shape(v) for v in plan.domain_values()], schedule.outer_dims,
                                 schedule.vec or (1,) * len(plan.groups)):
            inner, outer = math.prod(shape[k:]) // vec, math.prod(shape[:k])
            per_thread = math.ceil(inner / (grid[0] * schedule.block)) * math.ceil(outer / grid[1])
            steps = max(steps, math.ceil(per_thread / schedule.unroll))
        return Traffic(moved, max(in_flight, 4), widest, moved, steps)

    def emit(self, plan: KernelPlan, schedule: PointwiseSchedule, options: EmitOptions = EmitOptions()) -> KernelBody:
        em = KernelEmitter(plan, schedule, options=options)
        groups = plan.groups
        vecs = schedule.vec or (1,) * len(groups)
        for g, (outputs, k, vec) in enumerate(zip(groups, schedule.outer_dims, vecs)):
            if len(groups) > 1:
                em.open(f"if (blockIdx.z == {g})")
            _emit_group(em, outputs, k, vec, schedule.unroll, schedule.index32, schedule.prefetch)
            if len(groups) > 1:
                em.close()
        return KernelBody(em.text(), [], tuple(em.params.values()), em.needs_sync)


def _in_flight(plan: KernelPlan, schedule: PointwiseSchedule) -> list[int]:
    """Per group: the bytes a thread loads per iteration of its loop (a vector per load when
    vectorised; loads hoisted out of the outer loop left out when there is one)."""
    vecs = schedule.vec or (1,) * len(plan.groups)
    sizes = []
    for access, outputs, outer, vec in zip(plan.analysis.groups, plan.groups, schedule.outer_dims, vecs):
        rank = outputs[0].type.rank  # type: ignore[union-attr]
        loads = global_loads(plan.analysis.produced, [(out, [loop_var(d) for d in range(rank)]) for out in outputs])
        total = 0
        alternatives = set()
        for load in loads:
            used = frozenset().union(*(ix.dims for ix in load.idx))
            if outer and not any(d < outer for d in used):
                continue  # hoisted: loaded once per thread, before the outer loop
            lanes = vec if load.value in (access.vector_values or ()) else 1
            if load.conditional:
                # The pieces of a cat (or a pad's inside) that read one tensor: a thread makes one
                # of these loads (the load stage shares one load between a cat's pieces).
                if (load.value, lanes) in alternatives:
                    continue
                alternatives.add((load.value, lanes))
            total += numpy_dtype(load.value.type.dtype).itemsize * lanes  # type: ignore[union-attr]
        sizes.append(total)
    return sizes


def _open_unrolled(em: KernelEmitter, var: str, start: str, end: str, stride: str, unroll: int,
                   hot: bool = True, itype: str = "long long", prefetch: bool = False) -> bool:
    """`for (var = start; var < end; var += stride)`, `unroll` iterations a step. The loop a
    thread spends its time in (`hot`) is a staged loop (KernelEmitter.open_staged_loop): the
    step's iterations are independent, and all their loads are issued before the first is used
    (with unroll 1 where the kernel has a cat or a pad: their pieces' loads are then predicated,
    not branched around, and disjoint pieces share one load). True when
    staged: the caller then emits the iteration's indices and calls `_guard_unrolled`. With
    `prefetch`, the stage loads the next step while the body computes this one (StagePipeline)."""
    resized = any(isinstance(op, (R.CatOp, R.PadOp)) for op in em.plan.ops)
    if not hot or (unroll == 1 and not resized and not prefetch):
        em.open(f"for ({itype} {var} = {start}; {var} < {end}; {var} += {stride})")
        return False
    suffix = "u" if itype == "unsigned" else "LL"
    advance = f"{unroll}{suffix} * {stride}"
    pipeline = StagePipeline(em.section(), itype, f"{var}_step", start, advance) if prefetch else None
    em.open(f"for ({itype} {var}_step = {start}; {var}_step < {end}; {var}_step += {advance})")
    em.open_staged_loop(f"{var}_u", unroll, f"for (int {var}_u = 0; {var}_u < {unroll}; ++{var}_u)", pipeline)
    em.line(f"const {itype} {var} = {var}_step + {var}_u * {stride};")
    return True


def _guard_unrolled(em: KernelEmitter, var: str, end: str, staged: bool) -> None:
    if staged:
        em.guard_staged(f"{var} < {end}")


def _close_unrolled(em: KernelEmitter, staged: bool) -> None:
    if staged:
        em.close_staged()
    em.close()


def _emit_group(em: KernelEmitter, outputs, k: int, vec: int, unroll: int = 1, index32: bool = False,
                prefetch: bool = False) -> None:
    dom = outputs[0]
    rank = dom.type.rank
    # a 64-bit inner loop, or an unsigned 32-bit one (index32): its type, the grid's stride's cast
    itype, wide = ("unsigned", "") if index32 else ("long long", "(long long)")

    def cast(count: str) -> str:
        return f"(unsigned)({count})" if index32 else count

    em.open("")  # a C scope per group: each declares its own `inner`, `outer` and index variables
    em.line(f"const {itype} inner = {cast(em.numel(dom, range(k, rank)) + (f' / {vec}' if vec > 1 else ''))};")
    # The loop a thread spends its time in (the outer one when there is one) is unrolled.
    inner_staged = _open_unrolled(em, "lin", f"{wide}blockIdx.x * blockDim.x + threadIdx.x", "inner",
                                  f"{wide}gridDim.x * blockDim.x", unroll, hot=not k, itype=itype, prefetch=prefetch)
    if vec > 1:
        # The innermost dim is walked VEC elements at a time: iv0 .. iv<VEC-1> are consecutive.
        row = cast(f"{em.extent(dom, rank - 1)} / {vec}") if index32 else f"({em.extent(dom, rank - 1)} / {vec})"
        em.line(f"const long long iv0 = (lin % {row}) * {vec};")
        for j in range(1, vec):
            em.line(f"const long long iv{j} = iv0 + {j};")
        idx = em.unravel(dom, list(range(k, rank - 1)), f"(lin / {row})", "i", index32) if rank - 1 > k else {}
        lanes = [vector_lane(rank - 1, j, f"iv{j}") for j in range(vec)]
        idx[rank - 1] = lanes[0]
    else:
        idx = em.unravel(dom, list(range(k, rank)), "lin", "i", index32)
    _guard_unrolled(em, "lin", "inner", inner_staged)
    outer_staged = False
    if k:
        em.line(f"const long long outer = {em.numel(dom, range(k))};")
        em.hoist_here(allowed=set(range(k, rank)), conditional=True, values=True)
        outer_staged = _open_unrolled(em, "olin", "blockIdx.y", "outer", "(long long)gridDim.y", unroll, prefetch=prefetch)
        idx.update(em.unravel(dom, list(range(k)), "olin", "i"))
        _guard_unrolled(em, "olin", "outer", outer_staged)
    if vec > 1:
        em.use_vector_lanes(lanes)
        staged = {out: em.stage(out, vec) for out in outputs}
        for j, lane in enumerate(lanes):
            for out in outputs:
                em.stage_value(out, staged[out], j, [*(idx[d] for d in range(rank - 1)), lane])
        for out in outputs:
            em.store_vector(out, staged[out], [idx[d] for d in range(rank)], vec)
        em.end_vector_lanes()
    else:
        for out in outputs:
            em.store(out, [idx[d] for d in range(rank)])
    if k:
        _close_unrolled(em, outer_staged)
    em.stop_hoisting()
    _close_unrolled(em, inner_staged)
    em.close()


__all__ = ["PointwiseScheduler", "PointwiseSchedule", "group_vector_width"]
