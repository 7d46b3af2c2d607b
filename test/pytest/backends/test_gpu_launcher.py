"""lowering.backends.gpu_launcher: the native launcher, against a recording stub of the CUDA driver.

The launcher takes the driver's entry points from its launch records, so a stub library compiled
here (benchmarks/launch_path.py's StubDriver: cuLaunchKernel, cuCtxGetCurrent, cuCtxPushCurrent_v2,
cuCtxPopCurrent_v2, cuGetErrorName, recording what they receive) stands in for libcuda: every test below runs without a GPU and checks, byte for byte, what the
driver would receive, against the Python path's `struct` packing (gpu_runtime.BoundGpuLaunch with
the native launcher off, its ctypes call redirected to the same stub). The GPU test at the end
checks a real launch.
"""

from __future__ import annotations

import struct
import subprocess
import sysconfig
import threading
from pathlib import Path

import numpy as np
import pytest

from fuser.lowering.backends import cuda_driver, gpu_launcher
from fuser.lowering.backends import gpu_runtime as gr
from fuser.benchmarks.launch_path import StubDriver
from fuser.lowering.backends.cpu_runtime import cpu_compiler_available

_HEADERS = Path(sysconfig.get_paths()["include"]) / "Python.h"
pytestmark = [pytest.mark.skipif(not cpu_compiler_available(), reason="needs the cpu backend's C++ compiler"),
              pytest.mark.skipif(not _HEADERS.is_file(), reason=f"needs Python's headers ({_HEADERS})")]

@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    return StubDriver.build(tmp_path_factory.mktemp("stub"))


@pytest.fixture
def driver(stub, monkeypatch):
    """The stub as the process's CUDA driver, for both launch paths; the primary context is 0xC0."""
    monkeypatch.setattr(gpu_launcher, "driver_entry_points", lambda: stub.entry_points)
    monkeypatch.setattr(cuda_driver, "_lib", lambda: stub.lib)
    stub.reset()
    return stub


def _bound(formats, template, slots, grid=(7, 2, 1), block=(128, 1, 1), shared=0, fn=0xF00D, context=0xC0):
    return gr.BoundGpuLaunch(fn, "k", grid, block, formats, list(template), list(slots), shared, context)


def _python_path(bound):
    with gr.BoundGpuLaunch.through_python():
        return _bound_like(bound)


def _bound_like(bound):
    return gr.BoundGpuLaunch(bound.fn, bound.kernel_name, bound.grid, bound.block, bound.format.format,
                             bound.template, bound.slots, bound.shared_bytes, bound.context)


def test_the_launcher_builds_here():
    assert gpu_launcher.status() == "native", gpu_launcher.status()
    assert gpu_launcher.native_launch() is not None


ARGUMENT_LISTS = [
    ("PPPiiq", [0, 0, 0, 5, -6, 7], [0, 1, 2]),
    ("iPdPH?f", [3, 0, 2.5, 0, 0x3E00, True, -1.25], [1, 3]),  # alignment gaps before each pointer and double
    ("P", [0], [0]),
    ("fq", [1.5, -(2 ** 40)], []),  # no pointer at all
    ("HHHP", [1, 2, 3, 0], [3]),
]


@pytest.mark.parametrize("formats, template, slots", ARGUMENT_LISTS)
def test_the_driver_receives_what_the_python_path_packs(driver, formats, template, slots):
    native = _bound(formats, template, slots, shared=1024)
    python = _python_path(native)
    assert native.native is not None and python.native is None
    pointers = [0x7F0000001000 + 0x100 * k for k in range(len(slots))]
    native(pointers, 0x5151)
    python(pointers, 0x5151)
    first, second = driver.calls()
    assert first == second
    values = list(template)
    for slot, p in zip(slots, pointers):
        values[slot] = p
    assert first["params"] == struct.pack(formats, *values)
    assert (first["function"], first["grid"], first["block"], first["shared"], first["stream"]) == \
        (0xF00D, (7, 2, 1), (128, 1, 1), 1024, 0x5151)


def test_pointers_above_2_63_numpy_integers_and_the_null_stream(driver):
    bound = _bound("PP", [0, 0], [0, 1])
    bound([0xFFFF_8000_0000_0000, 0], 0)
    bound([np.uint64(0x7F00_0000_1000), np.int64(16)], np.uint64(0x51))  # as struct.pack takes them
    first, second = driver.calls()
    assert first["params"] == struct.pack("PP", 0xFFFF_8000_0000_0000, 0) and first["stream"] == 0
    assert second["params"] == struct.pack("PP", 0x7F00_0000_1000, 16) and second["stream"] == 0x51


def test_the_context_is_pushed_only_where_another_is_current(driver):
    bound = _bound("P", [0], [0], context=0xC0)
    bound([0x1000], 1)  # the record's context is current (torch made the primary context current)
    assert driver.lib.stub_pushes() == 0 and driver.calls()[-1]["context"] == 0xC0
    driver.reset(current_context=0)  # a thread with no context: pushed for the launch, popped after
    bound([0x1000], 1)
    assert (driver.lib.stub_pushes(), driver.lib.stub_pops()) == (1, 1)
    assert driver.calls()[-1]["context"] == 0xC0 and driver.lib.stub_current() is None
    driver.reset(current_context=0xAB)  # another context current: the same, and it is current again after
    bound([0x1000], 1)
    assert driver.calls()[-1]["context"] == 0xC0 and driver.lib.stub_current() == 0xAB


