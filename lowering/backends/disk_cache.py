"""The on-disk cache of compiled kernels, shared by every backend's compiler.

An entry is `<FUSER_CACHE_DIR>/<folder>/<key><suffix>` (the binary as the tools know it: a
shared library, a cubin) and a sidecar `<key><suffix>.json` recording the key, the size and the
sha256 of the binary (and the compiler's log). Both are written to a temporary name and renamed,
so concurrent processes never see half an entry; a reader trusts an entry only when the sidecar
names this key and the binary has the recorded size and digest. A truncated write, a damaged
file or another entry's binary copied over this one is rebuilt, never handed to a loader.

A cache folder that cannot be written (read-only, or under a regular file) is not an error:
compiling goes on without storing, and one warning names the folder and why it was chosen
(FUSER_CACHE_DIR, its default, or an install root).

`CachedCompiler` is the shape every compiler has: a key for a source, a build, and `compile`
which consults the cache before building and stores what it built."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
import threading
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from fuser.lowering import settings


@dataclass(frozen=True)
class Binary:
    """A compiled source: the bytes a loader takes, the compiler's log, where it came from."""

    data: bytes
    log: str = ""
    origin: str = "compiled"  # "compiled" or "disk"


_unwritable: set[Path] = set()
_unwritable_lock = threading.Lock()


def _warn_unwritable(folder: Path, error: OSError, installed: bool) -> None:
    """One warning per folder and process: later stores into it are skipped quietly. It names
    the folder and why that folder: the kernel cache (FUSER_CACHE_DIR) or an install root."""
    with _unwritable_lock:
        if folder in _unwritable:
            return
        _unwritable.add(folder)
    if installed:
        what = ("install folder (what is built once per user: ~/.cache/fuser, else FUSER_CACHE_DIR)", "")
    else:
        source = "FUSER_CACHE_DIR" if os.environ.get("FUSER_CACHE_DIR", "").strip() else \
            "the default, as FUSER_CACHE_DIR is unset"
        what = (f"kernel cache folder ({source})", " (set FUSER_CACHE_DIR to a writable folder)")
    warnings.warn(f"cannot write the {what[0]} {folder}: {error.strerror or error}; going on without keeping "
                  f"what is built there{what[1]}", RuntimeWarning, stacklevel=4)


MAX_SIDECAR_BYTES = 16 << 20
"""A sidecar holds a key, a digest and a compiler log: anything larger is not one."""


class NotARegularFile(OSError):
    """A cache entry that is a link, a FIFO, a device or a folder, or is larger than expected."""


def _read_regular(path: Path, size_limit: int) -> bytes:
    """The bytes of `path` if it is a regular file (a link is not followed) of at most
    `size_limit` bytes. Opened non-blocking, so a FIFO cannot stall the open."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotARegularFile(f"{path} is not a regular file")
        if info.st_size > size_limit:
            raise NotARegularFile(f"{path} has {info.st_size} bytes, expected at most {size_limit}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(size_limit + 1)
    finally:
        os.close(fd)


_damaged: set[Path] = set()


def _warn_damaged(path: Path, error: Exception) -> None:
    """For an entry that is not a regular file (a link, a FIFO, a device, a folder): one warning
    per entry and process; the entry is rebuilt (and replaced by the store). A missing, damaged
    or foreign entry is rebuilt quietly, as always."""
    if not isinstance(error, NotARegularFile) and getattr(error, "errno", None) != errno.ELOOP:
        return
    with _unwritable_lock:
        if path in _damaged:
            return
        _damaged.add(path)
    reason = "a symbolic link (not followed)" if getattr(error, "errno", None) == errno.ELOOP else \
        (error.strerror or str(error))
    warnings.warn(f"kernel cache entry {path}: {reason}; rebuilding it", RuntimeWarning, stacklevel=4)


def write_atomic(path: Path, data: bytes) -> None:
    """tmp + os.replace in `path`'s folder: readers see the old file or the new one, never half."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class DiskCache:
    """Verified binaries under `<root>/<folder>`, named `<key><suffix>`; `root` defaults to
    FUSER_CACHE_DIR (an install root, see install_roots, for what is built once per installation)."""

    def __init__(self, folder: str, suffix: str, root: Path | None = None):
        self.folder = folder
        self.suffix = suffix
        self.root = root

    def path(self, key: str) -> Path:
        """Where the entry of `key` lives (FUSER_CACHE_DIR is read on every use)."""
        return (self.root or settings.cache_root()) / self.folder / f"{key}{self.suffix}"

    def load(self, key: str) -> Binary | None:
        """The entry of `key` if it is whole and is this key's; None otherwise (then it is
        rebuilt). Both files are opened without following links and must be regular files: a
        FIFO would block a read forever, a link to /dev/zero would read until memory runs out.
        The binary is read only when its size is the one its sidecar records."""
        path = self.path(key)
        sidecar = path.with_name(path.name + ".json")
        try:
            record = json.loads(_read_regular(sidecar, MAX_SIDECAR_BYTES))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:  # unreadable, not a regular file, or not JSON
            _warn_damaged(sidecar, e)
            return None
        if not isinstance(record, dict) or record.get("key") != key or not isinstance(record.get("size"), int):
            return None
        try:
            data = _read_regular(path, record["size"])
        except OSError as e:
            _warn_damaged(path, e)
            return None
        if len(data) != record["size"] or record.get("sha256") != hashlib.sha256(data).hexdigest():
            return None
        return Binary(data, str(record.get("log", "")), "disk")

    def store(self, key: str, binary: Binary, source: str | None = None) -> None:
        """Writes the entry of `key` (and, for debugging, the source beside it, unverified).
        The binary goes first: until its sidecar lands, readers treat the entry as missing."""
        path = self.path(key)
        if path.parent in _unwritable:
            return
        record = {"key": key, "size": len(binary.data), "sha256": hashlib.sha256(binary.data).hexdigest(),
                  "log": binary.log}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, binary.data)
            write_atomic(path.with_name(path.name + ".json"), json.dumps(record).encode())
            if source is not None:
                write_atomic(path.with_name(path.name + ".src"), source.encode())
        except OSError as e:
            _warn_unwritable(path.parent, e, installed=self.root is not None)


