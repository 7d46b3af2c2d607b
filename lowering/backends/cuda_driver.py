"""The few CUDA driver calls pycuda does not expose in the form fuser needs, through ctypes.

pycuda launches only on its own `Stream` objects and hands out no CUfunction handle, so a kernel
cannot be launched on torch's current stream through it (found on the first GPU run). Modules
are therefore loaded, and kernels launched, here: cuModuleLoadData, cuModuleGetFunction,
cuFuncGetAttribute, cuFuncSetAttribute and cuLaunchKernel on the context pycuda made current
(lowering/backends/gpu_runtime.py), which still owns the context, memory, copies, events and streams.
"""

from __future__ import annotations

import ctypes
import functools

from fuser.lowering.errors import FuserError

CU_LAUNCH_PARAM_END, CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE = 0, 1, 2
CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
"""Static shared memory the kernel declares (what ptxas reported)."""
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CUDA_ERROR_NO_BINARY_FOR_GPU = 209
CUDA_ERROR_NOT_FOUND = 500


class DriverError(FuserError):
    """A CUDA driver call failed; `code` is its CUresult."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


@functools.cache
def _lib():
    lib = ctypes.CDLL("libcuda.so.1")
    p, u, i = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
    signatures = {
        "cuModuleLoadData": [ctypes.POINTER(p), p],
        "cuModuleUnload": [p],
        "cuModuleGetFunction": [ctypes.POINTER(p), p, ctypes.c_char_p],
        "cuFuncSetAttribute": [p, i, i],
        "cuFuncGetAttribute": [ctypes.POINTER(i), i, p],
        "cuLaunchKernel": [p, u, u, u, u, u, u, u, p, p, p],
        "cuGetErrorName": [i, ctypes.POINTER(ctypes.c_char_p)],
    }
    for name, argtypes in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, i
    return lib


def driver_library():
    """libcuda, loaded once (its entry points' addresses go into native launch records:
    lowering/backends/gpu_launcher.py)."""
    return _lib()


def error_name(code: int) -> str:
    text = ctypes.c_char_p()
    if _lib().cuGetErrorName(code, ctypes.byref(text)) != 0 or not text.value:
        return f"CUDA error {code}"
    return text.value.decode()


def _check(code: int, what: str) -> None:
    if code:
        raise DriverError(f"{what} failed: {error_name(code)} ({code})", code)


def load_module(image: bytes) -> int:
    """cuModuleLoadData of a cubin or PTX image into the current context: the CUmodule handle."""
    handle = ctypes.c_void_p()
    buf = ctypes.create_string_buffer(image, len(image) + 1)  # PTX must end in a NUL
    _check(_lib().cuModuleLoadData(ctypes.byref(handle), buf), "cuModuleLoadData")
    return handle.value


def unload_module(module: int) -> None:
    _check(_lib().cuModuleUnload(module), "cuModuleUnload")


def get_function(module: int, name: str) -> int:
    handle = ctypes.c_void_p()
    _check(_lib().cuModuleGetFunction(ctypes.byref(handle), module, name.encode()), f"cuModuleGetFunction({name!r})")
    return handle.value


def function_attribute(function: int, attribute: int) -> int:
    """cuFuncGetAttribute: e.g. CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, the static shared memory."""
    value = ctypes.c_int(0)
    _check(_lib().cuFuncGetAttribute(ctypes.byref(value), attribute, function), f"cuFuncGetAttribute({attribute})")
    return value.value


def set_max_dynamic_shared(function: int, nbytes: int) -> None:
    """Opt a kernel into more than 48 KB of dynamic shared memory."""
    _check(_lib().cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes),
           "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")


def launch(function: int, grid: tuple, block: tuple, shared_bytes: int, stream: int, params: bytes,
           kernel_name: str = "") -> None:
    """cuLaunchKernel of `function` on `stream` (a CUstream handle; 0: the legacy default stream)
    with `params`, the argument buffer laid out as the kernel's C parameters (`struct.pack` with
    native alignment)."""
    buf = ctypes.create_string_buffer(params, max(len(params), 1))
    size = ctypes.c_size_t(len(params))
    extra = (ctypes.c_void_p * 5)(CU_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(buf),
                                  CU_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(size), CU_LAUNCH_PARAM_END)
    code = _lib().cuLaunchKernel(function, *grid, *block, shared_bytes, stream, None, extra)
    if code:
        raise launch_error(code, kernel_name or hex(function), grid, block, shared_bytes, stream)


def launch_error(code: int, kernel: str, grid: tuple, block: tuple, shared_bytes: int, stream: int) -> DriverError:
    """The error of a launch the driver refused with `code` (either launch path)."""
    return DriverError(f"launching kernel {kernel} failed: {error_name(code)} ({code}); grid {grid}, block {block}, "
                       f"{shared_bytes} bytes of dynamic shared memory, stream {stream:#x}", code)
