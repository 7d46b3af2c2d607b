"""The fuser tensor type and the dtypes it carries.

`!fuser.tensor<?x8xbxf32>` is a rank-3 f32 tensor whose dim 0 has a dynamic extent,
dim 1 a static extent of 8 and dim 2 is a broadcast dim (extent 1, broadcasts in
binary ops). A fusion input may also say the layout it arrives in:
`!fuser.tensor<?x?xf32, order [0, 1]>` is column-major (stride_order[i] ranks dim i's
stride, 0 = fastest, as in nvFuser). No `order` means row-major and dense.

The whole body is parsed with one regular expression instead of token by token:
the type is re-parsed at every use of a value, so its parse cost dominates large files.
"""

from __future__ import annotations

import math

import re
from collections.abc import Sequence
from enum import Enum

import numpy as np
from xdsl.utils.exceptions import VerifyException
from xdsl.dialects.builtin import (
    BFloat16Type,
    ComplexType,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Data, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer

DYNAMIC = -1
"""Extent of a dimension only known at run time (printed `?`)."""
BROADCAST = -2
"""A broadcast dimension: extent 1, broadcasts against any extent (printed `b`)."""
DYNAMIC_ENTRY = -(2**63)
"""In a mixed static/SSA list (pad widths, slice bounds): "this entry is an SSA value".
Not DYNAMIC: -1 is a legal static pad width (crop by one) and slice bound (the last
element). INT64_MIN as in MLIR's ShapedType::kDynamic (xDSL's DYNAMIC_INDEX)."""


class DataType(Enum):
    """nvFuser's DataType names, mapped to the element types of the IR. `Null` is nvFuser's
    "no dtype" placeholder: it names no element type, so anything that needs one refuses it."""

    Double = "f64"
    Float = "f32"
    Half = "f16"
    BFloat16 = "bf16"
    Float8_e4m3fn = "f8E4M3FN"
    Float8_e5m2 = "f8E5M2"
    ComplexFloat = "c64"
    ComplexDouble = "c128"
    Int = "i64"
    Int32 = "i32"
    Bool = "i1"
    Null = "null"

    @property
    def element_type(self) -> Attribute:
        return ELEMENT_TYPES[self.real_dtype()]

    @property
    def numpy(self) -> np.dtype:
        return numpy_dtype(self.real_dtype())

    def real_dtype(self, what: str = "a tensor, cast, fill or scalar") -> str:
        """The dtype name; DataType.Null (a placeholder) raises, naming `what` needed a dtype."""
        if self is DataType.Null:
            raise ValueError(
                f"DataType.Null is a placeholder with no element type: {what} needs a real dtype "
                f"(one of {', '.join(d.name for d in DataType if d is not DataType.Null)})"
            )
        return self.value


ELEMENT_TYPES: dict[str, Attribute] = {
    "f64": Float64Type(),
    "f32": Float32Type(),
    "f16": Float16Type(),
    "bf16": BFloat16Type(),
    "f8E4M3FN": Float8E4M3FNType(),
    "f8E5M2": Float8E5M2Type(),
    "c64": ComplexType(Float32Type()),
    "c128": ComplexType(Float64Type()),
    "i64": i64,
    "i32": i32,
    "i1": i1,
}
_NAME_OF_TYPE = {v: k for k, v in ELEMENT_TYPES.items()}
FLOAT_DTYPES = ("f64", "f32", "f16", "bf16")
"""Real floating-point dtypes that ops compute on (fp8 is storage only: see FP8_DTYPES)."""
FP8_DTYPES = ("f8E4M3FN", "f8E5M2")
"""Storage-only floats: cast and data movement take them; arithmetic needs a cast to f32 first."""
COMPLEX_DTYPES = ("c64", "c128")
COMPLEX_PART = {"c64": "f32", "c128": "f64"}
"""The real dtype of a complex dtype's parts (what real/imag/abs return)."""
INT_DTYPES = ("i64", "i32")


def dtype_name(element_type: Attribute) -> str:
    """'f32', 'bf16', 'i1', ... for an element type; raises for unsupported ones."""
    try:
        return _NAME_OF_TYPE[element_type]
    except KeyError:
        raise ValueError(f"unsupported element type {element_type}") from None


def numpy_dtype(name: str) -> np.dtype:
    if name in _ML_DTYPES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, _ML_DTYPES[name]))
    return np.dtype({"f64": np.float64, "f32": np.float32, "f16": np.float16, "c64": np.complex64,
                     "c128": np.complex128, "i64": np.int64, "i32": np.int32, "i1": np.bool_}[name])


