"""What the backend did with each graph: which ATen ops went into which fusion, how many
kernels each fusion launched (known once it has run), and what stayed eager and why."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

LIBRARY_OPS = frozenset(f"aten.{name}.default" for name in (
    "mm", "addmm", "bmm", "baddbmm", "convolution", "convolution_backward",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
    "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "avg_pool2d", "avg_pool2d_backward",
)) | {"fuser.linear_cross_entropy.default"}
"""Library calls by design (matmuls, convolutions, attention, windowed pooling, and the LM head's
chunked linear + cross-entropy: linear_cross_entropy.py): between them is what fuser fuses; they
are counted apart from the compute ops."""

COLLECTIVE_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd", "c10d_functional")
"""torch.distributed's functional collectives (all_reduce, all_gather_into_tensor,
reduce_scatter_tensor, wait_tensor...: what DTensor and tensor parallelism put in a graph) are
library calls too: never inside a fusion, and the fusions on either side of one stay apart."""


def is_library_call(op: str) -> bool:
    """An op name as the reports write it: in LIBRARY_OPS, or a functional collective."""
    return op in LIBRARY_OPS or op.partition(".")[0] in COLLECTIVE_NAMESPACES


def op_kind(op: str) -> str:
    """"library", "view" (an ATen view, or an op fuser treats as free: alias, a constant) or
    "compute" for an op name as the reports write it ("aten.mul.Tensor")."""
    if is_library_call(op):
        return "library"
    from fuser.torch_backend.op_table import TRANSLATIONS, translation_for

    translation_for(None)  # loads the table
    overload = _overload(op)
    if overload is None:
        return "compute"
    translation = TRANSLATIONS.get(overload)
    if overload.is_view or (translation is not None and translation.non_compute):
        return "view"
    return "compute"


def _overload(op: str):
    import torch

    namespace, _, rest = op.partition(".")
    name, _, overload = rest.rpartition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload)
    except AttributeError:
        return None


@dataclass
class RegionReport:
    name: str
    ops: list[str]  # the ATen ops (overload names) the fusion replaced
    region: object = None  # the FusedRegion (its stats fill in as it runs)
    refused: str | None = None  # why fuser refused the region at partition time: its ops run eagerly
    compile_s: float = 0.0  # compiling its kernels for the traced inputs (partition time)

    @property
    def failed(self) -> str | None:
        """Why this region runs eagerly (refused at partition time), else None."""
        return self.refused

    @property
    def kernels(self) -> int | None:
        stats = getattr(self.region, "stats", None)
        return len(stats.kernels) if stats is not None and stats.calls else None

    @property
    def schedulers(self) -> list[str]:
        stats = getattr(self.region, "stats", None)
        return list(stats.schedulers) if stats is not None else []

    @property
    def tuned(self) -> list[str]:
        """What autotuning found for each of its kernels (empty without autotune)."""
        stats = getattr(self.region, "stats", None)
        return list(stats.tuned) if stats is not None else []


@dataclass
class GraphReport:
    kind: str  # "forward", "backward" or "inference"
    aten_ops: int  # call nodes of the graph (getitem and size arithmetic excluded)
    regions: list[RegionReport] = field(default_factory=list)
    eager_ops: Counter = field(default_factory=Counter)  # op name → count, outside any fusion
    reasons: dict[str, str] = field(default_factory=dict)  # op name → why fuser refused it
    build_s: float = 0.0  # partitioning, definitions and the kernels' compile (partition time)
    regions_between_library_calls: int = 0  # the most fused regions between two consecutive library calls
    rewrites: list[str] = field(default_factory=list)
    """Rewrites of the captured program before AOTAutograd traced it (on its forward or inference
    graph's report): each LM head fused with its cross-entropy, or why not (linear_cross_entropy.py)."""
    kept_apart: list[str] = field(default_factory=list)
    """Regions that could not be one, and why (partition.py): a region that runs apart from
    others between the same library calls because, merged, they would make a dependency cycle
    (the region would need, through an eager op or another region, a value computed from its own
    outputs); and a proposed region cut because it was on such a cycle (none is expected)."""
    cudagraphs: str | None = None
    """With options={"cudagraphs": True}: whether the graph runs as a CUDA graph, or why not
    (cudagraphs.py); None without the option."""

    @property
    def fusions(self) -> list[RegionReport]:
        return [r for r in self.regions if r.failed is None]

    @property
    def fused_ops(self) -> int:
        return sum(len(r.ops) for r in self.fusions)

    @property
    def kernels(self) -> int | None:
        counts = [r.kernels for r in self.fusions]
        return None if any(c is None for c in counts) else sum(counts)

    def counts(self) -> dict[str, tuple[int, int]]:
        """Per op kind (compute, view, library): (ops fused, ops in the graph)."""
        totals: dict[str, list[int]] = {"compute": [0, 0], "view": [0, 0], "library": [0, 0]}
        for op in (op for r in self.fusions for op in r.ops):
            totals[op_kind(op)][0] += 1
            totals[op_kind(op)][1] += 1
        for op, n in self.eager_ops.items():
            totals[op_kind(op)][1] += n
        return {k: (v[0], v[1]) for k, v in totals.items()}

    def summary(self) -> str:
        kernels = self.kernels
        k = "not run yet" if kernels is None else f"{kernels} kernel(s)"
        return (f"{self.kind} graph: {self.fused_ops} of {self.aten_ops} ATen ops in {len(self.fusions)} "
                f"fusion(s), {k}; {sum(self.eager_ops.values())} op(s) eager")

    def __str__(self) -> str:
        lines = [self.summary()]
        lines += [f"  rewrite: {note}" for note in self.rewrites]
        if self.cudagraphs is not None:
            lines.append(f"  CUDA graph: {self.cudagraphs}")
        lines += [f"  kept apart: {note}" for note in self.kept_apart]
        for r in self.regions:
            if r.failed is not None:
                lines.append(f"  {r.name}: refused, its {len(r.ops)} ops run eagerly: {r.failed}")
                continue
            kernels = "?" if r.kernels is None else str(r.kernels)
            sched = f" ({', '.join(r.schedulers)})" if r.schedulers else ""
            lines.append(f"  {r.name}: {len(r.ops)} ops -> {kernels} kernel(s){sched}: {_ops_line(r.ops)}")
            lines += [f"    autotune: {line}" for line in r.tuned]
        if self.eager_ops:
            eager = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(self.eager_ops.items()))
            lines.append(f"  eager: {eager}")
        for op, why in sorted(self.reasons.items()):
            lines.append(f"    {op}: {why}")
        return "\n".join(lines)


def _ops_line(ops: list[str], limit: int = 12) -> str:
    counts = Counter(ops)
    parts = [f"{op} x{n}" if n > 1 else op for op, n in counts.items()]
    return ", ".join(parts[:limit]) + (f", ... ({len(parts) - limit} more)" if len(parts) > limit else "")


@dataclass
class Explanation:
    """explain()'s record: one GraphReport per graph compiled (forward, backward...)."""

    graphs: list[GraphReport]

    @property
    def fusions(self) -> int:
        return sum(len(g.fusions) for g in self.graphs)

    @property
    def kernels(self) -> int | None:
        counts = [g.kernels for g in self.graphs]
        return None if any(c is None for c in counts) else sum(counts)

    @property
    def fused_ops(self) -> int:
        return sum(g.fused_ops for g in self.graphs)

    @property
    def aten_ops(self) -> int:
        return sum(g.aten_ops for g in self.graphs)

    def __str__(self) -> str:
        head = (f"fuser: {len(self.graphs)} graph(s), {self.fused_ops} of {self.aten_ops} ATen ops in "
                f"{self.fusions} fusion(s), {self.kernels if self.kernels is not None else '?'} kernel(s)")
        return "\n".join([head, *(str(g) for g in self.graphs)])
