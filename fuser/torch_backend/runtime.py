"""`FusedRegion`: what the partitioned graph calls in place of a fused partition.

CPU tensors run on fuser's cpu backend, CUDA tensors on its cuda backend. Data is not
copied on the way in or out: a CPU tensor is handed over as a numpy view of its memory
(bf16 through an int16 view), and the numpy results come back as tensors over the same
memory (torch.from_numpy). This goes around `fd.execute`'s own torch handling on the cpu
backend, which returns a *copy* of every output (fuser.execution.like_inputs); CUDA tensors
are passed to `fd.execute` as they are (zero-copy on the GPU). Inputs in any dense layout
are used in place (the definition declares the traced stride order); other views are made
dense by fuser itself (a copy, see FusionDefinition.define_tensor).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import torch

from fuser import FusionDefinition
from fuser.torch_backend.fusion_builder import RegionPlan

log = logging.getLogger("fuser.torch")

_BF16 = np.dtype(ml_dtypes.bfloat16)


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """A numpy view of a CPU tensor's memory (no copy)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(_BF16)
    return t.numpy()


def as_tensor(a) -> torch.Tensor:
    """A tensor over a numpy result's memory (no copy)."""
    a = np.asarray(a)
    if a.dtype == _BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


@dataclass
class RegionStats:
    calls: int = 0
    kernels: list[str] = field(default_factory=list)  # kernel names of the latest call
    schedulers: list[str] = field(default_factory=list)


class FusedRegion(torch.nn.Module):
    """One fusion standing for a partition of the ATen graph; `eager` is the partition's
    own GraphModule (what runs if the fusion cannot)."""

    def __init__(self, name: str, fd: FusionDefinition, plan: RegionPlan, eager: torch.fx.GraphModule):
        super().__init__()
        self.name = name
        self.fd = fd
        self.plan = plan
        self.eager = eager
        self.stats = RegionStats()
        self.failed: str | None = None  # why the fusion could not run: the partition runs eagerly

    def __call__(self, *args):  # skips nn.Module's hook machinery: this is called per step
        return self.forward(*args)

    def forward(self, *args):
        if self.failed is None:
            try:
                return self._run_fusion(args)
            except Exception as error:
                if self.stats.calls:  # it ran before: a real error of this call, not a compile limit
                    raise
                self.failed = f"{type(error).__name__}: {error}"
                log.warning("%s runs eagerly: the fusion failed on its first call: %s", self.name, self.failed)
        return tuple(self.eager(*args))

    def _run_fusion(self, args):
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        if device.type == "cpu":
            outputs = self.fd.execute([as_numpy(a) if isinstance(a, torch.Tensor) else a for a in args], backend="cpu")
            outputs = [as_tensor(o) for o in outputs]
        else:
            outputs = self.fd.execute([a.detach() if isinstance(a, torch.Tensor) else a for a in args], backend="cuda")
        self._record()
        return tuple(self._result(spec, outputs, args, device) for spec in self.plan.outputs)

    def _record(self) -> None:
        kernels = self.fd.last_kernels()
        self.stats.calls += 1
        if self.stats.calls == 1 or len(kernels) != len(self.stats.kernels):
            self.stats.kernels = [k.name for k in kernels]
            self.stats.schedulers = [k.scheduler for k in kernels]
            log.info("%s: %d ATen ops ran as %d kernel(s) %s", self.name, self.plan.aten_ops, len(kernels),
                     ", ".join(self.stats.schedulers))

    @staticmethod
    def _result(spec, outputs, args, device):
        if spec.kind == "fusion":
            return outputs[spec.index]
        if spec.kind == "input":  # a region that passes an input through returns a copy, as eager would
            return args[spec.index].clone()
        return torch.scalar_tensor(spec.value, dtype=spec.dtype, device=device)
