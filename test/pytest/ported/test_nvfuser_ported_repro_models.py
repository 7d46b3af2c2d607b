"""Ports of NVIDIA/Fuser's normalization repros (RMSNorm / LayerNorm / GroupNorm backward as
thunder emits them, the "ws_tma_normalization" family) and of the legacy frontend's model tests
(layer norm, RMS norm, nanoGPT attention): shrunk, checked against torch by nvfuser_ported.check.
See test_nvfuser_ported_frontend.py."""

from __future__ import annotations

import pytest
import torch

from fuser import DataType
from nvfuser_ported import BACKENDS, check, double, ports, randn, strided, tensor

F32, BF16, I64 = DataType.Float, DataType.BFloat16, DataType.Int
NULL = DataType.Null
bf16 = torch.bfloat16


def rms_norm_backward(fd, w, g, xf, rstd, lead, d, plus_one=False):
    """RMSNorm backward as thunder emits it: (dx, x * rstd * g), for rows `lead` ([1, R] or
    [B, R]) of `d` elements; `plus_one`: the weight is stored as w - 1."""
    ops, full = fd.ops, [*lead, d]
    wf = ops.cast(w, F32)
    prod = ops.mul(ops.broadcast_in_dim(ops.add(double(fd, 1.0), wf) if plus_one else wf, shape=full,
                                        broadcast_dims=[2]), g)
    row_dims, kept = ([0, 2], [1]) if lead[0] == 1 else ([2], [0, 1])
    s = ops.broadcast_in_dim(ops.sum(ops.mul(xf, prod), dims=row_dims, keepdim=False, dtype=NULL), shape=[*lead, 1],
                             broadcast_dims=kept)
    dr = ops.mul(ops.mul(ops.mul(double(fd, -0.5), s), ops.pow(rstd, double(fd, 3.0))),
                 ops.reciprocal(double(fd, float(d))))
    dr = ops.sum(dr, dims=row_dims, keepdim=False, dtype=NULL)
    if lead[0] == 1:
        dr = ops.broadcast_in_dim(ops.broadcast_in_dim(dr, shape=lead, broadcast_dims=[1]), shape=[*lead, 1],
                                  broadcast_dims=[0, 1])
    else:
        dr = ops.broadcast_in_dim(dr, shape=[*lead, 1], broadcast_dims=[0, 1])
    dr, rstd_b = (ops.broadcast_in_dim(v, shape=full, broadcast_dims=[0, 1, 2]) for v in (dr, rstd))
    by_x = ops.mul(xf, dr)
    return ops.add(ops.add(ops.mul(rstd_b, prod), by_x), by_x), ops.mul(ops.mul(xf, rstd_b), g)


@ports("test_ws_tma_normalization1", "test_ws_tma_normalization3", "test_ws_tma_normalization4",
       "test_ws_tma_normalization6", "test_register_aliasing_bug")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("variant", ["ws1", "ws3", "ws4", "ws6", "register_aliasing"])
