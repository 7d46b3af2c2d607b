"""Composite `fd.ops` (nvFuser's names and argument order) built from the elementwise ops,
iota and where: addcmul, add_alpha, sub_alpha, mod, lerp, clamp, threshold, silu, triu.

Float composites of f16/bf16 tensors compute in f32 and round once at the end, as torch's
kernels do (their "opmath" type); rounding every intermediate would drift from torch."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fuser_dialect.values import Scalar, Tensor, static_int
from fuser_dialect.promotion import result_dtype
from fuser_dialect.types import FLOAT_DTYPES, DataType

_HALF_DTYPES = ("f16", "bf16")


class CompositeOps:
    """Mixed into `Ops` (fuser_dialect/builder_ops.py), whose primitive ops these call."""

    def _in_opmath(self, values: Sequence[object], body: Callable[..., Tensor]) -> Tensor:
        """body(*values) with f16/bf16 tensors widened to f32, its result rounded back once."""
        dtype = result_dtype(values)
        if dtype not in _HALF_DTYPES:
            return body(*values)
        widened = [self.cast(v, DataType.Float) if isinstance(v, Tensor) else v for v in values]
        return self.cast(body(*widened), DataType(dtype))

    def _floats(self, name: str, **tensors: object) -> None:
        for what, t in tensors.items():
            if isinstance(t, Tensor) and t.type.dtype not in FLOAT_DTYPES:
                raise TypeError(f"{name}: {what} must be a floating-point tensor, got {t.type.dtype}")

    def addcmul(self, arg: Tensor, t1: object, t2: object, value: object = 1.0) -> Tensor:
        """torch.addcmul: arg + value * t1 * t2."""
        arg = self._tensor(arg, "addcmul: arg")
        return self._in_opmath([arg, t1, t2, value], lambda a, x, y, v: a + v * x * y)

    def lerp(self, start: Tensor, end: object, weight: object) -> Tensor:
        """torch.lerp: start + weight * (end - start), written as torch writes it so that
        lerp(a, b, 1) is exactly b: for |weight| >= 0.5 it is end - (end - start) * (1 - weight)."""

        def body(s, e, w):
            diff = e - s
            near_start, near_end = s + w * diff, e - diff * (1 - w)
            if isinstance(w, (int, float)):
                return near_start if abs(w) < 0.5 else near_end
            return self.where(self.lt(self.abs(w), 0.5), near_start, near_end)

        start = self._tensor(start, "lerp: start")
        self._floats("lerp", start=start, end=end, weight=weight)
        return self._in_opmath([start, end, weight], body)

    def clamp(self, arg: Tensor, min: object = None, max: object = None) -> Tensor:
        """torch.clamp: NaN inputs stay NaN; where min > max every element is max."""
        arg = self._tensor(arg, "clamp: arg")
        if min is None and max is None:
            raise ValueError("clamp: at least one of min and max must be given")
        out = arg if min is None else self.maximum(arg, min)
        return out if max is None else self.minimum(out, max)

    def threshold(self, arg: Tensor, threshold: object, value: object) -> Tensor:
        """torch.nn.functional.threshold: `value` where arg <= threshold, else arg (NaN stays)."""
        arg = self._tensor(arg, "threshold: arg")
        return self.cast(self.where(self.le(arg, threshold), value, arg), DataType(arg.type.dtype))

    def add_alpha(self, arg1: object, arg2: object, alpha: object) -> Tensor:
        """torch.add(arg1, arg2, alpha=alpha): arg1 + alpha * arg2."""
        return self._in_opmath([arg1, arg2, alpha], lambda a, b, s: a + s * b)

    def sub_alpha(self, arg1: object, arg2: object, alpha: object) -> Tensor:
        """torch.sub(arg1, arg2, alpha=alpha): arg1 - alpha * arg2."""
        return self._in_opmath([arg1, arg2, alpha], lambda a, b, s: a - s * b)

    def mod(self, arg1: object, arg2: object) -> Tensor:
        """nvFuser's `mod` (and Tensor `%`): the C remainder, as fmod (the sign of the dividend)."""
        return self.fmod(arg1, arg2)

    def silu(self, arg: Tensor) -> Tensor:
        """torch.nn.functional.silu: x / (1 + exp(-x)); integer tensors compute in f32."""
        arg = self._tensor(arg, "silu: arg")
        if arg.type.dtype not in FLOAT_DTYPES:
            arg = self.cast(arg, DataType.Float)
        return self._in_opmath([arg], lambda x: x / (1 + self.exp(-x)))

    def triu(self, arg: Tensor, diagonal: int = 0) -> Tensor:
        """torch.triu (nvFuser's `triu(input, diagonal=0)`): zeroes the elements below the
        `diagonal`-th diagonal of the last two dims (each matrix of a batch); diagonal > 0
        lies above the main diagonal, < 0 below."""
        arg = self._tensor(arg, "triu: arg")
        if arg.ndim < 2:
            raise ValueError(f"triu: arg must have at least 2 dims, got rank {arg.ndim}")
        offset = static_int(diagonal, "triu: diagonal")
        rank = arg.ndim
        rows = self.broadcast(self.iota(self._dim_length(arg, rank - 2)), [True] * (rank - 2) + [False, True])
        cols = self.broadcast(self.iota(self._dim_length(arg, rank - 1)), [True] * (rank - 1) + [False])
        keep = self.ge(self.sub(cols, rows), offset)
        zero = False if arg.type.dtype == "i1" else 0
        return self.where(keep, arg, zero)

    def _dim_length(self, arg: Tensor, dim: int) -> int | Scalar:
        static = arg.type.static_extent(dim)
        return static if static is not None else self.size(arg, dim)
