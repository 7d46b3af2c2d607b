"""lowering.backends.disk_cache: entries are verified (key, size, sha256) before any loader sees them, a
damaged or swapped entry is rebuilt, and an unwritable cache folder costs a warning, not a failure.
End to end through the cpu backend (g++) and the cubin compiler (NVRTC / nvcc, skipped without)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from fuser.lowering.backends import compile as cc
from fuser.lowering.backends import cpu_runtime as cr
from fuser.lowering.backends import CPU
from fuser.lowering.backends.disk_cache import Binary, DiskCache
from fuser.lowering.runtime import with_prelude

needs_gxx = pytest.mark.skipif(not cr.cpu_compiler_available(), reason="no g++ for the CPU backend")


def copy_kernel(tag: str) -> str:
    """A one-kernel module source; `tag` makes another source (another cache key)."""
    return with_prelude(f"""
extern "C" __global__ void copy_{tag}(int n, const float* __restrict__ x, float* __restrict__ y) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) fuser_st(y, i, fuser_ld(x, i) + {len(tag)}.0f);
}}
FUSER_HOST_LAUNCHER(copy_{tag})
""")


def run_copy(program, tag: str) -> np.ndarray:
    x = np.arange(8, dtype=np.float32)
    y = np.zeros_like(x)
    program.launch(f"copy_{tag}", 1, 32, [8, x, y], needs_sync=False)
    return y - x


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSER_CACHE_DIR", str(tmp_path))
    CPU.forget_programs()
    cc.clear_memory_cache()
    yield tmp_path
    CPU.forget_programs()
    cc.clear_memory_cache()


# --------------------------------------------------------------------------- the cache itself


def test_entry_round_trip_and_verification(cache_dir):
    cache = DiskCache("unit", ".bin")
    cache.store("k1", Binary(b"\x7fELF" + bytes(range(200)), "a warning"), source="src")
    found = cache.load("k1")
    assert found == Binary(b"\x7fELF" + bytes(range(200)), "a warning", "disk")
    assert sorted(p.name for p in (cache_dir / "unit").iterdir()) == ["k1.bin", "k1.bin.json", "k1.bin.src"]

    entry = cache.path("k1")
    entry.write_bytes(entry.read_bytes()[:50])  # truncated after its magic
    assert cache.load("k1") is None
    entry.write_bytes(b"\x7fELF" + bytes(range(1, 201)))  # same size, other bytes
    assert cache.load("k1") is None

    cache.store("k2", Binary(b"other entry"))
    shutil.copy(cache.path("k2"), cache.path("k1"))  # a whole valid entry under the wrong key
    shutil.copy(cache.path("k2").with_name("k2.bin.json"), cache.path("k1").with_name("k1.bin.json"))
    assert cache.load("k1") is None and cache.load("k2") is not None

    cache.path("k2").with_name("k2.bin.json").write_text("{not json")
    assert cache.load("k2") is None


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "link out of the cache", "folder", "sidecar fifo"])
def test_an_entry_that_is_not_a_regular_file_is_rebuilt_with_one_warning(cache_dir, tmp_path_factory, kind):
    """A FIFO in place of a cached .so hung `load` forever; a symlink to /dev/zero read until
    memory ran out. Entries are opened without following links and must be regular files."""
    import os

    cache = DiskCache("unit", ".bin")
    cache.store("k", Binary(b"\x7fELF" + bytes(100)))
    entry = cache.path("k")
    target = cache_dir / "unit" / "k.bin.json" if kind == "sidecar fifo" else entry
    target.unlink()
    if kind in ("fifo", "sidecar fifo"):
        os.mkfifo(target)
    elif kind == "link to /dev/zero":
        target.symlink_to("/dev/zero")
    elif kind == "link out of the cache":
        outside = tmp_path_factory.mktemp("outside") / "k.bin"
        outside.write_bytes(b"\x7fELF" + bytes(100))
        target.symlink_to(outside)
    else:
        target.mkdir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.load("k") is None
        assert cache.load("k") is None  # one warning per entry
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and str(target) in messages[0] and "rebuilding it" in messages[0], messages
    if kind != "folder":  # a store replaces the odd entry by a regular file
        cache.store("k", Binary(b"\x7fELF" + bytes(100)))
        assert cache.load("k") is not None and not os.path.islink(target)


# --------------------------------------------------------------------------- cpu: .so entries


@needs_gxx
def test_truncated_shared_library_is_rebuilt_before_dlopen(cache_dir):
    # A truncated .so handed to ctypes.CDLL dies with SIGBUS: run the load in a child process so a
    # regression fails this test instead of killing the test run.
    source = copy_kernel("trunc")
    compiler = cr.CpuCompiler()
    compiler.compile(source)  # built and stored, not loaded in this process
    (entry,) = (cache_dir / "cpu").glob("*.so")
    whole = entry.read_bytes()
    entry.write_bytes(whole[: len(whole) // 3])
    child = textwrap.dedent(f"""
        import numpy as np
        from fuser.lowering.backends import cpu_runtime as cr
        from fuser.lowering.backends import CPU
        program = CPU.program({source!r})
        x = np.arange(8, dtype=np.float32); y = np.zeros_like(x)
        program.launch("copy_trunc", 1, 32, [8, x, y], needs_sync=False)
        assert (y - x == 5).all(), y
        print("compiles", cr.compile_count())
    """)
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.split() == ["compiles", "1"]  # rebuilt, not loaded
    assert compiler.cache.load(compiler.key(source)) is not None  # and the entry repaired


@needs_gxx
def test_another_modules_entry_swapped_in_is_rebuilt(cache_dir):
    mine, other = copy_kernel("mine"), copy_kernel("other")
    compiler = cr.CpuCompiler()
    compiler.compile(mine)
    compiler.compile(other)
    mine_path, other_path = compiler.cache.path(compiler.key(mine)), compiler.cache.path(compiler.key(other))
    for suffix in ("", ".json"):  # a valid library with its own valid sidecar, under my key
        shutil.copy(f"{other_path}{suffix}", f"{mine_path}{suffix}")
    before = cr.compile_count()
    program = CPU.program(mine)
    assert cr.compile_count() == before + 1
    assert (run_copy(program, "mine") == 4).all()


@needs_gxx
def test_unwritable_cache_dir_warns_once_and_compiles(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FUSER_CACHE_DIR", str(blocker / "cache"))
    CPU.forget_programs()
    with pytest.warns(RuntimeWarning, match=r"cannot write the kernel cache folder \(FUSER_CACHE_DIR\) .*a_file/cache/cpu") as record:
        first = CPU.program(copy_kernel("ro"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second store into the same folder stays quiet
        second = CPU.program(copy_kernel("ro2"))
    assert len(record) == 1
    assert (run_copy(first, "ro") == 2).all() and (run_copy(second, "ro2") == 3).all()
    CPU.forget_programs()


# --------------------------------------------------------------------------- cubin entries


def require_cuda_compiler() -> None:
    if not cc.available_compilers():
        pytest.skip("no CUDA compiler (NVRTC or nvcc) to build cubins")


SAXPY = """\
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_cubin_truncated_after_its_elf_magic_is_recompiled(cache_dir):
    require_cuda_compiler()
    first = cc.compile_cuda(SAXPY, "sm_90")
    (entry,) = (cache_dir / "cubin").glob("*.cubin")
    entry.write_bytes(first.cubin[: len(first.cubin) // 2])  # still starts with \x7fELF
    cc.clear_memory_cache()
    again = cc.compile_cuda(SAXPY, "sm_90")
    assert again.origin == "compiled" and again.cubin == entry.read_bytes()
    assert len(again.cubin) == len(first.cubin)


def test_cubin_cache_in_unwritable_folder_warns_and_compiles(tmp_path, monkeypatch):
    require_cuda_compiler()
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FUSER_CACHE_DIR", str(blocker))
    cc.clear_memory_cache()
    with pytest.warns(RuntimeWarning, match=r"cannot write the kernel cache folder \(FUSER_CACHE_DIR\)"):
        result = cc.compile_cuda(SAXPY + "// unwritable\n", "sm_90")
    assert result.origin == "compiled" and result.cubin[:4] == b"\x7fELF"
    cc.clear_memory_cache()


def test_an_unwritable_install_root_is_named_as_such(tmp_path):
    """The warning named FUSER_CACHE_DIR for ~/.cache/fuser/cpu-runtime, which it is not."""
    from fuser.lowering.backends import disk_cache

    blocker = tmp_path / "home_file"
    blocker.write_text("")
    cache = DiskCache("cpu-runtime", ".so", root=blocker / "fuser")
    with pytest.warns(RuntimeWarning, match=r"cannot write the install folder \(what is built once per user"):
        cache.store("k", Binary(b"x"))
    disk_cache._unwritable.discard(blocker / "fuser" / "cpu-runtime")



@pytest.mark.parametrize("under", [False, True], ids=["a file", "under a file"])
def test_a_shared_cache_dir_that_is_a_file_warns_once_and_falls_back(tmp_path, monkeypatch, under):
    """FUSER_SHARED_CACHE_DIR naming a file: what is built once per installation goes to
    FUSER_CACHE_DIR, with one warning naming the variable, as FUSER_CACHE_DIR gets one."""
    from fuser.lowering.backends import disk_cache

    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FUSER_SHARED_CACHE_DIR", str(blocker / "shared" if under else blocker))
    monkeypatch.setenv("FUSER_CACHE_DIR", str(tmp_path / "kernels"))
    with pytest.warns(RuntimeWarning, match=r"cannot write the shared cache folder \(FUSER_SHARED_CACHE_DIR\) "
                                            r".*a_file.* not a folder; keeping what is built once per installation "
                                            r"in FUSER_CACHE_DIR \(.*kernels\) instead") as record:
        assert disk_cache.install_roots() == [tmp_path / "kernels"]
    assert len(record) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per folder and process
        assert disk_cache.install_roots() == [tmp_path / "kernels"]


def test_stale_temporary_folders_of_dead_processes_are_swept(tmp_path):
    """kill -9 during g++ left fuser-cxx-* folders; with no writable install root every process
    left a fuser-rt-* folder. They are removed at exit, and swept when older than a day and
    their process is gone."""
    import os
    import time

    from fuser.lowering.backends import temp_files

    dead_pid = 2**22 + 12345  # above pid_max's default: no such process
    old = time.time() - 2 * temp_files.STALE_AFTER_S
    stale = [tmp_path / f"fuser-cxx-{dead_pid}-abc", tmp_path / f"fuser-rt-{dead_pid}-def"]
    young = tmp_path / f"fuser-cxx-{dead_pid}-new"
    alive = tmp_path / f"fuser-rt-{os.getppid()}-xyz"
    other = tmp_path / "unrelated-folder"
    for folder in (*stale, young, alive, other):
        folder.mkdir()
        (folder / "module.so").write_bytes(b"x")
    for folder in (*stale, alive, other):
        os.utime(folder, (old, old))
    removed = temp_files.sweep_stale(str(tmp_path))
    assert sorted(removed) == sorted(stale)
    assert young.exists() and alive.exists() and other.exists()


def test_a_process_leaves_no_temporary_folder_behind(tmp_path):
    """A process whose install roots cannot be written keeps its host runtime in a private folder
    until exit, then removes it."""
    import os

    if not cr.cpu_compiler_available():
        pytest.skip("no g++ for the CPU backend")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".cache").write_text("a file where the folder would go")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    cache = tmp_path / "read-only-cache"
    cache.mkdir()
    cache.chmod(0o500)
    script = textwrap.dedent("""
        import numpy as np
        from fuser import FusionDefinition, DataType
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
            fd.add_output(fd.ops.exp(x))
        print(fd.execute([np.zeros(3, np.float32)], backend="cpu")[0].tolist())
    """)
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "FUSER_CACHE_DIR": str(cache)}
    try:
        done = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True,
                              env=env, timeout=300)
    finally:
        cache.chmod(0o700)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[1.0, 1.0, 1.0]"
    assert [p.name for p in tmp.iterdir() if p.name.startswith("fuser-")] == []
