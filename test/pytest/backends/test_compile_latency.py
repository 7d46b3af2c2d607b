"""Compile latency (issue #14): what NVRTC is given, what it emits, and what is built once.

Functional checks run everywhere (NVRTC checks skip, saying why, without the nvrtc extra):
- no generated kernel includes a CUDA header, so NVRTC needs no include path: one with 16-bit
  floats or fp8 (even only in an intermediate value) defines FUSER_NEED_F16 / FUSER_NEED_FP8 and
  gets fuser's own types (runtime/fuser_f16.h), which compile to the cubin the toolkit's headers
  give; a hand-written source that includes the toolkit's headers gets them installed once;
- the PTX/cubin decision as a table (driver version x compiler version), and PTX output;
- NVRTC's bundled headers, the precompiled emulation header and the cpu backend's host runtime
  are built once per user and reused by a second FUSER_CACHE_DIR; a module links against the
  runtime instead of compiling it;
- the Philox header is in a kernel's source only when the kernel has a random op.
Timing goals run only with FUSER_PERF=1 (a shared machine makes them noisy)."""

from __future__ import annotations

import os
import resource
import shutil
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from fuser.lowering.backends import compile as cc
from fuser.lowering.backends import cpu_runtime
from fuser.lowering.codegen.render import header_macros
from fuser.lowering.backends import prebuilt
from fuser.lowering.segmentation.segment import plan_kernels

from fuser import DataType, FusionDefinition
from fuser_dialect.fusion import the_fusion

NEED_F16 = "#define FUSER_NEED_F16"


@pytest.fixture
def fresh_install(tmp_path, monkeypatch):
    """An empty home (no per-user install cache, FUSER_SHARED_CACHE_DIR unset so the home
    default is used) and an empty FUSER_CACHE_DIR."""
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("FUSER_SHARED_CACHE_DIR", raising=False)
    monkeypatch.setenv("FUSER_CACHE_DIR", str(cache))
    cc.clear_memory_cache()
    yield home, cache
    cc.clear_memory_cache()


def nvrtc():
    try:
        return cc.find_compiler("nvrtc")
    except cc.CompilerUnavailable as e:
        pytest.skip(f"nvrtc unavailable: {e}")


def softmax_fusion(dtype: DataType, middle: DataType | None = None) -> FusionDefinition:
    """Softmax over rows of `dtype`; `middle`: the exponentials pass through that dtype."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        xf = fd.ops.cast(x, DataType.Float)
        e = fd.ops.exp(fd.ops.sub(xf, fd.ops.max(xf, dims=[1], keepdim=True)))
        if middle is not None:
            e = fd.ops.cast(fd.ops.cast(e, middle), DataType.Float)
        fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)), dtype))
    return fd


def program_source(fd: FusionDefinition, x: np.ndarray) -> str:
    """The fusion's one program, as the cpu backend compiled it (checked against numpy)."""
    (y,) = fd.execute([x], backend="cpu")
    xf = x.astype(np.float64)
    e = np.exp(xf - xf.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y.astype(np.float64), e / e.sum(axis=1, keepdims=True), rtol=2e-2, atol=1e-6)
    (kernel,) = fd.last_kernels()
    return kernel.source


def header_folders(*roots) -> list[str]:
    return [str(p) for root in roots for p in root.rglob("nvrtc-include")]


# --------------------------------------------------------------------------- 16-bit headers


@pytest.mark.parametrize("dtype, middle, needs", [
    (DataType.Float, None, frozenset()),
    (DataType.Double, None, frozenset()),
    (DataType.BFloat16, None, frozenset({"FUSER_NEED_F16"})),
    (DataType.Half, None, frozenset({"FUSER_NEED_F16"})),
    (DataType.Float, DataType.BFloat16, frozenset({"FUSER_NEED_F16"})),  # f32 in and out
])
def test_header_macros_come_from_the_kernels_values(dtype, middle, needs):
    fd = softmax_fusion(dtype, middle)
    (plan,) = plan_kernels(the_fusion(fd.module))
    assert header_macros(plan) == needs


