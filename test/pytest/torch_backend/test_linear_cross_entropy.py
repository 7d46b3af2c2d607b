"""The LM head under torch.compile (fuser/torch_backend/linear_cross_entropy.py):
`cross_entropy(linear(h, W, b), labels)` runs a chunk of rows at a time and its [N, V] logits
never exist whole.

- Values: loss and every gradient equal eager's (f32 to 1e-5 of the largest gradient; bf16 as
  far from the f32 step as eager's bf16 step is, within a margin), over several chunks with a
  short last one, with and without bias, ignored rows, mean and sum, [B, T, H] hidden states.
- Rewrite: the report says it fused, or why not (logits read elsewhere, label smoothing,
  reduction="none", class weights), and those programs still match eager;
  FUSER_DISABLE=fused_linear_cross_entropy keeps the graph as captured.
- Memory: a step's peak resident memory (VmHWM, reset before the step) grows by less than a
  third of the logits' size (a chunk's logits and their gradient), where eager's grows by more
  than their size.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

from fuser.torch_backend import linear_cross_entropy as lce
from fuser.torch_backend import make_backend
from torch_checks import fresh_dynamo  # noqa: F401


def _step(fn, backend, *tensors, **kwargs):
    """(loss, gradients of the tensors that require grad, reports) of one compiled or eager call."""
    leaves = [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]
    reports = []
    torch._dynamo.reset()
    run = fn if backend is None else torch.compile(fn, backend=make_backend(reports))
    loss = run(*leaves, **kwargs)
    loss.backward()
    return loss.detach().float(), [t.grad.float() for t in leaves if t.requires_grad], reports


def _rewrites(reports) -> list[str]:
    return [note for r in reports for note in r.rewrites]


def _head(rows, hidden, vocab, dtype=torch.float32, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(rows, hidden, generator=g).to(dtype).requires_grad_()
    w = (torch.randn(vocab, hidden, generator=g) / hidden ** 0.5).to(dtype).requires_grad_()
    b = (torch.randn(vocab, generator=g) * 0.1).to(dtype).requires_grad_() if bias else None
    y = torch.randint(0, vocab, (rows,), generator=g)
    y[::7] = -100
    return h, w, b, y


def _close(got, want, atol_rel=1e-5):
    loss, grads, _ = got
    want_loss, want_grads, _ = want
    torch.testing.assert_close(loss, want_loss, rtol=1e-5, atol=1e-6)
    scale = max(float(g.abs().max()) for g in want_grads)
    for a, b in zip(grads, want_grads):
        assert float((a - b).abs().max()) <= atol_rel * scale


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of a few rows, so a small head runs several, the last one short."""
    monkeypatch.setattr(lce, "CHUNK_MIN_BYTES", 1)
    monkeypatch.setattr(lce, "chunk_rows", lambda rows, hidden, vocab, size: 24)


@pytest.mark.parametrize("reduction, bias", [("mean", True), ("sum", False)], ids=["mean_bias", "sum_no_bias"])
def test_chunked_head_matches_eager_in_f32(fresh_dynamo, small_chunks, reduction, bias):
    h, w, b, y = _head(100, 16, 50, bias=bias)

    def f(h, w, *rest):
        b = rest[0] if bias else None
        return F.cross_entropy(F.linear(h, w, b), y, reduction=reduction)

    tensors = (h, w, b) if bias else (h, w)
    got = _step(f, "fuser", *tensors)
    assert any(": fused with its linear" in n for n in _rewrites(got[2])), _rewrites(got[2])
    _close(got, _step(f, None, *tensors))


def test_batched_hidden_states_and_an_upcast_as_transformers_write_them(fresh_dynamo, small_chunks):
    """[B, T, H] hidden states, logits cast to f32 and viewed as [B*T, V] (transformers'
    ForCausalLMLoss), bf16 head: the loss is f32, and the step is as accurate as eager's bf16."""
    h, w, _, y = _head(2 * 40, 32, 64, bias=False)
    h = h.detach().reshape(2, 40, 32).requires_grad_()

    def f(h, w):
        logits = F.linear(h, w).float()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1), ignore_index=-100)

    reference = _step(f, None, h, w)  # f32 eager
    eager = _step(f, None, h.to(torch.bfloat16), w.to(torch.bfloat16))
    got = _step(f, "fuser", h.to(torch.bfloat16), w.to(torch.bfloat16))
    assert any(": fused with its linear" in n for n in _rewrites(got[2]))
    assert got[0].dtype == torch.float32
    assert abs(float(got[0] - reference[0])) <= 1.25 * abs(float(eager[0] - reference[0])) + 1e-2
    for mine, theirs, want in zip(got[1], eager[1], reference[1]):
        scale = float(want.abs().max())
        assert float((mine - want).abs().max()) <= 1.25 * float((theirs - want).abs().max()) + 1e-3 * scale


