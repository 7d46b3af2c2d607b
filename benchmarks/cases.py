"""The benchmark cases: fusions built with the FusionDefinition API, their inputs, a numpy
reference (checked on every run), the minimum global traffic, and the same math in torch.

Minimum bytes ("the floor") of a case = every fusion input read once + every fusion output
written once, at the dtypes the fusion is defined with (runtime scalars count 0). No kernel
that computes the outputs from the inputs can move less through global memory. Per case:

- ce_fwd_aot   logits N*V*s + labels N*8 (int64)   + loss 4 (f32, 0-d)
- ce_fwd_nvf   logits N*V*s + labels N*8           + loss N*4 (f32, per row)
- ce_bwd       logits N*V*s + labels N*8           + grad_logits N*V*s     (grad, count: scalars)
- softmax      x N*V*4                             + y N*V*4
- layer_norm   x N*H*4 + weight H*4 + bias H*4     + y N*H*4
- rope         q, k 2*B*H*S*D*2 + cos, sin 2*S*D*2 + q_out, k_out 2*B*H*S*D*2
- bcast_chain  x N*M*4                             + y N*M*4
(s = 2 for bf16, 4 for f32.)

Every fusion is defined with dynamic extents (-1) except RoPE's head dim (static 128, the
slice point of rotate-half), so one definition serves any shape; the harness builds a fresh
definition per measured row so that cache counters belong to that row only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from fuser import DataType, FusionDefinition

BF16 = np.dtype(ml_dtypes.bfloat16)
NP_DTYPES = {"bf16": BF16, "f32": np.dtype(np.float32)}
FD_DTYPES = {"bf16": DataType.BFloat16, "f32": DataType.Float}
ITEMSIZE = {"bf16": 2, "f32": 4, "i64": 8}
IGNORE_INDEX = -100
LN_EPS = 1e-5


# --------------------------------------------------------------------------- fusion definitions


def _log_softmax_aot(fd: FusionDefinition, x, dtype: str):
    """amax, sub, exp, sum, log, sub: torch.compile's decomposition of log_softmax (on f32)."""
    xf = fd.ops.cast(x, DataType.Float) if dtype != "f32" else x
    amax = fd.ops.max(xf, [1], keepdim=True)
    sub = fd.ops.sub(xf, amax)
    exp = fd.ops.exp(sub)
    s = fd.ops.sum(exp, [1], keepdim=True)
    log = fd.ops.log(s)
    return fd.ops.sub(sub, log)


def build_ce_fwd_aot(dtype: str, shape: Sequence[int]) -> FusionDefinition:
    """Cross-entropy forward (mean over non-ignored rows) exactly as torch.compile's AOT graph
    writes it: log-softmax; ne = y != -100; where(ne, y, 0); unsqueeze; gather(…, 1, …);
    squeeze; neg; where(ne, neg, 0); sum(ne) cast to f32; sum(where) / that."""
    with FusionDefinition("ce_fwd_aot") as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=FD_DTYPES[dtype])
        y = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        logp = _log_softmax_aot(fd, x, dtype)
        ne = fd.ops.ne(y, IGNORE_INDEX)
        safe = fd.ops.where(ne, y, 0)
        unsq = fd.ops.broadcast(safe, [False, True])
        picked = fd.ops.gather(logp, unsq, 1)
        sq = fd.ops.squeeze(picked, [1])
        neg = fd.ops.neg(sq)
        masked = fd.ops.where(ne, neg, 0.0)
        count = fd.ops.cast(fd.ops.sum(ne, [0], dtype=DataType.Int), DataType.Float)
        total = fd.ops.sum(masked, [0])
        fd.add_output(fd.ops.div(total, count))
    return fd


