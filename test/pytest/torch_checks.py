"""Shared by the torch.compile tests: compile a function with backend="fuser", run it and its
eager twin on clones of the same arguments, compare outputs and gradients."""

from __future__ import annotations

import pytest
import torch

from fuser.torch_backend import make_backend


F32_TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


def _clone_args(args):
    return [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]


def compare_with_eager(fn, *args, dynamic=None, tol=F32_TOL, backward=True, params=()):
    """Runs fn compiled with fuser and eagerly; checks outputs and gradients (of args that
    require grad and of `params`) agree; returns the graph reports."""
    reports = []
    compiled = torch.compile(fn, backend=make_backend(reports), dynamic=dynamic)
    fused_args, eager_args = _clone_args(args), _clone_args(args)
    got, want = compiled(*fused_args), fn(*eager_args)
    torch.testing.assert_close(got, want, **tol)
    if backward:
        got_grads = _grads(got, fused_args, params)
        want_grads = _grads(want, eager_args, params)
        assert len(got_grads) == len(want_grads) > 0
        for g, w in zip(got_grads, want_grads):
            torch.testing.assert_close(g, w, **tol)
    for report in reports:
        for region in report.regions:
            assert region.failed is None, f"{region.name} was refused: {region.failed}"
    return reports


def _grads(out, args, params):
    outs = out if isinstance(out, (tuple, list)) else [out]
    seed = torch.Generator().manual_seed(1)
    loss = sum((o.float() * torch.randn(o.shape, generator=seed)).sum() for o in outs)
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad] + list(params)
    return torch.autograd.grad(loss, leaves)


def report_of(reports, kind):
    (report,) = [r for r in reports if r.kind == kind]
    return report


