"""Vector accesses at every boundary residue: a vector never straddles a cat piece, a slice
start, a pad edge, a view's offset, or a change of layout between a kernel and an output it
feeds.

A 16-byte access moves W = 16 / itemsize consecutive elements of the innermost dim (8- and
4-byte accesses W/2 and W/4). Each family below puts its boundary (a cat piece's start, a slice
start, a pad width, the element offset of an input view, the innermost extent) at every residue
modulo W of every dtype size (8, 4, 2 and 1 bytes), and checks the cpu backend (the generated
CUDA, run with memcheck on: conftest.py) against the reference interpreter, or, through
torch.compile, against eager. The cases are enumerated, not drawn: a residue is never left to
chance.

Budget: CI runs every residue of the 4-byte and 2-byte dtypes (once each) and a sample of the
others; `FUSER_VECTOR_BOUNDARIES=full` runs every residue of every dtype, up to 2W + 1.

Found by these families (issue 36), each now a case here: the second piece of `cat([x[:, :2] * 2,
x[:, 2:]])` read the first piece's vector (the piece's shift and the slice's cancelled in the
load's index, hiding the boundary); a kernel reading back an output another kernel stored in a
permuted layout took it for a dense buffer (misaligned vector loads); a row kernel stored an
output broadcast along the innermost dim with a vector store (two values at the index of one);
a rotary table of 2 columns read with a 16-byte load.
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from lowering_checks import check, requires_cpu_backend
from torch_checks import compare_with_eager, fresh_dynamo  # noqa: F401  (fixture)

pytestmark = requires_cpu_backend

FULL = os.environ.get("FUSER_VECTOR_BOUNDARIES", "").strip().lower() == "full"

# dtype name -> (DataType, numpy dtype)
DTYPES = {
    "f64": (DataType.Double, np.dtype(np.float64)),
    "i64": (DataType.Int, np.dtype(np.int64)),
    "f32": (DataType.Float, np.dtype(np.float32)),
    "i32": (DataType.Int32, np.dtype(np.int32)),
    "f16": (DataType.Half, np.dtype(np.float16)),
    "bf16": (DataType.BFloat16, np.dtype(ml_dtypes.bfloat16)),
    "bool": (DataType.Bool, np.dtype(np.bool_)),
}
NUMERIC = [d for d in DTYPES if d != "bool"]


def _width(dtype: str) -> int:
    """Elements of a 16-byte vector of this dtype."""
    return 16 // DTYPES[dtype][1].itemsize


def _residues(dtype: str) -> list[int]:
    """The boundary positions a family tries for this dtype: every residue modulo W (1 .. 2W+1)
    in the full run; in CI every residue (1 .. W+1) of the 4- and 2-byte dtypes and 1, W/2,
    W-1, W, W+1 of the others."""
    w = _width(dtype)
    if FULL:
        return list(range(1, 2 * w + 2))
    if DTYPES[dtype][1].itemsize in (2, 4):
        return list(range(1, w + 2))
    return sorted({1, max(1, w // 2), w - 1, w, w + 1})


def _cases(dtypes) -> list[tuple[str, int]]:
    return [(d, b) for d in dtypes for b in _residues(d)]


def _values(dtype: str, shape, seed: int = 0) -> np.ndarray:
    """Distinct, exactly representable values (so a lane read from the wrong place shows)."""
    n = int(np.prod(shape))
    np_dtype = DTYPES[dtype][1]
    if dtype == "bool":
        return (np.random.default_rng(seed).random(n) < 0.5).reshape(shape)
    limit = 256 if dtype in ("f16", "bf16") else 1 << 20  # integers both represent exactly
    return ((np.arange(n) * 7 + seed) % limit).astype(np_dtype).reshape(shape)


def _doubled(fd, t, dtype: str):
    """t transformed elementwise in its own dtype (so a piece's values differ from the input's)."""
    if dtype == "bool":
        return fd.ops.logical_not(t)
    return fd.ops.cast(fd.ops.mul(t, fd.define_scalar(2, DataType.Int)), DTYPES[dtype][0])


# --- cat ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,b", _cases(DTYPES))
def test_cat_of_slices_of_one_input(dtype, b):
    """cat([f(x[:, :b]), x[:, b:]]): both pieces read x at the cat's own index."""
    w = _width(dtype)
    cols = 2 * w + (w if b > w else 0)
    dt = DTYPES[dtype][0]
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dt)
        head = fd.ops.slice(x, [0, 0], [3, b])
        tail = fd.ops.slice(x, [0, b], [3, cols])
        fd.add_output(fd.ops.cat([_doubled(fd, head, dtype), tail], dim=1))
    check(fd, [_values(dtype, (3, cols))])


