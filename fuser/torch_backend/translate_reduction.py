"""Reductions: sum, amax/amin, mean, and var/var_mean (what the layer-norm decomposition
produces; fd.ops.var/var_mean, a fuser.welford that fuser-preseg lowers to two sums: mean,
then the sum of squared deviations — the two-pass form, as accurate as torch's)."""

from __future__ import annotations

import torch

from fuser.torch_backend.dtypes import accumulate_dtype, fuser_dtype
from fuser.torch_backend.op_table import translates

aten = torch.ops.aten


def _dims(arg, rank: int) -> list[int]:
    """ATen's reduction dims: None or [] means every dim."""
    if arg is None or (isinstance(arg, (list, tuple)) and len(arg) == 0):
        return list(range(rank))
    dims = [arg] if isinstance(arg, int) else list(arg)
    return sorted({d % rank for d in dims}) if rank else []


def _arg(node, index: int, name: str, default=None):
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _accumulated(tx, node, x):
    """x in the dtype torch accumulates this reduction in (the explicit dtype= wins)."""
    result = node.meta["val"]
    result = result[0] if isinstance(result, (tuple, list)) else result  # var_mean: (var, mean)
    dtype = node.kwargs.get("dtype") or accumulate_dtype(result.dtype)
    return tx.ops.cast(x, fuser_dtype(accumulate_dtype(dtype)))


def _count(tx, x, dims: list[int]):
    """How many elements each output element reduces over (an int, or a Scalar)."""
    extents = [tx.extent(x, d) for d in dims]
    count = extents[0]
    for e in extents[1:]:
        count = count * e
    return count


@translates(aten.sum.dim_IntList, aten.sum.default)
def translate_sum(tx, node):
    x = tx.tensor(node.args[0])
    dims = _dims(_arg(node, 1, "dim") if node.target == aten.sum.dim_IntList else None, x.ndim)
    keepdim = bool(_arg(node, 2, "keepdim", False)) if node.target == aten.sum.dim_IntList else False
    x = _accumulated(tx, node, x)
    return tx.ops.sum(x, dims, keepdim=keepdim) if dims else x


def _extremum(method: str):
    def build(tx, node):
        x = tx.tensor(node.args[0])
        dims = _dims(_arg(node, 1, "dim"), x.ndim)
        keepdim = bool(_arg(node, 2, "keepdim", False))
        return getattr(tx.ops, method)(x, dims, keepdim=keepdim) if dims else x

    build.__name__ = f"translate_a{method}"
    return build


def _nonempty_reduced_dims(node):
    """torch raises for amax/amin over a dim of extent 0 (fuser would return -inf/+inf)."""
    x = node.args[0].meta["val"]
    dims = _dims(_arg(node, 1, "dim"), x.dim())
    empty = [d for d in dims if not isinstance(x.shape[d], torch.SymInt) and int(x.shape[d]) == 0]
    return f"{node.target} over the empty dim {empty[0]} (torch raises)" if empty else None


translates(aten.amax.default, check=_nonempty_reduced_dims)(_extremum("max"))
translates(aten.amin.default, check=_nonempty_reduced_dims)(_extremum("min"))


def _float_only(node):
    dtype = node.args[0].meta["val"].dtype
    return None if dtype.is_floating_point else f"{node.target} of {dtype}"


@translates(aten.mean.dim, aten.mean.default, check=_float_only)
def translate_mean(tx, node):
    x = tx.tensor(node.args[0])
    dims = _dims(_arg(node, 1, "dim") if node.target == aten.mean.dim else None, x.ndim)
    keepdim = bool(_arg(node, 2, "keepdim", False)) if node.target == aten.mean.dim else False
    if not dims:
        return x
    total = tx.ops.sum(_accumulated(tx, node, x), dims, keepdim=keepdim)
    return tx.ops.div(total, _count(tx, x, dims))


def _correction(node) -> float:
    correction = node.kwargs.get("correction")
    return 1 if correction is None else correction


def _var_check(node):
    """fd.ops.var/var_mean take an integer correction (torch also allows a fractional one)."""
    correction = _correction(node)
    if not float(correction).is_integer():
        return f"{node.target} with the fractional correction {correction}"
    return _float_only(node)


def _var_arguments(tx, node):
    x = tx.tensor(node.args[0])
    dims = _dims(_arg(node, 1, "dim"), x.ndim)
    return x, dims, int(_correction(node)), bool(node.kwargs.get("keepdim", False))


# fuser.welford (fuser_dialect/ops_welford.py) under fd.ops.var / var_mean: f32 accumulation for
# f16/bf16, torch's max(n - correction, 0) divisor, results in the input dtype.
@translates(aten.var_mean.correction, check=_var_check)
def translate_var_mean(tx, node):
    x, dims, correction, keepdim = _var_arguments(tx, node)
    return tx.ops.var_mean(x, dims, correction=correction, keepdim=keepdim)


@translates(aten.var.correction, check=_var_check)
def translate_var(tx, node):
    x, dims, correction, keepdim = _var_arguments(tx, node)
    return tx.ops.var(x, dims, correction=correction, keepdim=keepdim)


@translates(aten.cumsum.default)
def translate_cumsum(tx, node):
    x = tx.tensor(node.args[0])
    dtype = node.kwargs.get("dtype")
    if dtype is not None:
        x = tx.ops.cast(x, fuser_dtype(dtype))
    return tx.ops.cumsum(x, node.args[1] % max(x.ndim, 1)) if x.ndim else x
