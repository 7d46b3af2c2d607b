"""The gather family: gather (torch.gather, non-exact), take_along_axis (exact, fusible)
and index_select (1-D index)."""

from __future__ import annotations

from xdsl.dialects.builtin import I64, IntegerAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure

from fuser_dialect import shape_rules as rules
from fuser_dialect.op_base import check_result, tensor_type
from fuser_dialect.types import TensorType


class _IndexOp(IRDLOperation):
    input = operand_def(TensorType)
    index = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$input `[` $index `]` `dim` $dim attr-dict `:` `(` type($input) `,` type($index) `)` `->` type($result)"
    )
    rule = staticmethod(rules.gather)

    def __init__(self, input: SSAValue, index: SSAValue, dim: int, result_type: TensorType):
        super().__init__(operands=[input, index], result_types=[result_type],
                         properties={"dim": IntegerAttr(dim, i64)})

    @property
    def axis(self) -> int:
        return self.dim.value.data

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        index = tensor_type(self, self.index, "index")
        dims = type(self).rule(self.name, t, index, self.axis)
        check_result(self, dims, t.dtype)


@irdl_op_definition
class GatherOp(_IndexOp):
    """torch.gather: out[i][j] = input[i][index[i][j]] for dim 1; index.size(d) <= input.size(d)."""

    name = "fuser.gather"
    rule = staticmethod(rules.gather)


@irdl_op_definition
class TakeAlongAxisOp(_IndexOp):
    """np.take_along_axis: like gather, but index extents equal the input's off `dim`."""

    name = "fuser.take_along_axis"
    rule = staticmethod(rules.take_along_axis)


@irdl_op_definition
class IndexSelectOp(_IndexOp):
    """torch.index_select: picks whole slices along `dim` with a 1-D index."""

    name = "fuser.index_select"
    rule = staticmethod(rules.index_select)
