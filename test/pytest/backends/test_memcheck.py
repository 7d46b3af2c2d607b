"""Memcheck on the cpu backend (FUSER_MEMCHECK=1, on for the whole suite via conftest.py): every
fuser_ld*/fuser_st* must stay inside the pointer parameter it goes through, else the launch fails
with a MemcheckError naming kernel, block, thread, parameter, index and extent."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from fuser.lowering.backends import cpu_runtime as cr
from fuser.lowering import settings
from fuser.lowering.errors import LaunchError, MemcheckError
from fuser.lowering.runtime import with_prelude

pytestmark = pytest.mark.skipif(not cr.cpu_compiler_available(), reason="no g++ for the CPU backend")

KERNELS = with_prelude(r"""
// Off by one: `<=` lets thread n load x[n] and store y[n].
extern "C" __global__ void copy_off_by_one(int n, const float* __restrict__ x, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) fuser_st(y, i, fuser_ld(x, i));
}
FUSER_HOST_LAUNCHER(copy_off_by_one)

// Stores one past the end after a barrier (run with fibers).
extern "C" __global__ void store_past_end(int n, float* __restrict__ y) {
  __shared__ float s[64];
  s[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  if (threadIdx.x == 0) fuser_st(y, n, s[1]);
}
FUSER_HOST_LAUNCHER(store_past_end)

// Vector loads of 4 floats; the last one reaches past x when x has 4*threads - 1 elements.
extern "C" __global__ void vec_copy(const float* __restrict__ x, float* __restrict__ y) {
  float v[4];
  fuser_ld_vec<4>(x, 4 * threadIdx.x, v);
  fuser_st_vec<4>(y, 4 * threadIdx.x, v);
}
FUSER_HOST_LAUNCHER(vec_copy)

// A pointer derived inside the kernel is checked against the parameter that contains it.
extern "C" __global__ void derived_pointer(int offset, const int* __restrict__ x, int* __restrict__ y) {
  const int* row = x + offset;
  fuser_st(y, threadIdx.x, fuser_ld(row, threadIdx.x));
}
FUSER_HOST_LAUNCHER(derived_pointer)

// A negative index.
extern "C" __global__ void load_before_start(const float* __restrict__ x, float* __restrict__ y) {
  fuser_st(y, threadIdx.x, fuser_ld(x, (int)threadIdx.x - 1));
}
FUSER_HOST_LAUNCHER(load_before_start)
""")


def module(memcheck: bool) -> cr.CpuModule:
    compiler = cr.CpuCompiler(memcheck=memcheck)
    return cr.CpuModule(compiler.compile(KERNELS, compiler.key(KERNELS)).data, KERNELS)


@pytest.fixture(scope="module")
def checked() -> cr.CpuModule:
    return module(True)


@pytest.mark.skipif(os.environ.get("FUSER_MEMCHECK") == "0", reason="suite run with FUSER_MEMCHECK=0")
def test_the_suite_runs_with_memcheck():
    assert settings.memcheck()


def test_the_suite_uses_a_private_kernel_cache():
    assert not settings.cache_root().is_relative_to(settings.Path.home() / ".cache" / "fuser")


@pytest.mark.parametrize("needs_sync", [False, True])
def test_off_by_one_in_a_hand_written_kernel(checked, needs_sync):
    n = 1000
    x = np.arange(n, dtype=np.float32)
    y_alloc = np.full(n + 1, -1.0, np.float32)  # y is a view: its last element is not the allocation's
    with pytest.raises(MemcheckError) as info:
        checked.launch("copy_off_by_one", 4, 256, [n, x, y_alloc[:n]], needs_sync=needs_sync)
    err = info.value
    assert str(err) == ("kernel 'copy_off_by_one' block (3,0,0): thread (232,0,0): out-of-bounds load of 4 bytes: "
                        "x[1000], but x has 1000 elements (4000 bytes)")
    assert (err.kernel, err.param, err.index, err.extent) == ("copy_off_by_one", "x", 1000, 1000)
    assert isinstance(err, LaunchError) and isinstance(err, IndexError)
    assert y_alloc[n] == -1.0  # the faulting thread stopped before its store


def test_unchecked_module_runs_the_same_bug_silently():
    n = 1000
    x_alloc = np.arange(n + 1, dtype=np.float32)
    y_alloc = np.full(n + 1, -1.0, np.float32)
    module(False).launch("copy_off_by_one", 4, 256, [n, x_alloc[:n], y_alloc[:n]], needs_sync=False)
    assert y_alloc[n] == n  # wrote past the end of the y it was given


def test_store_past_end_with_fibers(checked):
    y = np.zeros(64, np.float32)
    with pytest.raises(MemcheckError, match=r"block \(0,0,0\): thread \(0,0,0\): out-of-bounds store of 4 bytes: "
                                            r"y\[64\], but y has 64 elements \(256 bytes\)"):
        checked.launch("store_past_end", 1, 64, [64, y], needs_sync=True)
    checked.launch("store_past_end", 1, 64, [63, y], needs_sync=True)
    assert y[63] == 1.0


def test_vector_access_checks_all_its_elements(checked):
    y = np.zeros(4 * 32, np.float32)
    checked.launch("vec_copy", 1, 32, [np.ones(4 * 32, np.float32), y], needs_sync=False)
    with pytest.raises(MemcheckError, match=r"thread \(31,0,0\): out-of-bounds load of 16 bytes: x\[124\] \(vector\), "
                                            r"but x has 127 elements"):
        checked.launch("vec_copy", 1, 32, [np.ones(4 * 32 - 1, np.float32), y], needs_sync=False)


def test_negative_index(checked):
    with pytest.raises(MemcheckError, match=r"thread \(0,0,0\): out-of-bounds load of 4 bytes: x\[-1\]") as info:
        checked.launch("load_before_start", 1, 8, [np.ones(8, np.float32), np.zeros(8, np.float32)],
                       needs_sync=False)
    assert info.value.index == -1


def test_pointer_derived_in_the_kernel(checked):
    x, y = np.arange(64, dtype=np.int32), np.zeros(32, np.int32)
    checked.launch("derived_pointer", 1, 32, [32, x, y], needs_sync=False)
    np.testing.assert_array_equal(y, x[32:])
    with pytest.raises(MemcheckError, match=r"thread \(31,0,0\): .* x\[64\], but x has 64 elements") as info:
        checked.launch("derived_pointer", 1, 32, [33, x, y], needs_sync=False)
    assert (info.value.param, info.value.index) == ("x", 64)


def test_checked_launch_counts_the_same_bytes(checked):
    n = 1000
    x, y = np.arange(n + 1, dtype=np.float32), np.zeros(n + 1, np.float32)
    stats = checked.launch("copy_off_by_one", 4, 256, [n, x, y], needs_sync=False)
    np.testing.assert_array_equal(x, y)
    assert stats.bytes_loaded == stats.bytes_stored == 4 * (n + 1)


def test_a_bound_launch_is_checked_natively_as_through_ctypes(checked):
    """A launch plan's launch of a checked module: the native launcher passes each pointer's
    region (its base the call's pointer) as the Python path does, and raises the same error."""
    from fuser.lowering.backends import gpu_launcher

    if gpu_launcher.status() != "native":
        pytest.skip(f"the native launcher is not built here: {gpu_launcher.status()}")
    n = 1000
    x, y = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    bound = checked.bind("copy_off_by_one", 4, 256, [n, cr.PointerSlot(x.nbytes), cr.PointerSlot(y.nbytes)],
                         needs_sync=False)
    assert bound.native is not None and cr.HOST_RECORD_HEADER.unpack_from(bound.native.args[0])[-1] & cr.HOST_REGIONS
    errors = []
    for native in (bound.native, None):
        bound.native = native
        with pytest.raises(MemcheckError) as info:
            bound([x.ctypes.data, y.ctypes.data])
        errors.append(info.value)
    assert str(errors[0]) == str(errors[1]) and "copy_off_by_one" in str(errors[0])
    assert [(e.param, e.index, e.extent) for e in errors] == [("x", n, n)] * 2
    ok = checked.bind("copy_off_by_one", 4, 256, [n - 1, cr.PointerSlot(x.nbytes),
                                                                 cr.PointerSlot(y.nbytes)], needs_sync=False)
    assert ok([x.ctypes.data, y.ctypes.data]) == (4 * n, 4 * n)
    np.testing.assert_array_equal(x, y)


def test_memcheck_is_a_compile_flag_and_part_of_the_cache_key(monkeypatch):
    assert cr.CpuCompiler(memcheck=True).key(KERNELS) != cr.CpuCompiler(memcheck=False).key(KERNELS)
    monkeypatch.setenv("FUSER_MEMCHECK", "0")
    assert cr.MEMCHECK_FLAG not in cr.CpuCompiler().flags
    monkeypatch.setenv("FUSER_MEMCHECK", "1")
    assert cr.MEMCHECK_FLAG in cr.CpuCompiler().flags
    monkeypatch.setenv("FUSER_MEMCHECK", "yes")
    with pytest.raises(settings.SettingError, match="FUSER_MEMCHECK='yes': expected 0 or 1"):
        cr.CpuCompiler()


# ------------------------------------------------------------------------------------------------
# Fusions: an index computed inside the fusion, which the host-side index check cannot see
# ------------------------------------------------------------------------------------------------

def computed_index_fusion() -> FusionDefinition:
    """take_along_axis(x, sum(counts, 1)): the index comes out of a reduction, so the host cannot
    check it before launch; the kernel does (lowering/execution/index_errors.py) unless told not to."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        counts = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
        idx = fd.ops.add(fd.ops.sum(counts, dims=[1], keepdim=True), fd.define_scalar(5, dtype=DataType.Int))
        fd.add_output(fd.ops.take_along_axis(x, idx, 1))
    return fd


def test_out_of_range_computed_index_in_a_fusion(monkeypatch):
    monkeypatch.setenv("FUSER_MEMCHECK", "1")  # also when the suite runs with FUSER_MEMCHECK=0
    settings.reload()
    fd = computed_index_fusion()
    x = np.random.default_rng(0).random((6, 40), dtype=np.float32)
    counts = np.ones((6, 30), np.int64)
    counts[:, 0] = -30  # index = sum + 5 = 4 in every row
    (got,) = fd.execute([x, counts], backend="cpu")
    np.testing.assert_array_equal(got, x[:, 4:5])

    counts[5, 0] = 100  # last row: index 134, past the end of x
    with pytest.raises(IndexError):
        fd.execute([x, counts], backend="reference")
    with pytest.raises(IndexError, match=r"index 134 is out of range .* of extent 40"):
        fd.execute([x, counts], backend="cpu")  # the in-kernel check
    # Without the in-kernel check the kernel reads out of bounds; memcheck is what catches it.
    with pytest.raises(MemcheckError) as info:
        fd.execute([x, counts], backend="cpu", _disable_options=["kernel_index_checks"])
    err = info.value
    assert err.index == 5 * 40 + 134 and err.extent == 6 * 40
    assert err.param.startswith("in") and "fusion input 0 (f32[?, ?])" in err.param
    assert "out-of-bounds load of 4 bytes" in str(err) and "shape [6, 40]" in str(err)
    monkeypatch.undo()
    settings.reload()


def test_memcheck_switched_on_mid_process_recompiles_a_cached_fusion(monkeypatch):
    """A fusion executed unchecked, then with FUSER_MEMCHECK=1: the second call must not reuse
    the unchecked kernels (the backend's build variant is part of the compiled-kernel key)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.exp(x))
    data = np.ones(8, np.float32)
    monkeypatch.setenv("FUSER_MEMCHECK", "0")
    settings.reload()  # the snapshot an execute reads (settings.launch_settings)
    try:
        fd.execute([data], backend="cpu")
        monkeypatch.setenv("FUSER_MEMCHECK", "1")
        settings.reload()
        fd.execute([data], backend="cpu")
    finally:
        monkeypatch.undo()
        settings.reload()
    assert fd.cache_info().misses == 2
