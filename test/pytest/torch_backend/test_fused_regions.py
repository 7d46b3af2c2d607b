"""What the fused regions of torch.compile(backend="fuser") keep of eager on graphs real models
produce: attention stays a library call with right gradients; region outputs keep the traced
layout (and views their base); factory regions return tensors; torch's legacy cat rule; regions
with nothing to compute are not built; symbolic slice bounds; one compile across lengths; every
region runs fused or is refused at partition time, and fails as eager fails; every ATen op
counted once. Each test failed before its fix (found running real models)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fuser
from fuser import DataType, FusionDefinition
from fuser.torch_backend import make_backend
from torch_checks import F32_TOL, compare_with_eager, fresh_dynamo, report_of  # noqa: F401

aten = torch.ops.aten


def _sdpa_grads(fn, args, tol):
    """Forward and the gradients of a random cotangent, compiled against eager."""
    reports = []
    compiled = torch.compile(fn, backend=make_backend(reports))
    fused = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    eager = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    got, want = compiled(*fused), fn(*eager)
    torch.testing.assert_close(got, want, **tol)
    cotangent = torch.randn(want.shape, generator=torch.Generator().manual_seed(3)).to(want.dtype)
    got_grads = torch.autograd.grad(got, [a for a in fused if a.requires_grad], cotangent)
    want_grads = torch.autograd.grad(want, [a for a in eager if a.requires_grad], cotangent)
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g, w, **tol)
    return reports


def _qkv(heads_q=4, heads_kv=4, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    shape = lambda h: (2, h, 8, 16)  # noqa: E731
    return [torch.randn(shape(h), generator=g).to(dtype).requires_grad_() for h in (heads_q, heads_kv, heads_kv)]


@pytest.mark.parametrize("form", ["causal", "mask", "gqa", "bf16"])
def test_attention_is_a_library_call_with_the_right_gradients(form):
    """The core decomposition of `_scaled_dot_product_flash_attention_for_cpu` returned the
    attention weights where the logsumexp belongs; the backward op read them as the logsumexp
    (gradient errors of 29 to 192 against gradients of size 2 to 4)."""
    tol = F32_TOL
    if form == "causal":
        fn, args = (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2.0), _qkv()
    elif form == "mask":
        mask = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(1)) > 0
        fn, args = (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask) + 1.0), _qkv()
    elif form == "gqa":
        def fn(q, k, v):
            k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)  # broadcast heads
            return F.scaled_dot_product_attention(q, k, v, is_causal=True).relu()

        args = _qkv(4, 2)
    else:
        fn, args = (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2.0), \
            _qkv(dtype=torch.bfloat16)
        tol = dict(rtol=2e-2, atol=2e-2)
    reports = _sdpa_grads(fn, args, tol)
    for report in reports:
        for region in report.regions:
            assert region.failed is None
            assert not any("scaled_dot_product" in op for op in region.ops), "attention stays a library call"
    eager = {op for r in reports for op in r.eager_ops}
    assert any("scaled_dot_product" in op for op in eager)


def test_region_outputs_have_the_traced_strides():
    """With a (5, 1) and a (5,) input, fuser followed an input's layout for the (5, 5) result
    and the `view` after the region raised."""
    def fn(a, b):
        return ((a + b) * 2).view(25)

    compare_with_eager(fn, torch.randn(5, 1, requires_grad=True), torch.randn(5, requires_grad=True))


def test_a_non_dense_view_leaving_a_region_keeps_its_strides():
    """T5's decoder start: slices of a `full` leave the region as views of it (strides of the
    base); a dense fusion output would break the views after it."""
    def fn(ids):
        shifted = torch.zeros_like(ids)
        shifted[:, 1:] = ids[:, :-1] * 3
        return shifted.view(-1), shifted[:, 1:].t().contiguous().view(-1)

    got = torch.compile(fn, backend="fuser")(torch.arange(16).view(2, 8))
    want = fn(torch.arange(16).view(2, 8))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_one_value_returned_in_two_layouts_is_two_outputs():
    def fn(x):
        y = x * 2.0
        return y, y.t().contiguous().t() + 0.0, y.t()

    x = torch.randn(4, 6)
    got = torch.compile(fn, backend="fuser")(x)
    for g, w in zip(got, fn(x)):
        torch.testing.assert_close(g, w)
        assert g.stride() == w.stride()


@pytest.mark.parametrize("make", [lambda: torch.full((3,), 2.0).exp() * 2, lambda: torch.logspace(0, 2, 5)])
def test_regions_without_tensor_inputs_return_tensors(make):
    got = torch.compile(make, backend="fuser")()
    assert isinstance(got, torch.Tensor) and got.device.type == "cpu"
    torch.testing.assert_close(got, make())


def test_pinverse_runs():
    """`torch.pinverse` crashed: a factory region handed an ndarray to the next ATen op."""
    x = torch.randn(4, 3)
    torch.testing.assert_close(torch.compile(torch.pinverse, backend="fuser")(x), torch.pinverse(x),
                               rtol=1e-4, atol=1e-5)


def test_execute_device_gives_factory_fusions_torch_outputs():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.iota(4, dtype=DataType.Float))
    for kwargs in ({}, {"device": "cpu"}, {"backend": "reference"}):
        (out,) = fd.execute([], **kwargs)
        assert isinstance(out, torch.Tensor) and out.tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="device 'cuda' and backend 'cpu' disagree"):
        fd.execute([], backend="cpu", device="cuda")
    with pytest.raises(ValueError, match="fuser's kernels run on cuda:0"):
        fd.execute([], device="cuda:1")
    with pytest.raises(ValueError, match="expected 'cpu', 'cuda'"):
        fd.execute([], device="tpu")


def test_cat_skips_torchs_legacy_empty_tensor():
    """Hugging Face's DynamicCache starts from torch.tensor([]): the whole region failed with
    `fuser.cat: input 1 has rank 4, input 0 has rank 1` (31 to 79 ops of each LLM ran eagerly)."""
    def fn(x):
        return torch.cat([torch.tensor([]), x * 2.0], dim=-2) + 1.0

    reports = compare_with_eager(fn, torch.randn(2, 3, 4, 5), backward=False)
    assert "aten.cat.default" in report_of(reports, "inference").fusions[0].ops


def test_a_region_with_nothing_to_compute_is_not_built():
    """A region of full-range slices computes nothing: it failed with "the fusion has no
    outputs" at its first call; now it is refused at partition time, saying why."""
    def fn(x):
        a = x[:, 0:9223372036854775807]
        b = a[0:9223372036854775807]
        return a.sin() + 0, b

    reports = []
    compiled = torch.compile(fn, backend=make_backend(reports))
    x = torch.randn(3, 4)
    for g, w in zip(compiled(x), fn(x)):
        torch.testing.assert_close(g, w)
    for region in (r for report in reports for r in report.regions):
        assert region.failed is None or "nothing to compute" in region.failed


