"""nvFuser frontend API items: scalar-only ops, vectors, from_pytorch and define_tensor(sizes,
strides), alias_input, 0-d broadcasting, operators, reductions without dims, squeeze_expanded,
set / segment_set, embedding_fwd and segment inspection. Numerics against torch on the
"reference" and "cpu" backends."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition

BACKENDS = ["reference", "cpu"]


def run_both(fd, inputs):
    """The outputs of both backends (they must agree with each other and with torch)."""
    return {b: fd.execute(inputs, backend=b) for b in BACKENDS}


# --- scalar-only ops --------------------------------------------------------------------------

SCALAR_CASES = [
    ("neg", lambda ops, a, b: ops.neg(a), lambda a, b: -a),
    ("abs", lambda ops, a, b: ops.abs(a), lambda a, b: abs(a)),
    ("reciprocal", lambda ops, a, b: ops.reciprocal(a), lambda a, b: 1.0 / a),
    ("pow3", lambda ops, a, b: ops.pow(a, 3), lambda a, b: a**3),
    ("pow-2", lambda ops, a, b: ops.pow(a, -2), lambda a, b: a**-2),
    ("mul", lambda ops, a, b: ops.mul(a, 2.0), lambda a, b: a * 2.0),
    ("div", lambda ops, a, b: ops.div(b, a), lambda a, b: b / a),
    ("maximum", lambda ops, a, b: ops.maximum(a, b), lambda a, b: max(a, b)),
    ("sub_int", lambda ops, a, b: ops.sub(b, 7), lambda a, b: b - 7),
    ("cast_int", lambda ops, a, b: ops.cast(a, DataType.Int), lambda a, b: int(a)),
    ("cast_bool", lambda ops, a, b: ops.cast(a, DataType.Bool), lambda a, b: bool(a)),
    ("lt", lambda ops, a, b: ops.lt(a, b), lambda a, b: a < b),
    ("ne", lambda ops, a, b: ops.ne(a, a), lambda a, b: False),
    ("where", lambda ops, a, b: ops.where(ops.gt(a, 0.0), a, b), lambda a, b: a if a > 0 else b),
    ("fmod_int", lambda ops, a, b: ops.fmod(b, 4), lambda a, b: int(math.fmod(b, 4))),
    ("bitwise_xor", lambda ops, a, b: ops.bitwise_xor(b, 6), lambda a, b: b ^ 6),
    ("logical_and", lambda ops, a, b: ops.logical_and(a, b), lambda a, b: bool(a) and bool(b)),
]


@pytest.mark.parametrize("name,build,expected", SCALAR_CASES, ids=[c[0] for c in SCALAR_CASES])
@pytest.mark.parametrize("a", [-2.5, 0.75])
def test_scalar_ops_give_scalars(name, build, expected, a):
    b = -9
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 3])
        sa = fd.define_scalar(dtype=DataType.Double)
        sb = fd.define_scalar(dtype=DataType.Int32)
        s = build(fd.ops, sa, sb)
        assert type(s).__name__ == "Scalar"
        fd.add_output(s)
        fd.add_output(fd.ops.add(t, fd.ops.cast(s, DataType.Double)))  # and used by a kernel
    x = torch.randn(5, 3)
    want = expected(a, b)
    for outs in run_both(fd, [x, a, np.int32(b)]).values():
        assert outs[0] == pytest.approx(want)
        torch.testing.assert_close(outs[1], x + float(want))


def test_scalar_operators():
    with FusionDefinition() as fd:
        s = fd.define_scalar(dtype=DataType.Double)
        n = fd.define_scalar(dtype=DataType.Int)
        for v in (abs(s), s**2, 1.0 / s, n % 3, s < 1.0, s >= 1.0, -n, n // 2):
            fd.add_output(v)
    for outs in run_both(fd, [-1.5, -7]).values():
        assert list(outs) == [1.5, 2.25, pytest.approx(-2 / 3), -1, True, False, 7, -4]


def test_unsupported_scalar_op_lists_the_supported_ones():
    with FusionDefinition() as fd:
        s = fd.define_scalar()
        with pytest.raises(TypeError, match=r"exp: not supported on scalars.*supported scalar ops: neg, abs"):
            fd.ops.exp(s)
        with pytest.raises(TypeError, match="exponent must be a constant integer"):
            fd.ops.pow(s, 0.5)
        with pytest.raises(TypeError, match="not supported on float scalars"):
            fd.ops.fmod(s, 2.0)
        with pytest.raises(TypeError, match="add: needs a Tensor or Scalar operand, got int, float"):
            fd.ops.add(1, 2.0)
        with pytest.raises(TypeError, match="cast: a scalar cannot be cast to"):
            fd.ops.cast(s, next(d for d in DataType if d.value not in ("f64", "f32", "f16", "bf16", "i64", "i32", "i1")))
        fd.add_output(s)


# --- vectors and shapes ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_define_vector_input_and_shape(backend):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1])
        v = fd.define_vector(2)
        assert len(v) == 2 and repr(v) == "Vector(size=2)"
        r = fd.ops.reshape(t, v)
        fd.add_output(r)
        fd.add_output(fd.ops.reshape(r, fd.ops.shape(r)))
        fd.add_output(fd.ops.full(fd.define_vector([3, fd.define_scalar(2)]), 1.5, DataType.Float))
        fd.add_output(fd.ops.expand(fd.ops.broadcast(t, [True, False]), [v[1], t.shape()[0]]))
    x = torch.arange(15, dtype=torch.float32)
    r, same, full, expanded = fd.execute([x, [5, 3]], backend=backend)
    torch.testing.assert_close(r, x.reshape(5, 3))
    torch.testing.assert_close(same, x.reshape(5, 3))
    torch.testing.assert_close(full, torch.full((3, 2), 1.5))
    torch.testing.assert_close(expanded, x.expand(3, 15))
    with pytest.raises(TypeError, match="a define_vector of size 2"):
        fd.execute([x, [5]], backend=backend)


def test_define_vector_errors():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1])
        with pytest.raises(TypeError, match="dtype must be DataType.Int"):
            fd.define_vector([1], dtype=DataType.Float)
        with pytest.raises(TypeError, match=r"values\[1\] = 2.5: expected an int"):
            fd.define_vector([1, 2.5])
        fd.add_output(t)


# --- from_pytorch and define_tensor(sizes, strides) ------------------------------------------------


def test_from_pytorch_reads_dtype_rank_broadcast_and_stride_order():
    with FusionDefinition() as fd:
        # strides (1, 6, 6): dim 0 is fastest; the extent-1 dim ties with dim 2 and is ranked
        # as in row-major order (the later dim faster).
        a = fd.from_pytorch(torch.randn(4, 1, 6).permute(2, 1, 0))
        b = fd.from_pytorch(torch.ones(2, 3, dtype=torch.bfloat16), static_sizes=True)
        c = fd.from_pytorch(torch.tensor(3, dtype=torch.int32))
        fd.add_output(c)
    assert (a.type.shape, a.type.stride_order, a.dtype) == ((-1, -2, -1), (0, 2, 1), DataType.Float)
    assert (b.type.shape, b.type.stride_order, b.dtype) == ((2, 3), None, DataType.BFloat16)
    assert (c.type.shape, c.dtype) == ((), DataType.Int32)
    with pytest.raises(TypeError, match="from_pytorch: expected a torch.Tensor"):
        fd.from_pytorch(np.ones(3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_from_pytorch_fusion_runs_on_transposed_inputs(backend):
    x = torch.randn(5, 7).t()
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.mul(t, 3.0))
    (out,) = fd.execute([x], backend=backend)
    torch.testing.assert_close(out, x * 3)


def test_define_tensor_sizes_strides():
    with FusionDefinition() as fd:
        t = fd.define_tensor(sizes=[2, 1, 5], strides=[5, 5, 1], dtype=DataType.Half)
        s = fd.define_tensor(sizes=[3, 4], strides=[1, 3], static_sizes=True)
        with pytest.raises(ValueError, match="2 sizes but 1 strides"):
            fd.define_tensor(sizes=[2, 3], strides=[1])
        with pytest.raises(ValueError, match="`sizes` and `strides` go together"):
            fd.define_tensor(sizes=[2, 3])
        with pytest.raises(ValueError, match="either shape/stride_order or sizes/strides"):
            fd.define_tensor([2, 3], sizes=[2, 3], strides=[3, 1])
        fd.add_output(t)
    assert (t.type.shape, t.type.stride_order, t.dtype) == ((-1, -2, -1), None, DataType.Half)
    assert (s.type.shape, s.type.stride_order) == ((3, 4), (0, 1))


# --- alias_input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("to_input", [lambda x: x.clone(), lambda x: x.numpy().copy()], ids=["torch", "numpy"])
def test_alias_input_updates_the_input_in_place(backend, to_input):
    x = torch.randn(3, 5)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.mul(t, 2.0))
        fd.add_output(fd.ops.add(t, 1.0), alias_input=t)  # computed from the old values
        fd.add_output(fd.ops.neg(t))
    assert "fuser.alias_input = 0" in str(fd)
    buffer = to_input(x)
    doubled, negated = fd.execute([buffer], backend=backend)  # the aliased output is not returned
    torch.testing.assert_close(torch.as_tensor(np.asarray(doubled)), x * 2)
    torch.testing.assert_close(torch.as_tensor(np.asarray(negated)), -x)
    torch.testing.assert_close(torch.as_tensor(np.asarray(buffer)), x + 1)


def test_alias_input_errors():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 4])
        h = fd.define_tensor(shape=[-1, 4], dtype=DataType.Half)
        with pytest.raises(TypeError, match="output dtype f32 differs from input 1's dtype f16"):
            fd.add_output(fd.ops.neg(t), alias_input=h)
        with pytest.raises(ValueError, match="has rank 1, input 0"):
            fd.add_output(fd.ops.sum(t, [1]), alias_input=t)
        with pytest.raises(ValueError, match="dim 1 of the output f32\\[\\?, 8\\] has extent 8, input 0"):
            fd.add_output(fd.ops.cat([t, t], 1), alias_input=t)
        with pytest.raises(ValueError, match="must be a fusion input"):
            fd.add_output(fd.ops.neg(t), alias_input=fd.ops.abs(t))
        fd.add_output(fd.ops.neg(t), alias_input=t)
    # Run-time extents the types leave open are checked when the output is written back.
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 1])
        fd.add_output(fd.ops.expand(t, [t.size(0), 4]), alias_input=fd.define_tensor(shape=[-1, -1]))
    with pytest.raises(ValueError, match=r"output 0 \(alias_input of input 1\): the output has shape \[2, 4\] "
                                         r"but the input buffer has \[2, 3\]"):
        fd.execute([np.ones((2, 1), np.float32), np.ones((2, 3), np.float32)], backend="reference")


# --- 0-d broadcasting, operators, reductions ---------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 1, 9)])
def test_zero_dim_tensors_broadcast_like_torch(backend, shape):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1] * len(shape))
        z = fd.define_tensor(shape=[])
        fd.add_output(fd.ops.sub(z, t))
        fd.add_output(fd.ops.where(fd.ops.gt(z, 0.0), t, z))
        fd.add_output(fd.ops.where(fd.ops.gt(t, 0.0), z, 1.0))
    x, s = torch.randn(shape), torch.tensor(0.25)
    a, b, c = fd.execute([x, s], backend=backend)
    torch.testing.assert_close(a, s - x)
    torch.testing.assert_close(b, torch.where(s > 0, x, s))
    torch.testing.assert_close(c, torch.where(x > 0, s, torch.tensor(1.0)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_operators(backend):
    with FusionDefinition() as fd:
        f = fd.define_tensor(shape=[-1, 3])
        i = fd.define_tensor(shape=[-1, 3], dtype=DataType.Int)
        for v in (abs(f), f**2, 2.0**f, f % 0.75, i & 6, 5 | i, i ^ 3, ~i, f == f, f != 0.5):
            fd.add_output(v)
    x, n = torch.randn(4, 3), torch.randint(-9, 9, (4, 3))
    outs = fd.execute([x, n], backend=backend)
    expected = [x.abs(), x**2, 2.0**x, torch.fmod(x, 0.75), n & 6, 5 | n, n ^ 3, ~n, x == x, x != 0.5]
    for got, want in zip(outs, expected):
        torch.testing.assert_close(got, want)
    with FusionDefinition() as fd2:
        a = fd2.define_tensor(shape=[-1])
        assert len({a, a}) == 1  # == builds an op; hashing stays by identity
        fd2.add_output(a)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reductions_without_dims_reduce_everything(backend):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, 5])
        fd.add_output(fd.ops.sum(t))
        fd.add_output(fd.ops.max(t, keepdim=True))
        fd.add_output(fd.ops.min(t))
        fd.add_output(fd.ops.prod(t, dims=[]))
    x = torch.rand(3, 7, 5) + 0.5
    total, biggest, smallest, product = fd.execute([x], backend=backend)
    torch.testing.assert_close(total, x.sum(), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(biggest, x.amax(dim=(0, 1, 2), keepdim=True))
    torch.testing.assert_close(smallest, x.min())
    torch.testing.assert_close(product, x.prod(), rtol=1e-4, atol=0)


# --- squeeze_expanded, set / segment_set, embedding_fwd ------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_squeeze_expanded(backend):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 1, 1])
        e = fd.ops.expand(t, [t.size(0), 4, fd.define_scalar(dtype=DataType.Int)])
        with pytest.raises(ValueError, match="dim 1 of f32\\[\\?, 4, \\?\\] is an expanded broadcast dim"):
            fd.ops.squeeze(e, [1])
        fd.add_output(fd.ops.squeeze(e, [1], squeeze_expanded=True))
    x = torch.randn(3, 1, 1)
    (out,) = fd.execute([x, 6], backend=backend)
    torch.testing.assert_close(out, x.expand(3, 4, 6)[:, 0, :])


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_and_segment_set(backend):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        s = fd.ops.segment_set(fd.ops.exp(x))
        fd.add_output(fd.ops.set(fd.ops.neg(s)))
        fd.add_output(fd.ops.set(x))
    data = torch.randn(5, 3)
    neg_exp, copy = fd.execute([data], backend=backend)
    torch.testing.assert_close(neg_exp, -data.exp())
    torch.testing.assert_close(copy, data)
    if backend == "cpu":
        assert [k.scheduler for k in fd.last_kernels()] == ["pointwise", "pointwise"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index_shape", [(5,), (3, 4), (2, 1, 3)])
def test_embedding_fwd_matches_torch(backend, index_shape):
    with FusionDefinition() as fd:
        i = fd.define_tensor(shape=[-1] * len(index_shape), dtype=DataType.Int)
        w = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.embedding_fwd(i, w, padding_idx=0, max_norm=None, norm_type=2.0,
                                           scale_grad_by_freq=False, sparse=False))
    index, weight = torch.randint(0, 11, index_shape), torch.randn(11, 7)
    (out,) = fd.execute([index, weight], backend=backend)
    torch.testing.assert_close(out, torch.nn.functional.embedding(index, weight, padding_idx=0))


def test_embedding_fwd_refuses_non_integer_indices():
    with FusionDefinition() as fd:
        i = fd.define_tensor(shape=[-1], dtype=DataType.Int)
        w = fd.define_tensor(shape=[-1, -1])
        with pytest.raises(TypeError, match="must hold integer indices"):
            fd.ops.embedding_fwd(w, w)
        fd.add_output(i)


# --- segment inspection ------------------------------------------------------------------------------


def test_segment_inspection_maps_values_across_segments():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        s = fd.define_scalar(dtype=DataType.Double)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, [1], keepdim=True)))
        fd.add_output(fd.ops.mul(fd.ops.sum(e, [0]), s))
        fd.add_output(e)
    segments = fd.segment([torch.randn(4, 6), 2.0])
    assert [str(o) for o in segments[1].inputs] == ["input 1", "segment 0 output 0"]
    assert segments[0].outputs == [[1]] and segments[1].outputs == [[0]]
    assert [s.scheduler for s in segments] == ["inner_persistent", "reduction"]
    assert "func.func @segment_1(%0: f64, %1: !fuser.tensor<?x?xf32>)" in segments[1].text
    assert "fuser.reduction sum %1 dims [0]" in segments[1].text
    printed = str(segments)
    assert "segment 1: reduction (split before fuser.reduction" in printed
    assert "%arg1 <- segment 0 output 0" in printed
    # The segments printed are the kernels execute runs.
    fd.execute([torch.randn(4, 6), 2.0], backend="cpu")
    assert [k.scheduler for k in fd.last_kernels()] == [s.scheduler for s in segments]
