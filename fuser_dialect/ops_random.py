"""Random tensors: `fuser.uniform` and `fuser.normal` (nvFuser's uniform / normal; rand_like and
randn_like are frontend spellings of them).

    %r = fuser.uniform [%n, %c4] %lo, %hi seed %s offset %o : (f64, f64) -> !fuser.tensor<?x4xf32>

Operands: one i64 extent per result dim (a static dim's is a constant: the extents stay valid
when `concretize` makes a `?` dim static), the two parameters of the distribution (uniform:
low, high; normal: mean, std) and optionally the i64 `seed` and `offset` — both or neither.
Values are counter-based (fuser_dialect/philox.py): element i of the result (row-major over its
logical shape) depends only on (seed, offset, i), on every backend and under every schedule.
An op without a seed draws (seed, offset) from the process generator once per execution, so
it has a memory effect: two of them are never merged.

After the definitions, each op registers its pieces in the op table (fuser_dialect/op_table.py).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import i64
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import EffectInstance, MemoryEffect, MemoryEffectKind
from xdsl.utils.exceptions import VerifyException

from fuser_dialect import philox
from fuser_dialect.extents import ExtentError, ExtentPlan, Step, missing_value, type_flags
from fuser_dialect.interpreter import Value, cast_array, result_dtype
from fuser_dialect.op_base import tensor_type
from fuser_dialect.op_table import DimTie, Dims, TypeOf, no_links, register
from fuser_dialect.types import BROADCAST, DYNAMIC, TensorType, dtype_name

_PARAMETER_TYPES = ("f64", "f32", "i64", "i32")
RANDOM_DTYPES = ("f64", "f32", "f16", "bf16")
"""What a random op may produce (nvFuser: floating point types only; no fp8 or complex)."""


class RandomEffects(MemoryEffect):
    """None with a seed (a pure function of the operands); without one, the op draws from the
    process generator: an effect, so CSE never merges two draws and DCE keeps the stream order."""

    @classmethod
    def get_effects(cls, op: Operation) -> AbstractSet[EffectInstance]:
        if op.rng_seed is not None:  # type: ignore[attr-defined]
            return set()
        return {EffectInstance(MemoryEffectKind.READ), EffectInstance(MemoryEffectKind.WRITE)}


class RandomOp(IRDLOperation):
    """What fuser.uniform and fuser.normal share; `PARAMETERS` names their two scalars."""

    PARAMETERS: ClassVar[tuple[str, str]]
    DISTRIBUTION: ClassVar[str]

    @property
    def parameters(self) -> tuple[SSAValue, SSAValue]:
        return self.operands[len(self.extents)], self.operands[len(self.extents) + 1]  # type: ignore[attr-defined]

    @property
    def seeded(self) -> bool:
        return self.rng_seed is not None  # type: ignore[attr-defined]

    def verify_(self) -> None:
        t = tensor_type(self, self.results[0], "result")
        if t.dtype not in RANDOM_DTYPES:
            raise VerifyException(f"{self.name}: random distributions only create floating point tensors, "
                                  f"got {t.describe()}")
        if t.stride_order is not None:
            raise VerifyException(f"{self.name}: only fusion inputs carry a layout; the result has order "
                                  f"{list(t.stride_order)}")
        extents = self.extents  # type: ignore[attr-defined]
        if len(extents) != t.rank:
            raise VerifyException(f"{self.name}: result {t.describe()} has rank {t.rank} but {len(extents)} "
                                  "extent operand(s) were given (one per dim)")
        for what, v in zip(self.PARAMETERS, self.parameters):
            if dtype_name_or_none(v) not in _PARAMETER_TYPES:
                raise VerifyException(f"{self.name}: {what} must be an f64, f32, i64 or i32 scalar, got {v.type}")
        if (self.rng_seed is None) != (self.rng_offset is None):  # type: ignore[attr-defined]
            raise VerifyException(f"{self.name}: seed and offset must be given together (got only the "
                                  f"{'seed' if self.seeded else 'offset'})")


def is_number(value: object) -> bool:
    """A Python or numpy int or float (not a bool): a parameter the frontend makes a constant."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def dtype_name_or_none(v: SSAValue) -> str | None:
    try:
        return dtype_name(v.type)
    except ValueError:
        return None


_FORMAT = ("`[` $extents `]` ${a} `,` ${b} (`seed` $rng_seed^ `offset` $rng_offset)? attr-dict "
           "`:` `(` type(${a}) `,` type(${b}) `)` `->` type($result)")


@irdl_op_definition
class UniformOp(RandomOp):
    """Uniform values in [low, high), also after rounding to the result dtype."""

    name = "fuser.uniform"
    PARAMETERS: ClassVar[tuple[str, str]] = ("low", "high")
    DISTRIBUTION: ClassVar[str] = "uniform"
    extents = var_operand_def(i64)
    low = operand_def()
    high = operand_def()
    rng_seed = opt_operand_def(i64)
    rng_offset = opt_operand_def(i64)
    result = result_def(TensorType)
    traits = traits_def(RandomEffects())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = _FORMAT.format(a="low", b="high")

    def __init__(self, extents, low, high, seed, offset, result_type: TensorType):
        super().__init__(operands=[extents, low, high, [seed] if seed is not None else [], [offset] if offset is not None else []],
                         result_types=[result_type])