def test_scalar_has_no_truth_value():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        n = fd.ops.size(x, 0)
        with pytest.raises(TypeError, match="no truth value"):
            bool(n >= 0)
        fd.add_output(x)


def test_dynamic_negative_slice_bound_keeps_its_shape():
    """`x[:, :-1]` under dynamic=True returned (2, 16, 8): `_bound` read `extent + (-1) >= ...`
    on a symbolic Scalar as always true."""
    fn = lambda x: x[:, :-1] * 2.0  # noqa: E731
    compiled = torch.compile(fn, backend="fuser", dynamic=True)
    for n in (16, 24, 5):
        x = torch.randn(2, n, 8)
        got = compiled(x)
        assert got.shape == (2, n - 1, 8)
        torch.testing.assert_close(got, fn(x))


def test_dynamic_pad_and_slice_compile_once_for_every_length():
    """A causal LM's label shift recompiled for every sequence length: the pad's resize extents
    were concretized (16, 0, 1) -> (24, 0, 1)."""
    def fn(logits, labels):
        shifted = F.pad(labels, (0, 1), value=-100)[:, 1:]
        return F.cross_entropy(logits.transpose(1, 2), shifted, ignore_index=-100)

    reports = []
    compiled = torch.compile(fn, backend=make_backend(reports), dynamic=True)
    for n in (16, 24, 40):
        logits, labels = torch.randn(2, n, 11), torch.randint(0, 11, (2, n))
        torch.testing.assert_close(compiled(logits, labels), fn(logits, labels), **F32_TOL)
    fused = [r.region for report in reports for r in report.fusions]
    assert fused and all(r.fd.cache_info().misses == 1 for r in fused), [r.fd.cache_info() for r in fused]


