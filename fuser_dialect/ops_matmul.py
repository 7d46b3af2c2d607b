"""Matrix products: `fuser.matmul` (torch.matmul, with 1-D operands and broadcast batch dims)
and `fuser.linear` (torch.nn.functional.linear: input @ weight^T + bias).

Neither is emitted as CUDA: segmentation gives each its own *host segment*, a library call
(numpy, or torch / cuBLAS for torch tensors) between the fused kernels (lowering/segmentation/host_segments.py),
the way nvFuser's expression-evaluator segments run ATen. Operands share one floating-point
dtype, which is the result's; f16/bf16 accumulate in f32 and round once.

Batch dims join as elementwise dims do in this dialect: a `b` dim broadcasts, any other pair of
extents must be equal at run time (a `?` dim that happens to be 1 does not broadcast).

After the definitions, each op registers its pieces in the op table (fuser_dialect/op_table.py):
shape rule, reference semantics, run-time extent planner, layout rule and dim rule."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, opt_operand_def, result_def, traits_def
from xdsl.traits import Pure

from fuser_dialect.extents import ExtentError, ExtentPlan, Flags, Shape, Step
from fuser_dialect.interpreter import Value, cast_array, compute_dtype, result_dtype
from fuser_dialect.op_base import check_result, tensor_type
from fuser_dialect.op_table import DimTie, Dims, NotApplicable, TypeOf, no_links, register, result_dims
from fuser_dialect.shape_rules import ShapeError, join_dim
from fuser_dialect.types import BROADCAST, DYNAMIC, FLOAT_DTYPES, TensorType

HOST_SEGMENT = NotApplicable(
    "runs as a host segment (lowering/segmentation/host_segments.py): a numpy / torch (cuBLAS) call between kernels"
)


@irdl_op_definition
class MatmulOp(IRDLOperation):
    """torch.matmul(arg1, arg2): 1-D @ 1-D is a dot product (rank 0), a 1-D arg1 (arg2) is a
    row (column) vector whose dim is dropped from the result, higher ranks are batches."""

    name = "fuser.matmul"
    arg1 = operand_def(TensorType)
    arg2 = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$arg1 `,` $arg2 attr-dict `:` `(` type($arg1) `,` type($arg2) `)` `->` type($result)"

    def __init__(self, arg1: SSAValue, arg2: SSAValue, result_type: TensorType):
        super().__init__(operands=[arg1, arg2], result_types=[result_type])

    def verify_(self) -> None:
        a = tensor_type(self, self.arg1, "arg1")
        tensor_type(self, self.arg2, "arg2")
        check_result(self, result_dims(self), a.dtype)


@irdl_op_definition
class LinearOp(IRDLOperation):
    """F.linear(input, weight, bias): input [..., K] times weight [N, K] transposed, plus bias [N]
    (or rank 0); the result is [..., N]. A 1-D weight [K] gives [...] and takes no bias."""

    name = "fuser.linear"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$input `,` $weight (`,` $bias^)? attr-dict `:` `(` type($input) `,` type($weight) (`,` type($bias)^)? `)`"
        " `->` type($result)"
    )

    def __init__(self, input: SSAValue, weight: SSAValue, bias: SSAValue | None, result_type: TensorType):
        super().__init__(operands=[input, weight, [bias] if bias is not None else []], result_types=[result_type])

    def verify_(self) -> None:
        x = tensor_type(self, self.input, "input")
        tensor_type(self, self.weight, "weight")
        if self.bias is not None:
            tensor_type(self, self.bias, "bias")
        check_result(self, result_dims(self), x.dtype)


OPS = [MatmulOp, LinearOp]
"""The ops of this family, in the order the dialect lists them."""

HOST_OPS = (MatmulOp, LinearOp)
"""The ops segmentation puts in host segments of their own."""


# --- shape rules (shared by the verifiers and the builder) -------------------------------------


def _check_operands(op: str, named: Sequence[tuple[str, TensorType]]) -> None:
    first_name, first = named[0]
    for what, t in named:
        if t.dtype not in FLOAT_DTYPES:
            raise ShapeError(f"{op}: {what} {t.describe()} must have a floating-point dtype ({', '.join(FLOAT_DTYPES)})")
        if t.dtype != first.dtype:
            raise ShapeError(
                f"{op}: {what} {t.describe()} and {first_name} {first.describe()} have different dtypes; "
                "cast one of them first"
            )


def _min_rank(op: str, what: str, t: TensorType, rank: int) -> None:
    if t.rank < rank:
        raise ShapeError(f"{op}: {what} {t.describe()} has rank {t.rank}; it needs at least rank {rank}")


def _static(e: int) -> int | None:
    return None if e == DYNAMIC else 1 if e == BROADCAST else e


def _check_k(op: str, a_what: str, a: TensorType, a_dim: int, b_what: str, b: TensorType, b_dim: int) -> None:
    ka, kb = _static(a.shape[a_dim]), _static(b.shape[b_dim])
    if ka is not None and kb is not None and ka != kb:
        raise ShapeError(
            f"{op}: {a_what} {a.describe()} has K = {ka} (dim {a_dim}) but {b_what} {b.describe()} has "
            f"K = {kb} (dim {b_dim}); the contracted dims must be equal"
        )


def _batch(op: str, a: Sequence[int], b: Sequence[int], what: str) -> list[int]:
    """Right-aligned join of two batch shapes (elementwise broadcasting)."""
    rank = max(len(a), len(b))
    a = [BROADCAST] * (rank - len(a)) + list(a)
    b = [BROADCAST] * (rank - len(b)) + list(b)
    try:
        return [join_dim(op, d, x, y) for d, (x, y) in enumerate(zip(a, b))]
    except ShapeError as e:
        raise ShapeError(f"{e} ({what})") from None


def matmul(op: str, a: TensorType, b: TensorType) -> tuple[int, ...]:
    """torch.matmul's result dims."""
    _check_operands(op, [("arg1", a), ("arg2", b)])
    _min_rank(op, "arg1", a, 1)
    _min_rank(op, "arg2", b, 1)
    _check_k(op, "arg1", a, a.rank - 1, "arg2", b, 0 if b.rank == 1 else b.rank - 2)
    batch = _batch(op, a.shape[:-2], b.shape[:-2], f"batch dims of arg1 {a.describe()} and arg2 {b.describe()}")
    m = [a.shape[-2]] if a.rank >= 2 else []
    n = [b.shape[-1]] if b.rank >= 2 else []
    return tuple(batch + m + n)


