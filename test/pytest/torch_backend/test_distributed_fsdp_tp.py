"""FSDP2 and tensor parallelism over torch.compile(backend=fuser): two training steps (SGD between
them) of model_zoo's llama-style block (RMSNorm, RoPE, GQA attention, SwiGLU, LM head) on 2 gloo
ranks (127.0.0.1, CPU), each step's loss and every gradient against a single-process eager run of
the same steps.

FSDP2 (`fully_shard(block)`): every parameter is a DTensor sharded on dim 0; each rank runs its own
batch. A gradient is the reduce-scattered shard, gathered whole (`DTensor.full_tensor()`) and
compared with the eager gradient of the mean of the two per-batch losses (FSDP averages over the
ranks, each rank's loss is the mean over its own batch). In torch 2.13 FSDP2's hooks never enter a
compiled graph (`_dynamo_disable`): its all-gathers and reduce-scatters run eagerly between the
graphs fuser compiles, which see the unsharded parameters as plain tensors. After each backward
FSDP2 frees the all-gathered parameters (`untyped_storage().resize_(0)`) and the next forward
gathers them into storage allocated again, which the second step's fused regions read.

Tensor parallelism (`parallelize_module`): q and kv `ColwiseParallel`, o `RowwiseParallel` (each
rank holds half of the attention heads: 2 query heads and their 1 KV head), gate and up
`ColwiseParallel`, down `RowwiseParallel`; norms, embedding and LM head replicated. Both ranks run
the same batch. The block's kv projection is one Linear whose rows are [k of every head, v of every
head]; a colwise shard must hold its heads' k and v, so the rows are reordered to [k, v] per KV
head before sharding (as Megatron lays out a fused QKV), and the gathered gradient is put back in
the block's order before the comparison. DTensor traces its redistributions into the graphs as
functional collectives (the row-parallel outputs' all_reduce in the forward, the column-parallel
inputs' in the backward).

Per rank: losses within 1e-5 of eager, every gradient within 1e-5 of the largest eager gradient
(fp32 summation order only), both ranks holding identical gathered gradients, fused regions and
kernels in the forward and backward graphs (so fuser computed these values), no functional
collective inside a fusion, and every collective counted as a library call in the graph's report
(report.is_library_call; for TP at least one in each of the forward and backward graphs).
"""

from __future__ import annotations

import pytest
import torch

from distributed_ranks import WORLD, assert_grads_close, run_ranks

CHILD_TIMEOUT_S = 120  # both ranks together, compilation included (about 20 s on 2 cores)
STEPS = 2
LR = 0.5  # SGD between the steps: large enough that the second step's weights differ visibly

# the 2 rank processes of each distributed test fill a 2-core machine: one such test at a time
pytestmark = pytest.mark.xdist_group("distributed-ranks")

_COMMON = """
def train(model, case, compiled, batches, grads_of):
    import torch

    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses, grads = [], []
    for inputs in batches:
        loss = case.loss(compiled(**inputs), inputs)
        loss.backward()
        losses.append(loss.detach())
        grads.append({n: grads_of(p.grad) for n, p in model.named_parameters()})
        opt.step()
        opt.zero_grad()
    return {"losses": losses, "grads": grads}


def described(reports):
    return {"graphs": [{"kind": r.kind, "fused": [list(f.ops) for f in r.fusions], "eager": dict(r.eager_ops),
                        "counts": r.counts(), "kernels": r.kernels or 0} for r in reports],
            "reports": "\\n".join(str(r) for r in reports)}
"""

_FSDP_STEP = _COMMON + """
def step(rank, world):
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor, Shard

    import fuser.torch_backend
    from fuser.benchmarks import model_zoo

    case = model_zoo.build("llama_block")  # seeded: the same weights on every rank and in the reference
    model = case.model
    fully_shard(model, mesh=init_device_mesh("cpu", (world,)))
    sharded = [n for n, p in model.named_parameters() if not (isinstance(p, DTensor) and p.placements == (Shard(0),))]
    assert not sharded, f"parameters not sharded on dim 0: {sharded}"
    reports = []
    compiled = torch.compile(model, backend=fuser.torch_backend.make_backend(reports))
    batches = [case.batch(rank + world * s, model_zoo.SEQ) for s in range(STEPS)]
    result = train(model, case, compiled, batches, lambda g: g.full_tensor())
    result.update(described(reports))
    print(result["reports"], flush=True)
    return result
"""

_TP_STEP = _COMMON + """
def kv_rows_by_head(w, kv_heads, head_dim, back=False):
    # rows [k of each head, v of each head] -> [k, v] of head 0, [k, v] of head 1...; back: the reverse
    split = (kv_heads, 2) if back else (2, kv_heads)
    return w.view(*split, head_dim, -1).transpose(0, 1).reshape(w.shape).clone()


def step(rank, world):
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    import fuser.torch_backend
    from fuser.benchmarks import model_zoo

    case = model_zoo.build("llama_block")  # seeded: the same weights on every rank and in the reference
    model = case.model
    kv_heads, head_dim = model.kv_heads, model.head_dim
    with torch.no_grad():
        model.kv.weight.copy_(kv_rows_by_head(model.kv.weight, kv_heads, head_dim))
    parallelize_module(model, init_device_mesh("cpu", (world,)), {
        "q": ColwiseParallel(), "kv": ColwiseParallel(), "o": RowwiseParallel(),
        "gate": ColwiseParallel(), "up": ColwiseParallel(), "down": RowwiseParallel()})
    model.heads //= world  # the heads this rank holds
    model.kv_heads //= world
    reports = []
    compiled = torch.compile(model, backend=fuser.torch_backend.make_backend(reports))
    batches = [case.batch(s, model_zoo.SEQ) for s in range(STEPS)]  # every rank the same batches
    result = train(model, case, compiled, batches, lambda g: g.full_tensor() if hasattr(g, "full_tensor") else g)
    for grads in result["grads"]:  # back to the block's row order
        grads["kv.weight"] = kv_rows_by_head(grads["kv.weight"], kv_heads, head_dim, back=True)
    result.update(described(reports))
    print(result["reports"], flush=True)
    return result
"""


