"""`fd.ops`: the op namespace of a FusionBuilder (and so of fuser.FusionDefinition), with nvFuser's names and argument order.

Each method types its result with the op's shape rule (fuser_dialect.shape_rules), so a
bad call fails here with the rule's message, naming the op, the dims and the extents.
Elementwise ops promote dtypes the way torch does, by one rule (fuser_dialect/promotion.py;
casts are inserted)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import Float64Type, FloatAttr, IntegerAttr, i1, i32, i64
from xdsl.ir import Operation, SSAValue

from fuser_dialect import shape_rules as rules
from fuser_dialect.errors import reports_errors
from fuser_dialect.values import Scalar, Tensor, Vector, static_int
from fuser_dialect.builder_composite import CompositeOps
from fuser_dialect.builder_norm import NormOps
from fuser_dialect.ops_compute import (
    BOOL_RESULT_UNARY,
    FLOAT_INPUT_UNARY,
    FLOAT_ONLY_BINARY,
    FLOAT_ONLY_UNARY,
    BinaryKind,
    BinaryOp,
    CastOp,
    ReductionKind,
    ReductionOp,
    UnaryKind,
    UnaryOp,
    WhereOp,
    binary_operand_error,
    binary_result_dtype,
)
from fuser_dialect.ops_factory import DimOp, FullOp, IotaOp
from fuser_dialect.ops_gather import GatherOp, IndexSelectOp, TakeAlongAxisOp
from fuser_dialect.ops_scatter import ScatterOp
from fuser_dialect.ops_layout import BroadcastInDimOp, BroadcastOp, ExpandOp, PermuteOp, ReshapeOp, SqueezeOp
from fuser_dialect import builder_resize, ops_matmul
from fuser_dialect.ops_random import NormalOp, RandomOp, UniformOp, is_number as _is_number
from fuser_dialect.ops_resize import CatOp, PadOp, SliceOp
from fuser_dialect.ops_set import SegmentSetOp, SetOp
from fuser_dialect.scalar_ops import ScalarBuilder
from fuser_dialect.ops_scan import ScanKind, ScanOp, scan_result_dtype, scan_shape
from fuser_dialect.ops_select import SelectOp, select_shape, wrap_index
from fuser_dialect.ops_welford import WelfordOp, WelfordStat, accumulation_dtype
from fuser_dialect.dtype_rules import (
    COMPLEX_BINARY, COMPLEX_REDUCTION, COMPLEX_UNARY, COMPLEX_WHERE, cast_error, compute_error, unary_result_dtype,
)
from fuser_dialect.promotion import FLOAT_RANK, INT_RANK, category, promote, result_dtype
from fuser_dialect.types import (
    BROADCAST, COMPLEX_DTYPES, DYNAMIC, DYNAMIC_ENTRY, FP8_DTYPES, DataType, TensorType, dtype_name,
)

if TYPE_CHECKING:
    from fuser_dialect.builder import FusionBuilder

def _scalar_type(dtype: str):
    """The IR type of a scalar operand or fill value for tensors of `dtype`."""
    if dtype in FLOAT_RANK or dtype in FP8_DTYPES or dtype in COMPLEX_DTYPES:
        return Float64Type()
    return i1 if dtype == "i1" else i64


def _check_compute(title: str, kind: str, dtype: str, supported: tuple[str, ...]) -> None:
    error = compute_error(title, kind, dtype, supported)
    if error is not None:
        raise TypeError(error)


def _common_dtype(values: Sequence[object]) -> str:
    """The dtype a mix of tensors, Scalars and Python numbers computes in: torch's promotion,
    one rule for every op (fuser_dialect/promotion.py)."""
    return result_dtype(values)


def _binary_dtype(kind: BinaryKind, values: Sequence[object]) -> str:
    """The dtype `kind`'s operands compute in; a TypeError (as torch) for dtypes it cannot take."""
    dtype = _common_dtype(values)
    _check_compute(str(kind), kind, dtype, COMPLEX_BINARY)
    if kind in FLOAT_ONLY_BINARY and dtype in INT_RANK:
        dtype = "f32"  # as torch: atan2 of integers and bools is a float
    error = binary_operand_error(kind, dtype)
    if error is not None:
        raise TypeError(f"{kind}: {error}")
    return dtype


def _folded(e: object) -> object:
    """An int for a Scalar that is an integer constant (nvFuser folds constant extents)."""
    if isinstance(e, Scalar) and isinstance(e.value.owner, arith.ConstantOp):
        attr = e.value.owner.value
        if isinstance(attr, IntegerAttr) and attr.type in (i64, i32):
            return attr.value.data
    return e


def _with_a_scalar(op: str, *operands: object) -> tuple[object, ...]:
    """The operands of a scalar-only op: one at least must be a Scalar of the fusion (plain
    Python numbers are Python's business)."""
    if not any(isinstance(v, Scalar) for v in operands):
        shown = ", ".join(type(v).__name__ for v in operands)
        raise TypeError(f"{op}: needs a Tensor or Scalar operand, got {shown}")
    return operands


def _complex_scalars(*values: object) -> bool:
    """Whether some operand is a complex Scalar (or a Python complex): such ops run on 0-d
    tensors (fuser_dialect/builder.py Scalar.zero_dim)."""
    return any(isinstance(v, complex) or (isinstance(v, Scalar) and v.zero_dim is not None) for v in values)


def _check_condition(cond: object) -> None:
    """where's condition is a Bool tensor or scalar (nvFuser's and torch's rule: a float or an
    integer condition is refused, not compared with 0)."""
    if isinstance(cond, (Tensor, Scalar)):
        dtype = cond.type.dtype if isinstance(cond, Tensor) else cond.dtype
        if dtype != "i1":
            shown = cond.type.describe() if isinstance(cond, Tensor) else f"a {dtype} Scalar"
            raise TypeError(f"where: the condition must be of DataType Bool, got {shown}; compare it first "
                            "(e.g. fd.ops.ne(cond, 0))")
    elif not isinstance(cond, (bool, np.bool_)):
        raise TypeError(f"where: the condition must be a Bool tensor, Scalar or bool, got {cond!r}")