def test_a_region_that_cannot_compile_is_refused_at_partition_time(monkeypatch):
    """A region fuser cannot compile used to fail at its first call and then run eagerly
    (quantile, 0-d index_add, bf16 batch_norm...). Now the compile happens at partition time:
    a failure there refuses the region, with its reason; nothing falls back at run time."""
    from fuser.torch_backend import runtime

    def cannot_compile(self, args):
        raise NotImplementedError("a fuser limit")

    monkeypatch.setattr(runtime.FusedRegion, "compile_for", cannot_compile)
    reports = []
    fn = lambda x: (x.exp() * 2).sum(1)  # noqa: E731
    x = torch.randn(3, 5)
    torch.testing.assert_close(torch.compile(fn, backend=make_backend(reports))(x), fn(x))
    (report,) = reports
    (region,) = report.regions
    assert region.failed == "NotImplementedError: a fuser limit"
    assert report.fused_ops == 0 and sum(report.eager_ops.values()) == report.aten_ops
    assert "which fuser refused" in report.reasons["aten.exp.default"]


def test_a_fused_region_that_fails_at_run_time_raises(monkeypatch):
    """Never a silent fallback at run time: the error reaches the caller."""
    reports = []
    fn = lambda x: (x.exp() * 2).sum(1)  # noqa: E731
    compiled = torch.compile(fn, backend=make_backend(reports))
    compiled(torch.randn(3, 5))
    region = reports[0].fusions[0].region

    def broken(*args, **kwargs):
        raise RuntimeError("a kernel failed")

    monkeypatch.setattr(region.fd._get_executor(), "execute", broken)  # what every path of a region calls
    with pytest.raises(RuntimeError, match="a kernel failed"):
        compiled(torch.randn(3, 5))


def test_every_aten_op_is_counted_once():
    """The report left the ops of failed regions out of every count: "0 of 3 ATen ops in 0
    fusion(s); 0 op(s) eager"."""
    def fn(x):
        return torch.cat([torch.tensor([]), x * 2.0], dim=-2).cumsum(0) + 1.0

    record = fuser.explain(fn, torch.randn(2, 3, 4), quiet=True)
    for graph in record.graphs:
        assert graph.fused_ops + sum(graph.eager_ops.values()) == graph.aten_ops


def test_a_compiled_program_fails_as_it_fails_eagerly():
    """int32 cross-entropy targets: eager raises `expected target dtype to be Long`; the
    decomposition took them. nll_loss now stays whole for such targets, and ATen raises."""
    x, y = torch.randn(4, 5), torch.tensor([1, 2, 3, 0], dtype=torch.int32)
    with pytest.raises(RuntimeError, match="expected target dtype to be Long"):
        F.cross_entropy(x, y)
    with pytest.raises(RuntimeError, match="expected target dtype to be Long"):
        torch.compile(lambda x, y: F.cross_entropy(x, y), backend="fuser")(x, y)
    torch.testing.assert_close(torch.compile(lambda x, y: F.cross_entropy(x, y), backend="fuser")(x, y.long()),
                               F.cross_entropy(x, y.long()))