def test_rms_norm_backward_variants(backend, variant):
    """The upstream fusions differ in the weight (w or 1 + w), the gradient (one, a sum of two,
    reshaped from 2-D), rows [1, R] or [B, R], a residual, a final 0-d scale and their outputs."""
    b, r, d = (3, 4, 8) if variant == "ws4" else (1, 4, 8)  # upstream: R = 2048 .. 16384, D = 2048 .. 4096
    lead = [b, r]

    def definition(fd):
        ops = fd.ops
        if variant == "register_aliasing":
            w, g, x, rstd = tensor(fd, [d]), tensor(fd, [1, r, d]), tensor(fd, [1, r, d]), tensor(fd, [1, r, 1])
            dx, dw = rms_norm_backward(fd, w, g, x, rstd, lead, d)
            fd.add_output(dx)
            fd.add_output(ops.reshape(dx, new_shape=[r, d]))
            fd.add_output(ops.sum(dw, dims=[0, 1], keepdim=False, dtype=NULL))
            return
        if variant in ("ws1", "ws3", "ws4"):
            grads = [tensor(fd, [b * r, d], BF16) for _ in range(2 if variant == "ws1" else 1)]
        w = tensor(fd, [d], BF16)
        if variant == "ws6":
            grads = [tensor(fd, [1, r, d], BF16)]
        x = tensor(fd, [b, r, d], BF16)
        rstd = tensor(fd, [b, r, 1])
        residual = tensor(fd, [b, r, d], BF16) if variant != "ws4" else None
        scale = tensor(fd, []) if variant == "ws6" else None
        g = [ops.cast(ops.reshape(t, new_shape=[b, r, d]) if variant != "ws6" else t, F32) for t in grads]
        g = ops.add(g[1], g[0]) if variant == "ws1" else g[0]
        dx, dw = rms_norm_backward(fd, w, g, ops.cast(x, F32), rstd, lead, d, plus_one=variant in ("ws1", "ws6"))
        if residual is not None:
            dx = ops.add(ops.cast(residual, F32), dx)
        dw = ops.cast(ops.sum(dw, dims=[0, 1], keepdim=False, dtype=NULL), BF16)
        if variant == "ws6":
            fd.add_output(dw)
            fd.add_output(ops.cast(ops.mul(scale, dx), BF16))
        elif variant == "ws3":
            fd.add_output(dw)
            fd.add_output(ops.cast(dx, BF16))
        else:
            dx = ops.cast(dx, BF16)
            flat = ops.reshape(dx, new_shape=[b * r, d])
            for out in (ops.permute(flat, dims=[1, 0]), flat, dx, dw):
                fd.add_output(out)

    if variant == "register_aliasing":
        inputs = [randn(d), randn(1, r, d, seed=1), randn(1, r, d, seed=2), randn(1, r, 1, seed=3).abs() + 0.5]
    else:
        grads = [randn(b * r, d, dtype=bf16, seed=s) for s in range(2 if variant == "ws1" else 1)]
        if variant == "ws6":
            grads = [randn(1, r, d, dtype=bf16, seed=0)]
        inputs = ([] if variant == "ws6" else grads) + [randn(d, dtype=bf16, seed=5)] + \
            (grads if variant == "ws6" else []) + [randn(b, r, d, dtype=bf16, seed=6), randn(b, r, 1, seed=7).abs() + 0.5]
        inputs += [] if variant == "ws4" else [randn(b, r, d, dtype=bf16, seed=8)]
        inputs += [torch.tensor(0.5)] if variant == "ws6" else []
    check(definition, inputs, backend, rtol=1.6e-2, atol=1e-2)


