"""Ops that only move or re-label dims: broadcast, broadcast_in_dim, squeeze, expand,
reshape, permute. Dynamic result extents are SSA i64 operands, one per `?` result dim.

After the definitions, each op registers its pieces in the op table (fuser_dialect/op_table.py):
shape rule, reference semantics, run-time extent planner, layout rule and dim rule."""

from __future__ import annotations

import math

import numpy as np
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
from fuser_dialect.extents import ExtentError, ExtentPlan, Step, declared_shape, type_flags
from fuser_dialect.interpreter import InterpreterError, Value, result_shape
from fuser_dialect.op_base import check_result, tensor_type
from fuser_dialect.op_table import (
    DimLink, DimTie, Dims, TypeOf, extent_operand_ties, follow_ties, register, result_dims, same_position,
)
from fuser_dialect.types import BROADCAST, DYNAMIC, TensorType, format_dims

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
        check_result(self, result_dims(self), self.in_type.dtype)


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
        check_result(self, result_dims(self), self.in_type.dtype)


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
        check_result(self, result_dims(self), self.in_type.dtype)


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
        check_result(self, result_dims(self), self.in_type.dtype)


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
        check_result(self, result_dims(self), self.in_type.dtype)


@irdl_op_definition
class ReshapeOp(_WithExtents):
    name = "fuser.reshape"

    def verify_(self) -> None:
        _check_dynamic_extents(self, self.extents)
        check_result(self, result_dims(self), self.in_type.dtype)


OPS = [BroadcastOp, BroadcastInDimOp, SqueezeOp, ExpandOp, ReshapeOp, PermuteOp]
"""The ops of this family, in the order the dialect lists them."""


# --- fuser.broadcast ----------------------------------------------------------------------


def _broadcast_shape(op: BroadcastOp, type_of: TypeOf) -> Dims:
    return rules.broadcast(op.name, type_of(op.input), op.is_broadcast_dim)


def _broadcast_ties(op: BroadcastOp) -> list[DimTie]:
    kept = [o for o, b in enumerate(op.is_broadcast_dim) if not b]
    return [DimTie(0, i, o) for i, o in enumerate(kept)]


def _interpret_broadcast(op: BroadcastOp, args: list[Value]) -> Value:
    return np.expand_dims(args[0], tuple(op.dims.get_values()))


