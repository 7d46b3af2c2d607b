"""Shared pieces of the fuser ops: the result check every verifier ends with, `axis` of the ops
along one dim, and the
`[0, %a, 3]` syntax of mixed static/dynamic integer lists (pad widths, slice bounds)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.ir import Operation, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from fuser_dialect.types import BROADCAST, DYNAMIC, DYNAMIC_ENTRY, TensorType, format_dims


class AlongDim:
    """Mixed into ops with a `dim` property (an i64 IntegerAttr): the dim as a Python int."""

    @property
    def axis(self) -> int:
        return self.dim.value.data  # type: ignore[attr-defined]


def tensor_type(op: Operation, value: SSAValue, what: str) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise VerifyException(f"{op.name}: {what} must be a !fuser.tensor, got {value.type}")
    return value.type


def _compatible(inferred: int, declared: int) -> bool:
    # A dynamic extent may be refined (concretize does this); extent 1 may be broadcast or not.
    return inferred == declared or inferred == DYNAMIC or {inferred, declared} <= {1, BROADCAST}


def check_result(op: Operation, dims: Sequence[int], dtype: str, label: str | None = None) -> None:
    """The declared result type must agree with what the op's shape rule inferred.
    `label` names the op in messages (default: its name; e.g. "fuser.binary add")."""
    name = label or op.name
    result = op.results[0].type
    assert isinstance(result, TensorType)
    if result.stride_order is not None:
        raise VerifyException(f"{name}: only fusion inputs carry a layout; the result has order {list(result.stride_order)}")
    if result.dtype != dtype:
        raise VerifyException(f"{name}: result dtype is {result.dtype}, expected {dtype}")
    if len(dims) != result.rank:
        raise VerifyException(
            f"{name}: result has rank {result.rank} ({format_dims(result.shape)}), "
            f"expected rank {len(dims)} ({format_dims(dims)})"
        )
    for i, (inferred, declared) in enumerate(zip(dims, result.shape)):
        if not _compatible(inferred, declared):
            raise VerifyException(
                f"{name}: result dim {i} is {format_dims([declared])[1:-1]}, expected "
                f"{format_dims([inferred])[1:-1]} (result {format_dims(result.shape)}, "
                f"inferred {format_dims(dims)})"
            )


def mixed_values(static: DenseArrayBase, dynamic: Sequence[SSAValue]) -> list[int | SSAValue]:
    it = iter(dynamic)
    return [next(it) if v == DYNAMIC_ENTRY else v for v in static.get_values()]


def split_mixed(values: Sequence[int | SSAValue]) -> tuple[DenseArrayBase, list[SSAValue]]:
    static = [DYNAMIC_ENTRY if isinstance(v, SSAValue) else int(v) for v in values]
    return DenseArrayBase.from_list(i64, static), [v for v in values if isinstance(v, SSAValue)]


def check_mixed(op: Operation, static: DenseArrayBase, dynamic: Sequence[SSAValue], what: str) -> None:
    n = sum(1 for v in static.get_values() if v == DYNAMIC_ENTRY)
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


_STATIC_LIST = re.compile(r"\[([-\d\s:,]*)\]")


def parse_mixed_pairs(parser: Parser, group: int, sep: str) -> list[int | UnresolvedOperand]:
    # Fast path: an all-static list (the common case once concretized) is read from the
    # raw text in one regex match instead of token by token.
    start = parser.pos
    match = _STATIC_LIST.match(parser.lexer.input.content, start)
    if match is not None:
        groups = [g.split(sep) for g in match.group(1).split(",")] if match.group(1).strip() else []
        try:
            values = [int(v) for g in groups for v in g]
        except ValueError:
            values = None  # e.g. `1:` or `::`: let the token path report it
        if values is not None and all(len(g) == group for g in groups):
            parser.lexer.pos = match.end()
            parser._parser_state.current_token = parser.lexer.lex()  # pyright: ignore[reportPrivateUsage]
            return values  # pyright: ignore[reportReturnType]

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
