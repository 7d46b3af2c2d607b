"""CUDA C source -> cubin or PTX bytes, cached; loading and launching live in `lowering.backends.gpu_runtime`.

Compiling needs no GPU: NVRTC runs in process through `cuda.bindings.nvrtc` (the optional
`fuser[nvrtc]` extra; 130-350 ms for a one-kernel program as measured on the 2-core CPU machine, see
docs/benchmarks.md), nvcc from a CUDA toolkit is the fallback (slower: a process per program).

Output (`image_format`): PTX when the installed driver can JIT what the compiler emits (the driver
compiles it at load and keeps it in its own cache, so ptxas leaves NVRTC's time), else a cubin for
one real architecture: PTX from an NVRTC newer than the driver (13.5 emits PTX 9.5) cannot be
loaded by an older driver (580 = CUDA 13.0), while a cubin can. No driver (a build machine, tests
here): cubin. `compile_cuda` gives a cubin unless asked; the cuda backend decides per process.

NVRTC gets `-minimal` (12.4+; no textures, device-side launches or runtime API types, which fuser
never emits) and no include path until a source needs one: generated kernels include nothing (their
16-bit and fp8 types are lowering/runtime/fuser_f16.h's, not cuda_fp16.h / cuda_bf16.h /
cuda_fp8.h, which cost NVRTC 10-30 ms a program to parse). For a source that includes a toolkit
header itself, NVRTC's bundled headers are installed once per user and NVRTC version, under
`$FUSER_SHARED_CACHE_DIR/nvrtc-include/<version>` (default `~/.cache/fuser`), shared by every
FUSER_CACHE_DIR.

Results are memoised in process and stored by lowering.backends.disk_cache under `$FUSER_CACHE_DIR/cubin`
(default `~/.cache/fuser/cubin`) as `<key>.cubin`, a plain cubin that `cuobjdump` can read, or
under `ptx/` as `<key>.ptx`, with a verified sidecar; the key is the sha256 of source, arch,
options, output and compiler version.
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
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from fuser.lowering import settings
from fuser.lowering.backends.disk_cache import Binary, CachedCompiler, DiskCache, digest, install_roots
from fuser.lowering.errors import CompileError, FuserError  # CompileError: always built with keywords

DEFAULT_ARCH = "sm_90"
# Both compilers see the source under this name, so their messages read alike ("kernel.cu(3): error").
SOURCE_NAME = "kernel.cu"
_ELF_MAGIC = b"\x7fELF"
_INSTALL_HINT = "install the NVRTC extra (pip install 'fuser[nvrtc]') or a CUDA toolkit with nvcc"
_MINIMAL_SINCE = (12, 4)  # the first NVRTC with -minimal
_MISSING_HEADER = "could not open source file"
OUTPUTS = ("cubin", "ptx")


class CompilerUnavailable(FuserError):
    """No CUDA compiler (or not the one asked for) can be used on this machine."""


@dataclass(frozen=True)
class CompiledCuda:
    cubin: bytes  # the image the driver loads: a cubin, or NUL-terminated PTX when output == "ptx"
    arch: str  # e.g. "sm_90"
    compiler: str  # e.g. "nvrtc 13.5" or "nvcc 13.0"
    log: str = ""  # the compiler's warnings, if any
    seconds: float = 0.0  # wall time of this call: compiling, or finding it in a cache
    origin: str = "compiled"  # "compiled", "memory" (in-process memo) or "disk"
    output: str = "cubin"  # "cubin" or "ptx"


# --------------------------------------------------------------------------- backends


class _Nvrtc:
    name = "nvrtc"

    def __init__(self) -> None:
        from cuda.bindings import nvrtc  # optional extra: imported only when a compile needs it

        self._nvrtc = nvrtc
        _, major, minor = self._check(nvrtc.nvrtcVersion(), "nvrtcVersion")
        self.version_tuple = (major, minor)
        self.version = f"{major}.{minor}"
        self.label = f"nvrtc {self.version}"
        self._other_headers: tuple[str, ...] = ()  # headers found outside the install roots

    def _check(self, result: tuple, what: str) -> tuple:
        if result[0] != self._nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, msg = self._nvrtc.nvrtcGetErrorString(result[0])
            raise RuntimeError(f"{what} failed: {msg.decode()}")
        return result

    def base_options(self, arch: str, output: str) -> list[str]:
        opts = [f"--gpu-architecture={virtual_arch(arch) if output == 'ptx' else arch}", "-std=c++17"]
        return opts + (["-minimal"] if self.version_tuple >= _MINIMAL_SINCE else [])

    def compile(self, source: str, arch: str, options: tuple[str, ...], output: str = "cubin") -> tuple[bytes, str]:
        opts = self.base_options(arch, output) + list(options)
        headers = installed_headers(self.version) or self._other_headers
        status, image, log = self._run(source, opts + _include_options(headers), output)
        if status is not None and _MISSING_HEADER in log:
            # The first source with an #include since installation: install the headers, once.
            found = nvrtc_headers(self._nvrtc, self.version)
            if found and found != headers:
                status, image, log = self._run(source, opts + _include_options(found), output)
                if found != installed_headers(self.version):  # a wheel's or toolkit's: remember them
                    self._other_headers = found
        if status is not None:
            message = f"NVRTC failed to compile {SOURCE_NAME} for {arch}: {status}"
            if _MISSING_HEADER in log:
                message += (" (no CUDA headers found for NVRTC: install nvidia-cuda-runtime"
                            " or a CUDA toolkit, or set CUDA_HOME)")
            raise CompileError(message=message, log=log, source=source)
        return image, log

    def _run(self, source: str, opts: list[str], output: str) -> tuple[str | None, bytes, str]:
        """(None, image, log) on success, (NVRTC's error text, b"", log) on failure."""
        nv = self._nvrtc
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
                return nv.nvrtcGetErrorString(status)[1].decode(), b"", log_text
            get_size, get = ((nv.nvrtcGetPTXSize, nv.nvrtcGetPTX) if output == "ptx"
                             else (nv.nvrtcGetCUBINSize, nv.nvrtcGetCUBIN))
            _, size = self._check(get_size(prog), get_size.__name__)
            image = bytearray(size)
            self._check(get(prog, image), get.__name__)
            return None, bytes(image), log_text
        finally:
            nv.nvrtcDestroyProgram(prog)


def _include_options(folders: tuple[str, ...]) -> list[str]:
    return [f"-I{d}" for d in folders]


# --------------------------------------------------------------------------- NVRTC's headers


def _header_folder(root: Path, version: str) -> Path:
    return root / "nvrtc-include" / version


def _header_dirs(folder: Path) -> tuple[str, ...]:
    return (str(folder), str(folder / "cccl"))


def installed_headers(version: str) -> tuple[str, ...]:
    """The include folders of NVRTC `version`'s headers where an earlier run installed them
    (a folder appears whole, by rename), else (); a stat or two, no extraction."""
    for root in install_roots():
        folder = _header_folder(root, version)
        if (folder / "cuda_fp16.h").is_file():
            return _header_dirs(folder)
    return ()


_install_lock = threading.Lock()


def nvrtc_headers(nvrtc, version: str) -> tuple[str, ...]:
    """Include folders with cuda_fp16.h / cuda_bf16.h for NVRTC: it has no include path of its own.

    NVRTC 13.5+ bundles the toolkit headers matching itself (2,379 files, 26 MB): they are
    installed once per user and version (`install_bundled_headers`). Older NVRTCs use the
    nvidia-cuda-runtime wheel's or a toolkit's headers."""
    with _install_lock:  # one extraction per process; other processes are handled by the rename
        found = installed_headers(version)
        if found:
            return found
        for root in install_roots():
            folder = install_bundled_headers(nvrtc, _header_folder(root, version))
            if folder is not None:
                return _header_dirs(folder)
    return _wheel_or_toolkit_headers()


def install_bundled_headers(nvrtc, folder: Path) -> Path | None:
    """Extracts NVRTC's bundled headers into a temporary sibling of `folder` and renames it to
    `folder`, so a folder that exists is whole; a concurrent installer that renamed first wins
    and its copy is used. None when this NVRTC bundles none or `folder` cannot be written."""
    if not bundles_headers(nvrtc):
        return None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    except OSError:  # an unwritable root
        return None
    try:
        (status, *_) = nvrtc.nvrtcInstallBundledHeaders(str(tmp).encode(), 0)
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return None
        try:
            os.rename(tmp, folder)
        except OSError:  # another process installed it first (a non-empty folder is never replaced)
            pass
        return folder if (folder / "cuda_fp16.h").is_file() else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bundles_headers(nvrtc) -> bool:
    """Whether this NVRTC carries its own headers (13.5+). Never raises: bindings older than the
    call lack it (AttributeError), and cuda-bindings 13.0.x declare it but cannot call it
    (TypeError from the info struct's constructor, seen on the first GPU machine with NVRTC
    13.0); either way the wheel's or a toolkit's headers are used instead."""
    try:
        status, info = nvrtc.nvrtcGetBundledHeadersInfo()[:2]
        return status == nvrtc.nvrtcResult.NVRTC_SUCCESS and bool(info.available)
    except (AttributeError, TypeError, RuntimeError, ValueError):
        return False


def _wheel_or_toolkit_headers() -> tuple[str, ...]:
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
        self.version_tuple = tuple(int(part) for part in self.version.split("."))
        self.label = f"nvcc {self.version}"

    def compile(self, source: str, arch: str, options: tuple[str, ...], output: str = "cubin") -> tuple[bytes, str]:
        with tempfile.TemporaryDirectory(prefix="fuser-nvcc-") as tmp:
            src = os.path.join(tmp, SOURCE_NAME)
            out = os.path.join(tmp, f"kernel.{output}")
            Path(src).write_text(source)
            target = f"-arch={virtual_arch(arch)}" if output == "ptx" else f"-arch={arch}"
            cmd = [self.path, f"-{output}", target, "-O3", "-std=c++17", *options, "-o", out, src]
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


def virtual_arch(arch: str) -> str:
    """The PTX target of a real architecture: 'sm_90a' -> 'compute_90a'."""
    return "compute_" + normalize_arch(arch)[len("sm_"):]


def image_format(driver: int | None, toolkit: tuple[int, ...]) -> str:
    """"ptx" when a driver of CUDA version `driver` (cuDriverGetVersion: 13000 = 13.0) can JIT the
    PTX a compiler of CUDA version `toolkit` ((13, 5)) emits, else "cubin".

    A driver JIT-compiles PTX of its own CUDA version or older; newer PTX (a newer ISA version)
    fails to load. No driver (None): cubin, which is what a machine without a GPU can check."""
    if driver is None:
        return "cubin"
    major, minor = (tuple(toolkit) + (0,))[:2]
    return "ptx" if driver >= major * 1000 + minor * 10 else "cubin"


@functools.cache
def driver_version() -> int | None:
    """The installed CUDA driver's version (13000 = 13.0), or None without a driver; no context."""
    try:
        import pycuda.driver as drv  # ImportError without libcuda.so.1

        return int(drv.get_driver_version())
    except Exception:
        pass
    try:
        from cuda.bindings import driver as cu

        err, version = cu.cuDriverGetVersion()
        return int(version) if err == cu.CUresult.CUDA_SUCCESS and version > 0 else None
    except Exception:  # no bindings, or no libcuda.so.1 behind them
        return None


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


def cache_key(source: str, arch: str, options: tuple[str, ...], compiler: str, output: str = "cubin") -> str:
    return digest(json.dumps([source, arch, list(options), compiler, output], ensure_ascii=False))


_CACHES = {"cubin": DiskCache("cubin", ".cubin"), "ptx": DiskCache("ptx", ".ptx")}


class CudaCompiler(CachedCompiler):
    """NVRTC or nvcc for one arch and option set: CUDA C → cubin or PTX bytes. `output` None:
    what the installed driver can load best (`image_format`)."""

    def __init__(self, compiler: _Nvrtc | _Nvcc, arch: str, options: tuple[str, ...], output: str | None = None):
        if output is None:
            output = image_format(driver_version(), compiler.version_tuple)
        if output not in OUTPUTS:
            raise ValueError(f"output {output!r}: expected one of {', '.join(OUTPUTS)}")
        self.compiler = compiler
        self.arch = arch
        self.options = options
        self.output = output
        self.cache = _CACHES[output]

    def key(self, source: str) -> str:
        return cache_key(source, self.arch, self.options, self.compiler.label, self.output)

    def build(self, source: str) -> Binary:
        image, log = self.compiler.compile(source, self.arch, self.options, self.output)
        if self.output == "ptx":
            return Binary(_ptx_image(image, self.compiler.label, self.arch, log, source), log)
        if not image.startswith(_ELF_MAGIC):
            raise CompileError(message=f"{self.compiler.label} produced no cubin for {self.arch} (output is not ELF)",
                               log=log, source=source)
        return Binary(image, log)


def _ptx_image(ptx: bytes, label: str, arch: str, log: str, source: str) -> bytes:
    """PTX text as the driver's loader takes it: NUL-terminated (nvcc's file has no NUL)."""
    text = ptx.rstrip(b"\0")
    if b".version" not in text or b".target" not in text:
        raise CompileError(message=f"{label} produced no PTX for {arch} (no .version/.target directive)",
                           log=log, source=source)
    return text + b"\0"


def compile_cuda(source: str, arch: str | None = None, options: tuple[str, ...] = (), *,
                 backend: str | None = None, output: str | None = "cubin") -> CompiledCuda:
    """Compile CUDA C `source` to a cubin for `arch` (default: the current GPU's, else sm_90).

    `options` go to the compiler verbatim after the defaults (e.g. "--use_fast_math", "-lineinfo",
    "-DX=1"; fast math is off by default: accuracy first). `backend` forces "nvrtc" or "nvcc".
    `output` "ptx" gives PTX for arch's virtual architecture instead; None decides as the cuda
    backend does (`image_format`). Raises CompileError (with the log and the numbered source),
    CompilerUnavailable, or ValueError for an unknown output.
    """
    start = time.perf_counter()
    arch = normalize_arch(arch) if arch is not None else default_arch()
    compiler = CudaCompiler(find_compiler(backend), arch, tuple(options), output)
    key = compiler.key(source)
    hit = _memo.get(key)
    if hit is not None:
        return dataclasses.replace(hit, origin="memory", seconds=time.perf_counter() - start)
    binary = compiler.compile(source, key)
    result = CompiledCuda(binary.data, arch, compiler.compiler.label, binary.log, time.perf_counter() - start,
                          binary.origin, compiler.output)
    _memo[key] = result
    return result