@ports("test_ws_tma_normalization2")
@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_norm_backward_with_2d_gradient(backend):
    b, r, d = 2, 3, 4  # upstream: 288, 512, 128

    def definition(fd):
        ops, full = fd.ops, [b, r, d]
        grad2d, w, mean = tensor(fd, [b * r, d], BF16), tensor(fd, [d], BF16), tensor(fd, [b, r])
        x, rstd = tensor(fd, [b, r, d], BF16), tensor(fd, [b, r, 1])

        def rows(v):
            return ops.broadcast_in_dim(v, shape=[b, r, 1], broadcast_dims=[0, 1])

        def wide(v):
            return ops.broadcast_in_dim(v, shape=full, broadcast_dims=[0, 1, 2])

        grad = ops.reshape(grad2d, new_shape=full)
        g, wf, xf = ops.cast(grad, F32), ops.cast(ops.broadcast_in_dim(w, shape=full, broadcast_dims=[2]), F32), \
            ops.cast(x, F32)
        wg = ops.mul(wf, g)
        xc = ops.sub(xf, wide(rows(mean)))
        s = rows(ops.sum(ops.mul(xc, wg), dims=[2], keepdim=False, dtype=NULL))
        rstd_b = wide(rstd)
        by_rstd = ops.mul(rstd_b, wg)
        dvar = ops.sum(ops.mul(ops.mul(double(fd, -0.5), s), ops.pow(rstd, double(fd, 3.0))), dims=[2], keepdim=False,
                       dtype=NULL)
        dmean = ops.sum(ops.neg(by_rstd), dims=[2], keepdim=False, dtype=NULL)
        dmean = wide(rows(ops.sum(rows(dmean), dims=[2], keepdim=False, dtype=NULL)))
        by_var = ops.mul(ops.mul(double(fd, 2.0), wide(rows(dvar))), ops.sub(xf, wide(rows(mean))))
        dx = ops.add(by_rstd, ops.add(ops.mul(double(fd, 1.0 / d), dmean), ops.mul(by_var, ops.reciprocal(double(fd, float(d))))))
        dx_bf = ops.cast(dx, BF16)
        flat = ops.reshape(dx_bf, new_shape=[b * r, d])
        fd.add_output(ops.permute(flat, dims=[1, 0]))
        fd.add_output(ops.cast(ops.sum(dx, dims=[0, 1], keepdim=False, dtype=NULL), BF16))
        fd.add_output(flat)
        fd.add_output(dx_bf)
        fd.add_output(ops.cast(ops.sum(ops.mul(ops.mul(xc, rstd_b), g), dims=[0, 1], keepdim=False, dtype=NULL), BF16))
        fd.add_output(ops.cast(ops.sum(ops.cast(grad, F32), dims=[0, 1], keepdim=False, dtype=NULL), BF16))

    check(definition, [randn(b * r, d, dtype=bf16), randn(d, dtype=bf16, seed=1), randn(b, r, seed=2),
                       randn(b, r, d, dtype=bf16, seed=3), randn(b, r, 1, seed=4).abs() + 0.5], backend,
          rtol=1.6e-2, atol=1e-2)


@ports("test_ws_tma_normalization5")
@pytest.mark.parametrize("backend", BACKENDS)
def test_two_layer_norm_backwards_sharing_an_input(backend):
    r, d = 3, 4  # upstream: 16384, 2560

    def definition(fd):
        ops, full = fd.ops, [1, r, d]
        grad_a, w_a, mean = tensor(fd, [r, d], BF16), tensor(fd, [d], BF16), tensor(fd, [1, r])
        x = tensor(fd, [1, r, d], BF16, contiguity=[True, None, True], stride_order=[1, 2, 0])
        rstd, grad_b, w_b = tensor(fd, [1, r, 1]), tensor(fd, [r, d], BF16), tensor(fd, [d], BF16)
        residual = tensor(fd, [1, r, d], BF16)

        def rows(v):
            return ops.broadcast_in_dim(v, shape=[1, r, 1], broadcast_dims=[1])

        def wide(v):
            return ops.broadcast_in_dim(v, shape=full, broadcast_dims=[0, 1, 2])

        def per_row(v):
            return ops.sum(v, dims=[0, 2], keepdim=False, dtype=NULL)

        def back_to_rows(v):  # [r] -> [1, r] -> [1, r, 1]
            return ops.broadcast_in_dim(ops.broadcast_in_dim(v, shape=[1, r], broadcast_dims=[1]), shape=[1, r, 1],
                                        broadcast_dims=[0, 1])

        ga, gb = (ops.reshape(g, new_shape=full) for g in (grad_a, grad_b))
        ga_f, gb_f = ops.cast(ga, F32), ops.cast(gb, F32)
        wa, wb = (ops.cast(ops.broadcast_in_dim(w, shape=full, broadcast_dims=[2]), F32) for w in (w_a, w_b))
        xf, rstd_b = ops.cast(x, F32), wide(rstd)
        xc = ops.sub(xf, wide(ops.broadcast_in_dim(mean, shape=[1, r, 1], broadcast_dims=[0, 1])))
        wg_a, wg_b = ops.mul(wa, ga_f), ops.mul(wb, gb_f)
        cube = ops.pow(rstd, double(fd, 3.0))
        dvar_a = per_row(ops.mul(ops.mul(double(fd, -0.5), rows(per_row(ops.mul(xc, wg_a)))), cube))
        by_rstd_a = ops.mul(rstd_b, wg_a)
        dmean_a = rows(per_row(ops.neg(by_rstd_a)))
        dvar_b = ops.mul(ops.mul(double(fd, -0.5), rows(per_row(ops.mul(xc, wg_b)))), cube)
        by_rstd_b = ops.mul(rstd_b, wg_b)
        x_minus = ops.sub(xf, wide(ops.broadcast_in_dim(mean, shape=[1, r, 1], broadcast_dims=[0, 1])))

        def dx_terms(dvar_rows, dmean_rows):
            dmean_wide = wide(back_to_rows(per_row(dmean_rows)))
            by_var = ops.mul(ops.mul(double(fd, 2.0), wide(dvar_rows)), x_minus)
            return ops.add(ops.mul(double(fd, 1.0 / d), dmean_wide), ops.mul(by_var, ops.reciprocal(double(fd, float(d)))))

        terms_a = dx_terms(back_to_rows(dvar_a), dmean_a)
        dvar_b = back_to_rows(per_row(dvar_b))
        dmean_b = rows(per_row(ops.neg(by_rstd_b)))
        terms_b = dx_terms(dvar_b, dmean_b)
        dx = ops.add(ops.add(ops.add(ops.add(ops.cast(residual, F32), by_rstd_a), terms_a), by_rstd_b), terms_b)
        xr = ops.mul(xc, rstd_b)
        for v in (ops.cast(ga, F32), ops.mul(xr, ga_f), ops.cast(gb, F32), ops.mul(xr, gb_f)):
            fd.add_output(ops.cast(ops.sum(v, dims=[0, 1], keepdim=False, dtype=NULL), BF16))
        fd.add_output(ops.cast(dx, BF16))

    check(definition, [randn(r, d, dtype=bf16), randn(d, dtype=bf16, seed=1), randn(1, r, seed=2),
                       randn(1, r, d, dtype=bf16, seed=3), randn(1, r, 1, seed=4).abs() + 0.5,
                       randn(r, d, dtype=bf16, seed=5), randn(d, dtype=bf16, seed=6), randn(1, r, d, dtype=bf16, seed=7)],
          backend, rtol=1.6e-2, atol=1e-2)


@ports("test_shared_memory_usage")
@pytest.mark.parametrize("backend", BACKENDS)
def test_rms_norm_backward_with_dropout_and_symbolic_shapes(backend):
    def definition(fd):
        ops = fd.ops
        t0, t1, keep, rms = tensor(fd, [-1, -1], BF16), tensor(fd, [-1, -1], BF16), tensor(fd, [-1, -1], DataType.Bool), \
            tensor(fd, [-1, 1], contiguity=[True, None])
        grad, w = tensor(fd, [-1, -1], BF16), tensor(fd, [-1], BF16)
        mask, x0, g, wf = ops.cast(keep, F32), ops.cast(t0, F32), ops.cast(grad, F32), ops.cast(w, F32)
        scale = double(fd, 1.25)
        x = ops.add(ops.cast(t1, F32), ops.mul(ops.mul(x0, mask), scale))
        shape = ops.shape(x0)
        rms_b = ops.broadcast_in_dim(rms, shape=shape, broadcast_dims=[0, 1])
        inv = ops.reciprocal(rms_b)
        gw = ops.mul(g, ops.broadcast_in_dim(wf, shape=shape, broadcast_dims=[1]))
        dw = ops.sum(ops.mul(g, ops.mul(x, inv)), dims=[0], keepdim=False, dtype=NULL)
        two = double(fd, 2.0)
        drms = ops.sum(ops.mul(ops.mul(ops.neg(gw), x), ops.reciprocal(ops.pow(rms_b, two))), dims=[1], keepdim=False,
                       dtype=NULL)
        rows = ops.size(x0, dim=0)
        dms = ops.mul(ops.mul(ops.broadcast_in_dim(drms, shape=[rows, 1], broadcast_dims=[0]),
                              ops.reciprocal(ops.mul(two, rms))), ops.reciprocal(ops.size(x0, dim=1)))
        dms = ops.broadcast_in_dim(ops.broadcast_in_dim(ops.sum(dms, dims=[1], keepdim=False, dtype=NULL),
                                                        shape=[rows, 1], broadcast_dims=[0]),
                                   shape=shape, broadcast_dims=[0, 1])
        dx = ops.add(ops.mul(gw, inv), ops.mul(ops.mul(dms, two), x))
        fd.add_output(ops.cast(ops.mul(ops.mul(dx, scale), mask), BF16))
        fd.add_output(ops.cast(dx, BF16))
        fd.add_output(ops.cast(dw, BF16))

    n, h = 4, 10  # upstream: 16, 24578
    check(definition, [randn(n, h, dtype=bf16), randn(n, h, dtype=bf16, seed=1), randn(n, h, dtype=torch.bool, seed=2),
                       randn(n, 1, seed=3).abs() + 0.5, randn(n, h, dtype=bf16, seed=4), randn(h, dtype=bf16, seed=5)],
          backend, rtol=1.6e-2, atol=1e-2)


@ports("test_issue4459")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue4459_group_norm_and_silu_backward(backend):
    b, g, cg, hw = 2, 2, 3, 4  # upstream: 4, 32, 10, 64
    c = g * cg

    def definition(fd):
        ops = fd.ops
        mean = tensor(fd, [b, g], contiguity=[True, True], stride_order=[0, 1])
        rstd = tensor(fd, [b, g, 1, 1, 1], contiguity=[True, True, None, None, None])
        x, w, bias, grad = tensor(fd, [b, g, cg, hw, hw]), tensor(fd, [c]), tensor(fd, [c]), tensor(fd, [b, c, hw + 2, hw + 2])
        full5, full4 = [b, g, cg, hw, hw], [b, c, hw, hw]

        def to5(v):
            return ops.broadcast_in_dim(ops.broadcast_in_dim(v, shape=[b, g, 1, 1, 1], broadcast_dims=[0, 1]),
                                        shape=full5, broadcast_dims=[0, 1, 2, 3, 4])

        rstd5 = ops.broadcast_in_dim(rstd, shape=full5, broadcast_dims=[0, 1, 2, 3, 4])
        xc = ops.sub(x, to5(mean))
        w4 = ops.broadcast_in_dim(ops.reshape(w, new_shape=[1, c, 1, 1]), shape=full4, broadcast_dims=[0, 1, 2, 3])
        b4 = ops.broadcast_in_dim(ops.reshape(bias, new_shape=[1, c, 1, 1]), shape=full4, broadcast_dims=[0, 1, 2, 3])
        normed = ops.reshape(ops.mul(xc, rstd5), new_shape=full4)
        y = ops.add(ops.mul(normed, w4), b4)
        e = ops.exp(ops.neg(y))
        inner = ops.pad(grad, [-1, -1, -1, -1, 0, 0, 0, 0], double(fd, 0.0))  # negative widths crop
        sig = ops.reciprocal(ops.add(double(fd, 1.0), e))
        dsilu = ops.add(ops.mul(sig, inner), ops.neg(ops.mul(ops.mul(ops.mul(ops.neg(ops.mul(y, inner)), sig), sig), e)))
        dnormed = ops.reshape(ops.mul(w4, dsilu), new_shape=full5)
        drstd = ops.sum(ops.mul(xc, dnormed), dims=[2, 3, 4], keepdim=False, dtype=NULL)
        drstd = ops.mul(ops.mul(double(fd, -0.5), ops.broadcast_in_dim(drstd, shape=[b, g, 1, 1, 1], broadcast_dims=[0, 1])),
                        ops.pow(rstd, double(fd, 3.0)))
        by_rstd = ops.mul(rstd5, dnormed)
        dvar = ops.sum(drstd, dims=[2, 3, 4], keepdim=False, dtype=NULL)
        dmean = ops.sum(ops.broadcast_in_dim(ops.sum(ops.neg(by_rstd), dims=[2, 3, 4], keepdim=False, dtype=NULL),
                                             shape=[b, g, 1, 1, 1], broadcast_dims=[0, 1]),
                        dims=[2, 3, 4], keepdim=False, dtype=NULL)
        by_var = ops.mul(ops.mul(ops.mul(double(fd, 2.0), to5(dvar)), ops.sub(x, to5(mean))),
                         ops.reciprocal(double(fd, float(cg * hw * hw))))
        dx = ops.add(by_rstd, ops.add(ops.mul(double(fd, 1.0 / (cg * hw * hw)), to5(dmean)), by_var))
        dx4 = ops.reshape(dx, new_shape=full4)
        per_pixel = ops.reshape(ops.permute(ops.reshape(dx4, new_shape=[1, *full4]), dims=[0, 3, 4, 1, 2]),
                                new_shape=[1, 1, hw * hw, b, c])
        per_pixel = ops.sum(per_pixel, dims=[0, 1], keepdim=False, dtype=NULL)
        flat = ops.reshape(per_pixel, new_shape=[hw * hw * b, c])
        dw = ops.broadcast_in_dim(ops.sum(ops.mul(normed, dsilu), dims=[0, 2, 3], keepdim=False, dtype=NULL),
                                  shape=[1, c, 1, 1], broadcast_dims=[1])
        db = ops.broadcast_in_dim(ops.sum(dsilu, dims=[0, 2, 3], keepdim=False, dtype=NULL), shape=[1, c, 1, 1],
                                  broadcast_dims=[1])
        for out in (dx4, flat, ops.permute(flat, dims=[1, 0]), ops.sum(per_pixel, dims=[0, 1], keepdim=False, dtype=NULL),
                    ops.reshape(dw, new_shape=[c]), ops.reshape(db, new_shape=[c])):
            fd.add_output(out)

    check(definition, [strided((b, g), (1, b)), randn(b, g, 1, 1, 1, seed=1).abs() + 0.5, randn(b, g, cg, hw, hw, seed=2),
                       randn(c, seed=3), randn(c, seed=4), randn(b, c, hw + 2, hw + 2, seed=5)], backend, rtol=1e-4, atol=1e-4)


