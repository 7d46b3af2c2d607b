"""An ATen graph → the same graph with its maximal fuser-supported regions replaced by
fusions (the fw_compiler / bw_compiler given to AOTAutograd).

Steps: rebuild sizes of intermediates from the inputs (symbolic.py); propose partitions
with torch's CapabilityBasedPartitioner and `FuserSupport`; drop view/constant ops at a
region's edges (they cost nothing eagerly and would only add inputs/outputs); fuse each
partition into a submodule; build its FusionDefinition and compile its kernels for the traced
example inputs (all regions of a graph at once: g++ and NVRTC work in parallel); install a
`FusedRegion` in its place.

A region is decided here, once: it either runs fused from its first call on, or it is refused
now — its definition cannot be built, it computes nothing (every output is an input or a view
of one), or its kernels cannot be compiled for the traced inputs — and its submodule runs
eagerly, with the reason in the report. Nothing falls back at run time: a fusion that fails
then raises, as the program would.
"""

from __future__ import annotations

import logging
import operator
import time
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.fx
from torch.fx.node import _get_qualified_name
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

from fuser.lowering import settings
from fuser.lowering.settings import SettingError
from fuser.torch_backend.dtypes import size_hint
from fuser.torch_backend.fusion_builder import NothingToCompute, build_region
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


def _computes(node: torch.fx.Node) -> bool:
    """An ATen op of the graph that is not a view: a partition of views alone computes nothing
    (its fusion would be refused as such); its views stay eager, where they cost nothing."""
    from fuser.torch_backend.report import op_kind

    return _counted(node) and op_kind(_op_name(node)) != "view"


def partition_graph(gm: torch.fx.GraphModule, kind: str, execute_options: dict | None = None
                    ) -> tuple[torch.fx.GraphModule, GraphReport]:
    """`execute_options`: keywords every region's `fd.execute` gets (the backend's options:
    registration.py)."""
    start = time.perf_counter()
    settings.disable(), settings.launch_settings()  # a bad FUSER_* value raises SettingError: not a refused region
    sizes_from_inputs(gm)
    report = GraphReport(kind, aten_ops=sum(1 for n in gm.graph.nodes if _counted(n)))
    support = FuserSupport()
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=False,
                                             non_compute_ops=_non_compute_names())
    partitions = partitioner.propose_partitions()
    partitioner.remove_bookend_non_compute_ops(partitions)
    partitions = _split_at_collectives(gm.graph, partitions)
    partitioned = {n for p in partitions for n in p.nodes}
    for partition in partitions:
        _strided_views_leave(gm.graph, partition.nodes, partitioned)
    partitions = [p for p in partitions if any(_computes(n) for n in p.nodes)]
    partitions = _merge_between_library_calls(gm.graph, partitions)
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
    regions = [node.target for node in gm.graph.nodes
               if node.op == "call_module" and node.target.startswith(REGION_PREFIX)]
    built = [_build(gm, attr, f"{kind}.{attr}", region_ops[int(attr[len(REGION_PREFIX):])], execute_options or {})
             for attr in regions]
    with ThreadPoolExecutor(max_workers=max(1, min(len(built), settings.compile_threads()))) as pool:
        reports = list(pool.map(_compile, built))
    for attr, (region, region_report) in zip(regions, reports):
        report.regions.append(region_report)
        if region is not None:
            setattr(gm, attr, region)
            continue
        for op in region_report.ops:  # refused: its ops run eagerly, and are counted so, once
            report.eager_ops[op] += 1
            report.reasons.setdefault(op, f"in {region_report.name}, which fuser refused: {region_report.refused}")
    gm.recompile()
    report.regions_between_library_calls = _regions_between_library_calls(gm.graph)
    report.build_s = time.perf_counter() - start
    log.info("%s", report.summary())
    return gm, report


