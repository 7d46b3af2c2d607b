"""One partition of an ATen graph (an fx.GraphModule) → one `FusionDefinition`.

Placeholders become `define_tensor` (dynamic dims -1, size-1 dims broadcast, static dims
static, stride order from the example value) or `define_scalar` (SymInt/SymFloat inputs);
every call node is translated through the op table; the submodule's outputs become
`add_output`s with the example value's stride order as a requirement (row-major too), so
what eager code downstream sees has the layout the graph was traced with.

`RegionPlan` says how the runtime maps the region's arguments to fusion inputs and the
fusion outputs back to the region's results (an output may be a constant or an input).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
import torch.fx

from fuser import DataType, FusionDefinition
from fuser_dialect.values import Scalar, Tensor
from fuser.lowering.codegen.emit_cuda import INDEX_OPS
from fuser.torch_backend.dtypes import fuser_dtype, is_row_major, stride_order
from fuser.torch_backend.op_table import translation_for
from fuser.torch_backend.translate_index import eager_index_error


class TranslationError(Exception):
    """A node that passed the support check could not be built (a fuser limit met late)."""


class NothingToCompute(TranslationError):
    """Every output of the region is one of its inputs, a view of one, or a constant."""

    def __init__(self):
        super().__init__("nothing to compute: every output is an input, a view of one or a constant")


@dataclass
class OutputSpec:
    kind: str  # "fusion" (index into fd outputs), "input" (index into region args), "constant"
    index: int = 0
    value: object = None
    dtype: torch.dtype | None = None


@dataclass(frozen=True)
class IndexSource:
    """The ATen op an index op of the fusion comes from, and what eager torch raises on CPU for
    its out-of-range index (None: unknown)."""

    aten: str
    eager_error: type[Exception] | None


@dataclass
class RegionPlan:
    outputs: list[OutputSpec] = field(default_factory=list)
    index_sources: list[IndexSource] = field(default_factory=list)
    """One per index op of the fusion (gather, take_along_axis, index_select, scatter), in
    program order: where the fusion's index errors (IndexRangeError.site) come from."""
    aten_ops: int = 0  # call nodes translated (what the fusion replaces)
    device: str = "cpu"  # where the traced outputs live: a region without tensor inputs runs there
    example: list = field(default_factory=list)  # the placeholders' example values (partition-time compile)
    disable: tuple[str, ...] = ()
    """execute's _disable_options: in a dynamic graph pad/slice/cat extents stay symbolic, so one
    compile serves every length (concretizing them would recompile per length)."""


