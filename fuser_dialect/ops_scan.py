"""Scans: inclusive cumulative sum, product, max and min along one dim (torch.cumsum,
torch.cumprod, and the values of torch.cummax / torch.cummin).

`fuser.scan <kind> %x dim d` keeps the input's shape. As in torch, sum and prod of integer
and bool inputs accumulate in and return i64; f16/bf16 inputs accumulate in f32 and every
element rounds once to the input dtype; max and min keep the dtype and propagate NaN (once a
NaN is seen, every later element of the line is NaN).

After the definition the op registers its pieces in the op table (fuser_dialect/op_table.py):
shape rule, reference semantics, run-time extent planner, layout rule and dim rule."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import I64, IntegerAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure

from fuser_dialect.extents import plan_same_shape
from fuser_dialect.interpreter import Value, cast_array, compute_dtype, result_dtype
from fuser_dialect.op_base import AlongDim, check_result, tensor_type
from fuser_dialect.op_table import Dims, TypeOf, op_title, register, same_dims, same_position
from fuser_dialect.ops_compute import ReductionKind, ReductionKindAttr
from fuser_dialect.shape_rules import ShapeError
from fuser_dialect.types import FLOAT_DTYPES, TensorType, format_dims

ScanKind = ReductionKind
"""A scan folds with the same four operators as a reduction (sum, prod, max, min)."""

_WIDENING = (ReductionKind.SUM, ReductionKind.PROD)


def scan_result_dtype(kind: ScanKind, dtype: str) -> str:
    """torch's result dtype: sums and products of integers and bools are i64."""
    if kind in _WIDENING and dtype not in FLOAT_DTYPES:
        return "i64"
    return dtype


def scan_shape(op: str, t: TensorType, dim: int) -> Dims:
    """A scan keeps its input's shape; `dim` must be one of its dims."""
    if not 0 <= dim < t.rank:
        raise ShapeError(f"{op}: dim {dim} is out of range for the input {format_dims(t.shape)} (rank {t.rank})")
    return t.shape


@irdl_op_definition
class ScanOp(AlongDim, IRDLOperation):
    """Inclusive scan of `input` along `dim`: out[..., i, ...] = fold(in[..., 0..i, ...])."""

    name = "fuser.scan"
    kind = prop_def(ReductionKindAttr)
    input = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$kind $input `dim` $dim attr-dict `:` type($input) `->` type($result)"

    def __init__(self, kind: ScanKind, input: SSAValue, dim: int, result_type: TensorType):
        super().__init__(operands=[input], result_types=[result_type],
                         properties={"kind": ReductionKindAttr(kind), "dim": IntegerAttr(dim, i64)})

    @property
    def op_kind(self) -> ScanKind:
        return self.kind.data

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        dims = scan_shape(op_title(self), t, self.axis)
        check_result(self, dims, scan_result_dtype(self.op_kind, t.dtype), op_title(self))


OPS = [ScanOp]
"""The ops of this family, in the order the dialect lists them."""


def _scan_shape(op: ScanOp, type_of: TypeOf) -> Dims:
    return scan_shape(op_title(op), type_of(op.input), op.axis)


def accumulator_dtype(op: ScanOp) -> np.dtype:
    """What the scan folds in: f32 for f16/bf16, i64 for a widening scan of integers."""
    return compute_dtype(result_dtype(op))


_ACCUMULATE = {
    ReductionKind.SUM: np.cumsum,
    ReductionKind.PROD: np.cumprod,
    # np.maximum / np.minimum propagate NaN, as torch.cummax / torch.cummin do.
    ReductionKind.MAX: np.maximum.accumulate,
    ReductionKind.MIN: np.minimum.accumulate,
}


def _interpret_scan(op: ScanOp, args: list[Value]) -> Value:
    x = np.asarray(args[0]).astype(accumulator_dtype(op))
    with np.errstate(over="ignore", invalid="ignore"):
        scanned = _ACCUMULATE[op.op_kind](x, axis=op.axis)
    return cast_array(scanned, result_dtype(op))


register(
    ScanOp,
    shape=_scan_shape,
    interpret=_interpret_scan,
    plan_extents=plan_same_shape,
    layout=same_position,
    dim_ties=same_dims,
)
