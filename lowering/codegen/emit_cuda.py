"""CUDA C emission: a pure function from (kernel plan, schedule) to source + parameters.

Every value of a kernel is an index expression: `emit(value, idx)` returns a C expression
for `value` at the multi-index `idx`, mapping `idx` through each op (broadcast drops dims,
permute reorders, reshape re-linearises, pad/cat branch, gather reads its index first)
down to global loads. Results are memoised per (value, index) within a C scope, so shared
sub-expressions are computed once.

Indices are typed (lowering/codegen/index.py): every choice about an access (hoist it, keep it in
registers, read it as a vector) reads what the index depends on, never the C it prints as.
Which loads several phases of a row kernel share comes from the kernel analysis
(lowering/codegen/analysis.py), before emission; emission only follows it.

Emission writes into a tree of line sections: a loop-invariant load or a register buffer is
declared in a section opened where it must live (before a loop), filled as emission meets it.

All global memory goes through the prelude's `fuser_ld` / `fuser_st`, which the CPU
backend counts. Extents, strides and runtime scalars are kernel parameters (`Param`), so a
kernel serves every batch size its schedule was chosen for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects import complex as complex_dialect
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Operation, SSAValue

from fuser_dialect import ops_compute as C
from fuser_dialect import ops_factory as F
from fuser_dialect import ops_gather as G
from fuser_dialect import ops_layout as L
from fuser_dialect import ops_random as RN
from fuser_dialect import ops_resize as R
from fuser_dialect import ops_scan as SC
from fuser_dialect import ops_scatter as SCAT
from fuser_dialect import ops_select as SE
from fuser_dialect import ops_set as ST
from fuser_dialect.extents import constant_value
from fuser_dialect.types import BROADCAST, DYNAMIC, TensorType, dtype_name
from fuser.lowering.codegen import cuda_exprs as X
from fuser.lowering.codegen.index import (ZERO, Ix, computed, depends_only_on, derived, gathered, lane_of, loop_var,
                                          shifted, structural_key, texts, without_lanes)
from fuser.lowering.codegen.kernel import KernelPlan


def _float_constant(v: SSAValue) -> float | None:
    """The value of a scalar operand defined by a float constant, else None."""
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr):
        return op.value.value.data
    return None


@dataclass(frozen=True)
class Param:
    """One kernel parameter and where its value comes from at launch.

    kind: "input"/"output" (tensor pointer), "stride"/"extent" (of `value` along `dim`),
    "scalar" (a runtime scalar SSA value), "slice_start" (normalised start of `op` along `dim`)."""

    name: str
    ctype: str
    kind: str
    value: SSAValue | None = None
    dim: int = -1
    op: Operation | None = None


@dataclass(frozen=True)
class EmittedKernel:
    name: str
    source: str
    params: tuple[Param, ...]
    schedule: object
    """The scheduler unit's schedule this source was rendered for."""
    needs_sync: bool
    shared_bytes: int = 0
    """Dynamic shared memory per block, given at launch."""


def _literal(attr) -> str:
    if isinstance(attr, FloatAttr):
        v = attr.value.data
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INFINITY" if v > 0 else "-INFINITY"
        return repr(float(v))
    assert isinstance(attr, IntegerAttr)
    return f"{attr.value.data}LL" if attr.type.width.data > 1 else ("true" if attr.value.data else "false")


@dataclass(frozen=True)
class EmitOptions:
    """What a kernel's emission depends on besides its plan and schedule (render() passes it)."""

    index_checks: bool = True
    """Gather/scatter indices are checked in the kernel (lowering/execution/index_errors.py)."""


class Section:
    """Lines opened at one place of the kernel and filled later (declarations, hoisted loads)."""

    def __init__(self, indent: int):
        self.indent = indent
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append("  " * self.indent + text)


@dataclass
class _Hoist:
    """Where loop-invariant loads go, and which domain dims their index may read."""

    section: Section
    memo_level: int
    allowed: frozenset[int]
    group: int = 0
    """Lanes that need the same value (a warp, or a row's lanes when several rows share a
    warp): the group's lane 0 loads it and a shuffle shares it. 0: every thread loads."""
    guard: str = ""
    """A condition the group's loading lane must also meet (its row exists)."""
    conditional: bool = False
    """Loads under cat pieces and pads' insides whose conditions read only `allowed` dims are
    hoisted too, predicated on them."""
    values: Section | None = None
    """Where arithmetic on hoisted loads is computed too, after them (None: loads only)."""
    predicated: list = field(default_factory=list)
    """The conditional loads made in `section`: (the load, the index of its line there)."""


@dataclass
class PhaseLoop:
    """The phase loop of a persistent row kernel being emitted: its loads may be kept in
    per-thread register arrays indexed by `slot`."""

    phase: int
    slot: str
    reduced: frozenset[int]


@dataclass(frozen=True)
class _Range:
    """Where a cat piece or a pad's inside lies along one dim: the index `at` (C text of an index
    that reads no value the body computes, so a load stage or a hoist section can evaluate it) in
    [low, high) (None: no bound that side). Two ranges on the same index (structural key) with
    static bounds that do not overlap never hold together."""

    key: object
    at: str
    dims: frozenset[int] = frozenset()
    """The loop variables `at` reads."""
    low: str | None = None
    high: str | None = None
    low_value: int | None = None
    high_value: int | None = None

    def text(self) -> str:
        bounds = ([f"{self.at} >= {self.low}"] if self.low is not None else []) + \
            ([f"{self.at} < {self.high}"] if self.high is not None else [])
        return " && ".join(bounds) or "true"


def _piece_range(ix: Ix, low: int | str | None, high: int | str | None) -> _Range | None:
    """`ix` in [low, high) (an int: static; a str: the C text of a launch constant), or None where
    `ix` reads a value the body computes (the load stage cannot evaluate it)."""
    if ix.local or ix.text is None:
        return None
    text = [None if b is None else f"{b}LL" if isinstance(b, int) else b for b in (low, high)]
    return _Range(ix.key, ix.text, ix.dims, text[0], text[1], low if isinstance(low, int) else None,
                  high if isinstance(high, int) else None)


def _condition_text(condition: tuple[_Range, ...]) -> str:
    return " && ".join(f"({r.text()})" for r in condition)


def _shared_load_operands(load: _StagedLoad) -> tuple[str, str]:
    """(where one of its users' conditions holds, "" when one has none; the offset of the user
    whose condition holds, a select) of a load shared by users whose conditions are disjoint."""
    conditions = [_condition_text(c) for c, _ in load.users]
    where = " || ".join(f"({c})" for c in conditions) if all(conditions) else ""
    offset = load.users[-1][1]
    for condition, (_, user_offset) in reversed(list(zip(conditions, load.users))[:-1]):
        offset = f"({condition}) ? ({user_offset}) : ({offset})"
    return where, offset


def _disjoint(a: tuple[_Range, ...], b: tuple[_Range, ...]) -> bool:
    """The two conditions never hold together (some index lies in non-overlapping static ranges)."""
    for x in a:
        for y in b:
            if x.key is None or x.key != y.key:
                continue
            if (x.high_value is not None and y.low_value is not None and x.high_value <= y.low_value) or \
                    (y.high_value is not None and x.low_value is not None and y.high_value <= x.low_value):
                return True
    return False


@dataclass
class _StagedLoad:
    """One load of a load stage: one array, read by every branch (cat piece, pad inside) that
    loads the same tensor where the others' conditions do not hold (`users`: (condition, element
    offset)): a thread issues one load at the offset of the branch it is in."""

    name: str
    value: SSAValue
    vec: int
    users: list[tuple[tuple[_Range, ...], str]] = field(default_factory=list)


@dataclass
class _LoadStage:
    """An unrolled loop whose global loads are all issued before any is used: its body is
    emitted once, and every load it meets outside a branch is made, instead, by a copy of the
    loop placed before it (the *load stage*), into an array indexed by the loop variable, each
    load predicated on the iteration's guard. The body then reads the arrays. In SASS the
    stage is a run of LDGs back to back; a load inline in the body waits where it is used, so
    an unroll there keeps one load a thread in flight (lowering/backends/sass.py).

    The body itself runs unguarded when it can (*predicated*): it then reads only the stage's
    arrays (out-of-range elements are T(), harmless to compute on), and only its effects, the
    accumulator updates and the stores (`effect`, `accumulate`), are predicated on the guard.
    A body under `if (guard)` would let ptxas sink each load into its branch, one at a time
    again. A body that makes a load of its own (at a computed position, in a pad or cat piece:
    `hazard`) must not run out of range, and stays under its guard."""

    section: Section
    """Where the load stage goes (before the body's loop)."""
    header: str
    """The loop's `for (...)` header, opened again for the stage."""
    slot: str
    """The loop variable (unrolled: the arrays' index is a constant after unrolling)."""
    count: int
    mark: int
    """Where the loop's preamble (the iteration's indices, copied into the stage) starts."""
    preamble: list[str] = field(default_factory=list)
    guard: str = ""
    decls: list[str] = field(default_factory=list)
    active: bool = False
    hazard: bool = False
    """The body loads from global memory itself: it runs under its guard."""
    opening: Section | None = None
    """The body's opening line(s): `if (guard) {`, or `{` and the guard as `fuser_in`."""
    effects: list[tuple[Section, str, str]] = field(default_factory=list)
    """(where, the line guarded, the line predicated) of each effect of the body."""
    staged: list[_StagedLoad] = field(default_factory=list)
    pipeline: StagePipeline | None = None


