"""CUDA graphs for compiled programs: `torch.compile(m, backend="fuser", options={"cudagraphs":
True})`, or `mode="reduce-overhead"` as Inductor names it.

Each forward, backward or inference graph, once partitioned into fused regions and library
calls, is handed to torch's own CUDA graph machinery (cudagraph trees,
torch._inductor.cudagraph_trees, used as torch's `cudagraphs` backend uses it): the first call
runs the graph as compiled (warm-up: every region's launch plan and TensorCall is built then),
the next records it, later calls with the same input sizes replay it, and new sizes record
again. Parameters and buffers (the forward's lifted inputs) and the backward's saved tensors
are static inputs; other inputs are copied into the graph's own buffers per replay, and outputs
live in its memory pool (torch's rules for mode="reduce-overhead").

What stays right under replay:
- random numbers: fuser fuses no random op under torch.compile (dropout is torch's own kernel,
  support.py), and torch's CUDA generator is registered with every capture, each replay
  advancing its philox offset;
- inputs mutated in place: torch's machinery copies them back (find_input_mutations);
- in-kernel index checks: a kernel that meets an out-of-range index writes it into mapped host
  memory, which its region reads at its next call. A replay runs no region's Python, so the
  wrapper reads every region's records before each call: the fault is raised at the next call
  at the latest, with eager's exception type, as without CUDA graphs;
- the fused LM head (linear_cross_entropy.py) reads nothing back to the host.

A graph torch's checks refuse (a CPU tensor, several devices, an op that reads a value back to
the host, an input mutation it cannot replay) runs without CUDA graphs, and its report says why
(`GraphReport.cudagraphs`, printed by fuser.explain): never silently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch


@dataclasses.dataclass
class CudaGraphState:
    """What the graphs of one captured program share: whether its forward was captured (a
    backward is captured only then) and the device index."""

    forward_captured: bool = True
    device_index: int | None = None


def skip_reason(gm: torch.fx.GraphModule, static_inputs: int) -> str | None:
    """Why torch's CUDA graph machinery cannot capture this ATen graph (None: it can)."""
    from torch._dynamo.backends.cudagraphs import check_for_skip

    if not any(n.op == "call_function" for n in gm.graph.nodes):
        return "the graph computes nothing"
    reason = check_for_skip(gm, static_inputs)
    if reason is None:
        return None
    # torch's words ("skipping cudagraphs due to cpu device (arg0_1). Found from : <stack>"):
    # the reason, and the program line it names, on one line.
    first, *rest = reason.strip().splitlines()
    first = first.removeprefix("skipping cudagraphs due to ").split(". Found from")[0].rstrip(".: ")
    where = next((line.strip() for line in reversed(rest) if line.strip().startswith("File ")), None)
    return f"{first} ({where})" if where else first


def captured(compiled: Callable, gm: torch.fx.GraphModule, example_inputs, kind: str, static_inputs: int,
             state: CudaGraphState, regions) -> Callable:
    """`compiled` (a boxed call of the partitioned graph) recorded and replayed by torch's
    cudagraph trees; `regions`: the graph's fused regions (their index records are read before
    every call)."""
    from torch._dynamo.backends.cudagraphs import find_input_mutations, get_device_index, get_stack_traces
    from torch._inductor.cudagraph_trees import cudagraphify_impl
    from torch._inductor.cudagraph_utils import get_placeholder_info

    state.device_index = get_device_index(gm)
    replayed = cudagraphify_impl(
        compiled, list(example_inputs), range(static_inputs), device_index=state.device_index,
        is_backward=kind == "backward", is_inference=kind == "inference", stack_traces=get_stack_traces(gm),
        placeholders=get_placeholder_info(gm.graph), mutated_input_idxs=find_input_mutations(gm.graph))
    checked = tuple(r for r in regions if r.plan.index_sources)
    if not checked:
        replayed._boxed_call = True
        return replayed

    def call(inputs):
        for region in checked:
            region.raise_pending_index_fault()
        return replayed(inputs)

    call._boxed_call = True
    return call


def uncaptured_backward(compiled: Callable, state: CudaGraphState) -> Callable:
    """A backward run without CUDA graphs after its forward was captured: torch's tree manager is
    told, as torch's cudagraphs backend does, so that the forward's pool stays valid."""
    manager = torch._inductor.cudagraph_trees.get_manager(
        state.device_index if state.device_index is not None else 0, create_if_none_exists=False)
    if manager is None:
        return compiled

    def call(inputs):
        manager.set_to_running_backward()
        return compiled(inputs)

    call._boxed_call = True
    return call


def static_input_count(kind: str, gm: torch.fx.GraphModule, dynamo_inputs: int) -> int:
    """The leading inputs whose addresses are the same every call: a forward's lifted parameters
    and buffers, a backward's saved tensors (torch's own rules)."""
    from torch._inductor.utils import count_tangents, num_fw_fixed_arguments

    if kind == "backward":
        return count_tangents(gm)
    placeholders = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
    return max(0, num_fw_fixed_arguments(dynamo_inputs, placeholders))


__all__ = ["CudaGraphState", "captured", "skip_reason", "static_input_count", "uncaptured_backward"]
