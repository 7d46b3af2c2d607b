"""Ops that create tensors (iota, full) and the extent query (dim)."""

from __future__ import annotations

from xdsl.dialects.builtin import I64, IntegerAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def, traits_def, var_operand_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from fuser_dialect.canonicalization import DimCanonicalization
from fuser_dialect.op_base import tensor_type
from fuser_dialect.types import DYNAMIC, TensorType, is_scalar_type


@irdl_op_definition
class DimOp(IRDLOperation):
    """The extent of one dim of a tensor, as an i64 scalar."""

    name = "fuser.dim"
    input = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    result = result_def(i64)
    traits = traits_def(Pure(), DimCanonicalization())
    assembly_format = "$input `,` $dim attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, dim: int):
        super().__init__(operands=[input], result_types=[i64], properties={"dim": IntegerAttr(dim, i64)})

    @property
    def axis(self) -> int:
        return self.dim.value.data

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        if not 0 <= self.axis < t.rank:
            raise VerifyException(f"{self.name}: dim {self.axis} is out of range for {t.describe()} (rank {t.rank})")


@irdl_op_definition
class IotaOp(IRDLOperation):
    """[start, start + step, ...] of `length` elements (a 1-D tensor)."""

    name = "fuser.iota"
    length = operand_def(i64)
    start = operand_def()
    step = operand_def()
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$length `,` $start `,` $step attr-dict `:` `(` type($start) `,` type($step) `)` `->` type($result)"

    def __init__(self, length: SSAValue, start: SSAValue, step: SSAValue, result_type: TensorType):
        super().__init__(operands=[length, start, step], result_types=[result_type])

    def verify_(self) -> None:
        t = tensor_type(self, self.result, "result")
        if t.rank != 1:
            raise VerifyException(f"{self.name}: result must be 1-D, got {t.describe()}")
        for what, v in (("start", self.start), ("step", self.step)):
            if not is_scalar_type(v.type):
                raise VerifyException(f"{self.name}: {what} must be a scalar, got {v.type}")


@irdl_op_definition
class FullOp(IRDLOperation):
    """A tensor of the result type filled with `value`; one i64 extent operand per `?` dim."""

    name = "fuser.full"
    extents = var_operand_def(i64)
    value = operand_def()
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "(`(` $extents^ `)`)? `value` $value attr-dict `:` `(` type($value) `)` `->` type($result)"

    def __init__(self, extents: list[SSAValue], value: SSAValue, result_type: TensorType):
        super().__init__(operands=[extents, value], result_types=[result_type])

    def verify_(self) -> None:
        t = tensor_type(self, self.result, "result")
        n = t.shape.count(DYNAMIC)
        if n != len(self.extents):
            raise VerifyException(
                f"{self.name}: result {t.describe()} has {n} dynamic extent(s) but "
                f"{len(self.extents)} extent operand(s) were given (one per `?`)"
            )
        if not is_scalar_type(self.value.type):
            raise VerifyException(f"{self.name}: fill value must be a scalar, got {self.value.type}")