@dataclass(frozen=True)
class StagePipeline:
    """A staged loop whose stage loads the *next* step of the loop around it (`for (ctype step =
    start; ...; step += advance)`) while the body computes this one: the first step's loads are
    made before that loop (in `prologue`), and the arrays are handed on at the end of each step.
    The step's loads are then in flight together whatever ptxas does (a load it sinks below the
    body waits for the next step), at twice the stage's registers."""

    prologue: Section
    """Before the loop around the staged loop."""
    ctype: str
    step: str
    """The loop variable of the loop around it (the stage's preamble reads it)."""
    start: str
    advance: str


@dataclass
class _State:
    lines: list = field(default_factory=list)
    """str lines and Sections, in order."""
    indent: int = 1
    memo: list[dict] = field(default_factory=lambda: [{}])
    counter: int = 0
    cond_depth: int = 0
    uniform_depth: int = 0
    """Of the branches open (cond_depth), those every lane of a vector takes alike (a vector
    cat's pieces): vector accesses may be made inside them."""
    loop: PhaseLoop | None = None
    stage: _LoadStage | None = None
    branches: list[tuple[_Range, ...] | None] = field(default_factory=list)
    """The cat pieces and pads' insides open (of the `cond_depth` branches), innermost last: each
    one's condition with every enclosing one's, or None where one reads what only the body computes."""


