"""Ports of NVIDIA/Fuser's issue repros (tests/python/direct/test_repro.py, and the legacy
frontend file's copies of them): each fusion as upstream, shrunk to a few elements per dim
(extents written in the definitions shrink with them), checked against torch by
nvfuser_ported.check. See test_nvfuser_ported_frontend.py."""

from __future__ import annotations

import pytest
import torch

from fuser import DataType
from nvfuser_ported import BACKENDS, check, double, ports, randn, strided, tensor

F32, BF16, F16, I64 = DataType.Float, DataType.BFloat16, DataType.Half, DataType.Int


def ints(fd, *values):
    return [fd.define_scalar(v, dtype=I64) for v in values]


@ports("test_issue1129")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue1129_index_select_of_a_reshaped_index(backend):
    def definition(fd):
        index, table = tensor(fd, [-1, -1], I64, contiguity=[True, True]), tensor(fd, [-1, -1], contiguity=[True, True])
        rows = fd.ops.index_select(table, fd.ops.reshape(index, new_shape=ints(fd, 25)), dim=0)
        fd.add_output(fd.ops.reshape(rows, new_shape=ints(fd, 5, 5, 8)))

    check(definition, [torch.randint(0, 10, (25,)).as_strided((5, 5), (5, 1)), strided((20, 8), (8, 1))], backend)


@ports("test_issue1246")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("final_mul", [False, True])
def test_issue1246_cat_with_an_empty_strided_input(backend, final_mul):
    def definition(fd):
        t0 = tensor(fd, [1, -1, -1, -1], contiguity=[None, True, True, True])
        t1 = tensor(fd, [1, -1, -1, -1], contiguity=[None, True, False, True])
        out = fd.ops.cat([fd.ops.mul(t0, double(fd, 2.0)), t1], dim=-1)
        fd.add_output(fd.ops.mul(out, double(fd, 1.0)) if final_mul else out)

    check(definition, [strided((1, 2, 4, 3), (24, 12, 3, 1)), torch.zeros(0).as_strided((1, 2, 4, 0), (24, 12, 3, 1))],
          backend)


@ports("test_issue1270")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue1270_reductions_of_empty_products(backend):
    def definition(fd):
        t0, t1 = tensor(fd, [-1, -1], BF16, contiguity=[True, None]), tensor(fd, [-1, -1], BF16, contiguity=[None, True])
        ones = fd.ops.cast(fd.ops.full(fill_value=double(fd, 1.0), shape=[5, 0], dtype=BF16), F32)
        fd.add_output(fd.ops.sum(fd.ops.mul(fd.ops.cast(t1, F32), ones), dims=[1], keepdim=False, dtype=DataType.Null))
        fd.add_output(fd.ops.sum(fd.ops.mul(fd.ops.cast(t0, F32), ones), dims=[0], keepdim=False, dtype=DataType.Null))

    empty = torch.zeros(0, dtype=torch.bfloat16)
    _, (rows, cols) = check(definition, [empty.as_strided((5, 0), (1, 0)), empty.as_strided((5, 0), (0, 1))], backend)
    assert rows.shape == (5,) and cols.shape == (0,)


@ports("test_issue1273")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue1273_layer_norm_of_a_squeezable_reshape(backend):
    def definition(fd):
        t, eps = tensor(fd, [-1, -1], contiguity=[True, True]), fd.define_scalar(None, dtype=DataType.Double)
        x = fd.ops.reshape(t, new_shape=[2, 1, 2])
        var, mean = fd.ops.var_mean(x, dims=[2], correction=0, keepdim=False)
        var, mean = (fd.ops.broadcast_in_dim(v, shape=[2, 1, 1], broadcast_dims=[0, 1]) for v in (var, mean))
        invstd = fd.ops.broadcast_in_dim(fd.ops.rsqrt(fd.ops.add(var, eps)), shape=[2, 1, 2], broadcast_dims=[0, 1, 2])
        centered = fd.ops.sub(x, fd.ops.broadcast_in_dim(mean, shape=[2, 1, 2], broadcast_dims=[0, 1, 2]))
        fd.add_output(fd.ops.reshape(fd.ops.mul(centered, invstd), new_shape=[2, 2]))

    check(definition, [strided((2, 2), (2, 1)), 1e-05], backend)


