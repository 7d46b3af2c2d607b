"""The decompositions AOTAutograd applies before fuser sees a graph.

torch's core-ATen set, plus the composites core ATen keeps whole but fuser needs as
primitives: softmax / log-softmax (amax, sub, exp, sum, log), layer-norm (var_mean, rsqrt,
mul, add), gelu (erf or tanh form). Their backwards are in the core set already.
Matmuls, embedding and dropout are not decomposed: they stay eager (a later fuser may take
them: add translations, not decompositions)."""

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
]


def fuser_decompositions() -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(EXTRA_DECOMPOSITIONS))
    return table
