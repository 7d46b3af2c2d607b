"""How wide a kernel's accesses along the innermost dim may be: one rule for every scheduler.

A vector access moves VEC consecutive elements at once (16 bytes: `fuser_ld_vec` /
`fuser_st_vec`). It needs, for every tensor read as vector lanes: the innermost dim dense
(stride 1), the other strides multiples of VEC (every row starts on a vector boundary), and the
data pointer aligned to the vector; for every output: the innermost dim of its layout is the
domain's innermost dim (buffers fuser allocates are aligned) and is not broadcast; and the innermost extent a
multiple of VEC; for a value another kernel of the fusion stored as a fusion output: the same
as for that output (it is read from the buffer in the output's layout). Inputs are checked per
call (their strides and addresses are run-time facts).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from fuser_dialect.types import BROADCAST, numpy_dtype
from fuser.lowering.addresses import numpy_address

VECTOR_BYTES = 16


def _element_strides_and_address(array) -> tuple[tuple[int, ...], int, int]:
    if hasattr(array, "data_ptr"):  # torch
        return tuple(array.stride()), array.data_ptr(), array.element_size()
    return tuple(s // array.itemsize for s in array.strides), numpy_address(array), array.itemsize


def _array_allows(array, vec: int) -> bool:
    strides, address, size = _element_strides_and_address(array)
    if strides[-1] != 1 or address % (vec * size):
        return False
    return not any(s % vec for s, e in zip(strides[:-1], array.shape[:-1]) if e > 1)


def vector_width(values: Sequence[SSAValue], outputs: Sequence[SSAValue], inner_extent: int, arrays: dict,
                 output_layout: dict, narrowest_bytes: int = VECTOR_BYTES, alignment: int = 0) -> int:
    """Elements per access along the innermost dim for loads of `values` and stores of
    `outputs`, or 1: the widest of 16, 8, 4 ... bytes (down to `narrowest_bytes`) that every
    access allows, dividing `alignment` (the static shifts of the innermost index: slice starts,
    cat pieces) when it is not 0. `values` without an array (computed in the fusion) are
    fuser's aligned buffers."""
    if not (values or outputs):
        return 1
    itemsize = max(numpy_dtype(v.type.dtype).itemsize for v in (*values, *outputs))  # type: ignore[union-attr]
    # A fusion output is stored in its layout, and a later kernel reading it reads that buffer:
    # both need the innermost dim dense there.
    for value in (*outputs, *values):
        order = output_layout.get(value)
        if order is not None and order[-1] != 0:
            return 1
    # An output broadcast along the innermost dim has one element where the domain has VEC:
    # a vector store would write VEC of them at the index of one.
    if inner_extent > 1 and any(out.type.shape[-1] == BROADCAST for out in outputs):  # type: ignore[union-attr]
        return 1
    width = VECTOR_BYTES
    while width >= max(narrowest_bytes, 2 * itemsize):
        vec = width // itemsize
        if inner_extent % vec == 0 and (alignment % vec == 0) and all(
                arrays.get(v) is None or _array_allows(arrays[v], vec) for v in values):
            return vec
        width //= 2
    return 1


__all__ = ["VECTOR_BYTES", "vector_width"]
