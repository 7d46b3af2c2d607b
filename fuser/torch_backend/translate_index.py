"""Indexing ops → fd.ops: gather (cross-entropy's target pick; fuser fuses it into the
log-softmax kernel), index_select, and scatter (nll_loss's backward writes -1 at each target:
one element per row, built as a one-hot where(iota == index, value, base); any other scatter
is fd.ops.scatter).

An out-of-range index fails as it fails eagerly: `eager_index_error` says which exception eager
torch raises for the ATen op (runtime.py raises that type in place of fuser's IndexError)."""

from __future__ import annotations

import torch

from fuser.torch_backend.dtypes import fuser_dtype, size_hint
from fuser.torch_backend.op_table import translates

aten = torch.ops.aten

EAGER_INDEX_ERRORS = {
    "aten.gather.default": RuntimeError,  # "index 5 is out of bounds for dimension 1 with size 4"
    "aten.scatter.value": RuntimeError,
    "aten.scatter.src": RuntimeError,
    "aten.scatter_.value": RuntimeError,
    "aten.scatter_.src": RuntimeError,
    "aten.index_select.default": IndexError,  # "index out of range in self"
    "aten.embedding.default": IndexError,
    "aten.index.Tensor": IndexError,  # "index 5 is out of bounds for dimension 0 with size 4"
    "aten.nll_loss_forward.default": IndexError,  # "Target 5 is out of bounds." (decomposed into a gather)
    "aten.nll_loss2d_forward.default": IndexError,
}
"""What eager torch raises on CPU for an out-of-range index of each ATen op whose translation
indexes (torch 2.13), by the op's name: a node's `original_aten` is an OpOverload object of its
own, equal to `aten.<op>.<overload>` by name only. On a GPU eager raises RuntimeError for all
of them (a device-side assert)."""


def eager_index_error(node) -> type[Exception] | None:
    """The exception eager torch raises on CPU for an out-of-range index of `node`: by the op
    the program called (a decomposed op's pieces carry it as `original_aten`), else by the node's
    own op; None when unknown (fuser's IndexError stands)."""
    for op in (node.meta.get("original_aten"), node.target):
        kind = EAGER_INDEX_ERRORS.get(str(op))
        if kind is not None:
            return kind
    return None


def _int64_index(node, index_arg: int):
    index = node.args[index_arg].meta["val"]
    return None if index.dtype == torch.int64 else f"{node.target} with a {index.dtype} index"


def _indexable(node, index_arg: int):
    """Why the op stays eager: an index that is not int64, or a 0-d input (torch treats it as
    1-d of extent 1; fuser's index ops index a dim)."""
    if node.args[0].meta["val"].dim() == 0:
        return f"{node.target} of a 0-d tensor"
    return _int64_index(node, index_arg)


@translates(aten.gather.default, check=lambda node: _indexable(node, 2))
def translate_gather(tx, node):
    x, index = tx.tensor(node.args[0]), tx.tensor(node.args[2])
    return tx.ops.gather(x, index, node.args[1] % x.ndim)


@translates(aten.index_select.default, check=lambda node: _indexable(node, 2))
def translate_index_select(tx, node):
    x, index = tx.tensor(node.args[0]), tx.tensor(node.args[2])
    return tx.ops.index_select(x, index, node.args[1] % x.ndim)


def _one_per_row(node) -> bool:
    """Each output row along dim receives one value: the index has extent 1 on dim and the
    base's extent elsewhere (nll_loss's backward). Then scatter is a one-hot select, which
    fuses into row kernels (a general scatter fuses into pointwise kernels only)."""
    base, index = node.args[0].meta["val"], node.args[2].meta["val"]
    dim = node.args[1] % base.dim()
    if index.dim() != base.dim() or size_hint(index.shape[dim]) != 1:
        return False
    if any(size_hint(index.shape[d]) != size_hint(base.shape[d]) for d in range(base.dim()) if d != dim):
        return False
    return node.target != aten.scatter.src or list(node.args[3].meta["val"].shape) == list(index.shape)


@translates(aten.scatter.value, aten.scatter.src, check=lambda node: _indexable(node, 2))
def translate_scatter(tx, node):
    base, index = tx.tensor(node.args[0]), tx.tensor(node.args[2])
    dim = node.args[1] % base.ndim
    src = tx.value(node.args[3])
    if not _one_per_row(node):
        return tx.ops.scatter(base, index, src, dim)
    positions = tx.ops.iota(tx.extent(base, dim), dtype=fuser_dtype(torch.int64))
    positions = tx.ops.broadcast(positions, [d != dim for d in range(base.ndim)])
    # The index read through a take_along_axis of the positions: itself where it is in range, and
    # the in-kernel check's error where it is not, as eager's scatter raises (compared bare, an
    # index out of range would match no position and leave its row unchanged, silently).
    checked = tx.ops.take_along_axis(positions, index, dim)
    # Its one element along dim broadcast to the base's extent (an index sliced to extent 1, as
    # `i[:, :1]`, is an iteration dim of extent 1, not a broadcast one).
    checked = tx.ops.broadcast(tx.ops.squeeze(checked, [dim]), [d == dim for d in range(base.ndim)])
    return tx.ops.where(tx.ops.eq(positions, checked), src, base)


@translates(aten.embedding.default, check=lambda node: _int64_index(node, 1))
def translate_embedding(tx, node):
    """weight rows picked by indices: shaped indices.shape + [D] (padding_idx and
    scale_grad_by_freq only change the backward)."""
    return tx.ops.embedding_fwd(tx.tensor(node.args[1]), tx.tensor(node.args[0]))


def _one_index(node):
    """index.Tensor with one integer index tensor (x[:, idx]); several, or boolean masks (a
    data-dependent shape), are not translated."""
    indices = node.args[1]
    given = [i for i in indices if i is not None]
    if len(given) != 1:
        return f"index.Tensor with {len(given)} index tensors"
    dtype = given[0].meta["val"].dtype
    return None if dtype == torch.int64 else f"index.Tensor with a {dtype} index"


@translates(aten.index.Tensor, check=_one_index)
def translate_index(tx, node):
    """x[..., idx, ...] along the one indexed dim: an index_select of the flattened index
    (negative indices counted from the end, as torch does), reshaped to torch's result."""
    x = tx.tensor(node.args[0])
    dim, arg = next((d, i) for d, i in enumerate(node.args[1]) if i is not None)
    index = tx.tensor(arg)
    extent = tx.extent(x, dim)
    index = tx.ops.where(tx.ops.lt(index, 0), tx.ops.add(index, extent), index)
    flat = tx.ops.reshape(index, [-1]) if index.ndim != 1 else index
    picked = tx.ops.index_select(x, flat, dim)
    if index.ndim == 1:
        return picked
    shape = [tx.extent(x, d) for d in range(dim)] + [tx.extent(index, d) for d in range(index.ndim)] + \
        [tx.extent(x, d) for d in range(dim + 1, x.ndim)]
    return tx.ops.reshape(picked, shape)
