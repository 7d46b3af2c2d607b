"""Small real models for the torch.compile backend: Hugging Face `transformers` definitions built
from tiny configs with random weights (never a download), and three written here (a ResNet-18,
a nanoGPT block stack, a llama-style block), each with a batch and a loss.

Shared by the model tests (test/pytest/torch_backend/test_models.py) and the models benchmark
(`python -m fuser.benchmarks.models`). `build(name, dtype)` gives a `ModelCase`: the module in
train mode without dropout (dropout is random: eager and compiled runs could never agree), a
function making a batch, and the loss of a forward pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 96
SEQ = 16
BATCH = 2


@dataclass
class ModelCase:
    name: str
    model: nn.Module
    batch: Callable[[int, int], dict]  # (seed, sequence length) -> keyword inputs
    loss: Callable[[object, dict], torch.Tensor]  # (model output, inputs) -> scalar loss
    sequence: bool = True  # the batch has a sequence length that may vary (dynamic=True tests)


def _lm_batch(dtype, device):
    def batch(seed: int, seq: int = SEQ) -> dict:
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, VOCAB, (BATCH, seq), generator=g)
        return {"input_ids": ids.to(device), "labels": ids.to(device)}

    return batch


def _hf_loss(out, inputs) -> torch.Tensor:
    return out.loss if hasattr(out, "loss") and out.loss is not None else out[0].float().sum()


def _no_dropout(config) -> None:
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "resid_pdrop", "embd_pdrop", "attn_pdrop",
                 "dropout_rate", "attention_dropout", "hidden_dropout", "classifier_dropout", "dropout"):
        if hasattr(config, name):
            setattr(config, name, 0.0)


def _hf(config_type: str, model_type: str, **config):
    import transformers

    cfg = getattr(transformers, config_type)(**config)
    _no_dropout(cfg)
    torch.manual_seed(0)
    return getattr(transformers, model_type)(cfg)


def gpt2():
    model = _hf("GPT2Config", "GPT2LMHeadModel", vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4)
    # GPT2LMHeadModel's name matches none of transformers' loss types, and its loss_function then
    # logs a warning on every call, which breaks Dynamo's graph between the LM head and its loss
    # (the logits would cross the break whole). ForCausalLM is the loss it falls back to anyway.
    model.loss_type = "ForCausalLM"
    return model


def bert():
    return _hf("BertConfig", "BertForMaskedLM", vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
               num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)


def llama():
    return _hf("LlamaConfig", "LlamaForCausalLM", vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)


def qwen2():
    return _hf("Qwen2Config", "Qwen2ForCausalLM", vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)


def gpt_neox():
    # Rotary embeddings on a quarter of each head (2 of 8 dims): a cat boundary inside a vector.
    return _hf("GPTNeoXConfig", "GPTNeoXForCausalLM", vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
               num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64,
               rope_parameters={"partial_rotary_factor": 0.25, "rope_theta": 10000.0, "rope_type": "default"})


def t5():
    return _hf("T5Config", "T5ForConditionalGeneration", vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
               num_decoder_layers=2, num_heads=4, decoder_start_token_id=0, pad_token_id=0)


def vit():
    return _hf("ViTConfig", "ViTForImageClassification", image_size=16, patch_size=4, num_channels=3, hidden_size=32,
               num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, num_labels=10)


# --------------------------------------------------------------------------- written here


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """torchvision's ResNet-18 layout (two BasicBlocks per stage), narrow: widths 8..64."""

    def __init__(self, classes: int = 10, width: int = 8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        stages, cin = [], width
        for i, cout in enumerate([width, 2 * width, 4 * width, 8 * width]):
            stride = 1 if i == 0 else 2
            stages += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, classes)

    def forward(self, pixel_values, labels=None):
        x = self.stages(self.stem(pixel_values))
        logits = self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
        return F.cross_entropy(logits, labels)


class NanoGPTBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class NanoGPT(nn.Module):
    def __init__(self, dim: int = 32, layers: int = 2, heads: int = 4):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, dim), nn.Embedding(64, dim)
        self.blocks = nn.ModuleList(NanoGPTBlock(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, VOCAB, bias=False)

    def forward(self, input_ids, labels=None):
        t = input_ids.shape[1]
        x = self.wte(input_ids) + self.wpe(torch.arange(t, device=input_ids.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB).float(), labels[:, 1:].reshape(-1))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    """RMSNorm, RoPE (cat-based rotate_half), SDPA with GQA heads, SwiGLU."""

    def __init__(self, dim: int = 32, heads: int = 4, kv_heads: int = 2, hidden: int = 64):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.embed = nn.Embedding(VOCAB, dim)
        self.head = nn.Linear(dim, VOCAB, bias=False)

    def rope(self, x, t: int):
        inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2, device=x.device).float() / self.head_dim))
        freqs = torch.outer(torch.arange(t, device=x.device).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        return x * emb.cos().to(x.dtype) + _rotate_half(x) * emb.sin().to(x.dtype)

    def forward(self, input_ids, labels=None):
        x = self.embed(input_ids)
        b, t, c = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = self.rope(q, t), self.rope(k, t)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, -1))  # -1: a tensor-parallel rank holds some heads
        h = self.norm2(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        logits = self.head(x)
        return F.cross_entropy(logits.float().view(-1, VOCAB), labels.view(-1))


# --------------------------------------------------------------------------- the registry


def _image_batch(dtype, device, key: str):
    def batch(seed: int, seq: int = SEQ) -> dict:
        g = torch.Generator().manual_seed(seed)
        side = 16 if key == "vit" else 64
        pixels = torch.randn(BATCH * (1 if key == "vit" else 2), 3, side, side, generator=g)
        return {"pixel_values": pixels.to(device=device, dtype=dtype),
                "labels": torch.randint(0, 10, (pixels.shape[0],), generator=g).to(device)}

    return batch


def _t5_batch(dtype, device):
    def batch(seed: int, seq: int = SEQ) -> dict:
        g = torch.Generator().manual_seed(seed)
        return {"input_ids": torch.randint(1, VOCAB, (BATCH, seq), generator=g).to(device),
                "labels": torch.randint(1, VOCAB, (BATCH, seq // 2), generator=g).to(device)}

    return batch


def _own_loss(out, inputs) -> torch.Tensor:
    return out


MODELS: dict[str, Callable[[], nn.Module]] = {
    "gpt2": gpt2, "bert": bert, "llama": llama, "t5": t5, "vit": vit, "qwen2": qwen2, "gpt_neox": gpt_neox,
    "resnet18": ResNet18, "nanogpt": NanoGPT, "llama_block": LlamaBlock,
}


def build(name: str, dtype: torch.dtype = torch.float32, device: str = "cpu") -> ModelCase:
    torch.manual_seed(0)  # the same weights in every process (eager references, DDP ranks)
    model = MODELS[name]().to(device=device, dtype=dtype).train()
    if name in ("vit", "resnet18"):
        batch = _image_batch(dtype, device, name)
    elif name == "t5":
        batch = _t5_batch(dtype, device)
    else:
        batch = _lm_batch(dtype, device)
    loss = _own_loss if name in ("resnet18", "nanogpt", "llama_block") else _hf_loss
    return ModelCase(name, model, batch, loss, sequence=name not in ("vit", "resnet18"))


# --------------------------------------------------------------------------- real sizes


@dataclass(frozen=True)
class RealSize:
    """A model at the size users train it, with random weights (nothing is downloaded)."""

    build: Callable[[], nn.Module]
    batch: Callable[[str], dict]  # device -> keyword inputs


def _real_lm_batch(vocab: int, batch: int, seq: int):
    def make(device: str) -> dict:
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(0, vocab, (batch, seq), generator=g).to(device)
        return {"input_ids": ids, "labels": ids}

    return make


def _real_image_batch(batch: int, side: int, classes: int):
    def make(device: str) -> dict:
        g = torch.Generator().manual_seed(0)
        return {"pixel_values": torch.randn(batch, 3, side, side, generator=g).to(device),
                "labels": torch.randint(0, classes, (batch,), generator=g).to(device)}

    return make


def _real_gpt2():
    model = _hf("GPT2Config", "GPT2LMHeadModel")  # GPT-2 small: 124M parameters
    model.loss_type = "ForCausalLM"  # as gpt2(): no graph break between the LM head and its loss
    return model


REAL_SIZES: dict[str, RealSize] = {
    "gpt2": RealSize(_real_gpt2, _real_lm_batch(50257, 8, 1024)),
    # Llama 3.2 1B's shape: 16 layers, hidden 2048, GQA 32/8 heads, RoPE, a 128,256-word vocabulary.
    "llama": RealSize(lambda: _hf("LlamaConfig", "LlamaForCausalLM", vocab_size=128256, hidden_size=2048,
                                  intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                                  num_key_value_heads=8, max_position_embeddings=4096, tie_word_embeddings=True),
                      _real_lm_batch(128256, 4, 2048)),
    "bert": RealSize(lambda: _hf("BertConfig", "BertForMaskedLM"), _real_lm_batch(30522, 8, 512)),  # BERT-base
    "vit": RealSize(lambda: _hf("ViTConfig", "ViTForImageClassification", num_labels=1000),  # ViT-B/16
                    _real_image_batch(64, 224, 1000)),
    "resnet50": RealSize(lambda: _hf("ResNetConfig", "ResNetForImageClassification", num_labels=1000),
                         _real_image_batch(64, 224, 1000)),
}
"""`python -m fuser.benchmarks.models --size real`: GPT-2 small at 8x1024 tokens, a 1B Llama at
4x2048, BERT-base at 8x512, ViT-B/16 and ResNet-50 at batch 64 (224x224)."""


def build_real(name: str, device: str) -> ModelCase:
    """A REAL_SIZES model in f32 on `device`, train mode, dropout off (bf16 runs use autocast)."""
    torch.manual_seed(0)
    real = REAL_SIZES[name]
    model = real.build().to(device=device).train()
    return ModelCase(name, model, lambda seed=0, seq=0: real.batch(device), _hf_loss, sequence=False)


def max_relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """The largest |got - want| over the largest |want| (1e-30 floor)."""
    scale = max(float(want.detach().float().abs().max()), 1e-30)
    return float((got.detach().float() - want.detach().float()).abs().max()) / scale


__all__ = ["MODELS", "REAL_SIZES", "ModelCase", "build", "build_real", "max_relative_error"]