def test_a_row_selection_of_the_logits_selects_the_hidden_states_rows(fresh_dynamo, small_chunks):
    """`logits[:, :-1]` (a hand-written LM's shift) becomes `h[:, :-1]`; a selection of classes
    (`logits[..., :V-1]`) is not fused, and says why."""
    h, w, _, y = _head(3 * 33, 16, 40, bias=False)
    h = h.detach().reshape(3, 33, 16).requires_grad_()
    labels = y.reshape(3, 33)

    def shifted(h, w):
        logits = F.linear(h, w)
        return F.cross_entropy(logits[:, :-1].reshape(-1, 40).float(), labels[:, 1:].reshape(-1))

    def fewer_classes(h, w):
        logits = F.linear(h, w)
        return F.cross_entropy(logits[..., :39].reshape(-1, 39), labels.reshape(-1).clamp(max=38))

    got = _step(shifted, "fuser", h, w)
    assert any(": fused with its linear" in n for n in _rewrites(got[2])), _rewrites(got[2])
    _close(got, _step(shifted, None, h, w))
    got = _step(fewer_classes, "fuser", h, w)
    assert any("indexed other than by rows" in n for n in _rewrites(got[2])), _rewrites(got[2])
    _close(got, _step(fewer_classes, None, h, w))


def test_under_autocast_the_head_multiplies_in_autocasts_dtype(fresh_dynamo, small_chunks):
    """f32 weights under bf16 autocast: the chunks' matmuls run in bf16 as eager's linear does
    (in f32 the loss would differ from eager's by far more than bf16's rounding); the weight's
    gradient sums bf16 products of chunks in f32, so it is eager's within bf16 rounding."""
    h, w, b, y = _head(50, 16, 40)

    def f(h, w, b):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return F.cross_entropy(F.linear(h, w, b).float(), y)

    got = _step(f, "fuser", h, w, b)
    assert any(": fused with its linear" in n for n in _rewrites(got[2])), _rewrites(got[2])
    want = _step(f, None, h, w, b)
    assert [g.dtype for g in got[1]] == [torch.float32] * 3
    torch.testing.assert_close(got[0], want[0], rtol=1e-6, atol=0)  # one chunk's rows, the same products
    _close(got, want, atol_rel=8e-3)


def test_every_row_ignored_gives_eagers_nan_loss_and_zero_gradients(fresh_dynamo, small_chunks):
    h, w, b, _ = _head(30, 8, 20)
    y = torch.full((30,), -100)

    def f(h, w, b):
        return F.cross_entropy(F.linear(h, w, b), y)

    loss, grads, _ = _step(f, "fuser", h, w, b)
    want_loss, want_grads, _ = _step(f, None, h, w, b)
    assert torch.isnan(loss) and torch.isnan(want_loss)
    for a, b in zip(grads, want_grads):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("form, why", [
    ("logits_returned", "another reader"),
    ("label_smoothing", "label smoothing"),
    ("reduction_none", "reduction='none'"),
    ("class_weights", "class weights"),
])
def test_heads_it_does_not_fuse_say_why_and_still_match_eager(fresh_dynamo, form, why):
    h, w, b, y = _head(40, 8, 20)
    weights = torch.rand(20)

    def f(h, w, b):
        logits = F.linear(h, w, b)
        if form == "logits_returned":
            return F.cross_entropy(logits, y) + logits.mean()
        if form == "label_smoothing":
            return F.cross_entropy(logits, y, label_smoothing=0.1)
        if form == "reduction_none":
            return F.cross_entropy(logits, y, reduction="none").sum()
        return F.cross_entropy(logits, y, weight=weights)

    got = _step(f, "fuser", h, w, b)
    notes = _rewrites(got[2])
    assert len(notes) == 1 and "not fused" in notes[0] and why in notes[0], notes
    _close(got, _step(f, None, h, w, b))


def test_fuser_disable_keeps_the_head_as_captured(fresh_dynamo, monkeypatch):
    h, w, b, y = _head(40, 8, 20)

    def f(h, w, b):
        return F.cross_entropy(F.linear(h, w, b), y)

    monkeypatch.setenv("FUSER_DISABLE", "fused_linear_cross_entropy")
    got = _step(f, "fuser", h, w, b)
    assert _rewrites(got[2]) == []
    assert not any("linear_cross_entropy" in op for r in got[2] for op in r.eager_ops)
    _close(got, _step(f, None, h, w, b))


