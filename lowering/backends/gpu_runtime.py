"""The `cuda` backend's runtime: load cubins, move arrays, launch kernels and time them via pycuda.

pycuda is the optional `fuser[cuda]` extra (it does not install without a CUDA toolkit), so it is
imported only when a GPU is actually used; `gpu_available()` says whether it can be, and why not.
Context: the device's primary context, the one torch and CuPy use, so torch CUDA tensors are
used in place through `data_ptr()`. pycuda keeps a stack of current contexts per thread and
aborts the process when a thread ends with one still pushed (seen on the first GPU run: torch's
autograd thread). So the context stays pushed only on the main thread (popped at exit); any
other thread gets it for the span of a `context()` block, which every entry point here and the
executor's cuda path open.

Streams: pycuda launches only on its own `Stream` objects, and torch's streams are not those,
and it hands out no CUfunction handle; so modules are loaded and kernels launched with the
driver API on a stream *handle* (lowering/backends/cuda_driver.py), in the context pycuda made current.
Which stream: with torch
tensors, torch's current stream of the device (`torch_stream`, read per call, so
`with torch.cuda.stream(s)` is honoured); with numpy arrays, fuser's own blocking stream
(`own_stream`), which synchronous copies on the legacy default stream are ordered with.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import math
import struct
import sys
import threading
import weakref
from collections.abc import Callable, Sequence

import numpy as np

from fuser.lowering.backends import cuda_driver, gpu_launcher
from fuser.lowering.addresses import dense_strides, span_bytes
from fuser.lowering.device import LaunchLimitError, check_parameter_bytes, shared_memory_optin
from fuser.lowering.errors import FuserError


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


@functools.cache
def _primary_context():
    """The primary context of device 0, retained once (not pushed)."""
    import pycuda.driver as drv

    drv.init()
    return drv.Device(0).retain_primary_context()


_main_thread_push = threading.Lock()


def _push_on_main_thread(ctx) -> None:
    """The main thread keeps the context pushed for good; it is popped at exit (atexit runs on
    the main thread, before pycuda's own cleanup)."""
    with _main_thread_push:
        ctx.push()
        if not getattr(_push_on_main_thread, "registered", False):
            _push_on_main_thread.registered = True
            atexit.register(_pop_at_exit, ctx)


_exiting = False
"""Set when the main thread's context has been popped at exit: nothing may push it again (a
context left pushed at exit aborts the process), so late finalizers skip their GPU work."""


def _pop_at_exit(ctx) -> None:
    global _exiting
    import pycuda.driver as drv

    _exiting = True
    try:
        if _pool.cache_info().currsize:  # pooled blocks go back to the driver while the context is current
            _pool().stop_holding()
            _pool().free_held()
        current = drv.Context.get_current()
        if current is not None and current.handle == ctx.handle:  # ours, not one a user pushed since
            drv.Context.pop()
        from pycuda.tools import clear_context_caches

        clear_context_caches()
    except Exception:  # the driver may be shutting down already; nothing is left to protect
        pass


def driver():
    """pycuda.driver with the primary context current on this thread (raises GpuUnavailable).

    On the main thread the context is pushed once and stays; on any other thread the caller must
    be inside `context()`, which pops it again (see the module doc)."""
    ok, why = gpu_available()
    if not ok:
        raise GpuUnavailable(f"the cuda backend needs a GPU and pycuda: {why}")
    if _exiting:
        raise GpuUnavailable("the interpreter is exiting: the GPU context is released")
    import pycuda.driver as drv

    if drv.Context.get_current() is None:
        if threading.current_thread() is not threading.main_thread():
            raise FuserError(f"GPU work on thread {threading.current_thread().name!r} outside"
                             " gpu_runtime.context() (internal error: the context would stay pushed)")
        _push_on_main_thread(_primary_context())
    return drv


@functools.lru_cache(maxsize=1)
def device_spec():
    """The `DeviceSpec` (lowering/device.py) of the GPU kernels run on (cuda:0), read from the driver."""
    from fuser.lowering.device import H100, from_attributes

    drv = driver()
    dev = drv.Context.get_device()
    attribute = drv.device_attribute

    def read(name: str, default: int) -> int:
        found = getattr(attribute, name, None)
        return int(dev.get_attribute(found)) if found is not None else default

    major, minor = dev.compute_capability()
    return from_attributes(
        dev.name(), major, minor, sms=read("MULTIPROCESSOR_COUNT", H100.sms),
        max_threads_per_sm=read("MAX_THREADS_PER_MULTIPROCESSOR", H100.max_threads_per_sm),
        max_threads_per_block=read("MAX_THREADS_PER_BLOCK", H100.max_threads_per_block),
        max_blocks_per_sm=read("MAX_BLOCKS_PER_MULTIPROCESSOR", H100.max_blocks_per_sm),
        registers_per_sm=read("MAX_REGISTERS_PER_MULTIPROCESSOR", H100.registers_per_sm),
        shared_per_sm=read("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", H100.shared_per_sm),
        shared_per_block_optin=read("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", H100.shared_per_block_optin),
        shared_per_block=read("MAX_SHARED_MEMORY_PER_BLOCK", H100.shared_per_block),
        l2_bytes=read("L2_CACHE_SIZE", H100.l2_bytes), memory_clock_khz=read("MEMORY_CLOCK_RATE", 0),
        bus_width_bits=read("GLOBAL_MEMORY_BUS_WIDTH", 0))


@contextlib.contextmanager
def context():
    """The primary context current on this thread for the block: on a thread other than the main
    one it is pushed here and popped on leaving, so no thread ends with it pushed."""
    ok, why = gpu_available()
    if not ok:
        raise GpuUnavailable(f"the cuda backend needs a GPU and pycuda: {why}")
    if _exiting:
        raise GpuUnavailable("the interpreter is exiting: the GPU context is released")
    import pycuda.driver as drv

    if drv.Context.get_current() is not None or threading.current_thread() is threading.main_thread():
        yield driver()
        return
    _primary_context().push()
    try:
        yield drv
    finally:
        drv.Context.pop()


def in_context(fn):
    """`fn` run inside `context()` (entry points a user may call from any thread)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with context():
            return fn(*args, **kwargs)

    return wrapper


# --------------------------------------------------------------------------- streams


@functools.cache
def _own_stream():
    """fuser's stream for numpy inputs: a blocking stream (flags 0), so copies on the legacy
    default stream wait for its kernels and its kernels wait for them."""
    return driver().Stream()


def own_stream() -> int:
    """The handle of fuser's own stream (numpy inputs on the cuda backend)."""
    return _own_stream().handle


def torch_stream(ordinal: int) -> Callable[[], int]:
    """A function giving the handle of torch's current stream on cuda:`ordinal` (read at each
    call: `with torch.cuda.stream(s)` may change it between calls)."""
    torch = _torch()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Inductor's launchers use
    if raw is not None:
        return functools.partial(raw, ordinal)
    return lambda: torch.cuda.current_stream(ordinal).cuda_stream


def launch_kernel(function: int, grid: tuple, block: tuple, shared_bytes: int, stream: int, params: bytes,
                  kernel_name: str = "") -> None:
    """cuLaunchKernel on a stream handle (lowering/backends/cuda_driver.py); the tests and the benchmark
    harness replace this function to see or swap launches."""
    cuda_driver.launch(function, grid, block, shared_bytes, stream, params, kernel_name)


@functools.cache
def _pool():
    from pycuda.tools import DeviceMemoryPool

    driver()
    return DeviceMemoryPool()


@in_context
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

    @in_context
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


@in_context
def to_device(x) -> DeviceArray:
    """numpy array -> copied into pooled device memory: a dense one densely (its stride order
    kept), a strided view as the bytes it reaches (`memory_span`: an expanded input of 2**31
    elements is 8 bytes, not 16 GiB) read through its strides; torch CUDA tensor -> used in place,
    no copy; torch CPU tensor -> copied by torch, a strided view likewise as its span."""
    drv = driver()
    if _is_tensor(x):
        ordinal = _device_ordinal()
        if not x.is_cuda:
            x = _torch_span_to(x, f"cuda:{ordinal}")
        elif x.device.index != ordinal:  # another GPU's pointer is invalid in our context
            raise ValueError(f"tensor is on {x.device} but fuser's kernels run on cuda:{ordinal}")
        return DeviceArray(x.data_ptr(), x.shape, _numpy_dtype(x.dtype), x.stride(), x)
    if not isinstance(x, np.ndarray):
        raise TypeError(f"expected a numpy array or torch tensor, got {type(x).__name__}")
    span = memory_span(x)
    if span is not None:
        raw, strides = span
        mem = _pool().allocate(max(raw.nbytes, 1))
        if raw.nbytes:
            drv.memcpy_htod(int(mem), raw)
        return DeviceArray(int(mem), x.shape, x.dtype, strides, mem)
    dense, strides = dense_copy(x)
    mem = _pool().allocate(max(dense.nbytes, 1))
    if dense.nbytes:
        drv.memcpy_htod(int(mem), _bytes_view(dense))
    return DeviceArray(int(mem), x.shape, x.dtype, strides, mem)


def memory_span(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]] | None:
    """(the bytes a strided view reaches from its data pointer, as a uint8 array over the same
    memory; its element strides) for a view that is not dense but has non-negative strides in
    whole elements; None for other arrays (a dense one is copied as it is, a reversed view
    densely)."""
    if x.flags.c_contiguous or x.flags.f_contiguous or not x.size:
        return None
    if min(x.strides) < 0 or any(st % x.itemsize for st in x.strides):
        return None
    if x.transpose(_outer_to_inner(x.strides)).flags.c_contiguous:  # dense in another order: as it is
        return None

    nbytes = span_bytes(x.shape, x.strides, x.itemsize)
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(x.__array_interface__["data"][0]))
    return raw, tuple(st // x.itemsize for st in x.strides)


def _dense_in_some_order(shape, strides) -> bool:
    expected = 1
    for stride, size in sorted((st, n) for n, st in zip(shape, strides) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _torch_span_to(t, device: str):
    """A CPU tensor on `device`: a strided view (non-overlapping and dense or not) as the
    elements of its storage it reaches, viewed back with its strides."""
    if t.numel() == 0 or _dense_in_some_order(t.shape, t.stride()):
        return t.to(device=device)  # torch keeps a permuted dense layout
    count = span_bytes(t.shape, t.stride(), 1)  # in elements: strides and itemsize 1
    flat = t.as_strided((count,), (1,), t.storage_offset())
    moved = flat.to(device=device)
    return moved.as_strided(tuple(t.shape), tuple(t.stride()), moved.storage_offset())


def torch_copy(x: np.ndarray, device: str) -> DeviceArray:
    """A numpy array copied to a torch CUDA tensor on `device` (on torch's current stream,
    through its caching allocator): densely in its stride order, or a strided view as its span."""
    torch = _torch()
    span = memory_span(x)
    if span is not None:
        raw, strides = span
        as_torch = torch.from_numpy(raw).to(device)
        bits = torch.int16 if x.dtype.name == "bfloat16" else _torch_dtype(x.dtype)
        typed = as_torch.view(bits)
        typed = typed.view(torch.bfloat16) if x.dtype.name == "bfloat16" else typed
        t = typed.as_strided(tuple(x.shape), strides, 0)
        return DeviceArray(t.data_ptr(), x.shape, x.dtype, strides, t)
    dense, strides = dense_copy(x)
    host = torch.from_numpy(dense.view(np.int16)).view(torch.bfloat16) if dense.dtype.name == "bfloat16" \
        else torch.from_numpy(dense)
    t = host.to(device)
    return DeviceArray(t.data_ptr(), x.shape, x.dtype, strides, t)


@in_context
def mapped_zeros(count: int, dtype) -> tuple[np.ndarray, int]:
    """(a zeroed page-locked host array mapped into the device, its device address): kernels
    write it, the host reads it, no copies (the in-kernel index checks' record)."""
    drv = driver()
    host = drv.pagelocked_zeros(count, dtype, mem_flags=drv.host_alloc_flags.DEVICEMAP)
    return host, int(host.base.get_device_pointer())


@in_context
def zeros_on_own_stream(words: int) -> DeviceArray:
    """`words` zeroed 8-byte words of pooled memory, zeroed on fuser's own stream."""
    mem = _pool().allocate(8 * max(words, 1))
    driver().memset_d8_async(int(mem), 0, 8 * max(words, 1), _own_stream())
    return DeviceArray(int(mem), (words,), np.uint64, (1,), mem)


@in_context
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

    @in_context
    def __init__(self, cubin: bytes) -> None:
        drv = driver()
        try:
            self._module = cuda_driver.load_module(cubin)
        except cuda_driver.DriverError as e:
            major, minor = drv.Context.get_device().compute_capability()
            raise FuserError(f"the CUDA driver cannot load this cubin on an sm_{major}{minor} device: {e}"
                             f" (compile for arch sm_{major}{minor})") from e
        self._functions: dict[str, int] = {}  # kernel -> CUfunction handle
        self._resources: dict[str, tuple[int, int, int]] = {}
        """kernel -> (static shared bytes, most threads a block, registers a thread), from the driver."""
        self._shared_optin: dict[str, int] = {}
        """kernel -> the dynamic shared memory it is opted in to (absent: not opted in)."""

    def __del__(self) -> None:
        module = getattr(self, "_module", None)
        if module is None:
            return
        try:
            with context():
                cuda_driver.unload_module(module)
        except Exception:  # at interpreter exit the context may be gone: the driver frees it then
            pass

    def pack_args(self, kernel_name: str, args: Sequence[object]) -> list[tuple[str, object]]:
        """What `launch` does to `args` before launching: (struct format, value) of each argument."""
        return [_pack(a, i, kernel_name) for i, a in enumerate(args)]

    def launch(self, kernel_name: str, grid, block, args: Sequence[object], *, needs_sync: bool = True,
               shared_bytes: int = 0, stream: int | None = None) -> None:
        """Launch asynchronously on `stream` (a CUstream handle; None: fuser's own stream).
        `args`: DeviceArray / DevicePtr / torch tensors for pointers, numpy scalars for values
        (their dtype must be the kernel's C parameter type). needs_sync is the emulation's hint
        (the GPU has real barriers); no byte counters here."""
        packed = self.pack_args(kernel_name, args)
        block = _dim3(block, "block")
        fn = self._function(kernel_name, shared_bytes, block)
        params = struct.pack("".join(f for f, _ in packed), *(v for _, v in packed))
        check_parameter_bytes(self.device, kernel_name, len(params))
        launch_kernel(fn, _dim3(grid, "grid"), block, shared_bytes,
                      own_stream() if stream is None else stream, params, kernel_name)

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
        block = _dim3(block, "block")
        fn = self._function(kernel_name, shared_bytes, block)
        check_parameter_bytes(self.device, kernel_name, struct.calcsize("".join(f for f, _ in template)))
        return BoundGpuLaunch(fn, kernel_name, _dim3(grid, "grid"), block,
                              "".join(f for f, _ in template), [v for _, v in template], slots, shared_bytes,
                              _primary_context().handle)

    @property
    def device(self):
        """The DeviceSpec of the GPU this module is loaded on (its limits are checked per launch)."""
        found = self.__dict__.get("_device")
        if found is None:
            found = self._device = device_spec()
        return found

    def _function(self, kernel_name: str, shared_bytes: int, block: tuple[int, int, int] = (1, 1, 1)) -> int:
        """The kernel's CUfunction, opted in to `shared_bytes` of dynamic shared memory where its
        block needs more than 48 KiB *in all*: the static shared memory the compiler gave it (the
        function's SHARED_SIZE_BYTES) plus the dynamic. Raises LaunchLimitError (before the
        driver would refuse the launch) for more shared memory than the device allows a block,
        or for more threads than the kernel's registers allow a block."""
        fn = self._functions.get(kernel_name)
        if fn is None:
            with context():
                try:
                    fn = cuda_driver.get_function(self._module, kernel_name)
                except cuda_driver.DriverError as e:
                    raise FuserError(f"no kernel {kernel_name!r} in this module (is it extern \"C\"?): {e}") from e
                attribute = cuda_driver.function_attribute
                self._resources[kernel_name] = (
                    attribute(fn, cuda_driver.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
                    attribute(fn, cuda_driver.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
                    attribute(fn, cuda_driver.CU_FUNC_ATTRIBUTE_NUM_REGS))
            self._functions[kernel_name] = fn
        static, max_threads, registers = self._resources[kernel_name]
        threads = block[0] * block[1] * block[2]
        if threads > max_threads:
            raise LaunchLimitError(
                f"kernel {kernel_name!r} cannot run blocks of {threads} threads: it uses {registers} registers a "
                f"thread, which allow at most {max_threads} threads a block on {self.device.name} "
                f"({self.device.registers_per_sm:,} registers an SM)", kernel_name, what="threads per block",
                limit=max_threads, value=threads)
        device = self.device
        if shared_memory_optin(device, kernel_name, static, shared_bytes):
            # Without the opt-in a kernel may take 48 KiB - static of dynamic shared memory.
            if shared_bytes > self._shared_optin.get(kernel_name, device.shared_per_block - static):
                with context():
                    cuda_driver.set_max_dynamic_shared(fn, shared_bytes)
                self._shared_optin[kernel_name] = shared_bytes
        return fn


class BoundGpuLaunch:
    """A kernel (`fn`, its CUfunction handle) with its grid, block and constant arguments packed;
    per call only the device pointers are filled in and the stream is named. Thread-safe: nothing
    is written per call but a stack buffer (native) or a new argument list (Python).

    Launched by the native launcher (lowering/backends/gpu_launcher.py: `native`, with `record`
    its launch record) where it is built and FUSER_DISABLE does not name native_launcher;
    otherwise by `launcher` (`launch_kernel`, through ctypes), the *Python path*. The benchmark
    harness swaps either for an empty kernel's launch (EmptyLaunches); `through_python()` sends
    every launch the Python path's way (to record them at `cuda_driver.launch`)."""

    __slots__ = ("fn", "kernel_name", "grid", "block", "format", "template", "slots", "shared_bytes", "launcher",
                 "context", "native", "record", "__weakref__")
    instances: "weakref.WeakSet[BoundGpuLaunch]" = weakref.WeakSet()
    _python_only = 0  # > 0 inside through_python()

    def __init__(self, fn, kernel_name: str, grid, block, formats: str, template: list, slots: list[int],
                 shared_bytes: int, context: int):
        self.fn, self.kernel_name, self.grid, self.block = fn, kernel_name, grid, block
        self.format = struct.Struct(formats)
        self.template, self.slots, self.shared_bytes = template, tuple(slots), shared_bytes
        self.context = context
        self.launcher = launch_kernel  # looked up now: a test's replacement applies to later binds
        self.native = self.record = None
        native = None if BoundGpuLaunch._python_only else gpu_launcher.native_launch()
        if native is not None:
            self.record = self.launch_record(fn, grid, block, shared_bytes, formats, template, slots)
            self.native = native if self.record is not None else None
        BoundGpuLaunch.instances.add(self)

    def launch_record(self, fn, grid, block, shared_bytes: int, formats: str, template: Sequence, slots) -> bytes | None:
        """The native launcher's record of this launch's context with these parameters."""
        return gpu_launcher.launch_record(gpu_launcher.driver_entry_points(), fn, self.context, grid, block,
                                          shared_bytes, formats, template, slots)

    def __call__(self, pointers: Sequence[int], stream: int = 0) -> None:
        native = self.native
        if native is not None:
            code = native(self.record, stream, *pointers)
            if code:
                raise self.failure(code, stream)
            return
        values = list(self.template)
        for slot, address in zip(self.slots, pointers):
            values[slot] = address
        self.launcher(self.fn, self.grid, self.block, self.shared_bytes, stream, self.format.pack(*values),
                      self.kernel_name)

    def failure(self, code: int, stream: int) -> cuda_driver.DriverError:
        """The error of a native launch that returned `code`, worded as the Python path's."""
        return cuda_driver.launch_error(code, self.kernel_name or hex(self.fn), self.grid, self.block,
                                        self.shared_bytes, stream)

    @classmethod
    @contextlib.contextmanager
    def through_python(cls):
        """Every launch, of launches bound before and inside the block, takes the Python path
        (which needs the primary context current: call `execute` inside, which makes it so; a
        TensorCall built for native launches does not)."""
        swapped = [(bound, bound.native) for bound in list(cls.instances) if bound.native is not None]
        cls._python_only += 1
        for bound, _ in swapped:
            bound.native = None
        try:
            yield
        finally:
            cls._python_only -= 1
            for bound, native in swapped:
                bound.native = native


@in_context
def synchronize() -> None:
    driver().Context.synchronize()


def time_kernel(fn: Callable[[], object], warmup: int = 10, iters: int = 100) -> list[float]:
    """Milliseconds of GPU time of each of `iters` calls of `fn`, measured with CUDA events on
    fuser's own stream (where `fn`'s launches on numpy data go) after `warmup` calls. Events are recorded back to back and read at the end, so
    host synchronisation does not end up in the numbers."""
    if iters < 1:
        raise ValueError(f"time_kernel needs iters >= 1, got {iters}")
    with context() as drv:
        for _ in range(warmup):
            fn()
        drv.Context.synchronize()
        stream = _own_stream()
        events = [(drv.Event(), drv.Event()) for _ in range(iters)]
        for start, end in events:
            start.record(stream)
            fn()
            end.record(stream)
        events[-1][1].synchronize()
        return [end.time_since(start) for start, end in events]


@in_context
def copy_bandwidth(nbytes: int = 1 << 30, iters: int = 30) -> dict:
    """A device-to-device copy of `nbytes` (at most a quarter of the free memory), timed with CUDA
    events: {"bytes", "ms" (median), "gbps" (2 x bytes / time: read + write)} — the bandwidth
    kernels are compared against."""
    drv = driver()
    free, _ = drv.mem_get_info()
    nbytes = min(nbytes, free // 4) // 4 * 4
    src, dst = drv.mem_alloc(nbytes), drv.mem_alloc(nbytes)
    try:
        drv.memset_d32(src, 0x3F800000, nbytes // 4)  # 1.0f everywhere: never zeros
        stream = _own_stream()
        ms = sorted(time_kernel(lambda: drv.memcpy_dtod_async(dst, src, nbytes, stream), warmup=5, iters=iters))
        median = ms[len(ms) // 2]
    finally:
        src.free()
        dst.free()
    return {"bytes": nbytes, "ms": median, "gbps": 2 * nbytes / (median * 1e-3) / 1e9}
