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

import logging
import os
from collections.abc import Callable

import torch
from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
from torch._dynamo.backends.common import aot_autograd

from fuser.torch_backend.decompositions import fuser_decompositions
from fuser.torch_backend.linear_cross_entropy import fuse_linear_cross_entropy, fused_linear_cross_entropy_enabled
from fuser.torch_backend.partition import partition_graph
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


def _graph_compiler(kind: str, reports: list[GraphReport] | None, execute_options: dict, rewrites: list[str]):
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        fused, report = partition_graph(gm, kind, execute_options)
        if kind != "backward":  # the captured program's rewrites, told once, on its first graph
            report.rewrites, rewrites[:] = list(rewrites), []
        if reports is not None:
            reports.append(report)
        log.debug("%s", report)
        # The generated forward itself: a lazily recompiled GraphModule's `forward` is a stub that
        # calls the module (nn.Module.__call__ and its hooks) on every call, ~5 µs a step.
        real_recompile = getattr(fused, "real_recompile", None)
        if real_recompile is not None:
            real_recompile()
        return make_boxed_func(fused.forward)

    compile_graph.__name__ = f"fuser_{kind}_compiler"
    return compile_graph


BACKEND_OPTIONS = {"autotune": bool}
"""`torch.compile(..., backend="fuser", options={...})`: each option and the type it takes.
autotune: every region's kernels autotune on their first call (lowering/execution/autotune.py)."""


def backend_options(options: dict | None) -> dict:
    """The options checked: an unknown name or a wrong type is a ValueError naming it."""
    options = dict(options or {})
    for name, value in options.items():
        if name not in BACKEND_OPTIONS:
            raise ValueError(f"torch.compile(backend='fuser'): unknown option {name!r}; fuser takes "
                             f"{', '.join(sorted(BACKEND_OPTIONS))}")
        if not isinstance(value, BACKEND_OPTIONS[name]):
            raise ValueError(f"torch.compile(backend='fuser'): option {name!r} takes a "
                             f"{BACKEND_OPTIONS[name].__name__}, got {value!r}")
    return options


def make_backend(reports: list[GraphReport] | None = None, options: dict | None = None) -> Callable:
    """A Dynamo backend; the report of every graph it compiles is appended to `reports`;
    `options` as torch.compile passes them (BACKEND_OPTIONS)."""
    _enable_env_logging()
    execute_options = backend_options(options)
    rewrites: list[str] = []
    traced = aot_autograd(
        fw_compiler=_graph_compiler("forward", reports, execute_options, rewrites),
        bw_compiler=_graph_compiler("backward", reports, execute_options, rewrites),
        inference_compiler=_graph_compiler("inference", reports, execute_options, rewrites),
        decompositions=fuser_decompositions(),
        partition_fn=min_cut_rematerialization_partition,
    )

    def backend(gm: torch.fx.GraphModule, example_inputs):
        if fused_linear_cross_entropy_enabled():
            rewrites[:] = fuse_linear_cross_entropy(gm)
        return traced(gm, example_inputs)

    backend.__name__ = "fuser"  # as torch names the backend in its errors
    return backend


def fuser_backend(gm: torch.fx.GraphModule, example_inputs, *, options: dict | None = None, mode: str | None = None):
    """The `backend="fuser"` entry point. `options`: torch.compile's (BACKEND_OPTIONS); `mode`:
    only the default is taken."""
    if mode not in (None, "default"):
        raise ValueError(f"torch.compile(backend='fuser'): mode {mode!r} is not supported (fuser has one mode)")
    return make_backend(options=options)(gm, example_inputs)
