"""The resize family: pad, slice and cat change extents (output = input + left + right).

pad widths and slice bounds are mixed lists: static ints, or SSA i64 values printed
in place (`[0:%w, 1:1]`), so that `concretize` can make them static later.

After the definitions, each op registers its pieces in the op table (fuser_dialect/op_table.py):
shape rule, reference semantics, run-time extent planner, layout rule and dim rule."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from fuser_dialect import shape_rules as rules
from fuser_dialect.canonicalization import PadCanonicalization, SliceCanonicalization
from fuser_dialect.extents import (
    TO_THE_END,
    ExtentError,
    ExtentPlan,
    ResizeDecision,
    ResizeFacts,
    Step,
    constant_value,
    mixed_slots,
    resolve_mixed,
)
from fuser_dialect.interpreter import InterpreterError, Value, mixed_ints, pad_array
from fuser_dialect.op_base import (
    check_mixed,
    check_result,
    mixed_values,
    parse_mixed_pairs,
    print_mixed_pairs,
    split_mixed,
    tensor_type,
)
from fuser_dialect.op_table import DimTie, Dims, TypeOf, register, result_dims, same_position
from fuser_dialect.ops_factory import DimOp
from fuser_dialect.shape_rules import normalize_slice_bound
from fuser_dialect.types import TensorType, is_scalar_type


def _print_tail(printer: Printer, op: IRDLOperation) -> None:
    printer.print_op_attributes(op.attributes)
    printer.print_string(" : ")
    printer.print_attribute(op.operands[0].type)
    printer.print_string(" -> ")
    printer.print_attribute(op.results[0].type)


def _resolve_mixed(parser: Parser, items) -> list[int | SSAValue]:
    return [v if isinstance(v, int) else parser.resolve_operand(v, i64) for v in items]


@irdl_op_definition
class PadOp(IRDLOperation):
    """Pads (or, with negative widths, crops) each dim by (left, right) with `value`."""

    name = "fuser.pad"
    input = operand_def(TensorType)
    dyn_widths = var_operand_def(i64)
    value = operand_def()
    widths = prop_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)
    traits = traits_def(Pure(), PadCanonicalization())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(self, input: SSAValue, widths: Sequence[int | SSAValue], value: SSAValue, result_type: TensorType):
        static, dynamic = split_mixed(widths)
        super().__init__(operands=[input, dynamic, value], result_types=[result_type],
                         properties={"widths": static})

    @property
    def mixed_widths(self) -> list[int | SSAValue]:
        """[left0, right0, left1, right1, ...] in dim order."""
        return mixed_values(self.widths, self.dyn_widths)

    def verify_(self) -> None:
        check_mixed(self, self.widths, self.dyn_widths, "widths")
        if not is_scalar_type(self.value.type):
            raise VerifyException(f"{self.name}: pad value must be a scalar, got {self.value.type}")
        t = tensor_type(self, self.input, "input")
        check_result(self, result_dims(self), t.dtype)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.input)
        print_mixed_pairs(printer, self.mixed_widths, ":", 2)
        printer.print_string(" value ")
        printer.print_ssa_value(self.value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : (")
        printer.print_attribute(self.input.type)
        printer.print_string(", ")
        printer.print_attribute(self.value.type)
        printer.print_string(") -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> PadOp:
        input = parser.parse_unresolved_operand()
        widths = parse_mixed_pairs(parser, 2, ":")
        parser.parse_keyword("value")
        value = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        parser.parse_punctuation("(")
        in_type = parser.parse_type()
        parser.parse_punctuation(",")
        value_type = parser.parse_type()
        parser.parse_punctuation(")")
        parser.parse_punctuation("->")
        out_type = parser.parse_type()
        op = cls(parser.resolve_operand(input, in_type), _resolve_mixed(parser, widths),
                 parser.resolve_operand(value, value_type), out_type)  # type: ignore[arg-type]
        op.attributes.update(attrs)
        return op


@irdl_op_definition
class SliceOp(IRDLOperation):
    """Per dim `start:stop:step` with torch semantics (negative from the end, clamped)."""

    name = "fuser.slice"
    input = operand_def(TensorType)
    dyn_bounds = var_operand_def(i64)
    bounds = prop_def(DenseArrayBase.constr(i64))
    steps = prop_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)
    traits = traits_def(Pure(), SliceCanonicalization())

    def __init__(self, input: SSAValue, bounds: Sequence[int | SSAValue], steps: Sequence[int], result_type: TensorType):
        static, dynamic = split_mixed(bounds)
        super().__init__(operands=[input, dynamic], result_types=[result_type],
                         properties={"bounds": static, "steps": DenseArrayBase.from_list(i64, list(steps))})

    @property
    def mixed_bounds(self) -> list[int | SSAValue]:
        """[start0, stop0, start1, stop1, ...] in dim order."""
        return mixed_values(self.bounds, self.dyn_bounds)

    def verify_(self) -> None:
        check_mixed(self, self.bounds, self.dyn_bounds, "bounds")
        t = tensor_type(self, self.input, "input")
        check_result(self, result_dims(self), t.dtype)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.input)
        bounds = self.mixed_bounds
        steps = self.steps.get_values()
        triples: list[int | SSAValue] = []
        for i, step in enumerate(steps):
            triples += [bounds[2 * i], bounds[2 * i + 1], step]
        print_mixed_pairs(printer, triples, ":", 3)
        _print_tail(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> SliceOp:
        input = parser.parse_unresolved_operand()
        list_start = parser.pos
        triples = parse_mixed_pairs(parser, 3, ":")
        list_end = parser.pos
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        in_type = parser.parse_type()
        parser.parse_punctuation("->")
        out_type = parser.parse_type()
        bounds = [v for k, v in enumerate(triples) if k % 3 != 2]
        steps = triples[2::3]
        if not all(isinstance(s, int) for s in steps):
            parser.raise_error("fuser.slice: steps must be static integers", list_start, list_end)
        op = cls(parser.resolve_operand(input, in_type), _resolve_mixed(parser, bounds), steps, out_type)  # type: ignore[arg-type]
        op.attributes.update(attrs)
        return op


@irdl_op_definition
class CatOp(IRDLOperation):
    name = "fuser.cat"
    inputs = var_operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$inputs `dim` $dim attr-dict `:` `(` type($inputs) `)` `->` type($result)"

    def __init__(self, inputs: Sequence[SSAValue], dim: int, result_type: TensorType):
        super().__init__(operands=[inputs], result_types=[result_type],
                         properties={"dim": IntegerAttr(dim, i64)})

    def verify_(self) -> None:
        types = [tensor_type(self, v, f"input {k}") for k, v in enumerate(self.inputs)]
        check_result(self, result_dims(self), types[0].dtype)


OPS = [PadOp, SliceOp, CatOp]
"""The ops of this family, in the order the dialect lists them."""


# --- which dims a resize op changes (see fuser_dialect/extents.py) ------------------------


def _is_zero(v: int | SSAValue) -> bool:
    return constant_value(v) == 0


def pad_resized_dims(op: PadOp) -> tuple[int, ...]:
    """The dims a pad statically changes: widths other than the constant (0, 0)."""
    w = op.mixed_widths
    return tuple(d for d in range(len(w) // 2) if not (_is_zero(w[2 * d]) and _is_zero(w[2 * d + 1])))


def _is_whole_stop(op: SliceOp, t: TensorType, d: int, stop: int | SSAValue) -> bool:
    if isinstance(stop, SSAValue) and isinstance(stop.owner, DimOp):
        return stop.owner.input is op.input and stop.owner.axis == d
    value = constant_value(stop)
    if value is None:
        return False
    extent = t.static_extent(d)
    return value >= TO_THE_END or (extent is not None and value >= extent)


def slice_resized_dims(op: SliceOp) -> tuple[int, ...]:
    """The dims a slice statically changes (see fuser_dialect/extents.py)."""
    t = op.input.type
    assert isinstance(t, TensorType)
    bounds = op.mixed_bounds
    return tuple(
        d for d, step in enumerate(op.steps.get_values())
        if not (step == 1 and _is_zero(bounds[2 * d]) and _is_whole_stop(op, t, d, bounds[2 * d + 1]))
    )


def _unresized_ties(op: PadOp | SliceOp, resized: tuple[int, ...]) -> list[DimTie]:
    return [DimTie(0, d, d) for d in range(op.input.type.rank) if d not in resized]


# --- fuser.pad ----------------------------------------------------------------------------


def _pad_shape(op: PadOp, type_of: TypeOf) -> Dims:
    return rules.pad(op.name, type_of(op.input), op.widths.get_values())


def _pad_ties(op: PadOp) -> list[DimTie]:
    return _unresized_ties(op, pad_resized_dims(op))


def _interpret_pad(op: PadOp, args: list[Value]) -> Value:
    n = len(op.dyn_widths)
    widths = mixed_ints(op.widths.get_values(), args[1:1 + n])
    return pad_array(args[0], widths, args[1 + n])


def _plan_pad(op: PadOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    parts = mixed_slots(plan, op.mixed_widths)
    resized, name = pad_resized_dims(op), op.name

    def what(k: int) -> str:
        return f"the {'left' if k % 2 == 0 else 'right'} pad width of dim {k // 2}"

    def step(S, B, V, R):
        shape = S[x]
        widths = resolve_mixed(op, parts, V, what)
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


register(
    PadOp,
    shape=_pad_shape,
    interpret=_interpret_pad,
    plan_extents=_plan_pad,
    layout=same_position,
    dim_ties=_pad_ties,
)


# --- fuser.slice --------------------------------------------------------------------------


def _slice_shape(op: SliceOp, type_of: TypeOf) -> Dims:
    return rules.slice_(op.name, type_of(op.input), op.bounds.get_values(), op.steps.get_values())


def _slice_ties(op: SliceOp) -> list[DimTie]:
    return _unresized_ties(op, slice_resized_dims(op))


def _interpret_slice(op: SliceOp, args: list[Value]) -> Value:
    x = args[0]
    bounds = mixed_ints(op.bounds.get_values(), args[1:])
    index = []
    for d, step in enumerate(op.steps.get_values()):
        start = normalize_slice_bound(bounds[2 * d], x.shape[d])
        stop = max(normalize_slice_bound(bounds[2 * d + 1], x.shape[d]), start)
        index.append(slice(start, stop, step))
    return np.ascontiguousarray(x[tuple(index)])


def _plan_slice(op: SliceOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    parts = mixed_slots(plan, op.mixed_bounds)
    steps = tuple(op.steps.get_values())
    resized, name = slice_resized_dims(op), op.name
    resized_set = frozenset(resized)

    def what(k: int) -> str:
        return f"the {'start' if k % 2 == 0 else 'stop'} of dim {k // 2}"

    def step(S, B, V, R):
        shape = S[x]
        raw = resolve_mixed(op, parts, V, what)
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


register(
    SliceOp,
    shape=_slice_shape,
    interpret=_interpret_slice,
    plan_extents=_plan_slice,
    layout=same_position,
    dim_ties=_slice_ties,
)


# --- fuser.cat ----------------------------------------------------------------------------


def _cat_shape(op: CatOp, type_of: TypeOf) -> Dims:
    return rules.cat(op.name, [type_of(v) for v in op.inputs], op.dim.value.data)


def _cat_ties(op: CatOp) -> list[DimTie]:
    """Off the cat dim every input ties to the result; the cat dim is a sum, tied to none."""
    dim = op.dim.value.data
    return [DimTie(k, d, d) for k, v in enumerate(op.inputs) for d in range(v.type.rank) if d != dim]


def _interpret_cat(op: CatOp, args: list[Value]) -> Value:
    dim = op.dim.value.data
    rank = args[0].ndim
    for k, a in enumerate(args[1:], 1):
        for d in range(rank):
            if d != dim and a.shape[d] != args[0].shape[d]:
                raise InterpreterError(
                    f"{op.name}: input {k} has extent {a.shape[d]} in dim {d} at run time, input 0 has {args[0].shape[d]}"
                )
    return np.concatenate(args, axis=dim)


def _plan_cat(op: CatOp, plan: ExtentPlan) -> Step:
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


register(
    CatOp,
    shape=_cat_shape,
    interpret=_interpret_cat,
    plan_extents=_plan_cat,
    layout=same_position,
    dim_ties=_cat_ties,
)