def linear(op: str, x: TensorType, w: TensorType, bias: TensorType | None) -> tuple[int, ...]:
    """F.linear's result dims."""
    _check_operands(op, [("input", x), ("weight", w)] + ([("bias", bias)] if bias is not None else []))
    _min_rank(op, "input", x, 1)
    if w.rank not in (1, 2):
        raise ShapeError(f"{op}: weight {w.describe()} has rank {w.rank}; it must be [N, K] or [K]")
    _check_k(op, "input", x, x.rank - 1, "weight", w, w.rank - 1)
    out = list(x.shape[:-1]) + ([w.shape[0]] if w.rank == 2 else [])
    if bias is not None:
        _check_bias(op, bias, w)
    return tuple(out)


def _check_bias(op: str, bias: TensorType, w: TensorType) -> None:
    if w.rank == 1:  # torch.nn.functional.linear refuses this too
        raise ShapeError(f"{op}: a 1-D weight {w.describe()} takes no bias (got bias {bias.describe()})")
    if bias.rank > 1:
        raise ShapeError(f"{op}: bias {bias.describe()} has rank {bias.rank}; expected [N] or rank 0 ({w.describe()})")
    if bias.rank == 1:
        n, nb = _static(w.shape[0]), bias.shape[0]
        if nb != BROADCAST and n is not None and _static(nb) is not None and nb != n:
            raise ShapeError(
                f"{op}: bias {bias.describe()} has {nb} entries but weight {w.describe()} has N = {n} (dim 0)"
            )


def _matmul_shape(op: MatmulOp, type_of: TypeOf) -> Dims:
    return matmul(op.name, type_of(op.arg1), type_of(op.arg2))


def _linear_shape(op: LinearOp, type_of: TypeOf) -> Dims:
    return linear(op.name, type_of(op.input), type_of(op.weight), type_of(op.bias) if op.bias is not None else None)


# --- dim ties: batch, M and N dims carry over; K is contracted (checked at run time) ---------


def _matmul_ties(op: MatmulOp) -> list[DimTie]:
    ra, rb = op.arg1.type.rank, op.arg2.type.rank
    out = op.result.type.rank
    batch = out - (ra >= 2) - (rb >= 2)
    ties = [DimTie(0, d - (batch - (ra - 2)), d) for d in range(batch) if d >= batch - (ra - 2)]
    ties += [DimTie(1, d - (batch - (rb - 2)), d) for d in range(batch) if d >= batch - (rb - 2)]
    if ra >= 2:
        ties.append(DimTie(0, ra - 2, batch))
    if rb >= 2:
        ties.append(DimTie(1, rb - 1, out - 1))
    return ties


def _linear_ties(op: LinearOp) -> list[DimTie]:
    rx, rw = op.input.type.rank, op.weight.type.rank
    ties = [DimTie(0, d, d) for d in range(rx - 1)]
    if rw == 2:
        ties.append(DimTie(1, 0, rx - 1))
        if op.bias is not None and op.bias.type.rank == 1:
            ties.append(DimTie(2, 0, rx - 1))
    return ties


# --- run-time extents ---------------------------------------------------------------------