class Translator:
    """Translation state of one region: the FusionDefinition and the value of each node
    (a fuser Tensor, a fuser Scalar, a Python number, or a tuple of those)."""

    def __init__(self, fd: FusionDefinition):
        self.fd = fd
        self.ops = fd.ops
        self.env: dict[torch.fx.Node, object] = {}
        # Tensors known to hold one value everywhere (full, full_like): slice_scatter into
        # such a base is a pad with that value.
        self.fill_values: dict[int, object] = {}

    # -- argument access -------------------------------------------------------------
    def value(self, arg):
        if isinstance(arg, torch.fx.Node):
            return self.env[arg]
        if isinstance(arg, (list, tuple)):
            return [self.value(a) for a in arg]
        return arg

    def tensor(self, arg, dtype: torch.dtype | None = None) -> Tensor:
        """The value of arg as a fuser Tensor (a number becomes a 0-d full of `dtype`)."""
        v = self.value(arg)
        if isinstance(v, Tensor):
            return v
        if isinstance(v, (bool, int, float)):
            dt = dtype or (torch.bool if isinstance(v, bool) else torch.int64 if isinstance(v, int) else torch.float32)
            return self.ops.full([], v, fuser_dtype(dt))
        raise TranslationError(f"expected a tensor, got {v!r}")

    @staticmethod
    def meta(node: torch.fx.Node):
        return node.meta.get("val")

    # -- shapes ----------------------------------------------------------------------
    def extent(self, t: Tensor, dim: int) -> int | Scalar:
        """A dim's extent: a Python int when static (or broadcast), else a size query."""
        static = t.type.static_extent(dim)
        return static if static is not None else self.ops.size(t, dim)

    def shape_entry(self, v) -> int | Scalar:
        """A size argument of an ATen op (int, SymInt input, -1) as a builder shape entry."""
        if isinstance(v, Scalar) or isinstance(v, int):
            return v
        raise TranslationError(f"unsupported size argument {v!r}")

    def broadcast_to_rank(self, t: Tensor, rank: int) -> Tensor:
        """torch's implicit broadcasting: missing leading dims become broadcast dims."""
        if t.ndim >= rank:
            return t
        return self.ops.broadcast(t, [True] * (rank - t.ndim) + [False] * t.ndim)

    def aligned(self, values: list, rank: int) -> list:
        """The operands of an elementwise op broadcast as torch does: missing leading dims, and
        static extent-1 dims (a slice, say) against an operand whose extent there is not 1."""
        values = [self.broadcast_to_rank(v, rank) if isinstance(v, Tensor) else v for v in values]
        tensors = [v for v in values if isinstance(v, Tensor)]
        return [self._ones_broadcast(v, tensors) if isinstance(v, Tensor) else v for v in values]

    def _ones_broadcast(self, t: Tensor, others: list[Tensor]) -> Tensor:
        """t with its non-broadcast extent-1 dims that some operand of another extent meets made
        broadcast dims (squeezed, then broadcast back)."""
        ones = [d for d in range(t.ndim)
                if not t.type.is_broadcast(d) and t.type.static_extent(d) == 1
                and any(o.ndim == t.ndim and o.type.static_extent(d) != 1 for o in others)]
        if not ones:
            return t
        return self.ops.broadcast(self.ops.squeeze(t, ones), [d in ones for d in range(t.ndim)])

    def note_fill(self, t: Tensor, value) -> Tensor:
        self.fill_values[id(t)] = value
        return t

    def fill_value(self, t: Tensor):
        return self.fill_values.get(id(t))

    # -- nodes -------------------------------------------------------------------------
    def translate(self, node: torch.fx.Node) -> None:
        if node.target is operator.getitem:
            parts, index = self.value(node.args[0]), node.args[1]
            self.env[node] = parts[index]
            return
        translation = translation_for(node.target)
        if translation is None:
            raise TranslationError(f"no translation for {node.target}")
        result = translation.build(self, node)
        self.env[node] = self._as_traced(node, result)

    def _as_traced(self, node: torch.fx.Node, result, meta=None):
        """The result cast to the dtype the traced graph says it has (fuser's promotion and
        torch's agree almost always; where they do not, torch's wins)."""
        meta = self.meta(node) if meta is None else meta
        if isinstance(result, tuple) and isinstance(meta, (tuple, list)):
            return tuple(self._as_traced(node, r, m) for r, m in zip(result, meta))
        if isinstance(result, Tensor) and isinstance(meta, torch.Tensor):
            if result.ndim != meta.dim():
                raise TranslationError(
                    f"{node.format_node()}: fuser result has rank {result.ndim}, torch's has {meta.dim()}"
                )
            if result.dtype != fuser_dtype(meta.dtype):
                result = self.ops.cast(result, fuser_dtype(meta.dtype))
        return result


def _symbolic(meta) -> bool:
    if isinstance(meta, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in meta.shape)
    return isinstance(meta, (torch.SymInt, torch.SymFloat))


def _define_input(fd: FusionDefinition, node: torch.fx.Node):
    meta = node.meta.get("val")
    if isinstance(meta, torch.Tensor):
        shape = []
        for s in meta.shape:
            shape.append(-1 if isinstance(s, torch.SymInt) else int(s))
        order = stride_order(meta.stride()) if meta.dim() else None
        return fd.define_tensor(
            shape=shape,
            dtype=fuser_dtype(meta.dtype),
            stride_order=None if order is None or is_row_major(order) else order,
        )
    if isinstance(meta, (torch.SymInt, int)) and not isinstance(meta, bool):
        return fd.define_scalar(dtype=DataType.Int)
    if isinstance(meta, (torch.SymFloat, float)):
        return fd.define_scalar(dtype=DataType.Double)
    raise TranslationError(f"input {node.name}: unsupported example value {type(meta).__name__}")


