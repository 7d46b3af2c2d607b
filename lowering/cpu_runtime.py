"""Run generated CUDA C on the CPU.

The source (which starts with the text of runtime/fuser_prelude.cuh) is compiled by g++ with
-DFUSER_CPU into a shared library; runtime/fuser_cpu_emu.h emulates the CUDA subset the prelude
documents. Every kernel followed by FUSER_HOST_LAUNCHER(k) exports `k__launch` (cuLaunchKernel-like:
args[i] points at the i-th argument) and `k__signature` (parameter types, used to check arguments).

Compiled modules are cached on disk under $FUSER_CACHE_DIR/cpu (default ~/.cache/fuser/cpu), keyed
by the sha256 of the source, the flags, the compiler and the runtime headers, and memoised in the
process. Files are written to a temporary name and renamed, so processes can share the cache.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Sequence

import ml_dtypes
import numpy as np

from fuser.lowering.errors import CompileError, FuserError, LaunchError

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
PRELUDE_PATH = RUNTIME_DIR / "fuser_prelude.cuh"
EMU_HEADER_PATH = RUNTIME_DIR / "fuser_cpu_emu.h"

ABI_VERSION = 1  # FUSER_CPU_ABI_VERSION in fuser_cpu_emu.h
CACHE_FORMAT = "1"  # bump to invalidate every cached module
BASE_FLAGS = (
    "-O2", "-std=c++20", "-fopenmp", "-shared", "-fPIC", "-DFUSER_CPU",
    "-fvisibility=hidden",  # only the launchers are exported: smaller, faster-loading modules
    "-fno-math-errno",      # CUDA math never sets errno; lets sqrtf etc. inline
)
SOURCE_NAME = "kernel.cpp"


# ------------------------------------------------------------------------------------------------
# Compiler discovery and the prelude.
# ------------------------------------------------------------------------------------------------

def _cxx() -> str:
    return os.environ.get("FUSER_CXX", "g++")


@functools.lru_cache(maxsize=None)
def _compiler_identity(cxx: str) -> str | None:
    """Resolved path and version line of the compiler; None when it cannot be run."""
    path = shutil.which(cxx)
    if path is None:
        return None
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return f"{os.path.realpath(path)}\n{proc.stdout.splitlines()[0] if proc.stdout else ''}"


def cpu_compiler_available() -> bool:
    """True when the C++ compiler for the CPU backend ($FUSER_CXX, default g++) can be run."""
    return _compiler_identity(_cxx()) is not None


def prelude_text() -> str:
    """The text the emitter prepends to every kernel source."""
    return PRELUDE_PATH.read_text()


def with_prelude(body: str) -> str:
    """`body` (kernels and FUSER_HOST_LAUNCHER lines) preceded by the prelude."""
    return prelude_text() + "\n" + body


def cache_dir() -> Path:
    root = os.environ.get("FUSER_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "fuser")
    return Path(root) / "cpu"


# ------------------------------------------------------------------------------------------------
# ABI mirrors (fuser_launch_config / fuser_launch_stats in fuser_cpu_emu.h).
# ------------------------------------------------------------------------------------------------

class _LaunchConfig(ctypes.Structure):
    _fields_ = [
        ("grid", ctypes.c_uint32 * 3),
        ("block", ctypes.c_uint32 * 3),
        ("needs_sync", ctypes.c_uint32),
        ("num_threads", ctypes.c_int32),
        ("dynamic_smem_bytes", ctypes.c_uint64),
        ("stack_key", ctypes.c_int64),
    ]


class _LaunchStats(ctypes.Structure):
    _fields_ = [
        ("bytes_loaded", ctypes.c_uint64),
        ("bytes_stored", ctypes.c_uint64),
        ("error_code", ctypes.c_int32),
        ("error", ctypes.c_char * 500),
    ]


@dataclasses.dataclass(frozen=True)
class LaunchStats:
    """Global-memory traffic of one launch, counted by fuser_ld*/fuser_st* (atomics excluded)."""

    bytes_loaded: int
    bytes_stored: int


@functools.lru_cache(maxsize=None)
def _fiber_stack_key() -> int:
    """A pthread key under which every module finds the calling OS thread's fiber stacks.

    Modules are separate shared libraries; sharing one stack region per OS thread among them keeps
    memory bounded however many modules a process loads. The region is one aligned_alloc block,
    so `free` is its destructor. -1 (each module keeps its own stacks) if the key cannot be made.
    """
    try:
        libc = ctypes.CDLL(None)
        key = ctypes.c_uint(0)
        if libc.pthread_key_create(ctypes.byref(key), ctypes.cast(libc.free, ctypes.c_void_p)) == 0:
            return key.value
    except (OSError, AttributeError):
        pass
    return -1


# ------------------------------------------------------------------------------------------------
# Kernel signatures: 3 characters per parameter, see fuser_cpu_emu.h.
# ------------------------------------------------------------------------------------------------

_KIND_NAMES = {"f": "float", "i": "int", "u": "uint", "?": "bool", "h": "float16", "b": "bfloat16",
               "v": "void", "x": "struct"}
_BF16 = np.dtype(ml_dtypes.bfloat16)


@dataclasses.dataclass(frozen=True)
class _Param:
    pointer: bool
    const: bool
    kind: str  # f i u ? h b v x
    size: int  # bytes of the value or of the pointee; 0 unknown

    def describe(self) -> str:
        base = _KIND_NAMES[self.kind] + (str(8 * self.size) if self.kind in "fiu" else "")
        return f"{'const ' if self.const else ''}{base}*" if self.pointer else base

    def dtype(self) -> np.dtype | None:
        if self.kind == "h":
            return np.dtype(np.float16)
        if self.kind == "b":
            return _BF16
        if self.kind == "?":
            return np.dtype(np.bool_)
        if self.kind in "fiu" and self.size in (1, 2, 4, 8):
            return np.dtype(f"{self.kind}{self.size}")
        return None


def _parse_signature(text: str) -> list[_Param]:
    params = []
    for i in range(0, len(text), 3):
        ref, kind, size = text[i:i + 3]
        params.append(_Param(ref != "-", ref == "P", kind, int(size) if size.isdigit() else 0))
    return params


def _dtype_kind(dtype: np.dtype) -> tuple[str, int]:
    if dtype == _BF16:
        return "b", 2
    if dtype == np.float16:
        return "h", 2
    if dtype.kind == "b":
        return "?", 1
    return dtype.kind, dtype.itemsize


def _pointee_matches(param: _Param, dtype: np.dtype) -> bool:
    if param.kind in "vx":
        return True
    kind, size = _dtype_kind(dtype)
    if (kind, size) == (param.kind, param.size):
        return True
    # Same-width integers (and bools as bytes) share a representation.
    return kind in "iu?" and param.kind in "iu?" and size == param.size


# ------------------------------------------------------------------------------------------------
# Compilation and the cache.
# ------------------------------------------------------------------------------------------------

_memo: dict[str, "CpuModule"] = {}
_memo_lock = threading.Lock()
_compile_count = 0


def compile_count() -> int:
    """How many times this process has run the C++ compiler (cache misses)."""
    return _compile_count


def clear_memo() -> None:
    """Forget the modules loaded in this process (the disk cache stays)."""
    with _memo_lock:
        _memo.clear()


def _cache_key(source: str, flags: Sequence[str], identity: str) -> str:
    h = hashlib.sha256()
    for part in (CACHE_FORMAT, identity, "\0".join(flags), EMU_HEADER_PATH.read_text(),
                 PRELUDE_PATH.read_text(), source):
        h.update(part.encode())
        h.update(b"\0\1")  # separator no part contains
    return h.hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _compile(source: str, flags: Sequence[str], target: Path) -> None:
    """Compiles `source` into the shared library `target` (atomically), or raises CompileError."""
    global _compile_count
    target.parent.mkdir(parents=True, exist_ok=True)
    # The temporary directory sits next to the target so that the final rename is atomic.
    with tempfile.TemporaryDirectory(prefix="build-", dir=target.parent) as tmp:
        src = Path(tmp) / SOURCE_NAME
        out = Path(tmp) / "module.so"
        src.write_text(source)
        cmd = [_cxx(), *flags, "-I", str(RUNTIME_DIR), "-o", str(out), str(src)]
        _compile_count += 1
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        except OSError as e:
            raise CompileError(f"cannot run the C++ compiler {cmd[0]!r}: {e}", log=str(e), source=source) from e
        if proc.returncode != 0:
            log = (proc.stdout + proc.stderr).replace(str(src), SOURCE_NAME)
            raise CompileError(f"g++ failed to compile the kernel source for the CPU (exit {proc.returncode})",
                               log=log, source=source)
        os.replace(out, target)
    _write_atomic(target.with_suffix(".cpp"), source.encode())  # for debugging cached modules


class _Kernel:
    """A kernel's exported launcher and its parameter list."""

    def __init__(self, name: str, launch, params: list[_Param]):
        self.name = name
        self.launch = launch
        self.params = params


