"""What a kernel reads, and with which indices: computed once per kernel plan, before any
schedule is chosen or any C is printed. Schedulers decide from it; the renderer follows it.

Each output (pointwise) or each phase (row kernels: one per reduction, then the stores) is
walked from its iteration domain down to the global loads, mapping the typed index
(lowering/codegen/index.py) through every op the way emission will. The walk is iterative and
memoised per (value, index), so its cost is linear in the plan, whatever its depth.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from xdsl.ir import Operation, SSAValue

from fuser_dialect.types import BROADCAST
from fuser_dialect import ops_resize as R
from fuser_dialect import ops_compute as C
from fuser.lowering.codegen.emit_cuda import ACCESS_RULES, cat_starts
from fuser.lowering.codegen.index import ZERO, Ix, depends_only_on, loop_var, shifted, structural_key
from fuser.lowering.codegen.kernel import DROP, FULL, KEEP, KernelPlan


@dataclass(frozen=True)
class Load:
    value: SSAValue
    idx: tuple[Ix, ...]
    conditional: bool


def _normalised(value: SSAValue, idx: Sequence[Ix]) -> tuple[Ix, ...]:
    """Broadcast dims of `value` are read at 0, whatever the domain index (as emission does)."""
    return tuple(ZERO if e == BROADCAST else ix for e, ix in zip(value.type.shape, idx))  # type: ignore[union-attr]


def walk_reads(produced: dict[SSAValue, Operation], roots: Sequence[tuple[SSAValue, Sequence[Ix]]],
               visit: Callable[[SSAValue, tuple[Ix, ...], bool, Operation | None], bool]) -> None:
    """Walks what `roots` read, as emission meets it (depth first, operands in order), each
    (value, index, under a branch) once: `visit(value, idx, conditional, producer)` is called,
    and the walk descends into the producer's operands when it returns True."""
    seen: set[tuple] = set()
    stack = [(v, _normalised(v, idx), False) for v, idx in reversed(roots)]
    while stack:
        value, idx, conditional = stack.pop()
        if (value, idx, conditional) in seen:
            continue
        seen.add((value, idx, conditional))
        op = produced.get(value)
        if not visit(value, idx, conditional, op) or op is None:
            continue
        rule = ACCESS_RULES.get(type(op))
        if rule is None:
            raise NotImplementedError(f"no access rule for {op.name} (lowering/codegen/emit_cuda.py ACCESS_RULES)")
        for read in reversed(rule(op, idx)):
            stack.append((read.operand, _normalised(read.operand, read.idx), conditional or read.conditional))


def global_loads(produced: dict[SSAValue, Operation], roots: Sequence[tuple[SSAValue, Sequence[Ix]]]) -> list[Load]:
    """The global loads reached from `roots`, in the order emission meets them, each (value,
    index) once."""
    loads: list[Load] = []

    def visit(value, idx, conditional, op) -> bool:
        if op is None:
            loads.append(Load(value, idx, conditional))
        return True

    walk_reads(produced, roots, visit)
    return loads


def cat_boundaries(produced: dict[SSAValue, Operation], roots: Sequence[tuple[SSAValue, Sequence[Ix]]]) -> list[Ix]:
    """Where the kernel's cats switch pieces, as the index of each piece after the first along
    the cat's dim (the cat's own index shifted by the piece's start): a vector access must not
    straddle one. A load's own index can hide it: in `cat([x[:, :2], x[:, 2:]])` the second
    piece reads x at the cat's index, the piece's -2 and the slice's +2 cancelling, while its
    lanes still cross the boundary at 2."""
    found: list[Ix] = []

    def visit(value, idx, conditional, op) -> bool:
        if isinstance(op, R.CatOp):
            dim = op.dim.value.data
            starts = cat_starts(op)
            for k in range(1, len(op.inputs)):
                by = -starts[k] if starts is not None else None
                found.append(shifted(idx[dim], ("cat-boundary", op, k), by=by))
        return True

    walk_reads(produced, roots, visit)
    return found


