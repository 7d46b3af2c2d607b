"""The pointwise kernels of the model suite keep their loads in flight, and the code that does it
computes the right values.

SASS (skipped without NVRTC or nvdisasm, as test_sass_in_flight.py, whose check this is): fusions
standing for the largest pointwise kernels of GPT-2's, Llama's and BERT's training steps
(benchmarks/model_kernels.py), compiled at their H100 shapes, hold at least 32 KiB of loads in
flight per SM, no spills, no local memory:

- GPT-2's q and k^T out of the QKV projection (forward region_1): slices, a reshape splitting the
  heads off the channels, permutes; the reshape's index is written inline, so its loads join the
  unrolled step's load stage;
- GPT-2's QKV gradient (backward region_4): a cat of three pieces, two through reshapes merging the
  heads into the channels, one transposed; each piece's load predicated on where it lies;
- Llama's rotary embedding backward (backward region_4) and forward (forward region_1): the
  rotation's two halves, pads or a cat, read by one load a step (their conditions never hold
  together), the cos/sin table and the arithmetic on it computed once a thread, before the loop
  over batch and heads;
- BERT's GELU forward and backward (forward region_4, backward region_1): erf between the loads.

Values (the cpu backend against numpy): the same fusions at small shapes, each forced
(override_schedule) onto schedules that take those paths: unrolled steps with a partial last step,
with and without the next step prefetched, the loop over batch and heads inside a thread (hoisted
loads under a piece's condition, hoisted arithmetic), vectors along a pad or a cat at multiples of
the width and a pad whose inside ends off one (read lane by lane), 32-bit and 64-bit indices, cat
pieces whose extents only the call knows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from fuser import DataType, FusionDefinition

SCALE = 0.35355339059327379
F32 = np.float32


@dataclass
class Case:
    fd: FusionDefinition
    shapes: list[tuple[int, ...]]
    expected: Callable
    """numpy's outputs for the inputs."""
    orders: list[tuple[int, ...] | None] | None = None
    """Per input, the order its dims are stored in, outermost first (None: as they are)."""

    def inputs(self, rng: np.random.Generator | None) -> list[np.ndarray]:
        """Random inputs (np.empty ones, holding no data, for rng None) in their layouts."""
        arrays = []
        for shape, order in zip(self.shapes, self.orders or [None] * len(self.shapes)):
            order = order or tuple(range(len(shape)))
            stored = tuple(shape[d] for d in order)
            data = rng.standard_normal(stored).astype(F32) if rng is not None else np.empty(stored, F32)
            arrays.append(data.transpose(np.argsort(order)))
        return arrays


# --- the fusions ---------------------------------------------------------------------------------

def qk_heads(B, T, H, D) -> Case:
    """q * scale and k^T * scale of GPT-2's attention out of the QKV projection [B, T, 3 * H * D],
    stored as the projection stores them ([B, T, H, D])."""
    C = H * D
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[B, T, 3 * C], dtype=DataType.Float)
        q = fd.ops.reshape(fd.ops.slice(x, [0, 0, 0], [B, T, C]), [B, T, H, D])
        k = fd.ops.reshape(fd.ops.slice(x, [0, 0, C], [B, T, 2 * C]), [B, T, H, D])
        fd.add_output(fd.ops.mul(fd.ops.permute(q, [0, 2, 1, 3]), SCALE), stride_order=[3, 1, 2, 0])
        kt = fd.ops.permute(fd.ops.permute(k, [0, 2, 1, 3]), [0, 1, 3, 2])
        fd.add_output(fd.ops.mul(kt, SCALE), stride_order=[3, 1, 0, 2])

    def expected(x):
        heads = x.reshape(B, T, 3, H, D).transpose(2, 0, 3, 1, 4) * F32(SCALE)
        return [heads[0], heads[1].transpose(0, 1, 3, 2)]

    return Case(fd, [(B, T, 3 * C)], expected)


def qkv_grad(B, T, H, D) -> Case:
    """GPT-2's gradient of the QKV projection: cat(dq, dk, dv) along the channels, dk from its
    transposed [B, H, D, T] form."""
    C = H * D
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[B, H, D, T], dtype=DataType.Float)
        b = fd.define_tensor(shape=[B, H, T, D], dtype=DataType.Float)
        c = fd.define_tensor(shape=[B, T, C], dtype=DataType.Float)
        dq = fd.ops.reshape(fd.ops.permute(fd.ops.mul(b, SCALE), [0, 2, 1, 3]), [B, T, C])
        dk = fd.ops.permute(fd.ops.permute(fd.ops.mul(a, SCALE), [0, 1, 3, 2]), [0, 2, 1, 3])
        fd.add_output(fd.ops.cat([dq, fd.ops.reshape(dk, [B, T, C]), c], 2))

    def expected(a, b, c):
        s = F32(SCALE)
        dq = (b * s).transpose(0, 2, 1, 3).reshape(B, T, C)
        dk = (a * s).transpose(0, 3, 1, 2).reshape(B, T, C)
        return [np.concatenate([dq, dk, c], 2)]

    return Case(fd, [(B, H, D, T), (B, H, T, D), (B, T, C)], expected)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], -1)


