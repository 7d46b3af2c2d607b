"""Copies: `fuser.set` (nvFuser's `set`) and `fuser.segment_set` (nvFuser's `segment_set`).

    %c = fuser.set %x : !fuser.tensor<?x8xf32> -> !fuser.tensor<?x8xf32>
    %s = fuser.segment_set %x : !fuser.tensor<?x8xf32> -> !fuser.tensor<?x8xf32>

Both yield their input unchanged (same dtype, same dims). `segment_set` is also a hard
segmentation hint: its result is written to memory by one kernel and read by the next, so
the segmenter starts a new kernel after it (lowering/segmentation/segment_sets.py). Neither op carries a
layout: a fusion output layout is set on `fd.add_output`.

After the definitions, both ops register their pieces in the op table (fuser_dialect/op_table.py)."""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, result_def, traits_def
from xdsl.traits import Pure

from fuser_dialect.extents import plan_same_shape
from fuser_dialect.interpreter import Value
from fuser_dialect.op_base import check_result, tensor_type
from fuser_dialect.op_table import Dims, TypeOf, register, same_dims, same_position
from fuser_dialect.types import TensorType


class _Copy(IRDLOperation):
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, result_type: TensorType | None = None):
        if result_type is None:
            assert isinstance(input.type, TensorType)
            result_type = input.type.without_layout()
        super().__init__(operands=[input], result_types=[result_type])

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        tensor_type(self, self.result, "result")
        check_result(self, t.shape, t.dtype)


@irdl_op_definition
class SetOp(_Copy):
    """A copy of the input."""

    name = "fuser.set"


@irdl_op_definition
class SegmentSetOp(_Copy):
    """A copy of the input that ends a kernel: its consumers run in a later one."""

    name = "fuser.segment_set"


OPS = [SetOp, SegmentSetOp]
"""The ops of this family, in the order the dialect lists them."""


def _copy_shape(op: _Copy, type_of: TypeOf) -> Dims:
    return type_of(op.input).shape


def _interpret_copy(op: _Copy, args: list[Value]) -> Value:
    return np.array(args[0], copy=True)


for _op in OPS:
    register(
        _op,
        shape=_copy_shape,
        interpret=_interpret_copy,
        plan_extents=plan_same_shape,
        layout=same_position,
        dim_ties=same_dims,
    )
