"""CUDA C source -> cubin bytes, cached; loading and launching live in `lowering.gpu_runtime`.

Compiling needs no GPU: NVRTC runs in process through `cuda.bindings.nvrtc` (the optional
`fuser[nvrtc]` extra, ~40 ms a kernel), nvcc from a CUDA toolkit is the fallback (~0.3 s a kernel).
We always emit cubin for one real architecture, never PTX: PTX from an NVRTC newer than the driver
(13.5 emits PTX 9.5) cannot be JIT-loaded by an older driver, while a cubin can.

Results are memoised in process and stored by lowering.disk_cache under `$FUSER_CACHE_DIR/cubin`
(default `~/.cache/fuser/cubin`) as `<key>.cubin`, a plain cubin that `cuobjdump` can read, with a
verified sidecar; the key is the sha256 of source, arch, options and compiler version.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fuser.lowering import settings
from fuser.lowering.disk_cache import Binary, CachedCompiler, DiskCache, digest
from fuser.lowering.errors import CompileError, FuserError  # CompileError: always built with keywords

DEFAULT_ARCH = "sm_90"
# Both compilers see the source under this name, so their messages read alike ("kernel.cu(3): error").
SOURCE_NAME = "kernel.cu"
_ELF_MAGIC = b"\x7fELF"
_INSTALL_HINT = "install the NVRTC extra (pip install 'fuser[nvrtc]') or a CUDA toolkit with nvcc"


class CompilerUnavailable(FuserError):
    """No CUDA compiler (or not the one asked for) can be used on this machine."""


@dataclass(frozen=True)
class CompiledCuda:
    cubin: bytes
    arch: str  # e.g. "sm_90"
    compiler: str  # e.g. "nvrtc 13.5" or "nvcc 13.0"
    log: str = ""  # the compiler's warnings, if any
    seconds: float = 0.0  # wall time of this call: compiling, or finding it in a cache
    origin: str = "compiled"  # "compiled", "memory" (in-process memo) or "disk"


# --------------------------------------------------------------------------- backends


class _Nvrtc:
    name = "nvrtc"

    def __init__(self) -> None:
        from cuda.bindings import nvrtc  # optional extra: imported only when a compile needs it

        self._nvrtc = nvrtc
        _, major, minor = self._check(nvrtc.nvrtcVersion(), "nvrtcVersion")
        self.version = f"{major}.{minor}"
        self.label = f"nvrtc {self.version}"

    def _check(self, result: tuple, what: str) -> tuple:
        if result[0] != self._nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, msg = self._nvrtc.nvrtcGetErrorString(result[0])
            raise RuntimeError(f"{what} failed: {msg.decode()}")
        return result

    def compile(self, source: str, arch: str, options: tuple[str, ...]) -> tuple[bytes, str]:
        nv = self._nvrtc
        opts = [f"--gpu-architecture={arch}", "-std=c++17"]
        if "#include" in source:  # don't extract or search for headers a kernel does not use
            opts += [f"-I{d}" for d in _nvrtc_include_dirs(nv, self.version, cache_root())]
        opts += options
        _, prog = self._check(nv.nvrtcCreateProgram(source.encode(), SOURCE_NAME.encode(), 0, [], []),
                              "nvrtcCreateProgram")
        try:
            (status,) = nv.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
            # Output buffers are bytearrays: NVRTC writes into them, and the b" " * size of NVIDIA's
            # examples is, for size 1 (an empty log), Python's shared b" " object - which it would
            # overwrite for the whole process.
            _, size = self._check(nv.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            log = bytearray(size)
            self._check(nv.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
            log_text = log.rstrip(b"\0").decode(errors="replace")
            if status != nv.nvrtcResult.NVRTC_SUCCESS:
                _, what = nv.nvrtcGetErrorString(status)
                message = f"NVRTC failed to compile {SOURCE_NAME} for {arch}: {what.decode()}"
                if "could not open source file" in log_text:
                    message += (" (no CUDA headers found for NVRTC: install nvidia-cuda-runtime"
                                " or a CUDA toolkit, or set CUDA_HOME)")
                raise CompileError(message=message, log=log_text, source=source)
            _, size = self._check(nv.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            cubin = bytearray(size)
            self._check(nv.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
            return bytes(cubin), log_text
        finally:
            nv.nvrtcDestroyProgram(prog)


@functools.cache
def _nvrtc_include_dirs(nvrtc, version: str, cache: Path) -> tuple[str, ...]:
    """Where NVRTC finds cuda_fp16.h / cuda_bf16.h: it has no include path of its own.

    NVRTC 13.5+ bundles the toolkit headers matching itself and can extract them (once, 26 MB,
    ~0.1 s; process-safe); older NVRTCs need the nvidia-cuda-runtime wheel's or a toolkit's headers.
    """
    target = cache / "nvrtc-include" / version
    try:
        status, info = nvrtc.nvrtcGetBundledHeadersInfo()[:2]
        if status == nvrtc.nvrtcResult.NVRTC_SUCCESS and info.available:
            (status, *_) = nvrtc.nvrtcInstallBundledHeaders(str(target).encode(), 0)
            if status == nvrtc.nvrtcResult.NVRTC_SUCCESS:
                return (str(target), str(target / "cccl"))
    except Exception:  # older bindings lack the function, or an older libnvrtc lacks the symbol
        pass
    candidates: list[str] = []
    try:
        import nvidia  # namespace package of NVIDIA's wheels (nvidia/cu13/include, nvidia/cuda_runtime/include)

        for root in nvidia.__path__:
            candidates += sorted(glob.glob(os.path.join(root, "*", "include")))
    except ImportError:
        pass
    candidates += [os.path.join(home, "include") for home in settings.cuda_homes()]
    found = [d for d in candidates if os.path.isfile(os.path.join(d, "cuda_fp16.h"))]
    return tuple(found[:1])  # one set of headers: mixing versions breaks them


class _Nvcc:
    name = "nvcc"

    def __init__(self) -> None:
        path = shutil.which("nvcc") or next(
            (p for h in settings.cuda_homes() if os.access(p := os.path.join(h, "bin", "nvcc"), os.X_OK)), None)
        if path is None:
            raise RuntimeError("nvcc not found on PATH, in $CUDA_HOME/bin or in /usr/local/cuda/bin")
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
        match = re.search(r"release (\d+\.\d+)", out)
        if match is None:
            raise RuntimeError(f"{path} --version printed no release number:\n{out}")
        self.path = path
        self.version = match[1]
        self.label = f"nvcc {self.version}"

    def compile(self, source: str, arch: str, options: tuple[str, ...]) -> tuple[bytes, str]:
        with tempfile.TemporaryDirectory(prefix="fuser-nvcc-") as tmp:
            src = os.path.join(tmp, SOURCE_NAME)
            out = os.path.join(tmp, "kernel.cubin")
            Path(src).write_text(source)
            cmd = [self.path, "-cubin", f"-arch={arch}", "-O3", "-std=c++17", *options, "-o", out, src]
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
            log = (proc.stdout + proc.stderr).replace(src, SOURCE_NAME)
            if proc.returncode != 0:
                raise CompileError(
                    message=f"nvcc failed to compile {SOURCE_NAME} for {arch} (exit {proc.returncode})",
                    log=log, source=source)
            return Path(out).read_bytes(), log


_BACKENDS = {"nvrtc": _Nvrtc, "nvcc": _Nvcc}


@functools.cache
def _probe(name: str) -> _Nvrtc | _Nvcc | str:
    """The backend, or why it cannot be used (probed once per process)."""
    try:
        return _BACKENDS[name]()
    except ImportError as e:
        return f"{name}: cuda-bindings/nvidia-cuda-nvrtc not installed ({e})"
    except Exception as e:  # a missing libnvrtc surfaces as various loader errors
        return f"{name}: {e}"


def find_compiler(backend: str | None = None) -> _Nvrtc | _Nvcc:
    """The compiler `compile_cuda` would use: `backend` ("nvrtc"/"nvcc") or the first available."""
    if backend is not None and backend not in _BACKENDS:
        raise ValueError(f"unknown CUDA compiler {backend!r}: expected one of {sorted(_BACKENDS)}")
    reasons = []
    for name in [backend] if backend else list(_BACKENDS):
        found = _probe(name)
        if not isinstance(found, str):
            return found
        reasons.append(found)
    raise CompilerUnavailable(f"no usable CUDA compiler ({'; '.join(reasons)}): {_INSTALL_HINT}")


def available_compilers() -> dict[str, str]:
    """Usable backends in order of preference, e.g. {"nvrtc": "nvrtc 13.5", "nvcc": "nvcc 13.0"}."""
    return {name: found.label for name in _BACKENDS if not isinstance(found := _probe(name), str)}


# --------------------------------------------------------------------------- architecture


def normalize_arch(arch: str | int) -> str:
    """'sm_90', 'sm90', '90', 90 -> 'sm_90' (suffixes 'a'/'f' kept: 'sm_90a')."""
    match = re.fullmatch(r"(?:sm_?)?(\d{2,3})([af]?)", str(arch).strip().lower())
    if match is None:
        raise ValueError(f"bad GPU architecture {arch!r}: expected a real one such as 'sm_90', 'sm_90a'"
                         " or 90 (a cubin needs sm_XX; compute_XX would only give PTX)")
    return f"sm_{match[1]}{match[2]}"


@functools.cache
def default_arch() -> str:
    """The current GPU's architecture when a driver answers (pycuda, else cuda.bindings), else sm_90."""
    for probe in (_pycuda_capability, _cuda_bindings_capability):
        try:
            major, minor = probe()
            return f"sm_{major}{minor}"
        except Exception:  # no pycuda / no driver / no device: try the next way, then give up
            continue
    return DEFAULT_ARCH


