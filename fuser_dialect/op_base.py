"""Shared pieces of the fuser ops: the result check every verifier ends with, and the
`[0, %a, 3]` syntax of mixed static/dynamic integer lists (pad widths, slice bounds)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.ir import Operation, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from fuser_dialect.types import BROADCAST, DYNAMIC, TensorType, format_dims


def tensor_type(op: Operation, value: SSAValue, what: str) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise VerifyException(f"{op.name}: {what} must be a !fuser.tensor, got {value.type}")
    return value.type


def _compatible(inferred: int, declared: int) -> bool:
    # A dynamic extent may be refined (concretize does this); extent 1 may be broadcast or not.
    return inferred == declared or inferred == DYNAMIC or {inferred, declared} <= {1, BROADCAST}


def check_result(op: Operation, dims: Sequence[int], dtype: str) -> None:
    """The declared result type must agree with what the op's shape rule inferred."""
    result = op.results[0].type
    assert isinstance(result, TensorType)
    if result.stride_order is not None:
        raise VerifyException(f"{op.name}: only fusion inputs carry a layout; the result has order {list(result.stride_order)}")
    if result.dtype != dtype:
        raise VerifyException(f"{op.name}: result dtype is {result.dtype}, expected {dtype}")
    if len(dims) != result.rank:
        raise VerifyException(
            f"{op.name}: result has rank {result.rank} ({format_dims(result.shape)}), "
            f"expected rank {len(dims)} ({format_dims(dims)})"
        )
    for i, (inferred, declared) in enumerate(zip(dims, result.shape)):
        if not _compatible(inferred, declared):
            raise VerifyException(
                f"{op.name}: result dim {i} is {format_dims([declared])[1:-1]}, expected "
                f"{format_dims([inferred])[1:-1]} (result {format_dims(result.shape)}, "
                f"inferred {format_dims(dims)})"
            )


def mixed_values(static: DenseArrayBase, dynamic: Sequence[SSAValue]) -> list[int | SSAValue]:
    it = iter(dynamic)
    return [next(it) if v == DYNAMIC else v for v in static.get_values()]


def split_mixed(values: Sequence[int | SSAValue]) -> tuple[DenseArrayBase, list[SSAValue]]:
    static = [DYNAMIC if isinstance(v, SSAValue) else int(v) for v in values]
    return DenseArrayBase.from_list(i64, static), [v for v in values if isinstance(v, SSAValue)]


def check_mixed(op: Operation, static: DenseArrayBase, dynamic: Sequence[SSAValue], what: str) -> None:
    n = sum(1 for v in static.get_values() if v == DYNAMIC)
    if n != len(dynamic):
        raise VerifyException(f"{op.name}: {what} has {n} dynamic entries but {len(dynamic)} SSA values")


def print_mixed_pairs(printer: Printer, values: Sequence[int | SSAValue], sep: str, group: int) -> None:
    """Prints `[a:b, c:d]` (group=2) or `[a:b:s, ...]` (group=3) lists of ints and SSA values."""
    printer.print_string(" [")
    for k in range(0, len(values), group):
        if k:
            printer.print_string(", ")
        for j in range(group):
            if j:
                printer.print_string(sep)
            v = values[k + j]
            if isinstance(v, SSAValue):
                printer.print_ssa_value(v)
            else:
                printer.print_string(str(v))
    printer.print_string("]")


def parse_mixed_pairs(parser: Parser, group: int, sep: str) -> list[int | UnresolvedOperand]:
    def parse_item() -> int | UnresolvedOperand:
        operand = parser.parse_optional_unresolved_operand()
        return operand if operand is not None else parser.parse_integer()

    def parse_group() -> list[int | UnresolvedOperand]:
        items = [parse_item()]
        for _ in range(group - 1):
            parser.parse_punctuation(sep)
            items.append(parse_item())
        return items

    groups = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parse_group)
    return [v for g in groups for v in g]
