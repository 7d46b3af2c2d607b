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

Static and symbolic extents are one domain where they must be equal (`ExactDims`: the exact
dim ties of the op table, through dims that never broadcast). An input `?` dim tied to a static
extent — `x: ?x?` times `broadcast_in_dim(w, [64, 4096], [1])` — is checked once, first, with
the input's dims: `input 0 (f32[?, ?]) dim 1 has extent 2048 but the fusion needs 4096: the dim
is tied to fuser.expand -> f32[64, 4096], dim 1`; `concretize` then writes the static extent
into every type of that class.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerAttr, IntegerType
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from fuser_dialect.errors import FuserValueError
from fuser_dialect.inputs import check_shape
from fuser_dialect.op_table import DimTie, dim_ties, extent_planner, op_title
from fuser_dialect.types import BROADCAST, DYNAMIC, TensorType
from fuser_dialect.union_find import UnionFind

Scalar = int | float | bool
Shape = tuple[int, ...]
Flags = tuple[bool, ...]

TO_THE_END = 2**62
"""A static slice stop at least this large means "to the end of the dim"."""


class ExtentError(FuserValueError):
    """Extents or scalar values that cannot run: mismatched extents, a pad that crops more
    than the extent, a missing scalar value that an extent depends on. A ValueError and, as
    every error fuser raises on purpose, a RuntimeError (fuser_dialect/errors.py)."""


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
    broadcast_expands: tuple[tuple[int, tuple[int, ...]], ...] = ()
    """(position among the fusion's expands, dims) for each expand whose non-`b` input dims
    have extent 1 and expand in this run: `concretize` makes those dims (and every extent
    exactly tied to them) broadcast, so kernels read them at index 0."""


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

    def broadcast_expands(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """(position, dims) of the expands that expand a non-`b` input dim of extent 1."""
        found = []
        for k, (source, out) in enumerate(self.plan.expands):
            a, flags, b = self._shapes[source], self._flags[source], self._shapes[out]
            dims = tuple(d for d, (x, y) in enumerate(zip(a, b)) if x == 1 and y != 1 and not flags[d])
            if dims:
                found.append((k, dims))
        return tuple(found)

    def concretization(self, resize_extents: bool = True) -> ConcretizationInfo:
        """The decisions `concretize` takes for these extents (see ConcretizationInfo)."""
        gathers = self.exact_gathers() if self.plan.gathers else ()
        expands = self.broadcast_expands() if self.plan.expands else ()
        resizes = tuple([r.decision if resize_extents else r.decision._replace(extents=None)  # type: ignore[union-attr]
                         for r in self.resizes])
        return ConcretizationInfo(resize_extents, resizes, gathers, expands)  # type: ignore[arg-type]


# --- exact dims: extents equal by construction --------------------------------------------


DimKey = tuple[SSAValue, int | None]
"""(tensor value, dim), or (i64 scalar, None) for an extent scalar: a `fuser.dim`, an extent
operand of expand/reshape/full, the length of an iota."""


class ExactDims:
    """Which extents of a fusion are equal at run time by construction, and which of those
    classes are static.

    Two extents share a class when an exact dim tie (op_table.DimTie) joins them and neither
    end broadcasts (a broadcast dim has extent 1 and takes the other side's extent, so it
    ties to nothing). A class is static when a member is: a static extent of a type (not
    broadcast), an `arith.constant` extent scalar, or a fact given to `fix` (concretize's
    resize extents). Every run that passes the extent checks has these equalities, so a
    static class is static for every such run: `concretize` writes the extent into the
    types, and `ExtentPlan` checks each input dim in a static class once, before anything
    else, naming the member it is tied to.

    `broadcasts(value)`: a tensor's broadcast flags in the run at hand. None: no run at hand,
    so every dim that may broadcast in some run counts as broadcast — declared `b`, a `?` (or
    extent-1) dim tied to nothing (a resized dim of pad/slice/cat broadcasts when its extent
    is 1), and a dim all of whose ties come from such dims (an elementwise result dim
    broadcasts when all its operands' do).

    `expands_decided`: the run's flags already say which `?` dims expand (concretize's
    decisions, which are in the cache key), so an inexact tie (an expand's kept dim) holds
    wherever neither end broadcasts: every run with those decisions has equal extents there."""

    def __init__(self, fusion: func.FuncOp, broadcasts: Callable[[SSAValue], Flags] | None = None,
                 expands_decided: bool = False):
        # Members are numbered (an int hashes far faster than an SSAValue): a tensor's dims
        # get consecutive numbers from its base, a scalar one number.
        self._base: dict[SSAValue, int] = {}
        self._members: list[DimKey] = []
        self.flags: dict[SSAValue, Flags] = {}
        self.classes: UnionFind[int] = UnionFind()
        self._fixed: dict[int, tuple[int, DimKey]] = {}
        declared: list[tuple[int, int]] = []  # (member, extent) the IR itself gives
        block = fusion.body.block
        for arg in block.args:
            declared += self._add(arg, broadcasts, None)
        union, find = self.classes.union, self.classes.find
        for op in block.ops:
            if not op.results:
                continue
            result = op.results[0]
            ties = dim_ties(op)
            operands = op.operands if ties else ()
            flags = None
            if broadcasts is None and isinstance(result.type, TensorType):
                flags = self._may_broadcast(result.type, ties, operands)
            declared += self._add(result, broadcasts, flags)
            for tie in ties:
                if not tie.exact and not expands_decided:
                    continue
                a = self._member(operands[tie.operand], tie.operand_dim)
                b = self._member(result, tie.result_dim)
                if a is not None and b is not None:
                    union(a, b)  # the operand's root stays: a fresh result joins in one step
        for member, extent in declared:
            self._fixed.setdefault(find(member), (extent, self._members[member]))

    def _add(self, value: SSAValue, broadcasts: Callable[[SSAValue], Flags] | None,
             flags: Flags | None) -> list[tuple[int, int]]:
        """Numbers `value`'s members; returns the extents its type or constant gives them."""
        base = self._base[value] = len(self._members)
        t = value.type
        if not isinstance(t, TensorType):
            self._members.append((value, None))
            constant = constant_value(value)
            return [(base, constant)] if isinstance(constant, int) else []
        if flags is None:  # an input, or a run at hand
            flags = broadcasts(value) if broadcasts is not None else type_flags(t)
        self.flags[value] = flags
        self._members += [(value, d) for d in range(t.rank)]
        return [(base + d, e) for d, e in enumerate(t.shape) if e >= 0 and not flags[d]]

    def _may_broadcast(self, t: TensorType, ties: Sequence[DimTie], operands: Sequence[SSAValue]) -> Flags:
        sources: list[list[bool]] = [[] for _ in range(t.rank)]
        for tie in ties:
            if tie.result_dim is not None:
                sources[tie.result_dim].append(
                    tie.operand_dim is not None and self.flags[operands[tie.operand]][tie.operand_dim])
        return tuple([e == BROADCAST or (all(src) if src else e in (DYNAMIC, 1))
                      for e, src in zip(t.shape, sources)])

    def _member(self, value: SSAValue, dim: int | None) -> int | None:
        """The number of one end of a tie; None for a broadcast dim (it ties to nothing)."""
        if dim is None:
            return None if isinstance(value.type, TensorType) else self._base[value]
        return None if self.flags[value][dim] else self._base[value] + dim

    def _find(self, key: DimKey) -> int:
        value, dim = key
        return self.classes.find(self._base[value] + (dim or 0))

    def fix(self, key: DimKey, extent: int, origin: DimKey) -> None:
        """Records that `key`'s class has `extent`, because `origin` has it (the first fact
        recorded for a class stays: the run-time checks keep facts from disagreeing)."""
        self._fixed.setdefault(self._find(key), (extent, origin))

    def tied_to(self, keys: Sequence[DimKey]) -> list[DimKey]:
        """Every tensor dim in the classes of `keys` (the keys included)."""
        roots = {self._find(k) for k in keys}
        find = self.classes.find
        return [m for i, m in enumerate(self._members) if m[1] is not None and find(i) in roots]

    def static_extent(self, key: DimKey) -> int | None:
        found = self._fixed.get(self._find(key))
        return None if found is None else found[0]

    def origin(self, key: DimKey) -> DimKey | None:
        """The member whose static extent the class of `key` has."""
        found = self._fixed.get(self._find(key))
        return None if found is None else found[1]


def _describe_member(key: DimKey) -> str:
    value, dim = key
    if dim is None:
        return f"the constant extent {constant_value(value)}"
    if isinstance(value, BlockArgument):
        return f"input {value.index} ({describe(value)}) dim {dim}"
    assert isinstance(value, OpResult)
    return f"{op_title(value.op)} -> {describe(value)}, dim {dim}"


# --- the plan ---------------------------------------------------------------------------


# A step runs on the value slots: S (shapes), B (broadcast flags), V (scalar values) and the
# list of resize facts found so far.
Step = Callable[[list, list, list, list], None]


def constant_value(v: int | SSAValue) -> int | None:
    """The value of a static entry or of an SSA `arith.constant` (concretize folds `fuser.dim`
    of static dims into constants: they must read as the static entries they are)."""
    if not isinstance(v, SSAValue):
        return v
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def describe(value: SSAValue) -> str:
    t = value.type
    return t.describe() if isinstance(t, TensorType) else str(t)


def type_flags(t: TensorType) -> Flags:
    return tuple(d == BROADCAST for d in t.shape)


def missing_value(op: Operation, what: str) -> ExtentError:
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
            (t.rank, [(d, 1 if e == BROADCAST else e) for d, e in enumerate(t.shape) if e != DYNAMIC], type_flags(t))
            if t is not None else (0, [], ())
            for _, t, _, _ in self.args
        ]
        self.steps: list[Step] = []
        self.outputs: list[tuple[int, bool]] = []
        self.gathers: list[tuple[int, int, int]] = []  # (input slot, index slot, dim) per gather (its planner adds it)
        self.expands: list[tuple[int, int]] = []  # (input slot, result slot) per expand (its planner adds it)
        # Whether any extent of the IR is static (a type's or a constant's): only then can an
        # input's `?` dim be tied to one (ExactDims, which costs about twice this walk).
        static_extents = any(t is not None and max(t.shape, default=-1) >= 0 for _, t, _, _ in self.args)
        for op in block.ops:
            if isinstance(op, func.ReturnOp):
                self.outputs = [(self.slot[v], isinstance(v.type, TensorType)) for v in op.arguments]
                break
            planner = extent_planner(op)
            if planner is None:
                raise ExtentError(f"{op.name}: no extent rule for this op (evaluate_extents cannot run the fusion)")
            step = planner(op, self)
            result = op.results[0].type if op.results else None
            if isinstance(result, TensorType):
                if BROADCAST in result.shape:
                    step = _declared_broadcast(op, self.result_slot(op), step)
                static_extents = static_extents or max(result.shape, default=-1) >= 0
            elif isinstance(op, arith.ConstantOp) and constant_value(op.results[0]) is not None:
                static_extents = True  # an integer constant: perhaps an extent operand
            for r in op.results:
                self._new_slot(r)
            self.steps.append(step)
        self.n = len(self.slot)
        self.requirements = self._tied_requirements() if static_extents else []

    def _tied_requirements(self) -> list[tuple[int, int, int, str]]:
        """(input, dim, extent, what it is tied to) for each `?` input dim whose extent is
        fixed by a static extent it is exactly tied to (see ExactDims)."""
        args = self.fusion.body.block.args
        if not any(t is not None and DYNAMIC in t.shape for _, t, _, _ in self.args):
            return []
        exact = ExactDims(self.fusion)
        found = []
        for i, (_, t, _, _) in enumerate(self.args):
            if t is None:
                continue
            for d, e in enumerate(t.shape):
                extent = exact.static_extent((args[i], d)) if e == DYNAMIC else None
                if extent is not None:
                    origin = exact.origin((args[i], d))
                    assert origin is not None
                    found.append((i, d, extent, _describe_member(origin)))
        return found

    def _new_slot(self, value: SSAValue) -> int:
        self.slot[value] = len(self.slot)
        return self.slot[value]

    def result_slot(self, op: Operation) -> int:
        """The slot the op's (single) result will get: slots are assigned in op order."""
        return len(self.slot)

    def _arg_label(self, i: int) -> str:
        return f"input {i} ({describe(self.fusion.body.block.args[i])})"

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
        for i, d, extent, origin in self.requirements:
            got = input_shapes[i][d]  # type: ignore[index]
            if got != extent:
                raise ExtentError(
                    f"{self._arg_label(i)} dim {d} has extent {got} but the fusion needs {extent}: "
                    f"the dim is tied to {origin}"
                )
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


# --- helpers of the ops' planners (registered next to each op) ------------------------------


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


def plan_same_shape(op: Operation, plan: ExtentPlan) -> Step:
    """The planner of an op whose result has its first operand's shape and broadcast flags."""
    x, out = plan.slot[op.operands[0]], plan.result_slot(op)

    def step(S, B, V, R):
        S[out], B[out] = S[x], B[x]

    return step


def declared_shape(op: Operation, plan: ExtentPlan, extents: Sequence[SSAValue]) -> Callable[[list], Shape]:
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
                    raise missing_value(op, f"the extent of result dim {d}")
                if s < 0:
                    raise ExtentError(f"{op.name}: result dim {d} has negative extent {s} at run time")
            out.append(int(s))
        return tuple(out)

    return shape


def mixed_slots(plan: ExtentPlan, values: Sequence[int | SSAValue]) -> tuple[list[int], list[tuple[int, int]]]:
    """(the static entries with 0 for SSA ones, [(position, slot)] of the SSA ones)."""
    template = [0 if isinstance(v, SSAValue) else v for v in values]
    return template, [(k, plan.slot[v]) for k, v in enumerate(values) if isinstance(v, SSAValue)]


def resolve_mixed(op: Operation, parts: tuple[list[int], list[tuple[int, int]]], V: list,
             what: Callable[[int], str]) -> list[int]:
    template, dynamic = parts
    values = list(template)
    for k, slot in dynamic:
        v = V[slot]
        if v is None:
            raise missing_value(op, what(k))
        values[k] = int(v)
    return values


__all__ = [
    "ConcretizationInfo", "ExtentError", "ExtentPlan", "ResizeDecision", "ResizeFacts", "RuntimeExtents",
    "evaluate_extents", "runtime_arguments",
]
