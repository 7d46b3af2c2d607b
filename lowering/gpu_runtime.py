"""The `cuda` backend's runtime: load cubins, move arrays, launch kernels and time them via pycuda.

pycuda is the optional `fuser[cuda]` extra (it does not install without a CUDA toolkit), so it is
imported only when a GPU is actually used; `gpu_available()` says whether it can be, and why not.
We use the device's primary context (`pycuda.autoprimaryctx`), the one torch and CuPy use, so
torch CUDA tensors are used in place through `data_ptr()`. Launches go to the legacy default
stream, which is ordered with torch's default stream.
"""

from __future__ import annotations

import functools
import math
import sys
import weakref
from collections.abc import Callable, Sequence

import numpy as np

from fuser.lowering.errors import FuserError

_STATIC_SHARED_LIMIT = 48 * 1024  # more dynamic shared memory must be opted into per kernel


class GpuUnavailable(FuserError):
    """The cuda backend was asked for on a machine where `gpu_available()` is False."""


@functools.cache
def gpu_available() -> tuple[bool, str]:
    """(True, "<device name> (sm_XY)") or (False, why not); never raises, creates no context."""
    try:
        import pycuda  # noqa: F401
    except ImportError:
        return False, "pycuda not installed (pip install 'fuser[cuda]', needs the CUDA toolkit)"
    try:
        import pycuda.driver as drv
    except ImportError as e:  # pycuda.driver links libcuda.so.1, which only a GPU driver installs
        return False, f"no CUDA driver (libcuda.so.1): {e}"
    try:
        drv.init()
        if drv.Device.count() == 0:
            return False, "no GPU device"
        dev = drv.Device(0)
        major, minor = dev.compute_capability()
        return True, f"{dev.name()} (sm_{major}{minor})"
    except Exception as e:  # drv.Error: e.g. CUDA_ERROR_NO_DEVICE, or a driver too old for pycuda
        return False, f"no GPU device ({e})"


def driver():
    """pycuda.driver with the primary context current on this thread (raises GpuUnavailable)."""
    ok, why = gpu_available()
    if not ok:
        raise GpuUnavailable(f"the cuda backend needs a GPU and pycuda: {why}")
    import pycuda.autoprimaryctx as primary
    import pycuda.driver as drv

    # autoprimaryctx makes the context current only on the importing thread.
    if drv.Context.get_current() is None:
        primary.context.push()
    return drv


@functools.cache
def _pool():
    from pycuda.tools import DeviceMemoryPool

    driver()
    return DeviceMemoryPool()


def free_pool() -> None:
    """Give the memory the pool holds for reuse back to the driver (live arrays keep theirs)."""
    _pool().free_held()


# --------------------------------------------------------------------------- arrays


def _torch():
    """The torch module if the process already imported it; inputs cannot be tensors otherwise."""
    return sys.modules.get("torch")


def _is_tensor(x) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def _numpy_dtype(torch_dtype) -> np.dtype:
    name = str(torch_dtype).removeprefix("torch.")
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _torch_dtype(dtype: np.dtype):
    torch = _torch()
    return getattr(torch, "bool" if dtype == np.bool_ else dtype.name)


def dense_strides(shape: Sequence[int], stride_order: Sequence[int] | None = None) -> tuple[int, ...]:
    """Element strides of a dense array; stride_order[i] ranks dim i, 0 = fastest (None: row-major)."""
    rank = len(shape)
    order = list(stride_order) if stride_order is not None else list(range(rank - 1, -1, -1))
    if sorted(order) != list(range(rank)):
        raise ValueError(f"stride_order {order} is not a permutation of 0..{rank - 1}")
    strides = [0] * rank
    step = 1
    for dim in sorted(range(rank), key=lambda d: order[d]):
        strides[dim] = step
        step *= max(shape[dim], 1)
    return tuple(strides)


def _outer_to_inner(strides: Sequence[int]) -> list[int]:
    # Stable on ties, so extent-1 and broadcast dims keep their places.
    return sorted(range(len(strides)), key=lambda d: -abs(strides[d]))


class DeviceArray:
    """An array in GPU memory: a pooled pycuda allocation, or a torch CUDA tensor used in place.

    `strides` are in elements. Pass it as a kernel argument to pass its device pointer.
    """

    __slots__ = ("ptr", "shape", "dtype", "strides", "_owner")

    def __init__(self, ptr: int, shape, dtype, strides, owner) -> None:
        self.ptr = int(ptr)
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.strides = tuple(strides)
        self._owner = owner  # keeps the memory alive: PooledDeviceAllocation or torch.Tensor

    @property
    def tensor(self):
        """The torch tensor this array is, or None for pycuda memory."""
        return self._owner if _is_tensor(self._owner) else None

    def to_numpy(self) -> np.ndarray:
        """Copy back to the host (synchronous), keeping the stride order."""
        if self.tensor is not None:
            t = self.tensor.detach()
            if str(t.dtype) == "torch.bfloat16":  # numpy has no bfloat16: move the bits
                return t.view(_torch().int16).cpu().numpy().view(self.dtype)
            return t.cpu().numpy()
        host = np.empty(math.prod(self.shape), self.dtype)
        if host.size:
            driver().memcpy_dtoh(_bytes_view(host), self.ptr)
        return from_dense(host, self.shape, self.strides)

    def output(self):
        """What to hand back to the caller: the torch tensor itself, or a numpy copy."""
        tensor = self.tensor
        return tensor if tensor is not None else self.to_numpy()

    def __repr__(self) -> str:
        kind = "torch" if self.tensor is not None else "pycuda"
        return f"DeviceArray({kind}, shape={self.shape}, dtype={self.dtype}, strides={self.strides})"


class DevicePtr(int):
    """A raw device address passed as a kernel argument (plain ints are refused: pointer or int?)."""


@functools.cache
def _device_ordinal() -> int:
    """Which GPU the primary context is on, in the numbering torch also uses."""
    drv = driver()
    current = drv.Context.get_device()
    return next(i for i in range(drv.Device.count()) if drv.Device(i) == current)


def _bytes_view(a: np.ndarray) -> np.ndarray:
    # Copies go through uint8 views: ml_dtypes' bfloat16 arrays refuse the buffer protocol.
    return a.reshape(-1).view(np.uint8)


def dense_copy(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """A dense copy of `x` whose memory keeps x's stride order (the layout a fusion was specialised
    for), and the element strides of that memory in x's dimension order. No copy if x is dense."""
    order = _outer_to_inner(x.strides)
    dense = np.ascontiguousarray(x.transpose(order))
    strides = [0] * x.ndim
    for i, dim in enumerate(order):
        strides[dim] = dense.strides[i] // x.itemsize
    return dense, tuple(strides)


def from_dense(buffer: np.ndarray, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """The inverse of `dense_copy`: view flat `buffer` as an array of `shape` with dense `strides`."""
    order = _outer_to_inner(strides)
    return buffer.reshape([shape[d] for d in order]).transpose(np.argsort(order))


def to_device(x) -> DeviceArray:
    """numpy array -> copied into pooled device memory (its stride order kept, made dense);
    torch CUDA tensor -> used in place, no copy; torch CPU tensor -> copied by torch."""
    drv = driver()
    if _is_tensor(x):
        ordinal = _device_ordinal()
        if not x.is_cuda:
            x = x.to(device=f"cuda:{ordinal}")
        elif x.device.index != ordinal:  # another GPU's pointer is invalid in our context
            raise ValueError(f"tensor is on {x.device} but fuser's kernels run on cuda:{ordinal}")
        return DeviceArray(x.data_ptr(), x.shape, _numpy_dtype(x.dtype), x.stride(), x)
    if not isinstance(x, np.ndarray):
        raise TypeError(f"expected a numpy array or torch tensor, got {type(x).__name__}")
    dense, strides = dense_copy(x)
    mem = _pool().allocate(max(dense.nbytes, 1))
    if dense.nbytes:
        drv.memcpy_htod(int(mem), _bytes_view(dense))
    return DeviceArray(int(mem), x.shape, x.dtype, strides, mem)


def empty(shape: Sequence[int], dtype, *, stride_order: Sequence[int] | None = None,
          like: Sequence[object] = ()) -> DeviceArray:
    """An uninitialised device array; allocated by torch (on its device) when any of `like` is a
    torch tensor, so outputs come back as the inputs came in."""
    dtype = np.dtype(dtype)
    strides = dense_strides(shape, stride_order)
    tensors = [t for t in like if _is_tensor(t)]
    if tensors:
        driver()
        device = f"cuda:{_device_ordinal()}"
        t = _torch().empty_strided(tuple(shape), strides, dtype=_torch_dtype(dtype), device=device)
        return DeviceArray(t.data_ptr(), shape, dtype, strides, t)
    nbytes = math.prod(shape) * dtype.itemsize
    mem = _pool().allocate(max(nbytes, 1))
    return DeviceArray(int(mem), shape, dtype, strides, mem)


# --------------------------------------------------------------------------- modules and launches


def _pack(arg, i: int, kernel: str) -> tuple[str, object]:
    """(struct format char, value) of one kernel argument, as pycuda's prepared calls want them."""
    if isinstance(arg, DeviceArray):
        return "P", arg.ptr
    if isinstance(arg, DevicePtr):
        return "P", int(arg)
    if isinstance(arg, np.generic):
        if arg.dtype.itemsize == 2 and arg.dtype.kind in "fV":  # __half / __nv_bfloat16: pass the bits
            return "H", int(arg.view(np.uint16))
        return arg.dtype.char, arg
    if _is_tensor(arg):
        return "P", arg.data_ptr()
    if type(arg).__module__.startswith("pycuda"):  # DeviceAllocation / PooledDeviceAllocation
        return "P", int(arg)
    raise TypeError(f"argument {i} of kernel {kernel}: {type(arg).__name__} {arg!r} is neither a device"
                    " array/pointer nor a numpy scalar (write np.int32(n), np.float32(x): the dtype is"
                    " the C type)")


def _dim3(dims, what: str) -> tuple[int, int, int]:
    dims = (int(dims),) if isinstance(dims, (int, np.integer)) else tuple(int(d) for d in dims)
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise ValueError(f"{what} must be 1 to 3 positive extents, got {dims}")
    return dims + (1,) * (3 - len(dims))


class GpuModule:
    """A cubin loaded into the primary context; launches its kernels by (extern "C") name."""

    def __init__(self, cubin: bytes) -> None:
        drv = driver()
        try:
            self._module = drv.module_from_buffer(cubin)
        except drv.Error as e:
            major, minor = drv.Context.get_device().compute_capability()
            raise FuserError(f"the CUDA driver cannot load this cubin on an sm_{major}{minor} device: {e}"
                             f" (compile for arch sm_{major}{minor})") from e
        self._calls: dict[tuple[str, str], object] = {}  # (kernel, argument formats) -> prepared Function
        self._shared_optin: dict[str, int] = {}

    def pack_args(self, kernel_name: str, args: Sequence[object]) -> list[tuple[str, object]]:
        """What `launch` does to `args` before launching: (struct format, value) of each argument."""
        return [_pack(a, i, kernel_name) for i, a in enumerate(args)]

    def launch(self, kernel_name: str, grid, block, args: Sequence[object], *, needs_sync: bool = True,
               shared_bytes: int = 0) -> None:
        """Launch asynchronously on the default stream. `args`: DeviceArray / DevicePtr / torch tensors
        for pointers, numpy scalars for values (their dtype must be the kernel's C parameter type).
        needs_sync is the emulation's hint (the GPU has real barriers); no byte counters here."""
        packed = self.pack_args(kernel_name, args)
        formats = "".join(f for f, _ in packed)
        fn = self._calls.get((kernel_name, formats))
        if fn is None:
            fn = self._prepare(kernel_name, formats)
        if shared_bytes > self._shared_optin.get(kernel_name, _STATIC_SHARED_LIMIT):
            drv = driver()
            fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_bytes)
            self._shared_optin[kernel_name] = shared_bytes
        fn.prepared_call(_dim3(grid, "grid"), _dim3(block, "block"), *(v for _, v in packed),
                         shared_size=shared_bytes)

    def bind(self, kernel_name: str, grid, block, args: Sequence[object], *, needs_sync: bool = True,
             shared_bytes: int = 0) -> "BoundGpuLaunch":
        """A launch with everything but the data pointers fixed (a launch plan's hot path): `args`
        as for `launch`, each pointer argument given as a `PointerSlot` (cpu_runtime's: any object
        with `nbytes`). The argument formats and constants are packed once, here."""
        template, slots = [], []
        for i, a in enumerate(args):
            if hasattr(a, "nbytes") and not isinstance(a, np.generic):  # a PointerSlot
                template.append(("P", 0))
                slots.append(i)
            else:
                template.append(_pack(a, i, kernel_name))
        formats = "".join(f for f, _ in template)
        fn = self._calls.get((kernel_name, formats)) or self._prepare(kernel_name, formats)
        if shared_bytes > self._shared_optin.get(kernel_name, _STATIC_SHARED_LIMIT):
            fn.set_attribute(driver().function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_bytes)
            self._shared_optin[kernel_name] = shared_bytes
        return BoundGpuLaunch(fn, _dim3(grid, "grid"), _dim3(block, "block"), [v for _, v in template], slots,
                              shared_bytes)

    def _prepare(self, kernel_name: str, formats: str):
        drv = driver()
        try:
            fn = self._module.get_function(kernel_name)
        except drv.Error as e:
            raise FuserError(f"no kernel {kernel_name!r} in this module (is it extern \"C\"?): {e}") from e
        fn.prepare(formats)
        self._calls[(kernel_name, formats)] = fn
        return fn


class BoundGpuLaunch:
    """A prepared kernel with its grid, block and constant arguments packed; per call only the
    device pointers are filled in. Thread-safe: the argument list is built per call."""

    __slots__ = ("fn", "grid", "block", "template", "slots", "shared_bytes", "__weakref__")
    instances: "weakref.WeakSet[BoundGpuLaunch]" = weakref.WeakSet()
    """(weak) for the benchmark harness, which swaps `fn` for an empty kernel's (EmptyLaunches)."""

    def __init__(self, fn, grid, block, template: list, slots: list[int], shared_bytes: int):
        self.fn, self.grid, self.block = fn, grid, block
        self.template, self.slots, self.shared_bytes = template, tuple(slots), shared_bytes
        BoundGpuLaunch.instances.add(self)

    def __call__(self, pointers: Sequence[int]) -> None:
        values = list(self.template)
        for slot, address in zip(self.slots, pointers):
            values[slot] = address
        self.fn.prepared_call(self.grid, self.block, *values, shared_size=self.shared_bytes)


def synchronize() -> None:
    driver().Context.synchronize()


def time_kernel(fn: Callable[[], object], warmup: int = 10, iters: int = 100) -> list[float]:
    """Milliseconds of GPU time of each of `iters` calls of `fn`, measured with CUDA events on the
    default stream after `warmup` calls. Events are recorded back to back and read at the end, so
    host synchronisation does not end up in the numbers."""
    if iters < 1:
        raise ValueError(f"time_kernel needs iters >= 1, got {iters}")
    drv = driver()
    for _ in range(warmup):
        fn()
    drv.Context.synchronize()
    events = [(drv.Event(), drv.Event()) for _ in range(iters)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    events[-1][1].synchronize()
    return [end.time_since(start) for start, end in events]