def test_f32_kernel_includes_no_cuda_header(fresh_install):
    source = program_source(softmax_fusion(DataType.Float), np.random.default_rng(0).random((5, 37), np.float32))
    assert source.startswith("// fuser_prelude.cuh")  # no macro lines before the prelude
    result = cc.compile_cuda(source, "sm_90", backend=nvrtc().name)
    assert result.cubin[:4] == b"\x7fELF"
    # NVRTC found everything without an include path: nothing was installed anywhere.
    assert header_folders(*fresh_install) == []


@pytest.mark.parametrize("dtype, middle", [
    (DataType.BFloat16, None), (DataType.Half, None), (DataType.Float, DataType.BFloat16),
])
def test_16_bit_kernels_include_no_cuda_header(fresh_install, dtype, middle):
    """fuser's own __half / __nv_bfloat16 (runtime/fuser_f16.h) are pasted in: the program
    includes nothing, so NVRTC compiles it with no include path and nothing is installed; g++
    compiles the same text against the CPU emulation's types (program_source checks it)."""
    npdt = {DataType.BFloat16: ml_dtypes.bfloat16, DataType.Half: np.float16}.get(dtype, np.float32)
    source = program_source(softmax_fusion(dtype, middle), np.random.default_rng(1).random((4, 65)).astype(npdt))
    assert source.startswith("#define FUSER_NEED_F16\n")
    assert "#include <" not in source and "FUSER_F16_H" in source
    assert cc.compile_cuda(source, "sm_90", backend=nvrtc().name).cubin[:4] == b"\x7fELF"
    assert header_folders(*fresh_install) == []


def test_fp8_kernel_includes_no_cuda_header(fresh_install):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.cast(fd.ops.cast(x, DataType.Float8_e4m3fn), DataType.Float))
    x = np.random.default_rng(2).standard_normal(100).astype(np.float32) * 10
    (y,) = fd.execute([x], backend="cpu")
    np.testing.assert_array_equal(y, x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32))
    source = fd.last_kernels()[0].source
    assert source.startswith("#define FUSER_NEED_FP8\n") and "#define FUSER_NEED_F16" not in source
    assert "#include <" not in source and "struct __nv_fp8_e4m3" in source
    assert cc.compile_cuda(source, "sm_90", backend=nvrtc().name).cubin[:4] == b"\x7fELF"
    assert header_folders(*fresh_install) == []


def test_f32_kernel_carries_no_16_bit_types():
    source = program_source(softmax_fusion(DataType.Float), np.ones((2, 9), np.float32))
    assert "FUSER_F16_H" not in source and "#define FUSER_NEED" not in source


def _with_toolkit_headers(source: str) -> str:
    """`source` with the pasted fuser_f16.h replaced by the CUDA toolkit's headers."""
    from fuser.lowering.runtime import RUNTIME_DIR

    own = (RUNTIME_DIR / "fuser_f16.h").read_text()
    assert own in source
    includes = ("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" if "#define FUSER_NEED_F16" in source else "") + \
               ("#include <cuda_fp8.h>\n" if "#define FUSER_NEED_FP8" in source else "")
    return source.replace(own, includes)


