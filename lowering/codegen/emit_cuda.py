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
from fuser.lowering.codegen.index import (ZERO, Ix, computed, depends_only_on, lane_of, loop_var, shifted, structural_key,
                                          texts, without_lanes)
from fuser.lowering.codegen.kernel import KernelPlan


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
        return X.load_expr(f"fuser_ld({self.tensor_ptr(v, False)}, {self.offset(v, idx)})", dtype)

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
        self.line(f"fuser_st_vec<{vec}>({ptr}, {offset}, {staged});")

    # -- what a scheduler's loop nest tells the emitter --------------------------------------
    def use_vector_lanes(self, lanes: Sequence[Ix]) -> None:
        """The loop being emitted walks the innermost dim VEC = len(lanes) elements at a time;
        `lanes` are their indices (index.vector_lane), lane 0 first."""
        self.vec = len(lanes)
        self.lanes = list(lanes)

    def end_vector_lanes(self) -> None:
        self.vec, self.lanes = 1, []

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
        expr = X.binary_expr(op.op_kind, a, b, dtype)
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
        out, inp = op.result, op.input
        linear = "0"
        for d in range(out.type.rank):
            linear = f"(({linear}) * {self.extent(out, d)} + ({idx[d].text}))"
        lin = self.tmp("long long", linear, "l")
        src: list[Ix] = [ZERO] * inp.type.rank
        for d in reversed(range(inp.type.rank)):
            e = self.extent(inp, d)
            src[d] = computed(idx, self.tmp("long long", f"{lin} % {e}", "j"))
            lin = self.tmp("long long", f"{lin} / {e}", "l")
        return (yield inp, src)

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
            header = f"{keyword} ({idx[dim].text} < {end})" if k < len(op.inputs) - 1 else "else"
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
        self.s.cond_depth += 1
        self.s.uniform_depth += 1
        for k, (v, start) in enumerate(zip(op.inputs, starts)):
            keyword = "if" if k == 0 else "else if"
            header = f"{keyword} ({idx[dim].text} < {starts[k + 1]}LL)" if k < len(op.inputs) - 1 else "else"
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
        for name, lane_idx in zip(names[1:], lanes[1:]):
            self.s.memo[-1][(op.result, lane_idx)] = name
        return names[0]

    # gather family
    def _lookup(self, op, idx, index_idx) -> str:
        position = yield op.index, index_idx
        checked = self.checked_index(op, position, self.extent(op.input, op.axis))
        src = list(idx)
        src[op.axis] = computed(index_idx, checked)
        return (yield op.input, src)

    def checked_index(self, op, position: str, extent: str) -> str:
        """The index `position` of `op`, checked in the kernel against `extent` (a fault is
        recorded and 0 read instead: lowering/execution/index_errors.py); unchecked under the disable
        option `kernel_index_checks`."""
        if not self.options.index_checks:
            return self.tmp("long long", f"(long long)({position})", "ix")
        err = self.param(("index_error",), "long long* __restrict__", "index_error", "err")
        site = index_site(op)
        return self.tmp("long long", f"fuser_checked_index({err}, {site}, (long long)({position}), {extent})", "ix")

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
        self.line(f"fuser_st({ptr}, {offset}, {X.store_expr(value, dtype)});")

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


def _reshape(op: L.ReshapeOp, idx):
    position = computed(idx)
    return [Read(op.input, (position,) * op.input.type.rank)]


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
