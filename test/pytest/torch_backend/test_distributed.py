"""DistributedDataParallel over torch.compile(backend=fuser): one training step of a small
transformer (model_zoo's NanoGPT) on 2 gloo ranks (127.0.0.1, CPU), each rank on its own batch.

After backward, every rank's all-reduced gradients must equal those of one single-process eager
step on both batches (the mean of the two per-batch losses, backward once: DDP averages the
ranks' gradients, and each rank's loss is the mean over its own batch), both ranks must hold
identical gradients, and fuser must have fused regions on each rank.

Dynamo setting: `torch._dynamo.config.optimize_ddp = "ddp_optimizer"` (torch's default, set
explicitly), with a small `bucket_cap_mb` so NanoGPT's gradients span several DDP buckets. The
DDPOptimizer then splits the captured graph at bucket boundaries and hands each piece to the
fuser backend separately, so each bucket's all-reduce can start while the rest of the backward
still runs: the way DDP + torch.compile runs by default, and the path on which the backend gets
several small forward/backward graph pairs (checked: more than one forward graph per rank). With
DDP's default 25 MiB buckets the whole model is one bucket and nothing would be split. DDPOptimizer
asserts its first bucket (torch's 1 MiB default) is no larger than bucket_cap_mb, although DDP
itself uses bucket_cap_mb for its first bucket when bucket_cap_mb is given, so the ranks set
`torch.distributed._DEFAULT_FIRST_BUCKET_BYTES` to the bucket size. "no_optimization" (one graph,
gradients reduced after the whole backward) and "python_reducer" gave the same gradients here too.

Ranks run as subprocesses (distributed_ranks.py, shared with test_distributed_fsdp_tp.py: FSDP2
and tensor parallelism); each writes its gradients, fusion counts, or its traceback to a result
file the parent reads.
"""

from __future__ import annotations

import pytest
import torch

from distributed_ranks import WORLD, assert_grads_close, run_ranks

CHILD_TIMEOUT_S = 100  # both ranks together, compilation included (about 20 s on 2 cores)
OPTIMIZE_DDP = "ddp_optimizer"  # torch._dynamo.config.optimize_ddp in the ranks (see the docstring)
BUCKET_CAP_MB = 0.02  # ~5k float32 gradients a bucket: NanoGPT's ~31k parameters span several

# the 2 rank processes of each distributed test fill a 2-core machine: one such test at a time
pytestmark = pytest.mark.xdist_group("distributed-ranks")

_STEP = """
def step(rank, world):
    import os
    import torch
    import torch.distributed as dist
    import torch._dynamo
    from torch.nn.parallel import DistributedDataParallel as DDP

    import fuser.torch_backend
    from fuser.benchmarks import model_zoo

    torch._dynamo.config.optimize_ddp = os.environ["FUSER_TEST_OPTIMIZE_DDP"]
    bucket_mb = float(os.environ["FUSER_TEST_DDP_BUCKET_MB"])
    # DDPOptimizer assumes DDP's default 1 MiB first bucket and asserts it is <= bucket_cap_mb; with
    # an explicit bucket_cap_mb DDP's first bucket is bucket_cap_mb too, so tell DDPOptimizer the same
    # (it reads this constant when it is built, at the first compiled call)
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(bucket_mb * 1024 * 1024)
    torch.manual_seed(0)  # NanoGPT's init is unseeded; DDP broadcasts rank 0's weights anyway
    case = model_zoo.build("nanogpt")
    result = {"init": {k: v.detach().clone() for k, v in case.model.state_dict().items()}}
    ddp = DDP(case.model, bucket_cap_mb=bucket_mb)
    reports = []
    compiled = torch.compile(ddp, backend=fuser.torch_backend.make_backend(reports))
    inputs = case.batch(rank, model_zoo.SEQ)
    loss = case.loss(compiled(**inputs), inputs)
    loss.backward()
    result["loss"] = loss.detach()
    result["grads"] = {n: p.grad.detach().clone() for n, p in case.model.named_parameters()}
    result["fusions"] = sum(len(r.fusions) for r in reports)
    result["kernels"] = sum(r.kernels or 0 for r in reports)
    result["graphs"] = [r.kind for r in reports]
    result["reports"] = "\\n".join(str(r) for r in reports)
    print(result["reports"], flush=True)
    return result
"""


def _run_ranks(tmp_path) -> list[dict]:
    env = {"FUSER_TEST_DDP_BUCKET_MB": str(BUCKET_CAP_MB), "FUSER_TEST_OPTIMIZE_DDP": OPTIMIZE_DDP}
    return run_ranks(tmp_path, _STEP, env=env, timeout_s=CHILD_TIMEOUT_S)


def _reference_grads(init: dict) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """One eager single-process step on both ranks' batches (mean of the per-batch losses), from
    the weights DDP started from (rank 0's, broadcast to every rank)."""
    from fuser.benchmarks import model_zoo

    case = model_zoo.build("nanogpt")
    case.model.load_state_dict(init)
    losses = []
    for rank in range(WORLD):
        inputs = case.batch(rank, model_zoo.SEQ)
        losses.append(case.loss(case.model(**inputs), inputs))
    (sum(losses) / WORLD).backward()
    return [l.detach() for l in losses], {n: p.grad.detach().clone() for n, p in case.model.named_parameters()}


def test_ddp_compiled_step_matches_eager(tmp_path):
    results = _run_ranks(tmp_path)
    ref_losses, ref = _reference_grads(results[0]["init"])

    for r, res in enumerate(results):
        assert res["fusions"] > 0, f"rank {r}: fuser fused nothing; its graphs:\n{res['reports']}"
        assert res["kernels"] > 0, f"rank {r}: no fused kernel ran; its graphs:\n{res['reports']}"
        assert "backward" in res["graphs"], f"rank {r}: no backward graph compiled: {res['graphs']}"
        # DDPOptimizer split the step at the bucket boundaries: several graphs, each compiled by fuser
        assert res["graphs"].count("forward") > 1, f"rank {r}: the graph was not split: {res['graphs']}"
        torch.testing.assert_close(res["loss"], ref_losses[r], rtol=1e-5, atol=1e-5,
                                   msg=lambda m, r=r: f"rank {r} loss differs from eager: {m}")
        assert res["grads"].keys() == ref.keys(), f"rank {r}: parameters {sorted(res['grads'])}"

    scale = max(float(g.abs().max()) for g in ref.values())
    for name, want in ref.items():
        g0, g1 = results[0]["grads"][name], results[1]["grads"][name]
        assert torch.equal(g0, g1), (f"{name}: ranks hold different gradients "
                                     f"(max |diff| {float((g0 - g1).abs().max()):.3g})")
        assert_grads_close(name, g0, want, scale, "the all-reduced gradient")
