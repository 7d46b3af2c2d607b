"""What the backend did with each graph: which ATen ops went into which fusion, how many
kernels each fusion launched (known once it has run), and what stayed eager and why."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


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


@dataclass
class GraphReport:
    kind: str  # "forward", "backward" or "inference"
    aten_ops: int  # call nodes of the graph (getitem and size arithmetic excluded)
    regions: list[RegionReport] = field(default_factory=list)
    eager_ops: Counter = field(default_factory=Counter)  # op name → count, outside any fusion
    reasons: dict[str, str] = field(default_factory=dict)  # op name → why fuser refused it
    build_s: float = 0.0  # partitioning + definitions (kernels compile on first run)

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

    def summary(self) -> str:
        kernels = self.kernels
        k = "not run yet" if kernels is None else f"{kernels} kernel(s)"
        return (f"{self.kind} graph: {self.fused_ops} of {self.aten_ops} ATen ops in {len(self.fusions)} "
                f"fusion(s), {k}; {sum(self.eager_ops.values())} op(s) eager")

    def __str__(self) -> str:
        lines = [self.summary()]
        for r in self.regions:
            if r.failed is not None:
                lines.append(f"  {r.name}: refused, its {len(r.ops)} ops run eagerly: {r.failed}")
                continue
            kernels = "?" if r.kernels is None else str(r.kernels)
            sched = f" ({', '.join(r.schedulers)})" if r.schedulers else ""
            lines.append(f"  {r.name}: {len(r.ops)} ops -> {kernels} kernel(s){sched}: {_ops_line(r.ops)}")
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
