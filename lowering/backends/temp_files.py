"""Temporary folders of the compilers (g++ runs, a host runtime no install root can keep): named
`$TMPDIR/fuser-<kind>-<pid>-<random>`, removed when done or at exit, and swept when stale.

A process killed with SIGKILL during a compile leaves its folder behind; so does one that exits
through os._exit. The first compile of every process therefore sweeps folders of this naming
that are older than a day and whose process is gone (`sweep_stale`)."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

STALE_AFTER_S = 24 * 3600
_KINDS = ("cxx", "rt")
_lock = threading.Lock()
_swept = False
_kept: list[Path] = []


def _prefix(kind: str) -> str:
    return f"fuser-{kind}-{os.getpid()}-"


@contextlib.contextmanager
def scratch(kind: str) -> Iterator[Path]:
    """A folder for one compile, removed when the block ends (as TemporaryDirectory)."""
    sweep_stale()
    with tempfile.TemporaryDirectory(prefix=_prefix(kind)) as folder:
        yield Path(folder)


def until_exit(kind: str) -> Path:
    """A folder kept for the rest of the process (a loaded library's file), removed at exit."""
    sweep_stale()
    folder = Path(tempfile.mkdtemp(prefix=_prefix(kind)))
    with _lock:
        if not _kept:
            atexit.register(_remove_kept)
        _kept.append(folder)
    return folder


def _remove_kept() -> None:
    for folder in _kept:
        shutil.rmtree(folder, ignore_errors=True)


def sweep_stale(root: str | None = None, now: float | None = None) -> list[Path]:
    """Removes this naming's folders older than a day whose process is gone; once per process
    (the tests call it with `root`). Returns what it removed."""
    global _swept
    if root is None:
        with _lock:
            if _swept:
                return []
            _swept = True
    base = Path(root or tempfile.gettempdir())
    now = time.time() if now is None else now
    removed = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        pid = _owner(entry.name)
        if pid is None or pid == os.getpid() or _alive(pid):
            continue
        try:
            info = entry.lstat()
        except OSError:
            continue
        if now - info.st_mtime < STALE_AFTER_S or info.st_uid != os.getuid():
            continue
        shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() and not entry.is_symlink() else entry.unlink(
            missing_ok=True)
        removed.append(entry)
    return removed


def _owner(name: str) -> int | None:
    """The pid in `fuser-<kind>-<pid>-<random>`, None for any other name."""
    parts = name.split("-", 3)
    if len(parts) != 4 or parts[0] != "fuser" or parts[1] not in _KINDS or not parts[2].isdigit():
        return None
    return int(parts[2])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True