def build_ce_fwd_nvf(dtype: str, shape: Sequence[int]) -> FusionDefinition:
    """Cross-entropy forward in nvFuser's benchmark form: per-row loss = lse(f32(x)) - x[y],
    the target logit taken along axis 1 straight from the input logits."""
    with FusionDefinition("ce_fwd_nvf") as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=FD_DTYPES[dtype])
        y = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        xf = fd.ops.cast(x, DataType.Float) if dtype != "f32" else x
        m = fd.ops.max(xf, [1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(xf, m))
        lse = fd.ops.add(fd.ops.log(fd.ops.sum(e, [1], keepdim=True)), m)
        target = fd.ops.take_along_axis(x, fd.ops.broadcast(y, [False, True]), 1)
        target = fd.ops.cast(target, DataType.Float) if dtype != "f32" else target
        fd.add_output(fd.ops.squeeze(fd.ops.sub(lse, target), [1]))
    return fd


def build_ce_bwd(dtype: str, shape: Sequence[int]) -> FusionDefinition:
    """Cross-entropy backward (mean reduction, ignore_index -100): grad_logits =
    (softmax(x) - one_hot(y)) * grad / count on rows whose label is not ignored, else 0.
    grad (the incoming gradient of the loss) and count (the forward's non-ignored row count)
    are runtime scalars, as AOT's backward receives them; one-hot is iota(V) == y."""
    with FusionDefinition("ce_bwd") as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=FD_DTYPES[dtype])
        y = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        grad = fd.define_scalar(dtype=DataType.Double)
        count = fd.define_scalar(dtype=DataType.Double)
        xf = fd.ops.cast(x, DataType.Float) if dtype != "f32" else x
        m = fd.ops.max(xf, [1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(xf, m))
        p = fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True))
        ne = fd.ops.ne(y, IGNORE_INDEX)
        safe = fd.ops.broadcast(fd.ops.where(ne, y, 0), [False, True])
        classes = fd.ops.broadcast(fd.ops.iota(fd.ops.size(x, 1), dtype=DataType.Int), [True, False])
        one_hot = fd.ops.cast(fd.ops.eq(classes, safe), DataType.Float)
        # where() of two Double scalars is a Double tensor (as in nvFuser): the f32 gradient
        # needs the scale in f32, as AOT's backward graph has it.
        scale = fd.ops.cast(fd.ops.where(ne, grad / count, 0.0), DataType.Float)
        scale = fd.ops.broadcast(scale, [False, True])
        dx = fd.ops.mul(fd.ops.sub(p, one_hot), scale)
        fd.add_output(fd.ops.cast(dx, FD_DTYPES[dtype]) if dtype != "f32" else dx)
    return fd


def build_softmax(dtype: str, shape: Sequence[int]) -> FusionDefinition:
    with FusionDefinition("softmax") as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=FD_DTYPES[dtype])
        xf = fd.ops.cast(x, DataType.Float) if dtype != "f32" else x
        e = fd.ops.exp(fd.ops.sub(xf, fd.ops.max(xf, [1], keepdim=True)))
        y = fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True))
        fd.add_output(fd.ops.cast(y, FD_DTYPES[dtype]) if dtype != "f32" else y)
    return fd


def build_layer_norm(dtype: str, shape: Sequence[int]) -> FusionDefinition:
    """y = (x - mean) * rsqrt(var + 1e-5) * weight + bias over the last dim (biased variance)."""
    with FusionDefinition("layer_norm") as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=FD_DTYPES[dtype])
        w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=FD_DTYPES[dtype])
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=FD_DTYPES[dtype])
        xf = fd.ops.cast(x, DataType.Float) if dtype != "f32" else x
        h = fd.ops.size(x, 1)
        mean = fd.ops.div(fd.ops.sum(xf, [1], keepdim=True), h)
        xc = fd.ops.sub(xf, mean)
        var = fd.ops.div(fd.ops.sum(fd.ops.mul(xc, xc), [1], keepdim=True), h)
        rstd = fd.ops.rsqrt(fd.ops.add(var, LN_EPS))
        wf = fd.ops.broadcast(fd.ops.cast(w, DataType.Float) if dtype != "f32" else w, [True, False])
        bf = fd.ops.broadcast(fd.ops.cast(b, DataType.Float) if dtype != "f32" else b, [True, False])
        out = fd.ops.add(fd.ops.mul(fd.ops.mul(xc, rstd), wf), bf)
        fd.add_output(fd.ops.cast(out, FD_DTYPES[dtype]) if dtype != "f32" else out)
    return fd