_ML_DTYPES = {"bf16": "bfloat16", "f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2"}
"""Dtypes numpy lacks, by their ml_dtypes name."""


def dtype_of_numpy(dtype: np.dtype) -> str:
    """Inverse of numpy_dtype; raises ValueError naming the dtype when unsupported."""
    for name in ELEMENT_TYPES:
        if numpy_dtype(name) == dtype:
            return name
    raise ValueError(f"numpy dtype {dtype} has no fuser equivalent")


@irdl_attr_definition
class IntTupleAttr(Data[tuple[int, ...]]):
    """A compact tuple of ints: one hashable attribute instead of one IntAttr per entry."""

    name = "fuser.ints"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> tuple[int, ...]:
        with parser.in_angle_brackets():
            values = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        return tuple(values)

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<[{', '.join(map(str, self.data))}]>")


_TYPE_BODY = re.compile(
    r"\s*((?:(?:\?|b|\d+)x)*)(f64|f32|f16|bf16|f8E4M3FN|f8E5M2|c64|c128|i64|i32|i1)\s*"
    r"(?:,\s*order\s*\[([\d\s,]*)\]\s*)?$"
)


def _explain_malformed(body: str) -> str:
    """What is wrong with a type body the regex rejected (the error path only)."""
    shape, comma, rest = body.partition(",")
    *dims, dtype = shape.strip().split("x")
    if dtype not in ELEMENT_TYPES:
        return f"'{dtype}' is not an element type (expected one of {', '.join(ELEMENT_TYPES)} after the dims)"
    for i, token in enumerate(dims):
        if not (token in ("?", "b") or token.isdigit()):
            return f"dim {i} is '{token}': expected `?` (dynamic), `b` (broadcast) or a static extent"
    if comma:
        return f"expected `order [...]` after the comma, got '{rest.strip()}'"
    return "expected `<dims x ... x dtype>` optionally followed by `, order [...]`"


def _dim_str(d: int) -> str:
    return "?" if d == DYNAMIC else "b" if d == BROADCAST else str(d)


def format_dims(dims: Sequence[int]) -> str:
    """The `[?, 8, b]` form used in diagnostics."""
    return "[" + ", ".join(_dim_str(d) for d in dims) + "]"