@dataclass(frozen=True)
class GroupAccess:
    """What the schedule of one pointwise output group needs to know about its loads."""

    invariant_prefix: int
    """The most leading dims some global load does not depend on (a bias broadcast over rows,
    a cos/sin table broadcast over batch and heads): those dims may loop inside a thread."""
    vector_values: tuple[SSAValue, ...] | None
    """Tensors loaded with the innermost loop variable as their last index and nowhere else,
    when every load of the group is of that form or independent of it: then consecutive
    threads read consecutive elements and VEC of them can move as one access. None: no."""
    cone_ops: int = 0
    """Ops computed per element of the group (its outputs' backward cone inside the kernel)."""
    vector_alignment: int = 0
    """A vector width must divide it (static shifts of the innermost index; 0: anything goes)."""


def cone_ops(produced: dict[SSAValue, Operation], roots: Sequence[SSAValue]) -> int:
    """How many ops of the kernel the values `roots` depend on (each op once)."""
    seen: set[SSAValue] = set()
    stack = [v for v in roots if v in produced]
    while stack:
        value = stack.pop()
        if value in seen:
            continue
        seen.add(value)
        stack.extend(v for v in produced[value].operands if v in produced and v not in seen)
    return len(seen)


def vector_values(loads: Sequence[Load], last: int, boundaries: Sequence[Ix] = ()) -> tuple[tuple[SSAValue, ...], int] | None:
    """(the tensors read with the domain's `last` loop variable as their innermost index, the
    alignment a vector width must divide), when every load that depends on `last` reads it as
    its innermost index, itself or shifted by a compile-time constant (a static slice start, a
    cat piece's start: the vector width must divide each shift, so that the VEC lanes stay in one
    aligned access), and every cat boundary along `last` (`cat_boundaries`) is at such a shift
    (so that the VEC lanes stay in one cat piece); 0: no such constraint. None when one does not
    (it reads `last` in another position, or through a position computed in the kernel, which may
    hide it, or a cat boundary along `last` is not known at compile time)."""
    vector: list[SSAValue] = []
    alignment = 0
    for load in loads:
        used = frozenset().union(*(ix.dims for ix in load.idx))
        if last not in used:
            continue
        if any(ix.local and last in ix.dims for ix in load.idx):
            return None  # a position computed from `last` may hide it
        # (a position computed from other dims, a gathered row, is one for all the lanes)
        inner = load.idx[-1]
        if inner.dims != {last} or inner.offset is None or any(last in ix.dims for ix in load.idx[:-1]):
            return None
        alignment = math.gcd(alignment, inner.offset)
        if load.value not in vector:
            vector.append(load.value)
    for boundary in boundaries:
        if last not in boundary.dims:
            continue
        if boundary.local or boundary.dims != {last} or boundary.offset is None:
            return None
        alignment = math.gcd(alignment, boundary.offset)
    return tuple(vector), alignment


def group_access(produced: dict[SSAValue, Operation], outputs: Sequence[SSAValue]) -> GroupAccess:
    rank = outputs[0].type.rank  # type: ignore[union-attr]
    domain = [loop_var(d) for d in range(rank)]
    loads = global_loads(produced, [(out, domain) for out in outputs])
    best = 0
    for load in loads:
        if any(ix.local for ix in load.idx):
            continue
        used = frozenset().union(*(ix.dims for ix in load.idx))
        prefix = min(used) if used else rank
        best = max(best, min(prefix, rank - 1))
    # A position computed in the kernel may hide the innermost variable: no vectors then.
    local = any(ix.local for load in loads for ix in load.idx)
    boundaries = cat_boundaries(produced, [(out, domain) for out in outputs])
    found = vector_values(loads, rank - 1, boundaries) if rank and not local else None
    vector, alignment = found if found is not None else (None, 0)
    return GroupAccess(max(best, 0), vector, cone_ops(produced, outputs), alignment)


@dataclass(frozen=True)
class RowLoads:
    """Row kernels: what each phase reads from global memory, for the schedule's vector width
    and its traffic (lowering/schedulers/rows/problem.py)."""

    phases: tuple[tuple[Load, ...], ...]
    """Per phase (one per reduction, then the stores), the loads it meets, each once."""
    vector_values: tuple[SSAValue, ...] | None
    """Tensors read along the row's innermost dim as vector lanes (see `vector_values`); None:
    the row cannot be read VEC elements at a time."""
    vector_alignment: int = 0
    """A vector width must divide it (see `vector_values`)."""


