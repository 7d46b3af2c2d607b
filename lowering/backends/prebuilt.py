"""What the cpu backend builds once per installation and compiler, not once per kernel module.

- The host runtime (fuser_cpu_runtime.cpp: grid loop, fibers, fiber stacks, the SIGSEGV handler,
  barriers, warp operations, error reports) as a shared object. Every kernel module links against
  it (its DT_NEEDED names the runtime's soname, `libfuser_cpu_rt_<key>.so`), so g++ compiles only
  the kernels of a module. Kept as a verified disk_cache entry `<root>/cpu-runtime/<key>.so`, the
  key covering the compiler, the flags and the runtime's sources; a process loads each runtime it
  needs once, before the first module that names it (a module's dlopen then finds its runtime among
  the loaded objects by soname).
- fuser_cpu_emu.h precompiled (`.gch`), which g++ reads instead of parsing the header per module.

Both live under the first usable root of disk_cache.install_roots(): built once per user, shared
by every FUSER_CACHE_DIR."""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from fuser.lowering.backends import temp_files
from fuser.lowering.backends.cxx import run_compiler
from fuser.lowering.backends.disk_cache import Binary, DiskCache, digest, install_roots
from fuser.lowering.runtime import EMU_HEADER_PATH, RACECHECK_HEADER_PATH, RUNTIME_DIR

RUNTIME_SOURCE = RUNTIME_DIR / "fuser_cpu_runtime.cpp"
ABI_HEADER = RUNTIME_DIR / "fuser_cpu_abi.h"
RUNTIME_FORMAT = "1"  # bump to rebuild every installed runtime
RUNTIME_FLAGS = (
    "-O2", "-std=c++20", "-fopenmp", "-shared", "-fPIC", "-fvisibility=hidden", "-fno-math-errno",
    "-fstack-clash-protection",  # the scheduler's frames live on fiber stacks too
)
_SONAME = re.compile(rb"libfuser_cpu_rt_([0-9a-f]{64})\.so")

_runtime_count = 0
_lock = threading.Lock()
_built: dict[str, Path] = {}  # runtime key -> its verified file, in this process
_loaded: dict[str, ctypes.CDLL] = {}  # runtime key -> the runtime loaded into this process


def runtime_build_count() -> int:
    """How many times this process has compiled the host runtime."""
    return _runtime_count


def runtime_sources() -> str:
    """The text the runtime is built from (its key covers it; so does every module's)."""
    return ABI_HEADER.read_text() + "\0" + RUNTIME_SOURCE.read_text()


def runtime_key(identity: str, flags: Sequence[str]) -> str:
    """The runtime built by the compiler `identity` with `flags` (RUNTIME_FLAGS and the modules'
    extra flags: -DFUSER_EMU_UCONTEXT picks its context switch)."""
    return digest(RUNTIME_FORMAT, identity, "\0".join(flags), runtime_sources())


def soname(key: str) -> str:
    return f"libfuser_cpu_rt_{key}.so"


def _caches() -> list[DiskCache]:
    return [DiskCache("cpu-runtime", ".so", root) for root in install_roots()]


def host_runtime(cxx: str, identity: str, flags: Sequence[str]) -> Path:
    """The runtime's file for linking a module (a verified install entry), built on first use
    and again when the file has gone since (its cache folder deleted while this process runs)."""
    key = runtime_key(identity, flags)
    with _lock:
        path = _built.get(key)
        # A stat per compile (a g++ run): the linker needs the file itself, not this memo of it.
        if path is None or not path.is_file():
            path = _built[key] = _find_runtime(key) or _build_runtime(cxx, identity, flags, key)
        return path


def _find_runtime(key: str) -> Path | None:
    for cache in _caches():
        if cache.load(key) is not None:
            return cache.path(key)
    return None


def _build_runtime(cxx: str, identity: str, flags: Sequence[str], key: str) -> Path:
    global _runtime_count
    with temp_files.scratch("rt") as tmp:
        out = Path(tmp) / soname(key)
        cmd = [cxx, *flags, f"-Wl,-soname,{soname(key)}", "-I", str(RUNTIME_DIR), "-o", str(out), str(RUNTIME_SOURCE)]
        _runtime_count += 1
        log = run_compiler(cxx, identity, cmd, out, "the cpu backend's host runtime")
        binary = Binary(out.read_bytes(), log)
    return _store_runtime(key, binary)


def _store_runtime(key: str, binary: Binary) -> Path:
    """Stores the runtime in the first install root that takes it; with none writable, in a folder
    of this process (modules still link and load; the next process builds it again)."""
    for cache in _caches():
        folder = cache.path(key).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if not os.access(folder, os.W_OK):
            continue
        cache.store(key, binary)
        if cache.load(key) is not None:
            return cache.path(key)
    private = temp_files.until_exit("rt") / soname(key)  # removed at exit; swept if killed
    private.write_bytes(binary.data)
    return private