def test_own_16_bit_types_compile_to_the_toolkit_headers_cubin():
    """fuser_f16.h emits the instructions cuda_fp16.h / cuda_bf16.h emit (cvt.rn.f16.f32,
    cvt.rn.bf16.f32 from sm_80, cvt.f32.bf16 from sm_90...): the cubin of a bf16 cross-entropy,
    an f16 softmax and fp8 casts is byte for byte the one the toolkit's headers give, on an
    architecture with every native conversion and one without the bf16 ones."""
    from fuser.benchmarks.cases import parse_case

    compiler = nvrtc()
    headers = cc.nvrtc_headers(compiler._nvrtc, compiler.version)
    if not headers:
        pytest.skip(f"{compiler.label}: no CUDA toolkit headers to compare with")
    case = parse_case("ce_fwd_aot:bf16:64x4096")
    fd = case.build()
    fd.execute(case.inputs(), backend="cpu")
    sources = [fd.last_kernels()[0].source,
               program_source(softmax_fusion(DataType.Half), np.ones((3, 40), np.float16))]
    with FusionDefinition() as fp8:
        x = fp8.define_tensor(shape=[-1], dtype=DataType.Float8_e5m2)
        fp8.add_output(fp8.ops.cast(x, DataType.Half))
        fp8.add_output(fp8.ops.cast(fp8.ops.cast(x, DataType.Float), DataType.Float8_e4m3fn))
    fp8.execute([np.zeros(7, ml_dtypes.float8_e5m2)], backend="cpu")
    sources.append(fp8.last_kernels()[0].source)
    for source in sources:
        for arch in ("sm_90", "sm_80"):
            own = cc.compile_cuda(source, arch, backend="nvrtc").cubin
            toolkit = cc.compile_cuda(_with_toolkit_headers(source), arch, tuple(f"-I{d}" for d in headers),
                                      backend="nvrtc").cubin
            assert own == toolkit, f"{arch}: {source.splitlines()[0]}"


def test_toolkit_headers_are_installed_once_per_user(fresh_install, tmp_path, monkeypatch):
    """A source that includes the toolkit's headers itself (hand-written; generated kernels
    never do) gets NVRTC's bundled headers, installed once per user and NVRTC version."""
    home, cache = fresh_install
    source = ('#include <cuda_bf16.h>\nextern "C" __global__ void k(const __nv_bfloat16* x, float* y) '
              "{ y[threadIdx.x] = __bfloat162float(x[threadIdx.x]); }\n")
    compiler = nvrtc()
    installs = []
    real_install = cc.install_bundled_headers
    monkeypatch.setattr(cc, "install_bundled_headers", lambda *a: installs.append(a[1]) or real_install(*a))
    assert cc.compile_cuda(source, "sm_90", backend="nvrtc").origin == "compiled"
    folder = home / ".cache" / "fuser" / "nvrtc-include" / compiler.version
    if installs:  # this NVRTC bundles its headers (13.5+); older ones use a toolkit's
        assert installs == [folder]
        assert (folder / "cuda_bf16.h").is_file()
        assert header_folders(cache) == []  # not in the kernel cache
        assert [p.name for p in folder.parent.iterdir()] == [compiler.version]  # no leftover temporaries
    # A second kernel cache compiles the same source for real, with the installed headers.
    monkeypatch.setenv("FUSER_CACHE_DIR", str(tmp_path / "second"))
    cc.clear_memory_cache()
    installs.clear()
    assert cc.compile_cuda(source, "sm_90", backend="nvrtc").origin == "compiled"
    assert installs == []
    assert header_folders(tmp_path / "second") == []


def test_install_renames_a_whole_folder_and_a_second_installer_uses_it(tmp_path):
    compiler = nvrtc()
    if not cc.bundles_headers(compiler._nvrtc):
        pytest.skip(f"{compiler.label} bundles no headers")
    target = tmp_path / "nvrtc-include" / compiler.version
    assert cc.install_bundled_headers(compiler._nvrtc, target) == target
    marker = target / "cuda_fp16.h"
    stamp = marker.stat().st_mtime_ns
    assert cc.install_bundled_headers(compiler._nvrtc, target) == target  # lost the rename: theirs is used
    assert marker.stat().st_mtime_ns == stamp
    assert [p.name for p in target.parent.iterdir()] == [compiler.version]


def test_nvrtc_gets_minimal_when_it_has_it():
    compiler = nvrtc()
    options = compiler.base_options("sm_90", "cubin")
    assert ("-minimal" in options) == (compiler.version_tuple >= (12, 4))
    assert "--gpu-architecture=sm_90" in options
    assert "--gpu-architecture=compute_90" in compiler.base_options("sm_90", "ptx")


