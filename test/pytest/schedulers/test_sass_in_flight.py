"""What the GPU would run keeps its loads in flight: held in the SASS, without a GPU.

Every kernel of the 8 benchmark cases at their H100 shapes, the LM head's chunk kernel at
GPT-2's and Llama 3's vocabularies (a GPU chunk: 4 rows an SM), a full reduction (one row split
over the grid) at GPT-2's activation, and the largest kernels of
GPT-2's, Llama's and BERT's training steps at their real sizes (benchmarks/model_kernels.py),
compiled for sm_90 by NVRTC and disassembled by nvdisasm:

- at least 32 KiB of global loads in flight per SM (nvFuser's target on an H100), counted in the
  SASS, no spill bytes, no stack frame, no local-memory instruction;
- the performance model predicts from that SASS figure (`in_flight_from == "sass"`), and its
  figure agrees within 1.25x with a count this test makes itself, by another method: per global
  load of the kernel's innermost loops, the bytes issued from the start of its batch until its
  first use, averaged (lowering/backends/sass.py instead means the batches' sizes). The test
  can fail: a kernel whose loads each wait behind their own branch counts 16 B a thread.

Skipped, saying why, without NVRTC (the nvrtc extra) or nvdisasm (its nvidia-cuda-nvdisasm).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from fuser.benchmarks.cases import all_cases
from fuser.benchmarks.predict import gpu_inputs
from fuser.lowering.backends import compile as cc
from fuser.lowering.backends.sass import nvdisasm

KIB = 1024
MIN_IN_FLIGHT_PER_SM = 32 * KIB


def _tools_missing() -> str:
    try:
        cc.find_compiler("nvrtc")
    except cc.CompilerUnavailable as e:
        return f"NVRTC unavailable (the nvrtc extra): {e}"
    if nvdisasm() is None:
        return "nvdisasm not found (the nvrtc extra's nvidia-cuda-nvdisasm)"
    return ""


pytestmark = pytest.mark.skipif(bool(_tools_missing()), reason=_tools_missing() or "tools present")


@pytest.fixture(autouse=True)
def h100_profile(monkeypatch):
    monkeypatch.setenv("FUSER_GPU_PROFILE", "h100")


def _benchmark_kernels(case):
    return case.build().kernels_for(gpu_inputs(case), backend="cpu")


def _lm_head_kernels(vocab: int, dtype: str):
    import torch

    from fuser.torch_backend.linear_cross_entropy import ROWS_PER_SM, _chunk_fusion, padded_vocab

    torch_dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    np_dtype = {"bf16": ml_dtypes.bfloat16, "f32": np.float32}[dtype]
    rows = ROWS_PER_SM * 132  # the chunk a GPU gets (rows_to_fill)
    inputs = [np.empty((rows, padded_vocab(vocab, torch_dtype)), np_dtype), np.zeros((rows,), np.int64),
              np.zeros((), np.float32), vocab]
    return _chunk_fusion(torch_dtype, -100, True).kernels_for(inputs, backend="cpu")


def _full_reduction_kernels(np_dtype, dtype_name: str):
    """A loss's mean of squares over a whole activation (GPT-2's 8x1024x768): one row split over
    the grid. One element a thread a step kept 4 KiB in flight per SM."""
    from fuser import DataType, FusionDefinition

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], dtype=getattr(DataType, dtype_name))
        xf = fd.ops.cast(x, DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.mul(xf, xf), dims=[0, 1, 2]))
    return fd.kernels_for([np.empty((8, 1024, 768), np_dtype)], backend="cpu")


CASES = [(c.key, lambda c=c: _benchmark_kernels(c)) for c in all_cases("gpu-quick")]
CASES += [(f"full_reduction:{name}", lambda d=d, name=name: _full_reduction_kernels(d, name))
          for d, name in ((np.float32, "Float"), (ml_dtypes.bfloat16, "BFloat16"))]
CASES += [(f"lm_head:{dtype}:{vocab}", lambda v=vocab, d=dtype: _lm_head_kernels(v, d))
          for vocab in (50257, 128256) for dtype in ("bf16", "f32")]


# --- the test's own count ------------------------------------------------------------------------

_LINE = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(@!?P\w+\s+)?([A-Z][\w.]*)\s*([^;]*);")
_LABEL = re.compile(r"^\s*\.(L_x_\d+):")
_REG = re.compile(r"\bR(\d+)(\.64|\.128)?\b")


def _sass_text(source: str) -> str:
    cubin = cc.compile_cuda(source, "sm_90", ("--ptxas-options=-v",), backend="nvrtc").cubin
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "k.cubin"
        path.write_bytes(cubin)
        return subprocess.run([nvdisasm(), "-c", str(path)], capture_output=True, text=True, check=True).stdout


def _regs(text: str, width: int = 1) -> set[int]:
    out = set()
    for m in _REG.finditer(text):
        n = int(m.group(1))
        out.update(range(n, n + max(width, {".64": 2, ".128": 4}.get(m.group(2) or "", 1))))
    return out


def _bytes(op: str) -> int:
    parts = op.split(".")
    return next((int(p) // 8 for p in parts if p in ("32", "64", "128")),
                2 if {"U16", "S16"} & set(parts) else 1 if {"U8", "S8"} & set(parts) else 4)


def independent_in_flight(sass: str, kernel: str) -> float:
    """Bytes a thread has in flight in its hottest loops: the bytes their global loads move over
    the waits the thread makes on them (an instruction that reads or overwrites a register a
    load in flight writes; the loop's end, an exit), counted as events in address order."""
    body = sass.split(f".text.{kernel}:", 1)[1].split(".text.", 1)[0]
    code = []  # (opcode, operands); labels as ("LABEL", name)
    for line in body.splitlines():
        if (m := _LABEL.match(line)):
            code.append(("LABEL", m.group(1)))
        elif (m := _LINE.match(line)):
            code.append((m.group(3), m.group(4)))
    labels = {operands: k for k, (op, operands) in enumerate(code) if op == "LABEL"}
    loops = []
    for k, (op, operands) in enumerate(code):
        target = re.search(r"\(\.(L_x_\d+)\)", operands)
        if op.startswith("BRA") and target and labels.get(target.group(1), k) < k:
            loops.append((labels[target.group(1)], k))
    loop_ends = {b for _, b in loops}
    depth = [sum(a <= k <= b for a, b in loops) for k in range(len(code))]
    in_flight: set[int] = set()  # registers loads in flight write
    depth_of_wait = 0
    moved: dict[int, int] = {}  # loop depth -> bytes loaded there
    waits: dict[int, int] = {}  # loop depth -> waits on loads issued there
    for k, (op, operands) in enumerate(code):
        if op == "LABEL":
            continue
        is_load = op.split(".")[0] in ("LDG", "LD")
        if is_load:
            dest, _, address = operands.partition(",")
            written = _regs(dest, max(1, _bytes(op) // 4))
            touched = _regs(address) | written
        else:
            touched = _regs(operands)
        if in_flight and (touched & in_flight or k in loop_ends or op.startswith(("EXIT", "RET"))):
            waits[depth_of_wait] = waits.get(depth_of_wait, 0) + 1
            in_flight = set()
        if is_load:
            if not in_flight:
                depth_of_wait = depth[k]
            in_flight |= written
            moved[depth[k]] = moved.get(depth[k], 0) + _bytes(op)
    if in_flight:
        waits[depth_of_wait] = waits.get(depth_of_wait, 0) + 1
    hot = max(moved)
    return moved[hot] / waits[hot]


def _check_kernel(name, k, least: int) -> None:
    p = k.performance("h100")
    if p is None:
        return
    facts = f"{name} {k.name} [{p.schedule}]: {p.describe()}"
    assert p.in_flight_from == "sass", facts
    assert p.spill_bytes == 0 and p.stack_bytes == 0 and p.local_memory_accesses == 0, facts
    assert p.sass_in_flight_per_sm >= least, facts
    resident_threads = p.warps_per_sm * 32
    counted = independent_in_flight(_sass_text(k.source), k.name) * resident_threads
    assert counted / 1.25 <= p.in_flight_per_sm <= counted * 1.25, f"{facts}; counted here {counted / KIB:.1f} KiB"


@pytest.mark.parametrize("name,kernels", CASES, ids=[name for name, _ in CASES])
def test_kernels_keep_32_kib_in_flight_per_sm_in_their_sass(name, kernels):
    for k in kernels():
        _check_kernel(name, k, MIN_IN_FLIGHT_PER_SM)


@pytest.mark.parametrize("model", ["gpt2", "llama", "bert"])
def test_the_model_suites_largest_kernels_in_their_sass(model):
    """The five kernels of the training step's three largest regions a graph (forward and
    backward, one layer, real sizes, traced on the meta device: benchmarks/model_kernels.py)
    that move the most bytes: with the embeddings' layer norm (a gathered row) and RMSNorm's
    backward among them, 19-29 KiB before their load stages were sized by the SASS."""
    from fuser.benchmarks.model_kernels import largest, region_kernels, traced_regions

    kernels = []
    for region in largest(traced_regions(model), 3):
        for k in region_kernels(region):
            p = k.performance("h100")
            if p is not None and p.sass_in_flight_per_sm is not None:
                kernels.append((p.min_bytes, region.name, k))
    assert kernels, f"{model}: no kernel traced"
    for _, region, k in sorted(kernels, key=lambda entry: -entry[0])[:5]:
        _check_kernel(f"{model} {region}", k, MIN_IN_FLIGHT_PER_SM)


def test_the_count_sees_loads_that_wait_behind_their_branches():
    """The old shape of a streamed row (`if (in range) { v = load; use(v); }` unrolled): one
    vector a thread in flight, whatever the unroll; the staged shape of the same loop: all."""
    body = """
extern "C" __global__ void __launch_bounds__(128) k(const float4* __restrict__ x, float* out, int n) {
  float acc = 0.f;
  for (int rc = 0; rc < n; rc += 512) {
#if STAGED
    float4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) { int i = rc + k * 128 + threadIdx.x; v[k] = i < n ? x[i] : make_float4(0, 0, 0, 0); }
#pragma unroll
    for (int k = 0; k < 4; ++k) { int i = rc + k * 128 + threadIdx.x; acc = i < n ? acc + v[k].x * v[k].y + v[k].z : acc; }
#else
#pragma unroll
    for (int k = 0; k < 4; ++k) { int i = rc + k * 128 + threadIdx.x; if (i < n) { float4 v = x[i]; if (v.x > acc) acc = v.x + v.y * v.z; } }
#endif
  }
  out[threadIdx.x] = acc;
}
"""
    from fuser.lowering.backends.sass import sass_reports

    figures = {}
    for staged in (0, 1):
        source = f"#define STAGED {staged}\n{body}"
        cubin = cc.compile_cuda(source, "sm_90", (), backend="nvrtc").cubin
        report = sass_reports(cubin)["k"]
        figures[staged] = (report.in_flight_per_thread, independent_in_flight(_sass_text(source), "k"))
    assert figures[0][0] == 16 and figures[0][1] <= 20, figures  # one float4 a thread, however unrolled
    assert figures[1][0] >= 2 * 16 and figures[1][1] >= 2 * 16, figures  # several issued before the first use
    for sass_figure, counted in figures.values():
        assert counted / 1.25 <= sass_figure <= counted * 1.25, figures
