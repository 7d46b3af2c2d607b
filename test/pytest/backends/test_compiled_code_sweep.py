"""A sweep of the compiled code: every distinct kernel the representative fusions produce (the
benchmark cases at their cpu and GPU shapes, and one fusion per scheduler path the benchmarks do
not reach: scans of every schedule, random ops, casts, a whole-tensor reduction, var_mean, an
embedding, resize and layout ops) compiled for sm_90 with NVRTC, and what ptxas and the SASS say
of it checked:

- no register spills beyond SPILL_BOUND_BYTES (0: none), no stack frame, no local memory
  (SASS LDL/STL: a run-time index into a register array, a spill or a stack variable);
- no f64 instruction in a kernel whose values hold no f64 (PTX `.f64`: f64 runs at 1/64 of the
  f32 rate on most GPUs; a double literal or an f64 helper in an f32 kernel);
- shared memory: static at most 48 KiB (ptxas refuses more), static + dynamic within the
  device's opt-in maximum, and the static figure the cpu emulation computes from the source
  (backends/static_shared.py, which its launch checks use) equal to ptxas's;
- parameters within the launch limit; registers x threads of a block within the register file.

Each finding is a failure naming the kernel (and its fusion). Kernels are generated without
running or g++-compiling them (a backend whose programs are not built), so the sweep costs the
NVRTC and nvdisasm runs: one per fusion program, about a minute on 2 cores.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from fuser_dialect.inputs import check_inputs
from fuser.lowering.backends import compile as cc
from fuser.lowering.backends.cpu import CpuBackend
from fuser.lowering.backends.static_shared import static_shared_bytes
from fuser.lowering.codegen.render import param_size
from fuser.lowering.device import H100, parameter_bytes
from fuser.lowering.segmentation.host_segments import is_host_plan

SPILL_BOUND_BYTES = 0
"""Spill stores + loads a kernel may have (ptxas -v). None of the swept kernels spills."""
ARCH = "sm_90"
DEVICE = H100
BF16 = np.dtype(ml_dtypes.bfloat16)


class _SourcesOnly(CpuBackend):
    """The cpu backend's kernels (scheduled for the H100), rendered but not built."""

    name = "sweep"

    def program(self, source: str):
        return None


def _kernels(fd: FusionDefinition, inputs: list) -> tuple[list, str]:
    """[(plan, kernel)] of the device kernels `fd` runs for `inputs`, and their program's source."""
    executor = fd._get_executor()
    checked = check_inputs(executor.fusion, inputs)
    _, _, compiled, _, kernels = executor._compile(checked, _SourcesOnly(), (), with_index_checks=False)
    pairs = [(p, k) for p, k in zip(compiled.plans, kernels.kernels) if not is_host_plan(p)]
    return pairs, kernels.source


# --------------------------------------------------------------------------- the fusions


def _benchmark_cases() -> list[tuple[str, Callable]]:
    """The benchmark cases at their cpu and GPU shapes (not the 4,096-op chain, whose compile
    alone would take half the budget), rows cut to 1 MiB of traffic: the same row lengths, hence
    the same kernels (`Case.with_rows`), without making gigabytes of inputs."""
    from benchmarks.cases import all_cases

    cases = {}
    for mode in ("quick", "gpu-quick"):
        for case in all_cases(mode):
            if case.kind != "chain":
                cases.setdefault(case.label, case)
    return [(label, lambda c=case: _case_inputs(c)) for label, case in cases.items()]


def _case_inputs(case) -> tuple[FusionDefinition, list]:
    fd = case.build()
    if case.kind == "gpt2_epilogues":  # static extents: its inputs have exactly its shape
        return fd, case.inputs()
    return fd, case.inputs(shape=case.with_rows(1 << 20))


def _fusion(build: Callable[[FusionDefinition], None]) -> FusionDefinition:
    with FusionDefinition() as fd:
        build(fd)
    return fd


def _scans(dtype: DataType, rank: int = 2):
    def build(fd):
        x = fd.define_tensor(shape=[-1] * rank, dtype=dtype)
        fd.add_output(fd.ops.cumsum(x, -1))
        fd.add_output(fd.ops.cummax(x, -1))
    return _fusion(build)


def _many_scans(fd):
    x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Double)
    for k in range(40):
        fd.add_output(fd.ops.cumsum(fd.ops.mul(x, float(k + 1)), 1))


