"""lowering.settings: every environment variable is checked where it is read, and a bad value
names the variable and what it accepts; backend=None says when and why it falls back."""

from __future__ import annotations

import os
import shutil
import sys
import warnings

import numpy as np
import pytest

from fuser.lowering.backends import cpu_runtime as cr
from fuser.lowering import backends
from fuser.lowering import settings
from fuser.lowering.backends import CPU, CUDA, REFERENCE, default_backend, get_backend
from fuser.lowering.execution.cache import FusionCache
from fuser import DataType, FusionDefinition
from fuser.lowering.errors import CompileError, FuserError
from fuser.lowering.runtime import with_prelude


@pytest.mark.parametrize("value", ["", "abc", "-1", "2.5"])
def test_bad_cpu_threads_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("FUSER_CPU_THREADS", value)
    with pytest.raises(settings.SettingError, match=rf"FUSER_CPU_THREADS={value!r}: expected an integer from 0 to 1024"):
        settings.cpu_threads()


@pytest.mark.parametrize("value", ["1025", "1000000", "2147483648", "4294967297"])
def test_cpu_threads_beyond_the_cap_or_int32_are_refused(monkeypatch, value):
    """1000000 killed the process in libgomp ("Thread creation failed"), with no Python
    exception; 4294967297 became 1 thread and 2147483648 a negative count in the launch config."""
    monkeypatch.setenv("FUSER_CPU_THREADS", value)
    with pytest.raises(settings.SettingError, match=rf"FUSER_CPU_THREADS={value!r}: expected an integer from 0 to 1024"):
        settings.cpu_threads()
    monkeypatch.setenv("FUSER_CPU_THREADS", str(settings.MAX_CPU_THREADS))
    assert settings.cpu_threads() == 1024


@pytest.mark.skipif(not cr.cpu_compiler_available(), reason="no g++ for the CPU backend")
def test_bad_cpu_threads_at_launch_is_a_clear_error(monkeypatch):
    program = CPU.program(with_prelude('extern "C" __global__ void nop() {}\nFUSER_HOST_LAUNCHER(nop)\n'))
    monkeypatch.setenv("FUSER_CPU_THREADS", "abc")
    # Launches read the settings snapshot; settings.reload() re-reads it (and checks it).
    with pytest.raises(ValueError, match="FUSER_CPU_THREADS='abc'") as info:
        settings.reload()
    assert "invalid literal" not in str(info.value)
    monkeypatch.setenv("FUSER_CPU_THREADS", " 2 ")
    try:
        assert settings.reload().cpu_threads == 2
        assert program.launch("nop", 4, 8, []) == cr.LaunchStats(0, 0)
    finally:
        monkeypatch.undo()
        settings.reload()


def test_cache_size(monkeypatch):
    monkeypatch.setenv("FUSER_CACHE_SIZE", "")
    with pytest.raises(settings.SettingError, match="FUSER_CACHE_SIZE='': expected a positive integer"):
        FusionCache()
    monkeypatch.setenv("FUSER_CACHE_SIZE", "0")
    with pytest.raises(settings.SettingError, match="FUSER_CACHE_SIZE='0'"):
        settings.cache_size()
    monkeypatch.delenv("FUSER_CACHE_SIZE")
    assert settings.cache_size() == settings.DEFAULT_CACHE_SIZE


def test_unknown_log_channel_is_ignored_with_a_warning(monkeypatch):
    monkeypatch.setenv("FUSER_LOG", "dump, recompile")
    with pytest.warns(UserWarning, match=r"FUSER_LOG='dump, recompile': unknown channel\(s\) dump ignored; "
                                         r"accepted: recompile"):
        assert settings.log_channels() == {"recompile"}


def test_paths_and_programs_default_when_blank(monkeypatch, tmp_path):
    monkeypatch.setenv("FUSER_CACHE_DIR", "")
    monkeypatch.setenv("FUSER_CXX", " ")
    assert settings.cache_root().parts[-2:] == (".cache", "fuser") and settings.cxx() == "g++"
    monkeypatch.setenv("FUSER_CACHE_DIR", str(tmp_path))
    assert settings.cache_root() == tmp_path


@pytest.fixture
def no_gpu_and_fresh_default(monkeypatch):
    monkeypatch.setattr(CUDA, "available", lambda: (False, "no GPU (test)"))
    monkeypatch.setattr(backends, "gpu_present", lambda: False)
    default_backend.cache_clear()
    yield
    default_backend.cache_clear()


