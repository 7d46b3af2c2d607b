"""Shape ops → fd.ops: views (reshape, unsqueeze/squeeze, permute, expand), the resize
family (slice, select, cat, constant_pad_nd, slice_scatter) and factories (full, full_like,
scalar_tensor). Sizes arrive as ints or, in a dynamic graph, as fuser Scalars (region inputs
carrying the SymInts)."""

from __future__ import annotations

import math

import torch

from fuser_dialect.values import Scalar
from fuser.torch_backend.dtypes import fuser_dtype
from fuser.torch_backend.op_table import translates

aten = torch.ops.aten

# slice's "to the end" sentinel, as written by Python's x[a:] (2**63 - 1); any static end at
# or past the extent is clamped to it, as torch does.
INT64_MAX = 2**63 - 1


def _arg(node, index: int, name: str, default=None):
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _rank(node) -> int:
    return node.meta["val"].dim()


# -- views --------------------------------------------------------------------------------


@translates(aten.view.default, aten._unsafe_view.default, aten.reshape.default, non_compute=True)
def translate_view(tx, node):
    x = tx.tensor(node.args[0])
    shape = [tx.shape_entry(s) for s in tx.value(node.args[1])]
    if [tx.extent(x, d) for d in range(x.ndim)] == shape:
        return x
    return tx.ops.reshape(x, shape)


@translates(aten.unsqueeze.default, non_compute=True)
def translate_unsqueeze(tx, node):
    x = tx.tensor(node.args[0])
    dim = node.args[1] % (x.ndim + 1)
    return tx.ops.broadcast(x, [d == dim for d in range(x.ndim + 1)])


@translates(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, non_compute=True)
def translate_squeeze(tx, node):
    """Only size-1 dims are squeezed (torch leaves the others). A size-1 dim that fuser does
    not know as a broadcast dim (it came out of a dynamic reshape, say) is dropped by a
    reshape instead."""
    x = tx.tensor(node.args[0])
    src = node.args[0].meta["val"]
    asked = range(x.ndim) if node.target == aten.squeeze.default else _listify(node.args[1])
    dims = sorted({d % max(x.ndim, 1) for d in asked if x.ndim and _is_one(src.shape[d % x.ndim])})
    if not dims:
        return x
    if all(x.type.static_extent(d) == 1 for d in dims):
        return tx.ops.squeeze(x, dims)
    return tx.ops.reshape(x, [tx.extent(x, d) for d in range(x.ndim) if d not in dims])


def _listify(v):
    return [v] if isinstance(v, int) else list(v)


def _is_one(size) -> bool:
    return not isinstance(size, torch.SymInt) and int(size) == 1


@translates(aten.permute.default, non_compute=True)
def translate_permute(tx, node):
    x = tx.tensor(node.args[0])
    perm = [d % x.ndim for d in node.args[1]]
    return x if perm == list(range(x.ndim)) else tx.ops.permute(x, perm)


@translates(aten.expand.default, non_compute=True)
def translate_expand(tx, node):
    x = tx.broadcast_to_rank(tx.tensor(node.args[0]), _rank(node))
    return tx.ops.expand(x, [tx.shape_entry(s) for s in tx.value(node.args[1])])


# -- resize ---------------------------------------------------------------------------------


def _unit_step(node):
    step_index = 5 if node.target == aten.slice_scatter.default else 4
    step = _arg(node, step_index, "step", 1)
    return None if step == 1 else f"{node.target} with step {step}"


def _bound(tx, x, dim: int, value, default):
    """A slice bound as torch reads it: None → default; negative → from the end, clamped at 0;
    past the end → the extent. A Scalar bound (a SymInt of the graph) is taken as given."""
    if value is None:
        return default
    if isinstance(value, Scalar):
        return value
    extent = tx.extent(x, dim)
    if isinstance(extent, int):
        return min(max(extent + value, 0) if value < 0 else value, extent)
    if value >= INT64_MAX:
        return extent
    if value < 0:  # from the end of a dynamic extent: max(extent + value, 0)
        return tx.ops.maximum(extent + value, 0)
    return tx.ops.minimum(extent, value)