# --------------------------------------------------------------------------- PTX or cubin


@pytest.mark.parametrize("driver, toolkit, expected", [
    (None, (13, 5), "cubin"),   # no driver: a cubin is what can be checked and shipped
    (None, (12, 4), "cubin"),
    (13000, (13, 5), "cubin"),  # driver 580 (CUDA 13.0) cannot JIT NVRTC 13.5's PTX 9.5
    (13000, (13, 0), "ptx"),
    (13050, (13, 5), "ptx"),
    (13060, (13, 5), "ptx"),
    (12080, (13, 0), "cubin"),  # a CUDA 12 driver and a CUDA 13 compiler
    (13000, (12, 8), "ptx"),    # a newer driver JITs older PTX
    (12040, (12, 4), "ptx"),
    (12030, (12, 4), "cubin"),
])
def test_image_format_table(driver, toolkit, expected):
    assert cc.image_format(driver, toolkit) == expected


def test_virtual_arch():
    assert cc.virtual_arch("sm_90") == "compute_90"
    assert cc.virtual_arch("sm_90a") == "compute_90a"
    assert cc.virtual_arch(80) == "compute_80"


def test_backend_compiler_follows_the_driver(monkeypatch):
    compiler = nvrtc()
    driver = compiler.version_tuple[0] * 1000 + compiler.version_tuple[1] * 10
    monkeypatch.setattr(cc, "driver_version", lambda: driver)
    assert cc.CudaCompiler(compiler, "sm_90", ()).output == "ptx"
    monkeypatch.setattr(cc, "driver_version", lambda: driver - 10)
    assert cc.CudaCompiler(compiler, "sm_90", ()).output == "cubin"
    monkeypatch.setattr(cc, "driver_version", lambda: None)
    assert cc.CudaCompiler(compiler, "sm_90", ()).output == "cubin"
    with pytest.raises(ValueError, match="output 'sass'"):
        cc.CudaCompiler(compiler, "sm_90", (), "sass")


def test_ptx_output_is_cached_apart_and_nul_terminated(fresh_install):
    nvrtc()
    _, cache = fresh_install
    source = program_source(softmax_fusion(DataType.Float), np.ones((2, 9), np.float32))
    ptx = cc.compile_cuda(source, "sm_90", backend="nvrtc", output="ptx")
    cubin = cc.compile_cuda(source, "sm_90", backend="nvrtc")
    assert ptx.output == "ptx" and cubin.output == "cubin"
    assert ptx.cubin.endswith(b"\0") and ptx.cubin.count(b"\0") == 1
    assert b".target sm_90" in ptx.cubin and b".entry fuser_kernel_0_" in ptx.cubin
    assert len(list((cache / "ptx").glob("*.ptx"))) == 1 and len(list((cache / "cubin").glob("*.cubin"))) == 1
    cc.clear_memory_cache()
    again = cc.compile_cuda(source, "sm_90", backend="nvrtc", output="ptx")
    assert again.origin == "disk" and again.cubin == ptx.cubin


# --------------------------------------------------------------------------- built once per installation


def cpu_compiler():
    if not cpu_runtime.cpu_compiler_available():
        pytest.skip("no C++ compiler for the cpu backend")
    return "g++", cpu_runtime._compiler_identity("g++")


def test_precompiled_header_is_shared_by_cache_dirs(fresh_install, tmp_path, monkeypatch):
    cxx, identity = cpu_compiler()
    home, _ = fresh_install
    flags = (*cpu_runtime.BASE_FLAGS, "-DFUSER_TEST_PCH_SHARING")  # a key no other test builds
    monkeypatch.setattr(prebuilt, "_pch_dirs", {})
    first = prebuilt.precompiled_header(cxx, identity, flags)
    assert first is not None and first.parent == home / ".cache" / "fuser" / "cpu-pch"
    monkeypatch.setenv("FUSER_CACHE_DIR", str(tmp_path / "second"))
    monkeypatch.setattr(prebuilt, "_pch_dirs", {})
    built = []
    monkeypatch.setattr(prebuilt, "_build_precompiled_header", lambda *a: built.append(a))
    assert prebuilt.precompiled_header(cxx, identity, flags) == first
    assert built == []