def _random(distribution: str, dtype: DataType):
    def build(fd):
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        r = getattr(fd.ops, distribution)(0.0, 1.0, x.shape(), dtype=dtype)
        fd.add_output(fd.ops.add(x, fd.ops.cast(r, DataType.Float)))
    return _fusion(build)


def _casts(fd):
    x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
    h = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
    fd.add_output(fd.ops.cast(x, DataType.Int32))
    fd.add_output(fd.ops.cast(fd.ops.mul(x, 3.0), DataType.Int))
    fd.add_output(fd.ops.cast(h, DataType.Int32))


def _softmax_of_a_sum(fd):
    a, b, c = (fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16) for _ in range(3))
    x = fd.ops.add(fd.ops.add(a, b), c)
    e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True)))
    fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))


def _whole_sum(fd):
    x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
    fd.add_output(fd.ops.sum(x, dims=[0]))


def _var_mean(fd):
    x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
    var, mean = fd.ops.var_mean(x, [1], correction=0)
    fd.add_output(var)
    fd.add_output(mean)


def _outer_sum(fd):
    x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
    fd.add_output(fd.ops.sum(fd.ops.cast(x, DataType.Float), dims=[0]))


def _embedding(fd):
    w = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
    i = fd.define_tensor(shape=[-1], dtype=DataType.Int)
    fd.add_output(fd.ops.index_select(w, i, 0))


def _resize_and_layout(fd):
    x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
    y = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
    fd.add_output(fd.ops.cat([x, y], 1))
    fd.add_output(fd.ops.pad(x, [1, 2]))
    fd.add_output(fd.ops.add(fd.ops.permute(x, [1, 0]), 1.0))


F32, F64 = np.float32, np.float64
EXTRAS: list[tuple[str, Callable]] = [
    ("softmax(a + b + c) bf16 [64, 4096]", lambda: (_fusion(_softmax_of_a_sum), [np.empty((64, 4096), BF16)] * 3)),
    ("scans f32 [64, 20] (a thread per line)", lambda: (_scans(DataType.Float), [np.empty((64, 20), F32)])),
    ("scans f32 [8, 1000] (a block per line)", lambda: (_scans(DataType.Float), [np.empty((8, 1000), F32)])),
    ("scans f64 [8, 5000]", lambda: (_scans(DataType.Double), [np.empty((8, 5000), F64)])),
    ("scans i64 [8, 5000]", lambda: (_scans(DataType.Int), [np.empty((8, 5000), np.int64)])),
    ("scans f32 [2^26] (split over the grid)", lambda: (_scans(DataType.Float, 1), [np.empty(1 << 26, F32)])),
    ("scans bf16 [2, 2^20] (split)", lambda: (_scans(DataType.BFloat16), [np.empty((2, 1 << 20), BF16)])),
    ("40 f64 cumsums [4, 5000] (split into kernels)", lambda: (_fusion(_many_scans), [np.empty((4, 5000), F64)])),
    *[(f"x + {dist} {dt.name} [64, 4096]", lambda dist=dist, dt=dt: (_random(dist, dt), [np.empty((64, 4096), F32)]))
      for dist in ("uniform", "normal") for dt in (DataType.Float, DataType.BFloat16, DataType.Double)],
    ("float -> int casts [64, 4096]", lambda: (_fusion(_casts), [np.empty((64, 4096), F32), np.empty((64, 4096), BF16)])),
    ("sum f32 [2^24] (grid reduction)", lambda: (_fusion(_whole_sum), [np.empty(1 << 24, F32)])),
    ("var_mean f32 [256, 8192]", lambda: (_fusion(_var_mean), [np.empty((256, 8192), F32)])),
    ("outer sum bf16 [4096, 1024]", lambda: (_fusion(_outer_sum), [np.empty((4096, 1024), BF16)])),
    ("embedding [32000, 256] x 4096", lambda: (_fusion(_embedding), [np.empty((32000, 256), F32),
                                                                     np.zeros(4096, np.int64)])),
    ("cat, pad, permute f32 [512, 384]", lambda: (_fusion(_resize_and_layout), [np.empty((512, 384), F32)] * 2)),
]


# --------------------------------------------------------------------------- the sweep


