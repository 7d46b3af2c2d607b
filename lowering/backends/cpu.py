"""The "cpu" backend: generated CUDA C compiled by g++ under the emulation layer
(lowering.backends.cpu_runtime), run on the host with numpy buffers, every launch counting its global bytes."""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence

import numpy as np

from fuser_dialect.inputs import to_numpy
from fuser.lowering.backends import cpu_runtime
from fuser.lowering.addresses import numpy_address
from fuser.lowering.backends.base import KernelBackend
from fuser.lowering.backends.disk_cache import Binary


def empty_like_layout(shape: Sequence[int], dtype: np.dtype, order: Sequence[int] | None) -> np.ndarray:
    """An uninitialised array of `shape` laid out in stride `order` (0 = fastest dim)."""
    return layout_allocator(tuple(shape), np.dtype(dtype), None if order is None else tuple(order))()


@functools.lru_cache(maxsize=1024)
def layout_allocator(shape: tuple[int, ...], dtype: np.dtype, order: tuple[int, ...] | None):
    """A function returning a fresh uninitialised array of `shape` in stride `order`: the
    dense shape and the transposition are worked out once per (shape, dtype, order)."""
    if order is None or all(order[d] == len(shape) - 1 - d for d in range(len(shape))):
        return functools.partial(np.empty, shape, dtype)
    slowest_first = sorted(range(len(shape)), key=lambda d: -order[d])
    dense_shape = tuple(shape[d] for d in slowest_first)
    axes = tuple(int(a) for a in np.argsort(slowest_first))

    def allocate() -> np.ndarray:
        return np.empty(dense_shape, dtype).transpose(axes)

    return allocate


def _dense_view(a: np.ndarray) -> np.ndarray | None:
    """`a` as a C-contiguous array over the same memory (its dims reordered by decreasing stride),
    or None when `a` is not dense in any stride order (a strided or reversed view)."""
    if a.flags.c_contiguous:
        return a
    view = a.transpose(sorted(range(a.ndim), key=lambda d: -a.strides[d]))
    return view if view.flags.c_contiguous else None


def _no_stream() -> None:
    return None


class HostMemory:
    """Buffers of the cpu backend: numpy arrays."""

    stream = None
    """The emulation runs each launch to completion, in call order: there are no streams."""
    stream_of = staticmethod(_no_stream)

    def detached(self) -> "HostMemory":
        """What a launch plan keeps (this memory holds nothing of the call)."""
        return self

    def adopt(self, value):
        value = to_numpy(value)
        # Kernels index a tensor through its element strides from one base pointer: any view
        # with non-negative strides is read where it is — an expanded (stride-0) input of 2**31
        # elements is its 8 bytes, not 16 GiB. Only reversed views (numpy's negative strides)
        # are copied.
        return value if min(value.strides, default=0) >= 0 else np.ascontiguousarray(value)

    def pointer(self, buf):
        """What a pointer parameter receives: the same memory (as a C-contiguous array where it
        is dense; the kernel's stride parameters carry the layout)."""
        view = _dense_view(buf)
        return buf if view is None else view

    def empty(self, shape, dtype, order, like):
        return empty_like_layout(shape, dtype, order)

    def workspace(self, words: int):
        """Zero-filled scratch memory of a launch (8-byte words; grid reductions)."""
        return np.zeros(words, np.uint64)

    launches_are_synchronous = True
    """A launch has finished when its call returns: a launch plan may hand one thread's next
    launch the workspace its last launch left zeroed (lowering/execution/launch_plan.py)."""

    # What launch plans use (lowering/execution/launch_plan.py): everything decided once per signature.

    def allocator(self, shape, dtype, order):
        """A function allocating the buffer `empty` would (called per call of a plan)."""
        return layout_allocator(tuple(shape), np.dtype(dtype), None if order is None else tuple(order))

    address = staticmethod(numpy_address)
    """The data address a pointer parameter receives for `buf` (its dense view's is the same)."""

    @staticmethod
    def workspace_address(words: int) -> tuple[object, int]:
        buf = np.zeros(words, np.uint64)
        return buf, numpy_address(buf)

    def element_strides(self, buf) -> tuple[int, ...]:
        return tuple(s // buf.itemsize for s in buf.strides)

    def output(self, buf):
        return buf

    # In-kernel index checks (lowering/execution/index_errors.py): launches are synchronous, so the
    # record is read right after each launch that writes it.
    @staticmethod
    def index_record(records) -> tuple[object, int]:
        record = records.host_record()
        return record, numpy_address(record)

    @staticmethod
    def after_checked_launch(records) -> None:
        records.check(records.host_record())

    @staticmethod
    def before_call(records) -> None:
        """Clears this thread's record: a launch that raised (KeyboardInterrupt, LaunchError,
        RaceError) was never read, and its fault belongs to that call, not to this one."""
        records.host_record()[:] = 0


class CpuBackend(KernelBackend):
    name = "cpu"
    counts_bytes = True

    def __init__(self, extra_flags: Sequence[str] = ()):
        super().__init__()
        self.extra_flags = tuple(extra_flags)

    @property
    def device(self):
        """The GPU this backend's kernels are scheduled for (FUSER_GPU_PROFILE, default H100)."""
        from fuser.lowering import settings

        return settings.gpu_profile()

    def available(self) -> tuple[bool, str]:
        if cpu_runtime.cpu_compiler_available():
            return True, ""
        from fuser.lowering import settings

        return False, f"no C++20 compiler: FUSER_CXX={settings.cxx()!r} cannot be run (install g++ or set FUSER_CXX)"

    def variant(self) -> Hashable:
        from fuser.lowering import settings

        # A checked build is another binary of the same source; read from the settings snapshot
        # (settings.reload() after changing FUSER_MEMCHECK or FUSER_RACECHECK in a running process).
        snapshot = settings.launch_settings()
        return snapshot.memcheck, snapshot.racecheck

    def compiler(self) -> cpu_runtime.CpuCompiler:
        memcheck, racecheck = self.variant()
        return cpu_runtime.CpuCompiler(self.extra_flags, memcheck=memcheck, racecheck=racecheck)

    def load(self, binary: Binary, source: str) -> cpu_runtime.CpuModule:
        try:
            return cpu_runtime.CpuModule(binary.data, source, self.device)
        except OSError:
            if binary.origin != "disk":
                raise
        # A whole cache entry this system cannot load (e.g. built against another libc): rebuild it.
        compiler = self.compiler()
        fresh = compiler.build(source)
        compiler.cache.store(compiler.key(source), fresh, source)
        return cpu_runtime.CpuModule(fresh.data, source, self.device)

    def allocator(self, inputs: Sequence[object], torch_outputs: bool = False) -> HostMemory:
        return HostMemory()