class KernelEmitter:
    def __init__(self, plan: KernelPlan, schedule, reused: frozenset = frozenset(), options: EmitOptions = EmitOptions(),
                 row_storage=None):
        self.plan = plan
        self.schedule = schedule
        self.options = options
        self.produced = {op.results[0]: op for op in plan.ops}
        self.params: dict[tuple, Param] = {}
        self.s = _State()
        self.red_regs: dict[SSAValue, str] = {}
        self.reused = reused
        """(value, structural index) of the loads several phases read (lowering/codegen/analysis.py)."""
        self.buffers: dict[tuple, str] = {}  # (value, structural index) kept across phases -> its register array
        self.buffer_section: Section | None = None
        self.filled: set[tuple] = set()
        """(kept, vector lane) of the buffer elements a phase has written."""
        self.hoist: _Hoist | None = None
        self.in_hoist = False
        """Emitting a hoisted value (its own operands are emitted with it, in its section)."""
        self.hoisted_names: set[str] = set()
        """The values hoisted before a loop (hoisted_load): a gather at one of them is a loop constant."""
        self.vec = 1
        """Elements per vector access along the innermost dim (1 = scalar): a loop that walks it
        VEC at a time gives each element's index a `lane` (index.vector_lane)."""
        self.lanes: list[Ix] = []
        """The vector lanes of the innermost dim in the current vectorised loop (lane 0 first)."""
        self.needs_sync = False
        self.row_storage = row_storage
        """A persistent row's kept values in shared memory (rows.SharedRowStorage), else None:
        per-thread register arrays."""

    # -- output helpers -------------------------------------------------------------
    def line(self, text: str) -> None:
        self.s.lines.append("  " * self.s.indent + text)

    def open(self, header: str) -> None:
        self.line(header + " {")
        self.s.indent += 1
        self.s.memo.append({})

    def close(self) -> None:
        self.s.memo.pop()
        self.s.indent -= 1
        self.line("}")

    def section(self) -> Section:
        """A place here to declare things later (before the loop about to be opened)."""
        sec = Section(self.s.indent)
        self.s.lines.append(sec)
        return sec

    def text(self) -> list[str]:
        out: list[str] = []
        for item in self.s.lines:
            if isinstance(item, Section):
                out += item.lines
            else:
                out.append(item)
        return out

    def tmp(self, ctype: str, expr: str, prefix: str = "t") -> str:
        self.s.counter += 1
        name = f"{prefix}{self.s.counter}"
        self.line(f"const {ctype} {name} = {expr};")
        return name

    # -- parameters ----------------------------------------------------------------
    def param(self, key: tuple, ctype: str, kind: str, prefix: str, **where) -> str:
        if key not in self.params:
            self.params[key] = Param(f"{prefix}{len(self.params)}", ctype, kind, **where)
        return self.params[key].name

    def tensor_ptr(self, v: SSAValue, output: bool) -> str:
        t = v.type
        assert isinstance(t, TensorType)
        ctype = X.STORAGE_TYPE[t.dtype] + ("* __restrict__" if output else " const* __restrict__")
        kind = "output" if output else "input"
        return self.param((kind, v), ctype, kind, "out" if output else "in", value=v)

    def extent(self, v: SSAValue, d: int) -> str:
        t = v.type
        assert isinstance(t, TensorType)
        e = t.shape[d]
        if e == BROADCAST:
            return "1LL"
        if e != DYNAMIC:
            return f"{e}LL"
        return self.param(("extent", v, d), "long long", "extent", "ext", value=v, dim=d)

    def stride(self, v: SSAValue, d: int) -> str:
        return self.param(("stride", v, d), "long long", "stride", "st", value=v, dim=d)

    def scalar(self, v: SSAValue, ctype: str | None = None) -> str:
        op = v.owner
        if isinstance(op, arith.ConstantOp):
            text = _literal(op.value)
        elif isinstance(op, complex_dialect.ConstantOp):  # a complex Scalar constant's fill value
            text = f"fuser_complex<double>({', '.join(_literal(part) for part in op.value.data)})"
        else:
            own = X.COMPUTE_TYPE[dtype_name(v.type)]
            text = self.param(("scalar", v), own, "scalar", "sc", value=v)
        return f"(({ctype}){text})" if ctype else text

    def mixed_int(self, value: int | SSAValue) -> str:
        return self.scalar(value) if isinstance(value, SSAValue) else f"{value}LL"

    # -- values -------------------------------------------------------------------------
    def emit(self, v: SSAValue, idx: Sequence[Ix]) -> str:
        """C expression of `v` at `idx`. Emitters are generators that yield the (operand,
        index) pairs they need and receive their expressions: this loop drives them with an
        explicit stack, so a chain of any length never nests Python frames."""
        found = self._known(v, idx)
        if isinstance(found, str):
            return found
        stack = [found]
        sent: str | None = None
        while True:
            key, work = stack[-1]
            try:
                request = work.send(sent)
            except StopIteration as done:
                stack.pop()
                expr = self._computed(key, done.value)
                if not stack:
                    return expr
                sent = expr
                continue
            found = self._known(*request)
            if isinstance(found, str):
                sent = found
            else:
                stack.append(found)
                sent = None

    def _known(self, v: SSAValue, idx: Sequence[Ix]):
        """The expression of `v` at `idx` if it needs no further operands (memoised, kept in a
        row buffer by an earlier phase, a load, a leaf op), else (memo key, the running
        emitter of its op)."""
        t = v.type
        assert isinstance(t, TensorType), v
        idx = tuple(ZERO if e == BROADCAST else i for e, i in zip(t.shape, idx))
        key = (v, idx)
        for scope in reversed(self.s.memo):
            if key in scope:
                return scope[key]
        op = self.produced.get(v)
        if op is None:
            expr = self.load(v, idx)
            self.s.memo[-1][key] = expr
            return expr
        kept = self._row_buffer(v, idx)
        if kept is not None and (kept, lane_of(idx)) in self.filled:
            expr = self.tmp(X.COMPUTE_TYPE[t.dtype], self.slot_element(self.buffers[kept], idx), "v")
            self.s.memo[-1][key] = expr
            return expr
        hoisted = self._hoisted_value_key(op, idx)
        if hoisted is not None:
            found = self.s.memo[self.hoist.memo_level].get(hoisted)  # type: ignore[union-attr]
            if found is not None:
                self.s.memo[-1][key] = found
                return found
            return key, self._hoisted_value(hoisted, op, idx)
        expr = self.emit_op(op, idx)
        if isinstance(expr, str):
            return self._computed(key, expr)
        return key, expr

    def _hoisted_value_key(self, op: Operation, idx: tuple[Ix, ...]) -> tuple | None:
        """Where the hoist computes values too (`_Hoist.values`): the memo key of op's value at
        `idx` computed there, before the loop, when it is arithmetic on an index that reads only
        the hoist's dims (a RoPE table's cos and sin), under no branch or under branches whose
        conditions read only those dims (its loads are then predicated on them; the arithmetic on
        the zeros they give elsewhere is harmless, and in a kernel with gathers not done)."""
        h = self.hoist
        if h is None or h.values is None or self.in_hoist or not isinstance(op, HOISTED_VALUE_OPS):
            return None
        condition = self._hoist_condition(idx)
        if condition is None or (condition and any(isinstance(o, INDEX_OPS) for o in self.plan.ops)):
            return None
        return ("hoisted value", op.results[0], idx, _condition_text(condition))

    def _hoisted_value(self, hoisted: tuple, op: Operation, idx: tuple[Ix, ...]):
        """Emits op's value at idx in the hoist's value section (see `_hoisted_value_key`)."""
        h = self.hoist
        assert h is not None and h.values is not None
        saved = (self.s.lines, self.s.indent, self.s.memo, self.s.stage)
        self.s.lines, self.s.indent = h.values.lines, h.values.indent  # type: ignore[assignment]
        self.s.memo = self.s.memo[:h.memo_level + 1]
        self.s.stage, self.in_hoist = None, True
        try:
            work = self.emit_op(op, idx)
            expr = work if isinstance(work, str) else (yield from work)
            self.s.memo[-1][hoisted] = expr
        finally:
            self.s.lines, self.s.indent, self.s.memo, self.s.stage = saved
            self.in_hoist = False
        self.hoisted_names.add(expr)
        return expr

    def _computed(self, key: tuple, expr: str) -> str:
        """Memoises a computed value; the first phase that computes a value later phases read
        keeps it in its row buffer."""
        self.s.memo[-1][key] = expr
        kept = self._row_buffer(*key)
        if kept is not None and (kept, lane_of(key[1])) not in self.filled:
            self.filled.add((kept, lane_of(key[1])))
            self.line(f"{self.slot_element(self.row_buffer_name(kept, key[0]), key[1])} = {expr};")
        return expr

    def _row_buffer(self, v: SSAValue, idx: tuple[Ix, ...]) -> tuple | None:
        """(v, structural index) when this access is one the kernel analysis keeps in a
        per-thread register array across phases (a persistent row, outside any branch)."""
        if self.s.loop is None or self.s.cond_depth or not self.reused:
            return None
        kept = (v, structural_key(without_lanes(idx)))
        return kept if kept in self.reused else None

    def row_buffer_name(self, kept: tuple, v: SSAValue) -> str:
        if kept not in self.buffers:
            assert self.buffer_section is not None, "a persistent row opens its buffer section first"
            name = self.buffers[kept] = f"buf{len(self.buffers)}"
            ctype = (X.STORAGE_TYPE if self._kept_as_loaded(v) else X.COMPUTE_TYPE)[v.type.dtype]  # type: ignore[union-attr]
            if self.row_storage is None:
                self.buffer_section.line(f"{ctype} {name}[{self.schedule.iters * self.vec}];")
            else:
                self.buffer_section.line(self.row_storage.declare(name, ctype, self.row_storage.slot_of[kept]))
        return self.buffers[kept]

    def _kept_as_loaded(self, v: SSAValue) -> bool:
        """A shared-memory row keeps this load in its storage type (rows.storage.kept_as_loaded)."""
        return self.row_storage is not None and self.row_storage.keeps_as_loaded(v)

    def _kept_load_write(self, buf: str, v: SSAValue, idx: tuple[Ix, ...]) -> None:
        """`buf` = v's element at idx, as loaded when kept so, else in its compute type."""
        value = self.raw_load(v, idx)
        if self._kept_as_loaded(v):
            value = X.store_expr(value, v.type.dtype)  # type: ignore[union-attr]  (exact: a loaded value)
        self.line(f"{buf} = {value};")

    def slot_element(self, array: str, idx: Sequence[Ix]) -> str:
        """This thread's element of a kept row array in the current phase loop iteration, at
        the vector lane `idx` is at (slot k holds lanes k * VEC .. k * VEC + VEC - 1)."""
        slot = self.s.loop.slot  # type: ignore[union-attr]
        if self.vec > 1:
            slot = f"{slot} * {self.vec} + {lane_of(idx)}"
        return f"{array}[{slot}]" if self.row_storage is None else self.row_storage.element(array, slot)

    def offset(self, v: SSAValue, idx: Sequence[Ix]) -> str:
        t = v.type
        assert isinstance(t, TensorType)
        terms = [f"({i}) * {self.stride(v, d)}" for d, (e, i) in enumerate(zip(t.shape, texts(idx))) if e != BROADCAST]
        return " + ".join(terms) or "0"

    def load(self, v: SSAValue, idx: tuple[Ix, ...]) -> str:
        """A global load of `v` at `idx`, placed by what the index depends on: hoisted before
        the loop (its index reads only outer loop variables), kept in a row buffer for later
        phases (the kernel analysis says which), or read here; read as one lane of a vector
        access when the index is a vector lane of v's innermost dim."""
        dtype = v.type.dtype  # type: ignore[union-attr]
        ctype = X.COMPUTE_TYPE[dtype]
        condition = self._hoist_condition(idx)
        if condition is not None:
            lane = idx[-1].lane if idx else None
            uniform = self.s.cond_depth == self.s.uniform_depth
            if self.vec > 1 and uniform and lane is not None and v.type.shape[-1] != BROADCAST:  # type: ignore[union-attr]
                raw = X.load_expr(f"{self.vector_load(v, idx, hoisted=True, condition=condition)}[{lane}]", dtype)
            elif condition:
                return self._predicated_hoisted_load(v, idx, condition, 1)
            else:
                raw = X.load_expr(f"fuser_ld({self.tensor_ptr(v, False)}, {self.offset(v, idx)})", dtype)
            return self.hoisted_load((v, idx) + ((_condition_text(condition),) if condition else ()), ctype, raw)
        kept = self._row_buffer(v, idx)
        if kept is None:
            return self.tmp(ctype, self.raw_load(v, idx), "v")
        buf = self.slot_element(self.row_buffer_name(kept, v), idx)
        if (kept, lane_of(idx)) not in self.filled:
            self.filled.add((kept, lane_of(idx)))
            self._kept_load_write(buf, v, idx)
        return self.tmp(ctype, X.load_expr(buf, dtype) if self._kept_as_loaded(v) else buf, "v")

    def _hoist_condition(self, idx: Sequence[Ix]) -> tuple[_Range, ...] | None:
        """Where a load at `idx` here may be made before the loop (its index reads only the
        hoist's dims): () under no branch, the branches' condition where the hoist takes
        conditional loads and the condition reads only those dims; None: not hoisted."""
        h = self.hoist
        if h is None or not depends_only_on(idx, h.allowed):
            return None
        if not self.s.cond_depth:
            return ()
        condition = self._condition() if h.conditional else None
        if not condition or any(not r.dims <= h.allowed for r in condition):
            return None
        return condition

    def prefetch(self, v: SSAValue, idx: tuple[Ix, ...]) -> None:
        """Loads `v` at `idx` into its row buffer now (a persistent row's first phase loading
        what later phases read), without using it here."""
        idx = tuple(ZERO if e == BROADCAST else i for e, i in zip(v.type.shape, idx))  # type: ignore[union-attr]
        kept = self._row_buffer(v, idx)
        assert kept is not None, "only kept loads are prefetched"
        if (kept, lane_of(idx)) not in self.filled:
            self.filled.add((kept, lane_of(idx)))
            self._kept_load_write(self.slot_element(self.row_buffer_name(kept, v), idx), v, idx)

    def raw_load(self, v: SSAValue, idx: tuple[Ix, ...]) -> str:
        """The compute-type expression of v's element at idx, straight from global memory (a
        lane of a vector access when the loop is vectorised and idx is a lane of v's innermost dim)."""
        dtype = v.type.dtype  # type: ignore[union-attr]
        lane = idx[-1].lane if idx else None
        uniform = self.s.cond_depth == self.s.uniform_depth
        if self.vec > 1 and uniform and lane is not None and v.type.shape[-1] != BROADCAST:  # type: ignore[union-attr]
            return X.load_expr(f"{self.vector_load(v, idx)}[{lane}]", dtype)
        if self._stageable(idx):
            return X.load_expr(self.staged_load(v, idx, 1), dtype)
        self._mark_hazard()
        return X.load_expr(f"fuser_ld({self.tensor_ptr(v, False)}, {self.offset(v, idx)})", dtype)

    def _mark_hazard(self) -> None:
        """A global load made in a staged loop's body itself: the body keeps its guard."""
        if self.s.stage is not None and self.s.stage.active:
            self.s.stage.hazard = True

    def _stageable(self, idx: Sequence[Ix]) -> bool:
        """A load here may move to the load stage: one is open, the load is under no branch of
        the body but those whose condition the stage can compute (cat pieces, pads' insides: the
        stage predicates the load on it) and its index reads no value the body computes."""
        stage = self.s.stage
        if stage is None or not stage.active or any(ix.local for ix in idx):
            return False
        return self._condition() is not None

    def _condition(self) -> tuple[_Range, ...] | None:
        """Where the branches open here hold: () under none, None where one is not known (its
        condition reads a value the body computes, or it is a scatter's loop)."""
        branches = self.s.branches
        if self.s.cond_depth != len(branches):
            return None
        return branches[-1] if branches else ()

    def _open_branch(self, ranges: Sequence[_Range | None]) -> None:
        """A branch (a cat piece, a pad's inside) where `ranges` hold opens: loads under it may be
        staged or hoisted, predicated on it, where every range is known."""
        outer = self._condition()
        known = outer is not None and None not in ranges
        self.s.branches.append(outer + tuple(ranges) if known else None)  # type: ignore[operator]
        self.s.cond_depth += 1

    def _close_branch(self) -> None:
        self.s.branches.pop()
        self.s.cond_depth -= 1

    def staged_load(self, v: SSAValue, idx: Sequence[Ix], vec: int) -> str:
        """v at idx (VEC elements from there when vec > 1), loaded by the load stage: the name of
        this iteration's element (vec == 1) or array (vec > 1). Under a branch (a cat's piece, a
        pad's inside), a load of the same tensor made for branches that never hold together with
        this one is reused: one load at the offset of the branch that holds (a select), so a
        thread issues one load for a cat, or for the two halves of a rotation, not one per piece."""
        stage = self.s.stage
        assert stage is not None
        offset = self.offset(v, idx)
        condition = self._condition() or ()
        if condition:
            for load in stage.staged:
                if load.value is v and load.vec == vec and all(c and _disjoint(c, condition) for c, _ in load.users):
                    load.users.append((condition, offset))
                    return f"{load.name}[{stage.slot}]"
        self.s.counter += 1
        load = _StagedLoad(f"pl{self.s.counter}", v, vec, [(condition, offset)])
        stage.staged.append(load)
        stage.decls.append(self._stage_array(stage, load, "") + ";")
        return f"{load.name}[{stage.slot}]"

    def _stage_load_line(self, stage: _LoadStage, load: _StagedLoad, suffix: str = "") -> str:
        """The load stage's line for one staged load: made where the iteration's guard holds and
        (read under branches only) one of its branches holds, at that branch's offset."""
        ptr = self.tensor_ptr(load.value, False)
        where, offset = _shared_load_operands(load)
        ok = f"fuser_in && ({where})" if where else "fuser_in"
        if load.vec > 1:
            return f"fuser_ld_vec_if<{load.vec}>({ok}, {ptr}, {offset}, {load.name}{suffix}[{stage.slot}]);"
        return f"{load.name}{suffix}[{stage.slot}] = fuser_ld_if({ok}, {ptr}, {offset});"

    def vector_load(self, v: SSAValue, idx: tuple[Ix, ...], hoisted: bool = False,
                    condition: tuple[_Range, ...] = ()) -> str:
        """The array holding VEC consecutive elements of v's innermost dim from lane 0's index:
        one access, made when lane 0 is met in this C scope (lanes are emitted in order), or in
        the hoist section when `hoisted` (predicated on `condition` there), and read by every lane."""
        key = ("vector", v, idx[:-1], idx[-1].offset) + ((_condition_text(condition),) if condition else ())
        scopes = self.s.memo[:self.hoist.memo_level + 1] if hoisted and self.hoist else self.s.memo
        for scope in reversed(scopes):
            if key in scope:
                return scope[key]
        assert idx[-1].lane == 0, "a vector access is made at its lane 0"
        if not hoisted and self._stageable(idx) and self.s.cond_depth == self.s.uniform_depth:
            name = self.staged_load(v, idx, self.vec)
            scopes[-1][key] = name
            return name
        if hoisted and condition:
            name = self._predicated_hoisted_load(v, idx, condition, self.vec)
            scopes[-1][key] = name
            return name
        if not hoisted:
            self._mark_hazard()
        self.s.counter += 1
        name = f"vl{self.s.counter}"
        storage = X.STORAGE_TYPE[v.type.dtype]  # type: ignore[union-attr]
        ptr = self.tensor_ptr(v, False)
        write = self.hoist.section.line if hoisted and self.hoist else self.line
        write(f"{storage} {name}[{self.vec}];")
        write(f"fuser_ld_vec<{self.vec}>({ptr}, {self.offset(v, idx)}, {name});")
        scopes[-1][key] = name
        return name

    def stage(self, out: SSAValue, vec: int) -> str:
        self.s.counter += 1
        name = f"so{self.s.counter}"
        self.line(f"{X.STORAGE_TYPE[out.type.dtype]} {name}[{vec}];")  # type: ignore[union-attr]
        return name

    def stage_value(self, out: SSAValue, staged: str, lane: int, idx: Sequence[Ix]) -> None:
        value = self.emit(out, idx)
        self.line(f"{staged}[{lane}] = {X.store_expr(value, out.type.dtype)};")  # type: ignore[union-attr]

    def store_vector(self, out: SSAValue, staged: str, idx: Sequence[Ix], vec: int) -> None:
        ptr = self.tensor_ptr(out, True)
        offset = self.offset(out, tuple(ZERO if e == BROADCAST else i for e, i in zip(out.type.shape, idx)))
        self.effect(f"fuser_st_vec<{vec}>({ptr}, {offset}, {staged});")

    # -- what a scheduler's loop nest tells the emitter --------------------------------------
    def use_vector_lanes(self, lanes: Sequence[Ix]) -> None:
        """The loop being emitted walks the innermost dim VEC = len(lanes) elements at a time;
        `lanes` are their indices (index.vector_lane), lane 0 first."""
        self.vec = len(lanes)
        self.lanes = list(lanes)

    def end_vector_lanes(self) -> None:
        self.vec, self.lanes = 1, []

    def open_staged_loop(self, slot: str, count: int, header: str, pipeline: StagePipeline | None = None) -> None:
        """Opens `#pragma unroll` + `header` (a loop over `slot` from 0 to `count`, which a full
        unroll makes constant) whose loads will be issued by a load stage before it (see
        _LoadStage; with `pipeline`, the next step's: StagePipeline). The caller then emits the
        iteration's preamble (its indices, no loads) and calls `guard_staged`."""
        assert self.s.stage is None, "load stages do not nest"
        section = self.section()
        self.line("#pragma unroll")
        self.open(header)
        self.s.stage = _LoadStage(section, header, slot, count, len(self.s.lines), pipeline=pipeline)

    def guard_staged(self, guard: str) -> None:
        """The iteration's preamble is complete: opens `if (guard)` (the iteration's elements
        exist) around the body, whose loads go to the stage from here on."""
        stage = self.s.stage
        assert stage is not None
        preamble = self.s.lines[stage.mark:]
        stage.preamble = [line for line in preamble if isinstance(line, str)]
        stage.active = len(stage.preamble) == len(preamble)  # a section there: leave its loads in place
        stage.guard = guard
        stage.opening = self.section()
        self.s.indent += 1
        self.s.memo.append({})

    def effect(self, line: str, predicated: str | None = None) -> None:
        """A statement with an effect beyond the iteration's registers (a store, an update of
        running statistics): in a predicated staged body made only where the guard holds
        (`predicated`, by default the line under `if (fuser_in)`)."""
        stage = self.s.stage
        if stage is None or not stage.active:
            self.line(line)
            return
        sec = self.section()
        stage.effects.append((sec, line, predicated or f"if (fuser_in) {{ {line} }}"))

    def accumulate(self, target: str, expr: str) -> None:
        """`target = expr;`, a running value's update: a select in a predicated staged body
        (no branch: the body's loads stay ahead of it)."""
        self.effect(f"{target} = {expr};", f"{target} = fuser_in ? ({expr}) : {target};")

    def close_staged(self) -> None:
        """Closes the body's `if` and loop; writes the load stage before the loop."""
        stage = self.s.stage
        assert stage is not None and stage.opening is not None
        self.close()
        self.close()
        self.s.stage = None
        predicated = stage.active and not stage.hazard
        opening = stage.opening
        if predicated:
            opening.line("{")
            opening.line(f"  const bool fuser_in = {stage.guard};")
        else:
            opening.line(f"if ({stage.guard}) {{")
        for sec, guarded, when_predicated in stage.effects:
            sec.line(when_predicated if predicated else guarded)
        if not stage.staged:
            return
        pipe = stage.pipeline
        if pipe is None:
            for decl in stage.decls:
                stage.section.line(decl)
            self._write_stage(stage, stage.section, "")
            return
        for decl in stage.decls:
            pipe.prologue.line(decl)
        pipe.prologue.line("{")
        pipe.prologue.line(f"  const {pipe.ctype} {pipe.step} = {pipe.start};")
        self._write_stage(stage, pipe.prologue, "")
        pipe.prologue.line("}")
        sec = stage.section
        for load in stage.staged:
            sec.line(self._stage_array(stage, load, "_next") + ";")
        sec.line(f"const {pipe.ctype} {pipe.step}_next = {pipe.step} + {pipe.advance};")
        sec.line("{")
        sec.line(f"  const {pipe.ctype} {pipe.step} = {pipe.step}_next;")
        self._write_stage(stage, sec, "_next")
        sec.line("}")
        self.line("#pragma unroll")
        self.open(f"for (int fuser_k = 0; fuser_k < {stage.count}; ++fuser_k)")
        for load in stage.staged:  # the next step's loads are this step's arrays now
            if load.vec > 1:
                self.line(f"for (int fuser_j = 0; fuser_j < {load.vec}; ++fuser_j) "
                          f"{load.name}[fuser_k][fuser_j] = {load.name}_next[fuser_k][fuser_j];")
            else:
                self.line(f"{load.name}[fuser_k] = {load.name}_next[fuser_k];")
        self.close()

    def _stage_array(self, stage: _LoadStage, load: _StagedLoad, suffix: str) -> str:
        storage = X.STORAGE_TYPE[load.value.type.dtype]  # type: ignore[union-attr]
        return f"{storage} {load.name}{suffix}[{stage.count}]" + (f"[{load.vec}]" if load.vec > 1 else "")

    def _write_stage(self, stage: _LoadStage, sec: Section, suffix: str) -> None:
        """The load stage's loop in `sec`, loading into the arrays named with `suffix`."""
        sec.line("#pragma unroll")
        sec.line(stage.header + " {")
        sec.lines += stage.preamble
        inner = Section(sec.indent + 1)
        inner.line(f"const bool fuser_in = {stage.guard};")
        for load in stage.staged:
            inner.line(self._stage_load_line(stage, load, suffix))
        sec.lines += inner.lines
        sec.line("}")

    def enter_phase_loop(self, loop: PhaseLoop) -> None:
        """A persistent row's phase loop opens: its loads may be kept in row buffers."""
        self.s.loop = loop

    def leave_phase_loop(self) -> None:
        self.s.loop = None

    def open_row_buffers(self) -> None:
        """Here (before a row's phase loops) the row buffers are declared."""
        self.buffer_section = self.section()

    def define_result(self, value: SSAValue, name: str) -> None:
        """`value` (a reduction or scan result) is the C variable `name` from here on."""
        self.red_regs[value] = name

    def require_sync(self) -> None:
        """The kernel uses barriers or warp shuffles (the cpu backend runs its threads as fibers)."""
        self.needs_sync = True

    def stop_hoisting(self) -> None:
        self.hoist = None

    def hoist_here(self, allowed: set[int] | frozenset[int], group: int = 0, guard: str = "",
                   conditional: bool = False, values: bool = False) -> None:
        """Loads emitted later whose index reads only the loop variables of `allowed` dims go
        here, before the loop about to be opened (pointwise outer loop, reduction phase loops).
        group > 1: lanes 0, group, 2 * group, ... load (when `guard` holds) and share by shuffle.
        conditional: also those under cat pieces and pads whose conditions read only those dims
        (a RoPE table's halves), each predicated on its condition. values: the arithmetic on
        such loads too (`_hoisted_value_key`), computed once per thread, not per iteration."""
        loads = self.section()
        self.hoist = _Hoist(loads, len(self.s.memo) - 1, frozenset(allowed), group, guard, conditional,
                            self.section() if values else None)

    def _predicated_hoisted_load(self, v: SSAValue, idx: Sequence[Ix], condition: tuple[_Range, ...], vec: int) -> str:
        """v at idx (VEC elements from there when vec > 1) loaded in the hoist section where
        `condition` holds: the name of the value (vec == 1, in the compute type) or of the array.
        A load of the same tensor made there for conditions that never hold together with this
        one is reused (its line rewritten: one load at the offset of the condition that holds)."""
        h = self.hoist
        assert h is not None
        scope = self.s.memo[h.memo_level]
        key = ("predicated", v, tuple(idx), _condition_text(condition), vec)
        if key in scope:
            return scope[key]
        offset = self.offset(v, idx)
        for load, line in h.predicated:
            if load.value is v and load.vec == vec and all(_disjoint(c, condition) for c, _ in load.users):
                load.users.append((condition, offset))
                h.section.lines[line] = self._predicated_hoist_line(h, load)
                scope[key] = load.name
                return load.name
        self.s.counter += 1
        load = _StagedLoad(f"{'vl' if vec > 1 else 'h'}{self.s.counter}", v, vec, [(condition, offset)])
        if vec > 1:
            h.section.line(f"{X.STORAGE_TYPE[v.type.dtype]} {load.name}[{vec}];")  # type: ignore[union-attr]
        h.predicated.append((load, len(h.section.lines)))
        h.section.line(self._predicated_hoist_line(h, load))
        scope[key] = load.name
        if vec == 1:
            self.hoisted_names.add(load.name)
        return load.name

    def _predicated_hoist_line(self, h: _Hoist, load: _StagedLoad) -> str:
        where, offset = _shared_load_operands(load)
        ptr = self.tensor_ptr(load.value, False)
        indent = "  " * h.section.indent
        if load.vec > 1:
            return f"{indent}fuser_ld_vec_if<{load.vec}>({where}, {ptr}, {offset}, {load.name});"
        dtype = load.value.type.dtype  # type: ignore[union-attr]
        value = X.load_expr(f"fuser_ld_if({where}, {ptr}, {offset})", dtype)
        return f"{indent}const {X.COMPUTE_TYPE[dtype]} {load.name} = {value};"

    def hoisted_load(self, key: tuple, ctype: str, raw: str) -> str:
        h = self.hoist
        assert h is not None
        scope = self.s.memo[h.memo_level]
        if key not in scope:
            self.s.counter += 1
            name = f"h{self.s.counter}"
            conditions = [f"(threadIdx.x & {h.group - 1}) == 0"] if h.group > 1 else []
            conditions += [h.guard] if h.guard else []
            if conditions:
                raw = f"({' && '.join(conditions)}) ? ({ctype})({raw}) : ({ctype})0"
            if h.group > 1:
                raw = f"fuser_lane0<{h.group}>({raw})"
            h.section.line(f"const {ctype} {name} = {raw};")
            scope[key] = name
            self.hoisted_names.add(name)
        return scope[key]

    def emit_op(self, op: Operation, idx: tuple[Ix, ...]):
        """The op's expression (str), or a generator yielding (operand, index) requests and
        returning it (see `emit`)."""
        handler = EMITTERS.get(type(op))
        if handler is None:
            raise NotImplementedError(f"CUDA emission of {op.name} is not implemented")
        return handler(self, op, idx)

    # elementwise
    def op_UnaryOp(self, op: C.UnaryOp, idx):
        src, dst = op.input.type.dtype, op.result.type.dtype
        x = yield op.input, idx
        expr = X.unary_expr(op.op_kind, x, src)
        return self.tmp(X.COMPUTE_TYPE[dst], expr if dst == "i1" else X.round_expr(expr, dst))

    def _operand(self, v: SSAValue, idx, dtype: str):
        if isinstance(v.type, TensorType):
            return (yield v, idx)
        return self.scalar(v, X.COMPUTE_TYPE[dtype])

    def op_BinaryOp(self, op: C.BinaryOp, idx):
        dtype = next(v.type.dtype for v in op.operands if isinstance(v.type, TensorType))
        a = yield from self._operand(op.lhs, idx, dtype)
        b = yield from self._operand(op.rhs, idx, dtype)
        dst = op.result.type.dtype
        exponent = _float_constant(op.rhs) if op.op_kind == C.BinaryKind.POW else None
        expr = exponent is not None and X.pow_by_constant(a, exponent, dtype) or X.binary_expr(op.op_kind, a, b, dtype)
        return self.tmp(X.COMPUTE_TYPE[dst], expr if dst == "i1" else X.round_expr(expr, dst))

    def op_WhereOp(self, op: C.WhereOp, idx):
        dtype = op.result.type.dtype
        cond = yield from self._operand(op.cond, idx, "i1")
        a = yield from self._operand(op.lhs, idx, dtype)
        b = yield from self._operand(op.rhs, idx, dtype)
        t = X.COMPUTE_TYPE[dtype]
        return self.tmp(t, f"({cond} ? ({t}){a} : ({t}){b})")

    def op_CastOp(self, op: C.CastOp, idx):
        src, dst = op.input.type.dtype, op.result.type.dtype
        return self.tmp(X.COMPUTE_TYPE[dst], X.convert_expr((yield op.input, idx), src, dst))

    def op_ReductionOp(self, op: C.ReductionOp, idx):
        if op.result not in self.red_regs:
            raise NotImplementedError(f"{op.name} read before its phase (segmentation bug)")
        return self.red_regs[op.result]

    # layout
    def op_layout(self, op, idx):
        """broadcast, broadcast_in_dim, squeeze, expand, permute: a pure remapping of the index,
        which the op's access rule (ACCESS_RULES, what the kernel analysis walks) states once."""
        (read,) = ACCESS_RULES[type(op)](op, idx)
        return (yield read.operand, read.idx)

    def op_ReshapeOp(self, op: L.ReshapeOp, idx):
        """The trailing dims that split or merge dims of static extents (reshape_groups) read the
        input at an index written inline (`(i1) * 64LL + (i2)`, `(i1) / 64LL`); the dims before
        them re-linearised: once for every lane of a vector (memoised by their indices), and
        before the loop when they read only its outer variables (then a loop constant to the
        loop's loads, like a gathered row)."""
        out, inp = op.result, op.input
        out_heads, heads, groups = reshape_groups(op)
        head, tail = idx[:out_heads], _regrouped(op, idx, groups, True)
        if not heads:
            return (yield inp, tail)
        key = ("reshape", op, tuple(ix.text for ix in head))
        h = self.hoist
        hoisted = h is not None and not self.s.cond_depth and depends_only_on(head, h.allowed)
        scopes = self.s.memo[:h.memo_level + 1] if hoisted else self.s.memo
        found = next((scope[key] for scope in reversed(scopes) if key in scope), None)
        if found is None:
            write = h.section.line if hoisted else self.line
            linear = "0"
            for d in range(out_heads):
                linear = f"(({linear}) * {self.extent(out, d)} + ({head[d].text}))"
            self.s.counter += 1
            lin = f"l{self.s.counter}"
            write(f"const long long {lin} = {linear};")
            names = []
            for d in reversed(range(heads)):
                e = self.extent(inp, d)
                self.s.counter += 1
                name, rest = f"j{self.s.counter}", f"l{self.s.counter}"
                write(f"const long long {name} = {lin} % {e};")
                write(f"const long long {rest} = {lin} / {e};")
                names.append(name)
                lin = rest
            found = scopes[-1][key] = tuple(reversed(names))
        place = (lambda n: gathered(head, ("reshape", op, structural_key(head), n), n)) if hoisted else \
            (lambda n: computed(head, n))
        return (yield inp, tuple(place(n) for n in found) + tail)

    def op_SliceOp(self, op: R.SliceOp, idx):
        steps = op.steps.get_values()
        src = []
        for d, step in enumerate(steps):
            start = self.param(("slice_start", op, d), "long long", "slice_start", "ss", op=op, dim=d)
            text = f"({start} + ({idx[d].text}) * {step}LL)" if step != 1 else f"({start} + ({idx[d].text}))"
            src.append(shifted(idx[d], ("slice", op, d, step), text, static_slice_start(op, d)))
        return (yield op.input, src)

    def op_PadOp(self, op: R.PadOp, idx):
        """The input where the index lies inside it, else the pad value: a branch whose condition
        (the index in [left, left + extent) along each padded dim) is written on the index itself,
        so a load stage can predicate the input's loads on it."""
        if self._vector_pad_dim(op, idx) is not None:
            return (yield from self._vector_pad(op, idx))
        dtype = op.result.type.dtype
        t = X.COMPUTE_TYPE[dtype]
        widths = op.mixed_widths
        src, conds, ranges = [], [], []
        for d in range(op.input.type.rank):
            left = widths[2 * d]
            if left == 0 and widths[2 * d + 1] == 0:
                src.append(idx[d])
                continue
            low, extent = self.mixed_int(left), self.extent(op.input, d)
            src.append(shifted(idx[d], ("pad", op, d), f"(({idx[d].text}) - {low})", _static_pad_shift(op, d)))
            static_extent = op.input.type.static_extent(d)
            static = isinstance(left, int) and static_extent is not None
            ranges.append(_piece_range(idx[d], left if isinstance(left, int) else low,
                                       left + static_extent if static else f"({low} + {extent})"))
            conds.append(f"(({idx[d].text}) >= {low} && ({idx[d].text}) < {low} + {extent})")
        fill = self.scalar(op.value, t)
        if not conds:
            return (yield op.input, src)
        self.s.counter += 1
        name = f"p{self.s.counter}"
        self.line(f"{t} {name} = {fill};")
        self._open_branch(ranges)
        self.open(f"if ({' && '.join(conds)})")
        value = yield op.input, src
        self.line(f"{name} = {value};")
        self.close()
        self._close_branch()
        return name

    def _vector_pad_dim(self, op: R.PadOp, idx) -> int | None:
        """The dim of a pad along the vectorised innermost dim itself whose both ends lie on
        multiples of VEC (static widths and extent), when it pads no other dim: every lane of a
        vector is then inside the input or all are outside (None: pad lane by lane)."""
        widths = op.mixed_widths
        padded = [d for d in range(op.input.type.rank) if not (widths[2 * d] == 0 and widths[2 * d + 1] == 0)]
        if self.vec <= 1 or not self.lanes or len(padded) != 1 or idx[padded[0]] != self.lanes[0]:
            return None
        d = padded[0]
        left, extent = widths[2 * d], op.input.type.static_extent(d)
        if not isinstance(left, int) or extent is None or left % self.vec or (left + extent) % self.vec:
            return None
        return d

    def _vector_pad(self, op: R.PadOp, idx):
        """A pad along the vectorised innermost dim at multiples of VEC (_vector_pad_dim): one
        branch on lane 0 for all the lanes, the input read inside it with vector accesses (as a
        vector cat's piece); the lanes' values are memoised for the lanes after lane 0."""
        d = self._vector_pad_dim(op, idx)
        assert d is not None
        left, extent = op.mixed_widths[2 * d], op.input.type.static_extent(d)
        t = X.COMPUTE_TYPE[op.result.type.dtype]
        fill = self.scalar(op.value, t)
        self.s.counter += 1
        names = [f"p{self.s.counter}_{j}" for j in range(self.vec)]
        self.line(f"{t} {', '.join(f'{n} = {fill}' for n in names)};")
        lanes = [idx[:d] + (lane,) + idx[d + 1:] for lane in self.lanes]
        at = idx[d].text
        yield from self._vector_branch(f"if ({at} >= {left}LL && {at} < {left + extent}LL)",
                                       _piece_range(idx[d], left, left + extent), op.input, names, lanes, d,
                                       ("pad", op, d), left)
        return self._memoise_lanes(op.result, names, lanes)

    def _vector_branch(self, header: str, where: _Range | None, operand: SSAValue, names: Sequence[str],
                       lanes: Sequence[tuple[Ix, ...]], dim: int, how: tuple, start: int):
        """One branch for every lane of a vector (a vector cat's piece, a vector pad's inside),
        opened by `header`, where `where` holds: names[j] = operand at lanes[j], its `dim` moved
        back by `start` (the piece's start, the pad's left width)."""
        self._open_branch([where])
        self.s.uniform_depth += 1
        self.open(header)
        for name, lane_idx in zip(names, lanes):
            src = list(lane_idx)
            src[dim] = shifted(lane_idx[dim], how, f"({lane_idx[dim].text} - {start}LL)", -start)
            value = yield operand, src
            self.line(f"{name} = {value};")
        self.close()
        self.s.uniform_depth -= 1
        self._close_branch()

    def _memoise_lanes(self, result: SSAValue, names: Sequence[str], lanes: Sequence[tuple[Ix, ...]]) -> str:
        """The lanes after lane 0 of a vector branch's value, which the caller asks for next, are
        memoised; lane 0's name is returned."""
        for name, lane_idx in zip(names[1:], lanes[1:]):
            self.s.memo[-1][(result, lane_idx)] = name
        return names[0]

    def op_CatOp(self, op: R.CatOp, idx):
        dim = op.dim.value.data
        # A cat along the loop's vector lanes themselves (not one read through a shift of them,
        # a cat inside another's piece: its lanes then take the scalar branches below).
        if self.vec > 1 and self.lanes and idx[dim] == self.lanes[0] and cat_starts(op) is not None:
            return (yield from self._vector_cat(op, idx, dim))
        t = X.COMPUTE_TYPE[op.result.type.dtype]
        self.s.counter += 1
        name = f"c{self.s.counter}"
        self.line(f"{t} {name};")
        offset = "0LL"
        starts = cat_starts(op)
        for k, v in enumerate(op.inputs):
            end = f"({offset} + {self.extent(v, dim)})"
            keyword = "if" if k == 0 else "else if"
            last = k == len(op.inputs) - 1
            # the last piece is the `else`; a cat of one tensor has only it, a plain block
            header = f"{keyword} ({idx[dim].text} < {end})" if not last else "else" if k else ""
            # where the piece lies, for the loads a load stage makes for it
            bounds = (starts[k], starts[k + 1]) if starts is not None else (offset, end)
            self._open_branch([_piece_range(idx[dim], bounds[0] if k else None, None if last else bounds[1])])
            self.open(header)
            src = list(idx)
            src[dim] = shifted(idx[dim], ("cat", op, k), f"({idx[dim].text} - {offset})")
            value = yield v, src
            self.line(f"{name} = {value};")
            self.close()
            self._close_branch()
            offset = end
        return name

    def _vector_cat(self, op: R.CatOp, idx, dim: int):
        """A cat along the vectorised innermost dim whose pieces start at multiples of VEC (the
        vector width divides them: vector_width checks it): every lane of a vector lies in the
        same piece, so one branch on lane 0 picks the piece for all of them, and inside it the
        piece is read with vector accesses. The lanes' values are memoised for the lanes after
        lane 0, which the caller asks for next."""
        starts = cat_starts(op)
        assert starts is not None
        t = X.COMPUTE_TYPE[op.result.type.dtype]
        self.s.counter += 1
        names = [f"c{self.s.counter}_{j}" for j in range(self.vec)]
        self.line(f"{t} {', '.join(names)};")
        lanes = [idx[:dim] + (lane,) + idx[dim + 1:] for lane in self.lanes]
        for k, (v, start) in enumerate(zip(op.inputs, starts)):
            keyword = "if" if k == 0 else "else if"
            header = (f"{keyword} ({idx[dim].text} < {starts[k + 1]}LL)" if k < len(op.inputs) - 1
                      else "else" if k else "")
            # where this piece lies (its lane 0), for the loads the stage makes for it
            end = starts[k + 1] if k < len(op.inputs) - 1 else None
            yield from self._vector_branch(header, _piece_range(idx[dim], start if k else None, end), v, names, lanes,
                                           dim, ("cat", op, k), start)
        return self._memoise_lanes(op.result, names, lanes)

    # gather family
    def _lookup(self, op, idx, index_idx) -> str:
        h = self.hoist
        if h is not None and not self.s.cond_depth and depends_only_on(index_idx, h.allowed):
            # An index read at the loop's outer variables only (a token id, an iota's position):
            # computed once, before the loop, where its loads would be hoisted anyway.
            saved = self._enter_hoist_section()
            try:
                position = yield op.index, index_idx
            finally:
                self._leave_hoist_section(saved)
            self.hoisted_names.add(position)
        else:
            position = yield op.index, index_idx
        src = list(idx)
        hoisted = self._hoisted_position(op, position)
        if hoisted is not None:
            # The index was loaded before the loop (a token id per row: an embedding): checked
            # there too, its position is a loop constant, and the gathered row's elements load
            # like any other's (in the load stage, as vectors along the row).
            src[op.axis] = gathered(index_idx, ("gathered", op, structural_key(index_idx)), hoisted)
        else:
            src[op.axis] = computed(index_idx, self.checked_index(op, position, self.extent(op.input, op.axis)))
        return (yield op.input, src)

    def _enter_hoist_section(self) -> tuple:
        """From here, lines go to the hoist section and values are memoised at its level."""
        h = self.hoist
        assert h is not None
        saved = (self.s.lines, self.s.indent, self.s.memo, self.s.stage)
        self.s.lines, self.s.indent = h.section.lines, h.section.indent  # type: ignore[assignment]
        self.s.memo = self.s.memo[:h.memo_level + 1]
        self.s.stage = None
        return saved

    def _leave_hoist_section(self, saved: tuple) -> None:
        self.s.lines, self.s.indent, self.s.memo, self.s.stage = saved

    def _hoisted_position(self, op, position: str) -> str | None:
        """`position` checked in the hoist section, when it is a value hoisted there."""
        h = self.hoist
        if h is None or self.s.cond_depth or position not in self.hoisted_names:
            return None
        key = ("checked", op, position)
        scope = self.s.memo[h.memo_level]
        if key not in scope:
            self.s.counter += 1
            name = f"ix{self.s.counter}"
            h.section.line(f"const long long {name} = {self._checked_expr(op, position, self.extent(op.input, op.axis))};")
            scope[key] = name
        return scope[key]

    def _checked_expr(self, op, position: str, extent: str) -> str:
        if not self.options.index_checks:
            return f"(long long)({position})"
        err = self.param(("index_error",), "long long* __restrict__", "index_error", "err")
        return f"fuser_checked_index({err}, {index_site(op)}, (long long)({position}), {extent})"

    def checked_index(self, op, position: str, extent: str) -> str:
        """The index `position` of `op`, checked in the kernel against `extent` (a fault is
        recorded and 0 read instead: lowering/execution/index_errors.py); unchecked under the disable
        option `kernel_index_checks`."""
        key = ("checked", op, position)  # once for every lane of a vector (one gathered row)
        for scope in reversed(self.s.memo):
            if key in scope:
                return scope[key]
        name = self.s.memo[-1][key] = self.tmp("long long", self._checked_expr(op, position, extent), "ix")
        return name

    def op_GatherOp(self, op: G.GatherOp, idx):
        return (yield from self._lookup(op, idx, idx))

    def op_TakeAlongAxisOp(self, op: G.TakeAlongAxisOp, idx):
        return (yield from self._lookup(op, idx, idx))

    def op_IndexSelectOp(self, op: G.IndexSelectOp, idx):
        index_idx = [idx[op.axis]] if op.index.type.rank == 1 else []
        return (yield from self._lookup(op, idx, index_idx))

    def op_ScatterOp(self, op: SCAT.ScatterOp, idx):
        """A pull (fuser_dialect/ops_scatter.py): the input's element, replaced by src at the
        last index element along dim naming this position. Only positions inside the index's
        extents off dim can be named; an index value out of range names none, so no index
        can make this kernel touch memory it does not own."""
        dim, index = op.axis, op.index
        t = X.COMPUTE_TYPE[op.result.type.dtype]
        base = yield op.input, idx
        self.s.counter += 1
        name, k = f"u{self.s.counter}", f"k{self.s.counter}"
        self.line(f"{t} {name} = {base};")
        inside = [f"({idx[d].text}) < {self.extent(index, d)}" for d in range(index.type.rank)
                  if d != dim and not _same_static_extent(index, op.input, d)]
        self.s.cond_depth += 1
        if inside:
            self.open(f"if ({' && '.join(inside)})")
        self.open(f"for (long long {k} = 0; {k} < {self.extent(index, dim)}; ++{k})")
        at = list(idx)
        at[dim] = scatter_position(k)
        position = self.checked_index(op, (yield index, at), self.extent(op.input, dim))
        self.open(f"if ({position} == ({idx[dim].text}))")
        value = yield op.src, at
        self.line(f"{name} = {value};")
        self.close()
        self.close()
        if inside:
            self.close()
        self.s.cond_depth -= 1
        return name

    # select and scans
    def select_position(self, op: SE.SelectOp) -> str:
        """The selected position in [0, extent): the index was range-checked before launch
        (ops_select: the verifier or the run-time extent plan); negative counts from the end."""
        constant, extent = constant_value(op.index), op.input.type.static_extent(op.axis)
        if constant is not None and constant >= 0:
            return f"{constant}LL"
        if constant is not None and extent is not None:
            return f"{constant + extent}LL"
        index = self.scalar(op.index, "long long")
        return f"({index} < 0 ? {index} + {self.extent(op.input, op.axis)} : {index})"

    def op_SelectOp(self, op: SE.SelectOp, idx):
        src = list(idx)
        src.insert(op.axis, _selected(op, self.select_position(op)))
        return (yield op.input, src)

    def op_ScanOp(self, op: SC.ScanOp, idx):
        # The scan unit (lowering/schedulers/scan.py) computes the value in a register per line.
        if op.result not in self.red_regs:
            raise NotImplementedError(f"{op.name} read outside its scan kernel (segmentation bug)")
        return self.red_regs[op.result]

    # factories
    def op_IotaOp(self, op: F.IotaOp, idx):
        t = X.COMPUTE_TYPE[op.result.type.dtype]
        start, step = self.scalar(op.start, t), self.scalar(op.step, t)
        return self.tmp(t, X.round_expr(f"({start} + ({t})({idx[0].text}) * {step})", op.result.type.dtype))

    def op_FullOp(self, op: F.FullOp, idx):
        dtype = op.result.type.dtype
        return self.tmp(X.COMPUTE_TYPE[dtype], X.round_expr(self.scalar(op.value, X.COMPUTE_TYPE[dtype]), dtype))

    def op_RandomOp(self, op: RN.RandomOp, idx):
        """Element `idx` from its row-major linear index over the op's logical shape (never the
        schedule's), so every kernel computing it gets the reference's value. The seed and
        offset arrive through a pointer filled per call (kind "rng": launch.RngState)."""
        out = op.results[0]
        dtype = out.type.dtype
        ctype = "double" if dtype == "f64" else "float"
        linear = "0LL"
        for d in range(out.type.rank):
            linear = f"({linear} * {self.extent(out, d)} + ({idx[d].text}))"
        state = self.param(("rng", op), "const unsigned long long* __restrict__", "rng", "rng", op=op)
        low, high = (self.scalar(v, ctype) for v in op.parameters)
        call = f"fuser_{op.DISTRIBUTION}_{'f64' if dtype == 'f64' else 'f32'}({state}, {linear}, {low}, {high})"
        value = self.tmp(X.COMPUTE_TYPE[dtype], X.round_expr(call, dtype))
        if op.DISTRIBUTION != "uniform":
            return value
        # [low, high) after rounding to the dtype: a value at or past high rounded to the dtype is
        # low rounded (as nvFuser's rng_uniform_range_half); the reference does the same (ops_random).
        top = X.round_expr(high, dtype)
        return self.tmp(X.COMPUTE_TYPE[dtype], f"({value} < {top} ? {value} : {X.round_expr(low, dtype)})")

    # -- stores -------------------------------------------------------------------------
    def store(self, v: SSAValue, idx: Sequence[Ix], value: str | None = None) -> None:
        """v's element at idx stored (`value`: the expression already emitted for it)."""
        value = self.emit(v, idx) if value is None else value
        dtype = v.type.dtype  # type: ignore[union-attr]
        ptr = self.tensor_ptr(v, True)
        offset = self.offset(v, tuple(ZERO if e == BROADCAST else i for e, i in zip(v.type.shape, idx)))
        self.effect(f"fuser_st({ptr}, {offset}, {X.store_expr(value, dtype)});")

    def unravel(self, value: SSAValue, dims: Sequence[int], linear: str, prefix: str,
                index32: bool = False) -> dict[int, Ix]:
        """Loop variables `<prefix><d>` of `dims` of `value` from a row-major linear index.
        Names are fixed (not numbered) so that every phase loop indexes loads identically.
        index32: `linear` is an unsigned 32-bit index, divided in 32 bits (the variables are
        still long long: what reads them is unchanged)."""
        names: dict[int, Ix] = {}
        rest = linear
        quotient = "unsigned" if index32 else "long long"
        for k, d in enumerate(reversed(dims)):
            e = self.extent(value, d)
            e = f"(unsigned){e}" if index32 else e
            name = f"{prefix}{d}"
            names[d] = loop_var(d, name)
            if k == len(dims) - 1:
                self.line(f"const long long {name} = {rest};")
            else:
                self.line(f"const long long {name} = {rest} % {e};")
                self.line(f"const {quotient} {prefix}q{d} = {rest} / {e};")
                rest = f"{prefix}q{d}"
        return names

    def numel(self, value: SSAValue, dims: Sequence[int]) -> str:
        return " * ".join(self.extent(value, d) for d in dims) or "1LL"