def _slice(tx, x, dim: int, start, end):
    starts = [0] * x.ndim
    ends = [tx.extent(x, d) for d in range(x.ndim)]
    starts[dim] = _bound(tx, x, dim, start, 0)
    ends[dim] = _bound(tx, x, dim, end, ends[dim])
    if isinstance(starts[dim], int) and starts[dim] == 0 and ends[dim] is tx.extent(x, dim):
        return x
    return tx.ops.slice(x, starts, ends, python_slicing=True)  # torch's rules (an empty x[5:2] too)


@translates(aten.slice.Tensor, check=_unit_step)
def translate_slice(tx, node):
    x = tx.tensor(node.args[0])
    dim = _arg(node, 1, "dim", 0) % x.ndim
    return _slice(tx, x, dim, tx.value(_arg(node, 2, "start")), tx.value(_arg(node, 3, "end")))


@translates(aten.select.int)
def translate_select(tx, node):
    x = tx.tensor(node.args[0])
    dim = node.args[1] % x.ndim
    index = tx.value(node.args[2])
    if isinstance(index, int) and index < 0:
        index = tx.extent(x, dim) + index
    return tx.ops.squeeze(_slice(tx, x, dim, index, index + 1), [dim])


def _legacy_empty(arg) -> bool:
    """torch.cat skips 1-D tensors of size 0 whatever the other inputs' rank (a legacy rule
    Hugging Face's DynamicCache relies on: it starts from torch.tensor([]))."""
    meta = arg.meta.get("val") if hasattr(arg, "meta") else None
    return isinstance(meta, torch.Tensor) and meta.dim() == 1 and _is_zero(meta.shape[0])


def _is_zero(size) -> bool:
    return not isinstance(size, torch.SymInt) and int(size) == 0


@translates(aten.cat.default)
def translate_cat(tx, node):
    kept = [t for t in node.args[0] if not _legacy_empty(t)] or list(node.args[0][:1])
    tensors = [tx.tensor(t) for t in kept]
    rank = _rank(node)
    dim = _arg(node, 1, "dim", 0) % max(rank, 1)
    return tensors[0] if len(tensors) == 1 else tx.ops.cat(tensors, dim=dim)


def _non_negative_pad(node):
    pads = node.args[1]
    if any(isinstance(p, int) and p < 0 for p in pads):
        return f"constant_pad_nd with a negative width {list(pads)}"
    return None


@translates(aten.constant_pad_nd.default, check=_non_negative_pad)
def translate_constant_pad_nd(tx, node):
    x = tx.tensor(node.args[0])
    return tx.ops.pad(x, list(tx.value(node.args[1])), _arg(node, 2, "value", 0))


@translates(aten.slice_scatter.default, check=_unit_step)
def translate_slice_scatter(tx, node):
    """src written into base[start:end] along dim: where base is one fill value (the
    backward of a slice, of a cat) that is a pad of src with that value; otherwise a pad
    selected by an iota mask."""
    base, src = tx.tensor(node.args[0]), tx.tensor(node.args[1])
    dim = _arg(node, 2, "dim", 0) % base.ndim
    extent = tx.extent(base, dim)
    start = _bound(tx, base, dim, tx.value(_arg(node, 3, "start")), 0)
    end = _bound(tx, base, dim, tx.value(_arg(node, 4, "end")), extent)
    widths = [0, 0] * (base.ndim - 1 - dim) + [start, extent - end]
    fill = tx.fill_value(base)
    if fill is not None:
        return tx.ops.pad(src, widths, fill)
    padded = tx.ops.pad(src, widths, 0)
    position = tx.ops.iota(extent, dtype=fuser_dtype(torch.int64))
    inside = tx.ops.logical_and(tx.ops.ge(position, start), tx.ops.lt(position, end))
    mask = tx.ops.broadcast(inside, [d != dim for d in range(base.ndim)])
    return tx.ops.where(mask, padded, base)


