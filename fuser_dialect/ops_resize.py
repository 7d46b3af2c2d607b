"""The resize family: pad, slice and cat change extents (output = input + left + right).

pad widths and slice bounds are mixed lists: static ints, or SSA i64 values printed
in place (`[0:%w, 1:1]`), so that `concretize` can make them static later."""

from __future__ import annotations

from collections.abc import Sequence

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

from fuser_dialect import shape_rules as rules
from fuser_dialect.canonicalization import PadCanonicalization, SliceCanonicalization
from fuser_dialect.op_base import (
    check_mixed,
    check_result,
    mixed_values,
    parse_mixed_pairs,
    print_mixed_pairs,
    split_mixed,
    tensor_type,
)
from fuser_dialect.types import TensorType, is_scalar_type
from xdsl.utils.exceptions import VerifyException


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
        dims = rules.pad(self.name, t, self.widths.get_values())
        check_result(self, dims, t.dtype)

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
        dims = rules.slice_(self.name, t, self.bounds.get_values(), self.steps.get_values())
        check_result(self, dims, t.dtype)

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
        dims = rules.cat(self.name, types, self.dim.value.data)
        check_result(self, dims, types[0].dtype)