def build_region(gm: torch.fx.GraphModule, name: str) -> tuple[FusionDefinition, RegionPlan]:
    """The FusionDefinition of a partition submodule and how to call it."""
    plan = RegionPlan()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    plan.example = [n.meta.get("val") for n in placeholders]
    if any(_symbolic(v) for v in plan.example):
        plan.disable = ("concretize_resize_extents",)
    input_index = {n: i for i, n in enumerate(placeholders)}
    with FusionDefinition(name) as fd:
        tx = Translator(fd)
        for node in placeholders:  # fusion input i is the region's argument i
            tx.env[node] = _define_input(fd, node)
        output_node = None
        for node in gm.graph.nodes:
            if node.op == "call_function":
                last = fd.block.last_op
                tx.translate(node)
                plan.index_sources += _index_sources(node, _ops_after(fd.block, last))
                if node.target is not operator.getitem:
                    plan.aten_ops += 1
            elif node.op == "output":
                output_node = node
        results = output_node.args[0]
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        devices = [m.device.type for r in results if isinstance(m := tx.meta(r) if isinstance(r, torch.fx.Node)
                                                                   else None, torch.Tensor)]
        plan.device = devices[0] if devices else "cpu"
        added: dict[tuple, int] = {}
        for r in results:
            plan.outputs.append(_add_output(fd, tx, r, input_index, added))
        if not added:
            raise NothingToCompute()
    return fd, plan


def _ops_after(block, last):
    """The ops appended to `block` after `last` (None: all of them)."""
    op = block.first_op if last is None else last.next_op
    while op is not None:
        yield op
        op = op.next_op


def _index_sources(node: torch.fx.Node, ops) -> list[IndexSource]:
    """One per index op among `ops`, the ops `node` was translated into (the executor numbers
    them in program order: lowering/codegen/emit_cuda.py, index_ops)."""
    count = sum(1 for op in ops if isinstance(op, INDEX_OPS))
    if not count:
        return []
    return [IndexSource(str(node.meta.get("original_aten") or node.target), eager_index_error(node))] * count


def _add_output(fd, tx: Translator, node, input_index, added: dict[tuple, int]) -> OutputSpec:
    if node in input_index:  # the region returns one of its inputs unchanged
        return OutputSpec("input", input_index[node])
    value = tx.value(node)
    meta = tx.meta(node) if isinstance(node, torch.fx.Node) else None
    if not isinstance(value, Tensor):
        dtype = meta.dtype if isinstance(meta, torch.Tensor) else None
        return OutputSpec("constant", value=value, dtype=dtype)
    # The traced layout is a requirement, row-major included: left free, fuser would follow an
    # input's layout (a hint), and eager code after the region (a `view`) relies on the strides
    # it was traced with. One fusion output per distinct tensor and layout.
    order = stride_order(meta.stride()) if isinstance(meta, torch.Tensor) and meta.dim() > 1 else None
    source = next((p for p in input_index if tx.env.get(p) is value), None)
    if source is not None:  # an identity chain back to an input (a full slice, a cat with nothing)
        traced = tx.meta(source)
        if order is None or stride_order(traced.stride()) == order:
            return OutputSpec("input", input_index[source])  # its copy keeps the input's layout
    key = (id(value), None if order is None else tuple(order))
    if key not in added:
        if source is not None or any(k[0] == id(value) for k in added):  # a copy, in the traced layout
            value = fd.ops.set(value)
        fd.add_output(value, stride_order=order)
        added[key] = len(added)
    return OutputSpec("fusion", added[key])


__all__ = ["build_region", "NothingToCompute", "RegionPlan", "OutputSpec", "Translator", "TranslationError"]