def row_loads(plan: KernelPlan) -> RowLoads:
    """The loads of each phase of a row kernel as a streaming schedule walks it (reductions
    unmerged: a merge only drops a phase that reads what its partner reads)."""
    assert plan.domain is not None
    produced = {op.results[0]: op for op in plan.ops}
    rank = plan.domain.type.rank  # type: ignore[union-attr]
    domain = [loop_var(d) for d in range(rank)]
    phase_roots = [[(v, domain) for v in roots] for roots in _row_phase_roots(plan, {})]
    phases = tuple(tuple(global_loads(produced, roots)) for roots in phase_roots)
    last = rank - 1
    reduced = frozenset(plan.reduced_dims)
    every = [load for phase in phases for load in phase]
    # Positions computed in the kernel along the row (a gather by a per-element index) may hide
    # the innermost variable; a per-row computed position (a label) is read outside the loops.
    # (A thread per row, the innermost dim kept, reads VEC consecutive rows as one access: a
    # position computed from the innermost dim hides it there.)
    along = reduced | {last}
    hidden = any(ix.local and ix.dims & along for load in every for ix in load.idx)
    boundaries = [ix for roots in phase_roots for ix in cat_boundaries(produced, roots)]
    found = vector_values(every, last, boundaries) if rank and not hidden else None
    vectors, alignment = found if found is not None else (None, 0)
    return RowLoads(phases, vectors, alignment)


def row_output_loads(plan: KernelPlan) -> list[Load]:
    """The global loads of a row kernel's row outputs (KEEP and DROP forms: a value a row),
    reduction results aside (their registers), at the outputs' own indices."""
    assert plan.domain is not None
    produced = {op.results[0]: op for op in plan.ops}
    rank = plan.domain.type.rank  # type: ignore[union-attr]
    kept = [d for d in range(rank) if d not in plan.reduced_dims]
    roots = []
    for v in plan.outputs:
        form = plan.forms.get(v)
        if form == KEEP:
            roots.append((v, [loop_var(d) if d in kept else ZERO for d in range(rank)]))
        elif form == DROP:
            roots.append((v, [loop_var(d) for d in kept]))
    loads: list[Load] = []

    def visit(value, idx, conditional, op) -> bool:
        if op is None:
            loads.append(Load(value, idx, conditional))
        return not isinstance(op, C.ReductionOp)

    walk_reads(produced, roots, visit)
    return loads


@dataclass(frozen=True)
class RowAccess:
    """Row kernels: the values more than one phase reads, by (value, structural index) —
    global loads and (unless `loads_only`) values computed in the row loop alike. A persistent
    schedule keeps them per thread after the phase that first computes them, so the row is read
    once and a chain of dependent reductions (t = t - max(t), repeated) computes each link
    once, not once per later phase."""

    kept: tuple[tuple[SSAValue, tuple], ...]
    """In the order the phases first compute them (deterministic: emission names follow it)."""
    lifetimes: dict[tuple, tuple[int, int]]
    """Per kept value: the phase that computes it and the last phase that reads it."""
    prefetched: tuple[tuple[SSAValue, tuple], ...] = ()
    """Loads of the row at its own index that the first phase makes for later phases."""

    @property
    def reused(self) -> frozenset[tuple[SSAValue, tuple]]:
        return frozenset(self.kept)

    def slots(self) -> tuple[dict[tuple, int], int]:
        """A storage slot per kept value, sharing a slot between values whose phases do not
        overlap (a chain of reductions needs two, however long): (slot of each, slot count)."""
        slot_of: dict[tuple, int] = {}
        free_after: list[int] = []  # per slot: the last phase that reads what it holds
        for key in sorted(self.kept, key=lambda k: self.lifetimes[k][0]):
            first, last = self.lifetimes[key]
            slot = next((s for s, end in enumerate(free_after) if end < first), len(free_after))
            if slot == len(free_after):
                free_after.append(last)
            else:
                free_after[slot] = last
            slot_of[key] = slot
        return slot_of, len(free_after)