@irdl_op_definition
class NormalOp(RandomOp):
    """Normal values of mean `mean` and standard deviation `std` (Box-Muller)."""

    name = "fuser.normal"
    PARAMETERS: ClassVar[tuple[str, str]] = ("mean", "std")
    DISTRIBUTION: ClassVar[str] = "normal"
    extents = var_operand_def(i64)
    mean = operand_def()
    std = operand_def()
    rng_seed = opt_operand_def(i64)
    rng_offset = opt_operand_def(i64)
    result = result_def(TensorType)
    traits = traits_def(RandomEffects())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = _FORMAT.format(a="mean", b="std")

    def __init__(self, extents, mean, std, seed, offset, result_type: TensorType):
        super().__init__(operands=[extents, mean, std, [seed] if seed is not None else [], [offset] if offset is not None else []],
                         result_types=[result_type])


OPS = [UniformOp, NormalOp]
"""The ops of this family, in the order the dialect lists them."""


def unseeded_random_ops(ops) -> list[RandomOp]:
    """The random ops among `ops` that draw from the process generator, in program order (each
    execution draws once for each, in this order, on every backend)."""
    return [op for op in ops if isinstance(op, RandomOp) and not op.seeded]


# --- op-table pieces ----------------------------------------------------------------------


def _declared_dims(op: RandomOp, type_of: TypeOf) -> Dims:
    """The result is what its type declares (there is no tensor operand to infer it from)."""
    return tensor_type(op, op.results[0], "result").shape


def sample(op: RandomOp, count: int, seed: int, offset: int, params: tuple[float, float]) -> np.ndarray:
    """The op's first `count` values (flat, in its result dtype) for this seed and offset."""
    dtype = result_dtype(op)
    wide = dtype == "f64"
    units = (philox.uniform_units if op.DISTRIBUTION == "uniform" else philox.normal_units)(seed, offset, count, wide)
    values = cast_array(philox.affine(units, params[0], params[1], op.DISTRIBUTION), dtype)
    return below_high(values, dtype, params, units.dtype.type) if op.DISTRIBUTION == "uniform" else values


def below_high(values: np.ndarray, dtype: str, params: tuple[float, float], compute) -> np.ndarray:
    """Uniform values in [low, high) after rounding to their dtype, bounded as nvFuser bounds
    them: a value at or past high rounded to the dtype becomes low rounded to the dtype, so none
    exceeds the largest value of the dtype below rounded high (f16 in [-1.5, 3.7): 3.697265625,
    not half(3.7)). Compared in the compute type (f32, f64 for f64 results), as the kernels do."""
    low, high = compute(params[0]), compute(params[1])
    top = cast_array(np.asarray(high), dtype).astype(compute)
    above = values.astype(compute) >= top
    if above.any():
        values[above] = cast_array(np.asarray(low), dtype)
    return values


def _interpret(op: RandomOp, args: list[Value]) -> Value:
    n = len(op.extents)  # type: ignore[attr-defined]
    shape = [int(v) for v in args[:n]]
    params = (float(args[n]), float(args[n + 1]))
    if op.seeded:
        seed, offset = int(args[n + 2]), int(args[n + 3])
    else:
        seed, offset = philox.next_state()
    return sample(op, int(np.prod(shape, dtype=np.int64)), seed, offset, params).reshape(shape)


def _plan(op: RandomOp, plan: ExtentPlan) -> Step:
    out = plan.result_slot(op)
    t = op.results[0].type
    assert isinstance(t, TensorType)
    slots, flags = [plan.slot[v] for v in op.extents], type_flags(t)  # type: ignore[attr-defined]

    def step(S, B, V, R):
        shape = []
        for d, (slot, declared) in enumerate(zip(slots, t.shape)):
            e = V[slot]
            if e is None:
                raise missing_value(op, f"the extent of result dim {d}")
            e = int(e)
            if e < 0:
                raise ExtentError(f"{op.name}: result dim {d} has negative extent {e} at run time")
            if declared not in (DYNAMIC, e) and not (declared == BROADCAST and e == 1):
                raise ExtentError(f"{op.name}: result dim {d} has extent {e} at run time but the result "
                                  f"type is {t.describe()}")
            shape.append(e)
        S[out], B[out] = tuple(shape), flags

    return step


def _ties(op: RandomOp) -> list[DimTie]:
    t = op.results[0].type
    assert isinstance(t, TensorType)
    return [DimTie(d, None, d) for d, e in enumerate(t.shape) if e != BROADCAST]


for _op in OPS:
    register(_op, shape=_declared_dims, interpret=_interpret, plan_extents=_plan, layout=no_links, dim_ties=_ties)