def _split_at_collectives(graph: torch.fx.Graph, partitions: list) -> list:
    """A proposed partition with ops on both sides (in graph order) of a functional collective
    (report.COLLECTIVE_NAMESPACES: all_reduce, wait_tensor...), cut there: torch's partitioner
    also joins unconnected chains, and one fusion would then hold the ops before an all_reduce
    (or between it and its wait_tensor, where they overlap the communication) until the
    collective's result is in. A piece of one compute op is not worth a fusion (as the
    partitioner decides); its op runs eagerly. Pieces are disjoint in graph order, so none
    needs another's outputs and another's inputs at once: no cycle."""
    from torch.fx.passes.infra.partitioner import Partition

    from fuser.torch_backend.report import COLLECTIVE_NAMESPACES

    segment, collectives = {}, 0
    for node in graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and \
                node.target.namespace in COLLECTIVE_NAMESPACES:
            collectives += 1
        segment[node] = collectives
        if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
            segment[node] = segment[node.args[0]]  # a part of a tuple result: with its producer
    if not collectives:
        return partitions
    split = []
    for partition in partitions:
        pieces: dict[int, list] = {}
        for node in partition.nodes:
            pieces.setdefault(segment[node], []).append(node)
        if len(pieces) == 1:
            split.append(partition)
            continue
        split += [Partition(nodes=nodes) for nodes in pieces.values() if sum(map(_computes, nodes)) > 1]
    return split


def _merge_between_library_calls(graph: torch.fx.Graph, partitions: list) -> list:
    """Partitions that lie between the same two library calls (in graph order) and do not
    depend on each other through an eager node become one: torch's partitioner only joins
    connected nodes, so independent chains (the bias gradients of a backward, say) would be
    regions of their own, each a call with its own host overhead. Functional collectives are
    library calls here (report.is_library_call): a fusion never joins ops from both sides of one,
    which would hold the ops before it until the collective's result is in."""
    from fuser.torch_backend.report import is_library_call

    position, segment, library_calls = {}, {}, 0
    for i, node in enumerate(graph.nodes):
        position[node] = i
        if node.op == "call_function" and is_library_call(_op_name(node)):
            library_calls += 1
        segment[node] = library_calls
    groups: dict[int, list] = {}  # by where each region will run: at its last node
    for partition in sorted(partitions, key=lambda p: max(position[n] for n in p.nodes)):
        groups.setdefault(segment[max(partition.nodes, key=position.get)], []).append(partition)
    merged = []
    for group in groups.values():
        kept: list = []
        for partition in group:
            into = next((k for k in kept if not _joined_through_eager(k.nodes, partition.nodes)), None)
            if into is None:
                kept.append(partition)
            else:
                for node in partition.nodes:
                    into.add_node(node)
        merged += kept
    return merged


def _joined_through_eager(a: dict, b: dict) -> bool:
    """Whether a path leads from one node set to the other through a node in neither (merging
    them would then make a cycle: the eager node needs one part and feeds the other)."""
    for source, target in ((a, b), (b, a)):
        seen = set()
        frontier = [u for n in source for u in n.users if u not in source and u not in target]
        while frontier:
            node = frontier.pop()
            if node in seen:
                continue
            seen.add(node)
            for user in node.users:
                if user in target:
                    return True
                if user not in source:
                    frontier.append(user)
    return False


def _regions_between_library_calls(graph: torch.fx.Graph) -> int:
    """The most fused regions that run, in graph order, between two consecutive library calls
    (or before the first, after the last): the goal is at most one. The ops fuser leaves to
    ATen on purpose (support.LEFT_TO_LIBRARIES: index_put, sort...) and functional collectives
    are library calls here too: regions on both sides of one cannot be one region."""
    from fuser.torch_backend.report import is_library_call
    from fuser.torch_backend.support import LEFT_TO_LIBRARIES

    left = {str(op) for op in LEFT_TO_LIBRARIES}
    most = run = 0
    for node in graph.nodes:
        if node.op == "call_module" and node.target.startswith(REGION_PREFIX):
            run += 1
            most = max(most, run)
        elif node.op == "call_function" and (is_library_call(_op_name(node)) or _op_name(node) in left):
            run = 0
    return most


