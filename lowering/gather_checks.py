"""Out-of-range indices are an error before launch, never a silent out-of-bounds read.

The index of every gather / take_along_axis / index_select is computed on the host from the
fusion inputs (its producer cone: typically labels → where(ne, y, 0) → broadcast, tensors of
the index's size) and checked against the extent it indexes. An index computed from large
tensors (a cone with a reduction, or inputs much bigger than the index) is not checked here:
such kernels read whatever index they compute, as documented in the README."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects import func

from fuser_dialect.inputs import arg_label, to_numpy
from fuser_dialect.interpreter import backward_slice, evaluate_values
from fuser_dialect.ops_compute import ReductionOp
from fuser_dialect.ops_gather import GatherOp, IndexSelectOp, TakeAlongAxisOp

_MAX_CONE_INPUT_RATIO = 4


def _source(fusion: func.FuncOp, op) -> str:
    """Names the input(s) an index comes from, and the ops in between."""
    args = list(fusion.body.block.args)
    cone = backward_slice(fusion, [op.index])
    sources = [v for v in [op.index, *(w for o in cone for w in o.operands)] if v in args]
    names = ", ".join(dict.fromkeys(arg_label(fusion, args.index(v)) for v in sources)) or "a computed index"
    path = [o.name for o in cone if not o.name.startswith("arith.")]
    return names + (f" (through {', '.join(path)})" if path else "")


def _cheap(fusion: func.FuncOp, op, checked: Sequence[object]) -> bool:
    """The index comes from inputs of about its own size, without a reduction."""
    cone = backward_slice(fusion, [op.index])
    if any(isinstance(o, ReductionOp) for o in cone):
        return False
    args = list(fusion.body.block.args)
    index_numel = max(1, int(np.prod([max(e, 1) for e in op.index.type.shape])))
    read = [checked[args.index(v)] for v in {op.index, *(w for o in cone for w in o.operands)} if v in args]
    sizes = [int(np.prod(x.shape)) for x in read if hasattr(x, "shape")]
    largest, smallest = max(sizes, default=0), min(sizes, default=0)
    return largest <= _MAX_CONE_INPUT_RATIO * max(index_numel, smallest)


def index_ops(fusion: func.FuncOp) -> list:
    return [op for op in fusion.body.block.ops if isinstance(op, (GatherOp, TakeAlongAxisOp, IndexSelectOp))]


def check_index_ranges(fusion: func.FuncOp, checked: Sequence[object], extents) -> None:
    """Raises IndexError naming the index and the extent when an index is out of range."""
    for op in index_ops(fusion):
        if not _cheap(fusion, op, checked):
            continue
        args = list(fusion.body.block.args)
        needed = {op.index, *(v for o in backward_slice(fusion, [op.index]) for v in o.operands)}
        host = [to_numpy(x) if a in needed else None for a, x in zip(args, checked)]
        (index,) = evaluate_values(fusion, host, [op.index])
        if not isinstance(index, np.ndarray) or index.size == 0:
            continue
        extent = extents.shape(op.input)[op.axis]
        low, high = int(index.min()), int(index.max())
        if low < 0 or high >= extent:
            bad = low if low < 0 else high
            raise IndexError(
                f"{_source(fusion, op)}: index {bad} is out of range for {op.name} along dim "
                f"{op.axis} of extent {extent} (valid: 0..{extent - 1})"
            )