@ports("test_issue1277")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue1277_rotary_pads_of_slices(backend):
    def rotate(fd, x, cos, sin):
        """x[..., :4] * cos + the rotated halves * sin, padded back to 16 and added to x[..., 4:]."""
        head, tail = (fd.ops.slice(x, [0, 0, 0, s], [5, 4, 5, e], [1, 1, 1, 1]) for s, e in ((0, 4), (4, 16)))
        tail = fd.ops.pad(tail, [4, 0, 0, 0, 0, 0, 0, 0], double(fd, 0.0))
        by_sin = fd.ops.mul(fd.ops.mul(double(fd, 1.0), head), sin)
        by_cos = fd.ops.mul(fd.ops.mul(double(fd, 1.0), head), cos)
        low, high = (fd.ops.slice(by_sin, [0, 0, 0, s], [5, 4, 5, e], [1, 1, 1, 1]) for s, e in ((0, 2), (2, 4)))
        rotated = fd.ops.add(by_cos, fd.ops.pad(fd.ops.neg(low), [2, 0, 0, 0, 0, 0, 0, 0], double(fd, 0.0)))
        rotated = fd.ops.add(rotated, fd.ops.pad(high, [0, 2, 0, 0, 0, 0, 0, 0], double(fd, 0.0)))
        return fd.ops.add(tail, fd.ops.pad(rotated, [0, 12, 0, 0, 0, 0, 0, 0], double(fd, 0.0)))

    def definition(fd):
        s0, s1 = fd.define_scalar(None, dtype=DataType.Double), fd.define_scalar(None, dtype=DataType.Double)
        t2, t3, t4, t5 = (tensor(fd, [-1] * 4, contiguity=[None, None, True, True]) for _ in range(4))
        t6, t7 = (tensor(fd, [-1] * 4, contiguity=[True] * 4) for _ in range(2))
        q = rotate(fd, fd.ops.mul(t6, s0), t2, t3)
        k = rotate(fd, fd.ops.permute(fd.ops.mul(t7, s1), dims=[0, 1, 3, 2]), t4, t5)
        fd.add_output(k)
        fd.add_output(q)

    rope = [strided((5, 4, 5, 4), (0, 0, 4, 1), seed=s) for s in range(4)]
    check(definition, [0.5, 0.5, *rope, strided((5, 4, 5, 16), (320, 80, 16, 1), seed=4),
                       strided((5, 4, 16, 5), (320, 80, 5, 1), seed=5)], backend)


@ports("test_issue1279", "test_issue1310")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue1279_issue1310_half_var_mean_and_repeated_bf16_sums(backend):
    def definition(fd):
        h = tensor(fd, [-1, 1, -1], F16, contiguity=[True, None, True])
        for stat in fd.ops.var_mean(fd.ops.cast(h, F32), dims=[1], correction=0, keepdim=False):
            fd.add_output(fd.ops.cast(stat, F16))
        b = tensor(fd, [-1, -1, -1], BF16, contiguity=[True, True, True])
        f, g = fd.ops.cast(b, F32), fd.ops.cast(b, F32)
        fd.add_output(fd.ops.sum(g, dims=[0, 1], keepdim=False, dtype=DataType.Null))
        fd.add_output(fd.ops.sum(f, dims=[0, 1], keepdim=False, dtype=DataType.Null))
        fd.add_output(fd.ops.sum(f, dims=[2], keepdim=False, dtype=DataType.Null))

    check(definition, [randn(2, 1, 2, dtype=torch.float16), randn(4, 6, 8, dtype=torch.bfloat16)], backend)


