"""What every backend is (`Backend`) and what a kernel backend adds (`KernelBackend`)."""

from __future__ import annotations

import statistics
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from typing import ClassVar, Protocol

from fuser.lowering.backends.disk_cache import Binary, CachedCompiler
from fuser.lowering.device import DEFAULT as DEFAULT_DEVICE
from fuser.lowering.device import DeviceSpec


class Program(Protocol):
    """A compiled source loaded into its runtime (CpuModule, GpuModule)."""

    def launch(self, kernel_name: str, grid, block, args: Sequence[object], *, needs_sync: bool = True,
               shared_bytes: int = 0, stream: int | None = None):
        """Runs one kernel (on the GPU: queued on `stream`, a CUstream handle); returns its
        LaunchStats (global bytes) where the backend counts them."""

    def pack_args(self, kernel_name: str, args: Sequence[object]) -> object:
        """The argument checks and packing of `launch`, without launching (for timing them)."""


class Backend(ABC):
    name: ClassVar[str]
    compiles: ClassVar[bool] = True
    """Runs generated kernels (so it has a kernel cache, schedules and launch records)."""
    returns_numpy: ClassVar[bool] = True
    """Outputs are host numpy arrays (turned into torch tensors when an input was one)."""
    on_gpu: ClassVar[bool] = False
    """Kernels run, and buffers live, on the GPU."""
    counts_bytes: ClassVar[bool] = False
    """Each launch reports the global bytes it loaded and stored."""

    @abstractmethod
    def available(self) -> tuple[bool, str]:
        """(True, "") or (False, why not); never raises."""

    def __repr__(self) -> str:
        return f"<backend {self.name}>"


class KernelBackend(Backend):
    """Compiles kernel sources, loads each once, launches them on buffers of its allocator."""

    def __init__(self) -> None:
        self._programs: dict[str, Program] = {}
        self._lock = threading.Lock()

    @abstractmethod
    def compiler(self) -> CachedCompiler:
        """The compiler for this process's settings (compiler, flags, architecture)."""

    @abstractmethod
    def load(self, binary: Binary, source: str) -> Program:
        ...

    @abstractmethod
    def allocator(self, inputs: Sequence[object], torch_outputs: bool = False):
        """The memory of one call: adopt inputs, allocate outputs, hand results back.
        torch_outputs: results are torch tensors even without a torch input (a fusion with no
        tensor inputs, asked for a device)."""

    def variant(self) -> Hashable:
        """What, besides the source, changes the binaries built now (a checked build, say):
        compiled kernels are reused only within one variant."""
        return ()

    def time_calls(self, fn, reps: int) -> float:
        """Median seconds of `reps` calls of `fn` (its launches complete before it returns on
        this backend: wall time; the cuda backend times the GPU with events)."""
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    @property
    def device(self) -> DeviceSpec:
        """The GPU kernels are scheduled for: the cpu backend runs the CUDA source an H100 would
        run (lowering/device.py); the cuda backend reads its GPU from the driver."""
        return DEFAULT_DEVICE

    def program(self, source: str) -> Program:
        """`source` compiled (or found in the disk cache) and loaded, once per process."""
        compiler = self.compiler()
        key = compiler.key(source)
        with self._lock:
            found = self._programs.get(key)
        if found is not None:
            return found
        program = self.load(compiler.compile(source, key), source)
        with self._lock:
            return self._programs.setdefault(key, program)

    def forget_programs(self) -> None:
        """Drop the loaded programs (the disk cache stays): the next `program` loads again."""
        with self._lock:
            self._programs.clear()