def _plan_broadcast(op: BroadcastOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    new = tuple(op.is_broadcast_dim)

    def step(S, B, V, R):
        shape, flags = iter(S[x]), iter(B[x])
        S[out] = tuple(1 if b else next(shape) for b in new)
        B[out] = tuple(True if b else next(flags) for b in new)

    return step


register(
    BroadcastOp,
    shape=_broadcast_shape,
    interpret=_interpret_broadcast,
    plan_extents=_plan_broadcast,
    layout=follow_ties(_broadcast_ties),
    dim_ties=_broadcast_ties,
)


# --- fuser.broadcast_in_dim ---------------------------------------------------------------


def _broadcast_in_dim_shape(op: BroadcastInDimOp, type_of: TypeOf) -> Dims:
    return rules.broadcast_in_dim(op.name, type_of(op.input), op.out_type.rank, op.dims.get_values())


def _broadcast_in_dim_ties(op: BroadcastInDimOp) -> list[DimTie]:
    return [DimTie(0, i, o) for i, o in enumerate(op.dims.get_values())]


def _interpret_broadcast_in_dim(op: BroadcastInDimOp, args: list[Value]) -> Value:
    x = args[0]
    rank = op.out_type.rank
    mapped = op.dims.get_values()
    shape = [1] * rank
    for i, o in enumerate(mapped):
        shape[o] = x.shape[i]
    return x.reshape(shape)


def _plan_broadcast_in_dim(op: BroadcastInDimOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    rank, mapped = op.out_type.rank, tuple(op.dims.get_values())

    def step(S, B, V, R):
        shape, flags = [1] * rank, [True] * rank
        for i, o in enumerate(mapped):
            shape[o], flags[o] = S[x][i], B[x][i]
        S[out], B[out] = tuple(shape), tuple(flags)

    return step


register(
    BroadcastInDimOp,
    shape=_broadcast_in_dim_shape,
    interpret=_interpret_broadcast_in_dim,
    plan_extents=_plan_broadcast_in_dim,
    layout=follow_ties(_broadcast_in_dim_ties),
    dim_ties=_broadcast_in_dim_ties,
)


# --- fuser.squeeze ------------------------------------------------------------------------


def _squeeze_shape(op: SqueezeOp, type_of: TypeOf) -> Dims:
    return rules.squeeze(op.name, type_of(op.input), op.dims.get_values())


def _squeeze_ties(op: SqueezeOp) -> list[DimTie]:
    squeezed = set(op.dims.get_values())
    kept = [d for d in range(op.in_type.rank) if d not in squeezed]
    return [DimTie(0, d, k) for k, d in enumerate(kept)]


def _interpret_squeeze(op: SqueezeOp, args: list[Value]) -> Value:
    x = args[0]
    for d in op.dims.get_values():
        if x.shape[d] != 1:
            raise InterpreterError(f"{op.name}: dim {d} has extent {x.shape[d]} at run time, not 1")
    return np.squeeze(x, axis=tuple(op.dims.get_values()))


def _plan_squeeze(op: SqueezeOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    dims = tuple(op.dims.get_values())

    def step(S, B, V, R):
        shape, flags = S[x], B[x]
        for d in dims:
            if shape[d] != 1:
                raise ExtentError(f"{op.name}: dim {d} has extent {shape[d]} at run time, not 1")
        S[out] = tuple(e for d, e in enumerate(shape) if d not in dims)
        B[out] = tuple(b for d, b in enumerate(flags) if d not in dims)

    return step


register(
    SqueezeOp,
    shape=_squeeze_shape,
    interpret=_interpret_squeeze,
    plan_extents=_plan_squeeze,
    layout=follow_ties(_squeeze_ties),
    dim_ties=_squeeze_ties,
)


# --- fuser.permute ------------------------------------------------------------------------


def _permute_shape(op: PermuteOp, type_of: TypeOf) -> Dims:
    return rules.permute(op.name, type_of(op.input), op.dims.get_values())


def _permute_ties(op: PermuteOp) -> list[DimTie]:
    return [DimTie(0, p, o) for o, p in enumerate(op.dims.get_values())]


def _interpret_permute(op: PermuteOp, args: list[Value]) -> Value:
    return np.ascontiguousarray(np.transpose(args[0], op.dims.get_values()))


def _plan_permute(op: PermuteOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    perm = tuple(op.dims.get_values())

    def step(S, B, V, R):
        shape, flags = S[x], B[x]
        S[out], B[out] = tuple(shape[p] for p in perm), tuple(flags[p] for p in perm)

    return step


register(
    PermuteOp,
    shape=_permute_shape,
    interpret=_interpret_permute,
    plan_extents=_plan_permute,
    layout=follow_ties(_permute_ties),
    dim_ties=_permute_ties,
)


# --- fuser.expand -------------------------------------------------------------------------


def _expand_shape(op: ExpandOp, type_of: TypeOf) -> Dims:
    return rules.expand(op.name, type_of(op.input), op.out_type.shape)


def _expand_ties(op: ExpandOp) -> list[DimTie]:
    """A dim not typed `b` keeps its extent, the others take their `?` extent operand.
    Not exact: an extent-1 dim may expand at run time without being typed `b`."""
    kept = [d for d, e in enumerate(op.in_type.shape) if e != BROADCAST]
    return [DimTie(0, d, d, exact=False) for d in kept] + extent_operand_ties(op, first=1, skip=kept)


def _interpret_expand(op: ExpandOp, args: list[Value]) -> Value:
    x, shape = args[0], result_shape(op, args[1:])
    for d, (a, b) in enumerate(zip(x.shape, shape)):
        if a != b and a != 1:
            raise InterpreterError(f"{op.name}: dim {d} of extent {a} cannot expand to {b}")
    return np.broadcast_to(x, shape).copy()


def _plan_expand(op: ExpandOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    shape_of, flags = declared_shape(op, plan, op.extents), type_flags(op.out_type)
    plan.expands.append((x, out))  # RuntimeExtents.broadcast_expands reads them

    def step(S, B, V, R):
        shape = shape_of(V)
        for d, (a, b) in enumerate(zip(S[x], shape)):
            # As the reference interpreter: an extent-1 dim may expand even when not typed `b`.
            if a != b and a != 1:
                raise ExtentError(f"{op.name}: dim {d} of extent {a} cannot expand to {b} at run time")
        S[out], B[out] = shape, flags

    return step


register(
    ExpandOp,
    shape=_expand_shape,
    interpret=_interpret_expand,
    plan_extents=_plan_expand,
    layout=same_position,
    dim_ties=_expand_ties,
)


# --- fuser.reshape ------------------------------------------------------------------------


def _reshape_shape(op: ReshapeOp, type_of: TypeOf) -> Dims:
    return rules.reshape(op.name, type_of(op.input), op.out_type.shape)


def _reshape_ties(op: ReshapeOp) -> list[DimTie]:
    return extent_operand_ties(op, first=1)


def _reshape_links(op: ReshapeOp) -> list[DimLink]:
    """Layout maps through a reshape that only adds or removes extent-1 dims."""
    src, dst = op.in_type, op.out_type
    src_dims = [d for d in range(src.rank) if src.static_extent(d) != 1]
    dst_dims = [d for d in range(dst.rank) if dst.static_extent(d) != 1]
    if len(src_dims) != len(dst_dims):
        return []
    for a, b in zip(src_dims, dst_dims):
        ea, eb = src.static_extent(a), dst.static_extent(b)
        if ea is not None and eb is not None and ea != eb:
            return []
    return [(0, a, b) for a, b in zip(src_dims, dst_dims)]


def _interpret_reshape(op: ReshapeOp, args: list[Value]) -> Value:
    x, shape = args[0], result_shape(op, args[1:])
    if math.prod(shape) != x.size:
        raise InterpreterError(f"{op.name}: cannot reshape {list(x.shape)} to {shape} at run time")
    return x.reshape(shape)


def _plan_reshape(op: ReshapeOp, plan: ExtentPlan) -> Step:
    x, out = plan.slot[op.input], plan.result_slot(op)
    shape_of, flags = declared_shape(op, plan, op.extents), type_flags(op.out_type)

    def step(S, B, V, R):
        shape = shape_of(V)
        if math.prod(S[x]) != math.prod(shape):
            raise ExtentError(
                f"{op.name}: cannot reshape {list(S[x])} ({math.prod(S[x])} elements) to "
                f"{list(shape)} ({math.prod(shape)} elements) at run time"
            )
        S[out], B[out] = shape, flags

    return step


register(
    ReshapeOp,
    shape=_reshape_shape,
    interpret=_interpret_reshape,
    plan_extents=_plan_reshape,
    layout=_reshape_links,
    dim_ties=_reshape_ties,
)