@ports("test_issue1393")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue1393_half_products_of_expanded_inputs(backend):
    def definition(fd):
        t0 = tensor(fd, [-1, -1, -1], F16, contiguity=[None, None, True])
        t1, t2 = tensor(fd, [-1, -1], F16, contiguity=[True, None]), tensor(fd, [-1, -1], F16, contiguity=[None, True])
        prod = fd.ops.cast(fd.ops.mul(fd.ops.cast(t1, F32), fd.ops.cast(t2, F32)), F16)
        wide = fd.ops.broadcast_in_dim(fd.ops.reshape(prod, new_shape=ints(fd, 3, 4, 1)), shape=ints(fd, 3, 4, 5),
                                       broadcast_dims=[0, 1, 2])
        fd.add_output(fd.ops.cast(fd.ops.mul(fd.ops.cast(wide, F32), fd.ops.cast(t0, F32)), F16))

    check(definition, [strided((3, 4, 5), (0, 0, 1), torch.float16), strided((3, 4), (1, 0), torch.float16, seed=1),
                       strided((3, 4), (0, 1), torch.float16, seed=2)], backend)


@ports("test_issue1691")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue1691_trivial_reshapes_of_reductions(backend):
    def definition(fd):
        t0 = tensor(fd, [1, -1, -1], contiguity=True, stride_order=[2, 1, 0])
        t1 = tensor(fd, [-1, -1], contiguity=True, stride_order=[1, 0])
        a = fd.ops.reshape(fd.ops.sum(t1, dims=[1], keepdim=False, dtype=DataType.Null), new_shape=ints(fd, 4))
        b = fd.ops.reshape(fd.ops.sum(t0, dims=[1, 0], keepdim=False, dtype=DataType.Null), new_shape=ints(fd, 4))
        fd.add_output(fd.ops.sum(fd.ops.mul(a, b), dims=[0], keepdim=False, dtype=DataType.Null))

    check(definition, [strided((1, 3, 4), (12, 4, 1)), strided((4, 3), (3, 1), seed=1)], backend)


@ports("test_issue1706")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue1706_rms_norm_backward_in_bf16(backend):
    n = 8  # upstream: 4096

    def bf(fd, x):
        return fd.ops.cast(x, BF16)

    def f32(fd, x):
        return fd.ops.cast(x, F32)

    def definition(fd):
        eps, _, _, _ = fd.define_scalar(None, dtype=DataType.Double), *(fd.define_scalar(None, dtype=I64) for _ in "abc")
        t4, t5 = tensor(fd, [1, -1, -1], BF16, contiguity=[None, True, True]), tensor(fd, [-1, -1], BF16)
        t6 = tensor(fd, [1, -1, -1], BF16, contiguity=[None, True, True])
        t7 = tensor(fd, [1, -1, 1], BF16, contiguity=[None, True, None])
        t8 = tensor(fd, [1, -1, -1], BF16, contiguity=[None, None, True])
        x, invstd = f32(fd, t6), fd.ops.rsqrt(f32(fd, t7))
        scale = f32(fd, fd.ops.broadcast_in_dim(bf(fd, invstd), shape=ints(fd, 1, n, n), broadcast_dims=[0, 1, 2]))
        normed, grad = f32(fd, bf(fd, fd.ops.mul(x, scale))), f32(fd, t4)
        grad_w = f32(fd, bf(fd, fd.ops.mul(grad, normed)))
        weight_grad = bf(fd, fd.ops.mul(f32(fd, bf(fd, fd.ops.sum(grad_w, dims=[0, 1], keepdim=False,
                                                                  dtype=DataType.Null))),
                                        fd.ops.reciprocal(double(fd, 2.0))))
        gw = f32(fd, bf(fd, fd.ops.mul(grad, f32(fd, t8))))
        by_scale, by_x = bf(fd, fd.ops.mul(gw, scale)), bf(fd, fd.ops.mul(gw, x))
        dvar = bf(fd, fd.ops.sum(f32(fd, by_x), dims=[0, 2], keepdim=False, dtype=DataType.Null))
        dvar = fd.ops.mul(double(fd, -0.5), f32(fd, fd.ops.broadcast_in_dim(dvar, shape=ints(fd, 1, n, 1),
                                                                            broadcast_dims=[1])))
        dvar = f32(fd, bf(fd, f32(fd, bf(fd, fd.ops.mul(dvar, fd.ops.pow(invstd, double(fd, 3.0)))))))
        dmean = fd.ops.sum(fd.ops.mul(dvar, fd.ops.reciprocal(eps)), dims=[0, 2], keepdim=False, dtype=DataType.Null)
        dmean = fd.ops.broadcast_in_dim(fd.ops.broadcast_in_dim(dmean, shape=ints(fd, 1, n), broadcast_dims=[1]),
                                        shape=ints(fd, 1, n, 1), broadcast_dims=[0, 1])
        dmean = f32(fd, bf(fd, fd.ops.broadcast_in_dim(dmean, shape=ints(fd, 1, n, n), broadcast_dims=[0, 1, 2])))
        second, first = bf(fd, fd.ops.mul(dmean, x)), bf(fd, fd.ops.mul(dmean, x))
        total = f32(fd, bf(fd, fd.ops.add(f32(fd, bf(fd, fd.ops.add(f32(fd, by_scale), f32(fd, first)))),
                                          f32(fd, second))))
        fd.add_output(bf(fd, fd.ops.mul(f32(fd, t5), fd.ops.reciprocal(double(fd, 2.0)))))
        fd.add_output(weight_grad)
        fd.add_output(bf(fd, total))
        fd.add_output(f32(fd, bf(fd, total)))

    bf16 = torch.bfloat16
    check(definition, [1e-06, 10, n, n, randn(1, n, n, dtype=bf16), randn(3, 4, dtype=bf16, seed=1),
                       randn(1, n, n, dtype=bf16, seed=2), randn(1, n, 1, dtype=bf16, seed=3).abs() + 0.5,
                       randn(1, 1, n, dtype=bf16, seed=4).expand(1, n, n)], backend)


