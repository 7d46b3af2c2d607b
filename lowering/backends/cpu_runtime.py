"""Run generated CUDA C on the CPU.

The source (which starts with the text of runtime/fuser_prelude.cuh) is compiled by g++ with
-DFUSER_CPU into a shared library; runtime/fuser_cpu_emu.h emulates the CUDA subset the prelude
documents, and the module links against the host runtime built once per installation
(runtime/prebuilt.py), so g++ compiles only the kernels. Every kernel followed by FUSER_HOST_LAUNCHER(k) exports `k__launch` (cuLaunchKernel-like:
args[i] points at the i-th argument) and `k__signature` (parameter types, used to check arguments).

`CpuCompiler` turns a source into shared-library bytes, cached by lowering.backends.disk_cache under
$FUSER_CACHE_DIR/cpu, keyed by the sha256 of the source, the flags, the compiler, the runtime
headers and the host runtime's key. `CpuModule(binary)` loads those bytes (the cpu backend loads each source once).

Memcheck (FUSER_MEMCHECK=1): the module is compiled with -DFUSER_MEMCHECK (a flag, so a separate
cache entry) and every launch passes each pointer argument's byte range; an access outside the
parameter it goes through raises MemcheckError. Modules built without it run unchanged.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import os
import platform
import shutil
import struct
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Callable, Sequence

import ml_dtypes
import numpy as np

from fuser.lowering import settings
from fuser.lowering.backends import prebuilt, racecheck, temp_files
from fuser.lowering.backends.cxx import run_compiler
from fuser.lowering.addresses import numpy_address, span_bytes
from fuser.lowering.backends.disk_cache import Binary, CachedCompiler, DiskCache, digest
from fuser.lowering.backends.static_shared import static_shared_bytes
from fuser.lowering.device import DEFAULT as DEFAULT_DEVICE
from fuser.lowering.device import check_parameter_bytes, parameter_bytes, shared_memory_optin
from fuser.lowering.errors import FuserError, LaunchError, MemcheckError, RaceError
from fuser.lowering.runtime import EMU_HEADER_PATH, PRELUDE_PATH, RACECHECK_HEADER_PATH, RUNTIME_DIR

ABI_VERSION = 7  # FUSER_CPU_ABI_VERSION in fuser_cpu_abi.h
CACHE_FORMAT = "2"  # bump to invalidate every cached module
BASE_FLAGS = (
    # -O1: 20-30% less g++ time per module than -O2, kernels a few % slower (softmax 4096x1024,
    # the time is mostly the host runtime's, which stays -O2).
    "-O1", "-std=c++20", "-shared", "-fPIC", "-DFUSER_CPU",
    "-fvisibility=hidden",  # only the launchers are exported: smaller, faster-loading modules
    "-fno-math-errno",      # CUDA math never sets errno; lets sqrtf etc. inline
    "-fstack-clash-protection",  # large frames probe page by page: an overflow hits the fiber stack's guard
)
"""A kernel module's flags (the host runtime has its own, prebuilt.RUNTIME_FLAGS), with
`tls_flags` for the compiler."""
TLS_DESCRIPTORS = "-mtls-dialect=gnu2"
MEMCHECK_FLAG = "-DFUSER_MEMCHECK"
RACECHECK_FLAG = "-DFUSER_RACECHECK"
RACE = 10  # fuser_emu::kRace
INTERRUPTED = 11  # fuser_emu::kInterrupted
SOURCE_NAME = "kernel.cpp"
OUT_OF_BOUNDS = 9  # fuser_emu::kOutOfBounds


# ------------------------------------------------------------------------------------------------
# Compiler discovery.
# ------------------------------------------------------------------------------------------------

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


def tls_flags(identity: str | None) -> tuple[str, ...]:
    """(TLS_DESCRIPTORS,) for GCC on x86-64, else (). A module's threadIdx, blockIdx, blockDim,
    gridDim and counters are thread-locals of a dlopen'ed library, read by every emulated thread:
    by default each read of them after a call goes through __tls_get_addr; through TLS descriptors
    the loader resolves them to the static TLS block while its optional part has room (a few
    modules a process: two instructions a read), to its dynamic path after that (as fast as
    __tls_get_addr). An emulated thread of a small kernel: ~30 instructions less (issue 39)."""
    if identity is None or platform.machine() != "x86_64":
        return ()
    return (TLS_DESCRIPTORS,) if _is_gcc(identity.partition("\n")[2]) else ()


def _is_gcc(version: str) -> bool:
    """Whether `version` (a compiler's first `--version` line) is GCC's: "<program> (<package>)
    <version>", e.g. "g++ (Debian 12.2.0-14) 12.2.0"; clang's and others' read differently."""
    program, _, rest = version.partition(" (")
    close = rest.rfind(") ")
    return (bool(program) and " " not in program and close >= 0 and rest[close + 2:close + 3].isdigit()
            and "clang" not in version.lower())


def cpu_compiler_available() -> bool:
    """True when the C++ compiler for the CPU backend ($FUSER_CXX, default g++) can be run."""
    return _compiler_identity(settings.cxx()) is not None


# ------------------------------------------------------------------------------------------------
# ABI mirrors (fuser_launch_config / fuser_launch_stats in fuser_cpu_abi.h).
# ------------------------------------------------------------------------------------------------

class _MemRegion(ctypes.Structure):
    _fields_ = [
        ("base", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("name", ctypes.c_char_p),
    ]


class _LaunchConfig(ctypes.Structure):
    _fields_ = [
        ("grid", ctypes.c_uint32 * 3),
        ("block", ctypes.c_uint32 * 3),
        ("needs_sync", ctypes.c_uint32),
        ("num_threads", ctypes.c_int32),
        ("dynamic_smem_bytes", ctypes.c_uint64),
        ("stack_key", ctypes.c_int64),
        ("regions", ctypes.POINTER(_MemRegion)),
        ("num_regions", ctypes.c_uint32),
        ("interruptible", ctypes.c_uint32),
    ]


class _LaunchStats(ctypes.Structure):
    _fields_ = [
        ("bytes_loaded", ctypes.c_uint64),
        ("bytes_stored", ctypes.c_uint64),
        ("error_code", ctypes.c_int32),
        ("error", ctypes.c_char * 500),
        ("bad_region", ctypes.c_int32),
        ("bad_index", ctypes.c_int64),
        ("bad_extent", ctypes.c_uint64),
    ]


@dataclasses.dataclass(frozen=True)
class LaunchStats:
    """Global-memory traffic of one launch, counted by fuser_ld*/fuser_st* (atomics excluded)."""

    bytes_loaded: int
    bytes_stored: int


_stack_key_lock = threading.Lock()
_stack_key: int | None = None


def _fiber_stack_key() -> int:
    """A pthread key under which every module finds the calling OS thread's fiber stacks.

    Modules are separate shared libraries; sharing one stack region per OS thread among them keeps
    memory bounded however many modules a process loads. Exactly one key per process (hence the
    lock: the modules' SIGSEGV handlers find the stack guards through it). No destructor: the
    region is an mmap with guard pages that a host runtime unmaps at thread exit (fuser_cpu_runtime.cpp,
    SharedStacks). -1 (each module makes a key of its own) if the key cannot be made.
    """
    global _stack_key
    with _stack_key_lock:
        if _stack_key is None:
            _stack_key = _create_pthread_key()
        return _stack_key


def _create_pthread_key() -> int:
    try:
        libc = ctypes.CDLL(None)
        key = ctypes.c_uint(0)
        if libc.pthread_key_create(ctypes.byref(key), None) == 0:
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
# Compilation (source -> shared-library bytes) and loading.
# ------------------------------------------------------------------------------------------------

_compile_count = 0


def compile_count() -> int:
    """How many times this process has run the C++ compiler (cache misses)."""
    return _compile_count


class CpuCompiler(CachedCompiler):
    """g++ (or $FUSER_CXX) with `flags`: a kernel source that begins with the prelude → the bytes
    of a shared library exporting its FUSER_HOST_LAUNCHERs."""

    cache = DiskCache("cpu", ".so")

    def __init__(self, extra_flags: Sequence[str] = (), memcheck: bool | None = None, racecheck: bool | None = None):
        """memcheck / racecheck: build checked modules; None follows FUSER_MEMCHECK / FUSER_RACECHECK."""
        if memcheck is None:
            memcheck = settings.memcheck()
        if racecheck is None:
            racecheck = settings.racecheck()
        self.racecheck = racecheck
        self.flags = (*BASE_FLAGS, *tls_flags(_compiler_identity(settings.cxx())), *extra_flags,
                      *((MEMCHECK_FLAG,) if memcheck else ()), *((RACECHECK_FLAG,) if racecheck else ()))
        self.runtime_flags = (*prebuilt.RUNTIME_FLAGS, *extra_flags)
        """The host runtime's: a memcheck module uses the same runtime as an unchecked one."""

    def _identity(self) -> tuple[str, str]:
        cxx = settings.cxx()
        identity = _compiler_identity(cxx)
        if identity is None:
            raise FuserError(f"no C++ compiler for the CPU backend: FUSER_CXX={cxx!r} not found or not runnable "
                             "(install g++ or set FUSER_CXX to a C++20 compiler)")
        return cxx, identity

    def key(self, source: str) -> str:
        _, identity = self._identity()
        return digest(CACHE_FORMAT, identity, "\0".join(self.flags), EMU_HEADER_PATH.read_text(),
                      RACECHECK_HEADER_PATH.read_text(), PRELUDE_PATH.read_text(),
                      prebuilt.runtime_key(identity, self.runtime_flags), source)

    def build(self, source: str) -> Binary:
        global _compile_count
        cxx, identity = self._identity()
        runtime = prebuilt.host_runtime(cxx, identity, self.runtime_flags)
        pch = prebuilt.precompiled_header(cxx, identity, self.flags)
        with temp_files.scratch("cxx") as tmp:
            src = Path(tmp) / SOURCE_NAME
            out = Path(tmp) / "module.so"
            # Errors quote the source as the caller wrote it; g++ reads the tracked rewrite.
            src.write_text(racecheck.tracked_shared_arrays(source) if self.racecheck else source)
            include = (["-I", str(pch)] if pch is not None else []) + ["-I", str(RUNTIME_DIR)]
            cmd = [cxx, *self.flags, *include, "-o", str(out), str(src), str(runtime)]
            _compile_count += 1
            log = run_compiler(cxx, identity, cmd, out, "the kernel source for the CPU", source,
                               log_of=lambda text: text.replace(str(src), SOURCE_NAME))
            return Binary(out.read_bytes(), log)


def _load_library(data: bytes) -> ctypes.CDLL:
    """dlopen `data` from a private copy, unlinked once loaded: what runs is exactly the bytes the
    cache verified, and nothing done to a cache file later can reach the mapped library (SIGBUS).
    The copy goes to the temporary folder ($TMPDIR, which must allow executables)."""
    fd, path = tempfile.mkstemp(prefix="fuser-kernel-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return ctypes.CDLL(path, mode=os.RTLD_LOCAL)
    finally:
        os.unlink(path)


class _Kernel:
    """A kernel's exported launcher, its parameter list and their names in the source, and what
    a GPU would check of it at launch: its parameter bytes and its static shared memory."""

    def __init__(self, name: str, launch, params: list[_Param], param_names: list[str], static_shared: int):
        self.name = name
        self.launch = launch
        self.params = params
        self.param_names = param_names
        self.parameter_bytes = parameter_bytes([8 if p.pointer else (p.size or 16) for p in params])
        self.static_shared = static_shared

    def check_limits(self, device, dynamic_shared: int) -> None:
        """Raises LaunchLimitError where the GPU `device` would refuse this launch: too many
        parameter bytes, too much static shared memory, or static + dynamic shared memory over
        what a block may opt in to (the cuda backend opts a kernel in beyond 48 KiB, as here)."""
        check_parameter_bytes(device, self.name, self.parameter_bytes)
        shared_memory_optin(device, self.name, self.static_shared, dynamic_shared)


class CpuModule:
    """A compiled kernel source loaded into this process; launch its kernels with numpy arrays and
    scalars. `binary` is the shared library CpuCompiler built; raises OSError when it cannot load."""

    def __init__(self, binary: bytes, source: str, device=None):
        """device: the GPU (DeviceSpec) whose launch limits apply (default: the cpu backend's, an H100)."""
        self.source = source
        self.device = device if device is not None else DEFAULT_DEVICE
        prebuilt.load_runtime_of(binary)  # before dlopen: the module's DT_NEEDED names it
        self._lib = _load_library(binary)
        try:
            abi = self._lib.fuser_cpu_abi_version()
        except AttributeError:
            raise FuserError("this shared library is no fuser CPU module (no fuser_cpu_abi_version)") from None
        if abi != ABI_VERSION:
            raise FuserError(f"module built for CPU runtime ABI {abi}, this runtime speaks {ABI_VERSION}")
        self.memcheck = bool(self._lib.fuser_cpu_memcheck())
        """Built with -DFUSER_MEMCHECK: launches pass their pointer arguments' extents."""
        self.racecheck = bool(self._lib.fuser_cpu_racecheck())
        """Built with -DFUSER_RACECHECK: launches pass the extents too (to name arrays in reports)."""
        self._kernels: dict[str, _Kernel] = {}
        self._lock = threading.Lock()

    def kernel_names(self) -> list[str]:
        """Kernels declared with FUSER_HOST_LAUNCHER in the source (for error messages)."""
        marker = "FUSER_HOST_LAUNCHER("
        lines = (line.strip() for line in self.source.splitlines())
        return [line[len(marker):line.index(")")].strip() for line in lines if line.startswith(marker) and ")" in line]

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
            params = _parse_signature(signature().decode())
            kernel = _Kernel(name, launch, params, _param_names(self.source, name, len(params)),
                             static_shared_bytes(self.source, name))
            self._kernels[name] = kernel
            return kernel

    def pack_args(self, kernel_name: str, args: Sequence) -> tuple[list[int], list]:
        """What `launch` does to `args` before running: checks them against the kernel's signature
        and returns (the address of each argument value, the objects owning those values)."""
        return _marshal_args(self._kernel(kernel_name), args)

    def launch(self, kernel_name: str, grid, block, args: Sequence, *, needs_sync: bool = True,
               shared_bytes: int = 0, num_threads: int | None = None, stream: None = None) -> LaunchStats:
        """Runs `kernel_name` over `grid` x `block` (ints or up to 3-tuples) and returns the global
        bytes it loaded and stored.

        args: numpy arrays for pointer parameters (passed by address, written in place) and numpy
        scalars (np.float32(1.0), np.int64(5), ...) whose dtype is the parameter's C type; plain
        Python numbers are converted to the parameter's type. needs_sync=False runs each block as a
        plain loop over its threads: only for kernels without barriers or warp operations.
        shared_bytes: dynamic shared memory per block. num_threads: OS threads (default
        $FUSER_CPU_THREADS, else one per core). stream: accepted for the GPU's signature; a launch
        here has finished when the call returns.
        """
        kernel = self._kernel(kernel_name)
        pointers, keep_alive = _marshal_args(kernel, args)
        kernel.check_limits(self.device, shared_bytes)
        cfg = _LaunchConfig()
        cfg.grid[:] = _dims(grid, "grid")
        cfg.block[:] = _dims(block, "block")
        cfg.needs_sync = 1 if needs_sync else 0
        cfg.num_threads = num_threads if num_threads is not None else settings.launch_settings().cpu_threads
        cfg.dynamic_smem_bytes = shared_bytes
        cfg.stack_key = _fiber_stack_key()
        cfg.interruptible = _handles_sigint()
        regions = _regions(kernel, args) if self.memcheck or self.racecheck else []
        if regions:
            cfg.regions = (_MemRegion * len(regions))(*regions)
            cfg.num_regions = len(regions)
        stats = _LaunchStats()
        argv = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        code = kernel.launch(ctypes.byref(cfg), argv, ctypes.byref(stats))
        del keep_alive
        if code == OUT_OF_BOUNDS:
            raise _memcheck_error(kernel, [r.name for r in regions], stats.error, stats.bad_region, stats.bad_index,
                                  stats.bad_extent)
        if code != 0:
            raise _launch_error(code, stats.error, kernel_name)
        return LaunchStats(stats.bytes_loaded, stats.bytes_stored)

    def bind(self, kernel_name: str, grid, block, args: Sequence, *, needs_sync: bool = True,
             shared_bytes: int = 0, num_threads: int | None = None) -> "BoundLaunch":
        """A launch of `kernel_name` with everything but the data pointers fixed (a launch plan's
        hot path): `args` as for `launch`, except that each pointer argument is a `PointerSlot`
        (its byte size, for memcheck). Checks the fixed arguments once, here."""
        return BoundLaunch(self, self._kernel(kernel_name), grid, block, args, needs_sync, shared_bytes,
                           num_threads)


@dataclasses.dataclass(frozen=True)
class PointerSlot:
    """A pointer argument of a `BoundLaunch`, filled per call; `nbytes` of the buffer it points to."""

    nbytes: int


class _BoundState:
    """One thread's launch buffers of a BoundLaunch: argument values (8-byte slots), the argv
    pointing at them, the config and the stats the launcher writes."""

    __slots__ = ("values", "argv", "cfg", "stats", "regions", "call_args", "store")


class BoundLaunch:
    """A prebuilt launch: per call only the data pointers are written (`__call__`). Thread-safe:
    the native launcher keeps nothing between calls; on the Python path each thread gets its own
    argument buffers on first use (no lock on later calls).

    `native(*pointers)`: the launch in one C call (fuser's native launcher,
    lowering/backends/gpu_launcher.py: `host_launch` with this launch's record, memcheck's and
    racecheck's regions included), or None where launches take the Python path (`_call`, the raw
    C launcher, through ctypes): a launcher that cannot be built, FUSER_DISABLE=native_launcher,
    more than MAX_HOST_ARGS arguments. Both return (bytes loaded, bytes stored) and raise the
    same errors (`_failed`).

    `instances` (weak) lets the benchmark harness swap every bound kernel for an empty one
    (benchmarks/measure.py, EmptyLaunches): it clears `native` and replaces `_call`."""

    instances: "weakref.WeakSet[BoundLaunch]" = weakref.WeakSet()

    def __init__(self, module: "CpuModule", kernel: _Kernel, grid, block, args: Sequence, needs_sync: bool,
                 shared_bytes: int, num_threads: int | None):
        params = kernel.params
        if len(args) != len(params):
            raise LaunchError(f"kernel {kernel.name!r} takes {len(params)} arguments, got {len(args)}",
                              kernel=kernel.name)
        kernel.check_limits(module.device, shared_bytes)
        self.module = module
        self.kernel = kernel
        self.grid = _dims(grid, "grid")
        self.block = _dims(block, "block")
        self.needs_sync = needs_sync
        self.shared_bytes = shared_bytes
        self.num_threads = num_threads if num_threads is not None else settings.launch_settings().cpu_threads
        self.pointer_slots: tuple[int, ...] = tuple(i for i, a in enumerate(args) if isinstance(a, PointerSlot))
        for i, param in enumerate(params):
            if param.pointer != (i in self.pointer_slots):
                raise LaunchError(f"{_where(kernel, i)}: pointer parameters, and only they, take a PointerSlot",
                                  kernel=kernel.name)
        # Constants as bytes (little-endian, low bytes of an 8-byte slot: what `*(T*)args[i]` reads).
        self.constants: dict[int, bytes] = {i: _scalar_value(a, params[i], kernel, i).tobytes()
                                            for i, a in enumerate(args) if not isinstance(a, PointerSlot)}
        self.regions = ([(args[i].nbytes, kernel.param_names[i].encode()) for i in self.pointer_slots]
                        if module.memcheck or module.racecheck else [])
        self.pointer_bytes = sum(args[i].nbytes for i in self.pointer_slots)
        """The bytes the pointer arguments span (their PointerSlots')."""
        launcher = ctypes.cast(kernel.launch, ctypes.c_void_p).value
        self._call = _RAW_LAUNCHER(launcher)
        self._local = threading.local()
        self.native = self._native(launcher)
        BoundLaunch.instances.add(self)

    def _native(self, launcher: int) -> Callable[..., tuple[int, int]] | None:
        """`host_launch` bound to this launch's record, or None (the Python path: see the class doc)."""
        if len(self.kernel.params) > MAX_HOST_ARGS:
            return None
        from fuser.lowering.backends import gpu_launcher

        host_launch = gpu_launcher.native_host_launch()
        if host_launch is None:
            return None
        small = self.grid == (1, 1, 1) and self.pointer_bytes <= SMALL_LAUNCH_BYTES
        record = host_record(launcher, self._config(), len(self.kernel.params), self.pointer_slots, self.constants,
                             self.regions, HOLD_GIL if small else 0)
        return functools.partial(host_launch, record, self._failed)

    def _failed(self, code: int, message: bytes, region: int, index: int, extent: int) -> None:
        """Raises the error of a launch that returned `code` (either path), from its stats' fields:
        a MemcheckError naming the parameter for an access out of bounds, else LaunchError or
        RaceError."""
        if code == OUT_OF_BOUNDS:
            raise _memcheck_error(self.kernel, [name for _, name in self.regions], message, region, index, extent)
        raise _launch_error(code, message, self.kernel.name)

    def _config(self, interruptible: int = 0) -> _LaunchConfig:
        cfg = _LaunchConfig()
        cfg.grid[:] = self.grid
        cfg.block[:] = self.block
        cfg.needs_sync = 1 if self.needs_sync else 0
        cfg.num_threads = self.num_threads
        cfg.dynamic_smem_bytes = self.shared_bytes
        cfg.stack_key = _fiber_stack_key()
        cfg.interruptible = interruptible
        return cfg

    def _state(self) -> _BoundState:
        n = max(1, len(self.kernel.params))
        st = _BoundState()
        st.values = (ctypes.c_uint64 * n)()
        base = ctypes.addressof(st.values)
        for i, raw in self.constants.items():
            ctypes.memmove(base + 8 * i, raw, len(raw))
        st.argv = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
        st.cfg = cfg = self._config(_handles_sigint())
        st.regions = None
        if self.regions:
            st.regions = (_MemRegion * len(self.regions))(*[_MemRegion(0, nbytes, name) for nbytes, name in self.regions])
            cfg.regions = st.regions
            cfg.num_regions = len(self.regions)
        st.stats = _LaunchStats()
        st.call_args = (ctypes.addressof(cfg), ctypes.addressof(st.argv), ctypes.addressof(st.stats))
        st.store = _pointer_store(self.pointer_slots, st.values, st.regions)
        self._local.state = st
        return st

    def __call__(self, pointers: Sequence[int], stream: None = None) -> tuple[int, int]:
        """Runs the kernel on these data addresses (one per PointerSlot, in order); returns
        (bytes loaded, bytes stored). Raises MemcheckError / LaunchError as `launch` does."""
        native = self.native
        if native is not None:
            return native(*pointers)
        return self._python_path(pointers)

    def _python_path(self, pointers: Sequence[int]) -> tuple[int, int]:
        """The launch through ctypes, with this thread's argument buffers."""
        st = getattr(self._local, "state", None) or self._state()
        st.store(pointers)
        code = self._call(*st.call_args)
        stats = st.stats
        if code:
            self._failed(code, stats.error, stats.bad_region, stats.bad_index, stats.bad_extent)
        return stats.bytes_loaded, stats.bytes_stored


def _pointer_store(slots: Sequence[int], values, regions) -> Callable[[Sequence[int]], None]:
    """A function writing a launch's data addresses into its argument slots (and, under memcheck
    or racecheck, its regions' bases): straight-line code made once per thread's state, a quarter
    of a microsecond less a launch than a loop over the slots (issue 39)."""
    lines = [f"    values[{slot}] = pointers[{k}]" for k, slot in enumerate(slots)]
    if regions is not None:
        lines += [f"    regions[{k}].base = pointers[{k}]" for k in range(len(slots))]
    namespace = {"values": values, "regions": regions}
    exec("def store(pointers):\n" + ("\n".join(lines) or "    pass") + "\n", namespace)  # noqa: S102
    return namespace["store"]


def _handles_sigint() -> int:
    """1 on Python's main thread, which receives KeyboardInterrupt: its launches stop between
    blocks at a Ctrl-C (the runtime's SigintWatch) instead of running to the end."""
    return 1 if threading.current_thread() is threading.main_thread() else 0


def _launch_error(code: int, message: bytes, kernel_name: str) -> FuserError:
    """The error of a failed launch. The runtime has handed the SIGINT that interrupted one back
    to Python's handler as the launch ended (KeyboardInterrupt as the call returns, or what the
    program installed; the same for a SIGINT that came after every block had started); if that
    handler returns, the launch still failed: its outputs are incomplete and are not returned."""
    text = message.decode(errors="replace") or f"launch failed with code {code}"
    error = RaceError if code == RACE else LaunchError
    return error(text, kernel=kernel_name, code=code)


MAX_HOST_ARGS = 512
"""Kernel arguments the native launcher takes (its stack buffers); more take the Python path."""
HOST_RECORD_HEADER = struct.Struct(f"<2Q{ctypes.sizeof(_LaunchConfig)}s4I")
"""The native launcher's host record header (runtime/fuser_gpu_launcher.cpp, HostRecordHeader):
k__launch, Python's main thread, the launch config, argument count, pointer slots, version, flags."""
HOLD_GIL = 1
"""A host record's flag (kHoldGil): the launch runs with the GIL held."""
HOST_REGIONS = 2
"""A host record's flag (kRegions): it holds each pointer's region (memcheck and racecheck modules)."""
SMALL_LAUNCH_BYTES = 16 * 1024
"""A launch of one block whose pointer arguments span at most this many bytes runs with the GIL
held (microseconds of emulation: releasing and taking back the GIL costs ~750 instructions, a
quarter of such a launch); any other releases it while the kernel runs."""


def host_record(launcher: int, config: _LaunchConfig, arg_count: int, slots: Sequence[int],
                constants: dict[int, bytes], regions: Sequence[tuple[int, bytes]] = (), flags: int = 0) -> bytes:
    """The native launcher's record of one bound launch: the header, the pointer slots (padded to
    8 bytes), each argument's 8-byte value slot with the constants in place, and where `regions`
    are given ((bytes, parameter name) of each pointer slot's region: memcheck and racecheck
    modules) their extents, the offsets of their names and the names."""
    from fuser.lowering.backends.gpu_launcher import RECORD_VERSION

    values = bytearray(8 * arg_count)
    for i, raw in constants.items():
        values[8 * i:8 * i + len(raw)] = raw
    table = struct.pack(f"<{len(slots)}I", *slots)
    table += bytes(-len(table) % 8)
    if regions:
        flags |= HOST_REGIONS
    header = HOST_RECORD_HEADER.pack(launcher, threading.main_thread().ident, bytes(config), arg_count, len(slots),
                                     RECORD_VERSION, flags)
    record = header + table + bytes(values)
    if not regions:
        return record
    names_at = len(record) + 16 * len(regions)
    offsets, names = [], b""
    for _, name in regions:
        offsets.append(names_at + len(names))
        names += name + b"\0"
    return record + struct.pack(f"<{2 * len(regions)}Q", *(nbytes for nbytes, _ in regions), *offsets) + names


_RAW_LAUNCHER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
"""`k__launch(cfg, args, stats)` called with plain addresses: no per-call argument conversion."""


# ------------------------------------------------------------------------------------------------
# Memcheck: the extent of every pointer argument, and the error naming the one violated.
# ------------------------------------------------------------------------------------------------

def _param_names(source: str, kernel: str, count: int) -> list[str]:
    """The kernel's parameter names as written in `source`, for memcheck reports only (like
    kernel_names, plain text search: no lowering decision depends on it); `arg<i>` where the
    definition cannot be read (a macro-generated kernel, array or function parameters)."""
    fallback = [f"arg{i}" for i in range(count)]
    _, found, rest = source.rpartition(f" {kernel}(")  # the definition: after the prelude (which may spell it)
    if not found or ")" not in rest:
        return fallback
    params = [p for p in rest[:rest.index(")")].split(",") if p.strip()]
    names = [p.replace("*", " ").replace("&", " ").split()[-1] for p in params]
    return names if len(names) == count and all(n.isidentifier() for n in names) else fallback


def _regions(kernel: _Kernel, args: Sequence) -> list[_MemRegion]:
    """One region per pointer argument: the bytes its array reaches from the address passed (its
    strides are non-negative: [data, data + span), which is nbytes for a dense array)."""
    return [_MemRegion(numpy_address(arg), span_bytes(arg.shape, arg.strides, arg.itemsize), name.encode())
            for arg, param, name in zip(args, kernel.params, kernel.param_names) if param.pointer]


def _memcheck_error(kernel: _Kernel, names: Sequence[bytes], message: bytes, region: int, index: int,
                    extent: int) -> MemcheckError:
    """The MemcheckError of an access outside region `region` (an index into `names`, the regions'
    parameter names; -1: none contains the pointer), from the launch's stats."""
    param = names[region].decode() if 0 <= region < len(names) else None
    return MemcheckError(message.decode(errors="replace"), kernel=kernel.name, code=OUT_OF_BOUNDS,
                         param=param, index=index, extent=extent if param else None)


def _dims(value, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) and 0 <= d < 2**32 for d in dims):
        raise LaunchError(f"{what} must be 1 to 3 non-negative integers, got {value!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


def _where(kernel: _Kernel, i: int) -> str:
    """Names an argument in an error message (built only when one is raised)."""
    return f"kernel {kernel.name!r} argument {i} ({kernel.params[i].describe()})"


def _marshal_args(kernel: _Kernel, args: Sequence) -> tuple[list[int], list]:
    """Addresses of the argument values in kernel-parameter order, and the objects owning them."""
    params = kernel.params
    if len(args) != len(params):
        raise LaunchError(f"kernel {kernel.name!r} takes {len(params)} arguments "
                          f"({', '.join(p.describe() for p in params)}), got {len(args)}", kernel=kernel.name)
    pointers, keep_alive = [], []
    for i, (arg, param) in enumerate(zip(args, params)):
        if param.pointer:
            holder = ctypes.c_void_p(_array_address(arg, param, kernel, i))
            pointers.append(ctypes.addressof(holder))
        else:
            holder = _scalar_value(arg, param, kernel, i)
            pointers.append(numpy_address(holder))
        keep_alive.append(holder)
    return pointers, keep_alive


def _array_address(arg, param: _Param, kernel: _Kernel, i: int) -> int:
    if type(arg) is not np.ndarray and not isinstance(arg, np.ndarray):
        raise LaunchError(f"{_where(kernel, i)}: expected a numpy array, got {type(arg).__name__}")
    flags = arg.flags
    if not flags.c_contiguous and min(arg.strides, default=0) < 0:
        raise LaunchError(f"{_where(kernel, i)}: the array has a negative stride (a reversed view): "
                          "pass np.ascontiguousarray of it")
    if not param.const and not flags.writeable:
        raise LaunchError(f"{_where(kernel, i)}: the kernel may write this array but it is read-only")
    if not _pointee_matches(param, arg.dtype):
        raise LaunchError(f"{_where(kernel, i)}: array dtype {arg.dtype} does not match")
    return numpy_address(arg)


def _scalar_value(arg, param: _Param, kernel: _Kernel, i: int) -> np.ndarray:
    dtype = param.dtype()
    if dtype is None:
        raise LaunchError(f"{_where(kernel, i)}: parameters of this type cannot be passed from Python")
    if isinstance(arg, np.generic):
        if _dtype_kind(arg.dtype) != (param.kind, param.size):
            raise LaunchError(f"{_where(kernel, i)}: got a numpy {arg.dtype} scalar; pass np.{dtype.name}(...)")
        return np.array(arg, dtype=dtype)
    if isinstance(arg, (bool, int, float)):
        if isinstance(arg, float) and param.kind in "iu?":
            raise LaunchError(f"{_where(kernel, i)}: got a float for an integer parameter")
        try:
            return np.array(arg, dtype=dtype)
        except OverflowError as e:
            raise LaunchError(f"{_where(kernel, i)}: {arg!r} does not fit: {e}") from None
    raise LaunchError(f"{_where(kernel, i)}: expected a numpy scalar, got {type(arg).__name__}")
