"""`decompose-welford`: rewrites `fuser.welford` into the sums the row schedulers fuse.

For the welford ops over one input x and one set of dims (avg, var_sum and n of one
reduction), in the accumulation dtype (f32 for f16/bf16 x, which is cast once):

    n       = the product of the reduced extents (an i64 scalar: constants, `fuser.dim`s)
    mean    = sum(x, dims, keepdim) / n
    var_sum = sum((x - mean) * (x - mean), dims)
    avg     = mean (squeezed unless keepdim);   the `n` tensor = full(n)

The statistics share one sum and one mean, built before the first of them. A row kept on
chip (inner_persistent) is read from global memory once for both sums, and the deviations
are taken from the final mean, so this is at least as stable as a one-pass Welford update
(E[x^2] - E[x]^2, which cancels catastrophically, never appears). Part of `fuser-preseg`:
no emitter handles `fuser.welford` itself."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from fuser_dialect import shape_rules as rules
from fuser_dialect.ops_compute import BinaryKind, BinaryOp, CastOp, ReductionKind, ReductionOp
from fuser_dialect.ops_factory import DimOp, FullOp
from fuser_dialect.ops_layout import SqueezeOp
from fuser_dialect.ops_welford import WelfordOp, WelfordStat, accumulation_dtype
from fuser_dialect.types import DYNAMIC, TensorType
from fuser.passes.rewrite_driver import rewrite_module


def _siblings(op: WelfordOp) -> list[WelfordOp]:
    """The welford ops over op's input and dims, in block order."""
    found = {u.operation for u in op.input.uses
             if isinstance(u.operation, WelfordOp) and u.operation.reduced_dims == op.reduced_dims}
    in_order = functools.cmp_to_key(lambda a, b: -1 if a.is_before_in_block(b) else 1)
    return sorted(found, key=in_order)


@dataclass
class _Statistics:
    """Builds the shared pieces of one reduction on demand, each once, before `anchor`."""

    input: SSAValue
    dims: tuple[int, ...]
    anchor: Operation
    rewriter: PatternRewriter
    _built: dict[object, SSAValue] = field(default_factory=dict)

    def _add(self, op: Operation) -> SSAValue:
        self.rewriter.insert(op, InsertPoint.before(self.anchor))
        return op.results[0]

    def _once(self, key: object, build) -> SSAValue:
        if key not in self._built:
            self._built[key] = build()
        return self._built[key]

    @property
    def _in_type(self) -> TensorType:
        t = self.input.type
        assert isinstance(t, TensorType)
        return t

    @property
    def _full_type(self) -> TensorType:
        """The input's shape in the accumulation dtype (x, its deviations, their squares)."""
        return self._in_type.without_layout().with_dtype(accumulation_dtype(self._in_type.dtype))

    # -- the shared pieces ------------------------------------------------------------------
    def x(self) -> SSAValue:
        """The input in the accumulation dtype."""
        if self._full_type.dtype == self._in_type.dtype:
            return self.input
        return self._once("x", lambda: self._add(CastOp(self.input, self._full_type)))

    def count(self) -> SSAValue:
        """The number of reduced elements per result element (an i64 scalar)."""
        return self._once("count", self._build_count)

    def _build_count(self) -> SSAValue:
        static, dynamic = 1, []
        for d in self.dims:
            extent = self._in_type.static_extent(d)
            if extent is None:
                dynamic.append(self._add(DimOp(self.input, d)))
            else:
                static *= extent
        factors = dynamic if static == 1 and dynamic else [*dynamic, self._constant(static)]
        product = factors[0]
        for factor in factors[1:]:
            product = self._add(arith.MuliOp(product, factor))
        return product

    def _constant(self, value: int) -> SSAValue:
        return self._add(arith.ConstantOp(IntegerAttr(value, i64)))

    def _sum(self) -> SSAValue:
        keep_type = TensorType(self._full_type.dtype, rules.reduction("fuser.welford", self._in_type, self.dims, True))
        return self._once("sum", lambda: self._add(ReductionOp(ReductionKind.SUM, self.x(), list(self.dims), True, keep_type)))

    def mean(self) -> SSAValue:
        """sum(x, keepdim) / n: the mean the deviations are taken from."""
        total = self._sum()
        return self._once("mean", lambda: self._add(BinaryOp(BinaryKind.DIV, total, self.count(), total.type)))

    def avg(self, keepdim: bool, result_type: TensorType) -> SSAValue:
        mean = self.mean()
        if not keepdim:
            return self._add(SqueezeOp(mean, list(self.dims), result_type))
        if mean.type == result_type:
            return mean
        # A result typed more precisely than its input (hand-written IR) keeps its type.
        return self._add(BinaryOp(BinaryKind.DIV, self._sum(), self.count(), result_type))

    def var_sum(self, keepdim: bool, result_type: TensorType) -> SSAValue:
        squares = self._once("squares", self._build_squares)
        return self._add(ReductionOp(ReductionKind.SUM, squares, list(self.dims), keepdim, result_type))

    def _build_squares(self) -> SSAValue:
        deviation = self._add(BinaryOp(BinaryKind.SUB, self.x(), self.mean(), self._full_type))
        return self._add(BinaryOp(BinaryKind.MUL, deviation, deviation, self._full_type))

    def n(self, keepdim: bool, result_type: TensorType) -> SSAValue:
        """The count as a tensor: one extent operand (a `fuser.dim` of the input) per `?`."""
        kept = [d for d in range(self._in_type.rank) if keepdim or d not in self.dims]
        extents = [self._add(DimOp(self.input, d)) for d, e in zip(kept, result_type.shape) if e == DYNAMIC]
        return self._add(FullOp(extents, self.count(), result_type))

    def value_of(self, op: WelfordOp) -> SSAValue:
        keepdim = op.keepdim is not None
        result_type = op.result.type
        if op.op_kind == WelfordStat.AVG:
            return self.avg(keepdim, result_type)
        if op.op_kind == WelfordStat.VAR_SUM:
            return self.var_sum(keepdim, result_type)
        return self.n(keepdim, result_type)


class DecomposeWelford(RewritePattern):
    """Replaces every statistic of one reduction at once (see the module docstring)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: WelfordOp, rewriter: PatternRewriter) -> None:
        group = _siblings(op)
        stats = _Statistics(op.input, op.reduced_dims, group[0], rewriter)
        values = [stats.value_of(member) for member in group]  # all built before group[0] goes
        for member, value in zip(group, values):
            rewriter.replace(member, [], [value])


@dataclass(frozen=True)
class DecomposeWelfordPass(ModulePass):
    name = "decompose-welford"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_module(op, [DecomposeWelford()], apply_recursively=False, dce=True)
