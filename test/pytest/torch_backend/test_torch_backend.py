"""torch.compile(fn, backend="fuser"): forward and backward equal eager, regions and kernels
as expected, dynamic batch sizes served by one fusion, unsupported ops left eager.

Every fused region runs on the cpu backend (CPU tensors). Shapes are small: each fused
kernel costs a g++ compile, so each test compiles one function once (its reports come from
make_backend(reports), not from a second compile through explain()).
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fuser
from fuser.torch_backend import make_backend

from torch_checks import F32_TOL, _grads, compare_with_eager, fresh_dynamo, report_of as _report  # noqa: F401


def _fused_ops(report) -> set[str]:
    return {op for region in report.fusions for op in region.ops}


# ---------------------------------------------------------------------------------- registration


def test_backend_is_registered_by_entry_point():
    assert "fuser" in torch._dynamo.list_backends()


def test_importing_fuser_does_not_import_torch():
    code = "import sys, fuser; print('torch' in sys.modules); fuser.explain; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


# ---------------------------------------------------------------------------------- losses, norms


def test_cross_entropy_with_ignore_index_is_one_row_kernel_plus_mean():
    x = torch.randn(6, 40, requires_grad=True)
    y = torch.tensor([3, -100, 0, 39, 7, -100])
    reports = compare_with_eager(lambda x, y: F.cross_entropy(x, y, ignore_index=-100), x, y)
    forward = _report(reports, "forward")
    assert len(forward.fusions) == 1
    assert {"aten.gather.default", "aten.amax.default", "aten.log.default"} <= _fused_ops(forward)
    # log-softmax, the target pick and the masked mean: the same kernels as the hand-written
    # cross-entropy fusion (benchmarks/cases.py build_ce_fwd_aot), at most a row kernel + the mean
    assert forward.kernels <= 2
    backward = _report(reports, "backward")
    assert len(backward.fusions) == 1 and "aten.scatter.value" in _fused_ops(backward)


def test_cross_entropy_with_label_smoothing():
    x = torch.randn(5, 24, requires_grad=True)
    y = torch.tensor([1, 2, -100, 23, 0])
    reports = compare_with_eager(lambda x, y: F.cross_entropy(x, y, label_smoothing=0.1), x, y)
    assert all(len(r.fusions) == 1 for r in reports)


def test_layer_norm_module():
    ln = nn.LayerNorm(32)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.5, 0.5)
    reports = compare_with_eager(ln, torch.randn(3, 5, 32, requires_grad=True), params=list(ln.parameters()))
    forward = _report(reports, "forward")
    assert forward.fused_ops == forward.aten_ops and forward.kernels == 1  # var_mean + affine: one row kernel


def test_rms_norm():
    def rms_norm(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w

    w = (torch.rand(32) + 0.5).requires_grad_()
    reports = compare_with_eager(rms_norm, torch.randn(4, 6, 32, requires_grad=True), w)
    assert _report(reports, "forward").kernels == 1


def test_masked_softmax():
    mask = torch.ones(8, 8).triu(1).bool()
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    reports = compare_with_eager(lambda x, m: torch.softmax(x.masked_fill(m, float("-inf")), -1), x, mask)
    assert _report(reports, "forward").kernels == 1


def test_softmax_bf16_within_bf16_tolerance():
    x = torch.randn(4, 64, dtype=torch.bfloat16, requires_grad=True)
    compare_with_eager(lambda x: torch.softmax(x.float() * 2, -1).to(torch.bfloat16), x,
                       tol=dict(rtol=2e-2, atol=2e-2))


def test_permuted_input_is_read_in_place_layout():
    x = torch.randn(16, 8).t()  # a transposed (column-major) view
    compare_with_eager(lambda x: torch.exp(x) * 2 + 1, x, backward=False)


# ---------------------------------------------------------------------------------- epilogues, RoPE


def test_gelu_and_silu_mlp_epilogues_fuse_around_eager_linears():
    fc, proj = nn.Linear(16, 48), nn.Linear(48, 16)

    def mlp(x):
        return proj(F.gelu(fc(x))) + F.silu(x)

    reports = compare_with_eager(mlp, torch.randn(4, 5, 16, requires_grad=True), params=[*fc.parameters(), *proj.parameters()])
    forward = _report(reports, "forward")
    assert "aten.erf.default" in _fused_ops(forward) and "aten.sigmoid.default" in _fused_ops(forward)
    assert forward.eager_ops["aten.addmm.default"] == 2  # linears stay eager


def _rotate_half(t):
    half = t.shape[-1] // 2
    return torch.cat((-t[..., half:], t[..., :half]), dim=-1)


def test_rope_slices_and_cat_become_resize_ops():
    q = torch.randn(2, 3, 5, 16, requires_grad=True)
    cos, sin = torch.randn(5, 16), torch.randn(5, 16)
    reports = compare_with_eager(lambda q, c, s: q * c + _rotate_half(q) * s, q, cos, sin)
    forward, backward = _report(reports, "forward"), _report(reports, "backward")
    assert {"aten.slice.Tensor", "aten.cat.default"} <= _fused_ops(forward) and forward.kernels == 1
    assert "aten.slice_scatter.default" in _fused_ops(backward) and backward.kernels == 1


# ---------------------------------------------------------------------------------- a GPT-2 block


class TinyGPT2Block(nn.Module):
    def __init__(self, vocab=40, dim=16, heads=2, seq=6):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.heads = heads
        self.register_buffer("causal", torch.ones(seq, seq).triu(1).bool())

    def forward(self, idx):
        b, t = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(t))
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=2)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        att = torch.softmax(att.masked_fill(self.causal[:t, :t], float("-inf")), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, -1))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


def test_gpt2_block_forward_and_backward():
    block = TinyGPT2Block()
    idx = torch.randint(0, 40, (2, 6))
    reports = compare_with_eager(block, idx, params=list(block.parameters()))
    forward = _report(reports, "forward")
    fused = _fused_ops(forward)
    assert {"aten.var_mean.correction", "aten.amax.default", "aten.erf.default", "aten.embedding.default"} <= fused
    assert {"aten.addmm.default", "aten.bmm.default"} <= set(forward.eager_ops)
    assert len(forward.fusions) >= 4  # two layer-norms (with their residual adds), softmax, gelu


# ---------------------------------------------------------------------------------- dynamic shapes


def test_dynamic_batch_sizes_reuse_one_fusion_and_its_kernels():
    reports = []
    fn = lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b) * 2  # noqa: E731
    compiled = torch.compile(fn, backend=make_backend(reports), dynamic=True)
    w, b = torch.rand(16) + 0.5, torch.randn(16)
    for batch in (3, 7, 12):
        x = torch.randn(batch, 16)
        torch.testing.assert_close(compiled(x, w, b), fn(x, w, b), **F32_TOL)
    assert len(reports) == 1, "one graph for every batch size"
    fd = reports[0].fusions[0].region.fd
    assert "?x?" in str(fd)  # symbolic extents
    info = fd.cache_info()
    # One compile, at partition time for the traced example; the three calls reuse it.
    assert (info.misses, info.hits) == (1, 3)


def test_region_records_its_kernels_only_when_they_change(monkeypatch):
    reports = []
    fn = lambda x: torch.softmax(x * 2, -1)  # noqa: E731
    compiled = torch.compile(fn, backend=make_backend(reports), dynamic=True)
    x = torch.randn(4, 32)
    compiled(x)
    region = reports[0].fusions[0].region
    built = []
    real = type(region.fd).last_kernels
    monkeypatch.setattr(type(region.fd), "last_kernels", lambda fd: built.append(1) or real(fd))
    for _ in range(5):  # cached calls of one launch plan: no records built
        torch.testing.assert_close(compiled(x), fn(x), **F32_TOL)
    assert built == [] and region.stats.calls == 6
    assert region.stats.kernels == list(region.fd.last_kernel_names()) and len(region.stats.kernels) == 1
    taller = torch.randn(9, 32)  # the same graph and kernels, another launch plan: names compared
    torch.testing.assert_close(compiled(taller), fn(taller), **F32_TOL)
    assert len(reports) == 1 and region.stats.calls == 7 and built == []
    assert region.stats.kernels == list(region.fd.last_kernel_names())


MAX_PYTHON_CALLS_PER_REGION = 2
"""Python functions a cached region call may enter (FusedRegion down to the kernel's launch:
its TensorCall, lowering/execution/tensor_call.py): the host overhead, counted instead of timed
so that a busy machine cannot fail the test (`python -m fuser.benchmarks` reports the µs: the
run's region host-overhead line). 30 before TensorCalls; 6 with them; 2 since the TensorCall
calls the native launcher with its pointers (FusedRegion.__call__ and the TensorCall). Where the
native launcher cannot be built, each launch adds BoundLaunch.__call__ and its Python path."""


def test_a_cached_region_call_runs_few_python_functions_and_no_graph_module_machinery():
    import collections

    reports = []
    fn = lambda x, y: (x + y) * 2 - y.sin()  # noqa: E731
    compiled = torch.compile(fn, backend=make_backend(reports))
    x, y = torch.randn(8), torch.randn(8)
    compiled(x, y)
    compiled(x, y)
    region = reports[0].fusions[0].region
    entered = collections.Counter()

    def count(frame, event, arg):
        if event == "call":
            entered[f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_code.co_name}"] += 1

    sys.setprofile(count)
    try:
        region(x, y)
    finally:
        sys.setprofile(None)
    assert region._direct, "the region went through fd.execute's per-call checks"
    assert any(name.startswith("<tensor call of") for name in entered), sorted(entered)
    from fuser.lowering.backends import gpu_launcher

    bound = MAX_PYTHON_CALLS_PER_REGION + (0 if gpu_launcher.status() == "native" else 2)
    assert sum(entered.values()) <= bound, entered.most_common()
    entered.clear()
    sys.setprofile(count)
    try:  # the compiled graph calls its regions from its generated code, not through nn.Module.__call__
        torch.testing.assert_close(compiled(x, y), fn(x, y), **F32_TOL)
    finally:
        sys.setprofile(None)
    assert not any(name.endswith((":_lazy_forward", ":_call_impl", ":call_wrapped")) for name in entered), \
        sorted(entered)


def test_a_graph_that_is_one_region_is_called_without_its_graph_module():
    """AOTAutograd calls the region itself (FusedRegion.boxed, partition.single_region): no
    GraphModule forward, no nn.Module attribute lookup, between its wrapper and the TensorCall;
    a graph with eager ops around its region keeps its GraphModule."""
    import collections

    reports = []
    fn = lambda x: (x * 2 + 1).relu()  # noqa: E731
    compiled = torch.compile(fn, backend=make_backend(reports))
    x = torch.randn(8)
    compiled(x)
    compiled(x)
    entered = collections.Counter()

    def count(frame, event, arg):
        if event == "call":
            entered[f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_code.co_name}"] += 1

    sys.setprofile(count)
    try:
        out = compiled(x)
    finally:
        sys.setprofile(None)
    torch.testing.assert_close(out, fn(x), **F32_TOL)
    assert entered["runtime.py:call"] == 1 and any(n.startswith("<tensor call of") for n in entered), sorted(entered)
    assert not any(n.startswith("<eval_with_key>") or n in ("module.py:__getattr__", "runtime.py:forward")
                   for n in entered), sorted(entered)
    assert reports[0].fusions[0].region.stats.calls == 3

    def around(x):  # two regions with an eager op between them: the GraphModule stays
        y = torch.exp(x) * 2 + 1
        z = torch.special.i0(y)
        return torch.tanh(z) - z * 0.5

    reports.clear()
    torch.testing.assert_close(torch.compile(around, backend=make_backend(reports))(x), around(x), **F32_TOL)
    assert len(reports[0].fusions) == 2


def test_dynamic_rope_passes_sizes_as_scalars():
    reports = []
    fn = lambda q, c, s: q * c + _rotate_half(q) * s  # noqa: E731
    compiled = torch.compile(fn, backend=make_backend(reports), dynamic=True)
    for batch in (3, 4):  # (not 2: a batch equal to the head count would share its symbol)
        q, c, s = torch.randn(batch, 2, 5, 8), torch.randn(5, 8), torch.randn(5, 8)
        torch.testing.assert_close(compiled(q, c, s), fn(q, c, s), **F32_TOL)
    info = reports[0].fusions[0].region.fd.cache_info()
    assert len(reports) == 1 and (info.misses, info.hits) == (1, 2)  # the compile at partition time


# ---------------------------------------------------------------------------------- fallbacks, explain


def test_unsupported_op_stays_eager_between_fusions():
    def fn(x):
        y = torch.exp(x) * 2 + 1
        z = torch.special.i0(y)  # no translation: runs eagerly
        return torch.tanh(z) - z * 0.5

    x = torch.randn(4, 9, requires_grad=True)
    reports = compare_with_eager(fn, x)
    forward = _report(reports, "forward")
    assert forward.eager_ops["aten.i0.default"] == 1 and len(forward.fusions) == 2
    assert "no translation" in forward.reasons["aten.i0.default"]


def test_explain_counts_fusions_kernels_and_ops(capsys):
    x = torch.randn(4, 10, requires_grad=True)
    y = torch.tensor([1, 2, 3, -100])
    record = fuser.explain(lambda x, y: F.cross_entropy(x, y), x, y)
    printed = capsys.readouterr().out
    assert [g.kind for g in record.graphs] == ["forward", "backward"]
    assert record.fusions == 2 and record.kernels >= 2
    assert record.fused_ops <= record.aten_ops
    assert "forward graph:" in printed and "kernel(s)" in printed
    assert x.grad is None  # explain leaves no gradients behind


# ---------------------------------------------------------------------------------- distributed training
# (the runs on 2 gloo ranks: test_distributed.py, DDP; test_distributed_fsdp_tp.py, FSDP2 and TP)


def test_inputs_keep_their_storage_resizable():
    """FSDP2 frees its all-gathered parameters after each step (`untyped_storage().resize_(0)`)
    and gathers them into storage allocated again before the next: a fused region reads a CPU
    tensor in place without making its storage non-resizable (as `Tensor.numpy()` would)."""
    from fuser_dialect.inputs import torch_to_numpy

    reports = []
    fn = lambda x, w: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w  # noqa: E731
    compiled = torch.compile(fn, backend=make_backend(reports))
    x, w = torch.randn(4, 16), torch.randn(16)
    values, want = w.clone(), fn(x, w)
    for _ in range(2):  # the full path, then the launch plan on the storage allocated again
        torch.testing.assert_close(compiled(x, w), want, **F32_TOL)
        storage = w.untyped_storage()
        assert storage.resizable() and x.untyped_storage().resizable()
        storage.resize_(0)  # as FSDP2 frees, then gathers again
        storage.resize_(values.nbytes)
        w.copy_(values)
    assert len(reports) == 1 and len(reports[0].fusions) == 1
    for t in (torch.randn(3), torch.randn(3).bfloat16(), torch.randn(3, requires_grad=True)):
        assert torch.equal(torch.from_numpy(torch_to_numpy(t).astype("float32")), t.detach().float())
        assert t.untyped_storage().resizable(), t.dtype


def test_functional_collectives_are_library_calls_no_fusion_crosses():
    """A functional collective (DTensor's and tensor parallelism's all_reduce, all_gather,
    reduce_scatter, wait_tensor) is a library call: never inside a fusion, counted with the
    library calls, and the fusions before and after it stay apart (torch's partitioner alone
    joins the two independent chains below into one fusion that would run after the wait)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from fuser.torch_backend.partition import partition_graph
    from fuser.torch_backend.report import op_kind

    c10d = torch.ops._c10d_functional

    def fn(x, y):
        before = (x * 2).exp()
        reduced = c10d.wait_tensor(c10d.all_reduce(y + 1, "sum", "0"))
        return before, (reduced * 3).tanh()

    gm = make_fx(fn, tracing_mode="fake")(torch.randn(4, 8), torch.randn(4, 8))  # no process group needed
    gm, report = partition_graph(gm, "forward")
    assert [sorted(r.ops) for r in report.fusions] == [["aten.exp.default", "aten.mul.Tensor"],
                                                      ["aten.mul.Tensor", "aten.tanh.default"]], str(report)
    assert report.counts()["library"] == (0, 2)
    assert report.regions_between_library_calls == 1
    assert op_kind("_c10d_functional.all_gather_into_tensor.default") == "library"
    assert op_kind("_c10d_functional.reduce_scatter_tensor.default") == "library"
    assert "collective" in report.reasons["_c10d_functional.all_reduce.default"]
    order = [n.target if n.op == "call_module" else n.target.__name__ for n in gm.graph.nodes
             if n.op == "call_module" or n.target in (c10d.all_reduce.default, c10d.wait_tensor.default)]
    assert order == ["fuser_region_0", "all_reduce.default", "wait_tensor.default", "fuser_region_1"], order