def test_host_runtime_is_built_once_per_user_and_modules_link_against_it(fresh_install, tmp_path, monkeypatch):
    """The runtime (fibers, stacks, signal handling, grid loop) is a verified entry of the per-user
    install root; a module needs it (DT_NEEDED) and does not contain it."""
    cpu_compiler()
    home, cache = fresh_install
    flags = ("-DFUSER_TEST_RUNTIME_SHARING",)  # a runtime key no other test builds
    x = np.random.default_rng(2).random((3, 41), np.float32)
    # (Running the fusion may build the default runtime in the fresh home: counted before.)
    source = program_source(softmax_fusion(DataType.Float), x)
    monkeypatch.setattr(prebuilt, "_built", {})
    before = prebuilt.runtime_build_count()
    compiler = cpu_runtime.CpuCompiler(flags)
    module = compiler.compile(source + "// runtime sharing\n")
    assert prebuilt.runtime_build_count() == before + 1
    entry = _runtime_entry(home, compiler)
    assert entry.with_name(entry.name + ".json").is_file()  # verified like every cache entry
    assert b"libfuser_cpu_rt_" + entry.stem.encode() + b".so" in module.data  # the module's DT_NEEDED
    assert b"fuser_emu_switch" not in module.data and b"fuser_emu_switch" in entry.read_bytes()
    assert not (cache / "cpu-runtime").exists()
    # A second kernel cache: the module is compiled again, the runtime is not.
    monkeypatch.setenv("FUSER_CACHE_DIR", str(tmp_path / "second"))
    monkeypatch.setattr(prebuilt, "_built", {})
    again = cpu_runtime.CpuCompiler(flags).compile(source + "// runtime sharing\n")
    assert again.origin == "compiled" and prebuilt.runtime_build_count() == before + 1
    mod = cpu_runtime.CpuModule(again.data, source)
    (kernel_name,) = mod.kernel_names()
    assert kernel_name.startswith("fuser_kernel_")


def _runtime_entry(home, compiler) -> Path:
    """The per-user runtime entry `compiler` links against (the default runtime may lie beside it)."""
    key = prebuilt.runtime_key(cpu_runtime._compiler_identity("g++"), compiler.runtime_flags)
    entry = home / ".cache" / "fuser" / "cpu-runtime" / f"{key}.so"
    assert entry.is_file(), sorted(p.name for p in (home / ".cache" / "fuser" / "cpu-runtime").iterdir())
    return entry


def test_a_damaged_runtime_entry_is_rebuilt(fresh_install, monkeypatch):
    cpu_compiler()
    home, _ = fresh_install
    flags = ("-DFUSER_TEST_RUNTIME_DAMAGE",)
    source = program_source(softmax_fusion(DataType.Float), np.ones((2, 3), np.float32))
    monkeypatch.setattr(prebuilt, "_built", {})
    compiler = cpu_runtime.CpuCompiler(flags)
    compiler.compile(source)
    entry = _runtime_entry(home, compiler)
    entry.write_bytes(entry.read_bytes()[:1000])  # truncated: must never reach the linker or dlopen
    monkeypatch.setattr(prebuilt, "_built", {})
    before = prebuilt.runtime_build_count()
    path = prebuilt.host_runtime("g++", cpu_runtime._compiler_identity("g++"), compiler.runtime_flags)
    assert prebuilt.runtime_build_count() == before + 1
    assert path == entry and len(entry.read_bytes()) > 1000


