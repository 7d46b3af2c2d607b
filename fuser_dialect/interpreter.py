"""The numpy reference interpreter: the oracle every pass and backend is tested against.

Semantics, op by op, as the lowering must reproduce them:
- f16/bf16 elementwise ops compute in f32 and round once to the result dtype;
  reductions of f16/bf16 accumulate in f32; f32 computes in f32, f64 in f64.
- integer `div` truncates toward zero and `fmod` takes the dividend's sign (C semantics).
- float -> integer casts are CUDA's (cvt.rzi, what torch gives on a GPU): toward zero,
  saturating to the type's range, NaN -> 0 (`float_to_int`; numpy's astype gives INT_MIN).
- maximum/minimum and max/min reductions propagate NaN (as torch does).
- slice bounds follow torch (negative from the end, clamped); pad accepts negative widths
  (cropping, as F.pad); gather/take_along_axis/index_select reject out-of-range indices.
- two extents of a non-broadcast dim that differ at run time are an error, not a broadcast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from fuser_dialect import philox
from fuser_dialect.extents import ExtentError, ExtentPlan, evaluate_extents, runtime_arguments
from fuser_dialect.float8 import FORMATS, from_fp8, is_fp8_array, to_fp8
from fuser_dialect.inputs import check_inputs, to_numpy
from fuser_dialect.op_table import interpreter
from fuser_dialect.types import BROADCAST, DYNAMIC_ENTRY, TensorType, dtype_name, dtype_of_numpy, numpy_dtype


class InterpreterError(ExtentError):
    """A run-time violation found while interpreting (mismatched extents, an index out of
    range). Extent errors raised before interpreting are `ExtentError`, its base class."""


class IndexOutOfRange(InterpreterError, IndexError):
    """A gather-family index outside its extent: an IndexError on every backend (the cpu and
    cuda backends raise IndexError for the same inputs before launching)."""


Value = np.ndarray | np.generic


def compute_dtype(dtype: str) -> np.dtype:
    """The dtype arithmetic happens in for tensors of `dtype`."""
    return np.dtype(np.float32) if dtype in ("f16", "bf16") else numpy_dtype(dtype)


def dtype_of(value: SSAValue) -> str:
    """The fuser dtype ('f32', 'i1', ...) of a tensor or scalar value."""
    t = value.type
    return t.dtype if isinstance(t, TensorType) else dtype_name(t)


def result_dtype(op: Operation) -> str:
    return dtype_of(op.results[0])


def cast_array(x: Value, dtype: str) -> np.ndarray:
    """Casts with the device's semantics: float->bool is `!= 0`, rounding is to nearest even,
    float->integer is CUDA's (below)."""
    target = numpy_dtype(dtype)
    x = np.asarray(x)
    if dtype in FORMATS or is_fp8_array(x):  # fp8 rounds and saturates as torch does
        return to_fp8(x, dtype) if dtype in FORMATS else cast_array(from_fp8(x), dtype)
    if dtype == "i1":
        return x != 0
    if target.kind in "iu" and (x.dtype.kind == "f" or x.dtype == numpy_dtype("bf16")):
        return float_to_int(x, target)
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(target)