@irdl_attr_definition
class TensorType(ParametrizedAttribute, TypeAttribute):
    """A fuser tensor: element type, per-dim extent or broadcast, optional input layout."""

    name = "fuser.tensor"

    element_type: Attribute
    dims: IntTupleAttr
    order: IntTupleAttr

    def __init__(self, element_type: Attribute | str, dims: Sequence[int], order: Sequence[int] = ()):
        if isinstance(element_type, str):
            element_type = ELEMENT_TYPES[element_type]
        super().__init__(element_type, IntTupleAttr(tuple(dims)), IntTupleAttr(tuple(order)))

    def verify(self) -> None:
        """Kernels index with 64-bit signed arithmetic: each static extent, and the element count
        of the static extents together, must be below 2**63 (else no index fits)."""
        static = [d for d in self.dims.data if d > 0]
        if math.prod(static) > INT64_MAX:
            raise VerifyException(f"fuser.tensor: the static extents {'x'.join(map(str, static))} hold "
                                  f"{math.prod(static)} elements, which does not fit in 64 bits (a tensor's "
                                  "element count must be < 2**63)")

    # -- queries ---------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Per-dim DYNAMIC, BROADCAST or a static extent."""
        return self.dims.data

    @property
    def rank(self) -> int:
        return len(self.dims.data)

    @property
    def dtype(self) -> str:
        return dtype_name(self.element_type)

    @property
    def stride_order(self) -> tuple[int, ...] | None:
        """The input layout, or None for the default row-major dense layout."""
        return self.order.data or None

    def is_broadcast(self, dim: int) -> bool:
        return self.dims.data[dim] == BROADCAST

    def static_extent(self, dim: int) -> int | None:
        """1 for a broadcast dim, the extent for a static one, None when dynamic."""
        d = self.dims.data[dim]
        return None if d == DYNAMIC else 1 if d == BROADCAST else d

    def with_dims(self, dims: Sequence[int]) -> TensorType:
        return TensorType(self.element_type, dims)

    def with_dtype(self, dtype: str | Attribute) -> TensorType:
        return TensorType(dtype, self.dims.data)

    def without_layout(self) -> TensorType:
        return self if not self.order.data else TensorType(self.element_type, self.dims.data)

    def describe(self) -> str:
        """`f32[?, 8, b]`: the form diagnostics quote."""
        return f"{self.dtype}{format_dims(self.shape)}"

    # -- syntax ----------------------------------------------------------
    def print_parameters(self, printer: Printer) -> None:
        body = "".join(_dim_str(d) + "x" for d in self.dims.data) + self.dtype
        if self.order.data:
            body += f", order [{', '.join(map(str, self.order.data))}]"
        printer.print_string(f"<{body}>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        start = parser.pos
        # Fast path: a body already parsed once (a fusion spells few distinct types, each
        # many times) is looked up, not re-scanned. A body has no `>`, so `find` delimits
        # it; anything unusual (nesting, errors) takes the full path below.
        content = parser.lexer.input.content
        end = content.find(">", start)
        if end > start and content[start] == "<":
            params = _PARSED_BODIES.get(content[start + 1 : end])
            if params is not None:
                parser.lexer.pos = end + 1
                parser._parser_state.current_token = parser.lexer.lex()  # pyright: ignore[reportPrivateUsage]
                return params
        # Raw scan of `<...>`: see the module docstring for why this bypasses the lexer.
        body = parser._parse_dialect_symbol_body()  # pyright: ignore[reportPrivateUsage]
        match = _TYPE_BODY.match(body)
        if match is None:
            parser.raise_error(f"malformed fuser tensor type '<{body}>': {_explain_malformed(body)}", start, parser.pos)
        dims_text, dtype, order_text = match.groups()
        dims = tuple(
            DYNAMIC if d == "?" else BROADCAST if d == "b" else int(d)
            for d in dims_text.split("x")[:-1]
        )
        too_large = next((d for d in dims if d > INT64_MAX), None)
        if too_large is not None:
            parser.raise_error(f"extent {too_large} does not fit in 64 bits (extents must be < 2**63)", start, parser.pos)
        static = [d for d in dims if d > 0]
        if math.prod(static) > INT64_MAX:
            parser.raise_error(f"the static extents {'x'.join(map(str, static))} hold {math.prod(static)} elements, which "
                               "does not fit in 64 bits (a tensor's element count must be < 2**63)", start, parser.pos)
        order: tuple[int, ...] = ()
        if order_text is not None:
            order = tuple(int(v) for v in order_text.replace(",", " ").split())
            if sorted(order) != list(range(len(dims))):
                parser.raise_error(
                    f"order {list(order)} is not a permutation of the {len(dims)} dims of the tensor",
                    start,
                    parser.pos,
                )
        params = (ELEMENT_TYPES[dtype], IntTupleAttr(dims), IntTupleAttr(order))
        if len(_PARSED_BODIES) < _MAX_PARSED_BODIES:
            _PARSED_BODIES[body] = params
        return params


INT64_MAX = 2**63 - 1
"""Kernels index with 64-bit signed arithmetic: a larger static extent cannot be emitted."""

_PARSED_BODIES: dict[str, tuple[Attribute, IntTupleAttr, IntTupleAttr]] = {}
"""Type body text -> parsed parameters (attributes are immutable, so they can be shared)."""
_MAX_PARSED_BODIES = 4096

SCALAR_TYPES = (Float64Type(), Float32Type(), i64, i32, i1)


def is_scalar_type(t: Attribute) -> bool:
    """f64, f32, i64, i32 or i1: the scalar types ops accept (others have no fuser dtype)."""
    return t in SCALAR_TYPES