def build_rope(dtype: str, shape: Sequence[int]) -> FusionDefinition:
    """Llama-2 (HF) rotary embedding of q and k: x * cos + rotate_half(x) * sin with
    rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]); math in f32, outputs in the input dtype.
    q, k: [B, H, S, D] (D static); cos, sin: [S, D], broadcast over B and H."""
    head = shape[3]
    half = head // 2
    with FusionDefinition("rope") as fd:
        q = fd.define_tensor(shape=[-1, -1, -1, head], contiguity=True, dtype=FD_DTYPES[dtype])
        k = fd.define_tensor(shape=[-1, -1, -1, head], contiguity=True, dtype=FD_DTYPES[dtype])
        cos = fd.define_tensor(shape=[-1, head], contiguity=True, dtype=FD_DTYPES[dtype])
        sin = fd.define_tensor(shape=[-1, head], contiguity=True, dtype=FD_DTYPES[dtype])

        def f32(t):
            return fd.ops.cast(t, DataType.Float) if dtype != "f32" else t

        cos_b = fd.ops.broadcast(f32(cos), [True, True, False, False])
        sin_b = fd.ops.broadcast(f32(sin), [True, True, False, False])
        for t in (q, k):
            lead = [fd.ops.size(t, d) for d in range(3)]
            x1 = fd.ops.slice(t, [0, 0, 0, 0], [*lead, half])
            x2 = fd.ops.slice(t, [0, 0, 0, half], [*lead, head])
            rot = fd.ops.cat([fd.ops.neg(f32(x2)), f32(x1)], dim=3)
            out = fd.ops.add(fd.ops.mul(f32(t), cos_b), fd.ops.mul(rot, sin_b))
            fd.add_output(fd.ops.cast(out, FD_DTYPES[dtype]) if dtype != "f32" else out)
    return fd


def build_bcast_chain(dtype: str, shape: Sequence[int]) -> FusionDefinition:
    """broadcast → cast(bf16) → squeeze → cast(f32): the pre-segmentation passes should leave
    one rounding pointwise kernel (x → bf16 → f32)."""
    with FusionDefinition("bcast_chain") as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=FD_DTYPES[dtype])
        b = fd.ops.broadcast(x, [False, True, False])
        c = fd.ops.cast(b, DataType.BFloat16)
        s = fd.ops.squeeze(c, [1])
        fd.add_output(fd.ops.cast(s, DataType.Float))
    return fd


GPT2_HEAD = 64
CHAIN_OPS = 5000


def build_gpt2_epilogues(dtype: str, shape: Sequence[int]) -> FusionDefinition:
    """The elementwise/normalization work of a GPT-2 block around its matmuls, spelled the way
    a framework's graph gives it: every shape a Python int (static extents; broadcasts with
    `broadcast_in_dim` to static shapes), bf16 storage with f32 math and a cast per boundary.
    [B, S, H] tokens; heads H/64. Outputs: ln_1(x); softmax(where(causal, q·kᵀ/√d, -inf));
    h = x + attn_proj + b; ln_2(h); gelu_tanh(fc + b_fc); h + mlp_proj + b_mlp."""
    b, s, h = shape
    t, heads, ffn = b * s, h // GPT2_HEAD, 4 * h
    dt = FD_DTYPES[dtype]
    with FusionDefinition("gpt2_epilogues") as fd:
        def tensor(*dims):
            return fd.define_tensor(shape=list(dims), contiguity=True, dtype=dt)

        x, attn_proj, b_proj = tensor(t, h), tensor(t, h), tensor(h)
        ln1_w, ln1_b, ln2_w, ln2_b = tensor(h), tensor(h), tensor(h), tensor(h)
        scores = tensor(b, heads, s, s)
        causal = fd.define_tensor(shape=[s, s], contiguity=True, dtype=DataType.Bool)
        fc, b_fc = tensor(t, ffn), tensor(ffn)
        mlp_proj, b_mlp = tensor(t, h), tensor(h)

        def f32(v):
            return fd.ops.cast(v, DataType.Float) if dtype != "f32" else v

        def store(v):
            fd.add_output(fd.ops.cast(v, dt) if dtype != "f32" else v)

        def row_vector(v, rows, cols):
            return fd.ops.broadcast_in_dim(f32(v), [rows, cols], [1])

        def layer_norm(v, w, bias):
            mean = fd.ops.mul(fd.ops.sum(v, [1], keepdim=True), 1.0 / h)
            centred = fd.ops.sub(v, fd.ops.broadcast_in_dim(mean, [t, h], [0, 1]))
            var = fd.ops.mul(fd.ops.sum(fd.ops.mul(centred, centred), [1], keepdim=True), 1.0 / h)
            rstd = fd.ops.broadcast_in_dim(fd.ops.rsqrt(fd.ops.add(var, LN_EPS)), [t, h], [0, 1])
            return fd.ops.add(fd.ops.mul(fd.ops.mul(centred, rstd), row_vector(w, t, h)), row_vector(bias, t, h))

        xf = f32(x)
        store(layer_norm(xf, ln1_w, ln1_b))
        scaled = fd.ops.mul(f32(scores), 1.0 / math.sqrt(GPT2_HEAD))
        masked = fd.ops.where(fd.ops.broadcast_in_dim(causal, [b, heads, s, s], [2, 3]), scaled, float("-inf"))
        peak = fd.ops.broadcast_in_dim(fd.ops.max(masked, [3]), [b, heads, s, s], [0, 1, 2])
        e = fd.ops.exp(fd.ops.sub(masked, peak))
        total = fd.ops.broadcast_in_dim(fd.ops.sum(e, [3]), [b, heads, s, s], [0, 1, 2])
        store(fd.ops.div(e, total))
        resid = fd.ops.add(xf, fd.ops.add(f32(attn_proj), row_vector(b_proj, t, h)))
        store(resid)
        store(layer_norm(resid, ln2_w, ln2_b))
        pre = fd.ops.add(f32(fc), row_vector(b_fc, t, ffn))
        inner = fd.ops.mul(fd.ops.add(pre, fd.ops.mul(fd.ops.mul(fd.ops.mul(pre, pre), pre), 0.044715)),
                           math.sqrt(2.0 / math.pi))
        store(fd.ops.mul(fd.ops.mul(pre, 0.5), fd.ops.add(fd.ops.tanh(inner), 1.0)))
        store(fd.ops.add(resid, fd.ops.add(f32(mlp_proj), row_vector(b_mlp, t, h))))
    return fd