@ports("test_issue1872", "test_issue2755", "test_issue3192")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue1872_issue2755_issue3192_slices_of_full_neg_and_squeeze(backend):
    def definition(fd):
        full = fd.ops.full(shape=ints(fd, 5), fill_value=double(fd, 1.0), dtype=F32)
        fd.add_output(fd.ops.cast(fd.ops.slice(full, start_indices=[0], end_indices=[2], strides=[1]), F16))
        fd.add_output(fd.ops.cast(fd.ops.slice(full, start_indices=[2], end_indices=[5], strides=[1]), F16))
        neg = fd.ops.neg(fd.ops.slice(tensor(fd, [-1]), start_indices=[0], end_indices=[5]))
        fd.add_output(fd.ops.neg(fd.ops.slice(neg, start_indices=[0], end_indices=[2])))
        squeezed = fd.ops.squeeze(fd.define_tensor([1, 1, 2], contiguity=True), [0, 1])
        fd.add_output(fd.ops.slice(squeezed, [1], [2]))

    check(definition, [randn(10), randn(1, 1, 2, seed=1)], backend, rtol=0, atol=0)


@ports("test_issue1953")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue1953_rotary_embedding_backward_pads(backend):
    b, s, h, d = 2, 3, 2, 4  # upstream: 128, 256, 6, 24 (and 2 * d = 48)

    def rotary_grad(fd, t, cos, sin):
        x = fd.ops.reshape(fd.ops.permute(fd.ops.cast(t, F32), dims=[0, 2, 1, 3]), new_shape=ints(fd, b, s, h, d, 2))
        odd, even = (fd.ops.sum(fd.ops.slice(x, [0] * 4 + [k], [b, s, h, d, k + 1], [1] * 5), dims=[4], keepdim=False,
                                dtype=DataType.Null) for k in (1, 0))
        real = fd.ops.cast(fd.ops.add(fd.ops.mul(odd, cos), fd.ops.mul(fd.ops.neg(even), sin)), BF16)
        imag = fd.ops.cast(fd.ops.add(fd.ops.mul(odd, sin), fd.ops.mul(even, cos)), BF16)
        real, imag = (fd.ops.broadcast_in_dim(v, shape=ints(fd, b, s, h, d, 1), broadcast_dims=[0, 1, 2, 3])
                      for v in (real, imag))
        padded = [fd.ops.cast(fd.ops.pad(v, w + [0] * 8, double(fd, 0.0)), F32) for v, w in ((real, [1, 0]), (imag, [0, 1]))]
        return fd.ops.cast(fd.ops.add(*padded), BF16)

    def definition(fd):
        for _ in range(10):
            fd.define_scalar(None, dtype=I64)
        cos, sin = (tensor(fd, [-1] * 4, contiguity=[None, True, None, True], stride_order=[3, 2, 1, 0]) for _ in "cs")
        t12, t13 = (tensor(fd, [-1] * 4, BF16, contiguity=[True] * 4, stride_order=[3, 1, 2, 0]) for _ in "ab")
        fd.add_output(rotary_grad(fd, t13, cos, sin))
        fd.add_output(rotary_grad(fd, t12, cos, sin))

    rope = [strided((b, s, h, d), (0, d, 0, 1), seed=k) for k in (0, 1)]
    grads = [strided((b, h, s, 2 * d), (s * h * 2 * d, 2 * d, h * 2 * d, 1), torch.bfloat16, seed=k) for k in (2, 3)]
    check(definition, [b, s, h, d, 2] * 2 + rope + grads, backend)


