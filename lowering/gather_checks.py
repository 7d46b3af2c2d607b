"""Out-of-range indices are an error before launch, never a silent out-of-bounds read:
index tensors that are fusion inputs are range-checked here against the extent they index."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects import func

from fuser_dialect.inputs import arg_label
from fuser_dialect.ops_gather import GatherOp, IndexSelectOp, TakeAlongAxisOp


def check_index_inputs(fusion: func.FuncOp, checked: Sequence[object]) -> None:
    args = list(fusion.body.block.args)
    for op in fusion.body.block.ops:
        if not isinstance(op, (GatherOp, TakeAlongAxisOp, IndexSelectOp)) or op.index not in args:
            continue
        i = args.index(op.index)
        index = checked[i]
        if not isinstance(index, np.ndarray) or index.size == 0:
            continue
        extent = _looked_up_extent(op, args, checked)
        if extent is None:
            continue
        low, high = int(index.min()), int(index.max())
        if low < 0 or high >= extent:
            bad = low if low < 0 else high
            raise IndexError(
                f"{arg_label(fusion, i)}: index {bad} is out of range for {op.name} along dim {op.axis} "
                f"of extent {extent} (valid: 0..{extent - 1})"
            )


def _looked_up_extent(op, args, checked) -> int | None:
    if op.input in args:
        return checked[args.index(op.input)].shape[op.axis]
    t = op.input.type
    return t.static_extent(op.axis)
