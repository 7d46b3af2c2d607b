"""nvFuser's `compute_contiguity` and `compute_tensor_descriptor`: the contiguity and stride
order `define_tensor` takes, read from a tensor's sizes and strides.

A dim is a broadcast dim when its stride is 0 or its size is 1; its contiguity is None. Another
dim is contiguous when its stride is the stride times the size of the next non-broadcast dim
inside it (the innermost one: when its stride is 1).

    compute_contiguity([2, 3], [3, 1])               -> [True, True]
    compute_tensor_descriptor([2, 3], [1, 2])        -> ([True, True], [0, 1])
"""

from __future__ import annotations

from collections.abc import Sequence


def _checked(sizes: Sequence[int], strides: Sequence[int], what: str) -> tuple[list[int], list[int]]:
    sizes, strides = [int(s) for s in sizes], [int(s) for s in strides]
    if len(sizes) != len(strides):
        raise ValueError(f"{what}: sizes and strides must have the same number of dims, got {len(sizes)} sizes "
                         f"and {len(strides)} strides")
    return sizes, strides


def _broadcast(size: int, stride: int) -> bool:
    return stride == 0 or size == 1


def compute_contiguity(sizes: Sequence[int], strides: Sequence[int]) -> list[bool | None]:
    """Per dim, in dim order: None for a broadcast dim, else whether it is contiguous with the
    next non-broadcast dim to its right (the innermost one: whether its stride is 1)."""
    sizes, strides = _checked(sizes, strides, "compute_contiguity")
    kept = [d for d in range(len(sizes)) if not _broadcast(sizes[d], strides[d])]
    contiguity: list[bool | None] = [None] * len(sizes)
    for outer, inner in zip(kept, kept[1:] + [None]):
        expected = 1 if inner is None else strides[inner] * sizes[inner]
        contiguity[outer] = strides[outer] == expected
    return contiguity


def compute_tensor_descriptor(sizes: Sequence[int], strides: Sequence[int]) -> tuple[list[bool | None], list[int]]:
    """(contiguity, stride_order) for define_tensor. Dims with a nonzero stride are ordered by
    stride, outermost first (ties keep dim order); stride-0 dims keep their own position in that
    order, so an expanded dim does not make a permuted layout. stride_order[d] ranks dim d
    (0 = innermost); the contiguity list follows that outermost-first order, as nvFuser's."""
    sizes, strides = _checked(sizes, strides, "compute_tensor_descriptor")
    for d, stride in enumerate(strides):
        if stride < 0:
            raise ValueError(f"compute_tensor_descriptor: strides[{d}] = {stride}: negative strides are not supported")
    order = sorted((d for d in range(len(sizes)) if strides[d] != 0), key=lambda d: -strides[d])
    for d in range(len(sizes)):
        if strides[d] == 0:
            order.insert(d, d)
    n = len(order)
    stride_order = [0] * n
    contiguity: list[bool | None] = [None] * n
    for position, d in enumerate(order):
        stride_order[d] = n - 1 - position
        if _broadcast(sizes[d], strides[d]):
            continue
        inner = next((e for e in order[position + 1:] if not _broadcast(sizes[e], strides[e])), None)
        contiguity[position] = strides[d] == (1 if inner is None else strides[inner] * sizes[inner])
    return contiguity, stride_order
