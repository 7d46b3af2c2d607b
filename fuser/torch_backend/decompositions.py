"""The decompositions AOTAutograd applies before fuser sees a graph.

torch's core-ATen set, plus the composites core ATen keeps whole but fuser needs as
primitives: softmax / log-softmax (amax, sub, exp, sum, log), layer-, batch- and group-norm
(var_mean, rsqrt, mul, add), gelu (erf or tanh form), vector norms, clamps and a few
activations. Their backwards are in the core set already.

Minus what must stay whole (`EXCLUDED`, audited against Inductor's `decomps_to_exclude`):
attention stays a library call on every device, as in Inductor. On CPU, SDPA dispatches to
`_scaled_dot_product_flash_attention_for_cpu`, whose core decomposition returns the attention
weights [B, H, S, S] where the op returns its logsumexp [B, H, S]; the backward op, which stays
whole, then reads the weights as the logsumexp and computes wrong gradients (torch's own source
says to exclude it). Decomposed, attention would also materialise the [B, H, S, S] scores.
The other entries of Inductor's list are its own lowering choices (ops it lowers directly or
rewrites in place), not correctness: fuser keeps those decompositions (their pieces are ops it
translates).
"""

from __future__ import annotations

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten

EXTRA_DECOMPOSITIONS = [
    aten._softmax,
    aten._log_softmax,
    aten._safe_softmax,
    aten.native_layer_norm,
    aten.gelu,
    aten.logsumexp,
    aten.rms_norm,
    # norms and activations core ATen keeps whole: their pieces (var_mean, rsqrt, where, pow,
    # sum...) are ops fuser translates, so they fuse with what surrounds them
    aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit_no_training,
    aten._native_batch_norm_legit,
    aten.native_group_norm,
    aten.linalg_vector_norm,
    aten.clamp.Tensor,
    aten.hardtanh,
    aten.leaky_relu,
    aten.elu,
    aten.repeat,
    aten.any,
]

EXCLUDED = {
    aten._scaled_dot_product_flash_attention_for_cpu.default:
        "attention is a library call; the core decomposition's second output is not the logsumexp",
}


def fuser_decompositions() -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(EXTRA_DECOMPOSITIONS))
    for op in EXCLUDED:
        table.pop(op, None)
    for op in STRICTER_THAN_THEIR_DECOMPOSITION:
        if op in table:
            table[op] = _only_where_eager_accepts(table[op])
    return table


STRICTER_THAN_THEIR_DECOMPOSITION = [aten.nll_loss_forward.default, aten.nll_loss2d_forward.default]
"""Ops whose eager kernel refuses inputs their decomposition would compute anyway: nll_loss
(cross_entropy's core) wants int64 (or uint8) targets, its decomposition takes int32 ones. A
compiled program must fail as it fails eagerly, so for such inputs the op stays whole (left to
ATen, which raises)."""


def _only_where_eager_accepts(decomposition):
    def decompose(self, target, *args, **kwargs):
        if target.dtype not in (torch.int64, torch.uint8):
            return NotImplemented  # not decomposed: the op itself, eager, raises torch's error
        return decomposition(self, target, *args, **kwargs)

    return decompose
