"""`FusionDefinition.execute`: backend choice and output layouts.

The reference backend runs here; "cpu" and "cuda" go to `lowering` (imported lazily:
nothing in the dialect depends on the lowering)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fuser_dialect.fusion import output_order
from fuser_dialect.inputs import apply_layout, is_torch_tensor
from fuser_dialect.interpreter import interpret

BACKENDS = ("reference", "cpu", "cuda")


def default_backend() -> str:
    """"cuda" when a GPU and pycuda are usable, else "cpu"; "reference" if no lowering can run."""
    try:
        from lowering.backends import pick_backend
    except ImportError:
        return "reference"
    return pick_backend()


def execute_fusion(fd, inputs: Sequence[object], backend: str | None, disable: tuple[str, ...]):
    if backend is None:
        backend = default_backend()
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)} or None")
    if backend == "reference":
        f = fd.fusion
        outs = interpret(f, inputs)
        # apply_layout copies: an output never aliases an input array (a fusion may return one).
        laid_out = [apply_layout(o, output_order(f, i)[0]) if np.ndim(o) else o for i, o in enumerate(outs)]
        return _like_inputs(laid_out, inputs)
    return fd._get_executor().execute(inputs, backend=backend, disable=disable)


def _like_inputs(outputs, inputs):
    """Outputs are torch tensors when the inputs were (numpy otherwise)."""
    if not any(is_torch_tensor(x) for x in inputs):
        return outputs
    import torch

    from fuser_dialect.types import numpy_dtype

    result = []
    for o in outputs:
        if o.dtype == numpy_dtype("bf16"):
            result.append(torch.from_numpy(o.view("int16").copy()).view(torch.bfloat16))
        else:
            result.append(torch.from_numpy(o.copy()))
    return result