def _strided_views_leave(graph: torch.fx.Graph, members: dict, partitioned: set) -> None:
    """A view whose value leaves the region for eager code with a layout that is not dense (a
    slice of a wider tensor, an expand) must reach it as traced: a strided view of its base,
    sharing storage. A fusion writes dense outputs, so such a view is taken eagerly, outside
    the region, from the base (which becomes a region output); a view also used inside the
    region stays there too, for those uses. Another region reading it takes any layout."""
    pending = list(members)
    while pending:
        node = pending.pop()
        if node not in members or not _is_view(node) or _is_dense(node.meta.get("val")):
            continue
        outside = [u for u in node.users if u not in partitioned]
        if not outside:
            continue
        if any(u in partitioned for u in node.users):
            with graph.inserting_after(node):
                eager = graph.call_function(node.target, node.args, node.kwargs)
            eager.meta = dict(node.meta)
            for user in outside:
                user.replace_input_with(node, eager)
        else:
            del members[node]
            partitioned.discard(node)  # its base now has a user outside
        pending += [a for a in node.all_input_nodes if a in members]  # the base may leave now too


def _is_view(node: torch.fx.Node) -> bool:
    """A view op, or an element of a view op's tuple (split_with_sizes, unbind: getitem)."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return isinstance(node.args[0], torch.fx.Node) and _is_view(node.args[0])
    return isinstance(node.target, torch._ops.OpOverload) and node.target.is_view


def _is_dense(meta) -> bool:
    """Whether a tensor's elements fill its memory without gaps or overlaps (in some order of its
    dims; size-1 dims do not count): what a fusion output is."""
    if isinstance(meta, (list, tuple)):  # a multi-output view: dense when each part is
        return all(_is_dense(m) for m in meta)
    if not isinstance(meta, torch.Tensor):
        return True
    dims = [(size_hint(st), size_hint(sz)) for sz, st in zip(meta.shape, meta.stride()) if size_hint(sz) != 1]
    if any(sz == 0 for _, sz in dims):
        return True
    expected = 1
    for stride, size in sorted(dims):
        if stride != expected:
            return False
        expected *= size
    return True


def _build(gm: torch.fx.GraphModule, attr: str, name: str, ops: list[str], execute_options: dict):
    """(the region's FusedRegion or None, its report so far)."""
    submodule = getattr(gm, attr)
    try:
        fd, plan = build_region(submodule, name)
    except NothingToCompute as nothing:
        return None, RegionReport(name, ops, refused=str(nothing))
    except SettingError:
        raise
    except Exception as error:  # any failure to define the fusion: the partition runs eagerly
        return None, RegionReport(name, ops, refused=f"{type(error).__name__}: {error}")
    return FusedRegion(name, fd, plan, execute_options), RegionReport(name, ops)


def _compile(built) -> tuple[FusedRegion | None, RegionReport]:
    """Compiles a built region's kernels for the traced example inputs; refuses it on failure."""
    region, report = built
    if region is None:
        return None, report
    start = time.perf_counter()
    try:
        region.compile_for(example_inputs(region.plan.example))
    except SettingError:
        raise
    except Exception as error:
        log.warning("%s is refused: its kernels cannot be built for the traced inputs: %s: %s", report.name,
                    type(error).__name__, error)
        report.refused = f"{type(error).__name__}: {error}"
        return None, report
    report.compile_s = time.perf_counter() - start
    report.region = region
    return region, report


def example_inputs(metas) -> list:
    """Inputs of the traced sizes, strides, dtypes and devices (values uninitialised: only the
    compile reads them), from the placeholders' example values (SymInts at their hints)."""
    out = []
    for meta in metas:
        if isinstance(meta, torch.Tensor):
            sizes = [size_hint(s) for s in meta.shape]
            strides = [size_hint(s) for s in meta.stride()]
            out.append(torch.empty_strided(sizes, strides, dtype=meta.dtype, device=meta.device))
        elif isinstance(meta, torch.SymInt):
            out.append(size_hint(meta))
        elif isinstance(meta, torch.SymFloat):
            out.append(float(meta.node.hint))
        else:
            out.append(meta)
    return out


__all__ = ["partition_graph", "example_inputs", "REGION_PREFIX"]
