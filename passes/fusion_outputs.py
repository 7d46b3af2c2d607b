"""Shared guards of the pre-segmentation patterns: what a rewrite may do to fusion outputs.

A fusion output is a value used by the fusion's `func.return`. Its layout (required or
hinted stride order) lives on the func's result attributes, by return position, so a
rewrite that replaces the returned value keeps the layout automatically. What a rewrite
must not do is make an output *alias* something it was not before:
- an output replaced by a fusion input would alias that input (the input buffer is
  returned, or the kernel writes into the input);
- an output replaced by a value that is itself another output with a different layout
  (required or hinted order, or none) would need one buffer in two layouts.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import BlockArgument, Operation, SSAValue

from fuser_dialect.fusion import output_order
from fuser_dialect.types import TensorType


def return_indices(value: SSAValue) -> list[int]:
    """The positions at which `value` is returned by its fusion's func.return."""
    return sorted(use.index for use in value.uses if isinstance(use.operation, func.ReturnOp))


def has_single_use(value: SSAValue) -> bool:
    """Exactly one use, and that use is not the func.return (a fusion output)."""
    use = value.get_unique_use()
    return use is not None and not isinstance(use.operation, func.ReturnOp)


def enclosing_fusion(op: Operation) -> func.FuncOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    return parent


def _without_layout(t):
    return t.without_layout() if isinstance(t, TensorType) else t


def _layouts(f: func.FuncOp, indices: list[int]) -> set[tuple[tuple[int, ...] | None, bool]]:
    return {output_order(f, i) for i in indices}


def may_forward(old: SSAValue, new: SSAValue, anchor: Operation) -> bool:
    """Whether every use of `old` may be replaced by the existing value `new`.

    `anchor` is an op of the fusion (to find the func's result attributes). Types must be
    identical (up to an input's layout, unless `old` is returned). If `old` is a fusion
    output, `new` must not be a fusion input, and when `new` is an output too, all the
    layouts involved must be the same."""
    if old is new:
        return True
    old_outs = return_indices(old)
    if not old_outs:
        return _without_layout(old.type) == _without_layout(new.type)
    if old.type != new.type:
        return False
    if isinstance(new, BlockArgument):
        return False
    new_outs = return_indices(new)
    if not new_outs:
        return True
    f = enclosing_fusion(anchor)
    if f is None:
        return False
    return len(_layouts(f, old_outs + new_outs)) == 1


def erase_dead(rewriter, op: Operation | None, kinds: tuple[type[Operation], ...]) -> None:
    """Erases `op` if it is one of `kinds` and has no uses left, then its producers likewise."""
    while op is not None and isinstance(op, kinds) and all(not r.uses for r in op.results):
        producers = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
        rewriter.erase(op)
        op = producers[0] if len(producers) == 1 else None