@pytest.mark.parametrize("dtype,b", _cases(["f32", "bf16", "i64"]))
def test_cat_of_three_slices_out_of_order(dtype, b):
    """cat([x[:, b:2b], f(x[:, :b]), x[:, 2b:]]): every piece shifted by a different amount."""
    w = _width(dtype)
    cols = 2 * b + 2 * w
    dt = DTYPES[dtype][0]
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dt)
        first = fd.ops.slice(x, [0, 0], [2, b])
        second = fd.ops.slice(x, [0, b], [2, 2 * b])
        rest = fd.ops.slice(x, [0, 2 * b], [2, cols])
        fd.add_output(fd.ops.cat([second, _doubled(fd, first, dtype), rest], dim=1))
    check(fd, [_values(dtype, (2, cols))])


@pytest.mark.parametrize("dtype,b", _cases(["f64", "f32", "f16", "i32"]))
def test_cat_of_two_inputs(dtype, b):
    w = _width(dtype)
    dt = DTYPES[dtype][0]
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, b], dtype=dt)
        y = fd.define_tensor(shape=[-1, 2 * w], dtype=dt)
        fd.add_output(fd.ops.cat([_doubled(fd, x, dtype), y], dim=1))
    check(fd, [_values(dtype, (4, b)), _values(dtype, (4, 2 * w), seed=3)])


@pytest.mark.parametrize("dtype,b", _cases(["f32", "bf16"]))
def test_softmax_of_a_cat(dtype, b):
    """A row kernel (reduction and normalisation) over a cat of slices at boundary b."""
    w = _width(dtype)
    cols = 4 * w
    dt = DTYPES[dtype][0]
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dt)
        head = fd.ops.mul(fd.ops.slice(x, [0, 0], [5, b]), fd.define_scalar(0.5))
        c = fd.ops.cat([head, fd.ops.slice(x, [0, b], [5, cols])], dim=1)
        c = fd.ops.cast(c, DataType.Float)
        e = fd.ops.exp(fd.ops.sub(c, fd.ops.max(c, dims=[1], keepdim=True)))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))
    x = (_values(dtype, (5, cols)).astype(np.float32) / 64).astype(DTYPES[dtype][1])
    check(fd, [x])


# --- slices and views with offsets ------------------------------------------------------------------


@pytest.mark.parametrize("dtype,s", _cases(NUMERIC))
def test_slice_start(dtype, s):
    """x[:, s:s + 2W] * 2: the load starts s elements into each row."""
    w = _width(dtype)
    dt = DTYPES[dtype][0]
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dt)
        fd.add_output(_doubled(fd, fd.ops.slice(x, [0, s], [3, s + 2 * w]), dtype))
    check(fd, [_values(dtype, (3, s + 3 * w))])


@pytest.mark.parametrize("dtype,k", _cases(NUMERIC))
def test_input_view_at_an_offset(dtype, k):
    """An input whose data starts k elements into its allocation, and one whose rows are k
    elements longer than its extent (row stride not a multiple of the vector)."""
    w = _width(dtype)
    dt = DTYPES[dtype][0]
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dt)
        y = fd.define_tensor(shape=[-1, -1], dtype=dt)
        fd.add_output(_doubled(fd, x, dtype))
        fd.add_output(_doubled(fd, y, dtype))
    rows, cols = 3, 2 * w
    shifted = _values(dtype, (rows * cols + k,))[k:].reshape(rows, cols)
    padded = _values(dtype, (rows, cols + k), seed=5)[:, :cols]
    check(fd, [shifted, padded])


@pytest.mark.parametrize("dtype,k", _cases(["f32", "bf16", "f64"]))
def test_row_reduction_of_views_at_an_offset(dtype, k):
    """x - mean(x) over rows, for an input view at element offset k."""
    w = _width(dtype)
    dt = DTYPES[dtype][0]
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dt)
        xf = fd.ops.cast(x, DataType.Float)
        m = fd.ops.sum(xf, dims=[1], keepdim=True)
        fd.add_output(fd.ops.sub(xf, fd.ops.div(m, fd.define_scalar(float(4 * w)))))
    base = (_values(dtype, (4 * 4 * w + k,)).astype(np.float32) / 8).astype(DTYPES[dtype][1])
    check(fd, [base[k:].reshape(4, 4 * w)])


# --- pad ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,p", _cases(["f32", "f16", "i64"]))
def test_pad_innermost(dtype, p):
    """pad(x, [p, W - 1]) then an elementwise op: the padded edges at every residue."""
    w = _width(dtype)
    dt = DTYPES[dtype][0]
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dt)
        padded = fd.ops.pad(x, [p, w - 1], fd.define_scalar(3, DataType.Int))
        fd.add_output(_doubled(fd, padded, dtype))
    check(fd, [_values(dtype, (2, 2 * w + 1))])


# --- layouts between kernels and outputs -------------------------------------------------------------


