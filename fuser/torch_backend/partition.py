"""An ATen graph → the same graph with its maximal fuser-supported regions replaced by
fusions (the fw_compiler / bw_compiler given to AOTAutograd).

Steps: rebuild sizes of intermediates from the inputs (symbolic.py); propose partitions
with torch's CapabilityBasedPartitioner and `FuserSupport`; drop view/constant ops at a
region's edges (they cost nothing eagerly and would only add inputs/outputs); fuse each
partition into a submodule; build its FusionDefinition; install a `FusedRegion` in its place.
A region whose definition cannot be built stays eager (its submodule runs), with the reason
in the report.
"""

from __future__ import annotations

import logging
import time

import torch
import torch.fx
from torch.fx.node import _get_qualified_name
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

from fuser.torch_backend.fusion_builder import build_region
from fuser.torch_backend.op_table import TRANSLATIONS, translation_for
from fuser.torch_backend.report import GraphReport, RegionReport
from fuser.torch_backend.runtime import FusedRegion
from fuser.torch_backend.support import FuserSupport
from fuser.torch_backend.symbolic import sizes_from_inputs

log = logging.getLogger("fuser.torch")

REGION_PREFIX = "fuser_region_"


def _non_compute_names() -> list[str]:
    translation_for(None)  # loads the op table
    return [_get_qualified_name(t) for t, tr in TRANSLATIONS.items() if tr.non_compute]


def _op_name(node: torch.fx.Node) -> str:
    target = node.target
    return str(target) if isinstance(target, torch._ops.OpOverload) else getattr(target, "__name__", str(target))


def _counted(node: torch.fx.Node) -> bool:
    """A node that is an ATen op of the graph (not a tuple access or size arithmetic)."""
    return node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and \
        node.target != torch.ops.aten.sym_size.int


def partition_graph(gm: torch.fx.GraphModule, kind: str) -> tuple[torch.fx.GraphModule, GraphReport]:
    start = time.perf_counter()
    sizes_from_inputs(gm)
    report = GraphReport(kind, aten_ops=sum(1 for n in gm.graph.nodes if _counted(n)))
    support = FuserSupport()
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=False,
                                             non_compute_ops=_non_compute_names())
    partitions = partitioner.propose_partitions()
    partitioner.remove_bookend_non_compute_ops(partitions)
    partitions = [p for p in partitions if any(_counted(n) for n in p.nodes)]
    fused_nodes = {n for p in partitions for n in p.nodes}
    for node in gm.graph.nodes:
        if _counted(node) and node not in fused_nodes:
            report.eager_ops[_op_name(node)] += 1
            if node in support.reasons:
                report.reasons.setdefault(_op_name(node), support.reasons[node])
            elif node.op == "call_function":
                report.reasons.setdefault(_op_name(node), "supported, but not worth a fusion on its own here")
    region_ops = [[_op_name(n) for n in p.nodes if _counted(n)] for p in partitions]
    if partitions:
        gm = fuse_by_partitions(gm, [p.nodes for p in partitions], prefix=REGION_PREFIX, always_return_tuple=True)
    for node in gm.graph.nodes:
        if node.op == "call_module" and node.target.startswith(REGION_PREFIX):
            index = int(node.target[len(REGION_PREFIX):])
            report.regions.append(_install_region(gm, node.target, f"{kind}.{node.target}", region_ops[index]))
    gm.recompile()
    report.build_s = time.perf_counter() - start
    log.info("%s", report.summary())
    return gm, report


def _install_region(gm: torch.fx.GraphModule, attr: str, name: str, ops: list[str]) -> RegionReport:
    submodule = getattr(gm, attr)
    try:
        fd, plan = build_region(submodule, name)
    except Exception as error:  # any failure to define the fusion: the partition runs eagerly
        log.warning("%s stays eager: %s: %s", name, type(error).__name__, error)
        return RegionReport(name, ops, fallback=f"{type(error).__name__}: {error}")
    region = FusedRegion(name, fd, plan, submodule)
    setattr(gm, attr, region)
    return RegionReport(name, ops, region=region)


__all__ = ["partition_graph", "REGION_PREFIX"]