class CpuModule:
    """A compiled kernel source; launch its kernels with numpy arrays and scalars."""

    def __init__(self, path: Path, source: str):
        self.path = path
        self.source = source
        self._lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL)
        abi = self._lib.fuser_cpu_abi_version()
        if abi != ABI_VERSION:
            raise FuserError(f"{path} was built for CPU runtime ABI {abi}, this runtime speaks {ABI_VERSION}")
        self._kernels: dict[str, _Kernel] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_source(cls, cuda_source: str, extra_flags: Sequence[str] = ()) -> "CpuModule":
        """Compiles (or finds in the cache) a kernel source that begins with the prelude text."""
        cxx = _cxx()
        identity = _compiler_identity(cxx)
        if identity is None:
            raise FuserError(f"no C++ compiler for the CPU backend: {cxx!r} not found or not runnable "
                             "(install g++ or set FUSER_CXX)")
        flags = (*BASE_FLAGS, *extra_flags)
        key = _cache_key(cuda_source, flags, identity)
        with _memo_lock:
            module = _memo.get(key)
        if module is not None:
            return module
        target = cache_dir() / f"{key}.so"
        if not target.exists():
            _compile(cuda_source, flags, target)
        try:
            module = cls(target, cuda_source)
        except OSError:
            # A cached file this process cannot load (e.g. built on another system): rebuild it.
            _compile(cuda_source, flags, target)
            module = cls(target, cuda_source)
        with _memo_lock:
            return _memo.setdefault(key, module)

    def kernel_names(self) -> list[str]:
        """Kernels declared with FUSER_HOST_LAUNCHER in the source."""
        return re.findall(r"^\s*FUSER_HOST_LAUNCHER\(\s*(\w+)\s*\)", self.source, re.M)

    def _kernel(self, name: str) -> _Kernel:
        with self._lock:
            kernel = self._kernels.get(name)
            if kernel is not None:
                return kernel
            try:
                launch = getattr(self._lib, f"{name}__launch")
                signature = getattr(self._lib, f"{name}__signature")
            except AttributeError:
                known = ", ".join(self.kernel_names()) or "none"
                raise FuserError(f"no kernel {name!r} in this module (kernels with FUSER_HOST_LAUNCHER: "
                                 f"{known})") from None
            launch.restype = ctypes.c_int
            launch.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.POINTER(ctypes.c_void_p),
                               ctypes.POINTER(_LaunchStats)]
            signature.restype = ctypes.c_char_p
            signature.argtypes = []
            kernel = _Kernel(name, launch, _parse_signature(signature().decode()))
            self._kernels[name] = kernel
            return kernel

    def launch(self, kernel_name: str, grid, block, args: Sequence, needs_sync: bool = True,
               num_threads: int | None = None, dynamic_smem_bytes: int = 0) -> LaunchStats:
        """Runs `kernel_name` over `grid` x `block` (ints or up to 3-tuples).

        args: numpy arrays for pointer parameters (passed by address, written in place) and numpy
        scalars (np.float32(1.0), np.int64(5), ...) whose dtype is the parameter's C type; plain
        Python numbers are converted to the parameter's type. needs_sync=False runs each block as a
        plain loop over its threads: only for kernels without barriers or warp operations.
        num_threads: OS threads (default $FUSER_CPU_THREADS, else one per core).
        """
        kernel = self._kernel(kernel_name)
        pointers, keep_alive = _marshal_args(kernel, args)
        cfg = _LaunchConfig()
        cfg.grid[:] = _dims(grid, "grid")
        cfg.block[:] = _dims(block, "block")
        cfg.needs_sync = 1 if needs_sync else 0
        cfg.num_threads = num_threads if num_threads is not None else int(os.environ.get("FUSER_CPU_THREADS", "0"))
        cfg.dynamic_smem_bytes = dynamic_smem_bytes
        cfg.stack_key = _fiber_stack_key()
        stats = _LaunchStats()
        argv = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        code = kernel.launch(ctypes.byref(cfg), argv, ctypes.byref(stats))
        del keep_alive
        if code != 0:
            raise LaunchError(stats.error.decode(errors="replace") or f"launch failed with code {code}",
                              kernel=kernel_name, code=code)
        return LaunchStats(stats.bytes_loaded, stats.bytes_stored)


def _dims(value, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) and 0 <= d < 2**32 for d in dims):
        raise LaunchError(f"{what} must be 1 to 3 non-negative integers, got {value!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


def _marshal_args(kernel: _Kernel, args: Sequence) -> tuple[list[int], list]:
    """Addresses of the argument values in kernel-parameter order, and the objects owning them."""
    params = kernel.params
    if len(args) != len(params):
        raise LaunchError(f"kernel {kernel.name!r} takes {len(params)} arguments "
                          f"({', '.join(p.describe() for p in params)}), got {len(args)}", kernel=kernel.name)
    pointers, keep_alive = [], []
    for i, (arg, param) in enumerate(zip(args, params)):
        where = f"kernel {kernel.name!r} argument {i} ({param.describe()})"
        if param.pointer:
            holder = ctypes.c_void_p(_array_address(arg, param, where))
        else:
            holder = _scalar_value(arg, param, where)
        keep_alive.append(holder)
        pointers.append(ctypes.addressof(holder) if isinstance(holder, ctypes.c_void_p) else holder.ctypes.data)
    return pointers, keep_alive


def _array_address(arg, param: _Param, where: str) -> int:
    if not isinstance(arg, np.ndarray):
        raise LaunchError(f"{where}: expected a numpy array, got {type(arg).__name__}")
    if not arg.flags.c_contiguous:
        raise LaunchError(f"{where}: the array must be C-contiguous (use np.ascontiguousarray)")
    if not param.const and not arg.flags.writeable:
        raise LaunchError(f"{where}: the kernel may write this array but it is read-only")
    if not _pointee_matches(param, arg.dtype):
        raise LaunchError(f"{where}: array dtype {arg.dtype} does not match")
    return arg.ctypes.data


def _scalar_value(arg, param: _Param, where: str) -> np.ndarray:
    dtype = param.dtype()
    if dtype is None:
        raise LaunchError(f"{where}: parameters of this type cannot be passed from Python")
    if isinstance(arg, np.generic):
        if _dtype_kind(arg.dtype) != (param.kind, param.size):
            raise LaunchError(f"{where}: got a numpy {arg.dtype} scalar; pass np.{dtype.name}(...)")
        return np.array(arg, dtype=dtype)
    if isinstance(arg, (bool, int, float)):
        if isinstance(arg, float) and param.kind in "iu?":
            raise LaunchError(f"{where}: got a float for an integer parameter")
        try:
            return np.array(arg, dtype=dtype)
        except OverflowError as e:
            raise LaunchError(f"{where}: {arg!r} does not fit: {e}") from None
    raise LaunchError(f"{where}: expected a numpy scalar, got {type(arg).__name__}")
