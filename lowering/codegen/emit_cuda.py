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
from fuser.lowering.codegen.index import (ZERO, Ix, computed, depends_only_on, gathered, lane_of, loop_var, shifted,
                                          structural_key, texts, without_lanes)
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


@dataclass
class PhaseLoop:
    """The phase loop of a persistent row kernel being emitted: its loads may be kept in
    per-thread register arrays indexed by `slot`."""

    phase: int
    slot: str
    reduced: frozenset[int]


@dataclass
class _StagedLoad:
    """One load of a load stage: one array, read by every cat piece that loads the same tensor
    in the same place of its expression (`users`: (piece condition, element offset))."""

    name: str
    value: SSAValue
    vec: int
    users: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class _CatPieces:
    """A vector cat being emitted in a staged body: its pieces' loads share stage loads."""

    condition: str = ""
    """The piece being emitted: where it lies (its lane 0's index), with every enclosing cat's."""
    loads: list[_StagedLoad] = field(default_factory=list)
    taken: set[int] = field(default_factory=set)
    """Of `loads`, those the current piece has used."""


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
    cats: list[_CatPieces] = field(default_factory=list)
    """The vector cats open in the body, innermost last."""


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
        expr = self.emit_op(op, idx)
        if isinstance(expr, str):
            return self._computed(key, expr)
        return key, expr

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
            ctype = X.COMPUTE_TYPE[v.type.dtype]  # type: ignore[union-attr]
            if self.row_storage is None:
                self.buffer_section.line(f"{ctype} {name}[{self.schedule.iters * self.vec}];")
            else:
                self.buffer_section.line(self.row_storage.declare(name, ctype, self.row_storage.slot_of[kept]))
        return self.buffers[kept]

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
        if self.hoist is not None and not self.s.cond_depth and depends_only_on(idx, self.hoist.allowed):
            lane = idx[-1].lane if idx else None
            if self.vec > 1 and lane is not None and v.type.shape[-1] != BROADCAST:  # type: ignore[union-attr]
                raw = X.load_expr(f"{self.vector_load(v, idx, hoisted=True)}[{lane}]", dtype)
            else:
                raw = X.load_expr(f"fuser_ld({self.tensor_ptr(v, False)}, {self.offset(v, idx)})", dtype)
            return self.hoisted_load((v, idx), ctype, raw)
        kept = self._row_buffer(v, idx)
        if kept is None:
            return self.tmp(ctype, self.raw_load(v, idx), "v")
        buf = self.slot_element(self.row_buffer_name(kept, v), idx)
        if (kept, lane_of(idx)) not in self.filled:
            self.filled.add((kept, lane_of(idx)))
            self.line(f"{buf} = {self.raw_load(v, idx)};")
        return self.tmp(ctype, buf, "v")

    def prefetch(self, v: SSAValue, idx: tuple[Ix, ...]) -> None:
        """Loads `v` at `idx` into its row buffer now (a persistent row's first phase loading
        what later phases read), without using it here."""
        idx = tuple(ZERO if e == BROADCAST else i for e, i in zip(v.type.shape, idx))  # type: ignore[union-attr]
        kept = self._row_buffer(v, idx)
        assert kept is not None, "only kept loads are prefetched"
        if (kept, lane_of(idx)) not in self.filled:
            self.filled.add((kept, lane_of(idx)))
            self.line(f"{self.slot_element(self.row_buffer_name(kept, v), idx)} = {self.raw_load(v, idx)};")

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
        the body but vector cat pieces (all lanes alike, each piece's condition known: the
        stage predicates the load on it) and its index reads no value the body computes."""
        stage = self.s.stage
        if stage is None or not stage.active or any(ix.local for ix in idx):
            return False
        return self.s.cond_depth == self.s.uniform_depth == len(stage.cats)

    def staged_load(self, v: SSAValue, idx: Sequence[Ix], vec: int) -> str:
        """v at idx (VEC elements from there when vec > 1), loaded by the load stage: the name of
        this iteration's element (vec == 1) or array (vec > 1). In a vector cat's piece, the
        load the previous pieces made of the same tensor at the same place is reused: one load
        at the piece's offset (a select), so a thread issues one load for the cat, not one per
        piece."""
        stage = self.s.stage
        assert stage is not None
        offset = self.offset(v, idx)
        cat = stage.cats[-1] if stage.cats else None
        if cat is not None:
            for k, load in enumerate(cat.loads):
                if k not in cat.taken and load.value is v and load.vec == vec:
                    cat.taken.add(k)
                    load.users.append((cat.condition, offset))
                    return f"{load.name}[{stage.slot}]"
        self.s.counter += 1
        load = _StagedLoad(f"pl{self.s.counter}", v, vec, [(cat.condition if cat else "", offset)])
        stage.staged.append(load)
        storage = X.STORAGE_TYPE[v.type.dtype]  # type: ignore[union-attr]
        stage.decls.append(f"{storage} {load.name}[{stage.count}]" + (f"[{vec}];" if vec > 1 else ";"))
        if cat is not None:
            cat.taken.add(len(cat.loads))
            cat.loads.append(load)
        return f"{load.name}[{stage.slot}]"

    def _stage_load_line(self, stage: _LoadStage, load: _StagedLoad) -> str:
        """The load stage's line for one staged load: made where the iteration's guard holds and
        (read by cat pieces only) one of its pieces lies, at that piece's offset."""
        ptr = self.tensor_ptr(load.value, False)
        conditions = [c for c, _ in load.users]
        ok = f"fuser_in && ({' || '.join(f'({c})' for c in conditions)})" if all(conditions) else "fuser_in"
        offset = load.users[-1][1]
        for condition, piece_offset in reversed(load.users[:-1]):
            offset = f"({condition}) ? ({piece_offset}) : ({offset})"
        if load.vec > 1:
            return f"fuser_ld_vec_if<{load.vec}>({ok}, {ptr}, {offset}, {load.name}[{stage.slot}]);"
        return f"{load.name}[{stage.slot}] = fuser_ld_if({ok}, {ptr}, {offset});"

    def vector_load(self, v: SSAValue, idx: tuple[Ix, ...], hoisted: bool = False) -> str:
        """The array holding VEC consecutive elements of v's innermost dim from lane 0's index:
        one access, made when lane 0 is met in this C scope (lanes are emitted in order), or in
        the hoist section when `hoisted`, and read by every lane."""
        key = ("vector", v, idx[:-1], idx[-1].offset)
        scopes = self.s.memo[:self.hoist.memo_level + 1] if hoisted and self.hoist else self.s.memo
        for scope in reversed(scopes):
            if key in scope:
                return scope[key]
        assert idx[-1].lane == 0, "a vector access is made at its lane 0"
        if not hoisted and self._stageable(idx) and self.s.cond_depth == self.s.uniform_depth:
            name = self.staged_load(v, idx, self.vec)
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

    def open_staged_loop(self, slot: str, count: int, header: str) -> None:
        """Opens `#pragma unroll` + `header` (a loop over `slot` from 0 to `count`, which a full
        unroll makes constant) whose loads will be issued by a load stage before it (see
        _LoadStage). The caller then emits the iteration's preamble (its indices, no loads) and
        calls `guard_staged`."""
        assert self.s.stage is None, "load stages do not nest"
        section = self.section()
        self.line("#pragma unroll")
        self.open(header)
        self.s.stage = _LoadStage(section, header, slot, count, len(self.s.lines))

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
        sec = stage.section
        for decl in stage.decls:
            sec.line(decl)
        sec.line("#pragma unroll")
        sec.line(stage.header + " {")
        sec.lines += stage.preamble
        inner = Section(sec.indent + 1)
        inner.line(f"const bool fuser_in = {stage.guard};")
        for load in stage.staged:
            inner.line(self._stage_load_line(stage, load))
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

    def hoist_here(self, allowed: set[int] | frozenset[int], group: int = 0, guard: str = "") -> None:
        """Loads emitted later whose index reads only the loop variables of `allowed` dims go
        here, before the loop about to be opened (pointwise outer loop, reduction phase loops).
        group > 1: lanes 0, group, 2 * group, ... load (when `guard` holds) and share by shuffle."""
        self.hoist = _Hoist(self.section(), len(self.s.memo) - 1, frozenset(allowed), group, guard)

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
        """The dims before the kept suffix (kept_suffix) re-linearised: once for every lane of
        a vector (memoised by their indices), and before the loop when they read only its
        outer variables (then a loop constant to the loop's loads, like a gathered row)."""
        out, inp = op.result, op.input
        kept = kept_suffix(op)
        head, tail = idx[:out.type.rank - kept], tuple(idx[out.type.rank - kept:])
        heads = inp.type.rank - kept
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
            for d in range(out.type.rank - kept):
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
        dtype = op.result.type.dtype
        t = X.COMPUTE_TYPE[dtype]
        widths = op.mixed_widths
        src, conds = [], []
        for d in range(op.input.type.rank):
            left = widths[2 * d]
            if left == 0 and widths[2 * d + 1] == 0:
                src.append(idx[d])
                continue
            j = self.tmp("long long", f"({idx[d].text}) - {self.mixed_int(left)}", "j")
            src.append(computed([idx[d]], j))
            conds.append(f"({j} >= 0 && {j} < {self.extent(op.input, d)})")
        fill = self.scalar(op.value, t)
        if not conds:
            return (yield op.input, src)
        self.s.counter += 1
        name = f"p{self.s.counter}"
        self.line(f"{t} {name} = {fill};")
        self.s.cond_depth += 1
        self.open(f"if ({' && '.join(conds)})")
        value = yield op.input, src
        self.line(f"{name} = {value};")
        self.close()
        self.s.cond_depth -= 1
        return name

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
        self.s.cond_depth += 1
        for k, v in enumerate(op.inputs):
            end = f"({offset} + {self.extent(v, dim)})"
            keyword = "if" if k == 0 else "else if"
            # the last piece is the `else`; a cat of one tensor has only it, a plain block
            header = f"{keyword} ({idx[dim].text} < {end})" if k < len(op.inputs) - 1 else "else" if k else ""
            self.open(header)
            src = list(idx)
            src[dim] = shifted(idx[dim], ("cat", op, k), f"({idx[dim].text} - {offset})")
            value = yield v, src
            self.line(f"{name} = {value};")
            self.close()
            offset = end
        self.s.cond_depth -= 1
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
        stage = self.s.stage if self._stageable(()) else None
        outer = stage.cats[-1].condition if stage is not None and stage.cats else ""
        if stage is not None:
            stage.cats.append(_CatPieces())
        self.s.cond_depth += 1
        self.s.uniform_depth += 1
        for k, (v, start) in enumerate(zip(op.inputs, starts)):
            keyword = "if" if k == 0 else "else if"
            header = (f"{keyword} ({idx[dim].text} < {starts[k + 1]}LL)" if k < len(op.inputs) - 1
                      else "else" if k else "")
            if stage is not None:  # where this piece lies, for the loads the stage makes for it
                at = idx[dim].text
                lies = [f"{at} >= {start}LL"] if k else []
                lies += [f"{at} < {starts[k + 1]}LL"] if k < len(op.inputs) - 1 else []
                piece = stage.cats[-1]
                piece.condition = " && ".join(([f"({outer})"] if outer else []) + lies) or outer
                piece.taken = set()
            self.open(header)
            for name, lane_idx in zip(names, lanes):
                src = list(lane_idx)
                text = lane_idx[dim].text
                src[dim] = shifted(lane_idx[dim], ("cat", op, k), f"({text} - {start}LL)", -start)
                value = yield v, src
                self.line(f"{name} = {value};")
            self.close()
        self.s.uniform_depth -= 1
        self.s.cond_depth -= 1
        if stage is not None:
            stage.cats.pop()
        for name, lane_idx in zip(names[1:], lanes[1:]):
            self.s.memo[-1][(op.result, lane_idx)] = name
        return names[0]

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
    def store(self, v: SSAValue, idx: Sequence[Ix]) -> None:
        value = self.emit(v, idx)
        dtype = v.type.dtype  # type: ignore[union-attr]
        ptr = self.tensor_ptr(v, True)
        offset = self.offset(v, tuple(ZERO if e == BROADCAST else i for e, i in zip(v.type.shape, idx)))
        self.effect(f"fuser_st({ptr}, {offset}, {X.store_expr(value, dtype)});")

    def unravel(self, value: SSAValue, dims: Sequence[int], linear: str, prefix: str) -> dict[int, Ix]:
        """Loop variables `<prefix><d>` of `dims` of `value` from a row-major linear index.
        Names are fixed (not numbered) so that every phase loop indexes loads identically."""
        names: dict[int, Ix] = {}
        rest = linear
        for k, d in enumerate(reversed(dims)):
            e = self.extent(value, d)
            name = f"{prefix}{d}"
            names[d] = loop_var(d, name)
            if k == len(dims) - 1:
                self.line(f"const long long {name} = {rest};")
            else:
                self.line(f"const long long {name} = {rest} % {e};")
                self.line(f"const long long {prefix}q{d} = {rest} / {e};")
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