def test_cache_folders_deleted_while_the_process_runs_are_rebuilt(fresh_install, monkeypatch):
    """Deleting the caches under a running process (rm -rf ~/.cache/fuser) costs a rebuild of the
    runtime and of the precompiled header at the next compile, never a failed link."""
    cxx, identity = cpu_compiler()
    home, cache = fresh_install
    compiler = cpu_runtime.CpuCompiler(("-DFUSER_TEST_RUNTIME_DELETED",))  # a runtime key no other test builds
    source = program_source(softmax_fusion(DataType.Float), np.ones((2, 3), np.float32))
    monkeypatch.setattr(prebuilt, "_built", {})
    monkeypatch.setattr(prebuilt, "_pch_dirs", {})
    compiler.compile(source)
    entry = _runtime_entry(home, compiler)
    shutil.rmtree(home / ".cache")
    shutil.rmtree(cache, ignore_errors=True)
    before = prebuilt.runtime_build_count()
    again = compiler.compile(source + "// after the caches were deleted\n")
    assert again.origin == "compiled" and prebuilt.runtime_build_count() == before + 1
    assert entry.is_file()
    pch = prebuilt.precompiled_header(cxx, identity, compiler.flags)
    assert pch is not None and pch.is_relative_to(home)
    mod = cpu_runtime.CpuModule(again.data, source)
    assert mod.kernel_names()


# --------------------------------------------------------------------------- Philox header

PHILOX_TEXT = ("#define FUSER_NEED_PHILOX", "FUSER_PHILOX_H", "fuser_philox(", "fuser_uniform_f32(")
"""The macro, the header's guard and two of its functions (comments may name the header)."""


def test_f32_pointwise_kernel_has_no_philox_text():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(fd.ops.add(x, x)))
    x = np.random.default_rng(3).random((5, 7), np.float32)
    (y,) = fd.execute([x], backend="cpu")
    np.testing.assert_allclose(y, np.exp(2 * x), rtol=1e-6)
    (kernel,) = fd.last_kernels()
    assert not any(text in kernel.source for text in PHILOX_TEXT)
    assert '#include "fuser_philox.h"' not in kernel.source  # the line is dropped, not left to fail


def test_dropout_kernel_carries_philox_and_runs():
    keep = 0.75
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        seed = fd.define_scalar(dtype=DataType.Int)
        offset = fd.define_scalar(dtype=DataType.Int)
        mask = fd.ops.lt(fd.ops.rand_like(x, seed, offset), keep)
        fd.add_output(fd.ops.where(mask, x * (1.0 / keep), 0.0))
    x = np.random.default_rng(4).standard_normal((33, 65)).astype(np.float32)
    (cpu,) = fd.execute([x, 7, 0], backend="cpu")
    (kernel,) = fd.last_kernels()
    assert kernel.source.startswith("#define FUSER_NEED_PHILOX\n")
    assert all(text in kernel.source for text in PHILOX_TEXT)
    (ref,) = fd.execute([x, 7, 0], backend="reference")
    np.testing.assert_array_equal(cpu, ref)
    assert 0.6 < (cpu != 0).mean() < 0.9


# --------------------------------------------------------------------------- timing (FUSER_PERF=1)

perf = pytest.mark.skipif(os.environ.get("FUSER_PERF") != "1", reason="timing test: set FUSER_PERF=1")


def compile_new_ce_forward(cache_dir) -> tuple[float, str, dict]:
    """(define seconds, program source, executor timings) of a CE forward compiled in a fresh
    kernel cache (so nothing is found on disk or in this process's memo)."""
    from fuser.benchmarks.cases import parse_case
    from fuser.lowering.backends import get_backend

    os.environ["FUSER_CACHE_DIR"] = str(cache_dir)
    cc.clear_memory_cache()
    get_backend("cpu").forget_programs()
    case = parse_case("ce_fwd_aot:f32:64x4096")
    start = time.perf_counter()
    fd = case.build()
    define_s = time.perf_counter() - start
    fd.execute(case.inputs(), backend="cpu")
    (kernel,) = fd.last_kernels()
    return define_s, kernel.source, fd.last_compile_info()


