"""`FusedRegion`: what the partitioned graph calls in place of a fused partition.

CPU tensors run on fuser's cpu backend, CUDA tensors on its cuda backend; either way the tensors
go to `fd.execute` as they are. Nothing is copied on the way in or out: the cpu backend's kernels
read a dense CPU tensor's memory in place (other views are made dense by fuser itself, see
FusionDefinition.define_tensor) and its numpy results come back as tensors over the same memory
(fuser.execution.like_inputs; bf16 and fp8 through integer views), and CUDA tensors stay on the
GPU. Per call the region does no more than that and a check of which kernels ran
(`fd.last_kernel_names()`): a step of a compiled model calls it once per fused partition.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch

from fuser import FusionDefinition
from fuser.torch_backend.fusion_builder import RegionPlan

log = logging.getLogger("fuser.torch")


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
        self.recorded_names: tuple[str, ...] | None = None  # the kernel names stats last recorded
        # Where every output is one of the fusion's (the common case): their indices.
        specs = plan.outputs
        self.fusion_outputs = tuple(s.index for s in specs) if all(s.kind == "fusion" for s in specs) else None

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
        on_gpu = any(a.is_cuda for a in args if isinstance(a, torch.Tensor))
        if on_gpu:
            outputs = self.fd.execute([a.detach() if isinstance(a, torch.Tensor) else a for a in args], backend="cuda")
        else:
            outputs = self.fd.execute(args, backend="cpu")
        self._record()
        if self.fusion_outputs is not None:
            return tuple(outputs[i] for i in self.fusion_outputs)
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        return tuple(self._result(spec, outputs, args, device) for spec in self.plan.outputs)

    def _record(self) -> None:
        names = self.fd.last_kernel_names()
        self.stats.calls += 1
        if names is self.recorded_names:  # the launch plan of the last call: nothing new
            return
        if self.stats.calls == 1 or list(names) != self.stats.kernels:
            kernels = self.fd.last_kernels()
            self.stats.kernels = [k.name for k in kernels]
            self.stats.schedulers = [k.scheduler for k in kernels]
            log.info("%s: %d ATen ops ran as %d kernel(s) %s", self.name, self.plan.aten_ops, len(kernels),
                     ", ".join(self.stats.schedulers))
        self.recorded_names = names

    @staticmethod
    def _result(spec, outputs, args, device):
        if spec.kind == "fusion":
            return outputs[spec.index]
        if spec.kind == "input":  # a region that passes an input through returns a copy, as eager would
            return args[spec.index].clone()
        return torch.scalar_tensor(spec.value, dtype=spec.dtype, device=device)
