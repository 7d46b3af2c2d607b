"""What a kernel reads, and with which indices: computed once per kernel plan, before any
schedule is chosen or any C is printed. Schedulers decide from it; the renderer follows it.

Each output (pointwise) or each phase (row kernels: one per reduction, then the stores) is
walked from its iteration domain down to the global loads, mapping the typed index
(lowering/codegen/index.py) through every op the way emission will. The walk is iterative and
memoised per (value, index), so its cost is linear in the plan, whatever its depth.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from xdsl.ir import Operation, SSAValue

from fuser_dialect.types import BROADCAST
from fuser.lowering.codegen.emit_cuda import ACCESS_RULES
from fuser.lowering.codegen.index import ZERO, Ix, depends_only_on, loop_var, structural_key
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


def group_access(produced: dict[SSAValue, Operation], outputs: Sequence[SSAValue]) -> GroupAccess:
    rank = outputs[0].type.rank  # type: ignore[union-attr]
    domain = [loop_var(d) for d in range(rank)]
    last = rank - 1
    best, vector, vectorizable = 0, [], rank > 0
    for load in global_loads(produced, [(out, domain) for out in outputs]):
        if any(ix.local for ix in load.idx):
            vectorizable = False  # a position computed in the kernel may hide the innermost variable
            continue
        used = frozenset().union(*(ix.dims for ix in load.idx))
        prefix = min(used) if used else rank
        best = max(best, min(prefix, rank - 1))
        if last not in used:
            continue
        if load.idx[-1].exact != last or any(last in ix.dims for ix in load.idx[:-1]):
            vectorizable = False
        elif load.value not in vector:
            vector.append(load.value)
    return GroupAccess(max(best, 0), tuple(vector) if vectorizable else None, cone_ops(produced, outputs))


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
    invariant: tuple[tuple[SSAValue, tuple], ...]
    """Loads along the row that are the same for every row (weights): kept across rows."""

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


def row_access(plan: KernelPlan, online: dict, loads_only: bool = False) -> RowAccess:
    """`online`: max/sum pairs fused into one phase (only when the row is not in registers;
    a persistent kernel has every reduction in its own phase). `loads_only`: keep only global
    loads, recomputing what is computed from them (less storage per thread).

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
    invariant: dict[tuple, None] = {}
    for phase, roots in enumerate(_row_phase_roots(plan, online)):

        def visit(value, idx, conditional, op) -> bool:
            key = structural_key(idx)
            if key is None or conditional or depends_only_on(idx, kept):
                return True
            if depends_only_on(idx, reduced):
                if op is None:
                    invariant[(value, key)] = None
                return True
            if op is not None and loads_only:
                return True
            first = computed_in.setdefault((value, key), phase)
            if first < phase:
                lifetimes[(value, key)] = (first, phase)
                return False  # an earlier phase keeps it: read it back, do not recompute
            return True

        walk_reads(produced, [(v, domain) for v in roots], visit)
    kept_values = tuple(k for k in computed_in if k in lifetimes)
    return RowAccess(kept_values, lifetimes, tuple(invariant))


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


__all__ = ["GroupAccess", "KernelAnalysis", "Load", "RowAccess", "cone_ops", "global_loads", "walk_reads",
           "group_access", "row_access", "DROP", "FULL", "KEEP"]