def _row_phase_roots(plan: KernelPlan, online: dict) -> list[list[SSAValue]]:
    merged = set(online.values())
    phases = [[red.input] for red in plan.row_reductions if red not in merged]
    phases.append([v for v in plan.outputs if plan.forms.get(v) == FULL])
    return phases


def row_access(plan: KernelPlan, online: dict, loads_only: bool = False, prefetch: bool = False) -> RowAccess:
    """`online`: max/sum pairs fused into one phase (only when the row is not in registers;
    a persistent kernel has every reduction in its own phase). `loads_only`: keep only global
    loads, recomputing what is computed from them (less storage per thread). `prefetch`: the
    first phase also loads what later phases read of the row (the row's other inputs, at the
    row's own index), so that all of a row's loads are in flight at once, and keeps them.

    Each phase is walked from its roots like emission; a (value, index) that varies along the
    row and an earlier phase computed unconditionally is where the walk stops: that phase keeps
    it, this one reads it back. Each phase's walk is therefore linear in what it adds."""
    assert plan.domain is not None
    produced = {op.results[0]: op for op in plan.ops}
    rank = plan.domain.type.rank  # type: ignore[union-attr]
    domain = [loop_var(d) for d in range(rank)]
    kept = frozenset(d for d in range(rank) if d not in plan.reduced_dims)
    reduced = frozenset(plan.reduced_dims)
    computed_in: dict[tuple, int] = {}  # insertion order: the order phases compute values
    lifetimes: dict[tuple, tuple[int, int]] = {}
    row_index = structural_key(domain)
    prefetched: list[tuple] = []
    for phase, roots in enumerate(_row_phase_roots(plan, online)):

        def visit(value, idx, conditional, op) -> bool:
            key = structural_key(idx)
            # Per-row values are read once per row, and values along the row that are the
            # same for every row (weights) are re-read: L2 serves them.
            if key is None or conditional or depends_only_on(idx, kept) or depends_only_on(idx, reduced):
                return True
            if op is not None and loads_only:
                return True
            if prefetch and op is None and key == row_index and (value, key) not in computed_in and phase > 0:
                computed_in[(value, key)] = 0  # loaded by the first phase, with the rest of the row
                prefetched.append((value, key))
            first = computed_in.setdefault((value, key), phase)
            if first < phase:
                lifetimes[(value, key)] = (first, phase)
                return False  # an earlier phase keeps it: read it back, do not recompute
            return True

        walk_reads(produced, [(v, domain) for v in roots], visit)
    kept_values = tuple(k for k in computed_in if k in lifetimes)
    return RowAccess(kept_values, lifetimes, tuple(prefetched))


class KernelAnalysis:
    """The analysis of one plan, computed on first use and kept with the plan."""

    def __init__(self, plan: KernelPlan):
        self.plan = plan
        self.produced = {op.results[0]: op for op in plan.ops}

    @cached_property
    def groups(self) -> tuple[GroupAccess, ...]:
        return tuple(group_access(self.produced, outputs) for outputs in self.plan.groups)

    @cached_property
    def rows(self) -> RowAccess:
        return row_access(self.plan, {})

    @cached_property
    def rows_loads_only(self) -> RowAccess:
        return row_access(self.plan, {}, loads_only=True)

    @cached_property
    def rows_prefetch(self) -> RowAccess:
        return row_access(self.plan, {}, prefetch=True)

    @cached_property
    def row_loads(self) -> RowLoads:
        return row_loads(self.plan)

    @cached_property
    def row_output_loads(self) -> tuple[Load, ...]:
        return tuple(row_output_loads(self.plan))


__all__ = ["GroupAccess", "KernelAnalysis", "Load", "RowAccess", "RowLoads", "cat_boundaries", "cone_ops", "global_loads", "walk_reads",
           "group_access", "row_access", "row_loads", "row_output_loads", "vector_values", "DROP", "FULL", "KEEP"]
