"""Run-time extents of a fusion, computed from input shapes and scalar values alone.

`evaluate_extents(fusion, input_shapes, scalar_values)` returns a `RuntimeExtents`: the
concrete shape of every tensor SSA value, which of its dims broadcast, the value of every
scalar SSA value, and per resize op (pad/slice/cat) the resolved facts (normalized slice
bounds, pad widths, input and output extents). No tensor data is touched and no IR is
rewritten. Extents that disagree at run time raise `ExtentError` (a ValueError) naming the op,
the dim and the extents.

It runs on every `execute` (the cache key and the kernel extent arguments come from it), and
reading xDSL IR is slow (an IRDL accessor costs ~1 µs), so the walk is split in two:
`ExtentPlan(fusion)` reads the IR once into a list of plain closures over integer value slots,
and `plan.evaluate(...)` runs them on Python ints. Build one plan per fusion and keep it
(`evaluate_extents` accepts a plan); a plan describes the IR as it was when built, so rewrite
a clone of a fusion, not the fusion a plan was built from.

Broadcast at run time follows nvFuser's concretization: a dim is broadcast when its type says
`b`, or when it is a *resized* dim of a resize op whose output extent is 1 (nvFuser's Symbolic
IterDomain concretized to Broadcast); broadcast-ness then flows through later ops as the `b`
of the concretized types does (an elementwise result dim broadcasts when all its operands'
do), and any result dim declared `b` broadcasts. A `?` dim of an input that is 1 at run time does NOT broadcast (nvFuser does not
specialise on it either): against another extent it is an error.

Resized dims are decided statically, per op, from the IR:
- pad: a dim whose (left, right) widths are not both the constant 0;
- slice: a dim whose bounds are not statically the whole dim — step 1, start the constant 0,
  and stop either `fuser.dim` of the sliced tensor at that dim, a constant >= its static
  extent, or a constant >= 2**62 ("to the end");
("constant": a static entry or an SSA value defined by `arith.constant`.)
- cat: the cat dim.
Only resized dims get a broadcast/iteration decision; the other dims of a resize output are
the input's dims (so a batch dim stays `?` even when the batch is 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerAttr, IntegerType
from xdsl.ir import Operation, SSAValue

from fuser_dialect import ops_compute as C
from fuser_dialect import ops_factory as F
from fuser_dialect import ops_gather as G
from fuser_dialect import ops_layout as L
from fuser_dialect import ops_resize as R
from fuser_dialect.inputs import check_shape
from fuser_dialect.types import BROADCAST, DYNAMIC, TensorType

Scalar = int | float | bool
Shape = tuple[int, ...]
Flags = tuple[bool, ...]

TO_THE_END = 2**62
"""A static slice stop at least this large means "to the end of the dim"."""


class ExtentError(ValueError):
    """Extents or scalar values that cannot run: mismatched extents, a pad that crops more
    than the extent, a missing scalar value that an extent depends on."""


# --- records --------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class ResizeFacts:
    """What one pad/slice/cat resolves to at run time.

    `index` numbers the fusion's resize ops in op order (pad, slice and cat together, from
    0), so `label` ("fuser.slice #2") names one op across executions of one fusion."""

    index: int
    name: str
    resized_dims: tuple[int, ...]
    input_shapes: tuple[Shape, ...]
    output_shape: Shape
    output_broadcast: Flags
    widths: tuple[int, ...] = ()
    """pad: [left0, right0, left1, right1, ...] in dim order, run-time values."""
    bounds: tuple[int, ...] = ()
    """slice: [start0, stop0, ...] normalized (torch semantics: from the end, clamped)."""
    steps: tuple[int, ...] = ()
    """slice: the (static) steps."""
    dim: int = -1
    """cat: the cat dim."""
    op: Operation | None = field(default=None, repr=False)
    decision: ResizeDecision | None = field(default=None, repr=False)
    """This op's part of the ConcretizationInfo in resize-extents mode (built with the facts:
    `dim_facts` of each resized dim)."""

    @property
    def label(self) -> str:
        return f"{self.name} #{self.index}"

    def dim_facts(self, d: int) -> tuple[int, ...]:
        """The facts of resized dim d: pad (extent, left, right), slice (extent, start, stop)
        with normalized bounds (steps are static, so not facts), cat (extent of each input)."""
        if self.name == "fuser.pad":
            return (self.input_shapes[0][d], self.widths[2 * d], self.widths[2 * d + 1])
        if self.name == "fuser.slice":
            return (self.input_shapes[0][d], self.bounds[2 * d], self.bounds[2 * d + 1])
        return tuple([s[d] for s in self.input_shapes])


class ResizeDecision(NamedTuple):
    """The part of one resize op's facts that a concretization consumed.

    `broadcast[k]` decides `resized_dims[k]` (True: broadcast, extent 1; False: iteration);
    `extents[k]` are its facts (`ResizeFacts.dim_facts`) when resize extents are made static,
    else None. (A NamedTuple: built on every execute, hashed into the cache key.)"""

    index: int
    name: str
    resized_dims: tuple[int, ...]
    broadcast: Flags
    extents: tuple[tuple[int, ...], ...] | None

    @property
    def label(self) -> str:
        return f"{self.name} #{self.index}"


class ConcretizationInfo(NamedTuple):
    """Everything `concretize` decides from run-time values: equal infos give identical
    concretized fusions. This is the concretization part of the executor cache key."""

    resize_extents: bool
    resizes: tuple[ResizeDecision, ...]
    exact_gathers: tuple[int, ...] = ()
    """Positions (among the fusion's gathers, in op order) of the gathers whose index extents
    equal the input's on every dim but the gathered one: `concretize` makes them
    take_along_axis, which fuses (see passes/gather_to_take_along_axis.py)."""


class RuntimeExtents:
    """Shapes, broadcast flags and scalar values of one fusion for one set of inputs.

    Per value: `shape(v)`, `broadcast_flags(v)`, `scalar(v)` (None where it depends on a
    scalar input given no value); as dicts: `shapes`, `broadcast`, `scalars` (built on
    first use). `resizes` lists the resize facts in op order; `outputs` the fusion outputs'
    shapes (tensors) or values (scalars)."""

    __slots__ = ("plan", "_shapes", "_flags", "_scalars", "resizes", "_dicts")

    def __init__(self, plan: ExtentPlan, shapes: list, flags: list, scalars: list,
                 resizes: tuple[ResizeFacts, ...]):
        self.plan = plan
        self._shapes = shapes
        self._flags = flags
        self._scalars = scalars
        self.resizes = resizes
        self._dicts: tuple[dict, dict, dict] | None = None

    def shape(self, value: SSAValue) -> Shape:
        return self._shapes[self.plan.slot[value]]

    def broadcast_flags(self, value: SSAValue) -> Flags:
        return self._flags[self.plan.slot[value]]

    def scalar(self, value: SSAValue) -> Scalar | None:
        return self._scalars[self.plan.slot[value]]

    def _as_dicts(self) -> tuple[dict, dict, dict]:
        if self._dicts is None:
            shapes, flags, scalars = {}, {}, {}
            for v, i in self.plan.slot.items():
                if isinstance(v.type, TensorType):
                    shapes[v], flags[v] = self._shapes[i], self._flags[i]
                else:
                    scalars[v] = self._scalars[i]
            self._dicts = (shapes, flags, scalars)
        return self._dicts

    @property
    def shapes(self) -> dict[SSAValue, Shape]:
        return self._as_dicts()[0]

    @property
    def broadcast(self) -> dict[SSAValue, Flags]:
        return self._as_dicts()[1]

    @property
    def scalars(self) -> dict[SSAValue, Scalar | None]:
        return self._as_dicts()[2]

    @property
    def outputs(self) -> tuple[Shape | Scalar | None, ...]:
        return tuple(self._shapes[i] if t else self._scalars[i] for i, t in self.plan.outputs)

    def exact_gathers(self) -> tuple[int, ...]:
        """Positions of the gathers whose index matches the input off the gathered dim."""
        exact = []
        for k, (source, index, axis) in enumerate(self.plan.gathers):
            a, b = self._shapes[source], self._shapes[index]
            if all(x == y for d, (x, y) in enumerate(zip(a, b)) if d != axis):
                exact.append(k)
        return tuple(exact)

    def concretization(self, resize_extents: bool = True) -> ConcretizationInfo:
        """The decisions `concretize` takes for these extents (see ConcretizationInfo)."""
        gathers = self.exact_gathers() if self.plan.gathers else ()
        if resize_extents:
            return ConcretizationInfo(True, tuple([r.decision for r in self.resizes]), gathers)  # type: ignore[misc]
        return ConcretizationInfo(False, tuple([r.decision._replace(extents=None) for r in self.resizes]), gathers)  # type: ignore[union-attr]


# --- static facts about resize ops --------------------------------------------------------


def _constant(v: int | SSAValue) -> int | None:
    """The value of a static entry or of an SSA `arith.constant` (concretize folds `fuser.dim`
    of static dims into constants: they must read as the static entries they are)."""
    if not isinstance(v, SSAValue):
        return v
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _is_zero(v: int | SSAValue) -> bool:
    return _constant(v) == 0


def pad_resized_dims(op: R.PadOp) -> tuple[int, ...]:
    """The dims a pad statically changes: widths other than the constant (0, 0)."""
    w = op.mixed_widths
    return tuple(d for d in range(len(w) // 2) if not (_is_zero(w[2 * d]) and _is_zero(w[2 * d + 1])))


def _is_whole_stop(op: R.SliceOp, t: TensorType, d: int, stop: int | SSAValue) -> bool:
    if isinstance(stop, SSAValue) and isinstance(stop.owner, F.DimOp):
        return stop.owner.input is op.input and stop.owner.axis == d
    value = _constant(stop)
    if value is None:
        return False
    extent = t.static_extent(d)
    return value >= TO_THE_END or (extent is not None and value >= extent)


def slice_resized_dims(op: R.SliceOp) -> tuple[int, ...]:
    """The dims a slice statically changes (see the module docstring)."""
    t = op.input.type
    assert isinstance(t, TensorType)
    bounds = op.mixed_bounds
    return tuple(
        d for d, step in enumerate(op.steps.get_values())
        if not (step == 1 and _is_zero(bounds[2 * d]) and _is_whole_stop(op, t, d, bounds[2 * d + 1]))
    )


def resized_dims(op: Operation) -> tuple[int, ...]:
    if isinstance(op, R.PadOp):
        return pad_resized_dims(op)
    if isinstance(op, R.SliceOp):
        return slice_resized_dims(op)
    if isinstance(op, R.CatOp):
        return (op.dim.value.data,)
    return ()


# --- the plan ---------------------------------------------------------------------------

# A step runs on the value slots: S (shapes), B (broadcast flags), V (scalar values) and the
# list of resize facts found so far.
Step = Callable[[list, list, list, list], None]


def _describe(value: SSAValue) -> str:
    t = value.type
    return t.describe() if isinstance(t, TensorType) else str(t)


def _type_flags(t: TensorType) -> Flags:
    return tuple(d == BROADCAST for d in t.shape)


def _missing(op: Operation, what: str) -> ExtentError:
    return ExtentError(
        f"{op.name}: {what} depends on a scalar input that was given no value; its run-time "
        "value is needed to compute extents"
    )


class ExtentPlan:
    """The fusion's ops read once into closures over integer slots (see the module docstring)."""

    def __init__(self, fusion: func.FuncOp):
        self.fusion = fusion
        block = fusion.body.block
        self.slot: dict[SSAValue, int] = {}
        self.args: list[tuple[int, TensorType | None, bool, bool]] = []
        for arg in block.args:
            t = arg.type
            is_bool = isinstance(t, IntegerType) and t.width.data == 1
            self.args.append((self._new_slot(arg), t if isinstance(t, TensorType) else None,
                              is_bool, isinstance(t, IntegerType) and not is_bool))
        # Per input: (rank, [(dim, required extent)] for non-`?` dims, broadcast flags).
        self.arg_checks = [
            (t.rank, [(d, 1 if e == BROADCAST else e) for d, e in enumerate(t.shape) if e != DYNAMIC], _type_flags(t))
            if t is not None else (0, [], ())
            for _, t, _, _ in self.args
        ]
        self.steps: list[Step] = []
        self.outputs: list[tuple[int, bool]] = []
        self.gathers: list[tuple[int, int, int]] = []  # (input slot, index slot, dim) per gather
        for op in block.ops:
            if isinstance(op, func.ReturnOp):
                self.outputs = [(self.slot[v], isinstance(v.type, TensorType)) for v in op.arguments]
                break
            planner = _PLANNERS.get(type(op))
            if planner is None:
                raise ExtentError(f"{op.name}: no extent rule for this op (evaluate_extents cannot run the fusion)")
            step = planner(op, self)
            if isinstance(op, G.GatherOp):
                self.gathers.append((self.slot[op.input], self.slot[op.index], op.axis))
            result = op.results[0].type if op.results else None
            if isinstance(result, TensorType) and BROADCAST in result.shape:
                step = _declared_broadcast(op, self.result_slot(op), step)
            for r in op.results:
                self._new_slot(r)
            self.steps.append(step)
        self.n = len(self.slot)

    def _new_slot(self, value: SSAValue) -> int:
        self.slot[value] = len(self.slot)
        return self.slot[value]

    def result_slot(self, op: Operation) -> int:
        """The slot the op's (single) result will get: slots are assigned in op order."""
        return len(self.slot)

    def _arg_label(self, i: int) -> str:
        return f"input {i} ({_describe(self.fusion.body.block.args[i])})"

    def evaluate(self, input_shapes: Sequence[Sequence[int] | None],
                 scalar_values: Sequence[Scalar | None]) -> RuntimeExtents:
        n_args = len(self.args)
        if len(input_shapes) != n_args or len(scalar_values) != n_args:
            raise ExtentError(
                f"fusion @{self.fusion.sym_name.data} has {n_args} inputs; got {len(input_shapes)} "
                f"input shapes and {len(scalar_values)} scalar values (one entry per input each, "
                "None where it does not apply)"
            )
        S: list = [None] * self.n
        B: list = [None] * self.n
        V: list = [None] * self.n
        for i, (slot, t, is_bool, is_int) in enumerate(self.args):
            if t is None:
                v = scalar_values[i]
                V[slot] = v if v is None else bool(v) if is_bool else int(v) if is_int else v
                continue
            shape = input_shapes[i]
            rank, static, flags = self.arg_checks[i]
            if shape is None or len(shape) != rank:
                self._bad_shape(i, t, shape)
            for d, e in static:
                if shape[d] != e:
                    self._bad_shape(i, t, shape)
            if rank and min(shape) < 0:
                self._bad_shape(i, t, shape)
            S[slot], B[slot] = tuple(shape), flags
        resizes: list[ResizeFacts] = []
        for step in self.steps:
            step(S, B, V, resizes)
        return RuntimeExtents(self, S, B, V, tuple(resizes))

    def _bad_shape(self, i: int, t: TensorType, shape: Sequence[int] | None) -> None:
        if shape is None:
            raise ExtentError(f"{self._arg_label(i)}: a tensor input needs a shape, got None")
        check_shape(self._arg_label(i), t, shape, ExtentError)
        raise AssertionError("unreachable: the shape passed every check")


def evaluate_extents(
    fusion: func.FuncOp | ExtentPlan,
    input_shapes: Sequence[Sequence[int] | None],
    scalar_values: Sequence[Scalar | None],
) -> RuntimeExtents:
    """Shapes and scalar values of every SSA value of `fusion` for the given inputs.

    Both lists have one entry per fusion input, in order: `input_shapes[i]` is the shape of
    tensor input i (None for a scalar input), `scalar_values[i]` the value of scalar input i
    (None for a tensor input, or when unknown: that only matters if an extent needs it).
    `fusion` may be an `ExtentPlan` (the fast path: build it once per fusion).
    Raises ExtentError (a ValueError) naming the op, dim and extents that disagree."""
    plan = fusion if isinstance(fusion, ExtentPlan) else ExtentPlan(fusion)
    return plan.evaluate(input_shapes, scalar_values)


def runtime_arguments(
    fusion: func.FuncOp | ExtentPlan, inputs: Sequence[object]
) -> tuple[list[Shape | None], list[Scalar | None]]:
    """(input_shapes, scalar_values) for `evaluate_extents` from arrays/tensors and scalars
    (anything with a `.shape` is a tensor; numpy scalars become Python numbers)."""
    plan = fusion if isinstance(fusion, ExtentPlan) else ExtentPlan(fusion)
    shapes: list[Shape | None] = []
    scalars: list[Scalar | None] = []
    for (_, t, _, _), x in zip(plan.args, inputs):
        if t is not None:
            shapes.append(tuple(x.shape))  # type: ignore[attr-defined]
            scalars.append(None)
        else:
            shapes.append(None)
            scalars.append(x.item() if hasattr(x, "item") else x)  # type: ignore[union-attr]
    return shapes, scalars


# --- planners: one per op type, each returning the op's step ------------------------------


def _declared_broadcast(op: Operation, out: int, step: Step) -> Step:
    """A result dim declared `b` broadcasts, whatever the op's rule says: concretize writes `b`
    where it decided broadcast (e.g. a pad whose widths it made static (0, 0)), and hand-written
    IR may too. Such a dim must have extent 1."""
    t = op.results[0].type
    assert isinstance(t, TensorType)
    declared = [d for d, e in enumerate(t.shape) if e == BROADCAST]

    def wrapped(S, B, V, R):
        step(S, B, V, R)
        shape, flags = S[out], B[out]
        for d in declared:
            if not flags[d]:
                break
        else:
            return
        for d in declared:
            if shape[d] != 1:
                raise ExtentError(
                    f"{op.name}: result dim {d} is declared broadcast ({t.describe()}) but has extent "
                    f"{shape[d]} at run time"
                )
        flags = list(flags)
        for d in declared:
            flags[d] = True
        B[out] = tuple(flags)

    return wrapped


def _plan_same(op: Operation, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.operands[0]], plan.result_slot(op)

    def step(S, B, V, R):
        S[out], B[out] = S[x], B[x]

    return step


def _plan_elementwise(op: Operation, plan: ExtentPlan) -> Step:
    tensors = [plan.slot[v] for v in op.operands if isinstance(v.type, TensorType)]
    out = plan.result_slot(op)
    if len(tensors) == 1:
        x = tensors[0]

        def unary_step(S, B, V, R):
            S[out], B[out] = S[x], B[x]

        return unary_step
    first, rest = tensors[0], tensors[1:]

    def step(S, B, V, R):
        shape, flags = S[first], B[first]
        for t in rest:
            s, f = S[t], B[t]
            if s == shape and f == flags:
                continue
            shape, flags = _join(op, shape, flags, s, f, S, tensors)
        S[out], B[out] = shape, flags

    return step


def _join(op: Operation, shape: Shape, flags: Flags, s: Shape, f: Flags, S: list, tensors: list[int]) -> tuple[Shape, Flags]:
    """Elementwise join: non-broadcast extents must agree; a broadcast dim takes the other's."""
    new_shape, new_flags = list(shape), list(flags)
    for d in range(len(s)):
        if f[d]:
            continue
        if new_flags[d]:
            new_shape[d], new_flags[d] = s[d], False
        elif new_shape[d] != s[d]:
            operands = [v for v in op.operands if isinstance(v.type, TensorType)]
            shown = ", ".join(f"{_describe(v)} = {list(S[t])}" for v, t in zip(operands, tensors))
            raise ExtentError(
                f"{_op_title(op)}: dim {d} has extents {new_shape[d]} and {s[d]} at run time, which "
                f"neither match nor broadcast (operands {shown})"
            )
    return tuple(new_shape), tuple(new_flags)


def _op_title(op: Operation) -> str:
    kind = getattr(op, "op_kind", None)
    return f"{op.name} {kind}" if kind is not None else op.name


def _plan_reduction(op: C.ReductionOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    dims = set(op.reduced_dims)
    keep = op.keepdim is not None

    def step(S, B, V, R):
        shape, flags = S[x], B[x]
        if keep:
            S[out] = tuple(1 if d in dims else e for d, e in enumerate(shape))
            B[out] = tuple(True if d in dims else b for d, b in enumerate(flags))
        else:
            S[out] = tuple(e for d, e in enumerate(shape) if d not in dims)
            B[out] = tuple(b for d, b in enumerate(flags) if d not in dims)

    return step


def _plan_broadcast(op: L.BroadcastOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    new = tuple(op.is_broadcast_dim)

    def step(S, B, V, R):
        shape, flags = iter(S[x]), iter(B[x])
        S[out] = tuple(1 if b else next(shape) for b in new)
        B[out] = tuple(True if b else next(flags) for b in new)

    return step


def _plan_broadcast_in_dim(op: L.BroadcastInDimOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    rank, mapped = op.out_type.rank, tuple(op.dims.get_values())

    def step(S, B, V, R):
        shape, flags = [1] * rank, [True] * rank
        for i, o in enumerate(mapped):
            shape[o], flags[o] = S[x][i], B[x][i]
        S[out], B[out] = tuple(shape), tuple(flags)

    return step


def _plan_squeeze(op: L.SqueezeOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    dims = tuple(op.dims.get_values())

    def step(S, B, V, R):
        shape, flags = S[x], B[x]
        for d in dims:
            if shape[d] != 1:
                raise ExtentError(f"{op.name}: dim {d} has extent {shape[d]} at run time, not 1")
        S[out] = tuple(e for d, e in enumerate(shape) if d not in dims)
        B[out] = tuple(b for d, b in enumerate(flags) if d not in dims)

    return step


def _plan_permute(op: L.PermuteOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    perm = tuple(op.dims.get_values())

    def step(S, B, V, R):
        shape, flags = S[x], B[x]
        S[out], B[out] = tuple(shape[p] for p in perm), tuple(flags[p] for p in perm)

    return step


def _declared(op: Operation, plan: ExtentPlan, extents: Sequence[SSAValue]) -> Callable[[list], Shape]:
    """Result shape of an op with a declared result type, one extent operand per `?` dim."""
    t = op.results[0].type
    assert isinstance(t, TensorType)
    it = iter(extents)
    # Per dim: (static extent, None) or (None, slot of the SSA extent).
    parts = [(None, plan.slot[next(it)]) if e == DYNAMIC else (1 if e == BROADCAST else e, None) for e in t.shape]
    if all(s is not None for s, _ in parts):
        static = tuple(s for s, _ in parts)
        return lambda V: static

    def shape(V: list) -> Shape:
        out = []
        for d, (s, slot) in enumerate(parts):
            if s is None:
                s = V[slot]
                if s is None:
                    raise _missing(op, f"the extent of result dim {d}")
                if s < 0:
                    raise ExtentError(f"{op.name}: result dim {d} has negative extent {s} at run time")
            out.append(int(s))
        return tuple(out)

    return shape


def _plan_expand(op: L.ExpandOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    shape_of, flags = _declared(op, plan, op.extents), _type_flags(op.out_type)

    def step(S, B, V, R):
        shape = shape_of(V)
        for d, (a, b) in enumerate(zip(S[x], shape)):
            # As the reference interpreter: an extent-1 dim may expand even when not typed `b`.
            if a != b and a != 1:
                raise ExtentError(f"{op.name}: dim {d} of extent {a} cannot expand to {b} at run time")
        S[out], B[out] = shape, flags

    return step


def _plan_reshape(op: L.ReshapeOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    shape_of, flags = _declared(op, plan, op.extents), _type_flags(op.out_type)

    def step(S, B, V, R):
        shape = shape_of(V)
        if math.prod(S[x]) != math.prod(shape):
            raise ExtentError(
                f"{op.name}: cannot reshape {list(S[x])} ({math.prod(S[x])} elements) to "
                f"{list(shape)} ({math.prod(shape)} elements) at run time"
            )
        S[out], B[out] = shape, flags

    return step


def _plan_full(op: F.FullOp, plan: ExtentPlan) -> Step:
    out = plan.result_slot(op)
    t = op.result.type
    assert isinstance(t, TensorType)
    shape_of, flags = _declared(op, plan, op.extents), _type_flags(t)

    def step(S, B, V, R):
        S[out], B[out] = shape_of(V), flags

    return step


def _plan_iota(op: F.IotaOp, plan: ExtentPlan) -> Step:
    length, out = plan.slot[op.length], plan.result_slot(op)
    t = op.result.type
    assert isinstance(t, TensorType)
    declared, flags = t.shape[0], _type_flags(t)

    def step(S, B, V, R):
        n = V[length]
        if n is None:
            raise _missing(op, "the iota length")
        n = int(n)
        if n < 0:
            raise ExtentError(f"{op.name}: length {n} is negative at run time")
        if declared not in (DYNAMIC, n) and not (declared == BROADCAST and n == 1):
            raise ExtentError(f"{op.name}: length {n} at run time differs from the result type {t.describe()}")
        S[out], B[out] = (n,), flags

    return step


def _plan_dim(op: F.DimOp, plan: ExtentPlan) -> Step:
    x, out, axis = plan.slot[op.input], plan.result_slot(op), op.axis

    def step(S, B, V, R):
        V[out] = S[x][axis]

    return step


# --- resize ops ------------------------------------------------------------------------------


def _mixed_slots(plan: ExtentPlan, values: Sequence[int | SSAValue]) -> tuple[list[int], list[tuple[int, int]]]:
    """(the static entries with 0 for SSA ones, [(position, slot)] of the SSA ones)."""
    template = [0 if isinstance(v, SSAValue) else v for v in values]
    return template, [(k, plan.slot[v]) for k, v in enumerate(values) if isinstance(v, SSAValue)]


def _resolve(op: Operation, parts: tuple[list[int], list[tuple[int, int]]], V: list,
             what: Callable[[int], str]) -> list[int]:
    template, dynamic = parts
    values = list(template)
    for k, slot in dynamic:
        v = V[slot]
        if v is None:
            raise _missing(op, what(k))
        values[k] = int(v)
    return values


def _plan_pad(op: R.PadOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    parts = _mixed_slots(plan, op.mixed_widths)
    resized, name = pad_resized_dims(op), op.name

    def what(k: int) -> str:
        return f"the {'left' if k % 2 == 0 else 'right'} pad width of dim {k // 2}"

    def step(S, B, V, R):
        shape = S[x]
        widths = _resolve(op, parts, V, what)
        shape_out, flags = list(shape), list(B[x])
        for d in resized:
            e, left, right = shape[d], widths[2 * d], widths[2 * d + 1]
            # out[i] = x[i - left] where in range, else the pad value (a crop on one side may
            # eat into the other side's padding): only a negative result extent is invalid.
            if e + left + right < 0:
                raise ExtentError(
                    f"{op.name}: dim {d} of extent {e} padded by ({left}, {right}) at run time has "
                    f"negative extent {e + left + right}"
                )
            shape_out[d] = e + left + right
            flags[d] = shape_out[d] == 1
        S[out], B[out] = tuple(shape_out), tuple(flags)
        decision = ResizeDecision(len(R), name, resized, tuple([flags[d] for d in resized]),
                                  tuple([(shape[d], widths[2 * d], widths[2 * d + 1]) for d in resized]))
        R.append(ResizeFacts(len(R), name, resized, (shape,), S[out], B[out], widths=tuple(widths), op=op,
                             decision=decision))

    return step


def _plan_slice(op: R.SliceOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    parts = _mixed_slots(plan, op.mixed_bounds)
    steps = tuple(op.steps.get_values())
    resized, name = slice_resized_dims(op), op.name
    resized_set = frozenset(resized)

    def what(k: int) -> str:
        return f"the {'start' if k % 2 == 0 else 'stop'} of dim {k // 2}"

    def step(S, B, V, R):
        shape = S[x]
        raw = _resolve(op, parts, V, what)
        bounds, shape_out = [], list(shape)
        for d, st in enumerate(steps):
            e = shape[d]
            if d not in resized_set:  # statically the whole dim
                bounds += (0, e)
                continue
            start, stop = raw[2 * d], raw[2 * d + 1]
            # torch semantics (shape_rules.normalize_slice_bound), inlined: this runs per execute.
            start = (0 if start < -e else start + e) if start < 0 else (start if start < e else e)
            stop = (0 if stop < -e else stop + e) if stop < 0 else (stop if stop < e else e)
            if stop < start:
                stop = start
            bounds += (start, stop)
            shape_out[d] = (stop - start + st - 1) // st
        flags = list(B[x])
        for d in resized:
            flags[d] = shape_out[d] == 1
        S[out], B[out] = tuple(shape_out), tuple(flags)
        decision = ResizeDecision(len(R), name, resized, tuple([flags[d] for d in resized]),
                                  tuple([(shape[d], bounds[2 * d], bounds[2 * d + 1]) for d in resized]))
        R.append(ResizeFacts(len(R), name, resized, (shape,), S[out], B[out],
                             bounds=tuple(bounds), steps=steps, op=op, decision=decision))

    return step


def _plan_cat(op: R.CatOp, plan: ExtentPlan) -> Step:
    inputs = [plan.slot[v] for v in op.inputs]
    out, dim, name = plan.result_slot(op), op.dim.value.data, op.name
    resized = (dim,)
    others = [d for d in range(op.inputs[0].type.rank) if d != dim]

    def step(S, B, V, R):
        shapes = tuple([S[i] for i in inputs])
        first = shapes[0]
        for k in range(1, len(shapes)):
            s = shapes[k]
            for d in others:
                if s[d] != first[d]:
                    raise ExtentError(
                        f"{op.name}: input {k} has extent {s[d]} in dim {d} at run time but input 0 "
                        f"has {first[d]}; all inputs must agree off the cat dim {dim}"
                    )
        shape = list(first)
        total = 0
        for s in shapes:
            total += s[dim]
        shape[dim] = total
        # Off the cat dim the result broadcasts only where every input does.
        flags = list(B[inputs[0]])
        for i in inputs[1:]:
            f = B[i]
            for d in others:
                if flags[d] and not f[d]:
                    flags[d] = False
        flags[dim] = total == 1
        S[out], B[out] = tuple(shape), tuple(flags)
        decision = ResizeDecision(len(R), name, resized, (flags[dim],), (tuple([s[dim] for s in shapes]),))
        R.append(ResizeFacts(len(R), name, resized, shapes, S[out], B[out], dim=dim, op=op, decision=decision))

    return step


# --- gather family ------------------------------------------------------------------------------


def _plan_gather(op: G.GatherOp, plan: ExtentPlan) -> Step:
    x, index, out, axis = plan.slot[op.input], plan.slot[op.index], plan.result_slot(op), op.axis

    def step(S, B, V, R):
        for d, (a, b) in enumerate(zip(S[x], S[index])):
            if d != axis and b > a:
                raise ExtentError(f"{op.name}: index extent {b} exceeds input extent {a} in dim {d} at run time")
        S[out], B[out] = S[index], B[index]

    return step


def _plan_take_along_axis(op: G.TakeAlongAxisOp, plan: ExtentPlan) -> Step:
    x, index, out, axis = plan.slot[op.input], plan.slot[op.index], plan.result_slot(op), op.axis

    def step(S, B, V, R):
        sx, si, fx, fi = S[x], S[index], B[x], B[index]
        shape, flags = list(si), list(fi)
        for d in range(len(sx)):
            if d == axis:
                continue
            if fi[d]:
                shape[d], flags[d] = sx[d], fx[d]
            elif not fx[d] and sx[d] != si[d]:
                raise ExtentError(
                    f"{op.name}: dim {d} has extents {sx[d]} (input) and {si[d]} (index) at run time; "
                    f"take_along_axis needs equal (or broadcast) extents off dim {axis}"
                )
        S[out], B[out] = tuple(shape), tuple(flags)

    return step


def _plan_index_select(op: G.IndexSelectOp, plan: ExtentPlan) -> Step:
    x, index, out, axis = plan.slot[op.input], plan.slot[op.index], plan.result_slot(op), op.axis

    def step(S, B, V, R):
        si, fi = S[index], B[index]
        n, fn = (si[0], fi[0]) if si else (1, False)
        S[out] = tuple(n if d == axis else e for d, e in enumerate(S[x]))
        B[out] = tuple(fn if d == axis else b for d, b in enumerate(B[x]))

    return step


# --- scalars --------------------------------------------------------------------------------------


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def _float_div(a: float, b: float) -> float:
    # IEEE semantics, as the device computes it (Python raises on a zero divisor).
    if b:
        return a / b
    if a == 0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _scalar(fn: Callable[..., Scalar], checks_zero: bool = False) -> Callable[[Operation, ExtentPlan], Step]:
    def planner(op: Operation, plan: ExtentPlan) -> Step:
        args, out = [plan.slot[v] for v in op.operands], plan.result_slot(op)

        def step(S, B, V, R):
            values = [V[a] for a in args]
            if None in values:
                V[out] = None
                return
            if checks_zero and values[1] == 0:
                raise ExtentError(f"{op.name}: division by zero while computing extents")
            V[out] = fn(*values)

        return step

    return planner


def _plan_constant(op: arith.ConstantOp, plan: ExtentPlan) -> Step:
    value = op.value.value.data  # type: ignore[union-attr]
    t = op.result.type
    if isinstance(t, IntegerType) and t.width.data == 1:
        value = value != 0
    out = plan.result_slot(op)

    def step(S, B, V, R):
        V[out] = value

    return step


_CMPI: dict[int, Callable[[int, int], bool]] = {
    0: lambda a, b: a == b, 1: lambda a, b: a != b, 2: lambda a, b: a < b,
    3: lambda a, b: a <= b, 4: lambda a, b: a > b, 5: lambda a, b: a >= b,
}


def _plan_cmpi(op: arith.CmpiOp, plan: ExtentPlan) -> Step:
    pred = op.predicate.value.data
    if pred not in _CMPI:
        raise ExtentError(f"{op.name}: unsigned predicate {pred} is not supported on extents")
    return _scalar(_CMPI[pred])(op, plan)


def _plan_select(op: arith.SelectOp, plan: ExtentPlan) -> Step:
    c, a, b, out = plan.slot[op.cond], plan.slot[op.lhs], plan.slot[op.rhs], plan.result_slot(op)

    def step(S, B, V, R):
        V[out] = None if V[c] is None else V[a] if V[c] else V[b]

    return step


_PLANNERS: dict[type[Operation], Callable[[Operation, ExtentPlan], Step]] = {
    C.UnaryOp: _plan_same,
    C.CastOp: _plan_same,
    C.BinaryOp: _plan_elementwise,
    C.WhereOp: _plan_elementwise,
    C.ReductionOp: _plan_reduction,  # type: ignore[dict-item]
    L.BroadcastOp: _plan_broadcast,  # type: ignore[dict-item]
    L.BroadcastInDimOp: _plan_broadcast_in_dim,  # type: ignore[dict-item]
    L.SqueezeOp: _plan_squeeze,  # type: ignore[dict-item]
    L.PermuteOp: _plan_permute,  # type: ignore[dict-item]
    L.ExpandOp: _plan_expand,  # type: ignore[dict-item]
    L.ReshapeOp: _plan_reshape,  # type: ignore[dict-item]
    R.PadOp: _plan_pad,  # type: ignore[dict-item]
    R.SliceOp: _plan_slice,  # type: ignore[dict-item]
    R.CatOp: _plan_cat,  # type: ignore[dict-item]
    G.GatherOp: _plan_gather,  # type: ignore[dict-item]
    G.TakeAlongAxisOp: _plan_take_along_axis,  # type: ignore[dict-item]
    G.IndexSelectOp: _plan_index_select,  # type: ignore[dict-item]
    F.IotaOp: _plan_iota,  # type: ignore[dict-item]
    F.FullOp: _plan_full,  # type: ignore[dict-item]
    F.DimOp: _plan_dim,  # type: ignore[dict-item]
    arith.ConstantOp: _plan_constant,  # type: ignore[dict-item]
    arith.AddiOp: _scalar(lambda a, b: a + b),
    arith.SubiOp: _scalar(lambda a, b: a - b),
    arith.MuliOp: _scalar(lambda a, b: a * b),
    arith.DivSIOp: _scalar(_c_div, checks_zero=True),
    arith.FloorDivSIOp: _scalar(lambda a, b: a // b, checks_zero=True),
    arith.CeilDivSIOp: _scalar(lambda a, b: -(-a // b), checks_zero=True),
    arith.RemSIOp: _scalar(lambda a, b: a - _c_div(a, b) * b, checks_zero=True),
    arith.MaxSIOp: _scalar(max),
    arith.MinSIOp: _scalar(min),
    arith.AddfOp: _scalar(lambda a, b: a + b),
    arith.SubfOp: _scalar(lambda a, b: a - b),
    arith.MulfOp: _scalar(lambda a, b: a * b),
    arith.DivfOp: _scalar(_float_div),
    arith.NegfOp: _scalar(lambda a: -a),
    arith.SIToFPOp: _scalar(float),
    arith.FPToSIOp: _scalar(int),
    arith.ExtFOp: _scalar(float),
    arith.TruncFOp: _scalar(float),
    arith.CmpiOp: _plan_cmpi,  # type: ignore[dict-item]
    arith.SelectOp: _plan_select,  # type: ignore[dict-item]
}


__all__ = [
    "ConcretizationInfo", "ExtentError", "ExtentPlan", "ResizeDecision", "ResizeFacts", "RuntimeExtents",
    "evaluate_extents", "pad_resized_dims", "resized_dims", "runtime_arguments", "slice_resized_dims",
]