def _kernel_text(source: str, name: str) -> str:
    start = source.find(f" {name}(")
    return source[start:source.find(f"FUSER_HOST_LAUNCHER({name})", start)]


def _ptx_bodies(ptx: str) -> dict[str, str]:
    entries = list(re.finditer(r"^\.visible \.entry (\w+)\(", ptx, re.M))
    return {m.group(1): ptx[m.end():entries[k + 1].start() if k + 1 < len(entries) else len(ptx)]
            for k, m in enumerate(entries)}


def _values_have_f64(plan) -> bool:
    values = [*plan.inputs, *plan.outputs, *(r for op in plan.ops for r in op.results),
              *(v for op in plan.ops for v in op.operands)]
    return any(getattr(v.type, "dtype", None) in ("f64", "c128") for v in values)


def _findings(label: str, fd: FusionDefinition, inputs: list, seen: set) -> tuple[list[str], int]:
    from fuser.lowering.backends.resources import ptxas_reports, sass_of

    pairs, source = _kernels(fd, inputs)
    reports = ptxas_reports(source, ARCH)
    sass = sass_of(source, ARCH)
    ptx = _ptx_bodies(cc.compile_cuda(source, ARCH, (), output="ptx").cubin.decode(errors="replace"))
    problems, swept = [], 0
    for plan, kernel in pairs:
        text = _kernel_text(source, kernel.name)
        if text in seen:
            continue
        seen.add(text)
        swept += 1
        where = f"{kernel.name} of {label} ({kernel.schedule.describe()})"
        report, code = reports[kernel.name], sass[kernel.name]
        if report.spill_bytes > SPILL_BOUND_BYTES:
            problems.append(f"{where}: {report.spill_bytes} bytes of spills (bound {SPILL_BOUND_BYTES})")
        if report.stack_bytes:
            problems.append(f"{where}: a {report.stack_bytes}-byte stack frame")
        if code.local_loads or code.local_stores:
            problems.append(f"{where}: {code.local_loads} local loads and {code.local_stores} local stores in its SASS")
        if not _values_have_f64(plan) and re.search(r"\.f64\b", ptx[kernel.name]):
            count = len(re.findall(r"\.f64\b", ptx[kernel.name]))
            problems.append(f"{where}: {count} f64 instructions in a kernel without f64 values")
        static, dynamic = report.static_shared_bytes, kernel.shared_bytes
        if static > DEVICE.shared_per_block:
            problems.append(f"{where}: {static} bytes of static shared memory (at most {DEVICE.shared_per_block})")
        if static + dynamic > DEVICE.shared_per_block_optin:
            problems.append(f"{where}: {static} + {dynamic} bytes of shared memory a block "
                            f"(at most {DEVICE.shared_per_block_optin})")
        if static_shared_bytes(source, kernel.name) != static:
            problems.append(f"{where}: the emulation counts {static_shared_bytes(source, kernel.name)} bytes of "
                            f"static shared memory, ptxas {static}")
        params = parameter_bytes([param_size(p.ctype) for p in kernel.params])
        if params > DEVICE.max_parameter_bytes:
            problems.append(f"{where}: {params} bytes of parameters (at most {DEVICE.max_parameter_bytes})")
        block = kernel.schedule.block
        warp_registers = -(-report.registers * 32 // DEVICE.register_allocation_unit) * DEVICE.register_allocation_unit
        if warp_registers * -(-block // 32) > DEVICE.registers_per_sm:
            problems.append(f"{where}: {report.registers} registers x {block} threads exceed the register file")
    return problems, swept


def test_compiled_kernels_respect_the_gpu_limits_and_keep_to_registers():
    try:
        cc.find_compiler("nvrtc")
        from fuser.lowering.backends.sass import nvdisasm

        if nvdisasm() is None:
            raise cc.CompilerUnavailable("no nvdisasm")
    except cc.CompilerUnavailable as e:
        pytest.skip(f"the sweep needs NVRTC and nvdisasm (the nvrtc extra): {e}")
    problems, seen, swept = [], set(), 0
    for label, make in [*_benchmark_cases(), *EXTRAS]:
        fd, inputs = make()
        found, count = _findings(label, fd, inputs, seen)
        problems += found
        swept += count
    assert swept >= 40, f"only {swept} distinct kernels swept"
    assert not problems, f"{len(problems)} findings in {swept} kernels:\n" + "\n".join(problems)
