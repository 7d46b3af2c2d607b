"""torch dtypes ↔ fuser DataTypes, and the stride order of a torch layout."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fuser import DataType

FUSER_DTYPES: dict[torch.dtype, DataType] = {
    torch.float64: DataType.Double,
    torch.float32: DataType.Float,
    torch.float16: DataType.Half,
    torch.bfloat16: DataType.BFloat16,
    torch.int64: DataType.Int,
    torch.int32: DataType.Int32,
    torch.bool: DataType.Bool,
}
TORCH_DTYPES: dict[str, torch.dtype] = {fd.value: t for t, fd in FUSER_DTYPES.items()}
HALF_FLOATS = {torch.float16, torch.bfloat16}


def fuser_dtype(dtype: torch.dtype) -> DataType:
    try:
        return FUSER_DTYPES[dtype]
    except KeyError:
        raise TypeError(f"fuser has no dtype for {dtype}") from None


def accumulate_dtype(dtype: torch.dtype) -> torch.dtype:
    """What torch accumulates a sum in: f32 for half floats, int64 for bools and ints."""
    if dtype in HALF_FLOATS:
        return torch.float32
    if not dtype.is_floating_point:
        return torch.int64
    return dtype


def stride_order(strides: Sequence[int]) -> list[int]:
    """nvFuser's stride_order of a layout: stride_order[d] ranks dim d, 0 = fastest. Equal
    strides (size-1 dims) rank as in a row-major tensor (the later dim is faster), so a
    contiguous tensor always gets [rank-1, ..., 0]."""
    fastest_first = sorted(range(len(strides)), key=lambda d: (size_hint(strides[d]), -d))
    order = [0] * len(strides)
    for rank, d in enumerate(fastest_first):
        order[d] = rank
    return order


def is_row_major(order: Sequence[int]) -> bool:
    return list(order) == list(range(len(order) - 1, -1, -1))


def size_hint(value) -> int:
    """The example value of an int or SymInt, read without adding a guard (so a dynamic
    graph stays dynamic)."""
    if isinstance(value, torch.SymInt):
        hint = value.node.hint
        if hint is None:
            raise TypeError(f"size {value} has no example value (an unbacked symbol)")
        return int(hint)
    return int(value)