@ports("test_issue2275_repro1", "test_unpadded_catop_issue2275_repro1")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue2275_rms_norm_linear_and_unpadded_rotary_cat(backend):
    b, s, hidden, groups, d = 2, 4, 16, 2, 4  # upstream: 2, 4096, 4096, 8, 128 (4 query heads a group)

    def definition(fd):
        w_norm = tensor(fd, [-1, -1, -1], BF16, contiguity=[None, None, True], stride_order=[2, 1, 0])
        x = tensor(fd, [-1, -1, -1], BF16, contiguity=[True] * 3, stride_order=[2, 1, 0])
        cos, sin = (tensor(fd, [-1] * 4, BF16, contiguity=[None, None, True, True], stride_order=[3, 2, 1, 0])
                    for _ in "cs")
        w = tensor(fd, [-1, -1], BF16, contiguity=[True, True], stride_order=[1, 0])
        xf = fd.ops.cast(x, F32)
        ms = fd.ops.broadcast_in_dim(fd.ops.sum(fd.ops.mul(xf, xf), dims=[2], keepdim=False, dtype=DataType.Null),
                                     shape=ints(fd, b, s, 1), broadcast_dims=[0, 1])
        ms = fd.ops.add(fd.ops.mul(ms, fd.ops.reciprocal(double(fd, float(hidden)))), double(fd, 1e-05))
        invstd = fd.ops.broadcast_in_dim(fd.ops.rsqrt(ms), shape=ints(fd, b, s, hidden), broadcast_dims=[0, 1, 2])
        normed = fd.ops.cast(fd.ops.mul(fd.ops.mul(xf, invstd), fd.ops.cast(w_norm, F32)), BF16)
        qkv = fd.ops.permute(fd.ops.reshape(fd.ops.linear(normed, w), new_shape=ints(fd, b, s, groups, 6, d)),
                             dims=[0, 2, 3, 1, 4])
        q = fd.ops.slice(qkv, start_indices=[0] * 5, end_indices=[b, groups, 4, s, d], strides=[1] * 5)
        q = fd.ops.reshape(q, new_shape=ints(fd, b, 4 * groups, s, d))
        q = fd.ops.slice(q, start_indices=[0] * 4, end_indices=[b, 4 * groups, s, d], strides=[1] * 4)
        low, high = (fd.ops.slice(q, [0, 0, 0, lo], [b, 4 * groups, s, hi], [1] * 4) for lo, hi in ((0, d // 2), (d // 2, d)))
        rotated = fd.ops.cat([fd.ops.cast(fd.ops.neg(fd.ops.cast(high, F32)), BF16), low], dim=-1)
        roped = fd.ops.add(fd.ops.mul(fd.ops.cast(q, F32), fd.ops.cast(cos, F32)),
                           fd.ops.mul(fd.ops.cast(rotated, F32), fd.ops.cast(sin, F32)))
        nothing = fd.ops.slice(q, [0] * 4, [b, 4 * groups, s, 0], [1] * 4)
        fd.add_output(fd.ops.cat([fd.ops.cast(roped, BF16), nothing], dim=-1))

    bf16 = torch.bfloat16
    check(definition, [strided((b, s, hidden), (0, 0, 1), bf16), randn(b, s, hidden, dtype=bf16, seed=1),
                       strided((b, 4 * groups, s, d), (0, 0, d, 1), bf16, seed=2),
                       strided((b, 4 * groups, s, d), (0, 0, d, 1), bf16, seed=3),
                       randn(groups * 6 * d, hidden, dtype=bf16, seed=4) / 4], backend)


@ports("test_issue2275_repro2", "test_unpadded_catop_issue2275_repro2")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue2275_sin_plus_cos_of_a_rotary_cat_then_an_empty_cat(backend):
    x = randn(2, 2, 4, 4, dtype=torch.bfloat16)

    def definition(fd):
        t = fd.from_pytorch(x)
        whole = fd.ops.slice(t, start_indices=[0] * 4, end_indices=[2, 2, 4, 4], strides=[1] * 4)
        low, high = (fd.ops.slice(whole, [0, 0, 0, lo], [2, 2, 4, hi], [1] * 4) for lo, hi in ((0, 2), (2, 4)))
        rotated = fd.ops.cat([fd.ops.cast(fd.ops.neg(high), BF16), low], dim=-1)
        out = fd.ops.cast(fd.ops.add(fd.ops.sin(rotated), fd.ops.cos(rotated)), BF16)
        fd.add_output(fd.ops.cat([out, fd.ops.slice(t, [0] * 4, [2, 2, 4, 0], [1] * 4)], dim=-1))

    check(definition, [x], backend)


@ports("test_issue2317", "test_reduction_transpose_sched_issue2317")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue2317_linears_of_a_permuted_reshape(backend):
    xs = [randn(2, 3, 4, 5, dtype=torch.bfloat16), randn(2, 4, 15, dtype=torch.bfloat16, seed=1),
          randn(15, 15, dtype=torch.bfloat16, seed=2) / 4]  # upstream: 16, 25, 128, 64 and 1600

    def definition(fd):
        t0, t1, w = (fd.from_pytorch(x) for x in xs)
        x = fd.ops.reshape(fd.ops.stride_order(fd.ops.permute(t0, dims=[0, 2, 1, 3]), stride_order=[3, 2, 1, 0]),
                           new_shape=fd.ops.shape(t1))
        y = fd.ops.cast(fd.ops.add(fd.ops.linear(x, w), t1), BF16)
        fd.add_output(fd.ops.add(fd.ops.linear(y, w), y))

    check(definition, xs, backend)


@ports("test_issue2354", "test_issue3369")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue2354_issue3369_linears_with_and_without_bias(backend):
    def definition(fd):
        w, x = tensor(fd, [-1, -1], contiguity=[True, True]), tensor(fd, [-1, -1, -1], contiguity=[True] * 3)
        projected = fd.ops.linear(x, w)
        fd.add_output(projected)
        fd.add_output(fd.ops.mul(projected, double(fd, 1.41421)))
        a, b, bias = tensor(fd, [5, 5], contiguity=[True, True]), tensor(fd, [5, 5], contiguity=[True, True]), \
            tensor(fd, [5], contiguity=[True])
        fd.add_output(fd.ops.linear(a, b, bias))

    check(definition, [randn(8, 4), randn(6, 2, 4, seed=1), randn(5, 5, seed=2), randn(5, 5, seed=3), randn(5, seed=4)],
          backend)


@ports("test_issue2395")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue2395_masks_beside_a_slice(backend):
    def definition(fd):
        cond0 = tensor(fd, [-1, -1, -1], DataType.Bool, contiguity=[True, True, None], stride_order=[2, 1, 0])
        values = tensor(fd, [-1, -1, -1], contiguity=[True] * 3, stride_order=[2, 1, 0])
        cond1 = tensor(fd, [-1, -1], DataType.Bool, contiguity=[True, True], stride_order=[1, 0])
        cond1 = fd.ops.broadcast_in_dim(cond1, shape=[4, 4, 8], broadcast_dims=[0, 1])
        fd.add_output(fd.ops.slice(values, start_indices=[0, 0, 4], end_indices=[4, 4, 8], strides=[1, 1, 1]))
        zero = double(fd, 0.0)
        fd.add_output(fd.ops.where(cond0, zero, fd.ops.where(cond1, zero, values)))

    bools = torch.randint(0, 2, (16,), generator=torch.Generator().manual_seed(0)).bool()
    check(definition, [bools.as_strided((4, 4, 8), (4, 1, 0)), strided((4, 4, 8), (32, 8, 1)),
                       bools.flip(0).as_strided((4, 4), (4, 1))], backend, rtol=0, atol=0)


@ports("test_issue2532")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue2532_matmul_of_broadcast_dims_beside_a_sum(backend):
    def definition(fd):
        t0 = tensor(fd, [-1, -1, 1], contiguity=[True, None, True], stride_order=[2, 0, 1])
        t1 = tensor(fd, [-1, 1, -1], contiguity=[True, None, True], stride_order=[2, 1, 0])
        fd.add_output(fd.ops.sum(t1, dims=[0, 1], keepdim=False, dtype=DataType.Null))
        fd.add_output(fd.ops.sum(fd.ops.matmul(t0, t1), dims=[0], keepdim=False, dtype=DataType.Null))

    check(definition, [strided((2, 8, 1), (8, 1, 8)), strided((2, 1, 4), (4, 4, 1), seed=1)], backend)


@ports("test_issue2545", "test_remove_empty_issue_2545")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue2545_cats_with_an_empty_tensor_used_twice(backend):
    def definition(fd):
        t0, empty = (tensor(fd, [-1], I64, contiguity=[True], stride_order=[0]) for _ in "ab")
        wrapped = fd.ops.add(fd.ops.add(t0, fd.ops.where(fd.ops.lt(t0, ints(fd, 0)[0]), *ints(fd, 5, 0))), ints(fd, 0)[0])
        first = fd.ops.cat([empty, wrapped], dim=0)
        second = fd.ops.cat([empty, fd.ops.add(first, ints(fd, 0)[0])], dim=0)
        fd.add_output(fd.ops.add(first, ints(fd, 10)[0]))
        fd.add_output(fd.ops.cat([second, fd.ops.add(first, ints(fd, 5)[0])], dim=0))

    check(definition, [torch.tensor([-3, 4]), torch.zeros(0, dtype=torch.int64)], backend)


@ports("test_issue2549", "test_fix_2549")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue2549_divide_by_a_broadcast_column(backend):
    a, b = torch.ones(4, 1, dtype=torch.double) * 2, randn(4, 4, dtype=torch.float64)

    def definition(fd):
        t0, t1 = (fd.define_tensor(sizes=x.shape, strides=x.stride(), dtype=DataType.Double) for x in (a, b))
        fd.add_output(fd.ops.div(t1, fd.ops.broadcast_in_dim(t0, shape=[4, 4], broadcast_dims=[0, 1])))

    check(definition, [a, b], backend)


@ports("test_issue2664_repro1", "test_issue2664_repro2", "test_issue2664_repro3", "test_issue2664_repro4")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("repro", [1, 2, 3, 4])
def test_issue2664_outputs_written_into_0d_and_column_inputs(backend, repro):
    n = 16  # upstream: 4194304

    def definition(fd):
        v = tensor(fd, [-1], contiguity=[True], stride_order=[0]) if repro < 4 else \
            tensor(fd, [-1, 1], contiguity=[True, None], stride_order=[1, 0])
        if repro == 4:
            t = tensor(fd, [-1, -1], contiguity=[True, True], stride_order=[1, 0])
            fd.add_output(fd.ops.add(t, v))
            fd.add_output(fd.ops.neg(v), v)
            return
        s = tensor(fd, [], contiguity=[])
        if repro == 1:
            plus = fd.ops.add(s, double(fd, 1.0))
            fd.add_output(plus, s)
            fd.add_output(fd.ops.mul(v, fd.ops.broadcast_in_dim(plus, shape=ints(fd, n), broadcast_dims=[])))
        elif repro == 2:
            wide = fd.ops.broadcast_in_dim(s, shape=ints(fd, n), broadcast_dims=[])
            fd.add_output(fd.ops.sum(wide, dims=[0], keepdim=False), s)
            fd.add_output(fd.ops.mul(v, wide))
            fd.add_output(fd.ops.add(v, wide))
        else:
            other = tensor(fd, [], contiguity=[])
            total = fd.ops.sum(fd.ops.add(v, fd.ops.broadcast_in_dim(s, shape=fd.ops.shape(v), broadcast_dims=[])),
                               dims=[0], keepdim=False)
            fd.add_output(total, other)
            fd.add_output(fd.ops.add(other, double(fd, 1.0)), s)

    inputs = {1: [randn(n), torch.tensor(0.5)], 2: [randn(n), torch.tensor(0.5)],
              3: [randn(n), torch.tensor(0.5), torch.tensor(-1.0)], 4: [randn(8, 1), randn(8, 4, seed=1)]}[repro]
    check(definition, lambda: [x.clone() for x in inputs], backend)


@ports("test_issue3227")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue3227_one_broadcast_expanded_two_ways(backend):
    def definition(fd):
        t0 = tensor(fd, [1, 4, 2, 3], contiguity=[None, True, True, True], stride_order=[3, 2, 1, 0])
        t1 = tensor(fd, [1, 5, 2, 3], contiguity=[None, True, True, True], stride_order=[3, 2, 1, 0])
        t2 = tensor(fd, [1, 2, 3], contiguity=[None, True, True], stride_order=[2, 1, 0])
        b = fd.ops.broadcast_in_dim(t2, shape=ints(fd, 1, 1, 2, 3), broadcast_dims=[1, 2, 3])
        fd.add_output(fd.ops.add(fd.ops.broadcast_in_dim(b, shape=ints(fd, 1, 4, 2, 3), broadcast_dims=[0, 1, 2, 3]), t0))
        fd.add_output(fd.ops.add(fd.ops.broadcast_in_dim(b, shape=ints(fd, 1, 5, 2, 3), broadcast_dims=[0, 1, 2, 3]), t1))

    check(definition, [randn(1, 4, 2, 3), randn(1, 5, 2, 3, seed=1), randn(1, 2, 3, seed=2)], backend)


@ports("test_issue3292")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue3292_rotary_cats_of_a_permuted_reshape(backend):
    d = 8  # upstream: 64

    def definition(fd):
        t = tensor(fd, [5, 5, 9 * d], contiguity=[True] * 3, stride_order=[2, 1, 0])
        x = fd.ops.permute(fd.ops.reshape(t, new_shape=[5, 5, 1, 9, d]), dims=[0, 2, 3, 1, 4])
        x = fd.ops.slice(x, start_indices=[0] * 5, end_indices=[5, 1, 7, 5, d], strides=[1] * 5, manual_normalization=0)
        x = fd.ops.reshape(x, new_shape=[5, 7, 5, d])

        def rotated():
            low, high = (fd.ops.slice(x, [0, 0, 0, lo], [5, 7, 5, hi], [1] * 4, manual_normalization=0)
                         for lo, hi in ((0, d // 2), (d // 2, d)))
            return fd.ops.cat([fd.ops.neg(high), low], dim=-1, manual_padding=0)

        first = rotated()
        total = fd.ops.add(fd.ops.mul(x, x), fd.ops.mul(first, first))
        second = rotated()
        fd.ops.mul(second, second)  # computed upstream, not an output
        empty = fd.ops.slice(x, [0] * 4, [5, 7, 5, 0], [1] * 4, manual_normalization=0)
        fd.add_output(fd.ops.cat([total, empty], dim=-1, manual_padding=0))

    check(definition, [randn(5, 5, 9 * d)], backend)