def test_missing_cxx_makes_backend_none_warn_and_fall_back(monkeypatch, no_gpu_and_fresh_default):
    monkeypatch.setenv("FUSER_CXX", "/nonexistent/g++-missing")
    with pytest.warns(RuntimeWarning, match=r"backend=None falls back to 'reference'.*FUSER_CXX='/nonexistent/g\+\+-missing'"):
        assert get_backend(None) is REFERENCE
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        assert get_backend(None) is REFERENCE
    with pytest.raises(FuserError, match="FUSER_CXX='/nonexistent/g\\+\\+-missing' not found"):
        CPU.program(with_prelude("// anything\n"))


def test_a_cxx_that_is_no_cpp_compiler_is_named_as_such(monkeypatch):
    """FUSER_CXX=python3 runs (it has a --version) but compiles nothing: the error names it, the
    file it resolved to, and says it is no C++20 compiler (it used to read "g++ failed")."""
    monkeypatch.setenv("FUSER_CXX", sys.executable)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.neg(x))
    with pytest.raises(CompileError) as caught:
        fd.execute([np.ones(3, np.float32)], backend="cpu")
    message = caught.value.message
    assert message.startswith(f"FUSER_CXX={sys.executable!r}, which is {os.path.realpath(sys.executable)} (Python ")
    assert "is not a C++20 compiler" in message and "g++" not in message.split(";")[0]


@pytest.mark.skipif(not cr.cpu_compiler_available(), reason="no g++ for the CPU backend")
def test_a_kernel_g_plus_plus_rejects_names_the_compiler_that_ran(monkeypatch):
    monkeypatch.delenv("FUSER_CXX", raising=False)
    with pytest.raises(CompileError) as caught:
        cr.CpuCompiler().compile(with_prelude("this is not C++;\n"))
    path = os.path.realpath(shutil.which("g++"))
    assert caught.value.message.startswith(f"the C++ compiler 'g++' (the default: FUSER_CXX is unset), which is {path} (")
    assert caught.value.message.endswith("failed to compile the kernel source for the CPU (exit 1)")


@pytest.mark.skipif(not cr.cpu_compiler_available(), reason="no g++ for the CPU backend")
def test_a_gpu_fuser_cannot_use_is_named_once(monkeypatch, no_gpu_and_fresh_default):
    """A GPU machine without pycuda (say) must not run the emulation silently."""
    monkeypatch.setattr(CUDA, "available", lambda: (False, "pycuda is not installed (pip install fuser[cuda])"))
    monkeypatch.setattr(backends, "gpu_present", lambda: True)
    with pytest.warns(RuntimeWarning, match=r"backend=None runs the cpu backend .* although this machine has an "
                                            r"NVIDIA GPU: cuda: pycuda is not installed"):
        assert get_backend(None) is CPU
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        assert get_backend(None) is CPU


def test_an_unknown_disable_option_names_the_variable(monkeypatch):
    monkeypatch.setenv("FUSER_DISABLE", "kernel_index_checks,bogus")
    with pytest.raises(settings.SettingError, match=r"FUSER_DISABLE='kernel_index_checks,bogus': unknown option "
                                                    r"'bogus'; expected a comma-separated list of "
                                                    r"concretize_resize_extents, kernel_index_checks"):
        settings.reload()
    monkeypatch.undo()
    settings.reload()


@pytest.mark.skipif(not cr.cpu_compiler_available(), reason="no g++ for the CPU backend")
def test_usable_cpu_is_chosen_quietly_without_gpu(no_gpu_and_fresh_default):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_backend(None) is CPU


def test_fallback_still_runs_the_fusion(monkeypatch, no_gpu_and_fresh_default):
    from fuser import DataType, FusionDefinition

    monkeypatch.setenv("FUSER_CXX", "/nonexistent/c++")
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.neg(x))
    with pytest.warns(RuntimeWarning, match="falls back"):
        (out,) = fd.execute([np.ones(3, np.float32)])
    np.testing.assert_array_equal(out, -np.ones(3, np.float32))


@pytest.mark.skipif(not cr.cpu_compiler_available(), reason="no g++ for the CPU backend")
def test_a_run_with_both_cache_folders_set_leaves_home_untouched(tmp_path):
    """The suite sets FUSER_CACHE_DIR and FUSER_SHARED_CACHE_DIR (conftest.py): a process that
    compiles and runs a fusion then writes nothing under $HOME."""
    import os
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    code = ("import numpy as np\nfrom fuser import FusionDefinition\n"
            "with FusionDefinition() as fd:\n    fd.add_output(fd.ops.exp(fd.define_tensor([-1])))\n"
            "print(fd.execute([np.ones(5, np.float32)], backend='cpu')[0].sum())\n")
    env = dict(os.environ, HOME=str(home), FUSER_CACHE_DIR=str(tmp_path / "kernels"))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert os.environ["FUSER_SHARED_CACHE_DIR"]
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []
