"""Ports of NVIDIA/Fuser's attention-block repros (rotary embeddings, grouped-query heads, masks,
MoE linears) from tests/python/direct/test_repro.py and the legacy frontend file: shrunk, checked
against torch by nvfuser_ported.check. See test_nvfuser_ported_frontend.py."""

from __future__ import annotations

import pytest
import torch

from fuser import DataType, FusionDefinition
from nvfuser_ported import BACKENDS, check, double, ports, randn, run_torch, strided, tensor

F32, BF16, F16, I64 = DataType.Float, DataType.BFloat16, DataType.Half, DataType.Int
NULL = DataType.Null
bf16 = torch.bfloat16


def halves(fd, x, lead, d):
    """x[..., :d/2] and x[..., d/2:] of an x shaped lead + [d]."""
    n = len(lead) + 1
    return [fd.ops.slice(x, [0] * (n - 1) + [lo], [*lead, hi], [1] * n, manual_normalization=0)
            for lo, hi in ((0, d // 2), (d // 2, d))]


def rotate_half(fd, x, lead, d, via=None):
    """cat([-x2, x1]); `via` (BF16) rounds the negation there first, as thunder's traces do."""
    low, high = halves(fd, x, lead, d)
    neg = fd.ops.neg(fd.ops.cast(high, F32) if via else high)
    return fd.ops.cat([fd.ops.cast(neg, via) if via else neg, low], dim=-1, manual_padding=0)


@ports("test_issue4444")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue4444_rotary_backward_by_pads_into_grouped_heads(backend):
    groups, per_group, s, d = 2, 2, 3, 4  # upstream: 8, 8, 16384, 128
    h = groups * per_group

    def definition(fd):
        ops, full = fd.ops, [1, h, s, d]
        t0 = tensor(fd, full, BF16, contiguity=[None, True, True, True])
        cos, sin = tensor(fd, [s, d], contiguity=[True, True]), tensor(fd, [s, d], contiguity=[True, True])
        t3, t4 = (tensor(fd, full, BF16, contiguity=[None, True, True, True]) for _ in "ab")
        a = ops.cast(ops.slice(t0, [0] * 4, full, [1] * 4, manual_normalization=0), F32)
        cos_b, sin_b = (ops.broadcast_in_dim(v, shape=full, broadcast_dims=[2, 3]) for v in (cos, sin))
        a_cos = ops.cast(ops.mul(cos_b, a), BF16)
        empty = ops.cast(ops.pad(ops.full(shape=[1, h, s, 0], fill_value=fd.define_scalar(0, dtype=I64), dtype=BF16),
                                 [0, d, 0, 0, 0, 0, 0, 0], double(fd, 0.0)), F32)
        c = ops.cast(ops.slice(t3, [0] * 4, full, [1] * 4, manual_normalization=0), F32)
        c_cos = ops.cast(ops.mul(cos_b, c), BF16)

        def pad_left(v):
            return ops.cast(ops.pad(v, [d // 2, 0, 0, 0, 0, 0, 0, 0], double(fd, 0.0)), F32)

        def pad_right(v):
            return ops.cast(ops.pad(v, [0, d // 2, 0, 0, 0, 0, 0, 0], double(fd, 0.0)), F32)

        a_low, a_high = halves(fd, a_cos, [1, h, s], d)
        c_low, c_high = halves(fd, c_cos, [1, h, s], d)
        da = ops.add(ops.add(ops.add(empty, ops.mul(sin_b, a)), pad_left(ops.cast(ops.neg(ops.cast(a_low, F32)), BF16))),
                     pad_right(a_high))
        dc = ops.add(ops.add(ops.add(empty, ops.mul(sin_b, c)), pad_left(ops.cast(ops.neg(ops.cast(c_low, F32)), BF16))),
                     pad_right(c_high))
        grouped = [ops.reshape(v, new_shape=[1, groups, per_group, s, d]) for v in (t4, ops.cast(da, BF16))]
        k_sum, v_sum = (ops.cast(ops.sum(ops.cast(v, F32), dims=[0, 2], keepdim=False, dtype=NULL), BF16) for v in grouped)
        k_sum, v_sum = (ops.broadcast_in_dim(v, shape=[1, groups, 1, s, d], broadcast_dims=[1, 3, 4]) for v in (k_sum, v_sum))
        q = ops.reshape(ops.cast(dc, BF16), new_shape=[1, groups, per_group, s, d])
        qkv = ops.permute(ops.cat([q, v_sum, k_sum], dim=2, manual_padding=0), dims=[0, 3, 1, 2, 4])
        flat = ops.reshape(ops.reshape(qkv, new_shape=[1, s, groups * (per_group + 2) * d]),
                           new_shape=[s, groups * (per_group + 2) * d])
        fd.add_output(flat)
        fd.add_output(ops.permute(flat, dims=[1, 0]))

    check(definition, [randn(1, h, s, d, dtype=bf16), randn(s, d, seed=1), randn(s, d, seed=2),
                       randn(1, h, s, d, dtype=bf16, seed=3), randn(1, h, s, d, dtype=bf16, seed=4)], backend)


@ports("test_loop_promotion_cyclic_war")
@pytest.mark.parametrize("backend", BACKENDS)
def test_grouped_query_rotary_and_swiglu_of_updated_weights(backend):
    s, d, groups, kv, mlp = 3, 4, 2, 5, 6  # upstream: 4096, 128, 8, 5, 16640
    h = groups * kv

    def definition(fd):
        ops = fd.ops
        cos, sin = (tensor(fd, [s, d], BF16, contiguity=[True, True]) for _ in "cs")
        widths = [h * d, kv * d, kv * d, mlp, mlp]
        base = [tensor(fd, [1, s, w], BF16, contiguity=[None, True, True]) for w in widths]
        delta = [tensor(fd, [1, s, w], contiguity=[None, True, True]) for w in widths]

        def heads(v):  # [s, d] -> [1, h, s, d] in f32
            v = ops.broadcast_in_dim(ops.reshape(v, new_shape=[1, s, d]), shape=[1, 1, s, d], broadcast_dims=[0, 2, 3])
            return ops.cast(ops.broadcast_in_dim(v, shape=[1, h, s, d], broadcast_dims=[0, 1, 2, 3]), F32)

        cos_h, sin_h = heads(cos), heads(sin)
        q, k, v, gate, up = (ops.add(ops.cast(b, F32), ops.mul(t, double(fd, 2.0))) for b, t in zip(base, delta))
        q, k, v = (ops.permute(ops.reshape(ops.cast(x, BF16), new_shape=[1, s, n, d]), dims=[0, 2, 1, 3])
                   for x, n in ((q, h), (k, kv), (v, kv)))

        def repeat(x):  # [1, kv, s, d] -> [1, h, s, d]
            x = ops.broadcast_in_dim(x, shape=[1, 1, groups, kv, 1, s, 1, d], broadcast_dims=[1, 3, 5, 7])
            return ops.reshape(x, new_shape=[1, h, s, d])

        k, v = repeat(k), repeat(v)
        q_rot = ops.add(ops.mul(ops.cast(q, F32), cos_h), ops.mul(ops.cast(rotate_half(fd, q, [1, h, s], d, BF16), F32), sin_h))
        k_rot = ops.add(ops.mul(ops.cast(k, F32), cos_h), ops.mul(ops.cast(rotate_half(fd, k, [1, h, s], d, BF16), F32), sin_h))
        swiglu = ops.mul(ops.mul(gate, ops.reciprocal(ops.add(double(fd, 1.0), ops.exp(ops.neg(gate))))), up)
        for out in (ops.cast(gate, BF16), ops.cast(up, BF16), v, ops.cast(q_rot, BF16), ops.cast(k_rot, BF16),
                    ops.cast(swiglu, BF16), swiglu):
            fd.add_output(out)

    widths = [h * d, kv * d, kv * d, mlp, mlp]
    check(definition, [randn(s, d, dtype=bf16), randn(s, d, dtype=bf16, seed=1)]
          + [randn(1, s, w, dtype=bf16, seed=2 + k) for k, w in enumerate(widths)]
          + [randn(1, s, w, seed=7 + k) for k, w in enumerate(widths)], backend)


@ports("test_reshape_cancellation")
@pytest.mark.parametrize("backend", BACKENDS)
def test_interleaved_rotary_cats_of_reshaped_qkv_slices(backend):
    s, groups, per_group, hd, r = 3, 2, 3, 8, 4  # upstream: 2048, 4, 6, 256, 64 (rotary dims)
    h = groups * per_group
    width = per_group * hd

    def definition(fd):
        ops = fd.ops
        t0, t1, t2 = (tensor(fd, [1, s, h, r // 2], BF16, contiguity=[None, True, True, False]) for _ in "abc")
        qkv = tensor(fd, [1, s, groups, 3 * width], BF16, contiguity=[None, True, True, True])
        t4 = tensor(fd, [1, s, h, r // 2], BF16, contiguity=[None, True, True, False])
        freq = tensor(fd, [1, s, h, r], contiguity=[None, True, None, True])
        t6, t7 = (tensor(fd, [1, s, h, r], contiguity=[None, True, True, True]) for _ in "ab")

        def pairs(a, b):  # [..., r/2] twice -> [..., r] interleaved
            a, b = (ops.broadcast_in_dim(v, shape=[1, s, h, r // 2, 1], broadcast_dims=[0, 1, 2, 3]) for v in (a, b))
            return ops.cast(ops.reshape(ops.cat([a, b], dim=-1, manual_padding=0), new_shape=[1, s, h, r]), F32)

        def part(lo, hi):  # a qkv slice as [1, s, h, hd - r] past the rotary dims, in f32
            x = ops.slice(qkv, [0, 0, 0, lo], [1, s, groups, hi], [1] * 4, manual_normalization=0)
            x = ops.reshape(ops.reshape(x, new_shape=[1, s, groups, per_group, hd]), new_shape=[1, s, h, hd])
            return ops.cast(ops.slice(x, [0, 0, 0, r], [1, s, h, hd], [1] * 4, manual_normalization=0), F32)

        first = pairs(ops.cast(ops.neg(ops.cast(t0, F32)), BF16), t1)
        q = ops.permute(ops.cat([ops.add(t6, ops.mul(first, freq)), part(2 * width, 3 * width)], dim=-1, manual_padding=0),
                        dims=[0, 2, 1, 3])
        second = pairs(ops.cast(ops.neg(ops.cast(t2, F32)), BF16), t4)
        k = ops.cat([ops.add(t7, ops.mul(second, freq)), part(0, width)], dim=-1, manual_padding=0)
        fd.add_output(ops.permute(k, dims=[0, 2, 1, 3]))
        fd.add_output(ops.cast(q, BF16))
        fd.add_output(ops.permute(q, dims=[0, 1, 3, 2]))

    def every_other(seed):
        return strided((1, s, h, r // 2), (s * h * r, h * r, r, 2), bf16, seed=seed)

    check(definition, [every_other(0), every_other(1), every_other(2), randn(1, s, groups, 3 * width, dtype=bf16, seed=3),
                       every_other(4), strided((1, s, h, r), (s * r, r, 0, 1), seed=5), randn(1, s, h, r, seed=6),
                       randn(1, s, h, r, seed=7)], backend)


@ports("test_reduction_reference_missing_input_ids")
@pytest.mark.parametrize("backend", BACKENDS)
def test_rotary_backward_with_padded_pairs_and_grouped_sums(backend):
    s, h, d = 3, 2, 4  # upstream: 4096, 16, 128
    hd = h * d

    def definition(fd):
        ops, full = fd.ops, [1, s, h, d]
        t0 = tensor(fd, [1, h, s, d], F16, contiguity=[None, True, True, True], stride_order=[3, 1, 2, 0])
        t1 = tensor(fd, full, F16, contiguity=[None, True, True, True])
        t2 = tensor(fd, [1, h, s, d], F16, contiguity=[None, True, True, True], stride_order=[3, 1, 2, 0])
        cos = tensor(fd, full, contiguity=[None, True, None, True])
        t4 = tensor(fd, [1, s, 3 * hd], F16, contiguity=[None, True, True])
        t5 = tensor(fd, [1, h, s, d], F16, contiguity=[None, True, True, True], stride_order=[3, 1, 2, 0])
        sin = tensor(fd, full, contiguity=[None, True, None, True])
        t7 = tensor(fd, full, F16, contiguity=[None, True, True, True])
        a = ops.slice(ops.add(ops.cast(t1, F32), ops.cast(ops.permute(t0, dims=[0, 2, 1, 3]), F32)), [0] * 4, full, [1] * 4)
        b = ops.slice(ops.cast(ops.permute(t2, dims=[0, 2, 1, 3]), F32), [0] * 4, full, [1] * 4)

        def paired(x):  # [x2, -x1] as pairs padded along a new dim of 2, then flat again
            low, high = halves(fd, x, [1, s, h], d)
            high, low = (ops.broadcast_in_dim(v, shape=[1, s, h, 1, d // 2], broadcast_dims=[0, 1, 2, 4])
                         for v in (high, ops.neg(low)))
            total = ops.add(ops.pad(low, [0, 0, 1, 0] + [0] * 6, double(fd, 0.0)),
                            ops.pad(high, [0, 0, 0, 1] + [0] * 6, double(fd, 0.0)))
            return ops.reshape(total, new_shape=full)

        empty = ops.pad(ops.full(shape=[1, s, h, 0], fill_value=fd.define_scalar(0, dtype=I64), dtype=F32),
                        [0, d, 0, 0, 0, 0, 0, 0], double(fd, 0.0))
        grad_a = ops.add(ops.add(paired(ops.mul(cos, a)), ops.mul(sin, a)), empty)
        grad_b = ops.add(ops.add(paired(ops.mul(cos, b)), ops.mul(sin, b)), empty)
        qk = [ops.cast(ops.reshape(ops.slice(t4, [0, 0, lo], [1, s, lo + hd], [1] * 3, manual_normalization=0),
                                   new_shape=full), F32) for lo in (0, hd)]
        v = ops.add(ops.cast(t7, F32), ops.cast(ops.permute(t5, dims=[0, 2, 1, 3]), F32))

        def rotated(x):  # [-x2, x1] through a [.., 2, d/2] view and squeezes
            x = ops.reshape(x, new_shape=[1, s, h, 2, d // 2])
            first, second = (ops.squeeze(ops.slice(x, [0, 0, 0, k, 0], [1, s, h, k + 1, d // 2], [1] * 5,
                                                   manual_normalization=0), dims=[3], squeeze_expanded=False)
                             for k in (0, 1))
            return ops.cat([ops.neg(second), first], dim=-1, manual_padding=0)

        flat = ops.cat([ops.reshape(ops.cast(x, F16), new_shape=[1, s, hd]) for x in (grad_b, grad_a, v)], dim=2,
                       manual_padding=0)
        doubled = ops.reshape(ops.mul(double(fd, 2.0), ops.cast(flat, F32)), new_shape=[s, 3 * hd])
        sums = [ops.broadcast_in_dim(ops.sum(x, dims=[0, 2], keepdim=False, dtype=NULL), shape=[1, s, 1, d],
                                     broadcast_dims=[1, 3])
                for x in (ops.mul(qk[0], b), ops.mul(qk[1], a), ops.mul(rotated(qk[0]), b), ops.mul(rotated(qk[1]), a))]
        for out in (ops.permute(doubled, dims=[1, 0]), doubled, ops.reshape(flat, new_shape=[s, 3 * hd]),
                    ops.add(sums[1], sums[0]), ops.add(sums[3], sums[2])):
            fd.add_output(out)

    def head_major(seed):
        return strided((1, h, s, d), (s * h * d, d, h * d, 1), torch.float16, seed=seed)

    f16 = torch.float16
    check(definition, [head_major(0), randn(1, s, h, d, dtype=f16, seed=1), head_major(2),
                       strided((1, s, h, d), (s * d, d, 0, 1), seed=3), randn(1, s, 3 * hd, dtype=f16, seed=4),
                       head_major(5), strided((1, s, h, d), (s * d, d, 0, 1), seed=6), randn(1, s, h, d, dtype=f16, seed=7)],
          backend, rtol=1e-3, atol=1e-3)


@ports("test_domain_map_hang")
@pytest.mark.parametrize("backend", BACKENDS)
def test_rotary_tables_by_index_select_beside_gelu(backend):
    s, f, h, hd, mlp = 3, 2, 2, 10, 8  # upstream: 4096, 16, 32, 80, 10240 (rotary dims 2 * f)
    r = 2 * f

    def definition(fd):
        ops = fd.ops
        inv_freq_a, inv_freq_b = tensor(fd, [f], contiguity=[True]), tensor(fd, [f], contiguity=[True])
        square = tensor(fd, [s, s], contiguity=[True, True])
        base = [tensor(fd, [1, s, w], BF16, contiguity=[None, True, True]) for w in (h * hd, h * hd, h * hd, mlp)]
        delta = [tensor(fd, [1, s, w], contiguity=[None, True, True]) for w in (h * hd, h * hd, h * hd, mlp)]
        pos = ops.iota(*(fd.define_scalar(v, dtype=I64) for v in (s, 0, 1)), I64)
        pos_row = ops.broadcast_in_dim(pos, shape=[1, s], broadcast_dims=[1])
        pos_col = ops.broadcast_in_dim(ops.broadcast_in_dim(ops.cast(pos, F32), shape=[s, 1], broadcast_dims=[0]),
                                       shape=[s, f], broadcast_dims=[0, 1])
        angles = [ops.mul(pos_col, ops.broadcast_in_dim(ops.broadcast_in_dim(v, shape=[1, f], broadcast_dims=[1]),
                                                         shape=[s, f], broadcast_dims=[0, 1]))
                  for v in (inv_freq_a, inv_freq_b)]
        wrapped = ops.add(pos_row, ops.cast(ops.where(ops.lt(pos_row, fd.define_scalar(0, dtype=I64)),
                                                      *(fd.define_scalar(v, dtype=I64) for v in (s, 0))), I64))
        index = ops.reshape(wrapped, new_shape=[s])
        tables = []
        for angle in angles:
            both = ops.cat([angle, angle], dim=-1, manual_padding=0)
            tables += [ops.cast(ops.cos(both), BF16), ops.cast(ops.sin(both), BF16)]
        picked = [ops.broadcast_in_dim(ops.reshape(ops.index_select(t, index, dim=0), new_shape=[1, s, r]),
                                       shape=[1, 1, s, r], broadcast_dims=[0, 2, 3]) for t in tables]
        per_head = [ops.cast(ops.broadcast_in_dim(p, shape=[1, h, s, r], broadcast_dims=[0, 1, 2, 3]), F32) for p in picked]
        updated = [ops.add(ops.cast(b, F32), ops.mul(t, double(fd, 2.0))) for b, t in zip(base, delta)]
        q, k, v = (ops.permute(ops.reshape(ops.cast(x, BF16), new_shape=[1, s, h, hd]), dims=[0, 2, 1, 3])
                   for x in updated[:3])
        mlp_in = updated[3]
        cube = ops.pow(mlp_in, double(fd, 3.0))

        def rope(x):
            rot, rest = (ops.slice(x, [0, 0, 0, lo], [1, h, s, hi], [1] * 4, manual_normalization=0)
                         for lo, hi in ((0, r), (r, hd)))
            out = ops.add(ops.mul(ops.cast(rot, F32), per_head[0]),
                          ops.mul(ops.cast(rotate_half(fd, rot, [1, h, s], r, BF16), F32), per_head[1]))
            return ops.cat([ops.cast(out, BF16), rest], dim=-1, manual_padding=0)

        q_rope, k_rope = rope(q), rope(k)
        inner = ops.mul(double(fd, 0.797885), ops.add(mlp_in, ops.mul(double(fd, 0.044715), cube)))
        gelu = ops.mul(ops.mul(double(fd, 0.5), mlp_in), ops.add(double(fd, 1.0), ops.tanh(inner)))
        for out in (*tables, picked[0], picked[1], per_head[2], per_head[3], ops.cast(square, BF16),
                    ops.cast(mlp_in, BF16), v, k_rope, ops.cast(q_rope, F32),
                    ops.permute(ops.cast(k_rope, F32), dims=[0, 1, 3, 2]), ops.cast(gelu, BF16), gelu):
            fd.add_output(out)

    widths = [h * hd] * 3 + [mlp]
    check(definition, [randn(f) / 4, randn(f, seed=1) / 4, randn(s, s, seed=2)]
          + [randn(1, s, w, dtype=bf16, seed=3 + k) for k, w in enumerate(widths)]
          + [randn(1, s, w, seed=7 + k) for k, w in enumerate(widths)], backend)


@ports("test_issue5377")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue5377_moe_router_experts_and_shared_mlp(backend):
    e, hidden, inter = 2, 8, 6  # upstream: 16 experts, 5120, 8192

    def silu(fd, x):
        return fd.ops.mul(x, fd.ops.reciprocal(fd.ops.add(1.0, fd.ops.exp(fd.ops.neg(x)))))

    def definition(fd):
        ops = fd.ops
        logits, router_out = tensor(fd, [1, e], BF16, contiguity=[None, True]), tensor(fd, [1, e], BF16, contiguity=[None, True])
        x = tensor(fd, [1, hidden], BF16, contiguity=[None, True])
        gate_up, down = tensor(fd, [e, hidden, 2 * inter], BF16), tensor(fd, [e, inter, hidden], BF16)
        w_gate, w_up, w_down = tensor(fd, [inter, hidden], BF16), tensor(fd, [inter, hidden], BF16), \
            tensor(fd, [hidden, inter], BF16)
        shared = ops.cast(ops.mul(silu(fd, ops.cast(ops.linear(x, w_gate), F32)), ops.cast(ops.linear(x, w_up), F32)), BF16)
        shared = ops.linear(shared, w_down)
        tokens = ops.cast(ops.squeeze(ops.expand(ops.broadcast(x, is_broadcast_dim=[True, False, True, False]),
                                                 shape=[e, 1, 1, hidden]), dims=[1, 2]), F32)
        routed = ops.cast(logits, BF16)
        scores = ops.cast(ops.reciprocal(ops.add(1.0, ops.exp(ops.neg(ops.cast(routed, F32))))), BF16)
        scores = ops.expand(ops.cast(ops.broadcast(ops.squeeze(scores, dims=[0]), is_broadcast_dim=[False, True]), BF16),
                            shape=[e, hidden])
        weighted = ops.broadcast(ops.cast(ops.mul(tokens, ops.cast(scores, F32)), BF16), is_broadcast_dim=[False, True, False])
        h = ops.matmul(weighted, gate_up)
        up = ops.cast(ops.slice(h, [0, 0, inter], [e, 1, 2 * inter], [1, 1, 1], manual_normalization=True), F32)
        gate = ops.cast(ops.slice(h, [0, 0, 0], [e, 1, inter], [1, 1, 1], manual_normalization=True), F32)
        out = ops.squeeze(ops.matmul(ops.cast(ops.mul(up, silu(fd, gate)), BF16), down), dims=[1])
        total = ops.sum(ops.cast(ops.broadcast(out, is_broadcast_dim=[False, True, False]), F32), dims=[0], dtype=F32)
        fd.add_output(routed, router_out)
        fd.add_output(shared)
        fd.add_output(ops.cast(total, BF16))

    def inputs():
        return [randn(1, e, dtype=bf16), torch.zeros(1, e, dtype=bf16), randn(1, hidden, dtype=bf16, seed=1),
                randn(e, hidden, 2 * inter, dtype=bf16, seed=2) / 3, randn(e, inter, hidden, dtype=bf16, seed=3) / 3,
                randn(inter, hidden, dtype=bf16, seed=4) / 3, randn(inter, hidden, dtype=bf16, seed=5) / 3,
                randn(hidden, inter, dtype=bf16, seed=6) / 3]

    check(definition, inputs, backend, rtol=1.6e-2, atol=1e-2)


@ports("test_issue4670")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue4670_causal_masks_from_iotas(backend):
    rows, cols = 4, 5  # upstream: 128, 129

    def definition(fd):
        ops = fd.ops
        col = ops.iota(*(fd.define_scalar(v, dtype=I64) for v in (cols, 0, 1)), I64)
        row = ops.iota(*(fd.define_scalar(v, dtype=I64) for v in (rows, 0, 1)), I64)
        n_cols, n_rows = ops.size(col, dim=0), ops.size(row, dim=0)

        def grid(a, b):
            return (ops.expand(ops.broadcast(a, is_broadcast_dim=[True, False]),
                               shape=[fd.define_scalar(rows, dtype=I64), n_cols]),
                    ops.expand(ops.broadcast(b, is_broadcast_dim=[False, True]),
                               shape=[n_rows, fd.define_scalar(cols, dtype=I64)]))

        fd.add_output(ops.gt(*grid(col, row)))
        above = ops.ge(ops.sub(*grid(col, row)), fd.define_scalar(1, dtype=I64))
        lowest = ops.full(shape=[fd.define_scalar(v, dtype=I64) for v in (rows, cols)],
                          fill_value=fd.define_scalar(-3.38953e38, dtype=BF16), dtype=BF16)
        fd.add_output(ops.where(above, lowest, double(fd, 0.0)))

    check(definition, [], backend)


@ports("test_issue4888")
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue4888_masked_softmax_with_in_place_mask_updates(backend):
    s, h = 8, 2  # upstream: 4096 (4097 columns), 32 heads

    def definition(fd):
        ops = fd.ops
        bias = tensor(fd, [s, s + 1], BF16, contiguity=[True, True])
        m0, m1 = (tensor(fd, [s, s + 1], DataType.Bool, contiguity=[True, True]) for _ in "ab")
        scores = tensor(fd, [1, h, s, s], BF16, contiguity=[None, True, True, True])
        mask = ops.set(ops.bitwise_or(m0, m1))
        fd.add_output(mask, m0)
        masked = ops.set(ops.cast(ops.mul(ops.cast(bias, F32), ops.cast(mask, F32)), BF16))
        fd.add_output(masked, bias)
        b = ops.broadcast_in_dim(masked, shape=[1, s, s + 1], broadcast_dims=[1, 2])
        b = ops.broadcast_in_dim(ops.broadcast_in_dim(b, shape=[1, 1, s, s + 1], broadcast_dims=[0, 2, 3]),
                                 shape=[1, 1, s, s + 1], broadcast_dims=[0, 1, 2, 3])
        b = ops.slice(b, start_indices=[0] * 4, end_indices=[1, 1, s, s], strides=[1] * 4, manual_normalization=0)
        b = ops.broadcast_in_dim(b, shape=[1, h, s, s], broadcast_dims=[0, 1, 2, 3])
        x = ops.add(ops.mul(ops.cast(scores, F32), double(fd, 0.0883883)), ops.cast(b, F32))

        def keep(v):
            return ops.broadcast_in_dim(ops.broadcast_in_dim(v, shape=[1, h, s, 1], broadcast_dims=[0, 1, 2]),
                                        shape=[1, h, s, s], broadcast_dims=[0, 1, 2, 3])

        e = ops.exp(ops.sub(x, keep(ops.max(x, dims=[3], keepdim=False, dtype=NULL))))
        probs = ops.mul(e, ops.reciprocal(keep(ops.sum(e, dims=[3], keepdim=False, dtype=NULL))))
        fd.add_output(b)
        fd.add_output(probs)
        fd.add_output(ops.cast(probs, BF16))

    def inputs():
        return [randn(s, s + 1, dtype=bf16), randn(s, s + 1, dtype=torch.bool, seed=1),
                randn(s, s + 1, dtype=torch.bool, seed=2), randn(1, h, s, s, dtype=bf16, seed=3)]

    check(definition, inputs, backend)


@ports("test_cat_qwen2_v2")
@pytest.mark.parametrize("backend", BACKENDS)
def test_qwen2_dropout_and_rotary_of_repeated_kv_heads(backend):
    """Skipped upstream (NVIDIA/Fuser#3740); runs here. The dropout mask is a seeded uniform:
    torch has no Philox, so TorchFD draws it with fuser's (nvfuser_ported._TorchOps.uniform)."""
    s, kv, rep, d = 3, 2, 2, 4  # upstream: 2048, 4, 7, 128
    hq = kv * rep

    def definition(fd):
        ops = fd.ops
        x = tensor(fd, [s, kv * d], BF16, contiguity=[True, True], stride_order=[1, 0])
        offset, seed = fd.define_scalar(None, dtype=I64), fd.define_scalar(None, dtype=I64)
        k = tensor(fd, [1, kv, s, d], BF16, contiguity=[None, True, True, True], stride_order=[3, 1, 2, 0])
        cos, sin = (tensor(fd, [1, s, d], BF16, contiguity=[None, True, True], stride_order=[2, 0, 1]) for _ in "cs")
        q = tensor(fd, [1, hq, s, d], BF16, contiguity=[None, True, True, True], stride_order=[3, 1, 2, 0])
        residual = tensor(fd, [1, s, kv * d], BF16, contiguity=[None, True, True], stride_order=[2, 1, 0])
        u = ops.uniform(double(fd, 0.0), double(fd, 1.0), shape=[fd.define_scalar(v, dtype=I64) for v in (1, s, kv * d)],
                        rng_seed=seed, rng_offset=offset, dtype=BF16)
        kept = ops.mul(ops.mul(ops.cast(ops.reshape(x, new_shape=[1, s, kv * d]), F32), double(fd, 4.0)),
                       ops.cast(ops.lt(u, double(fd, 0.9)), F32))
        v = ops.cast(ops.add(ops.cast(residual, F32), ops.mul(kept, double(fd, 1.11111))), BF16)
        v = ops.permute(ops.reshape(v, new_shape=[1, s, kv, d]), dims=[0, 2, 1, 3])
        cos1, sin1 = (ops.broadcast_in_dim(t, shape=[1, 1, s, d], broadcast_dims=[0, 2, 3]) for t in (cos, sin))

        def rope(t, heads):
            c, sn = (ops.cast(ops.broadcast_in_dim(w, shape=[1, heads, s, d], broadcast_dims=[0, 1, 2, 3]), F32)
                     for w in (cos1, sin1))
            return ops.add(ops.mul(ops.cast(t, F32), sn), ops.mul(ops.cast(rotate_half(fd, t, [1, heads, s], d, BF16), F32), c))

        k_rope = ops.cast(rope(k, kv), BF16)

        def repeat(t):
            t = ops.broadcast_in_dim(t, shape=[1, kv, 1, s, d], broadcast_dims=[0, 1, 3, 4])
            t = ops.broadcast_in_dim(t, shape=[1, kv, rep, s, d], broadcast_dims=[0, 1, 2, 3, 4])
            return ops.stride_order(ops.reshape(t, new_shape=[1, hq, s, d]), stride_order=[3, 2, 1, 0])

        for out in (v, k_rope, repeat(v), repeat(k_rope),
                    ops.stride_order(ops.cast(rope(q, hq), BF16), stride_order=[3, 2, 1, 0])):
            fd.add_output(out)

    check(definition, [randn(s, kv * d, dtype=bf16), 25546, 1400552702872758,
                       strided((1, kv, s, d), (kv * s * d, d, kv * d, 1), bf16, seed=1),
                       strided((1, s, d), (s * d, 1, s), bf16, seed=2), strided((1, s, d), (s * d, 1, s), bf16, seed=3),
                       strided((1, hq, s, d), (hq * s * d, d, hq * d, 1), bf16, seed=4),
                       randn(1, s, kv * d, dtype=bf16, seed=5)], backend)


@ports("test_cat_symbolic")
@pytest.mark.parametrize("backend", BACKENDS)
def test_cat_of_reshaped_permutes_with_scalar_input_scales(backend):
    b, h, s, d = 2, 3, 4, 4  # upstream: 4, 6, 64, 128

    def definition(fd):
        ops = fd.ops
        s0, s1 = fd.define_scalar(None, dtype=DataType.Double), fd.define_scalar(None, dtype=DataType.Double)
        for _ in range(7):
            fd.define_scalar(None, dtype=I64)
        t9, t10 = (tensor(fd, [-1] * 4, contiguity=[True] * 4, stride_order=[3, 2, 1, 0]) for _ in "ab")
        t11 = tensor(fd, [-1] * 3, contiguity=[True] * 3, stride_order=[2, 1, 0])

        def target():
            return fd.define_vector([fd.define_scalar(v, dtype=I64) for v in (b, s, h * d)], dtype=I64)

        a = ops.reshape(ops.permute(ops.mul(t9, s0), dims=[0, 2, 1, 3]), new_shape=target())
        c = ops.permute(ops.permute(ops.mul(t10, s1), dims=[0, 1, 3, 2]), dims=[0, 2, 1, 3])
        cat = ops.cat([a, ops.reshape(c, new_shape=target()), t11], dim=2)
        fd.add_output(cat)
        fd.add_output(ops.sum(cat, [0, 1], keepdim=False, dtype=NULL))

    check(definition, [0.29730177875068026, 0.29730177875068026, b, s, h * d, b, s, h * d, 2, randn(b, h, s, d),
                       randn(b, h, s, d, seed=1), randn(b, s, h * d, seed=2)], backend)


@ports("test_ca_map_concrete_loop_id")
@pytest.mark.parametrize("backend", BACKENDS)
def test_squeezes_of_expanded_dims_between_permutes(backend):
    n, heads, hd = 4, 4, 8  # upstream: 16, 16, 64

    def definition(fd):
        ops = fd.ops
        t0, t1 = tensor(fd, [n, 1, 1], contiguity=[True, None, None]), tensor(fd, [1, 1, heads * hd],
                                                                             contiguity=[None, None, True])
        e = ops.exp(ops.sub(t0, t0))
        ones = ops.mul(e, ops.reciprocal(e))
        one = ops.size(ones, dim=1)
        x = ops.permute(ops.reshape(t1, new_shape=[one, one, fd.define_scalar(heads, dtype=I64),
                                                   fd.define_scalar(hd, dtype=I64)]), dims=[0, 2, 1, 3])
        squeezed = ops.squeeze(x, dims=[0], squeeze_expanded=True)
        prod = ops.mul(ops.broadcast(ones, is_broadcast_dim=[False, False, True, False]),
                       ops.broadcast(ops.permute(squeezed, dims=[0, 2, 1]), is_broadcast_dim=[False, True, False, False]))
        y = ops.permute(ops.broadcast(ops.squeeze(prod, dims=[3], squeeze_expanded=True),
                                      is_broadcast_dim=[True, False, False, False]), dims=[0, 2, 1, 3])
        fd.add_output(ones)
        fd.add_output(squeezed)
        fd.add_output(ops.reshape(y, new_shape=[one, one, fd.define_scalar(heads * hd, dtype=I64)]))

    check(definition, [randn(n, 1, 1), randn(1, 1, heads * hd, seed=1)], backend)
