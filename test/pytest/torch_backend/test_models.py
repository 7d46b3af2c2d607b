"""Real models through torch.compile(backend="fuser"): one training step against eager.

The models (benchmarks/model_zoo.py) are Hugging Face definitions from tiny configs with random
weights — GPT-2, BERT, Llama, T5, ViT, Qwen2, GPT-NeoX (rotary on a quarter of each head) — and a ResNet-18, a nanoGPT stack and a
llama-style block written here. Per model and dtype:

- fp32: the loss equals eager's, and every parameter gradient is within 1e-5 of the largest
  gradient of eager's step;
- bf16: as accurate as eager in bf16 — measured against the fp32 eager step, fuser's bf16
  gradients are at most 1.25x (plus 1e-3 of the largest gradient) as far off as eager's bf16
  gradients are (a deep bf16 network differs from fp32 by up to ~50 % in places: ResNet's
  batch norms over small batches amplify rounding; a fixed bf16 tolerance would either pass
  anything or fail eager itself);
- no region is refused, at least 90 % of the compute ops (neither views nor library calls:
  matmul, convolution, attention, pooling) run fused, and between two library calls at most one
  region runs (the ops fuser leaves to ATen on purpose count as library calls: an embedding's
  backward, index_put with accumulate, is a scatter-add fuser does not build).

The compiled program is the training step's forward (the model and its loss: only the loss
leaves it, as in training), so the LM heads of the language models run chunked, their logits
never whole (linear_cross_entropy.py; FUSED_HEADS: the models where that must happen).

Two models also run dynamic=True inference at three sequence lengths: one graph, and every
region compiled once.

CI runs every model in fp32 and a fixed sample in bf16; FUSER_MODELS=all runs bf16 for all.
"""

from __future__ import annotations

import copy
import os

import pytest
import torch

from fuser.benchmarks import model_zoo
from fuser.torch_backend import make_backend
from torch_checks import fresh_dynamo  # noqa: F401

ALL = list(model_zoo.MODELS)
BF16_SAMPLE = ["gpt2", "llama", "vit", "resnet18"]
BF16_MODELS = ALL if os.environ.get("FUSER_MODELS", "").strip() == "all" else BF16_SAMPLE


def train_step(case, backend=None, reports=None):
    """(loss, {parameter name: gradient}) of one step of a copy of the case's model."""
    model = copy.deepcopy(case.model)
    inputs = case.batch(0)
    torch._dynamo.reset()

    def step(**inputs):  # the loss, and nothing else, leaves the compiled program (as in training)
        return case.loss(model(**inputs), inputs)

    run = step if backend is None else torch.compile(step, backend=make_backend(reports))
    loss = run(**inputs)
    loss.backward()
    return loss.detach().float(), {n: p.grad.detach().float() for n, p in model.named_parameters()
                                   if p.grad is not None}


def worst_gradient_error(got: dict, want: dict) -> tuple[float, str]:
    """max |got - want| over every parameter, relative to the largest |want| of all."""
    assert got.keys() == want.keys(), sorted(set(got) ^ set(want))
    scale = max(float(g.abs().max()) for g in want.values())
    errors = {n: float((got[n] - want[n]).abs().max()) / scale for n in want}
    name = max(errors, key=errors.get)
    return errors[name], name


def check_coverage(name: str, reports) -> None:
    assert reports, "nothing was compiled"
    for report in reports:
        refused = [(r.name, r.failed) for r in report.regions if r.failed]
        assert not refused, f"{report.kind}: refused regions {refused}"
        fused, total = report.counts()["compute"]
        assert fused >= 0.9 * total, f"{report.kind}: {fused} of {total} compute ops fused\n{report}"
        assert report.regions_between_library_calls <= 1, str(report)


FUSED_HEADS = {"gpt2", "llama", "qwen2", "gpt_neox", "bert", "t5", "nanogpt", "llama_block"}
"""Models whose loss is cross_entropy(linear(...)) with nothing else reading the logits: their
head runs chunked, the logits never whole (fuser/torch_backend/linear_cross_entropy.py)."""


def check_lm_head(name: str, reports) -> None:
    rewrites = [note for r in reports for note in r.rewrites]
    fused = [note for note in rewrites if ": fused with its linear" in note]
    if name in FUSED_HEADS:
        assert fused, f"{name}: the LM head was not fused: {rewrites}"
    else:
        assert not fused, f"{name}: {fused}"


@pytest.mark.parametrize("name", ALL)
def test_fp32_training_step_matches_eager(name):
    case = model_zoo.build(name)
    reports = []
    loss, grads = train_step(case, "fuser", reports)
    want_loss, want_grads = train_step(case)
    torch.testing.assert_close(loss, want_loss, rtol=1e-5, atol=1e-6)
    error, where = worst_gradient_error(grads, want_grads)
    assert error <= 1e-5, f"{name}: gradient of {where} off by {error:.2e} of the largest gradient"
    check_coverage(name, reports)
    check_lm_head(name, reports)


@pytest.mark.parametrize("name", BF16_MODELS)
def test_bf16_training_step_is_as_accurate_as_eager(name):
    reference_loss, reference = train_step(model_zoo.build(name))  # fp32 eager
    case = model_zoo.build(name, torch.bfloat16)
    eager_loss, eager = train_step(case)
    reports = []
    loss, grads = train_step(case, "fuser", reports)
    eager_error, _ = worst_gradient_error(eager, reference)
    error, where = worst_gradient_error(grads, reference)
    assert error <= 1.25 * eager_error + 1e-3, \
        f"{name}: {where} off by {error:.2e} of the largest fp32 gradient; eager bf16: {eager_error:.2e}"
    assert abs(float(loss) - float(reference_loss)) <= 1.25 * abs(float(eager_loss) - float(reference_loss)) + \
        2e-2 * abs(float(reference_loss))
    check_coverage(name, reports)
    check_lm_head(name, reports)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_dynamic_inference_compiles_each_region_once(name):
    case = model_zoo.build(name)
    model = case.model.eval()
    reports = []
    compiled = torch.compile(model, backend=make_backend(reports), dynamic=True)
    with torch.no_grad():
        for length in (8, 12, 20):
            inputs = case.batch(length, length)
            inputs.pop("labels")
            got, want = compiled(**inputs).logits, model(**inputs).logits
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert len(reports) == 1, f"{len(reports)} graphs: Dynamo recompiled"
    regions = [r.region for r in reports[0].fusions]
    assert regions and all(r.fd.cache_info().misses == 1 for r in regions), \
        [(r.name, r.fd.cache_info().misses) for r in regions]
    assert all(r.stats.calls == 3 for r in regions)
