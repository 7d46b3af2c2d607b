"""Ops that only move or re-label dims: broadcast, broadcast_in_dim, squeeze, expand,
reshape, permute. Dynamic result extents are SSA i64 operands, one per `?` result dim."""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def, traits_def, var_operand_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from fuser_dialect import shape_rules as rules
from fuser_dialect.canonicalization import (
    BroadcastInDimCanonicalization,
    NoDimsCanonicalization,
    PermuteCanonicalization,
    SameDimsCanonicalization,
)
from fuser_dialect.op_base import check_result, tensor_type
from fuser_dialect.types import DYNAMIC, TensorType, format_dims

_TYPES = "attr-dict `:` type($input) `->` type($result)"


def _check_dynamic_extents(op: IRDLOperation, extents) -> None:
    result = op.results[0].type
    assert isinstance(result, TensorType)
    n = result.shape.count(DYNAMIC)
    if n != len(extents):
        raise VerifyException(
            f"{op.name}: result {format_dims(result.shape)} has {n} dynamic extent(s) but "
            f"{len(extents)} extent operand(s) were given (one per `?`)"
        )


class _Unary(IRDLOperation):
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    @property
    def in_type(self) -> TensorType:
        return tensor_type(self, self.input, "input")

    @property
    def out_type(self) -> TensorType:
        return tensor_type(self, self.result, "result")


@irdl_op_definition
class BroadcastOp(_Unary):
    """Inserts broadcast dims at the result positions `dims` (nvFuser's is_broadcast_dim)."""

    name = "fuser.broadcast"
    dims = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure(), NoDimsCanonicalization())
    assembly_format = "$input `dims` $dims " + _TYPES

    def __init__(self, input: SSAValue, new_dims: list[int], result_type: TensorType):
        super().__init__(operands=[input], result_types=[result_type],
                         properties={"dims": DenseArrayBase.from_list(i64, new_dims)})

    @property
    def is_broadcast_dim(self) -> list[bool]:
        new = set(self.dims.get_values())
        return [i in new for i in range(self.out_type.rank)]

    def verify_(self) -> None:
        rank = self.out_type.rank
        new = self.dims.get_values()
        bad = [d for d in new if not 0 <= d < rank]
        if bad:
            raise VerifyException(f"{self.name}: broadcast dim {bad[0]} is out of range for the rank-{rank} result")
        if len(set(new)) != len(new):
            raise VerifyException(f"{self.name}: broadcast dims {list(new)} contain duplicates")
        if rank - len(new) != self.in_type.rank:
            raise VerifyException(
                f"{self.name}: a rank-{rank} result with broadcast dims {list(new)} keeps "
                f"{rank - len(new)} input dim(s), but the input {format_dims(self.in_type.shape)} "
                f"has rank {self.in_type.rank}"
            )
        dims = rules.broadcast(self.name, self.in_type, self.is_broadcast_dim)
        check_result(self, dims, self.in_type.dtype)


@irdl_op_definition
class BroadcastInDimOp(_Unary):
    """Input dim i becomes result dim dims[i]; the other result dims are broadcast."""

    name = "fuser.broadcast_in_dim"
    dims = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure(), BroadcastInDimCanonicalization())
    assembly_format = "$input `dims` $dims " + _TYPES

    def __init__(self, input: SSAValue, broadcast_dims: list[int], result_type: TensorType):
        super().__init__(operands=[input], result_types=[result_type],
                         properties={"dims": DenseArrayBase.from_list(i64, broadcast_dims)})

    def verify_(self) -> None:
        dims = rules.broadcast_in_dim(self.name, self.in_type, self.out_type.rank, self.dims.get_values())
        check_result(self, dims, self.in_type.dtype)


@irdl_op_definition
class SqueezeOp(_Unary):
    name = "fuser.squeeze"
    dims = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure(), NoDimsCanonicalization())
    assembly_format = "$input `dims` $dims " + _TYPES

    def __init__(self, input: SSAValue, dims: list[int], result_type: TensorType):
        super().__init__(operands=[input], result_types=[result_type],
                         properties={"dims": DenseArrayBase.from_list(i64, dims)})

    def verify_(self) -> None:
        dims = rules.squeeze(self.name, self.in_type, self.dims.get_values())
        check_result(self, dims, self.in_type.dtype)


@irdl_op_definition
class PermuteOp(_Unary):
    """Result dim i is input dim dims[i]."""

    name = "fuser.permute"
    dims = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure(), PermuteCanonicalization())
    assembly_format = "$input `dims` $dims " + _TYPES

    def __init__(self, input: SSAValue, dims: list[int], result_type: TensorType):
        super().__init__(operands=[input], result_types=[result_type],
                         properties={"dims": DenseArrayBase.from_list(i64, dims)})

    def verify_(self) -> None:
        dims = rules.permute(self.name, self.in_type, self.dims.get_values())
        check_result(self, dims, self.in_type.dtype)


class _WithExtents(_Unary):
    # IRDL orders operands subclass-first: restate `input` here so that it stays operand 0
    # (before the variadic extents), as __init__, the interpreter and passes expect.
    input = operand_def(TensorType)
    extents = var_operand_def(i64)
    traits = traits_def(Pure(), SameDimsCanonicalization())
    assembly_format = "$input (`(` $extents^ `)`)? " + _TYPES

    def __init__(self, input: SSAValue, extents: list[SSAValue], result_type: TensorType):
        super().__init__(operands=[input, extents], result_types=[result_type])


@irdl_op_definition
class ExpandOp(_WithExtents):
    """Broadcast dims take the result's extent (static, or an `extents` operand per `?`)."""

    name = "fuser.expand"

    def verify_(self) -> None:
        _check_dynamic_extents(self, self.extents)
        dims = rules.expand(self.name, self.in_type, self.out_type.shape)
        check_result(self, dims, self.in_type.dtype)


@irdl_op_definition
class ReshapeOp(_WithExtents):
    name = "fuser.reshape"

    def verify_(self) -> None:
        _check_dynamic_extents(self, self.extents)
        dims = rules.reshape(self.name, self.in_type, self.out_type.shape)
        check_result(self, dims, self.in_type.dtype)
