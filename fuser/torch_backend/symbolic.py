"""Sizes in a dynamic-shape graph, computed from the graph's inputs.

With `dynamic=True` an ATen graph asks for sizes of intermediate tensors
(`sym_size.int(slice_1, 3)`). Left alone, that would make the fused region *output* the
intermediate just so eager code can read its size. Every size is an expression in the
graph's size symbols (the FakeTensor's SymInt knows it), and every symbol is carried by a
graph input (a SymInt placeholder or a dim of an input tensor), so such a size is rebuilt
from the inputs with Python-int arithmetic nodes, and the intermediate is left to the fusion.
"""

from __future__ import annotations

import operator

import sympy
import torch
import torch.fx
from torch.utils._sympy.functions import FloorDiv

aten = torch.ops.aten


def _symbol_carriers(graph: torch.fx.Graph) -> dict[sympy.Symbol, torch.fx.Node]:
    """Each size symbol → a node that holds it (SymInt inputs first, then input dims)."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    carriers: dict[sympy.Symbol, torch.fx.Node] = {}
    for p in placeholders:
        v = p.meta.get("val")
        if isinstance(v, torch.SymInt) and isinstance(v.node.expr, sympy.Symbol):
            carriers.setdefault(v.node.expr, p)
    anchor = placeholders[-1] if placeholders else None
    for p in placeholders:
        v = p.meta.get("val")
        if not isinstance(v, torch.Tensor):
            continue
        for d, s in enumerate(v.shape):
            if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol) and s.node.expr not in carriers:
                with graph.inserting_after(anchor):
                    size = graph.call_function(aten.sym_size.int, (p, d))
                size.meta["val"] = s
                carriers[s.node.expr] = anchor = size
    return carriers


def _emit(graph: torch.fx.Graph, expr, carriers):
    """Nodes computing a sympy integer expression, or None where the expression has a form
    this does not rebuild (the size is then left as traced)."""
    if isinstance(expr, sympy.Integer):
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        return carriers.get(expr)
    combine = {sympy.Add: operator.add, sympy.Mul: operator.mul, FloorDiv: operator.floordiv}.get(type(expr))
    if combine is None:
        return None
    parts = [_emit(graph, a, carriers) for a in expr.args]
    if any(p is None for p in parts):
        return None
    result = parts[0]
    for p in parts[1:]:
        result = graph.call_function(combine, (result, p))
    return result


def sizes_from_inputs(gm: torch.fx.GraphModule) -> int:
    """Rewrites every size query on an intermediate tensor into arithmetic on the inputs'
    sizes; returns how many it rewrote."""
    graph = gm.graph
    carriers = None
    rewritten = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target != aten.sym_size.int:
            continue
        if node.args[0].op == "placeholder":
            continue
        value = node.meta.get("val")
        if not isinstance(value, torch.SymInt):
            continue
        if carriers is None:
            carriers = _symbol_carriers(graph)
        with graph.inserting_before(node):
            replacement = _emit(graph, value.node.expr, carriers)
        if not isinstance(replacement, torch.fx.Node):  # not rebuilt (or a constant Dynamo would have folded)
            continue
        replacement.meta.setdefault("val", value)
        node.replace_all_uses_with(replacement)
        graph.erase_node(node)
        rewritten += 1
    if rewritten:
        graph.eliminate_dead_code()
        gm.recompile()
    return rewritten
