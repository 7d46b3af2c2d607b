"""`FusedRegion`: what the partitioned graph calls in place of a fused partition.

CPU tensors run on fuser's cpu backend, CUDA tensors on its cuda backend; either way the tensors
go to `fd.execute` as they are. Nothing is copied on the way in or out: the cpu backend's kernels
read a dense CPU tensor's memory in place (other views are made dense by fuser itself, see
FusionDefinition.define_tensor) and its numpy results come back as tensors over the same memory
(fuser.execution.like_inputs; bf16 and fp8 through integer views), and CUDA tensors stay on the
GPU. A region without tensor inputs runs on the device its traced outputs live on. Per call the
region does no more than that and a check of which kernels ran (`fd.last_kernel_names()`): a
step of a compiled model calls it once per fused partition.

Its kernels were compiled when the graph was partitioned (partition.py), so a region runs fused
from its first call; an error then is raised, never hidden by running the partition eagerly. An
out-of-range index is raised as eager torch raises it for the op the program called (its type,
translate_index.EAGER_INDEX_ERRORS, and its words for the bounds), with fuser's account of it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch

from fuser import FusionDefinition
from fuser.execution import like_inputs
from fuser.lowering.errors import IndexRangeError
from fuser.lowering.execution.tensor_call import MAX_PER_REGION
from fuser.torch_backend.fusion_builder import RegionPlan

log = logging.getLogger("fuser.torch")


@dataclass
class RegionStats:
    calls: int = 0
    kernels: list[str] = field(default_factory=list)  # kernel names of the latest call
    schedulers: list[str] = field(default_factory=list)
    tuned: list[str] = field(default_factory=list)
    """What autotuning found for the kernels of the call that tuned them (one line each)."""


def tuning_line(index: int, tuning) -> str:
    """One kernel's autotuning result as explain() prints it."""
    sass = getattr(tuning, "by", "time") == "sass"
    compared = "ranked by their SASS" if sass else "timed"
    source = ", stored choice" if tuning.from_cache else f", {tuning.candidates} candidate(s) {compared}"
    if tuning.chosen == tuning.heuristic:
        return f"kernel {index}: the heuristic's schedule kept ({tuning.heuristic}{source})"
    gain = f" x{tuning.speedup:.2f} {'predicted ' if sass else ''}faster" if tuning.speedup else ""
    return f"kernel {index}: tuned to {tuning.chosen}{gain} (heuristic: {tuning.heuristic}{source})"


class _Replays:
    """What every call of a region reads first: its TensorCalls (newest first) and the kernel names
    its stats last recorded. A plain object, not the region's attributes: an nn.Module's attribute
    reads go through its `__getattr__` hook, which Python does not specialise (a few hundred
    instructions each, three a call)."""

    __slots__ = ("calls", "recorded_names")

    def __init__(self):
        self.calls: tuple = ()
        """TensorCalls of this region's launch plans (lowering/execution/tensor_call.py), newest first."""
        self.recorded_names: tuple[str, ...] | None = None


