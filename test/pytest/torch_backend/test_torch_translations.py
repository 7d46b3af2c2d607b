"""ATen ops real models left eager, now translated (or decomposed into translated ops): each
compared with eager, forward and (for floats) backward, and checked to run inside a fusion."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from fuser.torch_backend import make_backend
from torch_checks import compare_with_eager, fresh_dynamo  # noqa: F401

x46 = lambda: torch.randn(4, 6, requires_grad=True)  # noqa: E731

CASES = {
    # the `.default` overloads of tensor binary ops were never registered
    "maximum/minimum": (lambda x: torch.maximum(x, x * 0.5) + torch.minimum(x, x.flip(0)), x46, "aten.maximum.default"),
    "logical_and/or": (lambda x: torch.where(torch.logical_and(x > 0, x < 1) | torch.logical_or(x > 2, x < -1), x, -x),
                       x46, "aten.logical_and.default"),
    "logical_xor": (lambda x: torch.where(torch.logical_xor(x > 0, x < 0.5), x * 2, x), x46, "aten.logical_xor.default"),
    "div floor": (lambda x: torch.div(x * 3, 1.7, rounding_mode="floor") + x, x46, "aten.div.Tensor_mode"),
    "div trunc": (lambda x: torch.div(x * 3, 0.3, rounding_mode="trunc") + x, x46, "aten.div.Tensor_mode"),
    "split_with_sizes": (lambda x: (x * 2).split([2, 4], 1)[1].exp(), x46, "aten.split_with_sizes.default"),
    "arange": (lambda x: torch.arange(6) * x + torch.arange(2, 14, 2, dtype=torch.float32), x46,
               "aten.arange.start_step"),
    "cumsum": (lambda x: (x * 2).cumsum(1).tanh(), x46, "aten.cumsum.default"),
    "flip": (lambda x: (x * 2).flip(1, 0) + x, x46, "aten.flip.default"),
    "clamp tensors": (lambda x: torch.clamp(x * 2, torch.zeros(6), torch.ones(6)) + x, x46, "aten.where.self"),
    "group_norm": (lambda x: F.group_norm(x.view(2, 4, 3), 2) * 2, x46, "aten.var_mean.correction"),
    "vector_norm": (lambda x: torch.linalg.vector_norm(x, dim=-1) * 2, x46, "aten.pow.Tensor_Scalar"),
    "any": (lambda x: torch.where((x > 0).any(1, keepdim=True), x, -x) * 2, x46, "aten.sum.dim_IntList"),
    "activations": (lambda x: F.hardtanh(x) + F.leaky_relu(x) + F.elu(x), x46, "aten.where.self"),
    "repeat": (lambda x: (x * 2).repeat(2, 1).exp(), x46, "aten.expand.default"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_translation_matches_eager_and_fuses(name):
    fn, make, op = CASES[name]
    reports = compare_with_eager(fn, make())
    fused = {o for report in reports for region in report.fusions for o in region.ops}
    assert op in fused, f"{op} not fused: {[str(r) for r in reports]}"


def test_integer_division_rounding_modes():
    a = torch.arange(-9, 9)
    fn = lambda a: torch.div(a * 3, 2, rounding_mode="floor") + torch.div(a - 7, 3, rounding_mode="trunc")  # noqa: E731
    compare_with_eager(fn, a, backward=False)


def test_embedding_and_index():
    weight = torch.randn(10, 3, requires_grad=True)
    ids = torch.tensor([[1, 2], [9, 0]])
    reports = compare_with_eager(lambda w, i: F.embedding(i, w) * 2, weight, ids)
    assert "aten.embedding.default" in reports[0].fusions[0].ops
    x = torch.randn(4, 6, requires_grad=True)
    reports = compare_with_eager(lambda x, i: x[:, i] * 2 + 1, x, torch.tensor([[0, -1], [2, 3]]))
    assert "aten.index.Tensor" in reports[0].fusions[0].ops


def test_batch_norm_training_fuses_with_its_neighbours():
    bn = torch.nn.BatchNorm2d(3)
    x = torch.randn(4, 3, 5, 5, requires_grad=True)
    reports = compare_with_eager(lambda x: F.relu(bn(x * 2)), x, params=list(bn.parameters()))
    assert any("aten.var_mean.correction" in r.ops for r in reports[0].fusions)


def test_independent_regions_between_two_library_calls_are_one():
    """Bias gradients of a backward are independent chains: torch's partitioner made each its
    own region; now the regions between the same two library calls are one."""
    def fn(x, w1, w2):
        h = x @ w1
        a, b = h.sin() * 2, h.cos() + 1  # independent of each other
        return (a @ w2).sum() + b.exp().sum()

    args = (torch.randn(4, 5, requires_grad=True), torch.randn(5, 6, requires_grad=True),
            torch.randn(6, 3, requires_grad=True))
    reports = compare_with_eager(fn, *args)
    for report in reports:
        assert report.regions_between_library_calls <= 1, str(report)


def test_dynamic_lengths_do_not_change_pointwise_schedules():
    """A pointwise kernel's outer-dims choice read the dynamic extents: a new sequence length
    crossing its threshold recompiled (llama's RoPE at lengths 8 and 20)."""
    def fn(q, cos):
        return q * cos + q.flip(-1) * 0.5

    reports = []
    compiled = torch.compile(fn, backend=make_backend(reports), dynamic=True)
    for length in (4, 12, 40):
        q, cos = torch.randn(2, 3, length, 8), torch.randn(length, 8)
        torch.testing.assert_close(compiled(q, cos), fn(q, cos))
    (region,) = [r.region for r in reports[0].fusions]
    assert region.fd.cache_info().misses == 1
