"""`concretize`: specialise a fusion's dynamic extents for concrete input extents.

Every resized dim of a pad/slice/cat (see fuser_dialect/extents.py for which dims are
resized) is decided broadcast (extent 1: its type becomes `b`) or iteration, and the types
of every later op are re-inferred with the shape rules, so a `b` flowing into a binary op
makes the result take the other operand's extent.

With `resize-extents` (the default) the resize ops are also compiled for static extents:
SSA pad widths and slice bounds become constants (slice bounds normalized: torch's negative
and clamped bounds resolved), and every dim that is exactly mapped to a resized dim (the
resize's input and output along that dim, and whatever elementwise/layout ops tie to them,
up to the fusion inputs) gets its static extent; `fuser.dim` of a dim made static becomes a
constant, and scalar arithmetic left unused is erased. Dims tied to no resize keep `?` (a
batch dim stays dynamic). With `resize-extents=false` (or `concretize_resize_extents` in env
FUSER_DISABLE) only the broadcast/iteration decision is taken and resize extents stay symbolic.

In both modes a `?` dim exactly tied to a static extent of the IR itself becomes that extent:
static and symbolic extents that must be equal are one domain (`fuser_dialect.extents.ExactDims`),
so `broadcast_in_dim(w, [64, 4096], [1])` against a `?x?` input makes the input `64x4096`
and the fusion segments as its all-symbolic spelling does. This consumes nothing of the run
(the IR fixes these extents; `ExtentPlan` rejects an input that disagrees before the cache
key is made), so the cache key need not change. Only dims tied to a static extent become
static: a batch dim tied to none keeps serving every batch size.

CLI, one entry per fusion input kind, in argument order:
    fuser-opt f.mlir -p 'concretize{extents="8x3x2x5x6;8x7x4x9x5" scalars="1,-2"}'
- `extents`: the shapes of the tensor inputs, `;`-separated, each `AxBxC` (an empty entry is
  a rank-0 tensor). May be omitted when no tensor input has a `?` dim.
- `scalars`: the values of the scalar inputs, `,`- or `;`-separated: integers, floats,
  `true`/`false`; `_` leaves one unknown (an error only if an extent needs it).
- `resize-extents`: true (default) or false.

Python: `concretize(module, input_shapes, scalar_values, resize_extents=True)` (one entry
per input in both lists, as `evaluate_extents`) rewrites the module in place and returns the
`ConcretizationInfo` it consumed; equal infos give identical concretized IR.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fuser_dialect import ops_factory as F
from fuser_dialect import ops_layout as L
from fuser_dialect import ops_resize as R
from fuser_dialect.extents import (
    ConcretizationInfo, DimKey, ExactDims, ExtentError, Flags, ResizeFacts, RuntimeExtents, evaluate_extents,
)
from fuser_dialect.fusion import the_fusion, verify_fusion
from fuser_dialect.op_table import shape_rule
from fuser_dialect.types import BROADCAST, DYNAMIC, TensorType

DISABLE_RESIZE_EXTENTS = "concretize_resize_extents"
"""The `_disable_options` / FUSER_DISABLE entry that turns static resize extents off."""

__all__ = [
    "ConcretizePass", "ConcretizationInfo", "concretize", "kernel_index_checks_enabled", "parse_cli_inputs",
    "resize_extents_enabled",
]


DISABLE_KERNEL_INDEX_CHECKS = "kernel_index_checks"
"""The entry that leaves gather/scatter indices computed in a kernel unchecked (faster; an index
out of range then reads out of bounds, as nvFuser's kernels do: lowering/execution/index_errors.py)."""

DISABLE_FUSED_LINEAR_CROSS_ENTROPY = "fused_linear_cross_entropy"
"""The entry that keeps an LM head's linear and cross-entropy apart under torch.compile (the
logits then exist whole: fuser/torch_backend/linear_cross_entropy.py). Fusions ignore it."""

DISABLE_NATIVE_LAUNCHER = "native_launcher"
"""The entry that sends every GPU kernel launch through the Python path instead of the native
launcher (lowering/backends/gpu_launcher.py). Fusions ignore it."""

KNOWN_DISABLE_OPTIONS = (DISABLE_RESIZE_EXTENTS, DISABLE_KERNEL_INDEX_CHECKS, DISABLE_FUSED_LINEAR_CROSS_ENTROPY,
                         DISABLE_NATIVE_LAUNCHER)


def disable_options(explicit: Sequence[str] = ()) -> frozenset[str]:
    """`explicit` plus env FUSER_DISABLE (comma-separated, as NVFUSER_DISABLE); an unknown
    name is an error, not silently ignored."""
    text = os.environ.get("FUSER_DISABLE", "")
    from_env = [o.strip() for o in text.split(",") if o.strip()]
    for where, names in ((f"FUSER_DISABLE={text!r}", from_env), ("_disable_options", list(explicit))):
        unknown = sorted(set(names) - set(KNOWN_DISABLE_OPTIONS))
        if unknown:
            raise ValueError(f"{where}: unknown disable option {unknown[0]!r}; known: "
                             f"{', '.join(KNOWN_DISABLE_OPTIONS)}")
    return frozenset(explicit) | frozenset(from_env)


def resize_extents_enabled(explicit: Sequence[str] = ()) -> bool:
    """False when `concretize_resize_extents` is disabled (argument or env FUSER_DISABLE)."""
    return DISABLE_RESIZE_EXTENTS not in disable_options(explicit)


def kernel_index_checks_enabled(explicit: Sequence[str] = ()) -> bool:
    """False when `kernel_index_checks` is disabled (argument or env FUSER_DISABLE)."""
    return DISABLE_KERNEL_INDEX_CHECKS not in disable_options(explicit)


# --- the Python entry -----------------------------------------------------------------------


def concretize(
    module: ModuleOp,
    input_shapes: Sequence[Sequence[int] | None],
    scalar_values: Sequence[int | float | bool | None],
    resize_extents: bool = True,
) -> ConcretizationInfo:
    """Concretizes the module's fusion in place for these inputs; returns what it consumed.

    Raises ExtentError (a ValueError) when the extents cannot run (see evaluate_extents)."""
    f = the_fusion(module)
    extents = evaluate_extents(f, input_shapes, scalar_values)
    info = extents.concretization(resize_extents)
    block = f.body.block
    before_ops = set(block.ops)
    before_types = {v: v.type for v in block.args}
    before_types.update((r, r.type) for op in before_ops for r in op.results)
    _Concretizer(f, extents, resize_extents, info.broadcast_expands).run()
    if info.exact_gathers:
        from fuser.passes.gather_to_take_along_axis import GatherToTakeAlongAxisPass

        GatherToTakeAlongAxisPass(exact=info.exact_gathers).apply(Context(), module)
        module.verify()
    else:
        # Only on a cache miss, so that a rewrite bug never reaches code generation: the
        # function, its return, and every op the rewrite touched. The rewrite changes the IR
        # only by new ops (rebuilt or folded ones, replacing the old) and new value types, never
        # an op's properties in place: an op touched is new, or has a result or an operand whose
        # type changed or that is a new value. The others are as the builder or the parser
        # verified them (a full verify was 1.3 of the 8 s of fuser's own time of a 20,000-op
        # chain, of which it changed nothing).
        f.verify(verify_nested_ops=False)
        for op in block.ops:
            if op not in before_ops or isinstance(op, func.ReturnOp) \
                    or any(before_types.get(v) is not v.type for v in op.results) \
                    or any(before_types.get(v) is not v.type for v in op.operands):
                op.verify()
    verify_fusion(f)
    return info


# --- the rewrite ---------------------------------------------------------------------------------


Dims = tuple[int, ...]


class _Concretizer:
    def __init__(self, fusion: func.FuncOp, extents: RuntimeExtents, resize_extents: bool,
                 broadcast_expands: Sequence[tuple[int, tuple[int, ...]]] = ()):
        self.fusion = fusion
        self.extents = extents
        self.resize_extents = resize_extents
        self.block = fusion.body.block
        self.ops = [op for op in self.block.ops if not isinstance(op, func.ReturnOp)]
        self.facts: dict[Operation, ResizeFacts] = {r.op: r for r in extents.resizes if r.op is not None}
        self.made_broadcast = self._expanded_dims(broadcast_expands)

    def _expanded_dims(self, broadcast_expands: Sequence[tuple[int, tuple[int, ...]]]) -> dict[SSAValue, Flags]:
        """Broadcast flags changed by the run: an expand whose `?` input dim has extent 1
        expands it, so that dim — and every extent exactly tied to it, all 1 in this run —
        becomes `b`, and kernels read it at index 0 instead of at the expanded index."""
        if not broadcast_expands:
            return {}
        expands = [op for op in self.ops if isinstance(op, L.ExpandOp)]
        keys = [(expands[k].input, d) for k, dims in broadcast_expands for d in dims]
        changed: dict[SSAValue, list[bool]] = {}
        for value, d in ExactDims(self.fusion, self.extents.broadcast_flags).tied_to(keys):
            assert d is not None and self.extents.shape(value)[d] == 1
            changed.setdefault(value, list(self.extents.broadcast_flags(value)))[d] = True
        return {v: tuple(f) for v, f in changed.items()}

    def flags(self, value: SSAValue) -> Flags:
        """The run's broadcast flags of `value`, with the expand decisions applied."""
        changed = self.made_broadcast.get(value)
        return changed if changed is not None else self.extents.broadcast_flags(value)

    # -- decisions (no IR is changed until `_apply`) ----------------------------------------------
    def run(self) -> None:
        static = self._static_dims()
        new_types: dict[SSAValue, TensorType] = {}
        for arg in self.block.args:
            if isinstance(arg.type, TensorType):
                new_types[arg] = self._finish(arg, arg.type.shape, static, keep_order=True)
        for op in self.ops:
            out = op.results[0] if op.results else None
            if out is None or not isinstance(out.type, TensorType):
                continue
            dims = _infer(op, new_types)
            new_types[out] = self._finish(out, dims, static, keep_order=False)
        self._apply(new_types)

    def _static_dims(self) -> dict[DimKey, int]:
        """(value, dim) -> static extent, for every dim exactly tied to a static one: a static
        extent of the IR itself (a static broadcast shape against symbolic inputs), or, in
        resize-extents mode, a resized dim."""
        flags = self.flags
        if not (self.resize_extents and self.extents.resizes) and not self._has_static_member():
            return {}  # no class can be static: nothing to tie (a 20,000-op chain: 0.6 s less)
        exact = ExactDims(self.fusion, flags, expands_decided=True)
        if self.resize_extents:
            for r in self.extents.resizes:
                op = r.op
                assert op is not None
                ends = [v for v in op.operands if isinstance(v.type, TensorType)] + [op.results[0]]
                for d in r.resized_dims:
                    for v in ends:
                        if not flags(v)[d]:
                            exact.fix((v, d), self.extents.shape(v)[d], (v, d))
        values = [a for a in self.block.args if isinstance(a.type, TensorType)]
        values += [op.results[0] for op in self.ops if op.results and isinstance(op.results[0].type, TensorType)]
        static = {}
        for v in values:
            v_flags = flags(v)
            for d in range(v.type.rank):
                extent = None if v_flags[d] else exact.static_extent((v, d))
                if extent is not None:
                    static[(v, d)] = extent
        return static

    def _has_static_member(self) -> bool:
        """Whether the IR gives any extent a static value, as ExactDims counts them: a static
        extent of a tensor type or an integer `arith.constant` (an extent scalar may be one).
        Without one, and without resized dims to fix, every class is symbolic."""
        for arg in self.block.args:
            if isinstance(arg.type, TensorType) and any(e >= 0 for e in arg.type.shape):
                return True
        for op in self.ops:
            if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
                return True
            for r in op.results:
                if isinstance(r.type, TensorType) and any(e >= 0 for e in r.type.shape):
                    return True
        return False

    def _finish(self, value: SSAValue, dims: Dims, static: dict[tuple[SSAValue, int], int], keep_order: bool) -> TensorType:
        """The concretized type: the shape rule's dims, with the broadcast decisions (which are
        authoritative: a `b` where the run says broadcast, never where it says not) and, in
        resize-extents mode, the static extents of dims tied to a resized dim."""
        old = value.type
        assert isinstance(old, TensorType)
        flags, shape = self.flags(value), self.extents.shape(value)
        new = []
        for d, e in enumerate(dims):
            if flags[d]:
                e = BROADCAST
            elif e == BROADCAST:
                e = 1  # e.g. cat of a `b` and a non-broadcast extent-1 input
            elif e == DYNAMIC and (value, d) in static:
                e = static[(value, d)]
            if e >= 0 and e != shape[d]:
                raise ExtentError(
                    f"concretize: internal error: {value.type} dim {d} would become {e} but is "
                    f"{shape[d]} at run time"
                )
            new.append(e)
        if tuple(new) == old.shape:
            return old
        return TensorType(old.element_type, new, old.order.data if keep_order else ())

    # -- the rewrite ---------------------------------------------------------------------------------
    def _apply(self, new_types: dict[SSAValue, TensorType]) -> None:
        for arg in list(self.block.args):
            t = new_types.get(arg)
            if t is not None and t != arg.type:
                Rewriter.replace_value_with_new_type(arg, t)
        dropped: list[SSAValue] = []
        for op in self.ops:
            out = op.results[0] if op.results else None
            if out is None or out not in new_types:
                continue
            t = new_types[out]
            rebuilt = self._rebuild(op, t, dropped)
            if rebuilt is not None:
                Rewriter.insert_op(rebuilt, InsertPoint.before(op))
                rebuilt.results[0].name_hint = out.name_hint
                out.replace_all_uses_with(rebuilt.results[0])
                Rewriter.erase_op(op)
            elif t != out.type:
                Rewriter.replace_value_with_new_type(out, t)
        self._fold_dims(new_types)
        _erase_dead_scalars(dropped)
        self.fusion.update_function_type()

    def _fold_dims(self, new_types: dict[SSAValue, TensorType]) -> None:
        """`fuser.dim` of a dim that concretization made static (or broadcast) becomes a
        constant, so no kernel takes as an argument what it was compiled for."""
        for op in self.ops:
            if not isinstance(op, F.DimOp) or op.parent is None:
                continue
            t = op.input.type
            assert isinstance(t, TensorType)
            if t.shape[op.axis] == DYNAMIC:
                continue
            if not op.results[0].uses:  # it only fed extents made static
                Rewriter.erase_op(op)
                continue
            extent = t.static_extent(op.axis)
            const = arith.ConstantOp(IntegerAttr(extent, i64))
            Rewriter.replace_op(op, const)

    def _rebuild(self, op: Operation, t: TensorType, dropped: list[SSAValue]) -> Operation | None:
        """A replacement for ops whose operands change: SSA widths/bounds made static, extent
        operands of `?` dims made static. None when the op only changes its result type."""
        if self.resize_extents and op in self.facts and isinstance(op, (R.PadOp, R.SliceOp)):
            facts = self.facts[op]
            if isinstance(op, R.PadOp):
                mixed: list[int | SSAValue] = list(op.mixed_widths)
                resolved = facts.widths
            else:
                mixed, resolved = list(op.mixed_bounds), facts.bounds
            before = list(mixed)
            for d in facts.resized_dims:
                mixed[2 * d], mixed[2 * d + 1] = resolved[2 * d], resolved[2 * d + 1]
            if mixed == before and t == op.results[0].type:
                return None
            dropped += [v for v in before if isinstance(v, SSAValue)]
            if isinstance(op, R.PadOp):
                new: Operation = R.PadOp(op.input, mixed, op.value, t)
            else:
                new = R.SliceOp(op.input, mixed, op.steps.get_values(), t)
            new.attributes.update(op.attributes)
            return new
        if isinstance(op, (L.ExpandOp, L.ReshapeOp, F.FullOp)):
            old = op.results[0].type
            assert isinstance(old, TensorType)
            it = iter(op.extents)
            kept = []
            for d, e in enumerate(old.shape):
                if e != DYNAMIC:
                    continue
                v = next(it)
                if t.shape[d] == DYNAMIC:
                    kept.append(v)
                else:
                    dropped.append(v)
            if len(kept) == len(op.extents):
                return None
            if isinstance(op, F.FullOp):
                new = F.FullOp(kept, op.value, t)
            else:
                new = type(op)(op.input, kept, t)
            new.attributes.update(op.attributes)
            return new
        return None


_SCALAR_OPS = (F.DimOp, arith.ConstantOp, arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.DivSIOp,
               arith.FloorDivSIOp, arith.CeilDivSIOp, arith.RemSIOp, arith.MaxSIOp, arith.MinSIOp,
               arith.CmpiOp, arith.SelectOp)


def _erase_dead_scalars(values: list[SSAValue]) -> None:
    """Erases the scalar computations that only fed widths/bounds/extents made static."""
    work = list(values)
    while work:
        v = work.pop()
        if not isinstance(v, OpResult) or v.uses or v.op.parent is None:
            continue
        op = v.op
        if not isinstance(op, _SCALAR_OPS) or any(r.uses for r in op.results):
            continue
        operands = list(op.operands)
        Rewriter.erase_op(op)
        work += operands


# --- type inference -----------------------------------------------------------------------------------


def _infer(op: Operation, types: dict[SSAValue, TensorType]) -> Dims:
    """The op's result dims by its shape rule, from its operands' new types. Pad widths and
    slice bounds made static need not be substituted: their dims are fixed by `_finish`."""
    rule = shape_rule(op)
    if rule is None:
        raise ExtentError(f"concretize: no shape rule for {op.name}; cannot re-infer its result type")

    def type_of(v: SSAValue) -> TensorType:
        return types[v] if v in types else v.type  # type: ignore[return-value]

    return rule(op, type_of)


# --- the pass ---------------------------------------------------------------------------------------


_SCALAR_TEXT = re.compile(r"^(?:true|false|_|[-+]?\d+|[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)$")


def parse_cli_inputs(
    fusion: func.FuncOp, extents: str | None, scalars: str | None
) -> tuple[list[tuple[int, ...] | None], list[int | float | bool | None]]:
    """(input_shapes, scalar_values) for `concretize` from the pass options' text."""
    args = list(fusion.body.block.args)
    tensors = [a for a in args if isinstance(a.type, TensorType)]
    others = [a for a in args if not isinstance(a.type, TensorType)]
    if extents is None:
        dynamic = [f"input {a.index} ({a.type.describe()})" for a in tensors if DYNAMIC in a.type.shape]
        if dynamic:
            raise ValueError(
                f"concretize: {', '.join(dynamic)} {'has' if len(dynamic) == 1 else 'have'} dynamic "
                "extents; give the shape of every tensor "
                'input with extents="AxB;C" (one `;`-separated entry per tensor input, in order)'
            )
        shapes = [tuple(1 if e == BROADCAST else e for e in a.type.shape) for a in tensors]
    else:
        entries = extents.split(";")
        if len(entries) != len(tensors):
            raise ValueError(
                f"concretize: extents=\"{extents}\" gives {len(entries)} shape(s) but the fusion has "
                f"{len(tensors)} tensor input(s) ({', '.join(a.type.describe() for a in tensors)})"
            )
        shapes = []
        for a, text in zip(tensors, entries):
            parts = text.strip().split("x") if text.strip() else []
            if not all(p.strip().isdigit() for p in parts):
                raise ValueError(
                    f"concretize: extents entry \"{text}\" for input {a.index} is not `x`-separated "
                    "non-negative integers (e.g. 8x3x2)"
                )
            shapes.append(tuple(int(p) for p in parts))
    values: list[int | float | bool | None] = [None] * len(others)
    if scalars is not None:
        entries = [s.strip() for s in re.split(r"[,;]", scalars)] if scalars.strip() else []
        if len(entries) != len(others):
            raise ValueError(
                f"concretize: scalars=\"{scalars}\" gives {len(entries)} value(s) but the fusion has "
                f"{len(others)} scalar input(s)"
            )
        for k, text in enumerate(entries):
            if not _SCALAR_TEXT.match(text):
                raise ValueError(f"concretize: scalar value \"{text}\" is not an integer, float, true, false or _")
            values[k] = (None if text == "_" else text == "true" if text in ("true", "false")
                         else int(text) if re.fullmatch(r"[-+]?\d+", text) else float(text))
    it_shapes, it_values = iter(shapes), iter(values)
    input_shapes = [next(it_shapes) if isinstance(a.type, TensorType) else None for a in args]
    scalar_values = [None if isinstance(a.type, TensorType) else next(it_values) for a in args]
    return input_shapes, scalar_values


@dataclass(frozen=True)
class ConcretizePass(ModulePass):
    """Specialises dynamic extents for concrete inputs (see the module docstring)."""

    name = "concretize"

    extents: str | None = None
    scalars: str | None = None
    resize_extents: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        f = the_fusion(op)
        shapes, values = parse_cli_inputs(f, self.extents, self.scalars)
        concretize(op, shapes, values, self.resize_extents and resize_extents_enabled())