class FusedRegion(torch.nn.Module):
    """One fusion standing for a partition of the ATen graph."""

    def __init__(self, name: str, fd: FusionDefinition, plan: RegionPlan, execute_options: dict | None = None):
        super().__init__()
        self.name = name
        self.fd = fd
        self.plan = plan
        self.execute_options = dict(execute_options or {})
        """Keywords of every `fd.execute` (the backend's options, e.g. autotune)."""
        self.stats = RegionStats()
        self.replays = _Replays()
        # Where every output is one of the fusion's (the common case): their indices.
        specs = plan.outputs
        self.fusion_outputs = tuple(s.index for s in specs) if all(s.kind == "fusion" for s in specs) else None
        self._autotune = self.execute_options.get("autotune")
        # A region with a tensor input and no option but autotune calls fd._execute itself: the
        # checks fd.execute makes of its keywords hold for every call (decided at the first).
        self._direct: bool | None = None if set(self.execute_options) <= {"autotune"} else False

    @property
    def _tensor_calls(self) -> tuple:
        """TensorCalls of this region's launch plans, newest first (`replays.calls`)."""
        return self.replays.calls

    def __call__(self, *args):  # skips nn.Module's hook machinery: this is called per step
        replays = self.replays
        try:
            for call in replays.calls:  # a launch plan's TensorCall: a guard, then its launches
                outputs = call.run(args)
                if outputs is not None:
                    if call.kernel_names is replays.recorded_names:
                        self.stats.calls += 1
                    else:
                        self._record()
                    return outputs if call.order is not None else self._results(outputs, args)
        except IndexRangeError as e:
            raise self._as_eager(e, any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)) from None
        return self._execute(args)

    forward = __call__

    def boxed(self):
        """This region as the compiled graph of a graph that is nothing but it (its inputs in
        order, its outputs returned as they are: partition.single_region), in AOTAutograd's boxed
        convention (one list of arguments): the graph module's frame, its attribute lookup and
        the copy of the output tuple are skipped. The same steps as `__call__`."""
        region, replays, stats = self, self.replays, self.stats

        def call(args):
            try:
                for tensor_call in replays.calls:
                    outputs = tensor_call.run(args)
                    if outputs is not None:
                        if tensor_call.kernel_names is replays.recorded_names:
                            stats.calls += 1
                        else:
                            region._record()
                        return outputs if tensor_call.order is not None else region._results(outputs, args)
            except IndexRangeError as e:
                raise region._as_eager(e, any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)) from None
            return region._execute(args)

        call._boxed_call = True
        return call

    def compile_for(self, args) -> None:
        """Compiles the kernels a call with these arguments runs (partition time)."""
        self.fd.compile_for(self._inputs(args), **self._placement(args))

    def _execute(self, args):
        """A call no TensorCall of this region takes (the first call of a signature, or a plan
        without one): through the fusion's executor, or fd.execute."""
        try:
            if self._direct is None:
                self._direct = self._can_run_direct(args)
            if self._direct:  # what fd.execute checks and decides per call was settled at the first call
                inputs, on_gpu = [], False
                for a in args:  # _inputs and _on_gpu in one pass: this runs per region per step
                    if isinstance(a, torch.Tensor):  # a Parameter too
                        on_gpu = on_gpu or a.is_cuda
                        if a.requires_grad:
                            a = a.detach()
                    inputs.append(a)
                backend = self._backends.get(on_gpu) or self._backend(on_gpu)
                outputs = self._executor.execute(inputs, backend, self.plan.disable, False, self._autotune)
                if backend.returns_numpy:
                    outputs = like_inputs(outputs, inputs)
                self._keep_tensor_call(args, backend)
            else:
                outputs = self.fd.execute(self._inputs(args), **self._placement(args), **self.execute_options)
        except IndexRangeError as e:
            raise self._as_eager(e, any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)) from None
        self._record()
        if self.fusion_outputs is not None:
            return tuple([outputs[i] for i in self.fusion_outputs])
        return self._results(outputs, args)

    def _results(self, outputs, args) -> tuple:
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device(self.plan.device))
        return tuple(self._result(spec, outputs, args, device) for spec in self.plan.outputs)

    def _keep_tensor_call(self, args, backend) -> None:
        """Keeps the TensorCall of the plan this call replayed (newest first), so that the next
        call with tensors like these skips fd.execute's signature, key and output wrapping."""
        call = self._executor.tensor_call(args, backend, self.fusion_outputs)
        replays = self.replays
        if call is not None and call not in replays.calls:
            replays.calls = (call, *replays.calls)[:MAX_PER_REGION]

    def raise_pending_index_fault(self) -> None:
        """Raises, as eager would, an out-of-range index a kernel of an earlier call recorded and
        no call has reported yet (torch_backend/cudagraphs.py: a CUDA graph replay runs no
        region's Python, so this is asked before each replay)."""
        try:
            self.fd._get_executor().raise_pending_index_fault()
        except IndexRangeError as e:
            raise self._as_eager(e, True) from None

    def _as_eager(self, error: IndexRangeError, on_gpu: bool) -> Exception:
        """An out-of-range index as eager torch reports it for the op the program called: its
        exception type (RuntimeError for gather and scatter, IndexError for index_select,
        embedding, indexing and nll_loss on CPU; RuntimeError for all on a GPU), the bounds in
        eager's words, and fuser's account of where the index came from."""
        sources = self.plan.index_sources
        if error.site is not None and error.site < len(sources):
            candidates = [sources[error.site]]
        else:  # the compiled fusion could not tell which index op it was
            candidates = list(sources)
        kinds = {RuntimeError if on_gpu else s.eager_error for s in candidates}
        if len(kinds) != 1 or None in kinds:
            return error
        where = " or ".join(dict.fromkeys(s.aten for s in candidates))
        if kinds == {IndexError}:
            return IndexError(f"{error} ({where} in the fused region {self.name})")
        return RuntimeError(f"index {error.index} is out of bounds for dimension {error.dim} with size {error.extent} "
                            f"({where} in the fused region {self.name}; {error})")

    def _can_run_direct(self, args) -> bool:
        """Whether calls may go to the fusion's executor itself, past fd.execute: a tensor input
        (the tensors' device picks the backend), no option but autotune, no per-call work of
        fd.execute's (vector inputs to flatten, aliased inputs to write back), a compiling backend
        (whose outputs need no 0-d conversion)."""
        if not any(isinstance(a, torch.Tensor) for a in args) or self.fd.vector_inputs or self.fd.aliases:
            return False
        self._backends = {}
        if not self._backend(self._on_gpu(args)).compiles:
            return False
        self._executor = self.fd._get_executor()
        return True

    def _backend(self, on_gpu: bool):
        """The backend of tensors on a GPU (cuda) or on the host (cpu), as fd.execute names it."""
        from fuser.execution import _backend_named

        backend = self._backends[on_gpu] = _backend_named("cuda" if on_gpu else "cpu")
        return backend

    @staticmethod
    def _on_gpu(args) -> bool:
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_cuda:
                return True
        return False

    @staticmethod
    def _inputs(args):
        return [a.detach() if isinstance(a, torch.Tensor) and a.requires_grad else a for a in args]

    def _placement(self, args) -> dict:
        """execute's keywords: the backend of the tensors' device (the traced device for a region
        without tensor inputs) and the region's disable options."""
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors:
            return {"device": self.plan.device, "_disable_options": self.plan.disable}
        backend = "cuda" if any(a.is_cuda for a in tensors) else "cpu"
        return {"backend": backend, "_disable_options": self.plan.disable}

    def _record(self) -> None:
        names = self._executor.last_kernel_names() if self._direct else self.fd.last_kernel_names()
        self.stats.calls += 1
        if names is self.replays.recorded_names:  # the launch plan of the last call: nothing new
            return
        if self.stats.calls == 1 or list(names) != self.stats.kernels:
            kernels = self.fd.last_kernels()
            self.stats.kernels = [k.name for k in kernels]
            self.stats.schedulers = [k.scheduler for k in kernels]
            tuned = [tuning_line(i, k.tuning) for i, k in enumerate(kernels) if k.tuning is not None]
            if tuned:
                self.stats.tuned = tuned
            log.info("%s: %d ATen ops ran as %d kernel(s) %s", self.name, self.plan.aten_ops, len(kernels),
                     ", ".join(self.stats.schedulers))
        self.replays.recorded_names = names

    @staticmethod
    def _result(spec, outputs, args, device):
        if spec.kind == "fusion":
            return outputs[spec.index]
        if spec.kind == "input":  # a region that passes an input through returns a copy, as eager would
            return args[spec.index].clone()
        return torch.scalar_tensor(spec.value, dtype=spec.dtype, device=device)