def _pycuda_capability() -> tuple[int, int]:
    import pycuda.driver as drv

    drv.init()
    ctx = drv.Context.get_current()
    return (ctx.get_device() if ctx is not None else drv.Device(0)).compute_capability()


def _cuda_bindings_capability() -> tuple[int, int]:
    from cuda.bindings import driver as cu

    def ok(result):
        if result[0] != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(result[0])
        return result[1] if len(result) == 2 else None

    ok(cu.cuInit(0))
    err, dev = cu.cuCtxGetDevice()
    if err != cu.CUresult.CUDA_SUCCESS:
        dev = ok(cu.cuDeviceGet(0))
    attr = cu.CUdevice_attribute
    return (ok(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)),
            ok(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)))


# --------------------------------------------------------------------------- cache and entry point


def cache_root() -> Path:
    return settings.cache_root()


_memo: dict[str, CompiledCuda] = {}


def clear_memory_cache() -> None:
    """Forget in-process results (the disk cache stays): for tests and memory-conscious callers."""
    _memo.clear()


def cache_key(source: str, arch: str, options: tuple[str, ...], compiler: str) -> str:
    return digest(json.dumps([source, arch, list(options), compiler], ensure_ascii=False))


class CudaCompiler(CachedCompiler):
    """NVRTC or nvcc for one arch and option set: CUDA C → cubin bytes."""

    cache = DiskCache("cubin", ".cubin")

    def __init__(self, compiler: _Nvrtc | _Nvcc, arch: str, options: tuple[str, ...]):
        self.compiler = compiler
        self.arch = arch
        self.options = options

    def key(self, source: str) -> str:
        return cache_key(source, self.arch, self.options, self.compiler.label)

    def build(self, source: str) -> Binary:
        cubin, log = self.compiler.compile(source, self.arch, self.options)
        if not cubin.startswith(_ELF_MAGIC):
            raise CompileError(message=f"{self.compiler.label} produced no cubin for {self.arch} (output is not ELF)",
                               log=log, source=source)
        return Binary(cubin, log)


def compile_cuda(source: str, arch: str | None = None, options: tuple[str, ...] = (), *,
                 backend: str | None = None) -> CompiledCuda:
    """Compile CUDA C `source` to a cubin for `arch` (default: the current GPU's, else sm_90).

    `options` go to the compiler verbatim after the defaults (e.g. "--use_fast_math", "-lineinfo",
    "-DX=1"; fast math is off by default: accuracy first). `backend` forces "nvrtc" or "nvcc".
    Raises CompileError (with the log and the numbered source) or CompilerUnavailable.
    """
    start = time.perf_counter()
    arch = normalize_arch(arch) if arch is not None else default_arch()
    compiler = CudaCompiler(find_compiler(backend), arch, tuple(options))
    key = compiler.key(source)
    hit = _memo.get(key)
    if hit is not None:
        return dataclasses.replace(hit, origin="memory", seconds=time.perf_counter() - start)
    binary = compiler.compile(source, key)
    result = CompiledCuda(binary.data, arch, compiler.compiler.label, binary.log, time.perf_counter() - start,
                          binary.origin)
    _memo[key] = result
    return result