def load_runtime_of(module: bytes) -> None:
    """Loads the runtime `module` (shared-library bytes) links against, unless this process has.
    Raises OSError when it is found nowhere (the caller rebuilds the module, and with it the runtime)."""
    match = _SONAME.search(module)
    if match is None:
        return  # not linked against a runtime: the loader reports what is missing
    key = match.group(1).decode()
    with _lock:
        if key in _loaded:
            return
        path = _built.get(key) or _find_runtime(key)
        if path is None:
            raise OSError(f"the cpu backend's host runtime {soname(key)} is not installed")
        _loaded[key] = _load_private_copy(path.read_bytes())


def loaded_runtime() -> ctypes.CDLL | None:
    """A host runtime this process has loaded (for its host-side helpers), or None: the cpu
    backend loads one before its first launch; other backends never do."""
    return next(iter(_loaded.values()), None)


def _load_private_copy(data: bytes) -> ctypes.CDLL:
    """dlopen a private copy of `data`, unlinked once loaded (as cpu_runtime loads modules). Local
    symbols: each module finds its own runtime through its DT_NEEDED soname, even with several
    runtimes (other flags) in one process."""
    fd, path = tempfile.mkstemp(prefix="fuser-rt-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL)
    finally:
        os.unlink(path)
    if lib.fuser_rt_abi_version() != _abi_version():
        raise OSError(f"host runtime speaks ABI {lib.fuser_rt_abi_version()}, its header {_abi_version()}")
    return lib


def _abi_version() -> int:
    match = re.search(r"#define FUSER_CPU_ABI_VERSION (\d+)", ABI_HEADER.read_text())
    return int(match.group(1)) if match else -1


# ------------------------------------------------------------------------------------------------
# The emulation header, precompiled.
# ------------------------------------------------------------------------------------------------

_PCH_NAME = EMU_HEADER_PATH.name + ".gch"
_pch_dirs: dict[tuple, Path | None] = {}


def precompiled_header(cxx: str, identity: str, flags: Sequence[str]) -> Path | None:
    """A folder holding fuser_cpu_emu.h precompiled (`.gch`) for these flags, searched before
    the runtime folder so g++ reads the precompiled form. Built once per installation into
    <root>/cpu-pch/<key>, the key covering the headers, the compiler identity and the flags (g++
    would ignore a stale one, but never use it wrongly: it checks the flags itself and falls back
    to the header). None when it cannot be built: modules are then compiled from the header, as
    correct and a little slower."""
    key = (cxx, identity, tuple(flags))
    with _lock:
        if key not in _pch_dirs or _deleted(_pch_dirs[key]):
            name = digest(RUNTIME_FORMAT, identity, "\0".join(flags), EMU_HEADER_PATH.read_text(),
                          RACECHECK_HEADER_PATH.read_text(), ABI_HEADER.read_text())
            _pch_dirs[key] = _find_or_build_pch(cxx, flags, [root / "cpu-pch" / name for root in install_roots()])
        return _pch_dirs[key]


def _deleted(folder: Path | None) -> bool:
    """A precompiled header found earlier whose file has gone since (its cache folder deleted
    while this process runs): looked for, or built, again."""
    return folder is not None and not (folder / _PCH_NAME).is_file()


def _find_or_build_pch(cxx: str, flags: Sequence[str], folders: list[Path]) -> Path | None:
    """The first folder that holds the header precompiled, else the first one it can be built in."""
    for folder in folders:
        if (folder / _PCH_NAME).is_file():
            return folder
    for folder in folders:
        built = _build_precompiled_header(cxx, flags, folder)
        if built is not None:
            return built
    return None


def _build_precompiled_header(cxx: str, flags: Sequence[str], folder: Path) -> Path | None:
    header_flags = [f for f in flags if f != "-shared"]
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="pch-", dir=folder.parent, ignore_cleanup_errors=True) as tmp:
            header = Path(tmp) / EMU_HEADER_PATH.name
            header.write_text(EMU_HEADER_PATH.read_text())
            proc = subprocess.run([cxx, *header_flags, "-I", str(RUNTIME_DIR), "-x", "c++-header",
                                   "-o", str(Path(tmp) / _PCH_NAME), str(header)], capture_output=True, text=True)
            if proc.returncode != 0:
                return None
            try:
                os.rename(tmp, folder)  # atomic: another process may have won; then use theirs
            except OSError:
                pass
        return folder if (folder / _PCH_NAME).is_file() else None
    except OSError:
        return None