def build_chain(dtype: str, shape: Sequence[int]) -> FusionDefinition:
    """CHAIN_OPS dependent pointwise ops (x*0.999 + 0.001, alternating with tanh): a generated
    fusion far larger than hand-written ones; tests that compile time stays linear."""
    with FusionDefinition("chain") as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=FD_DTYPES[dtype])
        v = fd.ops.cast(x, DataType.Float) if dtype != "f32" else x
        for i in range(CHAIN_OPS // 2):
            v = fd.ops.add(fd.ops.mul(v, 0.999), 0.001) if i % 8 else fd.ops.tanh(v)
        fd.add_output(fd.ops.cast(v, FD_DTYPES[dtype]) if dtype != "f32" else v)
    return fd


# --------------------------------------------------------------------------- inputs (never zeros)


def _logits(rng: np.random.Generator, n: int, v: int, dtype: str) -> np.ndarray:
    # Normal logits with std 2: a realistic softmax spread, no zeros in practice, no overflow.
    x = rng.standard_normal((n, v), dtype=np.float32) * np.float32(2.0)
    return x.astype(NP_DTYPES[dtype])


def _labels(rng: np.random.Generator, n: int, v: int, ignore_fraction: float) -> np.ndarray:
    y = rng.integers(0, v, size=n, dtype=np.int64)
    if ignore_fraction > 0 and n > 1:
        y[rng.random(n) < ignore_fraction] = IGNORE_INDEX
        y[0] = max(y[0], 0)  # at least one row counts
    return y


def inputs_ce_fwd_aot(rng, shape, dtype):
    n, v = shape
    return [_logits(rng, n, v, dtype), _labels(rng, n, v, 0.05)]


def inputs_ce_fwd_nvf(rng, shape, dtype):
    n, v = shape
    return [_logits(rng, n, v, dtype), _labels(rng, n, v, 0.0)]


def inputs_ce_bwd(rng, shape, dtype):
    n, v = shape
    y = _labels(rng, n, v, 0.05)
    return [_logits(rng, n, v, dtype), y, 1.0, float(np.count_nonzero(y != IGNORE_INDEX))]


def inputs_rows(rng, shape, dtype):
    n, v = shape
    return [_logits(rng, n, v, dtype)]


def inputs_layer_norm(rng, shape, dtype):
    n, h = shape
    x = (rng.standard_normal((n, h), dtype=np.float32) + np.float32(0.5)).astype(NP_DTYPES[dtype])
    w = rng.uniform(0.5, 1.5, h).astype(np.float32).astype(NP_DTYPES[dtype])
    b = rng.uniform(-0.5, 0.5, h).astype(np.float32).astype(NP_DTYPES[dtype])
    return [x, w, b]


def inputs_rope(rng, shape, dtype):
    b, h, s, d = shape
    q = rng.standard_normal((b, h, s, d), dtype=np.float32).astype(NP_DTYPES[dtype])
    k = rng.standard_normal((b, h, s, d), dtype=np.float32).astype(NP_DTYPES[dtype])
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, d, 2, dtype=np.float64) / d))
    freqs = np.outer(np.arange(s, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    # Position 0 has cos 1, sin 0 exactly, as in the model: the zeros are the data's, not filler.
    return [q, k, np.cos(emb).astype(np.float32).astype(NP_DTYPES[dtype]),
            np.sin(emb).astype(np.float32).astype(NP_DTYPES[dtype])]


# --------------------------------------------------------------------------- numpy references


def inputs_gpt2_epilogues(rng, shape, dtype):
    b, s, h = shape
    t, heads, ffn = b * s, h // GPT2_HEAD, 4 * h
    npd = NP_DTYPES[dtype]

    def normal(*dims):
        return rng.standard_normal(dims, dtype=np.float32).astype(npd)

    causal = np.tril(np.ones((s, s), dtype=bool))
    return [normal(t, h), normal(t, h), normal(h), normal(h), normal(h), normal(h), normal(h),
            normal(b, heads, s, s), causal, normal(t, ffn), normal(ffn), normal(t, h), normal(h)]


def inputs_chain(rng, shape, dtype):
    return [rng.standard_normal(shape, dtype=np.float32).astype(NP_DTYPES[dtype])]


def _f64(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def _log_softmax64(x):
    xf = _f64(x)
    m = xf.max(axis=1, keepdims=True)
    return xf - m - np.log(np.exp(xf - m).sum(axis=1, keepdims=True))


def ref_ce_fwd_aot(x, y):
    logp = _log_softmax64(x)
    ne = y != IGNORE_INDEX
    picked = logp[np.arange(len(y)), np.where(ne, y, 0)]
    return [np.array((-picked * ne).sum() / ne.sum(), dtype=np.float32)]


def ref_ce_fwd_nvf(x, y):
    xf = _f64(x)
    m = xf.max(axis=1)
    lse = np.log(np.exp(xf - m[:, None]).sum(axis=1)) + m
    return [(lse - xf[np.arange(len(y)), y]).astype(np.float32)]


def ref_ce_bwd(x, y, grad, count):
    p = np.exp(_log_softmax64(x))
    ne = y != IGNORE_INDEX
    p[np.arange(len(y)), np.where(ne, y, 0)] -= 1.0
    dx = p * np.where(ne, grad / count, 0.0)[:, None]
    return [dx.astype(np.float32).astype(x.dtype)]


def ref_softmax(x):
    return [np.exp(_log_softmax64(x)).astype(np.float32).astype(x.dtype)]


def ref_layer_norm(x, w, b):
    xf = _f64(x)
    mean = xf.mean(axis=1, keepdims=True)
    var = ((xf - mean) ** 2).mean(axis=1, keepdims=True)
    y = (xf - mean) / np.sqrt(var + LN_EPS) * _f64(w) + _f64(b)
    return [y.astype(np.float32).astype(x.dtype)]


def ref_rope(q, k, cos, sin):
    outs = []
    for t in (q, k):
        tf = _f64(t)
        half = tf.shape[-1] // 2
        rot = np.concatenate([-tf[..., half:], tf[..., :half]], axis=-1)
        outs.append((tf * _f64(cos) + rot * _f64(sin)).astype(np.float32).astype(t.dtype))
    return outs


def ref_bcast_chain(x):
    return [np.asarray(x).astype(BF16).astype(np.float32)]


def ref_gpt2_epilogues(x, attn_proj, b_proj, ln1_w, ln1_b, ln2_w, ln2_b, scores, causal, fc, b_fc, mlp_proj, b_mlp):
    dtype = np.asarray(x).dtype

    def ln(v, w, b):
        mean = v.mean(axis=1, keepdims=True)
        var = ((v - mean) ** 2).mean(axis=1, keepdims=True)
        return (v - mean) / np.sqrt(var + LN_EPS) * _f64(w) + _f64(b)

    xf = _f64(x)
    masked = np.where(causal, _f64(scores) / math.sqrt(GPT2_HEAD), -np.inf)
    e = np.exp(masked - masked.max(axis=3, keepdims=True))
    resid = xf + _f64(attn_proj) + _f64(b_proj)
    pre = _f64(fc) + _f64(b_fc)
    gelu = 0.5 * pre * (1 + np.tanh(math.sqrt(2 / math.pi) * (pre + 0.044715 * pre ** 3)))
    outs = [ln(xf, ln1_w, ln1_b), e / e.sum(axis=3, keepdims=True), resid, ln(resid, ln2_w, ln2_b), gelu,
            resid + _f64(mlp_proj) + _f64(b_mlp)]
    return [o.astype(np.float32).astype(dtype) for o in outs]


def ref_chain(x):
    v = _f64(x)
    for i in range(CHAIN_OPS // 2):
        v = v * 0.999 + 0.001 if i % 8 else np.tanh(v)
    return [v.astype(np.float32).astype(np.asarray(x).dtype)]


# --------------------------------------------------------------------------- minimum bytes


def _n_bytes(dtype: str, *dims: int) -> int:
    return ITEMSIZE[dtype] * math.prod(dims)


def min_ce_fwd_aot(shape, dtype):
    n, v = shape
    return _n_bytes(dtype, n, v) + _n_bytes("i64", n) + 4


def min_ce_fwd_nvf(shape, dtype):
    n, v = shape
    return _n_bytes(dtype, n, v) + _n_bytes("i64", n) + 4 * n


def min_ce_bwd(shape, dtype):
    n, v = shape
    return 2 * _n_bytes(dtype, n, v) + _n_bytes("i64", n)


def min_rows_inout(shape, dtype):
    n, v = shape
    return 2 * _n_bytes(dtype, n, v)


def min_layer_norm(shape, dtype):
    n, h = shape
    return 2 * _n_bytes(dtype, n, h) + 2 * _n_bytes(dtype, h)


def min_rope(shape, dtype):
    b, h, s, d = shape
    return 4 * _n_bytes(dtype, b, h, s, d) + 2 * _n_bytes(dtype, s, d)


def min_bcast_chain(shape, dtype):
    n, m = shape
    return _n_bytes(dtype, n, m) + 4 * n * m


def min_gpt2_epilogues(shape, dtype):
    b, s, h = shape
    t, heads = b * s, h // GPT2_HEAD
    token = _n_bytes(dtype, t, h)
    # read: x, attn_proj, mlp_proj, fc, scores, the causal mask, 7 vectors of H and b_fc (4H);
    # write: ln_1, ln_2, the two residuals, gelu, the attention probabilities.
    read = 3 * token + _n_bytes(dtype, t, 4 * h) + _n_bytes(dtype, b, heads, s, s) + s * s + _n_bytes(dtype, 11 * h)
    written = 4 * token + _n_bytes(dtype, t, 4 * h) + _n_bytes(dtype, b, heads, s, s)
    return read + written


def min_chain(shape, dtype):
    return 2 * _n_bytes(dtype, *shape)


# --------------------------------------------------------------------------- torch (optional)
# The same math as the fusion, written the way a torch user would; timed eager and compiled.


def torch_ce_fwd_aot(torch):
    F = torch.nn.functional
    return lambda x, y: F.cross_entropy(x.float(), y, ignore_index=IGNORE_INDEX)


def torch_ce_fwd_nvf(torch):
    return lambda x, y: torch.logsumexp(x.float(), 1) - x.gather(1, y[:, None]).squeeze(1).float()


def torch_ce_bwd(torch):
    def fn(x, y, grad, count):
        p = torch.softmax(x.float(), 1)
        ne = y != IGNORE_INDEX
        one_hot = torch.nn.functional.one_hot(torch.where(ne, y, 0), x.shape[1]).float()
        scale = torch.where(ne, grad / count, 0.0)[:, None]
        return ((p - one_hot) * scale).to(x.dtype)
    return fn


def torch_softmax(torch):
    return lambda x: torch.softmax(x.float(), 1).to(x.dtype)


def torch_layer_norm(torch):
    F = torch.nn.functional
    return lambda x, w, b: F.layer_norm(x, (x.shape[1],), w, b, LN_EPS)


def torch_rope(torch):
    def rotate_half(t):
        half = t.shape[-1] // 2
        return torch.cat((-t[..., half:], t[..., :half]), dim=-1)

    def fn(q, k, cos, sin):
        c, s = cos.float(), sin.float()
        return ((q.float() * c + rotate_half(q.float()) * s).to(q.dtype),
                (k.float() * c + rotate_half(k.float()) * s).to(k.dtype))
    return fn


def torch_bcast_chain(torch):
    return lambda x: x[:, None, :].to(torch.bfloat16).squeeze(1).float()


def torch_gpt2_epilogues(torch):
    F = torch.nn.functional

    def fn(x, attn_proj, b_proj, ln1_w, ln1_b, ln2_w, ln2_b, scores, causal, fc, b_fc, mlp_proj, b_mlp):
        h = x.shape[1]
        probs = torch.softmax((scores.float() / math.sqrt(GPT2_HEAD)).masked_fill(~causal, float("-inf")), -1)
        resid = x.float() + attn_proj.float() + b_proj.float()
        out = [F.layer_norm(x.float(), (h,), ln1_w.float(), ln1_b.float(), LN_EPS), probs, resid,
               F.layer_norm(resid, (h,), ln2_w.float(), ln2_b.float(), LN_EPS),
               F.gelu(fc.float() + b_fc.float(), approximate="tanh"), resid + mlp_proj.float() + b_mlp.float()]
        return tuple(o.to(x.dtype) for o in out)
    return fn


def torch_chain(torch):
    def fn(x):
        v = x.float()
        for i in range(CHAIN_OPS // 2):
            v = v * 0.999 + 0.001 if i % 8 else torch.tanh(v)
        return v.to(x.dtype)
    return fn


# --------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Kind:
    name: str
    build: Callable[[str, Sequence[int]], FusionDefinition]
    make_inputs: Callable[[np.random.Generator, Sequence[int], str], list]
    reference: Callable[..., list]
    min_bytes: Callable[[Sequence[int], str], int]
    torch_fn: Callable  # torch module -> callable on the same inputs
    full: list[tuple[str, tuple[int, ...]]]  # (dtype, shape) for GPU machines
    quick: list[tuple[str, tuple[int, ...]]]  # (dtype, shape) for the cpu backend
    tiny: tuple[int, ...]  # the smallest sensible shape (smoke tests)
    rows_dims: int = 1  # leading dims that are "rows" (may be cut to count bytes cheaply)
    doc: str = ""


def _both(shapes):
    return [(dt, s) for s in shapes for dt in ("bf16", "f32")]


CE_FULL = [(4096, 32064), (4096, 128256), (16384, 32768)]
CE_QUICK = [(64, 4096), (64, 32000), (32, 32768)]

KINDS: dict[str, Kind] = {k.name: k for k in [
    Kind("ce_fwd_aot", build_ce_fwd_aot, inputs_ce_fwd_aot, ref_ce_fwd_aot, min_ce_fwd_aot, torch_ce_fwd_aot,
         _both(CE_FULL), _both(CE_QUICK), (2, 64),
         doc="cross-entropy fwd, torch.compile AOT graph form (gather on log-softmax, mean)"),
    Kind("ce_fwd_nvf", build_ce_fwd_nvf, inputs_ce_fwd_nvf, ref_ce_fwd_nvf, min_ce_fwd_nvf, torch_ce_fwd_nvf,
         _both(CE_FULL), _both(CE_QUICK), (2, 64),
         doc="cross-entropy fwd, nvFuser benchmark form (lse - take_along_axis(x), per row)"),
    Kind("ce_bwd", build_ce_bwd, inputs_ce_bwd, ref_ce_bwd, min_ce_bwd, torch_ce_bwd,
         _both(CE_FULL), _both(CE_QUICK), (2, 64),
         doc="cross-entropy bwd: (softmax - one_hot) * grad/count"),
    Kind("softmax", build_softmax, inputs_rows, ref_softmax, min_rows_inout, torch_softmax,
         [("f32", (8192, 32768))], [("f32", (64, 8192))], (4, 128)),
    Kind("layer_norm", build_layer_norm, inputs_layer_norm, ref_layer_norm, min_layer_norm, torch_layer_norm,
         [("f32", (4096, 16384))], [("f32", (64, 4096))], (4, 128)),
    Kind("rope", build_rope, inputs_rope, ref_rope, min_rope, torch_rope,
         [("bf16", (2, 32, 4096, 128))], [("bf16", (1, 4, 256, 128))], (1, 1, 2, 128), rows_dims=3,
         doc="llama-2-7b-like RoPE forward of q and k"),
    Kind("bcast_chain", build_bcast_chain, inputs_rows, ref_bcast_chain, min_bcast_chain, torch_bcast_chain,
         [("f32", (8192, 8192))], [("f32", (256, 4096))], (2, 64),
         doc="broadcast -> cast(bf16) -> squeeze -> cast(f32)"),
    Kind("gpt2_epilogues", build_gpt2_epilogues, inputs_gpt2_epilogues, ref_gpt2_epilogues, min_gpt2_epilogues,
         torch_gpt2_epilogues, [("bf16", (8, 1024, 768))], [("bf16", (2, 128, 768))], (1, 8, 64),
         doc="GPT-2 block epilogues around the matmuls (2 layer-norms, masked softmax, bias+gelu, "
             "residuals), static-shape spelling as a framework emits it"),
    Kind("chain", build_chain, inputs_chain, ref_chain, min_chain, torch_chain,
         [("f32", (4096, 4096))], [("f32", (64, 1024))], (2, 64),
         doc=f"{CHAIN_OPS} dependent pointwise ops"),
]}


@dataclass(frozen=True)
class Case:
    kind: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def spec(self) -> Kind:
        return KINDS[self.kind]

    @property
    def label(self) -> str:
        return f"{self.kind} {self.dtype} [{', '.join(map(str, self.shape))}]"

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.dtype}:{'x'.join(map(str, self.shape))}"

    def build(self, shape: Sequence[int] | None = None) -> FusionDefinition:
        return self.spec.build(self.dtype, tuple(shape or self.shape))

    def inputs(self, seed: int = 0, shape: Sequence[int] | None = None) -> list:
        return self.spec.make_inputs(np.random.default_rng(seed), tuple(shape or self.shape), self.dtype)

    def min_bytes(self, shape: Sequence[int] | None = None) -> int:
        return self.spec.min_bytes(tuple(shape or self.shape), self.dtype)

    def reference(self, inputs: Sequence[object]) -> list[np.ndarray]:
        return self.spec.reference(*inputs)

    def with_rows(self, max_bytes: int) -> tuple[int, ...]:
        """The shape with its row dims cut down until the minimum traffic is at most max_bytes:
        same row length, hence the same schedule and the same bytes per row."""
        shape = list(self.shape)
        nd = self.spec.rows_dims
        while self.spec.min_bytes(tuple(shape), self.dtype) > max_bytes:
            d = next((i for i in range(nd) if shape[i] > 1), None)
            if d is None:
                break
            shape[d] = max(1, shape[d] // 2)
        return tuple(shape)


def parse_case(key: str) -> Case:
    kind, dtype, shape = key.split(":")
    return Case(kind, dtype, tuple(int(s) for s in shape.split("x")))


def all_cases(mode: str) -> list[Case]:
    """mode "quick" (cpu-sized shapes), "full" (the issue's shapes, for GPU machines) or
    "gpu-quick" (a GPU session's few minutes: each kind once, at its first full shape, in bf16
    where it has bf16 rows; the chain's 4096-op compile is left out)."""
    if mode == "gpu-quick":
        picked = []
        for k in KINDS.values():
            if k.name == "chain":
                continue
            dt, shape = next(((dt, s) for dt, s in k.full if dt == "bf16"), k.full[0])
            picked.append(Case(k.name, dt, tuple(shape)))
        return picked
    return [Case(k.name, dt, tuple(s)) for k in KINDS.values() for dt, s in (k.quick if mode == "quick" else k.full)]


def check(outputs: Sequence[object], expected: Sequence[np.ndarray]) -> tuple[bool, float]:
    """(ok, worst error relative to the largest reference magnitude) over all outputs.
    Bound: 2e-2 for bf16 outputs (one rounding ≈ 4e-3 relative, plus accumulation order),
    1e-4 for f32."""
    worst, ok = 0.0, len(outputs) == len(expected)
    for out, ref in zip(outputs, expected):
        out64 = _f64(out)
        ref64 = _f64(ref)
        if out64.shape != ref64.shape:
            return False, float("inf")
        scale = max(float(np.abs(ref64).max(initial=0.0)), 1e-30)
        err = float(np.abs(out64 - ref64).max(initial=0.0)) / scale
        if not np.isfinite(out64).all():
            err = float("inf")
        worst = max(worst, err)
        ok = ok and err <= (2e-2 if np.asarray(ref).dtype == BF16 else 1e-4)
    return ok, worst