@pytest.mark.parametrize("rows,cols", [(r, c) for r in (1, 2, 3, 4) for c in (1, 2, 3, 4, 5, 8, 9, 16)])
def test_permuted_output_read_back_by_a_reduction(rows, cols):
    """Outputs t = -x, permute(t) and sum(permute(t), dims=[1]): the reduction kernel reads
    permute(t) from the buffer that output is stored in (t's layout, transposed)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        t = fd.ops.neg(x)
        p = fd.ops.permute(t, [1, 0])
        fd.add_output(t)
        fd.add_output(p)
        fd.add_output(fd.ops.sum(p, dims=[1]))
    check(fd, [_values("f32", (rows, cols))])


@pytest.mark.parametrize("hw", [1, 2, 3, 4, 5, 8])
def test_row_kernel_output_broadcast_along_the_innermost_dim(hw):
    """x - mean(x, (0, 2, 3)) and sigmoid(g) with g [N, C, 1, 1]: the row kernel computes g's
    output at its own domain, broadcast along the row's innermost dim (RegNet's block)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1, -1], dtype=DataType.Float)
        g = fd.define_tensor(shape=[-1, -1, 1, 1], dtype=DataType.Float)
        m = fd.ops.div(fd.ops.sum(x, dims=[0, 2, 3], keepdim=True), fd.define_scalar(float(2 * hw * hw)))
        fd.add_output(fd.ops.sub(x, m))
        fd.add_output(fd.ops.sigmoid(g))
    check(fd, [_values("f32", (2, 6, hw, hw)) / 16, _values("f32", (2, 6, 1, 1)) / 16])


def test_row_kernel_output_broadcast_along_the_innermost_dim_through_torch():
    def block(x, g):
        return x - x.mean((0, 2, 3), keepdim=True), torch.sigmoid(g)

    compare_with_eager(block, torch.randn(2, 30, 2, 2, requires_grad=True), torch.randn(2, 30, 1, 1, requires_grad=True))


@pytest.mark.parametrize("t", [3, 5, 6, 8])
def test_permuted_sum_kept_as_output_then_normalised(t):
    """Whisper's encoder stem, cut down: h = x.permute(0, 2, 1) + w * 2 kept as an output in
    the permuted layout, and the row kernel over h.contiguous()."""
    def stem(x, w):
        h = x.permute(0, 2, 1) + w * 2
        hc = h.contiguous()
        return h, w * 2, hc - hc.mean(2, keepdim=True)

    compare_with_eager(stem, torch.randn(2, t, 8, requires_grad=True), torch.randn(8, t, requires_grad=True))


# --- rotary embeddings of part of a head (GPT-NeoX, StableLM) ---------------------------------------


def _partial_rotary(q, cos, sin, rotary: int):
    rot, rest = q[..., :rotary], q[..., rotary:]
    half = rotary // 2
    rotated = torch.cat([-rot[..., half:], rot[..., :half]], dim=-1)
    return torch.cat([rot * cos + rotated * sin, rest], dim=-1)


@pytest.mark.parametrize("head,rotary,seq", [(8, 2, 1), (8, 2, 3), (8, 4, 1), (8, 6, 2), (16, 2, 1), (16, 4, 5),
                                             (16, 6, 1), (16, 10, 3), (16, 12, 2)])
def test_partial_rotary_forward_and_backward(head, rotary, seq):
    """RoPE on the first `rotary` dims of each head, cos/sin tables [S, rotary] broadcast over
    batch and heads, through torch.compile against eager, gradients included."""
    q = torch.arange(2 * 3 * seq * head, dtype=torch.float32).reshape(2, 3, seq, head) / 16
    cos, sin = torch.randn(seq, rotary), torch.randn(seq, rotary)
    compare_with_eager(lambda q, c, s: _partial_rotary(q, c, s, rotary), q.requires_grad_(), cos, sin)


@pytest.mark.parametrize("b", range(1, 10))
def test_cat_of_slices_through_torch(b):
    def f(x):
        return torch.cat([x[:, :b] * 2, x[:, b:]], dim=-1)

    compare_with_eager(f, torch.arange(3 * 16, dtype=torch.float32).reshape(3, 16).requires_grad_())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_torch_views_at_every_offset(dtype):
    """torch tensors whose storage offset is every residue of the vector: one compiled graph
    (dynamic shapes off), called with views that start k elements into their storage."""
    from fuser.torch_backend import make_backend

    w = 16 // torch.empty((), dtype=dtype).element_size()

    def f(x, y):
        return (x * 2 + y).softmax(-1), x[:, 1:] - 1

    compiled = torch.compile(f, backend=make_backend([]), dynamic=False)
    for k in range(2 * w + 1):
        base = torch.arange(4 * 4 * w + k, dtype=dtype) / 32
        x = base[k:].view(4, 4 * w)
        y = torch.arange(4 * (4 * w + k), dtype=dtype).view(4, 4 * w + k)[:, k:] / 64
        for got, want in zip(compiled(x, y), f(x, y)):
            torch.testing.assert_close(got, want)