def test_a_refused_launch_raises_the_python_paths_error(driver):
    bound = _bound("P", [0], [0], grid=(3, 1, 1))
    python = _python_path(bound)
    messages = []
    for launch in (bound, python):
        driver.reset(result=1)
        with pytest.raises(cuda_driver.DriverError) as info:
            launch([0x1000], 0x77)
        assert info.value.code == 1
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "launching kernel k failed: CUDA_ERROR_INVALID_VALUE (1); grid (3, 1, 1)" in messages[0]
    assert "stream 0x77" in messages[0]


def test_wrong_arguments_are_python_errors_not_launches(driver):
    bound = _bound("PP", [0, 0], [0, 1])
    with pytest.raises(TypeError, match="2 pointer slots, 1 pointers given"):
        bound([0x1000], 0)
    with pytest.raises(TypeError):
        bound([0x1000, "x"], 0)
    with pytest.raises(TypeError, match=r"launch\(record, stream, \*pointers\)"):
        bound.native(bound.record)
    with pytest.raises(ValueError, match="malformed record"):
        bound.native(bound.record[:-1], 0, 1, 2)
    assert driver.calls() == []


def test_records_refuse_what_the_launcher_cannot_take(driver):
    with pytest.raises(ValueError, match="argument 1 is a pointer slot, its format is 'i'"):
        gpu_launcher.launch_record(driver.entry_points, 1, 2, (1, 1, 1), (1, 1, 1), 0, "Pi", [0, 0], [1])
    too_big = "P" + "q" * (gpu_launcher.MAX_PARAM_BYTES // 8)
    assert gpu_launcher.launch_record(driver.entry_points, 1, 2, (1, 1, 1), (1, 1, 1), 0, too_big,
                                      [0] * len(too_big), [0]) is None
    bound = _bound(too_big, [0] * len(too_big), [0])  # such a launch takes the Python path
    assert bound.native is None
    bound([0x1000], 0)
    assert len(driver.calls()[0]["params"]) == struct.calcsize(too_big)


def test_without_pythons_headers_launches_take_the_python_path_and_say_why(driver, monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_launcher, "_loaded", None)  # as in a fresh process
    monkeypatch.setattr(gpu_launcher, "_python_include", lambda: tmp_path)
    assert gpu_launcher.status() == (f"python: Python's headers are not installed ({tmp_path}/Python.h is missing;"
                                     " install the python3-dev package of this Python)")
    bound = _bound("P", [0], [0])
    assert bound.native is None
    bound([0x1000], 0)
    assert driver.calls()[0]["params"] == struct.pack("P", 0x1000)


def test_fuser_disable_native_launcher_takes_the_python_path(driver, monkeypatch):
    monkeypatch.setenv("FUSER_DISABLE", "native_launcher")
    assert gpu_launcher.status() == "python: FUSER_DISABLE=native_launcher"
    assert gpu_launcher.native_launch() is None
    assert _bound("P", [0], [0]).native is None


def test_through_python_covers_earlier_binds_and_restores_them(driver):
    bound = _bound("P", [0], [0])
    native = bound.native
    with gr.BoundGpuLaunch.through_python():
        assert bound.native is None and _bound("P", [0], [0]).native is None
    assert bound.native is native


def test_threads_launch_concurrently_each_with_its_own_pointers(driver):
    bound = _bound("PPi", [0, 0, 9], [0, 1])
    errors = []

    def work(k):
        try:
            for _ in range(10):
                bound([0x1000 * (k + 1), 0x10], k)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    calls = driver.calls()
    assert len(calls) == 40
    assert all(c["params"] == struct.pack("PPi", 0x1000 * (c["stream"] + 1), 0x10, 9) for c in calls)


def test_the_launcher_is_built_once_per_installation(tmp_path):
    """A second process finds the launcher in the install root the first one built it into."""
    import os
    import sys

    env = {**os.environ, "FUSER_SHARED_CACHE_DIR": str(tmp_path)}
    script = ("from fuser.lowering.backends import gpu_launcher as g; s = g.status(); "
              "print(s, g.build_count())")
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert (first.stdout.split(), second.stdout.split()) == (["native", "1"], ["native", "0"])


# --------------------------------------------------------------------------- on a GPU


@pytest.mark.gpu
@pytest.mark.skipif(not gr.gpu_available()[0], reason=gr.gpu_available()[1])
def test_a_real_launch_through_the_native_launcher():
    torch = pytest.importorskip("torch")
    from fuser import DataType, FusionDefinition

    with FusionDefinition() as fd:
        x = fd.define_tensor([-1], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(x, fd.define_scalar(2.0)))
    a = torch.arange(1000, dtype=torch.float32, device="cuda")
    fd.execute([a], backend="cuda")
    (out,) = fd.execute([a], backend="cuda")  # the plan's bound launches
    torch.testing.assert_close(out, a * 2)
    bound = [b for b in gr.BoundGpuLaunch.instances if b.native is not None]
    assert bound, gpu_launcher.status()
    np.testing.assert_array_equal(out.cpu().numpy(), np.arange(1000, dtype=np.float32) * 2)