def kept_suffix(op: L.ReshapeOp) -> int:
    """How many trailing dims a reshape leaves as they are (equal static extents on both sides,
    a broadcast dim nowhere among them): those read the input at the output's own index; the
    dims before them are re-linearised ([B, T, H] <-> [B * T, H] keeps H)."""
    out, inp = op.result.type, op.input.type
    kept = 0
    while kept < min(out.rank, inp.rank):  # type: ignore[union-attr]
        a, b = out.static_extent(out.rank - 1 - kept), inp.static_extent(inp.rank - 1 - kept)  # type: ignore[union-attr]
        if a is None or a != b or BROADCAST in (out.shape[out.rank - 1 - kept], inp.shape[inp.rank - 1 - kept]):  # type: ignore[union-attr]
            break
        kept += 1
    return kept


def _reshape(op: L.ReshapeOp, idx):
    kept = kept_suffix(op)
    out_rank, in_rank = op.result.type.rank, op.input.type.rank  # type: ignore[union-attr]
    head = idx[:out_rank - kept]
    position = computed(head)
    return [Read(op.input, (position,) * (in_rank - kept) + tuple(idx[out_rank - kept:]))]


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


def _pad(op: R.PadOp, idx):
    widths = op.mixed_widths
    padded = [not (widths[2 * d] == 0 and widths[2 * d + 1] == 0) for d in range(op.input.type.rank)]
    src = tuple(computed([ix]) if p else ix for ix, p in zip(idx, padded))
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