def test_chunk_rows_keep_the_chunks_logits_near_the_hidden_states_size():
    # GPT-2 at 8x1024 tokens, f32: hidden states 24 MiB, below the 32 MiB floor.
    rows = lce.chunk_rows(8192, 768, 50257, 4)
    assert rows * 50257 * 4 <= lce.CHUNK_MIN_BYTES < (rows + 1) * 50257 * 4
    # A wide model's hidden states set the budget.
    rows = lce.chunk_rows(16384, 8192, 32000, 4)
    assert rows * 32000 <= 16384 * 8192 < (rows + 1) * 32000
    assert lce.chunk_rows(4, 8, 10**7, 4) == 1
    assert lce.chunk_rows(10, 8, 16, 4) == 10


def test_logits_rows_are_padded_to_16_bytes_and_gpu_chunks_fill_the_device():
    assert [lce.padded_vocab(v, torch.float32) for v in (50257, 50304, 1, 3)] == [50260, 50304, 4, 4]
    assert [lce.padded_vocab(v, torch.bfloat16) for v in (50257, 128256, 7)] == [50264, 128256, 8]
    assert lce.rows_to_fill(torch.device("cpu")) == 0  # on the host, memory alone decides


@pytest.mark.parametrize("label", [50, 51], ids=["just_past_the_vocabulary", "inside_the_padding"])
def test_a_label_past_the_vocabulary_is_an_index_error_as_eager(fresh_dynamo, small_chunks, label):
    """The logits' rows are padded from 50 classes to 52: a label in the padding is still out of
    range (the target is gathered from the vocabulary's classes only), never a silent -inf."""
    h, w, _, y = _head(64, 16, 50, bias=False)
    y = y.clone()
    y[3] = label

    def f(h, w):
        return F.cross_entropy(F.linear(h, w), y)

    with pytest.raises(IndexError, match=f"Target {label} is out of bounds"):
        f(h, w)
    with pytest.raises(IndexError, match=f"index {label} is out of range .* of extent 50"):
        torch.compile(f, backend=make_backend())(h, w)


_MEMORY_CHILD = textwrap.dedent("""
    import sys, torch, torch.nn.functional as F
    from fuser.torch_backend import make_backend

    def resident(field):
        for line in open("/proc/self/status"):
            if line.startswith(field):
                return int(line.split()[1]) * 1024

    torch.manual_seed(0)
    rows, hidden, vocab = 2048, 64, 32768
    h = torch.randn(rows, hidden, requires_grad=True)
    w = (torch.randn(vocab, hidden) / 8).requires_grad_()
    y = torch.randint(0, vocab, (rows,))

    def f(h, w):
        return F.cross_entropy(F.linear(h, w), y)

    run = torch.compile(f, backend=make_backend()) if sys.argv[1] == "fuser" else f
    run(h, w).backward()  # compiles; the second step is measured
    h.grad = w.grad = None
    with open("/proc/self/clear_refs", "w") as reset:
        reset.write("5")  # the peak (VmHWM) restarts from the resident size now
    before = resident("VmRSS")
    run(h, w).backward()
    print(resident("VmHWM") - before, rows * vocab * 4)
""")


def _peak_growth(mode: str) -> tuple[int, int]:
    # Every buffer of 64 KiB or more mapped and unmapped on its own: the resident size follows the
    # live buffers (glibc's default threshold rises to 32 MiB, and its freed heap would hide them).
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    done = subprocess.run([sys.executable, "-c", _MEMORY_CHILD, mode], capture_output=True, text=True, timeout=300,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    growth, logits = map(int, done.stdout.split()[-2:])
    return growth, logits


def test_the_logits_are_never_materialized():
    """Peak resident memory of a training step of a 2048 x 32768 head (256 MiB of f32 logits):
    eager holds the logits, their log-softmax and its gradient at once (3x); fuser a 256-row
    chunk's logits and their gradient (2 x 32 MiB)."""
    try:
        open("/proc/self/clear_refs", "w").close()
    except OSError as e:
        pytest.skip(f"the peak resident size cannot be reset here (/proc/self/clear_refs): {e}")
    eager, logits = _peak_growth("eager")
    fused, _ = _peak_growth("fuser")
    assert eager > logits, (eager, logits)
    assert fused < logits / 3, f"fused step grew by {fused / 2**20:.0f} MiB; the logits are {logits / 2**20:.0f} MiB"