@dataclass(frozen=True)
class Read:
    """`operand` is read at `idx` (under a branch when `conditional`: pad and cat read their
    input only where it lies)."""

    operand: SSAValue
    idx: tuple[Ix, ...]
    conditional: bool = False


def _same(op, idx):
    return [Read(v, idx) for v in op.operands if isinstance(v.type, TensorType)]


def _broadcast(op: L.BroadcastOp, idx):
    new = set(op.dims.get_values())
    return [Read(op.input, tuple(ix for d, ix in enumerate(idx) if d not in new))]


def _broadcast_in_dim(op: L.BroadcastInDimOp, idx):
    return [Read(op.input, tuple(idx[o] for o in op.dims.get_values()))]


def _squeeze(op: L.SqueezeOp, idx):
    squeezed = set(op.dims.get_values())
    it = iter(idx)
    return [Read(op.input, tuple(ZERO if d in squeezed else next(it) for d in range(op.input.type.rank)))]


def _permute(op: L.PermuteOp, idx):
    src: list[Ix] = [ZERO] * len(idx)
    for i, p in enumerate(op.dims.get_values()):
        src[p] = idx[i]
    return [Read(op.input, tuple(src))]


def reshape_groups(op: L.ReshapeOp) -> tuple[int, int, list[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """The trailing dims of a reshape as groups (output dims, input dims) of static extents,
    each a dim kept as it is, one input dim split into several output dims ([.., 768] ->
    [.., 12, 64]) or several input dims merged into one ([.., 12, 64] -> [.., 768]); walked from
    the innermost dims out, up to the first dim of a dynamic, broadcast or zero extent or whose
    group is neither. (output dims before them, input dims before them, the groups in order)."""
    out, inp = op.result.type, op.input.type

    def extent(t, d: int) -> int | None:
        return None if t.shape[d] == BROADCAST else t.static_extent(d)  # type: ignore[union-attr]

    o, i = out.rank, inp.rank  # type: ignore[union-attr]
    groups: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    while o and i:
        eo, ei = extent(out, o - 1), extent(inp, i - 1)
        if not eo or not ei:
            break
        if eo == ei:
            groups.append(((o - 1,), (i - 1,)))
            o, i = o - 1, i - 1
            continue
        # the side with the smaller innermost extent takes dims until the products meet
        many, one, target, first = (inp, out, eo, i) if eo > ei else (out, inp, ei, o)
        product, k = 1, first
        while product < target and k and (e := extent(many, k - 1)):
            product, k = product * e, k - 1
        if product != target:
            break
        dims = tuple(range(k, first))
        groups.append(((o - 1,), dims) if eo > ei else (dims, (i - 1,)))
        o, i = (o - 1, k) if eo > ei else (k, i - 1)
    return o, i, groups[::-1]


def _regrouped(op: L.ReshapeOp, idx: Sequence[Ix], groups, emitting: bool) -> tuple[Ix, ...]:
    """The input's index along the dims of `groups` (reshape_groups) for the output index `idx`."""
    out, inp = op.result.type, op.input.type
    src: list[Ix] = []
    for outs, ins in groups:
        if len(outs) == len(ins) == 1:
            src.append(idx[outs[0]])
        elif len(outs) == 1:  # merged: each input dim a digit of the output index
            at = idx[outs[0]]
            extents = [inp.static_extent(d) for d in ins]  # type: ignore[union-attr]
            for m, d in enumerate(ins):
                inner = math.prod(extents[m + 1:])
                text = None
                if emitting:
                    text = f"({at.text})" + (f" / {inner}LL" if inner > 1 else "") + (f" % {extents[m]}LL" if m else "")
                    text = f"({text})"
                src.append(derived([at], ("reshape", op, d), text))
        else:  # split: one input dim from several output dims
            extents = [out.static_extent(d) for d in outs]  # type: ignore[union-attr]
            text = None
            if emitting:
                terms = [f"({idx[d].text}) * {math.prod(extents[m + 1:])}LL" for m, d in enumerate(outs[:-1])]
                text = "(" + " + ".join(terms + [f"({idx[outs[-1]].text})"]) + ")"
            src.append(derived([idx[d] for d in outs], ("reshape", op, ins[0]), text))
    return tuple(src)


def _reshape(op: L.ReshapeOp, idx):
    out_heads, heads, groups = reshape_groups(op)
    position = computed(idx[:out_heads])
    return [Read(op.input, (position,) * heads + _regrouped(op, idx, groups, False))]


def static_slice_start(op: R.SliceOp, d: int) -> int | None:
    """The start of `op` along dim d when the IR fixes it (a non-negative constant, step 1)."""
    if op.steps.get_values()[d] != 1:
        return None
    start = op.mixed_bounds[2 * d]
    value = start if isinstance(start, int) else constant_value(start)
    return value if value is not None and value >= 0 else None


def cat_starts(op: R.CatOp) -> list[int] | None:
    """Where each piece of `op` starts along its dim, and the end, when every piece's extent is
    static (None otherwise)."""
    dim = op.dim.value.data
    starts = [0]
    for v in op.inputs:
        extent = v.type.static_extent(dim)  # type: ignore[union-attr]
        if extent is None:
            return None
        starts.append(starts[-1] + extent)
    return starts


def _slice(op: R.SliceOp, idx):
    steps = op.steps.get_values()
    return [Read(op.input, tuple(shifted(ix, ("slice", op, d, steps[d]), by=static_slice_start(op, d))
                                 for d, ix in enumerate(idx)))]


def _static_pad_shift(op: R.PadOp, d: int) -> int | None:
    """How far the pad moves its input's index along dim d (-left) when the IR fixes it."""
    left = op.mixed_widths[2 * d]
    return -left if isinstance(left, int) else None


def _pad(op: R.PadOp, idx):
    widths = op.mixed_widths
    padded = [not (widths[2 * d] == 0 and widths[2 * d + 1] == 0) for d in range(op.input.type.rank)]
    src = tuple(shifted(ix, ("pad", op, d), by=_static_pad_shift(op, d)) if p else ix
                for d, (ix, p) in enumerate(zip(idx, padded)))
    return [Read(op.input, src, conditional=any(padded))]


def _cat(op: R.CatOp, idx):
    dim = op.dim.value.data
    starts = cat_starts(op)
    reads = []
    for k, v in enumerate(op.inputs):
        src = list(idx)
        src[dim] = shifted(idx[dim], ("cat", op, k), by=-starts[k] if starts is not None else None)
        reads.append(Read(v, tuple(src), conditional=True))
    return reads


INDEX_OPS = (G.GatherOp, G.TakeAlongAxisOp, G.IndexSelectOp, SCAT.ScatterOp)
"""The ops that read or write at computed indices: each is an index site."""

HOISTED_VALUE_OPS = (C.UnaryOp, C.BinaryOp, C.CastOp, C.WhereOp)
"""The ops whose values a hoist with `values` computes before its loop (KernelEmitter._hoisted_value_key)."""


def index_ops(fusion) -> list[Operation]:
    """The fusion's ops that read or write at computed indices (gather, take_along_axis,
    index_select, scatter), in program order: their positions number the in-kernel index
    checks' sites (lowering/execution/index_errors.py) and the host checks
    (lowering/execution/gather_checks.py)."""
    return [op for op in fusion.body.block.ops if isinstance(op, INDEX_OPS)]


def index_site(op: Operation) -> int:
    """The op's position among its fusion's index ops."""
    return index_ops(op.parent_op()).index(op)


def _lookup(op, idx, index_idx):
    position = computed(index_idx)
    src = list(idx)
    src[op.axis] = position
    return [Read(op.index, tuple(index_idx)), Read(op.input, tuple(src))]


def scatter_position(text: str | None = None) -> Ix:
    """The position along dim that a scatter's scan of its index is at: a loop variable of the
    scatter's own loop, not of the domain (never hoisted, never a vector lane)."""
    return computed((), text)


def _same_static_extent(a: SSAValue, b: SSAValue, d: int) -> bool:
    x, y = a.type.static_extent(d), b.type.static_extent(d)  # type: ignore[union-attr]
    return x is not None and x == y and BROADCAST not in (a.type.shape[d], b.type.shape[d])  # type: ignore[union-attr]


def _scatter(op: SCAT.ScatterOp, idx):
    at = list(idx)
    at[op.axis] = scatter_position()
    return [Read(op.input, tuple(idx)), Read(op.index, tuple(at), conditional=True),
            Read(op.src, tuple(at), conditional=True)]


def _index_select(op: G.IndexSelectOp, idx):
    return _lookup(op, idx, [idx[op.axis]] if op.index.type.rank == 1 else [])


def _selected(op: SE.SelectOp, text: str | None = None) -> Ix:
    """The selected position: the same launch-time constant for every element."""
    return Ix(frozenset(), None, False, ("select", op), text)


def _select(op: SE.SelectOp, idx):
    src = list(idx)
    src.insert(op.axis, _selected(op))
    return [Read(op.input, tuple(src))]


def _nothing(op, idx):
    return []


def _emit_copy(emitter: KernelEmitter, op: ST.SetOp | ST.SegmentSetOp, idx):
    """set / segment_set: the input's value at the same index."""
    return (yield op.input, idx)


ACCESS_RULES: dict[type[Operation], Callable[[Operation, tuple[Ix, ...]], list[Read]]] = {
    C.UnaryOp: _same,
    C.BinaryOp: _same,
    C.WhereOp: _same,
    C.CastOp: _same,
    C.ReductionOp: _nothing,  # inside its kernel a reduction result is a register
    L.BroadcastOp: _broadcast,
    L.BroadcastInDimOp: _broadcast_in_dim,
    L.SqueezeOp: _squeeze,
    L.ExpandOp: _same,
    L.PermuteOp: _permute,
    L.ReshapeOp: _reshape,
    R.SliceOp: _slice,
    R.PadOp: _pad,
    R.CatOp: _cat,
    G.GatherOp: lambda op, idx: _lookup(op, idx, idx),
    G.TakeAlongAxisOp: lambda op, idx: _lookup(op, idx, idx),
    G.IndexSelectOp: _index_select,
    SCAT.ScatterOp: _scatter,
    SE.SelectOp: _select,
    SC.ScanOp: _nothing,  # inside its kernel a scan result is a register
    F.IotaOp: _nothing,
    F.FullOp: _nothing,
    RN.UniformOp: _nothing,
    RN.NormalOp: _nothing,
    ST.SetOp: _same,
    ST.SegmentSetOp: _same,
}
"""Per op class: at which index each tensor operand is read for one element of the result
(mirrors the op's emitter below; lowering/codegen/analysis.py walks kernels with it)."""


EMITTERS: dict[type[Operation], object] = {
    C.UnaryOp: KernelEmitter.op_UnaryOp,
    C.BinaryOp: KernelEmitter.op_BinaryOp,
    C.WhereOp: KernelEmitter.op_WhereOp,
    C.CastOp: KernelEmitter.op_CastOp,
    C.ReductionOp: KernelEmitter.op_ReductionOp,
    L.BroadcastOp: KernelEmitter.op_layout,
    L.BroadcastInDimOp: KernelEmitter.op_layout,
    L.SqueezeOp: KernelEmitter.op_layout,
    L.ExpandOp: KernelEmitter.op_layout,
    L.PermuteOp: KernelEmitter.op_layout,
    L.ReshapeOp: KernelEmitter.op_ReshapeOp,
    R.SliceOp: KernelEmitter.op_SliceOp,
    R.PadOp: KernelEmitter.op_PadOp,
    R.CatOp: KernelEmitter.op_CatOp,
    G.GatherOp: KernelEmitter.op_GatherOp,
    G.TakeAlongAxisOp: KernelEmitter.op_TakeAlongAxisOp,
    G.IndexSelectOp: KernelEmitter.op_IndexSelectOp,
    SCAT.ScatterOp: KernelEmitter.op_ScatterOp,
    SE.SelectOp: KernelEmitter.op_SelectOp,
    SC.ScanOp: KernelEmitter.op_ScanOp,
    F.IotaOp: KernelEmitter.op_IotaOp,
    F.FullOp: KernelEmitter.op_FullOp,
    RN.UniformOp: KernelEmitter.op_RandomOp,
    RN.NormalOp: KernelEmitter.op_RandomOp,
    ST.SetOp: _emit_copy,
    ST.SegmentSetOp: _emit_copy,
}
"""Per op class: how its value at an index is emitted (`KernelEmitter.emit_op` dispatches here).
Layout ops emit nothing and use their ACCESS_RULES entry; the others emit C (temporaries for a
computed position, branches for pad and cat, a lookup's index read, a scatter's loop, the
values of compute ops) beside the mapping their access rule states for the analysis."""