def _check_iota_value(what: str, value: object, dtype: DataType) -> None:
    """iota's start and step, as nvFuser checks them: real numbers of the dtype's kind (an
    integer dtype takes integers; a floating one integers or floats), finite, and a step not 0."""
    if value is None:
        return
    integer = dtype.value in ("i64", "i32")
    if isinstance(value, Scalar):
        kind = value.dtype
        if kind in COMPLEX_DTYPES or kind == "i1" or (integer and kind not in INT_RANK):
            raise TypeError(f"iota: {what} is a {kind} Scalar, which does not match dtype {dtype.name} "
                            f"(expected {'an integer' if integer else 'a real number'})")
        value = _constant(value)
        if value is None:
            return
    elif isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"iota: {what} = {value!r} does not match dtype {dtype.name} "
                        f"(expected {'an integer' if integer else 'a real number'})")
    elif integer and not isinstance(value, (int, np.integer)):
        raise TypeError(f"iota: {what} = {value!r} is a float, which does not match dtype {dtype.name} "
                        "(expected an integer)")
    if not np.isfinite(value):
        raise ValueError(f"iota: {what} = {value!r}: start and step must be finite numbers")
    if what == "step" and value == 0:
        raise ValueError(f"iota: step = {value!r}: the step must not be zero")


def _constant(value: Scalar) -> int | float | None:
    """The number a constant Scalar holds (None for an input or a computed Scalar)."""
    owner = value.value.owner
    if isinstance(owner, arith.ConstantOp):
        attr = owner.value
        return attr.value.data if isinstance(attr, (IntegerAttr, FloatAttr)) else None
    return None


def _pad_value(arg: Tensor, value: object) -> object:
    """The pad value, checked as nvFuser checks it (its dtype of the tensor's kind) where a value
    would be lost: a complex value pads a complex tensor only, and a complex tensor takes no real
    float value. fuser also takes an integer for a complex tensor (exact), and, as torch, a
    number of another kind for a real tensor (cast as the tensor's dtype: a float truncated for
    an integer tensor, nonzero is True for a Bool one). None is 0."""
    if value is None:
        return 0
    dtype = arg.type.dtype
    complex_value = isinstance(value, (complex, np.complexfloating)) or (
        isinstance(value, Scalar) and value.dtype in COMPLEX_DTYPES)
    kind = value.dtype if isinstance(value, Scalar) else type(value).__name__
    if complex_value and dtype not in COMPLEX_DTYPES:
        raise TypeError(f"pad: the pad value {value!r} is complex but the tensor {arg.type.describe()} is not; the "
                        "tensor and the pad value must have the same kind of dtype")
    float_value = isinstance(value, (float, np.floating)) or (isinstance(value, Scalar) and value.dtype in FLOAT_RANK)
    if float_value and dtype in COMPLEX_DTYPES:
        raise TypeError(f"pad: the pad value {value!r} ({kind}) is a real floating-point number but the tensor "
                        f"{arg.type.describe()} is complex; the tensor and the pad value must have the same kind of "
                        "dtype (give a complex value, e.g. complex(v, 0))")
    if isinstance(value, (complex, np.complexfloating)) and value.imag == 0:
        return value.real  # a real fill is the same value, and needs no complex scalar
    return value


def _is_size_of(e: object, arg: Tensor, dim: int) -> bool:
    """Whether `e` is `fuser.dim` of `arg` at `dim` (the dim's own extent)."""
    owner = e.value.owner if isinstance(e, Scalar) else None
    return isinstance(owner, DimOp) and owner.input == arg.value and owner.axis == dim


def _expanded_dims(arg: Tensor, axes: Sequence[int]) -> list[int]:
    """The dims in `axes` that a fuser.expand producing `arg` expanded from a broadcast dim."""
    owner = arg.value.owner
    if not isinstance(owner, ExpandOp):
        return []
    source = owner.in_type.shape
    return [d for d in axes if source[d] == BROADCAST and arg.type.shape[d] != BROADCAST]


def _norm_dim(op: str, d: int, rank: int) -> int:
    d = static_int(d, f"{op}: dim")
    if not -rank <= d < max(rank, 1):
        raise ValueError(f"{op}: dim {d} is out of range for a tensor of rank {rank}")
    return d % rank if rank else 0


def _reduced_dims(op: str, dims: object, dim: object) -> object:
    """The dims of a reduction from either of nvFuser's spellings: `dims` (a list, or one int)
    or the keyword `dim` (one int, as `fd.ops.sum(t, dim=-1)`)."""
    if dim is None:
        return dims
    if dims is not None:
        raise TypeError(f"{op}: got both dims={dims!r} and dim={dim!r}; give one of them")
    return static_int(dim, f"{op}: dim")


def _norm_dims(op: str, dims: int | Sequence[int], rank: int) -> list[int]:
    if isinstance(dims, (str, bytes)) or not isinstance(dims, (int, np.integer, Sequence)):
        raise TypeError(f"{op}: dims must be an int or a list of ints, got {dims!r}")
    dims = [dims] if isinstance(dims, (int, np.integer)) else list(dims)
    return sorted(_norm_dim(op, d, rank) for d in dims)