def _rotate_half_backward(g):
    half = g.shape[-1] // 2
    return np.concatenate([g[..., half:], -g[..., :half]], -1)


def rope_backward(B, H, KV, T, D) -> Case:
    """Llama's rotary embedding backward for k (summed over its query groups already) and q:
    g * cos + rotate_half^T(g * sin), the transposed rotation as two pads."""
    with FusionDefinition() as fd:
        gq = fd.define_tensor(shape=[B, H, T, D], dtype=DataType.Float)
        gk = fd.define_tensor(shape=[B, KV, T, D], dtype=DataType.Float)
        t = fd.define_tensor(shape=[1, T, D], dtype=DataType.Float)
        sin = fd.ops.broadcast_in_dim(fd.ops.sin(t), [1, 1, T, D], [0, 2, 3])
        cos = fd.ops.broadcast_in_dim(fd.ops.cos(t), [1, 1, T, D], [0, 2, 3])

        def backward(g, n):
            s = fd.ops.mul(g, sin)
            lo = fd.ops.slice(s, [0, 0, 0, 0], [B, n, T, D // 2])
            hi = fd.ops.slice(s, [0, 0, 0, D // 2], [B, n, T, D])
            rotated = fd.ops.add(fd.ops.pad(fd.ops.neg(lo), [D // 2, 0]), fd.ops.pad(hi, [0, D // 2]))
            return fd.ops.add(rotated, fd.ops.mul(g, cos))

        fd.add_output(backward(gk, KV))
        fd.add_output(backward(fd.ops.mul(gq, SCALE), H))

    def expected(gq, gk, t):
        sin, cos = np.sin(t)[:, None], np.cos(t)[:, None]
        return [g * cos + _rotate_half_backward(g * sin) for g in (gk, gq * F32(SCALE))]

    return Case(fd, [(B, H, T, D), (B, KV, T, D), (1, T, D)], expected)


def rope_forward(B, H, KV, T, D) -> Case:
    """Llama's rotary embedding forward: cos/sin of positions x inverse frequencies computed in the
    kernel; q (stored [B, T, H, D]) rotated and scaled, k rotated, expanded over its query groups
    and transposed."""
    with FusionDefinition() as fd:
        inv = fd.define_tensor(shape=[D // 2], dtype=DataType.Float)
        q = fd.define_tensor(shape=[B, H, T, D], dtype=DataType.Float, stride_order=[3, 1, 2, 0])
        k = fd.define_tensor(shape=[B, KV, T, D], dtype=DataType.Float, stride_order=[3, 1, 2, 0])
        pos = fd.ops.cast(fd.ops.iota(T, 0, 1, DataType.Int), DataType.Float)
        freqs = fd.ops.mul(fd.ops.broadcast_in_dim(pos, [T, D // 2], [0]), fd.ops.broadcast_in_dim(inv, [T, D // 2], [1]))
        emb = fd.ops.cat([freqs, freqs], 1)
        cos = fd.ops.broadcast_in_dim(fd.ops.cos(emb), [1, 1, T, D], [2, 3])
        sin = fd.ops.broadcast_in_dim(fd.ops.sin(emb), [1, 1, T, D], [2, 3])

        def rotate(x, n):
            lo = fd.ops.slice(x, [0, 0, 0, 0], [B, n, T, D // 2])
            hi = fd.ops.slice(x, [0, 0, 0, D // 2], [B, n, T, D])
            return fd.ops.add(fd.ops.mul(x, cos), fd.ops.mul(fd.ops.cat([fd.ops.neg(hi), lo], 3), sin))

        groups = fd.ops.broadcast_in_dim(rotate(k, KV), [B, KV, 1, T, D], [0, 1, 3, 4])
        k_heads = fd.ops.reshape(fd.ops.expand(groups, [B, KV, H // KV, T, D]), [B, H, T, D])
        fd.add_output(fd.ops.mul(rotate(q, H), SCALE), stride_order=[3, 1, 2, 0])
        fd.add_output(fd.ops.mul(fd.ops.permute(k_heads, [0, 1, 3, 2]), SCALE), stride_order=[3, 2, 0, 1])

    def expected(inv, q, k):
        emb = np.arange(T, dtype=F32)[:, None] * inv[None, :]
        emb = np.concatenate([emb, emb], 1)
        cos, sin = np.cos(emb), np.sin(emb)
        s = F32(SCALE)
        k = np.repeat(k * cos + _rotate_half(k) * sin, H // KV, axis=1)
        return [(q * cos + _rotate_half(q) * sin) * s, k.transpose(0, 1, 3, 2) * s]

    return Case(fd, [(D // 2,), (B, H, T, D), (B, KV, T, D)], expected, [None, (0, 2, 1, 3), (0, 2, 1, 3)])


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def gelu(B, T, C) -> Case:
    """BERT's GELU (erf)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[B, T, C], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.mul(x, 0.5), fd.ops.add(fd.ops.erf(fd.ops.mul(x, 0.7071067811865476)), 1.0)))
    return Case(fd, [(B, T, C)], lambda x: [0.5 * x * (1 + _erf(x / np.sqrt(2)))])


def gelu_backward(B, T, C) -> Case:
    """BERT's GELU backward: g * (cdf(x) + x * pdf(x))."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[B, T, C], dtype=DataType.Float)
        g = fd.define_tensor(shape=[B, T, C], dtype=DataType.Float)
        cdf = fd.ops.mul(fd.ops.add(fd.ops.erf(fd.ops.mul(x, 0.7071067811865476)), 1.0), 0.5)
        pdf = fd.ops.mul(fd.ops.exp(fd.ops.mul(fd.ops.mul(x, x), -0.5)), 0.3989422804014327)
        fd.add_output(fd.ops.mul(g, fd.ops.add(cdf, fd.ops.mul(x, pdf))))

    def expected(x, g):
        return [g * (0.5 * (1 + _erf(x / np.sqrt(2))) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi))]

    return Case(fd, [(B, T, C), (B, T, C)], expected)


def padded_halves(B, T, D) -> Case:
    """A pad whose inside ends off a vector boundary (x[..., :D - 2] padded back to D: a vector
    with lanes on both sides, read lane by lane) beside one on boundaries (read as vectors)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[B, T, D], dtype=DataType.Float)
        cut = fd.ops.pad(fd.ops.mul(fd.ops.slice(x, [0, 0, 0], [B, T, D - 2]), 2.0), [0, 2])
        moved = fd.ops.pad(fd.ops.slice(x, [0, 0, 0], [B, T, D - 4]), [4, 0], 1.5)
        fd.add_output(fd.ops.add(fd.ops.add(cut, moved), x))

    def expected(x):
        cut = np.concatenate([2 * x[..., :D - 2], np.zeros_like(x[..., :2])], -1)
        moved = np.concatenate([np.full_like(x[..., :4], 1.5), x[..., :D - 4]], -1)
        return [cut + moved + x]

    return Case(fd, [(B, T, D)], expected)


# --- the SASS at the H100 shapes -------------------------------------------------------------------

H100_SHAPES = [
    ("gpt2 forward region_1: q, k^T", qk_heads, dict(B=8, T=1024, H=12, D=64)),
    ("gpt2 backward region_4: QKV gradient", qkv_grad, dict(B=8, T=1024, H=12, D=64)),
    ("llama backward region_4: rotary", rope_backward, dict(B=4, H=32, KV=8, T=2048, D=64)),
    ("llama forward region_1: rotary", rope_forward, dict(B=4, H=32, KV=8, T=2048, D=64)),
    ("bert forward region_4: GELU", gelu, dict(B=8, T=512, C=3072)),
    ("bert backward region_1: GELU backward", gelu_backward, dict(B=8, T=512, C=3072)),
]


@pytest.mark.parametrize("name,build,sizes", H100_SHAPES, ids=[n.split(":")[0] for n, _, _ in H100_SHAPES])
def test_model_pointwise_kernels_keep_32_kib_in_flight_per_sm(name, build, sizes, monkeypatch):
    from test_sass_in_flight import MIN_IN_FLIGHT_PER_SM, _check_kernel, _tools_missing

    if _tools_missing():
        pytest.skip(_tools_missing())
    monkeypatch.setenv("FUSER_GPU_PROFILE", "h100")
    case = build(**sizes)
    kernels = case.fd.kernels_for(case.inputs(None), backend="cpu")
    assert [k.scheduler for k in kernels] == ["pointwise"], [k.scheduler for k in kernels]
    for k in kernels:
        _check_kernel(name, k, MIN_IN_FLIGHT_PER_SM)


# --- values: the cpu backend against numpy ---------------------------------------------------------

VARIANTS = [
    # (fusion, small sizes, schedules forced: changes to the one the call gets)
    (qk_heads, dict(B=2, T=8, H=3, D=8),
     [dict(unroll=4), dict(unroll=4, index32=False, prefetch=False), dict(outer_dims=(1, 1), unroll=2, prefetch=True)]),
    (qkv_grad, dict(B=2, T=6, H=3, D=4), [dict(unroll=2, prefetch=False), dict(unroll=4, index32=False, prefetch=True)]),
    (rope_backward, dict(B=2, H=4, KV=2, T=5, D=8),
     [dict(), dict(outer_dims=(2, 2), unroll=4, prefetch=False),
      dict(outer_dims=(2, 2), vec=(), unroll=2, index32=False, prefetch=True)]),
    (rope_forward, dict(B=2, H=4, KV=2, T=5, D=8), [dict(), dict(outer_dims=(2, 2), unroll=4, prefetch=True)]),
    (gelu, dict(B=2, T=3, C=16), [dict(unroll=4, prefetch=True), dict(unroll=1, prefetch=False)]),
    (padded_halves, dict(B=3, T=5, D=8), [dict(), dict(outer_dims=(1,), unroll=4, prefetch=True), dict(vec=(), unroll=2)]),
]


def _variant_ids():
    return [f"{build.__name__}-{k}" for build, _, changes in VARIANTS for k in range(len(changes))]


@pytest.mark.parametrize("build,sizes,changes", [(b, s, c) for b, s, cs in VARIANTS for c in cs], ids=_variant_ids())
def test_forced_schedules_compute_numpys_values(build, sizes, changes):
    case = build(**sizes)
    inputs = case.inputs(np.random.default_rng(0))
    (chosen,) = case.fd.kernels_for(inputs, backend="cpu")
    schedule = dataclasses.replace(chosen.schedule, **changes)
    case.fd.override_schedule(0, schedule)
    outputs = case.fd.execute(inputs, backend="cpu")
    (kernel,) = case.fd.last_kernels()
    assert kernel.schedule == schedule
    for got, want in zip(outputs, case.expected(*inputs), strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5, err_msg=schedule.describe())


def test_the_chosen_schedules_vectorise_the_rotation_and_take_32_bit_indices():
    """At small shapes: the rotations' pads and cats lie on vector boundaries (vector: 4), the
    QKV gradient's transposed piece keeps its group scalar, and every group is below 2^31 elements."""
    rope = rope_backward(B=2, H=4, KV=2, T=5, D=8)
    (k,) = rope.fd.kernels_for(rope.inputs(None), backend="cpu")
    assert k.schedule.vec == (4, 4) and k.schedule.index32, k.schedule
    grad = qkv_grad(B=2, T=6, H=3, D=4)
    (k,) = grad.fd.kernels_for(grad.inputs(None), backend="cpu")
    assert k.schedule.vec == () and k.schedule.index32, k.schedule


def test_cat_pieces_of_extents_the_call_gives():
    """Without static resize extents a cat's piece boundaries are kernel parameters: its pieces'
    loads are still predicated on them in the load stage, and each piece reads its own tensor."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.cat([fd.ops.neg(x), y], 1), 3.0))
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((5, 7)).astype(F32), rng.standard_normal((5, 3)).astype(F32)
    (out,) = fd.execute([x, y], backend="cpu", _disable_options=["concretize_resize_extents"])
    np.testing.assert_allclose(np.asarray(out), np.concatenate([-x, y], 1) * 3, rtol=1e-6)
    source = fd.last_kernels()[0].source
    assert "fuser_ld_if(fuser_in && (" in source, source


def test_index32_is_refused_past_2_31_inner_elements():
    """A forced 32-bit index where a group's inner loop would leave 32 bits is refused, naming why."""
    from fuser.lowering.schedulers import PointwiseSchedule

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.neg(x))
    huge = np.lib.stride_tricks.as_strided(np.empty(1, F32), (2 ** 31,), (0,))  # no data: never run
    (k,) = fd.kernels_for([huge], backend="cpu")
    assert not k.schedule.index32, k.schedule
    fd.override_schedule(0, PointwiseSchedule(128, (0,), index32=True))
    with pytest.raises(ValueError, match="index32 needs fewer than 2\\^31 inner elements"):
        fd.kernels_for([huge], backend="cpu")
