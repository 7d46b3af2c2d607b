"""An ATen graph → the same graph with its maximal fuser-supported regions replaced by
fusions (the fw_compiler / bw_compiler given to AOTAutograd).

Steps: rebuild sizes of intermediates from the inputs (symbolic.py); propose partitions
with torch's CapabilityBasedPartitioner and `FuserSupport`; drop view/constant ops at a
region's edges (they cost nothing eagerly and would only add inputs/outputs); join the
partitions between the same two library calls where that makes no dependency cycle (a region
never needs, through eager code or another region, a value computed from its own outputs; a
cycle would be cut, never asserted; the report says which regions stay apart and why); fuse
each partition into a submodule; build its FusionDefinition and compile its kernels for the
traced example inputs (all regions of a graph at once: g++ and NVRTC work in parallel);
install a `FusedRegion` in its place.

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
    proposed = {n: p for p in partitions for n in p.nodes}
    partitioner.remove_bookend_non_compute_ops(partitions)
    _keep_leading_expands(partitions, proposed)
    partitions = _split_at_collectives(gm.graph, partitions)
    partitioned = {n for p in partitions for n in p.nodes}
    for partition in partitions:
        _strided_views_leave(gm.graph, partition.nodes, partitioned)
    partitions = [p for p in partitions if any(_computes(n) for n in p.nodes)]
    kept_apart: list = []
    partitions = _merge_between_library_calls(gm.graph, partitions, kept_apart)
    partitions, cuts = _break_cycles(gm.graph, partitions)
    report.kept_apart, on_cycles = _apart_notes(kind, partitions, kept_apart, cuts)
    fused_nodes = {n for p in partitions for n in p.nodes}
    for node in gm.graph.nodes:
        if _counted(node) and node not in fused_nodes:
            report.eager_ops[_op_name(node)] += 1
            if node in support.reasons:
                report.reasons.setdefault(_op_name(node), support.reasons[node])
            elif node in on_cycles:
                report.reasons.setdefault(_op_name(node), on_cycles[node])
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
            gm.__dict__[attr] = region  # found before nn.Module.__getattr__ (~0.3 µs a call)
            continue
        for op in region_report.ops:  # refused: its ops run eagerly, and are counted so, once
            report.eager_ops[op] += 1
            report.reasons.setdefault(op, f"in {region_report.name}, which fuser refused: {region_report.refused}")
    gm.recompile()
    report.regions_between_library_calls = _regions_between_library_calls(gm.graph)
    report.build_s = time.perf_counter() - start
    log.info("%s", report.summary())
    return gm, report


def single_region(gm: torch.fx.GraphModule) -> FusedRegion | None:
    """The region of a partitioned graph that is nothing but one region: its placeholders passed
    to it in order, its outputs the region's outputs in order (each once). Such a graph can be
    replaced by the region itself (FusedRegion.boxed)."""
    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    calls = [n for n in nodes if n.op == "call_module"]
    if len(calls) != 1 or not calls[0].target.startswith(REGION_PREFIX) or calls[0].kwargs:
        return None
    (call,) = calls
    region = gm.__dict__.get(call.target)
    if not isinstance(region, FusedRegion) or list(call.args) != placeholders:
        return None
    items = [n for n in nodes if n.op == "call_function"]
    (output,) = [n for n in nodes if n.op == "output"]
    if len(nodes) != len(placeholders) + 1 + len(items) + 1 or not isinstance(output.args[0], (tuple, list)):
        return None
    if len(region.plan.outputs) != len(items):
        return None
    for k, item in enumerate(items):
        if item.target is not operator.getitem or item.args != (call, k) or item.kwargs:
            return None
    return region if list(output.args[0]) == items else None


def _keep_leading_expands(partitions: list, proposed: dict) -> None:
    """An expand at the start of a partition stays in it (torch's partitioner takes every view at a
    partition's edge out, to run eagerly for free): eagerly, it hands the fusion a tensor with
    stride-0 dims, which the fusion reads as a full tensor, an element at a time (no vector
    access, no load hoisted out of the broadcast loop: the mean's gradient of every training
    step); inside, the fusion broadcasts its input and the kernel knows it. Only an expand all
    of whose users are in its partition: its value then never leaves it."""
    current = {n: p for p in partitions for n in p.nodes}
    for node, partition in proposed.items():
        if node in current or node.target is not torch.ops.aten.expand.default or partition not in partitions:
            continue
        if node.users and all(current.get(u) is partition for u in node.users):
            partition.add_node(node)
            current[node] = partition


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


def _merge_between_library_calls(graph: torch.fx.Graph, partitions: list, kept_apart: list | None = None) -> list:
    """Partitions that lie between the same two library calls (in graph order) become one where
    that keeps the graph acyclic: torch's partitioner only joins connected nodes, so independent
    chains (the bias gradients of a backward, say) would be regions of their own, each a call
    with its own host overhead. Functional collectives are library calls here
    (report.is_library_call): a fusion never joins ops from both sides of one, which would hold
    the ops before it until the collective's result is in.

    A merge is taken only when no path joins the two partitions through a third vertex of the
    graph of regions (each partition one vertex, every other node its own: _cyclic_merges):
    merged, that vertex would need the region's value and feed it. Walking nodes alone misses
    the paths that enter a partition at one node and leave it at another it is not connected
    to (torch's partitioner joins unconnected chains): a sparse MoE block's backward. So a
    graph of regions that is acyclic stays so at every merge. `kept_apart`, when given,
    receives (partition, [(earlier partition of its group, the vertex the cycle would run
    through)]) for each partition that stays apart from the earlier ones of its group."""
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
    owner = {n: p for p in partitions for n in p.nodes}
    merged = []
    for group in groups.values():
        kept: list = []
        for partition in group:
            cyclic = _cyclic_merges(partition, owner) if kept else {}
            into = next((k for k in kept if k not in cyclic), None)
            if into is None:
                if kept and kept_apart is not None:
                    kept_apart.append((partition, [(k, cyclic[k]) for k in kept]))
                kept.append(partition)
                continue
            for node in partition.nodes:
                into.add_node(node)
                owner[node] = into
        merged += kept
    return merged


def _cyclic_merges(partition, owner: dict) -> dict:
    """The partitions `partition` cannot merge with, each with the vertex a cycle would then run
    through: those a path of the graph of regions leads to from `partition`, or from which one
    leads to it, through a third vertex (a node outside partitions, or another partition: the
    path's first step). The graph of regions has a vertex per partition (`owner`: node → its
    partition) and one per other node; its edges are the nodes' uses. A partition reached
    directly (an edge of the fx graph between the two) merges without a cycle."""
    cyclic: dict = {}
    for forward in (True, False):
        via: dict = {}  # vertex reached → the first step of the path that reached it
        frontier = []
        for v in _neighbours(partition, owner, forward):
            via[v] = v
            frontier.append(v)
        while frontier:
            vertex = frontier.pop()
            for v in _neighbours(vertex, owner, forward):
                if v is partition:
                    continue  # a path back to it: a cycle already there, which _break_cycles cuts
                if not isinstance(v, torch.fx.Node):
                    cyclic.setdefault(v, via[vertex])
                if v not in via:
                    via[v] = via[vertex]
                    frontier.append(v)
    return cyclic


def _neighbours(vertex, owner: dict, forward: bool = True) -> list:
    """The vertices of the graph of regions one use after (forward) or before `vertex` (a node
    outside partitions, or a partition), in graph order of the uses."""
    nodes = (vertex,) if isinstance(vertex, torch.fx.Node) else vertex.nodes
    out: dict = {}
    for node in nodes:
        for other in (node.users if forward else node.all_input_nodes):
            v = owner.get(other, other)
            if v is not vertex:
                out[v] = None
    return list(out)


def _break_cycles(graph: torch.fx.Graph, partitions: list) -> tuple[list, list[tuple]]:
    """The partitions, cut until the graph of regions has no cycle, and what was cut: [(the
    partition, its number of connected pieces, the pieces kept, the vertices of the cycle)]. None is expected: torch's
    partitioner proposes acyclic partitions, the steps before the merge only shrink or split
    them, and the merge keeps the graph acyclic (_merge_between_library_calls); this makes sure
    no cycle reaches fuse_by_partitions (which asserts). A partition on a cycle is cut into its
    connected pieces (those that compute stay partitions), a connected one runs eagerly; each cut
    refines the partitions, and the nodes alone are acyclic, so this ends."""
    cuts = []
    while True:
        owner = {n: p for p in partitions for n in p.nodes}
        cycle = _a_cycle(graph, owner)
        if cycle is None:
            return partitions, cuts
        # a partition of unconnected pieces first (cut, each piece can stay a region), the smallest
        on_cycle = [(p, _connected_pieces(p)) for p in cycle if not isinstance(p, torch.fx.Node)]
        victim, pieces = min(on_cycle, key=lambda c: (len(c[1]) == 1, len(c[0].nodes)))
        kept = [p for p in pieces if len(pieces) > 1 and any(_computes(n) for n in p.nodes)]
        partitions = [q for p in partitions for q in (kept if p is victim else [p])]
        cuts.append((victim, len(pieces), kept, cycle))


def _a_cycle(graph: torch.fx.Graph, owner: dict) -> list | None:
    """A cycle of the graph of regions (its vertices in order), or None (Kahn's peeling: the
    vertices it leaves each have a predecessor left, so walking back from one closes a cycle)."""
    vertices = list(dict.fromkeys(owner.get(n, n) for n in graph.nodes))
    preds = {v: _neighbours(v, owner, forward=False) for v in vertices}
    indegree = {v: len(p) for v, p in preds.items()}
    ready = [v for v in vertices if indegree[v] == 0]
    peeled = set()
    while ready:
        v = ready.pop()
        peeled.add(v)
        for u in _neighbours(v, owner):
            indegree[u] -= 1
            if indegree[u] == 0:
                ready.append(u)
    left = [v for v in vertices if v not in peeled]
    if not left:
        return None
    walk, seen = [left[0]], {left[0]: 0}
    while True:
        v = next(p for p in preds[walk[-1]] if p not in peeled)
        if v in seen:
            return list(reversed(walk[seen[v]:]))
        seen[v] = len(walk)
        walk.append(v)


def _connected_pieces(partition) -> list:
    """A partition's weakly connected pieces (through uses between its own nodes), each a
    Partition, its nodes in the partition's order."""
    from torch.fx.passes.infra.partitioner import Partition

    piece: dict = {}
    for start in partition.nodes:
        if start in piece:
            continue
        piece[start], stack = start, [start]
        while stack:
            node = stack.pop()
            for other in (*node.users, *node.all_input_nodes):
                if other in partition.nodes and other not in piece:
                    piece[other] = start
                    stack.append(other)
    pieces: dict = {}
    for node in partition.nodes:
        pieces.setdefault(piece[node], []).append(node)
    return [Partition(nodes=nodes) for nodes in pieces.values()]


def _apart_notes(kind: str, partitions: list, kept_apart: list, cuts: list) -> tuple[list[str], dict]:
    """The report's lines on regions that could not be one (GraphReport.kept_apart), and why
    each node of a proposed region cut off a cycle runs eagerly ({node: why})."""
    region = {n: f"{kind}.{REGION_PREFIX}{i}" for i, p in enumerate(partitions) for n in p.nodes}

    def name(vertex) -> str:
        if isinstance(vertex, torch.fx.Node):
            while vertex.op == "call_function" and (vertex.target is operator.getitem or _is_view(vertex)) \
                    and isinstance(vertex.args[0], torch.fx.Node) and vertex.args[0] not in region:
                vertex = vertex.args[0]  # a part or view of an eager result: name the op that computes it
            return f"{vertex.name} ({_op_name(vertex)})" if vertex.op == "call_function" else vertex.name
        return region.get(next(iter(vertex.nodes)), "a region cut off a cycle")

    notes, eager = [], {}
    for partition, earlier in kept_apart:
        if next(iter(partition.nodes)) not in region:
            continue
        others = ", ".join(f"{name(k)} (through {name(via)})" for k, via in earlier)
        notes.append(f"{name(partition)} runs apart from {others}, between the same library calls: merged "
                     "with one, the region would need a value computed from its own outputs (a cycle)")
    for victim, count, pieces, cycle in cuts:
        ops = _ops_of(victim)
        steps = ["this region" if v is victim else name(v) for v in cycle]
        through = " -> ".join(s for i, s in enumerate(steps) if i == 0 or s != steps[i - 1])
        what = "its ops run eagerly" if not pieces else f"cut into {count} unconnected pieces" + \
            (f", {count - len(pieces)} of them eager (nothing to compute)" if len(pieces) < count else "")
        notes.append(f"a proposed region ({ops}) was on a dependency cycle ({through}): {what}")
        for node in victim.nodes:
            if node not in region:
                eager[node] = f"in a proposed region that was on a dependency cycle ({through})"
    return notes, eager


def _ops_of(partition) -> str:
    from collections import Counter

    counts = Counter(_op_name(n) for n in partition.nodes if _counted(n))
    return ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())


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
