"""`fuser.explain(fn, *args)`: compile fn through fuser, run it once (and its backward,
when an output requires grad), and report per graph how many fusions and kernels replaced
how many ATen ops, and what stayed eager and why."""

from __future__ import annotations

import torch

from fuser.torch_backend.registration import make_backend
from fuser.torch_backend.report import Explanation, GraphReport


def _outputs_needing_grad(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out] if out.requires_grad else []
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _outputs_needing_grad(o)]
    if isinstance(out, dict):
        return _outputs_needing_grad(list(out.values()))
    return []


def _leaves(fn, args) -> list[torch.Tensor]:
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad and a.is_leaf]
    if isinstance(fn, torch.nn.Module):
        leaves += [p for p in fn.parameters() if p.requires_grad]
    return leaves


def explain(fn, *args, dynamic: bool | None = None, backward: bool = True, quiet: bool = False,
            options: dict | None = None, **kwargs) -> Explanation:
    """Compiles `fn` with backend="fuser", calls it on args (and runs the backward of the sum
    of its outputs that require grad, unless backward=False), prints and returns the record.
    Resets Dynamo first (torch._dynamo.reset()), so fn is traced afresh for this backend.
    options: the backend's, as torch.compile takes them (e.g. {"autotune": True}: the record
    then says, per kernel, what tuning chose and by how much it beat the heuristic)."""
    reports: list[GraphReport] = []
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=make_backend(reports, options), dynamic=dynamic)
    out = compiled(*args, **kwargs)
    needing = _outputs_needing_grad(out) if backward else []
    if needing:
        # The backward runs to compile and count it; the gradients it leaves are put back as
        # they were, so explaining a model does not change its training state.
        leaves = _leaves(fn, args)
        saved = [t.grad for t in leaves]
        sum(t.float().sum() for t in needing).backward()
        for t, g in zip(leaves, saved):
            t.grad = g
    explanation = Explanation(reports)
    if not quiet:
        print(explanation)
    return explanation
