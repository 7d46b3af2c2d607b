"""Fused regions never make a dependency cycle (fuser/torch_backend/partition.py): a region never
needs, through an eager op or another region, a value computed from its own outputs.

- Sparse MoE blocks (Mixtral's MixtralSparseMoeBlock, GPT-OSS's GptOssMLP; tiny configs, random
  weights, the "grouped_mm" experts a model built from the config runs) forward and backward
  under torch.compile(backend="fuser") equal eager: outputs and every gradient, over several
  seeds and token counts (one token: two experts hit; more: all four). Their backward made
  fuse_by_partitions assert "Invalid partition, found dependency cycles": torch's partitioner
  proposes a partition of two unconnected chains, C (one chain after an eager op of partition
  A, one before an eager op feeding partition B), and the merge of the partitions between the
  same library calls joined A and B, looking for a path between them through nodes only: there
  is none, the path A -> C -> B runs through the partition C.
- The merge on a small graph of that shape keeps A and B apart and says why in the report.
- A cycle in the partitions handed to the last check (none is expected) is cut, never asserted:
  a partition of unconnected pieces into its pieces, a connected one run eagerly, saying why.
"""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

from fuser.torch_backend import partition as fuser_partition
from torch_checks import compare_with_eager, fresh_dynamo, report_of  # noqa: F401


def _moe_block(model: str, seed: int):
    """The first layer's sparse MoE block of a tiny model built from its config (so it runs the
    experts implementation a model gets by default), its weights drawn from `seed`."""
    from transformers import GptOssConfig, GptOssModel, MixtralConfig, MixtralModel

    shape = dict(hidden_size=16, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
                 num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, head_dim=8, vocab_size=32)
    config, cls = (MixtralConfig, MixtralModel) if model == "mixtral" else (GptOssConfig, GptOssModel)
    torch.manual_seed(seed)
    block = cls(config(**shape)).layers[0].mlp
    assert block.experts.config._experts_implementation == "grouped_mm"  # what failed
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in block.parameters():  # routing that depends on the seed, experts that differ
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return block


@pytest.mark.parametrize("model", ["mixtral", "gpt_oss"])
def test_sparse_moe_block_forward_and_backward_match_eager(model):
    for seed, tokens in ((0, 8), (1, 8), (2, 1)):
        torch._dynamo.reset()
        block = _moe_block(model, seed)
        x = torch.randn(1, tokens, 16, generator=torch.Generator().manual_seed(100 + seed), requires_grad=True)
        reports = compare_with_eager(block, x, params=list(block.parameters()))
        backward = report_of(reports, "backward")
        assert backward.fusions, str(backward)
        assert len(backward.regions) == len({r.name for r in backward.regions})


def _a_c_b():
    """A graph of the failing shape, A -> sort -> C1 and C2 -> sort -> B, with A also feeding
    B directly; C = C1 + C2 is one partition of two unconnected chains (as torch proposes them)."""
    def fn(x, y):
        a = (x * 2).sin()
        c1 = (torch.sort(a, dim=-1)[0] + 1).cos()
        c2 = (y * 3).exp()
        b = (a * torch.sort(c2, dim=-1)[0]).tanh()
        return b, c1

    args = (torch.randn(4, 8), torch.randn(4, 8))
    gm = make_fx(fn, tracing_mode="fake")(*args)
    nodes = {n.name: n for n in gm.graph.nodes}
    names = {"A": ["mul", "sin"], "C": ["add", "cos", "mul_1", "exp"], "B": ["mul_2", "tanh"]}
    assert [nodes[n].target for n in names["A"]] == [torch.ops.aten.mul.Tensor, torch.ops.aten.sin.default]
    assert [nodes[n].target for n in names["B"]] == [torch.ops.aten.mul.Tensor, torch.ops.aten.tanh.default]

    def partitions(*keys):
        return [Partition(nodes=[nodes[n] for k in key for n in names[k]]) for key in keys]

    return fn, args, gm, partitions