def test_an_extent_one_slice_broadcasts_against_a_wider_operand():
    """ormqr's backward: a [1] slice unsqueezed to [1, 1] times a [2, 1]; torch broadcasts any
    extent-1 dim, fuser only broadcast dims, so the translation makes it one (the region used
    to be refused with a ShapeError)."""
    def f(a, b):
        return (a.sin()[:1].unsqueeze(1) * b).cos()

    reports = []
    a, b = torch.randn(3), torch.randn(2, 1)
    got = torch.compile(f, backend=make_backend(reports))(a, b)
    torch.testing.assert_close(got, f(a, b))
    assert not any(r.refused for report in reports for r in report.regions)
    assert sum(len(report.regions) for report in reports) >= 1


@pytest.mark.parametrize("split", [lambda x: torch.chunk(x, 5, dim=1), lambda x: torch.split(x, [2, 3], dim=2),
                                   lambda x: torch.unbind(x, 1)], ids=["chunk", "split", "unbind"])
def test_the_parts_of_a_split_leave_as_views_of_their_base(split):
    """Parts of split_with_sizes / unbind that reach eager code are views of the base with its
    strides, as eagerly, not dense fusion outputs (OpInfo: chunk, split, unsafe_chunk)."""
    def f(x):
        return [p for p in split(x * 2)] + [x.cos()]

    x = torch.randn(5, 5, 5, requires_grad=True)
    eager, compiled = f(x), torch.compile(f, backend="fuser")(x)
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e)
        assert c.stride() == e.stride()


def test_floor_division_of_bf16_floors_the_f32_quotient():
    """Eager floors the f32 quotient of bf16 operands; rounding it to bf16 first turns 17.95
    into 18 (OpInfo: div floor_rounding, floor_divide)."""
    a = torch.tensor([-3.890625], dtype=torch.bfloat16)
    b = torch.tensor([-0.216796875], dtype=torch.bfloat16)
    got = torch.compile(lambda a, b: (a * 1) // b, backend="fuser")(a, b)
    assert got.item() == (a // b).item() == 17


def test_a_bad_setting_surfaces_under_torch_compile(monkeypatch):
    """FUSER_DISABLE=bogus is the program's error, not a reason to run every region eagerly."""
    monkeypatch.setenv("FUSER_DISABLE", "bogus")
    with pytest.raises(Exception, match=r"FUSER_DISABLE='bogus': unknown option 'bogus'"):
        torch.compile(lambda x: (x * 2).exp(), backend="fuser")(torch.ones(3))


def test_the_mean_gradients_expand_is_fused_into_its_region():
    """The backward of a mean begins with an expand of the scalar tangent: left eager (torch's
    partitioner takes views at a region's edge out), the fusion got a stride-0 tensor of the
    full shape, read an element at a time (RMSNorm's backward at Llama's size: scalar loads,
    8 KiB in flight per SM). Fused, the region reads the scalar and broadcasts it."""
    def fn(x, w):
        return (x * w).square().mean()

    reports = compare_with_eager(fn, torch.randn(4, 8, 16, requires_grad=True), torch.randn(16, requires_grad=True))
    backward = report_of(reports, "backward")
    assert "aten.expand.default" not in backward.eager_ops, str(backward)


def test_an_expand_whose_value_leaves_its_region_stays_a_view():
    """Only an expand all of whose users are in its region joins it: one returned is the view
    eager returns (stride 0), not a copy."""
    def fn(x, y):
        wide = x.expand(4, 16)
        return wide, (wide * y).sum(0)

    got = torch.compile(fn, backend="fuser")(torch.randn(1, 16), torch.randn(4, 16))
    assert got[0].stride() == (0, 1)
    x, y = torch.randn(1, 16), torch.randn(4, 16)
    for g, w in zip(torch.compile(fn, backend="fuser")(x, y), fn(x, y)):
        torch.testing.assert_close(g, w)
