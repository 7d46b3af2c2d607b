"""Host segments: ops that run as one library call between the fused kernels (matmul, linear),
the way nvFuser's expression-evaluator segments run ATen.

Segmentation (`staged_segments`) cuts a fusion into *stages* at its host ops: a host op's stage
is one past the host ops it depends on, a kernel op's stage the latest one that still precedes
every consumer (so a bias cast or an epilogue fuses after the matmul, an operand's producer
before it). Each stage's kernel ops are segmented as any fusion is, then its host ops follow,
one segment each. Running the segments in that order respects every dependency: a kernel of
stage s reads only host results of earlier stages; a host op of stage s reads kernels of stages
<= s.

At run time a host segment is a `HostCall` on the call's buffers (lowering/launch.py, and launch
plans, which replay it like a kernel launch):
- numpy buffers (the cpu backend): `numpy.matmul` in f32 for f16/bf16 inputs, or, when the
  fusion's inputs are torch tensors, `torch.matmul` / `F.linear` on zero-copy views;
- the cuda backend with torch CUDA tensors: torch.matmul / F.linear (cuBLAS) on the tensors in
  place. pycuda kernels and torch both use the legacy default stream, so the call is ordered
  after the kernels that wrote its operands (a caller-set torch stream is not supported);
- the cuda backend with numpy inputs (pycuda memory): the operands are COPIED to the host,
  multiplied with numpy and copied back — correct, synchronous and slow; pass torch CUDA
  tensors for cuBLAS. A mix of pycuda memory and torch tensors in one call is refused.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation, SSAValue

from fuser_dialect.ops_matmul import HOST_OPS, LinearOp
from fuser_dialect.types import TensorType, numpy_dtype
from fuser.lowering.schedulers.base import Verdict

HOST = "host"
"""The scheduler name of host segments (KernelRecord.scheduler, the `segment` pass)."""

HOST_VERDICT = Verdict(True, scheduler=HOST)


def is_host_op(op: Operation) -> bool:
    return isinstance(op, HOST_OPS)


# --- segmentation ---------------------------------------------------------------------------


def _stages(ops: Sequence[Operation]) -> dict[Operation, int]:
    """The stage of every op (see the module doc): as early as its producers allow, then, for
    kernel ops, as late as its consumers allow."""
    stage: dict[Operation, int] = {}
    for op in ops:
        producers = [v.owner for v in op.operands if v.owner in stage]
        stage[op] = max((stage[p] + is_host_op(p) for p in producers), default=0)
    for op in reversed(ops):
        if is_host_op(op):
            continue
        consumers = [u.operation for u in op.results[0].uses if u.operation in stage]
        if consumers:
            stage[op] = max(stage[op], min(stage[c] for c in consumers))
    return stage


def staged_segments(segmenter) -> list[tuple[list[Operation], Verdict, str]]:
    """The segments of a fusion with host ops, in an order that runs (see the module doc).
    `segmenter` is the lowering.segment.Segmenter of the fusion: each stage's kernel ops are
    grouped by its `kernel_segments`."""
    ops = segmenter.ops
    stage = _stages(ops)
    segments: list[tuple[list[Operation], Verdict, str]] = []
    previous_hosts: list[Operation] = []
    for s in range(max(stage.values()) + 1):
        kernel_ops = [op for op in ops if stage[op] == s and not is_host_op(op)]
        found = segmenter.kernel_segments(kernel_ops) if kernel_ops else []
        if found and previous_hosts:
            seg, verdict, reason = found[0]
            names = ", ".join(sorted({op.name for op in previous_hosts}))
            found[0] = (seg, verdict, reason or f"split after {names}: reads a host segment's result")
        segments += found
        previous_hosts = [op for op in ops if stage[op] == s and is_host_op(op)]
        segments += [([op], HOST_VERDICT, f"{op.name} runs on the host (library call)") for op in previous_hosts]
    return segments


@dataclass(eq=False)
class HostPlan:
    """One host segment: its op, the values it reads and the one it writes. Quacks like a
    KernelPlan where the executor asks (name, scheduler, outputs, unit, domain_values)."""

    index: int
    ops: list[Operation]
    inputs: list[SSAValue]
    outputs: list[SSAValue]
    split_reason: str = ""
    scheduler: str = HOST

    @property
    def op(self) -> Operation:
        return self.ops[0]

    @property
    def name(self) -> str:
        return f"fuser_host_{self.index}_{self.op.name.removeprefix('fuser.')}"

    @property
    def unit(self) -> HostUnit:
        return HOST_UNIT

    def domain_values(self) -> list[SSAValue]:
        return list(self.outputs)


def host_plan(index: int, seg: list[Operation], outputs: list[SSAValue], reason: str) -> HostPlan:
    op = seg[0]
    inputs = list(dict.fromkeys(v for v in op.operands if isinstance(v.type, TensorType)))
    return HostPlan(index, seg, inputs, outputs, reason)


def is_host_plan(plan: object) -> bool:
    return isinstance(plan, HostPlan)


# --- the call ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostSchedule:
    """Which library runs the segment: "torch" when a fusion input is a torch tensor, else numpy."""

    library: str
    block: int = 0

    def describe(self) -> str:
        return f"library: {self.library}"


def _is_torch(x: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


class HostUnit:
    """The `unit` of a HostPlan: only `choose` (CompiledFusion.schedules asks every plan)."""

    name = HOST

    def choose(self, plan: HostPlan, shapes, arrays: dict | None, output_layout: dict) -> HostSchedule:
        torch_inputs = arrays is not None and any(_is_torch(a) for a in arrays.values())
        return HostSchedule("torch" if torch_inputs else "numpy")


HOST_UNIT = HostUnit()


@dataclass(frozen=True)
class HostKernel:
    """What kernels_for holds for a host segment in place of a compiled kernel."""

    name: str
    schedule: HostSchedule
    call: HostCall
    source: str = ""
    params: tuple = ()
    needs_sync: bool = False
    shared_bytes: int = 0


def host_kernel(plan: HostPlan, schedule: HostSchedule) -> HostKernel:
    return HostKernel(plan.name, schedule, HostCall(plan, schedule))


class HostCall:
    """Runs one host segment on buffers: `call(operands, out)` writes `out` and returns the
    (bytes loaded, bytes stored) of the library call: each operand read once, the result
    written once (the least any library moves; what it really moves is its own business)."""

    def __init__(self, plan: HostPlan, schedule: HostSchedule):
        op = plan.op
        self.op_name = op.name
        self.is_linear = isinstance(op, LinearOp)
        self.operand_values = list(op.operands)
        self.dtype = op.results[0].type.dtype
        self.torch = schedule.library == "torch"
        self.low_precision = self.dtype in ("f16", "bf16")
        self.operand_bytes = [numpy_dtype(v.type.dtype).itemsize for v in self.operand_values]
        self.out_itemsize = numpy_dtype(self.dtype).itemsize

    def __call__(self, operands: Sequence[object], out) -> tuple[int, int]:
        if _device_array(out):
            self._run_on_device(operands, out)
        elif self.torch:
            _as_torch(out).copy_(self._torch_result([_as_torch(b) for b in operands]))
        else:
            self._numpy_into([np.asarray(b) for b in operands], out)
        loaded = sum(math.prod(b.shape) * n for b, n in zip(operands, self.operand_bytes))
        return loaded, math.prod(out.shape) * self.out_itemsize

    def _numpy_into(self, arrays: list[np.ndarray], out: np.ndarray) -> None:
        """The product written into `out`: in place for f32/f64; f16/bf16 operands go through f32
        and round once (the interpreter's semantics, without its per-call dtype lookups)."""
        if self.low_precision:
            with np.errstate(over="ignore"):
                out[...] = self._numpy_product([a.astype(np.float32) for a in arrays])
            return
        self._numpy_product(arrays, out)

    def _numpy_product(self, arrays: list[np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
        if not self.is_linear:
            return np.matmul(arrays[0], arrays[1], out=out)
        result = np.matmul(arrays[0], arrays[1].T, out=out)
        if len(arrays) > 2:
            result += arrays[2]
        return result

    def _torch_result(self, tensors: list):
        torch = sys.modules["torch"]
        if self.is_linear:
            return torch.nn.functional.linear(*tensors)
        return torch.matmul(tensors[0], tensors[1])

    def _run_on_device(self, operands: Sequence[object], out) -> None:
        # Launch plans pass torch inputs used in place as the tensors themselves.
        tensors = [b if _is_torch(b) else b.tensor for b in operands]
        if out.tensor is not None and all(t is not None for t in tensors):
            out.tensor.copy_(self._torch_result(tensors))  # cuBLAS, on the tensors in place
            return
        if out.tensor is not None or any(t is not None for t in tensors):
            raise TypeError(
                f"{self.op_name} (a host segment) on the cuda backend got pycuda memory and torch tensors in one "
                "call; pass every input as a torch CUDA tensor (cuBLAS) or every input as numpy (host copy)"
            )
        host = np.empty(out.shape, out.dtype)
        self._numpy_into([b.to_numpy() for b in operands], host)
        _copy_to_device(out, host)


def _device_array(buf: object) -> bool:
    return type(buf).__name__ == "DeviceArray"


def _as_torch(buf):
    """A torch view of a host buffer (numpy arrays are shared, not copied; bf16 through int16)."""
    if _is_torch(buf):
        return buf
    torch = sys.modules["torch"]
    if buf.dtype == numpy_dtype("bf16"):
        return torch.from_numpy(buf.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(buf)


def _copy_to_device(out, result: np.ndarray) -> None:
    """Writes a host result into a pycuda DeviceArray in its dense stride order."""
    from fuser.lowering import gpu_runtime

    host = np.empty(math.prod(out.shape), out.dtype)
    gpu_runtime.from_dense(host, out.shape, out.strides)[...] = result
    if host.size:
        gpu_runtime.driver().memcpy_htod(out.ptr, host.view(np.uint8))


__all__ = ["HOST", "HostCall", "HostKernel", "HostPlan", "HostSchedule", "host_kernel", "host_plan", "is_host_op",
           "is_host_plan", "staged_segments"]