@ports("test_prim_layer_norm_fwd", "test_prim_rms_norm_fwd")
@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_norm_and_rms_norm_from_primitives(backend):
    shape, eps = [2, 3, 8], 1e-12  # upstream: 64, 128, 1024

    def definition(fd, via_var_mean):
        ops = fd.ops
        x, w, b = tensor(fd, [-1, -1, -1], contiguity=[True] * 3), tensor(fd, [-1], contiguity=[True]), \
            tensor(fd, [-1], contiguity=[True])
        n = fd.define_scalar(shape[2])
        if via_var_mean:
            var, mean = ops.var_mean(x, dims=[2], correction=0, keepdim=True)
            diff = ops.sub(x, mean)
        else:
            mean = ops.div(ops.sum(x, dims=[2], keepdim=True), n)
            diff = ops.sub(x, mean)
            var = ops.div(ops.sum(ops.mul(diff, diff), dims=[2], keepdim=True), n)
        invstd = ops.rsqrt(ops.add(var, fd.define_scalar(eps)))
        scaled = ops.mul(ops.mul(diff, invstd), ops.broadcast_in_dim(w, shape=shape, broadcast_dims=[2]))
        for out in (ops.add(scaled, ops.broadcast_in_dim(b, shape=shape, broadcast_dims=[2])), mean, invstd):
            fd.add_output(out)
        ms = ops.div(ops.sum(ops.mul(x, x), dims=[2], keepdim=True), n)  # RMS norm of the same input
        rms_invstd = ops.rsqrt(ops.add(ms, fd.define_scalar(eps)))
        fd.add_output(ops.mul(ops.mul(x, rms_invstd), ops.broadcast_in_dim(w, shape=shape, broadcast_dims=[2])))
        fd.add_output(rms_invstd)

    inputs = [randn(*shape), randn(shape[2], seed=1), randn(shape[2], seed=2)]
    for via_var_mean in (False, True):
        _, outs = check(lambda fd: definition(fd, via_var_mean), inputs, backend, rtol=1e-4, atol=1e-4)
        x, w, b = inputs
        mean = x.mean(2, keepdim=True)
        torch.testing.assert_close(outs[0], w * (x - mean) / torch.sqrt(((x - mean) ** 2).mean(2, keepdim=True) + eps) + b,
                                   rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(outs[3], w * x / torch.sqrt((x * x).mean(2, keepdim=True) + eps), rtol=1e-4, atol=1e-4)


@ports("test_nanogpt_mha_dpa")
@pytest.mark.parametrize("backend", BACKENDS)
def test_nanogpt_masked_softmax_with_zero_dropout(backend):
    b, h, s = 2, 2, 4  # upstream: 16, 16, 128 (of a 1024 bias)

    def definition(fd):
        ops = fd.ops
        acts, bias = tensor(fd, [-1] * 4, contiguity=[True] * 4), tensor(fd, [1, 1, -1, -1], contiguity=[None, None, True, True])
        att = ops.mul(acts, double(fd, 0.125))
        causal = ops.eq(double(fd, 0.0), ops.slice(bias, start_indices=[0] * 4, end_indices=[1, 1, s, s], strides=[1] * 4))
        att = ops.where(ops.broadcast_in_dim(causal, shape=[b, h, s, s], broadcast_dims=[0, 1, 2, 3]),
                        double(fd, float("-inf")), att)

        def keep(v):  # [b, h, s] -> [b, h, s, 1] -> [b, h, s, s]
            return ops.broadcast_in_dim(ops.broadcast_in_dim(v, shape=[b, h, s, 1], broadcast_dims=[0, 1, 2]),
                                        shape=[b, h, s, s], broadcast_dims=[0, 1, 2, 3])

        e = ops.exp(ops.sub(att, keep(ops.max(att, dims=[3], keepdim=False, dtype=DataType.Null))))
        probs = ops.div(e, keep(ops.sum(e, dims=[3], keepdim=False, dtype=DataType.Null)))
        u = ops.uniform(double(fd, 0.0), double(fd, 1.0), shape=[fd.define_scalar(v, dtype=I64) for v in (b, h, s, s)],
                        dtype=F32)
        dropped = ops.mul(probs, ops.cast(ops.lt(u, double(fd, 1.0)), F32))  # p = 0: every element kept
        fd.add_output(ops.mul(dropped, double(fd, 1.0)))

    acts, bias = randn(b, h, s, s), torch.tril(torch.ones(8, 8)).reshape(1, 1, 8, 8)
    _, (out,) = check(definition, [acts, bias], backend)
    want = torch.softmax((acts * 0.125).masked_fill(bias[:, :, :s, :s] == 0, float("-inf")), dim=-1)
    torch.testing.assert_close(out, want)


@ports("test_nanogpt_split_mha_linears")
@pytest.mark.parametrize("backend", BACKENDS)
def test_nanogpt_qkv_split_into_heads(backend):
    x = randn(2, 3, 12)  # upstream: 16, 128, 3072 (16 heads of 64)

    def definition(fd, to_heads):
        t = fd.from_pytorch(x)
        for k in range(3):
            part = fd.ops.slice(t, [0, 0, 4 * k], [2, 3, 4 * (k + 1)], [1, 1, 1])
            fd.add_output(fd.ops.permute(fd.ops.reshape(part, [2, 3, 2, 2]), [0, 2, 1, 3]) if to_heads else part)

    for to_heads in (True, False):
        _, outs = check(lambda fd: definition(fd, to_heads), [x], backend)
        for out, part in zip(outs, x.split(4, dim=2)):
            torch.testing.assert_close(out, part.view(2, 3, 2, 2).transpose(1, 2) if to_heads else part)