@perf
def test_warm_process_new_fusion_compiles_within_the_floor_plus_10_percent(fresh_install, tmp_path):
    """Definition -> the image the cuda backend would load (define, passes, segment, emission,
    NVRTC), for a CE forward new to a warm process; the best of 3.

    The goal was 60 ms; NVRTC's floor makes that impossible for this kernel (measured
    2026-12-01 on the 2-core development machine, quiet, NVRTC 13.5, cubin for sm_90): NVRTC
    takes 120-125 ms for the program, of which a trivial kernel's fixed cost is 21-23 ms (its
    builtin header 4, libdevice linked 4, ptxas set-up 4) and fuser's head (prelude and support
    functions; no CUDA header) about 2 ms; the rest is the kernel body's: NVVM's optimizer
    ~33 ms and code generation ~8 ms, ptxas ~49 ms, the front end ~5 ms. With fuser's own stages
    (9-11 ms) the floor is ~134 ms, and the goal that floor + 10 %: 147 ms
    (docs/benchmarks.md, compile latency)."""
    compiler = nvrtc()
    output = cc.image_format(cc.driver_version(), compiler.version_tuple)
    compile_new_ce_forward(tmp_path / "warm-up")
    best = float("inf")
    for i in range(3):
        define_s, source, timings = compile_new_ce_forward(tmp_path / str(i))
        result = cc.compile_cuda(source, "sm_90", backend="nvrtc", output=output)
        assert result.origin == "compiled"
        total = define_s + timings["passes_s"] + timings["segment_s"] + timings["emission_s"] + result.seconds
        best = min(best, total)
        print(f"define {define_s * 1e3:.1f}, passes {timings['passes_s'] * 1e3:.1f}, segment "
              f"{timings['segment_s'] * 1e3:.1f}, emission {timings['emission_s'] * 1e3:.1f}, "
              f"NVRTC {result.seconds * 1e3:.1f} ms")
    print(f"warm new CE forward, definition -> {output}: {best * 1e3:.1f} ms")
    assert best <= 0.147


@perf
def test_cpu_module_compiles_within_200_ms(fresh_install, tmp_path, memcheck_off):
    """g++ for one kernel module, the host runtime and the precompiled header already installed
    (once per user); the best of 3 CE forward modules, each new to its kernel cache. Measured as
    users compile (the suite's FUSER_MEMCHECK=1 inlines a bounds check into every access)."""
    compile_new_ce_forward(tmp_path / "warm-up")  # builds the runtime and the precompiled header
    builds = prebuilt.runtime_build_count()
    cpu_s, wall_s = [], []
    for i in range(3):
        before = gxx_cpu_seconds()
        wall_s.append(compile_new_ce_forward(tmp_path / str(i))[2]["compile_s"])
        cpu_s.append(gxx_cpu_seconds() - before)
    print(f"g++, CE forward module: {min(cpu_s) * 1e3:.0f} ms CPU, {min(wall_s) * 1e3:.0f} ms wall")
    assert prebuilt.runtime_build_count() == builds  # the runtime is never rebuilt per module
    assert min(cpu_s) <= 0.200


def gxx_cpu_seconds() -> float:
    """CPU time of this process's finished children (g++ and what it runs): steadier than wall
    time on a loaded machine."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class _NvrtcWithoutUsableBundle:
    """cuda-bindings 13.0.x next to NVRTC 13.0 (the first GPU machine): the call is declared
    but its info struct cannot be built, so calling it raises TypeError."""

    class nvrtcResult:
        NVRTC_SUCCESS = 0

    @staticmethod
    def nvrtcGetBundledHeadersInfo():
        raise TypeError("__cinit__() takes exactly 1 positional argument (0 given)")


def test_bindings_that_cannot_report_bundled_headers_fall_back_quietly(tmp_path):
    fake = _NvrtcWithoutUsableBundle()
    assert cc.bundles_headers(fake) is False
    assert cc.install_bundled_headers(fake, tmp_path / "nvrtc-include" / "13.0") is None
    assert not (tmp_path / "nvrtc-include").exists()
    assert cc.bundles_headers(object()) is False  # bindings older than the call