# -- factories ------------------------------------------------------------------------------


def _fill(tx, node, shape, value):
    dtype = fuser_dtype(node.meta["val"].dtype)
    return tx.note_fill(tx.ops.full(shape, value, dtype), value)


@translates(aten.full.default)
def translate_full(tx, node):
    return _fill(tx, node, [tx.shape_entry(s) for s in tx.value(node.args[0])], node.args[1])


def _like_shape(tx, node):
    x = tx.tensor(node.args[0])
    return [tx.extent(x, d) for d in range(x.ndim)]


@translates(aten.full_like.default)
def translate_full_like(tx, node):
    return _fill(tx, node, _like_shape(tx, node), node.args[1])


@translates(aten.zeros_like.default)
def translate_zeros_like(tx, node):
    return _fill(tx, node, _like_shape(tx, node), 0)


@translates(aten.ones_like.default)
def translate_ones_like(tx, node):
    return _fill(tx, node, _like_shape(tx, node), 1)


@translates(aten.scalar_tensor.default)
def translate_scalar_tensor(tx, node):
    """A 0-d constant is a Python number to fuser: torch promotes a 0-d tensor like one."""
    dtype = node.meta["val"].dtype
    value = node.args[0]
    if dtype == torch.bool:
        return bool(value)
    return float(value) if dtype.is_floating_point else int(value)


@translates(aten.split_with_sizes.default)
def translate_split_with_sizes(tx, node):
    """The chunks as slices (torch's views; here each chunk is what reads it)."""
    x = tx.tensor(node.args[0])
    dim = _arg(node, 2, "dim", 0) % x.ndim
    chunks, start = [], 0
    for size in tx.value(node.args[1]):
        end = start + size
        chunks.append(_slice(tx, x, dim, start, end))
        start = end
    return tuple(chunks)


def _flip_dims(node):
    return None if node.args[0].meta["val"].dim() else "flip of a 0-d tensor"


@translates(aten.flip.default, check=_flip_dims)
def translate_flip(tx, node):
    """Each flipped dim read through a reversed iota (an index_select that fuses)."""
    x = tx.tensor(node.args[0])
    for dim in sorted({d % x.ndim for d in node.args[1]}):
        extent = tx.extent(x, dim)
        reversed_positions = tx.ops.iota(extent, extent - 1, -1, dtype=fuser_dtype(torch.int64))
        x = tx.ops.index_select(x, reversed_positions, dim)
    return x


def _arange_bounds(node) -> tuple:
    if node.target == aten.arange.default:
        return 0, node.args[0], 1
    step = _arg(node, 2, "step", 1) if node.target == aten.arange.start_step else 1
    return node.args[0], node.args[1], step


def _arange_check(node):
    start, end, step = _arange_bounds(node)
    if any(isinstance(v, torch.fx.Node) for v in (start, step)):
        return "arange with a symbolic start or step"
    if isinstance(end, torch.fx.Node) and (not isinstance(step, int) or step <= 0 or not isinstance(start, int)):
        return "arange with a symbolic end and a non-integer or non-positive step"
    return None


@translates(aten.arange.default, aten.arange.start, aten.arange.start_step, check=_arange_check)
def translate_arange(tx, node):
    """start + i * step for i < ceil((end - start) / step), as an iota of the traced dtype."""
    start, end, step = _arange_bounds(node)
    end = tx.value(end)
    if isinstance(end, Scalar):  # a symbolic end: integer start and a positive step
        length = (end - start + (step - 1)) // step
    else:
        length = max(0, math.ceil((end - start) / step))
    return tx.ops.iota(length, start, step, dtype=fuser_dtype(node.meta["val"].dtype))
