"""`fuser.scatter`: torch.scatter — the input with `src` written at the positions the index names.

    %r = fuser.scatter %x[%index] = %src dim 1 : (x's type, index's type, src's type) -> r's type

For dim 1 of a 2-D input: r = x, then r[i][index[i][j]] = src[i][j] for every (i, j) of the
index. The index may be smaller than the input off `dim` and smaller than src everywhere; only
its own extent is scattered. Where several index elements name one position, the last one
along `dim` wins (torch leaves this unspecified; a fixed rule keeps every backend and schedule
bit-identical). An index outside 0..extent-1 is an IndexError, as for gather.

Kernels compute scatter as a *pull*: each result element scans the index along `dim` for
elements naming it (lowering/codegen/emit_cuda.py), so it fuses with the producers of all three
operands and the consumers of the result, writes nothing it does not own, and costs
index.size(dim) compares per element: made for the few positions per row of one-hot targets
and label smoothing, not for permutations of long rows.

After the definition the op registers its pieces in the op table (fuser_dialect/op_table.py):
shape rule, reference semantics, run-time extent planner, layout rule and dim rule."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import I64, IntegerAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure

from fuser_dialect import shape_rules as rules
from fuser_dialect.extents import ExtentError, ExtentPlan, Step
from fuser_dialect.interpreter import InterpreterError, Value, check_index_range
from fuser_dialect.op_base import AlongDim, check_result, tensor_type
from fuser_dialect.op_table import DimTie, Dims, TypeOf, follow_ties, register


@irdl_op_definition
class ScatterOp(AlongDim, IRDLOperation):
    name = "fuser.scatter"
    input = operand_def()
    index = operand_def()
    src = operand_def()
    dim = prop_def(IntegerAttr[I64])
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = (
        "$input `[` $index `]` `=` $src `dim` $dim attr-dict `:` "
        "`(` type($input) `,` type($index) `,` type($src) `)` `->` type($result)"
    )

    def __init__(self, input: SSAValue, index: SSAValue, src: SSAValue, dim: int, result_type):
        super().__init__(operands=[input, index, src], result_types=[result_type],
                         properties={"dim": IntegerAttr(dim, i64)})

    def verify_(self) -> None:
        t = tensor_type(self, self.input, "input")
        index = tensor_type(self, self.index, "index")
        src = tensor_type(self, self.src, "src")
        check_result(self, rules.scatter(self.name, t, index, src, self.axis), t.dtype)


OPS = [ScatterOp]
"""The ops of this family, in the order the dialect lists them."""


def _scatter_shape(op: ScatterOp, type_of: TypeOf) -> Dims:
    return rules.scatter(op.name, type_of(op.input), type_of(op.index), type_of(op.src), op.axis)


def _scatter_ties(op: ScatterOp) -> list[DimTie]:
    """The result is shaped like the input; the index and src only bound the scattered region."""
    return [DimTie(0, d, d) for d in range(op.input.type.rank)]


def _check_extents(op: ScatterOp, x: tuple[int, ...], index: tuple[int, ...], src: tuple[int, ...],
                   error: type[Exception], when: str = "") -> None:
    for d, (a, i, s) in enumerate(zip(x, index, src)):
        if i > s:
            raise error(f"{op.name}: index extent {i} exceeds src extent {s} in dim {d}{when}")
        if d != op.axis and i > a:
            raise error(f"{op.name}: index extent {i} exceeds input extent {a} in dim {d}{when} "
                        f"(only dim {op.axis} is scattered)")


def _interpret_scatter(op: ScatterOp, args: list[Value]) -> Value:
    x, index, src = args
    dim = op.axis
    _check_extents(op, x.shape, index.shape, src.shape, InterpreterError)
    check_index_range(op, index, x.shape[dim])
    out = np.array(x, copy=True)
    region = out[tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(index.shape))]
    values = src[tuple(slice(0, n) for n in index.shape)]
    positions = index.astype(np.int64)
    # One index slice along dim at a time, in order: within a slice every target is distinct,
    # and a later slice overwrites an earlier one (the documented "last wins").
    for k in range(index.shape[dim]):
        at = tuple(slice(k, k + 1) if d == dim else slice(None) for d in range(index.ndim))
        np.put_along_axis(region, positions[at], values[at], axis=dim)
    return out


def _plan_scatter(op: ScatterOp, plan: ExtentPlan) -> Step:
    x, index, src, out = plan.slot[op.input], plan.slot[op.index], plan.slot[op.src], plan.result_slot(op)

    def step(S, B, V, R):
        _check_extents(op, S[x], S[index], S[src], ExtentError, " at run time")
        S[out], B[out] = S[x], B[x]

    return step


register(
    ScatterOp,
    shape=_scatter_shape,
    interpret=_interpret_scatter,
    plan_extents=_plan_scatter,
    layout=follow_ties(_scatter_ties),
    dim_ties=_scatter_ties,
)
