"""The LM head without its logits: `cross_entropy(linear(h, W, b), labels)` computed a chunk of
rows at a time, so that the [N, V] logits (and their gradient) never exist whole.

A language model's loss materializes its largest tensor: GPT-2's 50,257-word vocabulary at
8×1024 tokens is 1.6 GB of f32 logits, and as much again for their gradient. Per chunk of rows:

- the chunk's logits are a library matmul (in the head's dtype), written into one buffer whose
  rows are padded with -inf to a multiple of 16 bytes (the kernel then loads 16 bytes at a time);
  on a GPU a chunk has at least ROWS_PER_SM rows per SM, enough blocks to fill it;
- one fuser kernel (`_chunk_fusion`) reads them once and writes the rows' losses and
  d(loss)/d(logits) = (softmax - one_hot(label)) * scale, 0 on ignored rows;
- grad_h for the chunk and the accumulated grad_W (f32) and grad_b are library matmuls.

The gradients are computed in the forward, as Liger-Kernel's fused linear cross-entropy does:
the loss is a scalar, so the backward only scales them by the incoming gradient. The mean's
1 / count stays a device tensor the kernel reads (nothing is read back to the host, so the op
runs the same under CUDA graph capture). Nothing of
size [N, V] is kept; the chunk's rows are chosen so that its logits take no more memory than
the hidden states (at least CHUNK_MIN_BYTES).

`fuse_linear_cross_entropy(gm)` rewrites a Dynamo graph (before AOTAutograd) where the pattern
appears and its logits have no other reader; `torch.ops.fuser.linear_cross_entropy` is then a
library call in the ATen graphs (report.LIBRARY_OPS). FUSER_DISABLE=fused_linear_cross_entropy
leaves graphs as they are.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass

import torch
import torch.fx
import torch.nn.functional as F

log = logging.getLogger("fuser.torch")

CHUNK_MIN_BYTES = 32 << 20
"""The smallest memory a chunk's logits may take: below it the matmuls get too thin to run at
their speed (8 MiB of f32 is 2,048 rows of GPT-2's 50,257 words... at 32 MiB, 167 rows)."""

OP_NAME = "fuser::linear_cross_entropy"


# --------------------------------------------------------------------------- the chunk kernel


_FUSIONS: dict[tuple, object] = {}


def _chunk_fusion(dtype: torch.dtype, ignore_index: int, with_grad: bool):
    """The fusion of one chunk: inputs logits [C, Vp] (the head's dtype; the vocabulary's V
    classes, then -inf up to Vp, `padded_vocab`), labels [C] (int64), scale (a 0-d f32 tensor:
    the loss's factor, 1/count for a mean, 1 for a sum) and V; outputs the rows' losses [C]
    (f32, 0 on ignored rows) and, with_grad, d(sum of scaled losses)/d(logits) [C, Vp] in the
    logits' dtype (0 in the padding), scaled in f32 before its rounding. One row kernel: the
    logits are read once, 16 bytes a load (every padded row starts 16-byte aligned and its
    length divides by the vector; GPT-2's 50,257 classes would allow 4-byte loads only). The
    labels' range check is against V (the target is gathered from the first V classes)."""
    key = (dtype, ignore_index, with_grad)
    fd = _FUSIONS.get(key)
    if fd is not None:
        return fd
    from fuser import DataType, FusionDefinition
    from fuser.torch_backend.dtypes import fuser_dtype

    fd_dtype = fuser_dtype(dtype)
    wide = dtype != torch.float32 and dtype != torch.float64
    with FusionDefinition(f"linear_cross_entropy_chunk{'_grad' if with_grad else ''}") as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=fd_dtype)
        y = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        scale = fd.define_tensor(shape=[], dtype=DataType.Float)
        vocab = fd.define_scalar(dtype=DataType.Int)
        xf = fd.ops.cast(x, DataType.Float) if wide else x
        m = fd.ops.max(xf, [1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(xf, m))
        s = fd.ops.sum(e, [1], keepdim=True)
        lse = fd.ops.add(fd.ops.log(s), m)
        valid = fd.ops.ne(y, ignore_index)
        safe = fd.ops.broadcast(fd.ops.where(valid, y, 0), [False, True])
        classes_of_vocab = fd.ops.slice(xf, [0, 0], [fd.ops.size(x, 0), vocab])
        target = fd.ops.take_along_axis(classes_of_vocab, safe, 1)
        loss = fd.ops.squeeze(fd.ops.sub(lse, target), [1])
        fd.add_output(fd.ops.where(valid, loss, 0.0))
        if with_grad:
            p = fd.ops.div(e, s)
            classes = fd.ops.broadcast(fd.ops.iota(fd.ops.size(x, 1), dtype=DataType.Int), [True, False])
            one_hot = fd.ops.cast(fd.ops.eq(classes, safe), DataType.Float)
            row_scale = fd.ops.where(valid, fd.ops.broadcast(scale, [True]), 0.0)
            grad = fd.ops.mul(fd.ops.sub(p, one_hot), fd.ops.broadcast(row_scale, [False, True]))
            fd.add_output(fd.ops.cast(grad, fd_dtype) if wide else grad)
    _FUSIONS[key] = fd
    return fd


def chunk_rows(rows: int, hidden: int, vocab: int, element_bytes: int) -> int:
    """Rows per chunk: the chunk's logits take about as much memory as the hidden states
    [rows, hidden] (at least CHUNK_MIN_BYTES), so peak memory stays at the inputs' scale."""
    budget = max(rows * hidden * element_bytes, CHUNK_MIN_BYTES)
    return max(1, min(rows, budget // max(1, vocab * element_bytes)))


ROWS_PER_SM = 4
"""A chunk on a GPU has at least this many rows per SM: the chunk kernel runs a block per row,
and fewer rows leave SMs idle (predicted on an H100, `KernelPerformance`: bf16 at GPT-2's
vocabulary 56 % of a copy's bandwidth with 167 rows, 93 % with 528)."""


def rows_to_fill(device: torch.device) -> int:
    """The fewest rows a chunk should have on `device` (0 on the host: memory decides there)."""
    if device.type != "cuda":
        return 0
    return ROWS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count


def padded_vocab(vocab: int, dtype: torch.dtype) -> int:
    """The row length of a chunk's logits buffer: the vocabulary rounded up to 16 bytes."""
    per_vector = max(1, 16 // torch.empty((), dtype=dtype).element_size())
    return -(-vocab // per_vector) * per_vector


# --------------------------------------------------------------------------- the library op


@torch.library.custom_op(OP_NAME, mutates_args=())
def linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                         labels: torch.Tensor, ignore_index: int, reduction: str, logits_dtype: torch.dtype,
                         loss_dtype: torch.dtype, with_grad: bool
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, grad_hidden, grad_weight, grad_bias) of cross_entropy(linear(hidden, weight, bias),
    labels, ignore_index, reduction) for hidden [N, H], weight [V, H], labels [N]; the linear in
    logits_dtype (the traced program's: autocast's where it ran under autocast, else its
    operands'), the loss in loss_dtype, the gradients (of the loss, not yet scaled by its incoming
    gradient) in their inputs' dtypes, empty unless with_grad (grad_bias also when bias is None).
    Nothing is read back to the host: the count of rows stays on the device."""
    rows, hidden_size = hidden.shape
    vocab = weight.shape[0]
    # A mean over no row: eager's loss is 0 / 0 = nan and every row's gradient 0 (scale inf, masked).
    count = (labels != ignore_index).sum() if reduction == "mean" else None
    scale = count.float().reciprocal() if count is not None else \
        torch.ones((), dtype=torch.float32, device=hidden.device)
    fd = _chunk_fusion(logits_dtype, ignore_index, with_grad)
    step = min(rows, max(chunk_rows(rows, hidden_size, vocab, max(torch.finfo(logits_dtype).bits // 8, 4)),
                         rows_to_fill(hidden.device)))
    total = torch.zeros((), dtype=torch.float32, device=hidden.device)
    empty = hidden.new_empty(0)
    grad_hidden = torch.empty(hidden.shape, dtype=logits_dtype, device=hidden.device) if with_grad else empty
    grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if with_grad else empty
    grad_bias = torch.zeros(vocab, dtype=torch.float32, device=weight.device) if with_grad and bias is not None \
        else empty
    # The operands as the traced linear saw them after autocast (no copy where the dtypes agree);
    # autocast itself is off in here: the dtypes are the trace's.
    autocast_off = torch.autocast(hidden.device.type, enabled=False)
    weight_in, bias_in = weight.to(logits_dtype), bias.to(logits_dtype) if bias is not None else None
    # One logits buffer for every chunk, its rows padded with -inf (padded_vocab): the matmul
    # writes the first V columns of each row in place.
    padded = padded_vocab(vocab, logits_dtype)
    buffer = torch.empty((min(step, rows), padded), dtype=logits_dtype, device=hidden.device)
    buffer[:, vocab:] = float("-inf")
    for start in range(0, rows, step):
        h = hidden[start:start + step].to(logits_dtype)
        chunk = buffer[:h.shape[0]]
        with autocast_off:
            if bias_in is None:
                torch.mm(h, weight_in.t(), out=chunk[:, :vocab])
            else:
                torch.addmm(bias_in, h, weight_in.t(), out=chunk[:, :vocab])
        outputs = fd.execute([chunk, labels[start:start + step], scale, vocab], device=hidden.device)
        total += outputs[0].sum()
        if with_grad:
            grad_logits = outputs[1][:, :vocab]
            torch.mm(grad_logits, weight_in, out=grad_hidden[start:start + step])
            grad_weight.addmm_(grad_logits.t(), h) if grad_logits.dtype == torch.float32 else \
                grad_weight.add_(torch.mm(grad_logits.t(), h))
            if bias is not None:
                grad_bias += grad_logits.sum(0, dtype=torch.float32)
            del grad_logits
        del outputs  # before the next chunk: one chunk's d(logits) lives at a time
    if count is not None:
        total = total / count  # 0 / 0 = nan over no row, as eager
    grad_hidden = grad_hidden.to(hidden.dtype) if with_grad else empty
    grad_weight = grad_weight.to(weight.dtype) if with_grad else empty
    grad_bias = grad_bias.to(bias.dtype) if with_grad and bias is not None else empty
    return total.to(loss_dtype), grad_hidden, grad_weight, grad_bias


@linear_cross_entropy.register_fake
def _(hidden, weight, bias, labels, ignore_index, reduction, logits_dtype, loss_dtype, with_grad):
    empty = hidden.new_empty(0)
    loss = hidden.new_empty((), dtype=loss_dtype)
    if not with_grad:
        return loss, empty, empty, empty
    grad_bias = torch.empty_like(bias) if bias is not None else empty
    return loss, torch.empty_like(hidden), torch.empty_like(weight), grad_bias


def _setup_context(ctx, inputs, output):
    _, grad_hidden, grad_weight, grad_bias = output
    ctx.has_bias = inputs[2] is not None
    ctx.save_for_backward(grad_hidden, grad_weight, grad_bias)


def _backward(ctx, grad_loss, *_unused):
    grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
    if grad_hidden.numel() == 0 and grad_weight.numel() == 0:
        raise RuntimeError("fuser.linear_cross_entropy: a backward through a loss computed without gradients "
                           "(its graph was traced where the logits did not require grad)")
    g = grad_loss.float()
    bias_grad = (grad_bias * g).to(grad_bias.dtype) if ctx.has_bias else None
    return ((grad_hidden * g).to(grad_hidden.dtype), (grad_weight * g).to(grad_weight.dtype), bias_grad,
            None, None, None, None, None, None)


linear_cross_entropy.register_autograd(_backward, setup_context=_setup_context)


# --------------------------------------------------------------------------- the graph rewrite


_PASS_THROUGH = {"float", "to", "contiguous", "view", "reshape", "flatten"}
"""Methods/functions between the head's linear and the cross-entropy that the rewrite looks
through: a cast to a wider dtype and reshapes of the logits to [N, V]."""


@dataclass
class HeadMatch:
    linear: torch.fx.Node
    cross_entropy: torch.fx.Node
    hidden: torch.fx.Node
    weight: torch.fx.Node
    bias: torch.fx.Node | None
    labels: torch.fx.Node
    ignore_index: int
    reduction: str
    loss_dtype: torch.dtype
    with_grad: bool
    rows: tuple | None = None
    """A row selection of the logits (`logits[:, :-1]`), applied to the hidden states instead."""


def _val(node) -> torch.Tensor | None:
    value = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _is_linear(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target in (F.linear, torch._C._nn.linear)


def _is_cross_entropy(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target is F.cross_entropy


def _pass_through(node: torch.fx.Node) -> bool:
    if node.op == "call_method" and node.target in _PASS_THROUGH:
        return True
    return node.op == "call_function" and node.target in (torch.reshape, torch.flatten, operator.getitem)


def _row_selection(chain: list[torch.fx.Node]) -> tuple[tuple | None, str]:
    """The index of a getitem on the logits that selects rows and keeps every class (e.g. the
    shift `logits[:, :-1]`), to be applied to the hidden states instead; None where there is none.
    It must come before any reshape (the hidden states' leading dims are the logits')."""
    selection = None
    for position, node in enumerate(chain):
        if node.op != "call_function" or node.target is not operator.getitem:
            continue
        if selection is not None or any(n.op != "call_method" or n.target not in ("float", "to", "contiguous")
                                        for n in chain[:position]):
            return None, "the logits are indexed after a reshape"
        index = node.args[1] if isinstance(node.args[1], tuple) else (node.args[1],)
        ndim = _val(node.args[0]).dim()
        static = all(isinstance(i, slice) and all(b is None or isinstance(b, int) for b in (i.start, i.stop, i.step))
                     for i in index)
        keeps_classes = len(index) < ndim or (len(index) == ndim and index[-1] == slice(None))
        if not static or not keeps_classes:
            return None, "the logits are indexed other than by rows"
        selection = index
    return selection, ""


def _argument(node: torch.fx.Node, index: int, name: str, default=None):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def match_head(ce: torch.fx.Node) -> tuple[HeadMatch | None, str]:
    """The LM head ending at a cross_entropy node, or None and why the rewrite does not apply."""
    chain = []
    node = _argument(ce, 0, "input")
    while isinstance(node, torch.fx.Node) and _pass_through(node):
        chain.append(node)
        node = node.args[0]
    if not isinstance(node, torch.fx.Node) or not _is_linear(node):
        return None, "its logits are not a linear's output"
    linear = node
    chain.reverse()  # from the linear's output to the cross-entropy
    for reader, consumer in zip([linear, *chain], [*chain, ce]):
        if list(reader.users) != [consumer]:
            return None, "the logits have another reader (they must exist whole)"
    rows, why = _row_selection(chain)
    if why:
        return None, why
    if _argument(ce, 2, "weight") is not None:
        return None, "class weights"
    if _argument(ce, 7, "label_smoothing", 0.0) != 0.0:
        return None, "label smoothing"
    reduction = _argument(ce, 6, "reduction", "mean")
    if reduction not in ("mean", "sum"):
        return None, f"reduction={reduction!r} (the loss must be a scalar)"
    if _argument(ce, 3, "size_average") is not None or _argument(ce, 5, "reduce") is not None:
        return None, "the legacy size_average/reduce arguments"
    ignore_index = _argument(ce, 4, "ignore_index", -100)
    hidden, weight = linear.args[0], _argument(linear, 1, "weight")
    bias = _argument(linear, 2, "bias")
    labels = _argument(ce, 1, "target")
    logits, loss, h, w, y = _val(linear), _val(ce), _val(hidden), _val(weight), _val(labels)
    if any(v is None for v in (logits, loss, h, w, y)):
        return None, "a tensor without a traced value"
    if not isinstance(ignore_index, int):
        return None, "ignore_index is not a constant"
    if y.dtype != torch.int64 or y.dim() != 1 or logits.dim() < 2 or loss.dim() != 0:
        return None, "the labels are not class indices [N] of logits [..., V]"
    if h.dtype not in (torch.float32, torch.bfloat16, torch.float16) or w.dtype != h.dtype or w.dim() != 2:
        return None, f"a {h.dtype} head"
    if _val(_argument(ce, 0, "input")).dim() != 2:
        return None, "the cross-entropy's input is not [N, V]"
    if w.shape[0] <= w.shape[1]:  # a classifier: its chunks would save nothing
        return None, f"{w.shape[0]} classes, no more than the {w.shape[1]} hidden features: the logits are no larger " \
                     f"than the hidden states"
    if any(isinstance(s, torch.SymInt) for s in w.shape):
        return None, "a dynamic vocabulary or hidden size"  # rows may vary: the op takes any
    if h.device != w.device or h.device != y.device:
        return None, "operands on different devices"
    return HeadMatch(linear, ce, hidden, weight, bias, labels, ignore_index, reduction, loss.dtype,
                     logits.requires_grad, rows), ""


def fuse_linear_cross_entropy(gm: torch.fx.GraphModule) -> list[str]:
    """Replaces each LM head (cross_entropy of a linear's logits, nothing else reading them) of a
    Dynamo graph by torch.ops.fuser.linear_cross_entropy; returns one line per cross-entropy
    seen: fused, or why not."""
    notes, changed = [], False
    graph = gm.graph
    for ce in [n for n in gm.graph.nodes if _is_cross_entropy(n)]:
        match, why = match_head(ce)
        if match is None:
            notes.append(f"cross_entropy {ce.name}: not fused with its linear: {why}")
            continue
        changed = True
        with graph.inserting_before(ce):
            h = match.hidden
            hidden_size = _val(h).shape[-1]
            if match.rows is not None:
                h = graph.call_function(operator.getitem, (h, match.rows))
            flat = graph.call_method("reshape", (h, -1, hidden_size)) if _val(match.hidden).dim() != 2 else h
            fused = graph.call_function(torch.ops.fuser.linear_cross_entropy.default,
                                        (flat, match.weight, match.bias, match.labels, match.ignore_index,
                                         match.reduction, _val(match.linear).dtype, match.loss_dtype,
                                         match.with_grad))
            loss = graph.call_function(operator.getitem, (fused, 0))
        ce.replace_all_uses_with(loss)
        chain = []
        node = ce
        while node is not match.linear:
            chain.append(node)
            node = node.args[0]
        chain.append(match.linear)
        for dead in chain:
            graph.erase_node(dead)
        notes.append(f"cross_entropy {ce.name}: fused with its linear (logits {tuple(_val(match.linear).shape)} "
                     f"never materialized)")
    if changed:
        graph.lint()
        gm.recompile()
    for note in notes:
        log.info("%s", note)
    return notes


def fused_linear_cross_entropy_enabled() -> bool:
    """False under FUSER_DISABLE=fused_linear_cross_entropy (an unknown name there is the
    settings' SettingError, as everywhere else)."""
    from fuser.lowering import settings
    from fuser.passes.concretize import DISABLE_FUSED_LINEAR_CROSS_ENTROPY

    return DISABLE_FUSED_LINEAR_CROSS_ENTROPY not in {o.strip() for o in settings.disable().split(",")}
