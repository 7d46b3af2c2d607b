"""lowering.backends.compile: CUDA C -> cubin with NVRTC and nvcc, caching, errors and architecture choice.

No GPU needed. Each backend's tests skip, saying why, where that compiler is missing. The cubin is
checked against the ELF layout (EM_CUDA machine, SM number in e_flags), not against our own code.
"""

from __future__ import annotations

import re
import struct

import pytest

from fuser.lowering.backends import compile as cc
from fuser.lowering.errors import CompileError, FuserError

SAXPY = """\
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

# Proves the headers are found: NVRTC has no include path of its own.
HALF_BF16 = """\
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void widen(const __nv_bfloat16* a, const __half* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = __bfloat162float(a[i]) + __half2float(b[i]);
        out[i] = __bfloat162float(__float2bfloat16_rn(s)) * __half2float(__float2half_rn(0.5f));
    }
}
"""

BROKEN = """\
extern "C" __global__ void broken(float* x) {
    int i = threadIdx.x;
    x[i] = undefined_name * 2.0f;
}
"""

EM_CUDA = 190


def elf_cuda_sm(cubin: bytes) -> int:
    """The SM number a cubin was built for, read from its ELF header (e_machine, e_flags)."""
    assert cubin[:4] == b"\x7fELF", "not an ELF file"
    assert cubin[4] == 2, "not a 64-bit ELF"
    (machine,) = struct.unpack_from("<H", cubin, 18)
    assert machine == EM_CUDA, f"e_machine {machine} is not EM_CUDA"
    (flags,) = struct.unpack_from("<I", cubin, 0x30)
    return (flags >> 8) & 0xFF


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSER_CACHE_DIR", str(tmp_path))
    cc.clear_memory_cache()
    yield tmp_path
    cc.clear_memory_cache()


def require(backend: str) -> str:
    try:
        return cc.find_compiler(backend).label
    except cc.CompilerUnavailable as e:
        pytest.skip(str(e))


BACKENDS = ["nvrtc", "nvcc"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_saxpy_compiles_to_cubin(backend):
    label = require(backend)
    result = cc.compile_cuda(SAXPY, "sm_90", backend=backend)
    assert elf_cuda_sm(result.cubin) == 90
    assert b"saxpy" in result.cubin  # the extern "C" name is in the symbol table
    assert result.arch == "sm_90"
    assert result.compiler == label and label.startswith(backend + " ")
    assert result.origin == "compiled"


def test_nvrtc_empty_log_leaves_python_bytes_alone():
    require("nvrtc")
    space = bytes([32])  # built at run time: the interpreter's shared one-byte object
    result = cc.compile_cuda(SAXPY, "sm_90", backend="nvrtc")
    assert result.log == ""  # NVRTC's log was one NUL byte
    assert bytes([32]) == space == b" " and b"a b".split(b" ") == [b"a", b"b"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_half_and_bfloat16_headers_are_found(backend):
    require(backend)
    result = cc.compile_cuda(HALF_BF16, "sm_80", backend=backend)
    assert elf_cuda_sm(result.cubin) == 80
    assert b"widen" in result.cubin


@pytest.mark.parametrize("backend", BACKENDS)
def test_memory_then_disk_cache(backend, fresh_cache):
    require(backend)
    first = cc.compile_cuda(SAXPY, "sm_90", backend=backend)
    entries = list((fresh_cache / "cubin").glob("*.cubin"))
    assert len(entries) == 1 and entries[0].read_bytes() == first.cubin
    assert list((fresh_cache / "cubin").glob("*.tmp")) == []  # atomic write left nothing behind

    again = cc.compile_cuda(SAXPY, "sm_90", backend=backend)
    assert again.origin == "memory" and again.cubin == first.cubin

    cc.clear_memory_cache()  # as in a new process: only the disk cache is left
    from_disk = cc.compile_cuda(SAXPY, "sm_90", backend=backend)
    assert from_disk.origin == "disk" and from_disk.cubin == first.cubin
    assert from_disk.compiler == first.compiler and from_disk.arch == "sm_90"
    assert from_disk.seconds < first.seconds  # read, not compiled (absolute times: FUSER_PERF tests)


@pytest.mark.parametrize("backend", BACKENDS)
def test_key_covers_arch_options_and_source(backend):
    require(backend)
    base = cc.compile_cuda(SAXPY, "sm_90", backend=backend)
    other_arch = cc.compile_cuda(SAXPY, "sm_80", backend=backend)
    fast_math = cc.compile_cuda(SAXPY, "sm_90", ("--use_fast_math",), backend=backend)
    other_text = cc.compile_cuda(SAXPY + "// same kernel, other text\n", "sm_90", backend=backend)
    assert [r.origin for r in (base, other_arch, fast_math, other_text)] == ["compiled"] * 4
    assert elf_cuda_sm(other_arch.cubin) == 80
    assert len(list(cc.cache_root().glob("cubin/*.cubin"))) == 4


def test_damaged_disk_entry_is_recompiled(fresh_cache):
    require_any()
    first = cc.compile_cuda(SAXPY, "sm_90")
    (entry,) = (fresh_cache / "cubin").glob("*.cubin")
    entry.write_bytes(b"garbage, e.g. a truncated write by a killed process")
    cc.clear_memory_cache()
    again = cc.compile_cuda(SAXPY, "sm_90")
    assert again.origin == "compiled" and again.cubin[:4] == b"\x7fELF"
    assert entry.read_bytes()[:4] == b"\x7fELF"
    assert elf_cuda_sm(again.cubin) == elf_cuda_sm(first.cubin) == 90


def require_any() -> None:
    if not cc.available_compilers():
        with pytest.raises(cc.CompilerUnavailable) as info:
            cc.find_compiler()
        pytest.skip(str(info.value))


@pytest.mark.parametrize("backend", BACKENDS)
def test_syntax_error_shows_message_and_line(backend):
    require(backend)
    with pytest.raises(CompileError) as info:
        cc.compile_cuda(BROKEN, "sm_90", backend=backend)
    err = info.value
    assert isinstance(err, FuserError)
    assert err.source == BROKEN
    assert "undefined_name" in err.log and "undefined" in err.log
    text = str(err)
    # The compiler points at kernel.cu(3); the numbered source shows that line.
    match = re.search(r"kernel\.cu\((\d+)\): error", text)
    assert match is not None, text
    line = int(match[1])
    assert line == 3
    assert re.search(rf"^\s*{line} \| .*undefined_name \* 2\.0f;", text, re.M), text
    assert list(cc.cache_root().glob("cubin/*.cubin")) == []  # failures are not cached


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_option_is_a_compile_error(backend):
    require(backend)
    with pytest.raises(CompileError):
        cc.compile_cuda(SAXPY, "sm_90", ("--no-such-option-xyz",), backend=backend)


@pytest.mark.parametrize("spelling", ["sm_86", "sm86", "86", 86, " SM_86 "])
def test_normalize_arch(spelling):
    assert cc.normalize_arch(spelling) == "sm_86"


def test_arch_keeps_feature_suffix_and_rejects_virtual():
    assert cc.normalize_arch("sm_90a") == "sm_90a"
    for bad in ("compute_90", "hopper", "sm_9", ""):
        with pytest.raises(ValueError, match="architecture"):
            cc.normalize_arch(bad)


def test_default_arch_is_the_device_s_else_sm90(monkeypatch):
    def no_driver():
        raise ImportError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(cc, "_pycuda_capability", no_driver)
    monkeypatch.setattr(cc, "_cuda_bindings_capability", no_driver)
    assert cc.default_arch.__wrapped__() == "sm_90"

    monkeypatch.setattr(cc, "_cuda_bindings_capability", lambda: (8, 6))
    assert cc.default_arch.__wrapped__() == "sm_86"
    monkeypatch.setattr(cc, "_pycuda_capability", lambda: (10, 0))
    assert cc.default_arch.__wrapped__() == "sm_100"


def test_default_arch_is_used_when_none_given():
    require_any()
    result = cc.compile_cuda(SAXPY)
    assert result.arch == cc.default_arch()
    assert elf_cuda_sm(result.cubin) == int(re.match(r"sm_(\d+)", result.arch)[1])


def test_no_compiler_says_what_to_install(monkeypatch):
    reasons = {"nvrtc": "nvrtc: cuda-bindings not installed", "nvcc": "nvcc: nvcc not found on PATH"}
    monkeypatch.setattr(cc, "_probe", reasons.get)
    assert cc.available_compilers() == {}
    with pytest.raises(cc.CompilerUnavailable) as info:
        cc.compile_cuda(SAXPY, "sm_90")
    text = str(info.value)
    assert "pip install 'fuser[nvrtc]'" in text and "CUDA toolkit" in text
    assert "nvcc not found on PATH" in text and "cuda-bindings not installed" in text
    assert isinstance(info.value, FuserError)


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown CUDA compiler"):
        cc.compile_cuda(SAXPY, "sm_90", backend="clang")


def test_available_compilers_prefers_nvrtc():
    found = cc.available_compilers()
    assert set(found) <= {"nvrtc", "nvcc"}
    assert list(found) == [b for b in BACKENDS if b in found]
    for name, label in found.items():
        assert re.fullmatch(rf"{name} \d+\.\d+", label)
    if found:
        assert cc.find_compiler().name == next(iter(found))