def _source(step: str) -> str:
    return f"STEPS = {STEPS}\nLR = {LR}\n" + step


def _reference(batches_per_step: list[list[int]]) -> tuple[list[torch.Tensor], list[dict[str, torch.Tensor]]]:
    """Eager single-process steps: per step the mean of the losses of its batches (seeds), backward,
    SGD. The loss of each step's first batch, and each step's gradients."""
    from fuser.benchmarks import model_zoo

    case = model_zoo.build("llama_block")
    opt = torch.optim.SGD(case.model.parameters(), lr=LR)
    losses, grads = [], []
    for seeds in batches_per_step:
        per_batch = []
        for seed in seeds:
            inputs = case.batch(seed, model_zoo.SEQ)
            per_batch.append(case.loss(case.model(**inputs), inputs))
        (sum(per_batch) / len(per_batch)).backward()
        losses.append([l.detach() for l in per_batch])
        grads.append({n: p.grad.detach().clone() for n, p in case.model.named_parameters()})
        opt.step()
        opt.zero_grad()
    return losses, grads


def _is_collective(op: str) -> bool:
    return op.split(".")[0] in ("_c10d_functional", "_c10d_functional_autograd", "c10d_functional")


def _check_graphs(rank: int, res: dict, collectives_in: tuple[str, ...]) -> None:
    """Fuser fused and ran kernels in the forward and backward graphs; no collective inside a
    fusion; every collective a library call in the report's counts; collectives present in the
    graphs of the kinds `collectives_in` names."""
    from fuser.torch_backend.report import LIBRARY_OPS

    graphs, text = res["graphs"], res["reports"]
    kinds = [g["kind"] for g in graphs]
    assert "forward" in kinds and "backward" in kinds, f"rank {rank}: graphs {kinds}"
    for kind in ("forward", "backward"):
        mine = [g for g in graphs if g["kind"] == kind]
        assert sum(len(g["fused"]) for g in mine) > 0, f"rank {rank}: no fusion in a {kind} graph:\n{text}"
        assert sum(g["kernels"] for g in mine) > 0, f"rank {rank}: no fused kernel ran in a {kind} graph:\n{text}"
    for g in graphs:
        for ops in g["fused"]:
            inside = [op for op in ops if _is_collective(op)]
            assert not inside, f"rank {rank}: a {g['kind']} fusion holds the collective(s) {inside}:\n{text}"
        collectives = sum(n for op, n in g["eager"].items() if _is_collective(op))
        library = sum(n for op, n in g["eager"].items() if op in LIBRARY_OPS) + collectives
        assert g["counts"]["library"] == (0, library), (f"rank {rank}: {g['kind']} graph counts library calls "
                                                        f"{g['counts']['library']}, expected (0, {library}):\n{text}")
        if g["kind"] in collectives_in:
            assert collectives > 0, f"rank {rank}: no functional collective in the {g['kind']} graph:\n{text}"


def _check_steps(results: list[dict], ref_losses, ref_grads, loss_index) -> None:
    for s in range(STEPS):
        scale = max(float(g.abs().max()) for g in ref_grads[s].values())
        assert scale > 0
        for r, res in enumerate(results):
            torch.testing.assert_close(res["losses"][s], ref_losses[s][loss_index(r)], rtol=1e-5, atol=1e-6,
                                       msg=lambda m, r=r, s=s: f"rank {r} step {s}: loss differs from eager: {m}")
            assert res["grads"][s].keys() == ref_grads[s].keys(), f"rank {r}: parameters {sorted(res['grads'][s])}"
        for name, want in ref_grads[s].items():
            g0, g1 = results[0]["grads"][s][name], results[1]["grads"][s][name]
            assert torch.equal(g0, g1), (f"step {s} {name}: the ranks' gathered gradients differ "
                                         f"(max |diff| {float((g0 - g1).abs().max()):.3g})")
            assert_grads_close(name, g0, want, scale, f"step {s}'s gathered gradient")


def test_fsdp2_compiled_steps_match_eager(tmp_path):
    results = run_ranks(tmp_path, _source(_FSDP_STEP), timeout_s=CHILD_TIMEOUT_S)
    # step s: rank r ran batch r + WORLD * s; eager runs both of the step's batches, losses averaged
    ref_losses, ref_grads = _reference([[r + WORLD * s for r in range(WORLD)] for s in range(STEPS)])
    for r, res in enumerate(results):
        _check_graphs(r, res, collectives_in=())  # FSDP2's collectives run outside the compiled graphs
    _check_steps(results, ref_losses, ref_grads, loss_index=lambda r: r)


def test_tensor_parallel_compiled_steps_match_eager(tmp_path):
    results = run_ranks(tmp_path, _source(_TP_STEP), timeout_s=CHILD_TIMEOUT_S)
    ref_losses, ref_grads = _reference([[s] for s in range(STEPS)])  # both ranks ran batch s
    for r, res in enumerate(results):
        _check_graphs(r, res, collectives_in=("forward", "backward"))
    _check_steps(results, ref_losses, ref_grads, loss_index=lambda r: 0)
