"""`fuser.welford`: the mean / variance / count reduction (nvFuser's WelfordOp), the op
under `fd.ops.welford`, `fd.ops.var` and `fd.ops.var_mean`.

    %avg = fuser.welford avg %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
    %m2  = fuser.welford var_sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
    %n   = fuser.welford n %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xi64>

Over the reduced `dims` of a floating-point input: `avg` is the mean, `var_sum` the sum of
squared deviations from it (M2; var = var_sum / (n - correction)), `n` the element count
(an i64 tensor of the result shape, as nvFuser's). avg and var_sum are in the accumulation
dtype: f32 for f16/bf16 inputs, the input dtype otherwise; `var`/`var_mean` round them to
the input dtype once at the end, as torch does.

Why one single-result op per statistic, not one op with three results: every stage of this
compiler keys an op by its single result (the op table's DimTie has no result index; the
extent planner, ExactDims, concretize's retyping, segmentation and the emitters all take
`results[0]`). The three statistics of one (input, dims) are one reduction all the same:
`decompose-welford` computes them from one shared sum and mean, and `dce` drops those nobody
reads (var alone never computes a count tensor).

Lowering: `decompose-welford` (passes/decompose_welford.py, in `fuser-preseg`) rewrites the op
before segmentation into the ops the row schedulers already fuse: mean = sum(x) / n,
var_sum = sum((x - mean)^2). Kept in registers or shared memory, a row is read from global
memory once, and the two-pass form is at least as stable as a one-pass Welford update (the
deviations are taken from the final mean, not a running one), so the op itself is never
emitted. The reference semantics are the same two-pass form in f64, for every input dtype."""

from __future__ import annotations

from enum import auto

import numpy as np
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    irdl_attr_definition,
    irdl_op_definition,
    prop_def,
)
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from fuser_dialect.interpreter import Value, cast_array, result_dtype
from fuser_dialect.op_base import check_result, tensor_type
from fuser_dialect.op_table import NotApplicable, follow_ties, op_title, register, result_dims
from fuser_dialect.ops_compute import DimsReduction, _plan_reduction, _reduction_shape, _reduction_ties
from fuser_dialect.types import FLOAT_DTYPES, TensorType


class WelfordStat(StrEnum):
    AVG = auto()
    VAR_SUM = auto()
    N = auto()


@irdl_attr_definition
class WelfordStatAttr(EnumAttribute[WelfordStat], SpacedOpaqueSyntaxAttribute):
    name = "fuser.welford_stat"


def accumulation_dtype(dtype: str) -> str:
    """The dtype avg and var_sum have for an input of `dtype`."""
    return "f32" if dtype in ("f16", "bf16") else dtype


@irdl_op_definition
class WelfordOp(DimsReduction):
    """One statistic of the Welford reduction of `input` over `dims` (see the module
    docstring); keepdim leaves broadcast dims in place of the reduced ones."""

    name = "fuser.welford"
    stat = prop_def(WelfordStatAttr)
    assembly_format = "$stat $input `dims` $dims (`keepdim` $keepdim^)? attr-dict `:` type($input) `->` type($result)"

    def __init__(self, stat: WelfordStat, input: SSAValue, dims: list[int], keepdim: bool, result_type: TensorType):
        super().__init__(("stat", WelfordStatAttr(stat)), input, dims, keepdim, result_type)

    @property
    def op_kind(self) -> WelfordStat:
        return self.stat.data

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        if t.dtype not in FLOAT_DTYPES:
            raise VerifyException(f"{op_title(self)}: needs a floating-point input, got {t.dtype}")
        dtype = "i64" if self.op_kind == WelfordStat.N else accumulation_dtype(t.dtype)
        check_result(self, result_dims(self), dtype, op_title(self))


OPS = [WelfordOp]
"""The ops of this family, in the order the dialect lists them."""
ATTRIBUTES = [WelfordStatAttr]


# --- semantics --------------------------------------------------------------------------


def _interpret_welford(op: WelfordOp, args: list[Value]) -> Value:
    """Two passes in f64 (the mean, then the squared deviations from it): stable for every
    input dtype. An empty reduction gives avg = nan and var_sum = 0, as torch's var_mean."""
    x = np.asarray(args[0]).astype(np.float64)
    axes = tuple(op.reduced_dims)
    keep = op.keepdim is not None
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if op.op_kind == WelfordStat.N:
        shape = np.sum(x, axis=axes, keepdims=keep).shape
        return np.full(shape, count, dtype=np.int64)
    mean = np.sum(x, axis=axes, keepdims=True) / count
    if op.op_kind == WelfordStat.AVG:
        stat = mean if keep else np.squeeze(mean, axis=axes)
    else:
        stat = np.sum(np.square(x - mean), axis=axes, keepdims=keep)
    return cast_array(stat, result_dtype(op))


register(
    WelfordOp,
    shape=_reduction_shape,
    interpret=_interpret_welford,
    plan_extents=_plan_reduction,
    layout=follow_ties(_reduction_ties),
    dim_ties=_reduction_ties,
    emitted=NotApplicable("decompose-welford (in fuser-preseg) rewrites it into sum/div/sub/mul before segmentation"),
)