class Ops(CompositeOps, NormOps):
    def __init__(self, fd: FusionBuilder):
        self.fd = fd

    # -- helpers -----------------------------------------------------------
    def _emit(self, op: Operation) -> Tensor:
        return Tensor(self.fd, self.fd._append(op).results[0])

    def _tensor(self, x: object, what: str) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"{what} must be a Tensor, got {type(x).__name__}")
        return x

    def _extent(self, e: int | Scalar, what: str = "extent") -> tuple[int, SSAValue | None]:
        """(static dim or DYNAMIC, SSA extent or None) of a shape entry. A constant Scalar is
        folded as nvFuser does: a constant 1 is a broadcast dim, another a static extent. A
        negative constant is refused, as nvFuser refuses it (-1 and -2 would otherwise read as
        fuser's own markers of a dynamic and a broadcast dim)."""
        e = _folded(e)
        if isinstance(e, Scalar):
            return DYNAMIC, self.fd._scalar(e, i64).value
        n = static_int(e, what)
        if n < 0:
            raise ValueError(f"{what} = {n} is not an extent: an extent is an int >= 0 (0 an empty dim, 1 a broadcast "
                             "dim, > 1 a static extent) or an Int Scalar")
        return (BROADCAST if n == 1 else n), None

    def _int(self, v: int | Scalar, what: str = "value") -> int | SSAValue:
        """A static int, or an i64 SSA value (i32/bool Scalars are widened)."""
        v = _folded(v)
        return self.fd._scalar(v, i64).value if isinstance(v, Scalar) else static_int(v, what)

    # -- elementwise ------------------------------------------------------------
    def _zero_dim(self, v: object, dtype: str | None = None) -> object:
        """A complex Scalar or Python complex as a 0-d tensor (cast to `dtype` if given); any other
        operand as it is."""
        if isinstance(v, complex):
            v = self.fd.define_scalar(v)
        z = v.zero_dim if isinstance(v, Scalar) else None
        if z is None:
            return v
        return self.cast(z, DataType(dtype)) if dtype is not None else z

    def _as_scalar(self, result: Tensor) -> Scalar:
        """The 0-d result of an op on complex Scalars only, as a Scalar again."""
        return Scalar(self.fd, result.value)

    def cast(self, arg: Tensor, dtype: DataType) -> Tensor:
        if isinstance(arg, Scalar) and arg.zero_dim is not None:
            return self._as_scalar(self.cast(arg.zero_dim, dtype))
        if isinstance(arg, Scalar):
            return ScalarBuilder(self.fd).cast(arg, dtype)
        arg = self._tensor(arg, "cast: arg")
        dtype = DataType(dtype)
        if arg.type.dtype == dtype.real_dtype("cast: dtype"):
            return arg
        error = cast_error("cast", arg.type.dtype, dtype.value)
        if error is not None:
            raise TypeError(error)
        return self._emit(CastOp(arg.value, arg.type.without_layout().with_dtype(dtype.value)))

    def _unary(self, kind: UnaryKind, arg: Tensor) -> Tensor:
        if isinstance(arg, Scalar) and arg.zero_dim is not None:
            return self._as_scalar(self._unary(kind, arg.zero_dim))
        if isinstance(arg, Scalar):
            return ScalarBuilder(self.fd).unary(str(kind), arg)
        arg = self._tensor(arg, f"{kind}: arg")
        if arg.type.dtype in FP8_DTYPES:
            arg = self.cast(arg, DataType.Float)
        if kind == UnaryKind.REAL and arg.type.dtype not in COMPLEX_DTYPES:
            return arg  # torch.real of a real tensor is the tensor
        _check_compute(str(kind), kind, arg.type.dtype, COMPLEX_UNARY)
        real = arg.type.dtype not in COMPLEX_DTYPES  # complex kinds (checked above) take complex as it is
        if kind in FLOAT_ONLY_UNARY and real and arg.type.dtype not in FLOAT_RANK:
            arg = self.cast(arg, DataType.Float)
        if kind in FLOAT_INPUT_UNARY and real and arg.type.dtype not in FLOAT_RANK:
            raise TypeError(f"{kind}: arg must be a floating-point tensor, got {arg.type.dtype}")
        out = arg.type.without_layout()
        out = out.with_dtype("i1" if kind in BOOL_RESULT_UNARY else unary_result_dtype(kind, out.dtype))
        return self._emit(UnaryOp(kind, arg.value, out))

    def _operands(self, values: Sequence[object], dtype: str | None = None) -> tuple[str, list[SSAValue]]:
        """Promotes a mix of tensors and scalars (to `dtype` if given); returns (compute dtype,
        SSA operands)."""
        tensors = [v for v in values if isinstance(v, Tensor)]
        if not tensors:
            raise TypeError("at least one operand must be a Tensor")
        dtype = dtype or _common_dtype(values)
        rank = max(t.ndim for t in tensors)
        operands = []
        for v in (self._zero_dim(v) for v in values):
            if isinstance(v, Tensor):
                operands.append(self._to_rank(self.cast(v, DataType(dtype)), rank).value)
            else:
                target = _scalar_type(dtype)
                operands.append(self.fd._scalar(v, target).value)
        return dtype, operands

    def _to_rank(self, t: Tensor, rank: int) -> Tensor:
        """`t` broadcast on the left to `rank`: new broadcast dims before its own, as numpy, torch
        and nvFuser's elementwise ops align a lower-rank operand with the trailing dims (a 0-d
        tensor broadcasts against anything). The broadcast is an op of its own: the IR of an
        elementwise op always has operands of one rank."""
        missing = rank - t.ndim
        return self.broadcast(t, [True] * missing + [False] * t.ndim) if missing > 0 else t

    def _binary(self, kind: BinaryKind, a: object, b: object) -> Tensor:
        if not isinstance(a, Tensor) and not isinstance(b, Tensor) and _complex_scalars(a, b):
            dtype = _binary_dtype(kind, [a, b])  # as Scalars promote, then computed on 0-d tensors
            return self._as_scalar(self._binary(kind, *(self._zero_dim(v, dtype) for v in (a, b))))
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            return ScalarBuilder(self.fd).binary(str(kind), *_with_a_scalar(str(kind), a, b))
        dtype, (lhs, rhs) = self._operands([a, b], _binary_dtype(kind, [a, b]))
        types = [v.type for v in (lhs, rhs) if isinstance(v.type, TensorType)]
        dims = rules.elementwise(f"fuser.binary {kind}", types)
        out = TensorType(binary_result_dtype(kind, dtype), dims)
        return self._emit(BinaryOp(kind, lhs, rhs, out))

    def where(self, cond: object, x: object, y: object) -> Tensor:
        _check_condition(cond)
        if _complex_scalars(cond, x, y):  # as Scalars promote, then computed on 0-d tensors
            dtype = _common_dtype([x, y])
            result = self.where(self._zero_dim(cond), *(self._zero_dim(v, dtype) for v in (x, y)))
            return result if any(isinstance(v, Tensor) for v in (cond, x, y)) else self._as_scalar(result)
        if not any(isinstance(v, Tensor) for v in (cond, x, y)):
            return ScalarBuilder(self.fd).where(*_with_a_scalar("where", cond, x, y))
        if isinstance(cond, Tensor):
            rank = max(v.ndim for v in (cond, x, y) if isinstance(v, Tensor))
            cond_value = self._to_rank(cond, rank).value
            x, y = (self._to_rank(v, rank) if isinstance(v, Tensor) else v for v in (x, y))
        else:
            cond_value = self.fd._scalar(cond, i1).value
        if isinstance(x, Tensor) or isinstance(y, Tensor):
            dtype, (xv, yv) = self._operands([x, y])
        else:
            dtype = _common_dtype([x, y])
            xv, yv = (self.fd._scalar(v, DataType(dtype).element_type).value for v in (x, y))
        types = [v.type for v in (cond_value, xv, yv) if isinstance(v.type, TensorType)]
        if not types:
            raise TypeError("where: at least one operand must be a Tensor")
        _check_compute("where", "where", dtype, COMPLEX_WHERE)
        dims = rules.elementwise("fuser.where", types)
        return self._emit(WhereOp(cond_value, xv, yv, TensorType(dtype, dims)))

    # -- reductions ---------------------------------------------------------------
    def _reduction(self, kind: ReductionKind, arg: Tensor, dims, keepdim: bool, dtype: DataType | None) -> Tensor:
        arg = self._tensor(arg, f"{kind}: arg")
        if isinstance(dims, DataType) and dtype is None:  # nvFuser's overload sum(arg, dtype): every dim
            dims, dtype = None, dims
        if dtype is not None and DataType(dtype) is not DataType.Null:  # Null: keep arg's dtype (nvFuser)
            arg = self.cast(arg, dtype)
        elif arg.type.dtype in FP8_DTYPES:
            arg = self.cast(arg, DataType.Float)
        elif kind in (ReductionKind.SUM, ReductionKind.PROD) and category(arg.type.dtype) < 2:
            arg = self.cast(arg, DataType.Int)  # as torch and nvFuser: bool/integer sums are i64
        _check_compute(str(kind), kind, arg.type.dtype, COMPLEX_REDUCTION)
        # No dims (None or []) reduce every dim, as torch.sum(t) does.
        axes = _norm_dims(f"fuser.reduction {kind}", [] if dims is None else dims, arg.ndim) or list(range(arg.ndim))
        out = rules.reduction(f"fuser.reduction {kind}", arg.type, axes, keepdim)
        return self._emit(ReductionOp(kind, arg.value, axes, keepdim, TensorType(arg.type.dtype, out)))

    def sum(self, arg, dims=None, keepdim=False, dtype=None, *, dim=None):
        return self._reduction(ReductionKind.SUM, arg, _reduced_dims("sum", dims, dim), keepdim, dtype)

    def prod(self, arg, dims=None, keepdim=False, dtype=None, *, dim=None):
        return self._reduction(ReductionKind.PROD, arg, _reduced_dims("prod", dims, dim), keepdim, dtype)

    def max(self, arg, dims=None, keepdim=False, dtype=None, *, dim=None):
        return self._reduction(ReductionKind.MAX, arg, _reduced_dims("max", dims, dim), keepdim, dtype)

    def min(self, arg, dims=None, keepdim=False, dtype=None, *, dim=None):
        return self._reduction(ReductionKind.MIN, arg, _reduced_dims("min", dims, dim), keepdim, dtype)

    # -- welford, var, var_mean (fuser_dialect/ops_welford.py) ----------------------------
    def welford(self, arg, dims):
        """(avg, var_sum, n) over `dims`: the mean, the sum of squared deviations from it and
        the element count (an i64 tensor). avg and var_sum are f32 for f16/bf16 inputs."""
        arg, axes = self._welford_args("welford", arg, dims)
        return tuple(self._welford(stat, arg, axes, keepdim=False) for stat in WelfordStat)

    def var(self, arg, dims, correction=1, keepdim=False):
        """torch.var: var_sum / max(n - correction, 0), in the input dtype."""
        arg, axes = self._welford_args("var", arg, dims)
        return self._variance("var", arg, axes, correction, keepdim)

    def var_mean(self, arg, dims, correction=1, keepdim=False):
        """torch.var_mean: (var, mean), both in the input dtype."""
        arg, axes = self._welford_args("var_mean", arg, dims)
        var = self._variance("var_mean", arg, axes, correction, keepdim)
        mean = self._welford(WelfordStat.AVG, arg, axes, keepdim)
        return var, self.cast(mean, arg.dtype)

    def _welford_args(self, name: str, arg: object, dims) -> tuple[Tensor, list[int]]:
        """The checked input and its sorted reduced dims (None or [] reduce every dim, as torch)."""
        arg = self._tensor(arg, f"{name}: arg")
        if arg.type.dtype not in FLOAT_RANK:
            raise TypeError(f"{name}: arg must be a floating-point tensor, got {arg.type.dtype}")
        axes = _norm_dims(name, [] if dims is None else dims, arg.ndim)
        return arg, axes or list(range(arg.ndim))

    def _welford(self, stat: WelfordStat, arg: Tensor, axes: list[int], keepdim: bool) -> Tensor:
        dtype = "i64" if stat == WelfordStat.N else accumulation_dtype(arg.type.dtype)
        out = rules.reduction(f"fuser.welford {stat}", arg.type, axes, keepdim)
        return self._emit(WelfordOp(stat, arg.value, axes, keepdim, TensorType(dtype, out)))

    def _variance(self, name: str, arg: Tensor, axes: list[int], correction: object, keepdim: bool) -> Tensor:
        correction = static_int(correction, f"{name}: correction")
        var_sum = self._welford(WelfordStat.VAR_SUM, arg, axes, keepdim)
        # torch divides by max(n - correction, 0): where that is 0 the variance is inf (nan for 0/0).
        count = self._reduced_count(arg, axes)
        if isinstance(count, int):
            dof: int | Scalar = max(count - correction, 0)
        else:
            dof = self._i64(arith.MaxSIOp, self._i64(arith.SubiOp, count, correction), 0)
        return self.cast(self.div(var_sum, dof), arg.dtype)

    def _reduced_count(self, arg: Tensor, axes: list[int]) -> int | Scalar:
        """The number of elements each result element reduces: an int when every reduced
        extent is static, else an i64 Scalar (a product of `fuser.dim`s)."""
        static = 1
        count: Scalar | None = None
        for d in axes:
            extent = arg.type.static_extent(d)
            if extent is not None:
                static *= extent
            else:
                count = self.size(arg, d) if count is None else self._i64(arith.MuliOp, count, self.size(arg, d))
        if count is None:
            return static
        return count if static == 1 else self._i64(arith.MuliOp, count, static)

    def _i64(self, op_type: type[Operation], lhs: int | Scalar, rhs: int | Scalar) -> Scalar:
        """`op_type` (an arith op on i64) of two extents."""
        a, b = self.fd._scalar(lhs, i64), self.fd._scalar(rhs, i64)
        return Scalar(self.fd, self.fd._append(op_type(a.value, b.value)).results[0])

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
        """Broadcast dims take the extents in `shape` (-1, or the dim's own size, keeps a dim).
        A Scalar extent on a `?` dim expands it too: that dim may be 1 at run time."""
        arg = self._tensor(arg, "expand: arg")
        if len(shape) != arg.ndim:
            raise ValueError(f"expand: shape {list(shape)} has {len(shape)} entries for a tensor of rank {arg.ndim}")
        arg = self._mark_expanded_ones(arg, shape)
        dims, extents, changed = [], [], False
        for d, (have, want) in enumerate(zip(arg.type.shape, shape)):
            want = _folded(want)
            if _is_size_of(want, arg, d) or (isinstance(want, int) and want in (-1, have)) or (want == 1 and have == BROADCAST):
                dims.append(have)
                if have == DYNAMIC:
                    extents.append(want.value if isinstance(want, Scalar) else self.size(arg, d).value)
            elif isinstance(want, Scalar):
                dims.append(DYNAMIC)
                extents.append(self.fd._scalar(want, i64).value)
                changed = True
            else:
                dims.append(static_int(want, f"expand: shape[{d}]"))
                changed = True
        if not changed:
            return arg
        rules.expand("fuser.expand", arg.type, dims)
        return self._emit(ExpandOp(arg.value, extents, TensorType(arg.type.dtype, dims)))

    def _mark_expanded_ones(self, arg: Tensor, shape: Sequence[int | Scalar]) -> Tensor:
        """`arg` with each static extent-1 dim that `shape` widens made a broadcast dim (squeezed,
        then broadcast again), as torch and nvFuser expand any extent-1 dim: a slice [0:1] or a
        reshape to 1 gives such a dim, and only broadcast dims expand in the IR."""
        ones = []
        for d, (have, want) in enumerate(zip(arg.type.shape, shape)):
            want = _folded(want)
            if have == 1 and not _is_size_of(want, arg, d) and not (isinstance(want, int) and want in (-1, 1)):
                ones.append(d)
        if not ones:
            return arg
        return self.broadcast(self.squeeze(arg, ones), [d in ones for d in range(arg.ndim)])

    def squeeze(self, arg: Tensor, dims: int | Sequence[int], squeeze_expanded: bool = False) -> Tensor:
        """Removes extent-1 dims. An expanded broadcast dim (the result of expand) is squeezed
        only with squeeze_expanded=True, as in nvFuser: its broadcast source is squeezed."""
        arg = self._tensor(arg, "squeeze: arg")
        axes = _norm_dims("fuser.squeeze", dims, arg.ndim)
        expanded = _expanded_dims(arg, axes)
        if expanded and not squeeze_expanded:
            raise ValueError(
                f"squeeze: dim {expanded[0]} of {arg.type.describe()} is an expanded broadcast dim (fuser.expand of "
                "an extent-1 dim); pass squeeze_expanded=True to squeeze it"
            )
        if expanded:
            return self._squeeze_expanded(arg, axes)
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
        # Constant Scalars fold to ints; the others become i64 (an i32 is widened, a float refused).
        entries = [self.fd._scalar(e, i64) if isinstance(e, Scalar) else e for e in map(_folded, new_shape)]
        if sum(1 for e in entries if not isinstance(e, Scalar) and e == -1) > 1:
            raise ValueError(f"reshape: at most one -1 in new_shape {entries}")
        if any(not isinstance(e, Scalar) and e == -1 for e in entries):
            entries = self._infer_reshape_dim(arg, entries)
        dims, extents = [], []
        for i, e in enumerate(entries):
            d, v = self._extent(e, f"reshape: new_shape[{i}]")
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
        value = _pad_value(arg, value)
        if _complex_scalars(value):  # kernels take no complex scalar: pad with 0, then pick the value outside
            return self._pad_complex(arg, pad_widths, value)
        fill = self._fill(value, arg.type.dtype)
        return self._emit(PadOp(arg.value, widths, fill.value, TensorType(arg.type.dtype, dims)))

    def _pad_complex(self, arg: Tensor, pad_widths: Sequence[int | Scalar], value: object) -> Tensor:
        """pad of a complex tensor with a complex value: where(inside, pad(arg, 0), value), where
        `inside` is a pad of an all-True tensor shaped like arg with False."""
        inside = self.pad(self.full(self.shape(arg), True, DataType.Bool), pad_widths, False)
        return self.where(inside, self.pad(arg, pad_widths, 0), value)

    def slice(self, arg: Tensor, start_indices, end_indices, strides=None, manual_normalization=False, *,
              python_slicing: bool = False) -> Tensor:
        """nvFuser's slice: per dim [start, end) with step 1; an end past the extent is clamped
        to it. As nvFuser, a constant start < 0, a constant end before a constant start and a
        stride other than 1 are refused (fuser_dialect/builder_resize.py check_nvfuser_bounds).
        manual_normalization=True promises normalized bounds (builder_resize.check_normalized).

        python_slicing=True (fuser's own) takes Python's rules instead: negative bounds count
        from the end, bounds are clamped, an end before the start gives an empty dim, and any
        step >= 1 is taken (x[start:end:step] for each dim)."""
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
        strides = [static_int(st, f"slice: strides[{d}]") for d, st in enumerate(strides)]
        if manual_normalization:
            builder_resize.check_normalized(arg, bounds[0::2], bounds[1::2])
        if not python_slicing:
            builder_resize.check_nvfuser_bounds(arg, bounds[0::2], bounds[1::2], strides)
        static = [DYNAMIC_ENTRY if isinstance(b, SSAValue) else b for b in bounds]
        dims = rules.slice_("fuser.slice", arg.type, static, strides)
        return self._emit(SliceOp(arg.value, bounds, strides, TensorType(arg.type.dtype, dims)))

    def cat(self, tensors: Sequence[Tensor], dim: int = 0, manual_padding: bool = False) -> Tensor:
        """torch.cat. manual_padding=True: each input is a pad along `dim` of one tensor to the
        whole output (nvFuser's flag; fuser_dialect/builder_resize.py)."""
        tensors = [self._tensor(t, f"cat: tensors[{k}]") for k, t in enumerate(tensors)]
        if not tensors:
            raise ValueError("cat: needs at least one tensor")
        if manual_padding:
            return self.cat(builder_resize.padded_sources(tensors, _norm_dim("fuser.cat", dim, tensors[0].ndim)), dim)
        dtype = tensors[0].type.dtype
        for t in tensors[1:]:
            dtype = promote(dtype, t.type.dtype)
        tensors = [self.cast(t, DataType(dtype)) for t in tensors]
        axis = _norm_dim("fuser.cat", dim, tensors[0].ndim)
        dims = rules.cat("fuser.cat", [t.type for t in tensors], axis)
        if len(tensors) == 1:  # the cat of one tensor is that tensor: a copy of it (as torch.cat's result)
            return self.set(tensors[0])
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

    def scatter(self, arg: Tensor, index: Tensor, src: Tensor | Scalar | float | int | bool, dim: int) -> Tensor:
        """torch.scatter (nvFuser's argument order): `arg` with src[p] written at p with `dim`
        replaced by index[p]; a number or Scalar src is that value at every index position.
        Where index elements collide, the last along `dim` wins (fuser_dialect/ops_scatter.py)."""
        arg = self._tensor(arg, "scatter: arg")
        index = self._tensor(index, "scatter: index")
        axis = _norm_dim("fuser.scatter", dim, arg.ndim)
        if not isinstance(src, Tensor):
            shape = [self.size(index, d) for d in range(index.ndim)]
            src = self.full(shape, src, DataType(arg.type.dtype))
        dims = rules.scatter("fuser.scatter", arg.type, index.type, src.type, axis)
        return self._emit(ScatterOp(arg.value, index.value, src.value, axis, TensorType(arg.type.dtype, dims)))

    # -- scans and select (torch names: nvFuser offers cumsum only) ---------------------
    def _scan(self, kind: ScanKind, name: str, arg: Tensor, dim: int) -> Tensor:
        arg = self._tensor(arg, f"{name}: arg")
        axis = _norm_dim(name, static_int(dim, f"{name}: dim"), arg.ndim)
        dims = scan_shape(f"fuser.scan {kind}", arg.type, axis)
        out = TensorType(scan_result_dtype(kind, arg.type.dtype), dims)
        return self._emit(ScanOp(kind, arg.value, axis, out))

    def cumsum(self, arg: Tensor, dim: int) -> Tensor:
        """torch.cumsum: integer and bool inputs give i64."""
        return self._scan(ScanKind.SUM, "cumsum", arg, dim)

    def cumprod(self, arg: Tensor, dim: int) -> Tensor:
        """torch.cumprod: integer and bool inputs give i64."""
        return self._scan(ScanKind.PROD, "cumprod", arg, dim)

    def cummax(self, arg: Tensor, dim: int) -> Tensor:
        """The values of torch.cummax (no indices); NaN propagates."""
        return self._scan(ScanKind.MAX, "cummax", arg, dim)

    def cummin(self, arg: Tensor, dim: int) -> Tensor:
        """The values of torch.cummin (no indices); NaN propagates."""
        return self._scan(ScanKind.MIN, "cummin", arg, dim)

    def select(self, arg: Tensor, index: int | Scalar, dim: int) -> Tensor:
        """torch.select: the slice at `index` (negative counts from the end) of `dim`, which goes."""
        arg = self._tensor(arg, "select: arg")
        axis = _norm_dim("select", static_int(dim, "select: dim"), arg.ndim)
        dims = select_shape("fuser.select", arg.type, axis)
        position = self._select_index(index, arg.type.static_extent(axis), axis)
        return self._emit(SelectOp(arg.value, position.value, axis, TensorType(arg.type.dtype, dims)))

    def _select_index(self, index: int | Scalar, extent: int | None, axis: int) -> Scalar:
        """The index as an integer scalar; a constant is range-checked here when the extent is static."""
        if isinstance(index, Scalar):
            if index.dtype not in ("i64", "i32"):
                raise TypeError(f"select: index must be an integer Scalar, got a {index.dtype} Scalar")
            return index
        value = static_int(index, "select: index")
        if extent is not None:
            wrap_index("select", value, extent, axis)
        return self.fd._scalar(value, i64)

    # -- matrix products (fuser_dialect/ops_matmul.py; run as host segments) ------------
    def matmul(self, arg1: Tensor, arg2: Tensor) -> Tensor:
        """torch.matmul: 1-D operands, batch dims broadcast; the result has the operands' dtype."""
        arg1 = self._tensor(arg1, "matmul: arg1")
        arg2 = self._tensor(arg2, "matmul: arg2")
        dims = ops_matmul.matmul("fuser.matmul", arg1.type, arg2.type)
        return self._emit(ops_matmul.MatmulOp(arg1.value, arg2.value, TensorType(arg1.type.dtype, dims)))

    def linear(self, arg1: Tensor, arg2: Tensor, bias: Tensor | None = None) -> Tensor:
        """torch.nn.functional.linear: arg1 [..., K] @ arg2 [N, K]^T (+ bias [N])."""
        arg1 = self._tensor(arg1, "linear: arg1 (input)")
        arg2 = self._tensor(arg2, "linear: arg2 (weight)")
        bias = None if bias is None else self._tensor(bias, "linear: bias")
        dims = ops_matmul.linear("fuser.linear", arg1.type, arg2.type, None if bias is None else bias.type)
        out = TensorType(arg1.type.dtype, dims)
        return self._emit(ops_matmul.LinearOp(arg1.value, arg2.value, None if bias is None else bias.value, out))

    # -- factories and queries ------------------------------------------------------
    def iota(self, length: int | Scalar, start=None, step=None, dtype: DataType = DataType.Int) -> Tensor:
        dtype = DataType(dtype)
        if dtype.real_dtype("iota: dtype") in FP8_DTYPES + COMPLEX_DTYPES:
            raise TypeError(f"iota: dtype must be an integer or floating-point dtype, got {dtype.name}")
        integer = dtype.value in ("i64", "i32")
        if isinstance(length, Scalar):
            if length.dtype not in ("i64", "i32"):
                raise TypeError(f"iota: length must be an integer, got a {length.dtype} Scalar")
        elif static_int(length, "iota: length") < 0:
            raise ValueError(f"iota: length {length} is negative")
        for what, value in (("start", start), ("step", step)):
            _check_iota_value(what, value, dtype)
        length_v = self.fd._scalar(length, i64)
        scalar_t = i64 if integer else Float64Type()
        start_v = self.fd._scalar(0 if start is None else start, scalar_t)
        step_v = self.fd._scalar(1 if step is None else step, scalar_t)
        extent = DYNAMIC if isinstance(length, Scalar) else static_int(length, "iota length")
        return self._emit(IotaOp(length_v.value, start_v.value, step_v.value, TensorType(dtype.value, [extent])))

    def full(self, shape: Sequence[int | Scalar], fill_value: object, dtype: DataType) -> Tensor:
        dtype = DataType(dtype)
        dtype.real_dtype("full: dtype")
        dims, extents = [], []
        for i, e in enumerate(shape):
            d, v = self._extent(e, f"full: shape[{i}]")
            dims.append(d)
            if v is not None:
                extents.append(v)
        if _complex_scalars(fill_value):
            fill = self._zero_dim(fill_value, dtype.value)
            return self.broadcast_in_dim(fill, shape, []) if dims else fill
        fill = self._fill(fill_value, dtype.value)
        return self._emit(FullOp(extents, fill.value, TensorType(dtype.value, dims)))

    def _fill(self, value: object, dtype: str) -> Scalar:
        """The fill value of a pad or full of `dtype`, converted as nvFuser casts it: a float
        Scalar for an integer tensor truncates, exactly as the Python float it was defined from."""
        target = _scalar_type(dtype)
        if not isinstance(value, Scalar) and (isinstance(value, (str, bytes)) or not isinstance(
                value, (bool, int, float, np.bool_, np.number))):
            raise TypeError(f"the fill value must be a number or a Scalar, got {value!r}")
        if isinstance(value, Scalar) and target == i64 and value.dtype not in INT_RANK:
            value = self.fd.scalars.cast(value, DataType.Int)
        return self.fd._scalar(value, target)

    def size(self, arg: Tensor, dim: int) -> Scalar:
        """The extent of `dim`: a constant when the dim is static or broadcast (folded, as in nvFuser)."""
        arg = self._tensor(arg, "size: arg")
        axis = _norm_dim("fuser.dim", dim, arg.ndim)
        static = arg.type.static_extent(axis)
        if static is not None:
            return self.fd._scalar(static, i64)
        return Scalar(self.fd, self.fd._append(DimOp(arg.value, axis)).results[0])

    # -- random numbers (fuser_dialect/ops_random.py, fuser_dialect/philox.py) ------------
    def uniform(self, minval, maxval, shape, rng_seed=None, rng_offset=None, dtype=DataType.Float) -> Tensor:
        """Uniform values in [minval, maxval) of `shape` (ints or Int Scalars). With rng_seed and
        rng_offset (Int Scalars or ints, both or neither) the values are reproducible on every
        backend; without them every execution draws new ones from the process generator."""
        if _is_number(minval) and _is_number(maxval) and minval > maxval:
            raise ValueError(f"uniform: minval {minval} > maxval {maxval}: expected a [minval, maxval) range")
        return self._random(UniformOp, ("minval", minval), ("maxval", maxval), shape, rng_seed, rng_offset, dtype)

    def normal(self, mean, std, shape, rng_seed=None, rng_offset=None, dtype=DataType.Float) -> Tensor:
        """Normal values (mean, std) of `shape`; seeds as for `uniform`."""
        if _is_number(std) and std < 0:
            raise ValueError(f"normal: std {std} is negative: expected std >= 0")
        return self._random(NormalOp, ("mean", mean), ("std", std), shape, rng_seed, rng_offset, dtype)

    def rand_like(self, arg, rng_seed=None, rng_offset=None, dtype=None) -> Tensor:
        """uniform(0, 1) shaped like `arg`, of `arg`'s dtype unless `dtype` is given."""
        arg = self._tensor(arg, "rand_like: arg")
        return self.uniform(0.0, 1.0, self.shape(arg), rng_seed, rng_offset, arg.dtype if dtype is None else dtype)

    def randn_like(self, arg, rng_seed=None, rng_offset=None, dtype=None) -> Tensor:
        """normal(0, 1) shaped like `arg`, of `arg`'s dtype unless `dtype` is given."""
        arg = self._tensor(arg, "randn_like: arg")
        return self.normal(0.0, 1.0, self.shape(arg), rng_seed, rng_offset, arg.dtype if dtype is None else dtype)

    def _random(self, op_type: type[RandomOp], first: tuple, second: tuple, shape, rng_seed, rng_offset,
                dtype) -> Tensor:
        name = op_type.name
        dtype = DataType(dtype)
        if dtype.value not in FLOAT_RANK:
            raise ValueError(f"{name}: dtype {dtype.name}: random distributions only create floating point tensors "
                             "(Double, Float, Half, BFloat16)")
        parameters = [self._random_parameter(name, what, v) for what, v in (first, second)]
        dims, extents = self._random_shape(name, shape)
        seed, offset = self._rng_state(name, rng_seed, rng_offset)
        return self._emit(op_type(extents, *parameters, seed, offset, TensorType(dtype.value, dims)))

    def _random_parameter(self, name: str, what: str, value: object) -> SSAValue:
        if isinstance(value, Scalar) and dtype_name(value.value.type) in ("f64", "f32", "i64", "i32"):
            return value.value
        if not _is_number(value):
            raise TypeError(f"{name}: {what} must be a number or a numeric Scalar, got {value!r}")
        return self.fd._scalar(value, Float64Type()).value

    def _random_shape(self, name: str, shape) -> tuple[list[int], list[SSAValue]]:
        """(result dims, one i64 extent per dim: static ones are constants)."""
        if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
            raise TypeError(f"{name}: shape must be a list of ints or Int Scalars, got {shape!r}")
        dims, extents = [], []
        for i, e in enumerate(shape):
            if isinstance(e, Scalar) and e.dtype != "i64":
                raise TypeError(f"{name}: shape[{i}] is a {e.dtype} Scalar: expected an Int Scalar")
            if not isinstance(e, Scalar) and static_int(e, f"{name}: shape[{i}]") < 0:
                raise ValueError(f"{name}: shape[{i}] = {e}: extents must be >= 0")
            d, v = self._extent(e)
            dims.append(d)
            extents.append(v if v is not None else self.fd._scalar(1 if d == BROADCAST else d, i64).value)
        return dims, extents

    def _rng_state(self, name: str, rng_seed, rng_offset) -> tuple[SSAValue | None, SSAValue | None]:
        if rng_seed is None and rng_offset is None:
            return None, None
        if rng_seed is None or rng_offset is None:
            raise ValueError(f"{name}: rng_seed and rng_offset must be provided together")
        values = []
        for what, v in (("rng_seed", rng_seed), ("rng_offset", rng_offset)):
            if isinstance(v, Scalar) and v.dtype != "i64":
                raise TypeError(f"{name}: {what} is a {v.dtype} Scalar: expected an Int Scalar "
                                "(define_scalar(dtype=DataType.Int)) or an int")
            if not isinstance(v, Scalar):
                static_int(v, f"{name}: {what}")
            values.append(self.fd._scalar(v, i64).value)
        return values[0], values[1]

    # -- frontend API: shapes, copies, composites (engineer API) ----------------------
    def shape(self, arg: Tensor) -> Vector:
        """Every extent of `arg`, as a Vector of Int scalars."""
        arg = self._tensor(arg, "shape: arg")
        return Vector(self.size(arg, d) for d in range(arg.ndim))

    def set(self, arg: Tensor) -> Tensor:
        """A copy of `arg` (nvFuser's set)."""
        return self._emit(SetOp(self._tensor(arg, "set: arg").value))

    def stride_order(self, arg: Tensor, stride_order: Sequence[int]) -> Tensor:
        """`arg` laid out in `stride_order` (0 = the fastest dim, as add_output's): a copy whose
        order is a requirement when it is a fusion output; elsewhere the values are arg's and the
        compiler picks the layout (nvFuser's stride_order)."""
        t = self._tensor(arg, "stride_order: arg")
        order = tuple(int(d) for d in stride_order)
        if sorted(order) != list(range(t.ndim)):
            raise ValueError(f"stride_order: {list(order)} is not a permutation of range({t.ndim}) "
                             f"for the {t.ndim}-d tensor {t.type.describe()}")
        out = self.set(t)
        self.fd.stride_orders[out.value] = order
        return out

    def segment_set(self, arg: Tensor) -> Tensor:
        """A copy of `arg` that ends a kernel: its consumers run in a later one."""
        return self._emit(SegmentSetOp(self._tensor(arg, "segment_set: arg").value))

    def _squeeze_expanded(self, arg: Tensor, axes: list[int]) -> Tensor:
        """Squeezes the expand's broadcast source, then expands the kept dims again."""
        source = Tensor(self.fd, arg.value.owner.input)  # type: ignore[union-attr]
        squeezed = self.squeeze(source, axes)
        kept = [d for d in range(arg.ndim) if d not in axes]
        return self.expand(squeezed, [self.size(arg, d) for d in kept])

    def embedding_fwd(self, input: Tensor, weight: Tensor, padding_idx=None, max_norm=None, norm_type=None,
                      scale_grad_by_freq=None, sparse=None) -> Tensor:
        """torch.nn.functional.embedding: weight rows gathered by `input`, shaped input.shape + [D].
        padding_idx, scale_grad_by_freq and sparse only change the backward; they are accepted.
        max_norm (a number or Scalar; norm_type, default 2.0, too): each gathered row whose
        norm_type-norm exceeds max_norm is scaled by max_norm / (norm + 1e-7), torch's values.
        Unlike torch, `weight` itself is NOT renormalised in place (torch's embedding writes the
        scaled rows back into it): a fusion does not write its inputs unless told to."""
        input = self._tensor(input, "embedding_fwd: input")
        weight = self._tensor(weight, "embedding_fwd: weight")
        if weight.ndim != 2:
            raise ValueError(f"embedding_fwd: weight must be 2-D [num_embeddings, D], got {weight.type.describe()}")
        if input.type.dtype not in ("i64", "i32"):
            raise TypeError(f"embedding_fwd: input must hold integer indices, got {input.type.dtype}")
        flat = self.reshape(input, [-1]) if input.ndim != 1 else input
        rows = self.index_select(weight, flat, 0)
        if max_norm is not None:
            rows = self._renormed(rows, max_norm, 2.0 if norm_type is None else norm_type)
        if input.ndim == 1:
            return rows
        return self.reshape(rows, [*self.shape(input), self.size(weight, 1)])


    def _renormed(self, rows: Tensor, max_norm: object, norm_type: object) -> Tensor:
        """`rows` [N, D] with each row of p-norm (p = norm_type) above max_norm scaled by
        max_norm / (norm + 1e-7), as torch.embedding_renorm_ does (computed in f32, f64 for f64)."""
        dtype = rows.type.dtype
        if dtype not in FLOAT_RANK:
            raise TypeError(f"embedding_fwd: max_norm needs a floating-point weight, got {dtype}")
        x = self.cast(rows, DataType.Double if dtype == "f64" else DataType.Float)
        if isinstance(norm_type, Scalar):  # known at run time: the inf-norm chosen then
            p_norm = self.pow(self.sum(self.pow(self.abs(x), norm_type), [1], keepdim=True), self.reciprocal(norm_type))
            norm = self.where(self.eq(norm_type, float("inf")), self.max(self.abs(x), [1], keepdim=True), p_norm)
        elif norm_type == float("inf"):
            norm = self.max(self.abs(x), [1], keepdim=True)
        elif norm_type == 2:
            norm = self.sqrt(self.sum(self.mul(x, x), [1], keepdim=True))
        elif norm_type == 1:
            norm = self.sum(self.abs(x), [1], keepdim=True)
        else:
            norm = self.pow(self.sum(self.pow(self.abs(x), float(norm_type)), [1], keepdim=True), 1.0 / norm_type)
        scale = self.where(self.gt(norm, max_norm), self.div(max_norm, self.add(norm, 1e-7)), 1.0)
        return self.cast(self.mul(x, scale), DataType(dtype))


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


def _report_errors_at_the_frontend() -> None:
    """Every public `fd.ops` method raises fuser's error classes, RuntimeErrors as nvFuser's
    (fuser_dialect/errors.py): wrapped once here, after the generated ones are attached."""
    for name in dir(Ops):
        method = getattr(Ops, name)
        if not name.startswith("_") and callable(method):
            setattr(Ops, name, reports_errors(method, name, builder=lambda ops: ops.fd))


_report_errors_at_the_frontend()