def _join_batch(op_name: str, a: tuple[Shape, Flags], b: tuple[Shape, Flags], shown: str) -> tuple[list, list]:
    (sa, fa), (sb, fb) = a, b
    rank = max(len(sa), len(sb))
    sa, fa = (1,) * (rank - len(sa)) + sa, (True,) * (rank - len(fa)) + fa
    sb, fb = (1,) * (rank - len(sb)) + sb, (True,) * (rank - len(fb)) + fb
    shape, flags = [], []
    for d in range(rank):
        if fa[d] or (not fb[d] and sa[d] == sb[d]):
            shape.append(sb[d])
            flags.append(fb[d])
        elif fb[d]:
            shape.append(sa[d])
            flags.append(fa[d])
        else:
            raise ExtentError(
                f"{op_name}: batch dim {d} has extents {sa[d]} and {sb[d]} at run time, which neither match "
                f"nor broadcast ({shown})"
            )
    return shape, flags


def _k_error(op_name: str, a: str, ka: int, b: str, kb: int) -> ExtentError:
    return ExtentError(f"{op_name}: {a} has K = {ka} but {b} has K = {kb} at run time; the contracted dims must be equal")


def _plan_matmul(op: MatmulOp, plan: ExtentPlan) -> Step:
    a, b, out = plan.slot[op.arg1], plan.slot[op.arg2], plan.result_slot(op)
    ra, rb = op.arg1.type.rank, op.arg2.type.rank
    kb_dim = 0 if rb == 1 else rb - 2

    def step(S, B, V, R):
        sa, sb, fa, fb = S[a], S[b], B[a], B[b]
        if sa[-1] != sb[kb_dim]:
            raise _k_error(op.name, f"arg1 {list(sa)}", sa[-1], f"arg2 {list(sb)}", sb[kb_dim])
        shape, flags = _join_batch(op.name, (sa[:-2], fa[:-2]), (sb[:-2], fb[:-2]), f"arg1 {list(sa)}, arg2 {list(sb)}")
        if ra >= 2:
            shape.append(sa[-2])
            flags.append(fa[-2])
        if rb >= 2:
            shape.append(sb[-1])
            flags.append(fb[-1])
        S[out], B[out] = tuple(shape), tuple(flags)

    return step


def _plan_linear(op: LinearOp, plan: ExtentPlan) -> Step:
    x, w, out = plan.slot[op.input], plan.slot[op.weight], plan.result_slot(op)
    bias = plan.slot[op.bias] if op.bias is not None else None
    has_n = op.weight.type.rank == 2

    def step(S, B, V, R):
        sx, sw = S[x], S[w]
        if sx[-1] != sw[-1]:
            raise _k_error(op.name, f"input {list(sx)}", sx[-1], f"weight {list(sw)}", sw[-1])
        if bias is not None and S[bias] and not B[bias][0] and S[bias][0] != sw[0]:
            raise ExtentError(
                f"{op.name}: bias {list(S[bias])} has {S[bias][0]} entries but weight {list(sw)} has N = {sw[0]} "
                "at run time"
            )
        S[out] = sx[:-1] + ((sw[0],) if has_n else ())
        B[out] = B[x][:-1] + ((B[w][0],) if has_n else ())

    return step


# --- reference semantics --------------------------------------------------------------------


def matmul_values(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    """a @ b in the compute dtype of `dtype` (f32 for f16/bf16), rounded once to `dtype`."""
    acc = compute_dtype(dtype)
    return cast_array(np.matmul(np.asarray(a).astype(acc, copy=False), np.asarray(b).astype(acc, copy=False)), dtype)


def linear_values(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, dtype: str) -> np.ndarray:
    """F.linear in the compute dtype of `dtype`, bias added before the one rounding."""
    acc = compute_dtype(dtype)
    r = np.matmul(np.asarray(x).astype(acc, copy=False), np.asarray(w).astype(acc, copy=False).T)
    if bias is not None:
        r = r + np.asarray(bias).astype(acc, copy=False)
    return cast_array(r, dtype)


def _interpret_matmul(op: MatmulOp, args: list[Value]) -> Value:
    return matmul_values(args[0], args[1], result_dtype(op))


def _interpret_linear(op: LinearOp, args: list[Value]) -> Value:
    return linear_values(args[0], args[1], args[2] if len(args) > 2 else None, result_dtype(op))


register(
    MatmulOp,
    shape=_matmul_shape,
    interpret=_interpret_matmul,
    plan_extents=_plan_matmul,
    layout=no_links,  # as nvFuser's allocation pass: a library result is row-major
    dim_ties=_matmul_ties,
    emitted=HOST_SEGMENT,
)
register(
    LinearOp,
    shape=_linear_shape,
    interpret=_interpret_linear,
    plan_extents=_plan_linear,
    layout=no_links,
    dim_ties=_linear_ties,
    emitted=HOST_SEGMENT,
)
