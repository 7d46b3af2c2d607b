"""torch.compile(fn, backend="fuser"): PyTorch programs compiled through fuser.

    import torch, fuser
    f = torch.compile(lambda x, y: torch.nn.functional.cross_entropy(x, y), backend="fuser")
    fuser.explain(f_or_fn, x, y)   # which ATen ops became which fusions and kernels

Modules: registration (the backend), decompositions, support (which nodes fuser takes),
op_table + translate_* (ATen → fd.ops), fusion_builder (a partition → FusionDefinition),
runtime (the fused region called per step), partition (the graph pass), report and explain.
Importing this package imports torch; importing `fuser` does not.
"""

from fuser.torch_backend.explain import explain
from fuser.torch_backend.registration import fuser_backend, make_backend

__all__ = ["fuser_backend", "make_backend", "explain"]