def test_the_merge_keeps_apart_partitions_a_third_one_joins():
    """Old code: A and B merged (no node-level path between them outside both), making the
    cycle {A, B} -> sort -> C -> sort -> {A, B}."""
    _, _, gm, partitions = _a_c_b()
    merged = fuser_partition._merge_between_library_calls(gm.graph, partitions("A", "C", "B"))
    assert sorted(sorted(n.name for n in p.nodes) for p in merged) == \
        [["add", "cos", "exp", "mul_1"], ["mul", "sin"], ["mul_2", "tanh"]]
    assert fuser_partition._break_cycles(gm.graph, merged) == (merged, [])
    a, c, b = partitions("A", "C", "B")
    kept_apart = []
    fuser_partition._merge_between_library_calls(gm.graph, [a, c, b], kept_apart)
    assert [(p, [k for k, _ in earlier]) for p, earlier in kept_apart] == [(c, [a]), (b, [a, c])]
    fuse_by_partitions(gm, [p.nodes for p in merged], always_return_tuple=True)  # asserts on a cycle


def _partition_with(monkeypatch, gm, proposed):
    """partition_graph with torch's partitioner proposing `proposed`."""
    monkeypatch.setattr(CapabilityBasedPartitioner, "propose_partitions", lambda self: proposed)
    return fuser_partition.partition_graph(gm, "forward")


def test_partition_graph_reports_why_regions_stay_apart(monkeypatch):
    fn, args, gm, partitions = _a_c_b()
    gm, report = _partition_with(monkeypatch, gm, partitions("A", "C", "B"))
    assert len(report.fusions) == 3 and not [r for r in report.regions if r.failed], str(report)
    (note_c, note_b) = report.kept_apart
    assert note_b.startswith("forward.fuser_region_2 runs apart from forward.fuser_region_0 (through sort"), note_b
    assert "forward.fuser_region_1 (through sort" in note_b and "a cycle" in note_b, note_b
    assert "kept apart: forward.fuser_region_2" in str(report)
    for got, want in zip(gm(*args), fn(*args)):
        torch.testing.assert_close(got, want)


def test_a_cycle_in_the_proposed_partitions_is_cut_not_asserted(monkeypatch):
    """{A, B} and C make a cycle: C (two unconnected chains) is cut into its chains."""
    fn, args, gm, partitions = _a_c_b()
    gm, report = _partition_with(monkeypatch, gm, partitions("AB", "C"))
    assert len(report.fusions) == 3, str(report)
    (note,) = [n for n in report.kept_apart if "was on a dependency cycle" in n]
    assert "(sort (aten.sort.default) -> " in note and "cut into 2 unconnected pieces" in note, note
    for got, want in zip(gm(*args), fn(*args)):
        torch.testing.assert_close(got, want)


def test_a_connected_partition_on_a_cycle_runs_eagerly(monkeypatch):
    """One connected partition whose value comes back to it through an eager op: its ops run
    eagerly, each op saying why."""
    def fn(x):
        a = (x * 2).sin()
        return (torch.sort(a, dim=-1)[0] + a).tanh()

    args = (torch.randn(4, 8),)
    gm = make_fx(fn, tracing_mode="fake")(*args)
    nodes = {n.name: n for n in gm.graph.nodes}
    proposed = [Partition(nodes=[nodes[n] for n in ("mul", "sin", "add", "tanh")])]
    gm, report = _partition_with(monkeypatch, gm, proposed)
    assert not report.regions and report.eager_ops["aten.tanh.default"] == 1, str(report)
    (note,) = report.kept_apart
    assert "was on a dependency cycle" in note and "sort (aten.sort.default)" in note, note
    assert "its ops run eagerly" in note, note
    assert "dependency cycle" in report.reasons["aten.tanh.default"], report.reasons
    torch.testing.assert_close(gm(*args), fn(*args))
