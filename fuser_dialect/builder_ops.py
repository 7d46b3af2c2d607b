"""`fd.ops`: the op namespace of FusionDefinition, with nvFuser's names and argument order.

Each method types its result with the op's shape rule (fuser_dialect.shape_rules), so a
bad call fails here with the rule's message, naming the op, the dims and the extents.
Binary ops promote dtypes the way torch does (casts are inserted)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import Float64Type, i1, i64
from xdsl.ir import Operation, SSAValue

from fuser_dialect import shape_rules as rules
from fuser_dialect.builder import FusionDefinition, Scalar, Tensor, static_int
from fuser_dialect.ops_compute import (
    BOOL_RESULT_BINARY,
    BOOL_RESULT_UNARY,
    FLOAT_ONLY_UNARY,
    BinaryKind,
    BinaryOp,
    CastOp,
    ReductionKind,
    ReductionOp,
    UnaryKind,
    UnaryOp,
    WhereOp,
)
from fuser_dialect.ops_factory import DimOp, FullOp, IotaOp
from fuser_dialect.ops_gather import GatherOp, IndexSelectOp, TakeAlongAxisOp
from fuser_dialect.ops_layout import BroadcastInDimOp, BroadcastOp, ExpandOp, PermuteOp, ReshapeOp, SqueezeOp
from fuser_dialect.ops_resize import CatOp, PadOp, SliceOp
from fuser_dialect.types import BROADCAST, DYNAMIC, DYNAMIC_ENTRY, DataType, TensorType

_FLOAT_RANK = {"bf16": 1, "f16": 1, "f32": 2, "f64": 3}
_INT_RANK = {"i1": 0, "i32": 1, "i64": 2}


def promote(a: str, b: str) -> str:
    """torch-like promotion of two tensor dtypes."""
    if a == b:
        return a
    fa, fb = a in _FLOAT_RANK, b in _FLOAT_RANK
    if fa and fb:
        if {a, b} == {"f16", "bf16"}:
            return "f32"
        return max(a, b, key=_FLOAT_RANK.__getitem__)
    if fa or fb:
        return a if fa else b
    return max(a, b, key=_INT_RANK.__getitem__)


def _scalar_kind(value: object) -> str:
    if isinstance(value, Scalar):
        return value.dtype
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i64"
    if isinstance(value, float):
        return "f64"
    raise TypeError(f"expected a Tensor, Scalar or Python number, got {type(value).__name__}")


def _category(dtype: str) -> int:
    return 2 if dtype in _FLOAT_RANK else 1 if dtype in ("i32", "i64") else 0


def _norm_dim(op: str, d: int, rank: int) -> int:
    if not -rank <= d < max(rank, 1):
        raise ValueError(f"{op}: dim {d} is out of range for a tensor of rank {rank}")
    return d % rank if rank else 0


def _norm_dims(op: str, dims: int | Sequence[int], rank: int) -> list[int]:
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted(_norm_dim(op, d, rank) for d in dims)


class Ops:
    def __init__(self, fd: FusionDefinition):
        self.fd = fd

    # -- helpers -----------------------------------------------------------
    def _emit(self, op: Operation) -> Tensor:
        return Tensor(self.fd, self.fd._append(op).results[0])

    def _tensor(self, x: object, what: str) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"{what} must be a Tensor, got {type(x).__name__}")
        return x

    def _extent(self, e: int | Scalar) -> tuple[int, SSAValue | None]:
        """(static dim or DYNAMIC, SSA extent or None) of a shape entry."""
        if isinstance(e, Scalar):
            return DYNAMIC, self.fd._scalar(e, i64).value
        return (BROADCAST if e == 1 else static_int(e, "extent")), None

    def _int(self, v: int | Scalar, what: str = "value") -> int | SSAValue:
        return v.value if isinstance(v, Scalar) else static_int(v, what)

    # -- elementwise ------------------------------------------------------------
    def cast(self, arg: Tensor, dtype: DataType) -> Tensor:
        arg = self._tensor(arg, "cast: arg")
        dtype = DataType(dtype)
        if arg.type.dtype == dtype.value:
            return arg
        return self._emit(CastOp(arg.value, arg.type.without_layout().with_dtype(dtype.value)))

    def _unary(self, kind: UnaryKind, arg: Tensor) -> Tensor:
        arg = self._tensor(arg, f"{kind}: arg")
        if kind in FLOAT_ONLY_UNARY and arg.type.dtype not in _FLOAT_RANK:
            arg = self.cast(arg, DataType.Float)
        out = arg.type.without_layout()
        if kind in BOOL_RESULT_UNARY:
            out = out.with_dtype("i1")
        return self._emit(UnaryOp(kind, arg.value, out))

    def _operands(self, values: Sequence[object]) -> tuple[str, list[SSAValue]]:
        """Promotes a mix of tensors and scalars; returns (compute dtype, SSA operands)."""
        tensors = [v for v in values if isinstance(v, Tensor)]
        if not tensors:
            raise TypeError("at least one operand must be a Tensor")
        dtype = tensors[0].type.dtype
        for t in tensors[1:]:
            dtype = promote(dtype, t.type.dtype)
        for v in values:
            if not isinstance(v, Tensor) and _category(_scalar_kind(v)) > _category(dtype):
                dtype = "f32" if _scalar_kind(v) in _FLOAT_RANK else "i64"
        operands = []
        for v in values:
            if isinstance(v, Tensor):
                operands.append(self.cast(v, DataType(dtype)).value)
            else:
                target = Float64Type() if dtype in _FLOAT_RANK else i1 if dtype == "i1" else i64
                operands.append(self.fd._scalar(v, target).value)
        return dtype, operands

    def _binary(self, kind: BinaryKind, a: object, b: object) -> Tensor:
        dtype, (lhs, rhs) = self._operands([a, b])
        types = [v.type for v in (lhs, rhs) if isinstance(v.type, TensorType)]
        dims = rules.elementwise(f"fuser.binary {kind}", types)
        out = TensorType("i1" if kind in BOOL_RESULT_BINARY else dtype, dims)
        return self._emit(BinaryOp(kind, lhs, rhs, out))

    def where(self, cond: object, x: object, y: object) -> Tensor:
        if isinstance(cond, Tensor) and cond.type.dtype != "i1":
            cond = self.ne(cond, 0)
        cond_value = cond.value if isinstance(cond, Tensor) else self.fd._scalar(cond, i1).value
        if isinstance(x, Tensor) or isinstance(y, Tensor):
            dtype, (xv, yv) = self._operands([x, y])
        else:
            dtype = "f32" if "f64" in (_scalar_kind(x), _scalar_kind(y)) else "i64"
            xv, yv = (self.fd._scalar(v, Float64Type() if dtype == "f32" else i64).value for v in (x, y))
        types = [v.type for v in (cond_value, xv, yv) if isinstance(v.type, TensorType)]
        if not types:
            raise TypeError("where: at least one operand must be a Tensor")
        dims = rules.elementwise("fuser.where", types)
        return self._emit(WhereOp(cond_value, xv, yv, TensorType(dtype, dims)))

    # -- reductions ---------------------------------------------------------------
    def _reduction(self, kind: ReductionKind, arg: Tensor, dims, keepdim: bool, dtype: DataType | None) -> Tensor:
        arg = self._tensor(arg, f"{kind}: arg")
        if dtype is not None:
            arg = self.cast(arg, dtype)
        axes = _norm_dims(f"fuser.reduction {kind}", dims, arg.ndim)
        out = rules.reduction(f"fuser.reduction {kind}", arg.type, axes, keepdim)
        return self._emit(ReductionOp(kind, arg.value, axes, keepdim, TensorType(arg.type.dtype, out)))

    def sum(self, arg, dims, keepdim=False, dtype=None):
        return self._reduction(ReductionKind.SUM, arg, dims, keepdim, dtype)

    def prod(self, arg, dims, keepdim=False, dtype=None):
        return self._reduction(ReductionKind.PROD, arg, dims, keepdim, dtype)

    def max(self, arg, dims, keepdim=False, dtype=None):
        return self._reduction(ReductionKind.MAX, arg, dims, keepdim, dtype)

    def min(self, arg, dims, keepdim=False, dtype=None):
        return self._reduction(ReductionKind.MIN, arg, dims, keepdim, dtype)

    # -- layout -------------------------------------------------------------------
    def broadcast(self, arg: Tensor, is_broadcast_dim: Sequence[bool]) -> Tensor:
        arg = self._tensor(arg, "broadcast: arg")
        dims = rules.broadcast("fuser.broadcast", arg.type, is_broadcast_dim)
        if not any(is_broadcast_dim):
            return arg
        new = [i for i, b in enumerate(is_broadcast_dim) if b]
        return self._emit(BroadcastOp(arg.value, new, TensorType(arg.type.dtype, dims)))

    def broadcast_in_dim(self, arg: Tensor, shape: Sequence[int | Scalar], broadcast_dims: Sequence[int]) -> Tensor:
        arg = self._tensor(arg, "broadcast_in_dim: arg")
        dims = rules.broadcast_in_dim("fuser.broadcast_in_dim", arg.type, len(shape), list(broadcast_dims))
        out = arg
        if len(shape) != arg.ndim or list(broadcast_dims) != list(range(arg.ndim)):
            out = self._emit(BroadcastInDimOp(arg.value, list(broadcast_dims), TensorType(arg.type.dtype, dims)))
        return self.expand(out, shape)

    def expand(self, arg: Tensor, shape: Sequence[int | Scalar]) -> Tensor:
        """Broadcast dims take the extents in `shape` (-1 keeps a dim's extent)."""
        arg = self._tensor(arg, "expand: arg")
        if len(shape) != arg.ndim:
            raise ValueError(f"expand: shape {list(shape)} has {len(shape)} entries for a tensor of rank {arg.ndim}")
        dims, extents = [], []
        for d, (have, want) in enumerate(zip(arg.type.shape, shape)):
            if isinstance(want, Scalar):
                dims.append(DYNAMIC)
                extents.append(self.fd._scalar(want, i64).value)
            elif want == -1 or (want == 1 and have == BROADCAST):
                dims.append(have)
                if have == DYNAMIC:
                    extents.append(self.size(arg, d).value)
            else:
                dims.append(BROADCAST if want == 1 and have == BROADCAST else want)
        if tuple(dims) == arg.type.shape:
            return arg
        rules.expand("fuser.expand", arg.type, dims)
        return self._emit(ExpandOp(arg.value, extents, TensorType(arg.type.dtype, dims)))

    def squeeze(self, arg: Tensor, dims: int | Sequence[int]) -> Tensor:
        arg = self._tensor(arg, "squeeze: arg")
        axes = _norm_dims("fuser.squeeze", dims, arg.ndim)
        out = rules.squeeze("fuser.squeeze", arg.type, axes)
        return self._emit(SqueezeOp(arg.value, axes, TensorType(arg.type.dtype, out)))

    def permute(self, arg: Tensor, dims: Sequence[int]) -> Tensor:
        arg = self._tensor(arg, "permute: arg")
        perm = [_norm_dim("fuser.permute", d, arg.ndim) for d in dims]
        out = rules.permute("fuser.permute", arg.type, perm)
        return self._emit(PermuteOp(arg.value, perm, TensorType(arg.type.dtype, out)))

    def reshape(self, arg: Tensor, new_shape: Sequence[int | Scalar]) -> Tensor:
        """new_shape entries: static ints, Scalars, or one -1 inferred from the rest."""
        arg = self._tensor(arg, "reshape: arg")
        entries = list(new_shape)
        if sum(1 for e in entries if not isinstance(e, Scalar) and e == -1) > 1:
            raise ValueError(f"reshape: at most one -1 in new_shape {entries}")
        if any(not isinstance(e, Scalar) and e == -1 for e in entries):
            entries = self._infer_reshape_dim(arg, entries)
        dims, extents = [], []
        for e in entries:
            d, v = self._extent(e)
            dims.append(d)
            if v is not None:
                extents.append(v)
        rules.reshape("fuser.reshape", arg.type, dims)
        return self._emit(ReshapeOp(arg.value, extents, TensorType(arg.type.dtype, dims)))

    def _infer_reshape_dim(self, arg: Tensor, entries: list) -> list:
        static_in = [arg.type.static_extent(d) for d in range(arg.ndim)]
        known = [e for e in entries if not isinstance(e, Scalar) and e != -1]
        if None not in static_in and not any(isinstance(e, Scalar) for e in entries):
            numel, rest = 1, 1
            for e in static_in:
                numel *= e
            for e in known:
                rest *= e
            if rest == 0 or numel % rest:
                raise ValueError(f"reshape: cannot infer -1 in {entries} for {arg.type.describe()}")
            return [numel // rest if not isinstance(e, Scalar) and e == -1 else e for e in entries]
        numel = self.fd._scalar(1, i64)
        for d in range(arg.ndim):
            numel = numel * self.size(arg, d)
        rest = self.fd._scalar(1, i64)
        for e in entries:
            if isinstance(e, Scalar) or e != -1:
                rest = rest * e
        return [numel // rest if not isinstance(e, Scalar) and e == -1 else e for e in entries]

    # -- resize -------------------------------------------------------------------
    def pad(self, arg: Tensor, pad_widths: Sequence[int | Scalar], value: object = None) -> Tensor:
        """pad_widths in F.pad order: (left, right) of the LAST dim first; may cover fewer dims."""
        arg = self._tensor(arg, "pad: arg")
        if len(pad_widths) % 2 or len(pad_widths) > 2 * arg.ndim:
            raise ValueError(
                f"pad: {len(pad_widths)} pad widths for a tensor of rank {arg.ndim}; "
                f"expected an even number, at most {2 * arg.ndim}"
            )
        widths: list[int | SSAValue] = [0] * (2 * arg.ndim)
        for k in range(len(pad_widths) // 2):
            d = arg.ndim - 1 - k
            widths[2 * d] = self._int(pad_widths[2 * k], f"pad width #{2 * k}")
            widths[2 * d + 1] = self._int(pad_widths[2 * k + 1], f"pad width #{2 * k + 1}")
        static = [DYNAMIC_ENTRY if isinstance(w, SSAValue) else w for w in widths]
        dims = rules.pad("fuser.pad", arg.type, static)
        fill = self.fd._scalar(0 if value is None else value, Float64Type() if arg.type.dtype in _FLOAT_RANK else i64 if arg.type.dtype != "i1" else i1)
        return self._emit(PadOp(arg.value, widths, fill.value, TensorType(arg.type.dtype, dims)))

    def slice(self, arg: Tensor, start_indices, end_indices, strides=None) -> Tensor:
        arg = self._tensor(arg, "slice: arg")
        n = arg.ndim
        strides = list(strides) if strides is not None else [1] * n
        if not len(start_indices) == len(end_indices) == len(strides) == n:
            raise ValueError(
                f"slice: {len(start_indices)} starts, {len(end_indices)} ends and {len(strides)} strides "
                f"for a tensor of rank {n}"
            )
        bounds: list[int | SSAValue] = []
        for s, e in zip(start_indices, end_indices):
            bounds += [self._int(s, "slice start"), self._int(e, "slice end")]
        static = [DYNAMIC_ENTRY if isinstance(b, SSAValue) else b for b in bounds]
        dims = rules.slice_("fuser.slice", arg.type, static, strides)
        return self._emit(SliceOp(arg.value, bounds, strides, TensorType(arg.type.dtype, dims)))

    def cat(self, tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
        tensors = [self._tensor(t, f"cat: tensors[{k}]") for k, t in enumerate(tensors)]
        if not tensors:
            raise ValueError("cat: needs at least one tensor")
        dtype = tensors[0].type.dtype
        for t in tensors[1:]:
            dtype = promote(dtype, t.type.dtype)
        tensors = [self.cast(t, DataType(dtype)) for t in tensors]
        axis = _norm_dim("fuser.cat", dim, tensors[0].ndim)
        dims = rules.cat("fuser.cat", [t.type for t in tensors], axis)
        return self._emit(CatOp([t.value for t in tensors], axis, TensorType(dtype, dims)))

    # -- gather family ------------------------------------------------------------
    def _index_op(self, op_type, rule, name: str, arg: Tensor, index: Tensor, dim: int) -> Tensor:
        arg = self._tensor(arg, f"{name}: arg")
        index = self._tensor(index, f"{name}: index")
        axis = _norm_dim(f"fuser.{name}", dim, arg.ndim)
        dims = rule(f"fuser.{name}", arg.type, index.type, axis)
        return self._emit(op_type(arg.value, index.value, axis, TensorType(arg.type.dtype, dims)))

    def gather(self, arg: Tensor, index: Tensor, dim: int) -> Tensor:
        return self._index_op(GatherOp, rules.gather, "gather", arg, index, dim)

    def take_along_axis(self, arg: Tensor, index: Tensor, dim: int) -> Tensor:
        return self._index_op(TakeAlongAxisOp, rules.take_along_axis, "take_along_axis", arg, index, dim)

    def index_select(self, arg: Tensor, index: Tensor, dim: int) -> Tensor:
        return self._index_op(IndexSelectOp, rules.index_select, "index_select", arg, index, dim)

    # -- factories and queries ------------------------------------------------------
    def iota(self, length: int | Scalar, start=None, step=None, dtype: DataType = DataType.Int) -> Tensor:
        dtype = DataType(dtype)
        length_v = self.fd._scalar(length, i64)
        scalar_t = i64 if dtype.value in ("i64", "i32") else Float64Type()
        start_v = self.fd._scalar(0 if start is None else start, scalar_t)
        step_v = self.fd._scalar(1 if step is None else step, scalar_t)
        extent = DYNAMIC if isinstance(length, Scalar) else static_int(length, "iota length")
        return self._emit(IotaOp(length_v.value, start_v.value, step_v.value, TensorType(dtype.value, [extent])))

    def full(self, shape: Sequence[int | Scalar], fill_value: object, dtype: DataType) -> Tensor:
        dtype = DataType(dtype)
        dims, extents = [], []
        for e in shape:
            d, v = self._extent(e)
            dims.append(d)
            if v is not None:
                extents.append(v)
        scalar_t = Float64Type() if dtype.value in _FLOAT_RANK else i1 if dtype.value == "i1" else i64
        fill = self.fd._scalar(fill_value, scalar_t)
        return self._emit(FullOp(extents, fill.value, TensorType(dtype.value, dims)))

    def size(self, arg: Tensor, dim: int) -> Scalar:
        arg = self._tensor(arg, "size: arg")
        axis = _norm_dim("fuser.dim", dim, arg.ndim)
        return Scalar(self.fd, self.fd._append(DimOp(arg.value, axis)).results[0])


def _make_unary(kind: UnaryKind):
    def op(self: Ops, arg: Tensor) -> Tensor:
        return self._unary(kind, arg)

    op.__name__ = str(kind)
    op.__doc__ = f"Elementwise {kind}."
    return op


def _make_binary(kind: BinaryKind):
    def op(self: Ops, lhs: object, rhs: object) -> Tensor:
        return self._binary(kind, lhs, rhs)

    op.__name__ = str(kind)
    op.__doc__ = f"Elementwise {kind} (tensor or scalar operands, torch-like promotion)."
    return op


for _kind in UnaryKind:
    setattr(Ops, str(_kind), _make_unary(_kind))
for _kind in BinaryKind:
    setattr(Ops, str(_kind), _make_binary(_kind))