def float_to_int(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """A float -> integer conversion as a CUDA kernel does it (cvt.rzi: what torch eager on a
    GPU gives): toward zero, saturating to the type's range, NaN -> 0. (numpy, like C on x86,
    gives the type's minimum for NaN, +-inf and anything out of range.)"""
    info = np.iinfo(target)
    wide = np.trunc(np.asarray(x, dtype=np.float64))  # exact for every float dtype
    bound = 2.0 ** (8 * target.itemsize - (1 if info.min < 0 else 0))  # 2**31, 2**63: exact in f64
    above, below, nan = wide >= bound, wide < float(info.min), np.isnan(wide)
    inside = np.where(above | below | nan, 0.0, wide).astype(target)
    return np.where(above, target.type(info.max), np.where(below, target.type(info.min), inside)).astype(target)


class ReferenceInterpreter:
    """Runs a fusion func op on numpy values."""

    def __init__(self, fusion: func.FuncOp):
        self.fusion = fusion

    def run(self, inputs: Sequence[object]) -> list[Value]:
        args = [to_numpy(a) for a in check_inputs(self.fusion, inputs)]
        # Extents agree at run time, with nvFuser's broadcast rule: a declared `b` dim, or a
        # resized (pad/slice/cat) dim of extent 1, broadcasts; any other mismatch is an error.
        # Past this check numpy's own broadcasting computes exactly that rule.
        plan = ExtentPlan(self.fusion)  # built once: both calls below walk the whole fusion
        evaluate_extents(plan, *runtime_arguments(plan, args))
        env: dict[SSAValue, Value] = dict(zip(self.fusion.body.block.args, args))
        last_use = self._last_uses()
        # Unseeded random ops (`seeded` False) draw their (seed, offset) pairs once per execution.
        draws = sum(1 for op in self.fusion.body.block.ops if getattr(op, "seeded", True) is False)
        with np.errstate(all="ignore"), philox.execution_states(draws):
            for op in self.fusion.body.block.ops:
                if isinstance(op, func.ReturnOp):
                    return [env[v] for v in op.arguments]
                env[op.results[0]] = _implementation(op)(op, [env[v] for v in op.operands])
                for dead in last_use.get(op, ()):
                    del env[dead]  # a long fusion keeps only its live values
        raise ValueError("fusion has no func.return")

    def _last_uses(self) -> dict[Operation, list[SSAValue]]:
        """Per op, the values no later op reads (returned values are read by the return)."""
        last: dict[SSAValue, Operation] = {}
        for op in self.fusion.body.block.ops:
            for v in op.operands:
                last[v] = op
        dead: dict[Operation, list[SSAValue]] = {}
        for v, op in last.items():
            if not isinstance(op, func.ReturnOp):
                dead.setdefault(op, []).append(v)
        return dead


# --- helpers of the ops' implementations (registered next to each op) --------------------


def result_shape(op: Operation, dyn: Sequence[Value]) -> list[int]:
    """The result's declared shape, with the values `dyn` for its `?` dims in order."""
    t = op.results[0].type
    assert isinstance(t, TensorType)
    it = iter(int(v) for v in dyn)
    return [next(it) if e == -1 else 1 if e == BROADCAST else e for e in t.shape]


def mixed_ints(values: Sequence[int], dyn_args: Sequence[Value]) -> list[int]:
    """A static list with DYNAMIC_ENTRY entries replaced by the values `dyn_args` in order."""
    it = iter(int(v) for v in dyn_args)
    return [next(it) if v == DYNAMIC_ENTRY else v for v in values]


def pad_array(x: np.ndarray, widths: Sequence[int], value: Value) -> np.ndarray:
    """F.pad semantics per dim (left, right): out[i] = x[i - left] where that is in range,
    else `value`; the output extent is extent + left + right. Negative widths crop, and a
    crop on one side may eat into the padding of the other."""
    shape = []
    for d in range(x.ndim):
        left, right = widths[2 * d], widths[2 * d + 1]
        extent = x.shape[d] + left + right
        if extent < 0:
            raise InterpreterError(
                f"fuser.pad: dim {d} of extent {x.shape[d]} padded by ({left}, {right}) has "
                f"negative extent {extent} at run time"
            )
        shape.append(extent)
    fill = cast_array(np.asarray(value), dtype_of_array(x))
    out = np.full(shape, fill, dtype=x.dtype)
    dst, src = [], []
    for d in range(x.ndim):
        left = widths[2 * d]
        lo, hi = max(left, 0), min(shape[d], left + x.shape[d])  # output positions fed by x
        if hi <= lo:
            return out  # nothing of x survives the crop
        dst.append(slice(lo, hi))
        src.append(slice(lo - left, hi - left))
    out[tuple(dst)] = x[tuple(src)]
    return out


def dtype_of_array(x: np.ndarray) -> str:
    return dtype_of_numpy(x.dtype)


def check_index_range(op: Operation, index: np.ndarray, extent: int) -> None:
    if index.size and (index.min() < 0 or index.max() >= extent):
        bad = index[(index < 0) | (index >= extent)].flat[0]
        raise IndexOutOfRange(f"{op.name}: index {bad} is out of range for extent {extent} along dim {op.axis}")


def _implementation(op: Operation) -> Callable[[Operation, list[Value]], Value]:
    impl = interpreter(op)
    if impl is None:
        raise NotImplementedError(f"the reference interpreter has no implementation of {op.name}")
    return impl


def interpret(fusion: func.FuncOp, inputs: Sequence[object]) -> list[Value]:
    return ReferenceInterpreter(fusion).run(inputs)


def backward_slice(fusion: func.FuncOp, targets: Sequence[SSAValue]) -> list[Operation]:
    """The ops (in program order) that `targets` depend on."""
    needed: set[SSAValue] = set(targets)
    ops: list[Operation] = []
    for op in reversed(list(fusion.body.block.ops)):
        if any(r in needed for r in op.results):
            ops.append(op)
            needed.update(op.operands)
    return ops[::-1]


def evaluate_values(fusion: func.FuncOp, args: Sequence[Value], targets: Sequence[SSAValue]) -> list[Value]:
    """The values of `targets` for already checked `args`, running only the ops they need."""
    env: dict[SSAValue, Value] = dict(zip(fusion.body.block.args, args))
    for op in backward_slice(fusion, targets):
        with np.errstate(all="ignore"):
            env[op.results[0]] = _implementation(op)(op, [env[v] for v in op.operands])
    return [env[t] for t in targets]
