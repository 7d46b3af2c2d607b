"""Indexing ops → fd.ops: gather (cross-entropy's target pick; fuser fuses it into the
log-softmax kernel), index_select, and scatter (nll_loss's backward writes -1 at each target:
one element per row, built as a one-hot where(iota == index, value, base); any other scatter
is fd.ops.scatter)."""

from __future__ import annotations

import torch

from fuser.torch_backend.dtypes import fuser_dtype, size_hint
from fuser.torch_backend.op_table import translates

aten = torch.ops.aten


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
    return tx.ops.where(tx.ops.eq(positions, index), src, base)


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