class CachedCompiler(ABC):
    """source → binary. `compile` finds the binary in the disk cache by `key(source)` (everything
    the binary depends on) or builds and stores it."""

    cache: DiskCache

    @abstractmethod
    def key(self, source: str) -> str:
        ...

    @abstractmethod
    def build(self, source: str) -> Binary:
        """Runs the compiler; raises CompileError."""

    def compile(self, source: str, key: str | None = None) -> Binary:
        key = key or self.key(source)
        found = self.cache.load(key)
        if found is not None:
            return found
        binary = self.build(source)
        self.cache.store(key, binary, source)
        return binary


def install_roots() -> list[Path]:
    """Where what is built once per installation (NVRTC's headers, the precompiled emulation
    header) is kept, in order of preference: FUSER_SHARED_CACHE_DIR (default: the per-user cache
    `~/.cache/fuser`), shared by every FUSER_CACHE_DIR (a fresh kernel cache must not pay seconds
    to rebuild them), then FUSER_CACHE_DIR itself, for a shared folder that cannot be written (one
    that is a file is left out, with a warning). Entries are keyed by everything they depend on
    and appear whole (built aside, then renamed)."""
    shared = settings.shared_cache_root()
    if shared is not None and not _can_be_a_folder(shared):
        shared = None
    return list(dict.fromkeys([*([shared] if shared is not None else []), settings.cache_root()]))


_warned_roots: set[Path] = set()


def _can_be_a_folder(root: Path) -> bool:
    """False when `root` is, or lies under, a file (no folder can ever be made there), with one
    warning per root and process, as FUSER_CACHE_DIR gets one: what is built once per
    installation then goes to FUSER_CACHE_DIR. A read-only folder is fine (a prebuilt install)."""
    found = next((p for p in (root, *root.parents) if p.exists()), None)
    if found is None or found.is_dir():
        return True
    with _unwritable_lock:
        if root in _warned_roots:
            return False
        _warned_roots.add(root)
    source = "FUSER_SHARED_CACHE_DIR" if os.environ.get("FUSER_SHARED_CACHE_DIR", "").strip() else \
        "the default, as FUSER_SHARED_CACHE_DIR is unset"
    reason = "not a folder" if found == root else f"{found} is not a folder"
    warnings.warn(f"cannot write the shared cache folder ({source}) {root}: {reason}; keeping what "
                  f"is built once per installation in FUSER_CACHE_DIR ({settings.cache_root()}) instead (set "
                  "FUSER_SHARED_CACHE_DIR to a writable folder)", RuntimeWarning, stacklevel=3)
    return False


def digest(*parts: str) -> str:
    """sha256 of `parts`, kept apart by a separator no part contains."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0\1")
    return h.hexdigest()
