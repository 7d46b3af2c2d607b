"""`torch.compile(fn, backend="fuser")`: the backend registered under torch's
`torch_dynamo_backends` entry point (pyproject.toml).

Dynamo captures the program, AOTAutograd traces forward and backward to ATen graphs (with
fuser_decompositions applied, and the min-cut partitioner that inductor uses, which saves
the inputs of cheap recomputable ops instead of their large outputs: the backward of a
cross-entropy recomputes the log-softmax rather than storing [N, C] log-probabilities),
and each graph goes through partition_graph. Before AOTAutograd, an LM head's linear and its
cross-entropy become one chunked library op whose logits never exist whole
(linear_cross_entropy.py; FUSER_DISABLE=fused_linear_cross_entropy keeps the graph as captured).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable

import torch
from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
from torch._dynamo.backends.common import aot_autograd

from fuser.lowering.execution.autotune import autotune_mode
from fuser.torch_backend import cudagraphs
from fuser.torch_backend.decompositions import fuser_decompositions
from fuser.torch_backend.linear_cross_entropy import fuse_linear_cross_entropy, fused_linear_cross_entropy_enabled
from fuser.torch_backend.partition import partition_graph, single_region
from fuser.torch_backend.report import GraphReport

log = logging.getLogger("fuser.torch")


def _enable_env_logging() -> None:
    """FUSER_LOG=torch (comma-separated with others) prints the backend's reports to stderr."""
    channels = {c.strip() for c in os.environ.get("FUSER_LOG", "").split(",")}
    if "torch" in channels and not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[fuser.torch] %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


@dataclasses.dataclass
class _Program:
    """What the graphs of one captured program share while AOTAutograd compiles them."""

    rewrites: list[str]
    dynamo_inputs: int
    graphs: CudaGraphState | None
    """None: no CUDA graphs (the option is off)."""


def _graph_compiler(kind: str, reports: list[GraphReport] | None, execute_options: dict, program: _Program):
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        graphs = program.graphs
        capture_skipped = None
        if graphs is not None:  # torch's checks read the ATen graph as traced, before partitioning
            static = cudagraphs.static_input_count(kind, gm, program.dynamo_inputs)
            capture_skipped = "its forward graph is not captured" if kind == "backward" and not graphs.forward_captured \
                else cudagraphs.skip_reason(gm, static)
            if kind != "backward":
                graphs.forward_captured = capture_skipped is None
        fused, report = partition_graph(gm, kind, execute_options)
        if kind != "backward":  # the captured program's rewrites, told once, on its first graph
            report.rewrites, program.rewrites[:] = list(program.rewrites), []
        if graphs is not None:
            report.cudagraphs = f"not captured: {capture_skipped}" if capture_skipped else \
                "captured: recorded per input sizes, then replayed"
        if reports is not None:
            reports.append(report)
        log.debug("%s", report)
        # The generated forward itself: a lazily recompiled GraphModule's `forward` is a stub that
        # calls the module (nn.Module.__call__ and its hooks) on every call, ~5 µs a step.
        real_recompile = getattr(fused, "real_recompile", None)
        if real_recompile is not None:
            real_recompile()
        region = single_region(fused) if graphs is None else None
        if region is not None:  # the graph is one region: AOTAutograd calls it directly
            return region.boxed()
        compiled = make_boxed_func(fused.forward)
        if graphs is None:
            return compiled
        if capture_skipped is None:
            regions = [r.region for r in report.fusions]
            return cudagraphs.captured(compiled, gm, example_inputs, kind, static, graphs, regions)
        return cudagraphs.uncaptured_backward(compiled, graphs) if kind == "backward" and graphs.forward_captured \
            else compiled

    compile_graph.__name__ = f"fuser_{kind}_compiler"
    return compile_graph


BACKEND_OPTIONS = {"autotune": (bool, str), "cudagraphs": (bool,)}
"""`torch.compile(..., backend="fuser", options={...})`: each option and the type it takes.
autotune: every region's kernels autotune on their first call (lowering/execution/autotune.py):
True timed on the GPU, "sass" ranked by the performance model on their SASS.
cudagraphs: each compiled graph on a GPU is recorded and replayed as a CUDA graph (cudagraphs.py)."""

EXECUTE_OPTIONS = frozenset({"autotune"})
"""The options every region passes to `fd.execute`; the others act on whole graphs."""

MODES = {"default": {}, "reduce-overhead": {"cudagraphs": True},
         "max-autotune": {"autotune": True, "cudagraphs": True},
         "max-autotune-no-cudagraphs": {"autotune": True}}
"""torch.compile's modes as fuser's options (what Inductor's modes mean, where fuser has the same
means): the options given beside a mode win."""


def backend_options(options: dict | None) -> dict:
    """The options checked: an unknown name or a wrong type is a ValueError naming it."""
    options = dict(options or {})
    for name, value in options.items():
        if name not in BACKEND_OPTIONS:
            raise ValueError(f"torch.compile(backend='fuser'): unknown option {name!r}; fuser takes "
                             f"{', '.join(sorted(BACKEND_OPTIONS))}")
        types = BACKEND_OPTIONS[name]
        if not isinstance(value, types):
            raise ValueError(f"torch.compile(backend='fuser'): option {name!r} takes a "
                             f"{' or '.join(t.__name__ for t in types)}, got {value!r}")
        if name == "autotune":
            try:
                autotune_mode(value)
            except ValueError as e:
                raise ValueError(f"torch.compile(backend='fuser'): option 'autotune': {e}") from None
    return options


def make_backend(reports: list[GraphReport] | None = None, options: dict | None = None) -> Callable:
    """A Dynamo backend; the report of every graph it compiles is appended to `reports`;
    `options` as torch.compile passes them (BACKEND_OPTIONS)."""
    _enable_env_logging()
    options = backend_options(options)
    execute_options = {k: v for k, v in options.items() if k in EXECUTE_OPTIONS}
    use_cudagraphs = options.get("cudagraphs", False)

    def backend(gm: torch.fx.GraphModule, example_inputs):
        # Per captured program: AOTAutograd compiles its backward later, maybe after another
        # program's forward, so what its graphs share is made here.
        program = _Program([], len(example_inputs), cudagraphs.CudaGraphState() if use_cudagraphs else None)
        if fused_linear_cross_entropy_enabled():
            program.rewrites[:] = fuse_linear_cross_entropy(gm)
        traced = aot_autograd(
            fw_compiler=_graph_compiler("forward", reports, execute_options, program),
            bw_compiler=_graph_compiler("backward", reports, execute_options, program),
            inference_compiler=_graph_compiler("inference", reports, execute_options, program),
            decompositions=fuser_decompositions(),
            partition_fn=min_cut_rematerialization_partition,
        )
        return traced(gm, example_inputs)

    backend.__name__ = "fuser"  # as torch names the backend in its errors
    return backend


def fuser_backend(gm: torch.fx.GraphModule, example_inputs, *, options: dict | None = None, mode: str | None = None):
    """The `backend="fuser"` entry point. `options`: torch.compile's (BACKEND_OPTIONS); `mode`:
    one of MODES."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"torch.compile(backend='fuser'): mode {mode!r} is not supported; fuser takes "
                         f"{', '.join(MODES)}")
    options = {**MODES[mode or "default"], **(options or {})}
    return make_backend(options=options)(gm, example_inputs)
