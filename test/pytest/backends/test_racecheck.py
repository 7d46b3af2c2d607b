"""Racecheck for the CPU emulation (FUSER_RACECHECK=1, lowering/runtime/fuser_cpu_racecheck.h):
the emulation runs a block's threads one after another between barriers, so racy code gives one
deterministic answer; a racecheck build reports the race instead, naming the kernel, the array
and element, the two threads and their access kinds. The suite runs with it on (conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest

from fuser.lowering import settings
from fuser.lowering.backends import get_backend
from fuser.lowering.errors import RaceError
from fuser.lowering.runtime import with_prelude
from lowering_checks import requires_cpu_backend

pytestmark = requires_cpu_backend


def _racecheck_set_to(monkeypatch, value: str):
    monkeypatch.setenv("FUSER_RACECHECK", value)
    settings.reload()
    yield
    monkeypatch.undo()
    settings.reload()


@pytest.fixture
def racecheck(monkeypatch):
    yield from _racecheck_set_to(monkeypatch, "1")


@pytest.fixture
def no_racecheck(monkeypatch):
    yield from _racecheck_set_to(monkeypatch, "0")


def launch(body: str, threads: int = 32):
    out = np.zeros(64, np.float32)
    get_backend("cpu").program(with_prelude(body + "\nFUSER_HOST_LAUNCHER(k)\n")).launch(
        "k", (1, 1, 1), (threads, 1, 1), [out])
    return out


PLANTED = """
extern "C" __global__ void k(float* out) {
  __shared__ float s[32];
  s[threadIdx.x] = (float)threadIdx.x;
  %s
  out[threadIdx.x] = s[(threadIdx.x + 1) %% 32];
}"""


def test_the_planted_race_is_found(racecheck):
    with pytest.raises(RaceError, match=r"kernel 'k' block \(0,0,0\): race on s\[1\]: thread \(0,0,0\) read it "
                                        r"and thread \(1,0,0\) writes it with no __syncthreads\(\)"):
        launch(PLANTED % "/* no __syncthreads() */")


def test_with_a_barrier_there_is_no_race_and_the_right_result(racecheck):
    out = launch(PLANTED % "__syncthreads();")
    np.testing.assert_array_equal(out[:32], (np.arange(32) + 1) % 32)


def test_without_racecheck_the_race_runs_deterministically_wrong(no_racecheck):
    """What the emulation did before: all zeros, no error (why racecheck exists)."""
    np.testing.assert_array_equal(launch(PLANTED % "")[:32], np.zeros(32))


@pytest.mark.parametrize("body, message", [
    ("""extern "C" __global__ void k(float* out) { fuser_st(out, 0, (float)threadIdx.x); }""",
     r"race on out\[0\]: thread \(0,0,0\) wrote it and thread \(1,0,0\) writes it"),
    ("""extern "C" __global__ void k(float* out) {
      __shared__ float s[64];
      s[threadIdx.x] = (float)threadIdx.x;
      __syncwarp();
      out[threadIdx.x] = s[(threadIdx.x + 32) % 64];
    }""", r"race on s\[\d+\]: .* with no __syncthreads\(\) between them"),
    ("""extern "C" __global__ void k(float* out) {
      if (threadIdx.x == 5) return;
      out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (float)threadIdx.x, 1);
    }""", r"names lane 5 in its mask 0xffffffff, which returned without reaching it"),
], ids=["global memory", "across warps", "shuffle mask"])
def test_races_in_global_memory_across_warps_and_in_warp_masks(racecheck, body, message):
    with pytest.raises(RaceError, match=message):
        launch(body, threads=64)


def test_a_warp_operation_orders_the_lanes_of_one_warp(racecheck):
    out = launch("""extern "C" __global__ void k(float* out) {
      __shared__ float s[32];
      s[threadIdx.x] = (float)threadIdx.x;
      __syncwarp();
      out[threadIdx.x] = s[(threadIdx.x + 1) % 32];
    }""")
    np.testing.assert_array_equal(out[:32], (np.arange(32) + 1) % 32)


def test_generated_kernels_with_barriers_run_clean(racecheck):
    """Softmax (block reductions in shared memory), a grid reduction, a scan, var_mean."""
    from benchmarks.cases import build_ce_fwd_aot, inputs_ce_fwd_aot
    from fuser import DataType, FusionDefinition

    rng = np.random.default_rng(0)
    fd = build_ce_fwd_aot("f32", (40, 3000))
    inputs = inputs_ce_fwd_aot(rng, (40, 3000), "f32")
    np.testing.assert_allclose(fd.execute(inputs, backend="cpu")[0], fd.execute(inputs, backend="reference")[0],
                               rtol=1e-5)
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        var, mean = fd.ops.var_mean(x, [1], correction=0)
        fd.add_output(var)
        fd.add_output(fd.ops.cumsum(x, 1))
    x = rng.standard_normal((8, 5000)).astype(np.float32)
    for got, want in zip(fd.execute([x], backend="cpu"), fd.execute([x], backend="reference")):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


SWEPT_KINDS = ("ce_fwd_aot", "ce_fwd_nvf", "ce_bwd", "softmax", "layer_norm", "rope", "bcast_chain",
               "gpt2_epilogues")


@pytest.mark.parametrize("kind", SWEPT_KINDS)
def test_every_benchmark_fusion_runs_race_free(racecheck, kind):
    """The benchmark fusions (every scheduler but scans, covered above: row, persistent and
    grid reductions, pointwise, gathers, matmul epilogues) at small quick-mode shapes, each
    checked against the reference. The rest of the suite runs with FUSER_RACECHECK=0 unless
    set (conftest.py): `FUSER_RACECHECK=1 python -m pytest` checks every kernel it makes."""
    from benchmarks.cases import KINDS, Case, check

    dtype, shape = KINDS[kind].quick[0]
    case = Case(kind, dtype, tuple(shape))
    case = Case(kind, dtype, case.with_rows(256 << 10))
    inputs = case.inputs()
    ok, error = check(case.build().execute(inputs, backend="cpu"), case.reference(inputs))
    assert ok, f"{case.label}: relative error {error}"


def test_a_bad_setting_names_the_variable(monkeypatch):
    monkeypatch.setenv("FUSER_RACECHECK", "yes")
    with pytest.raises(settings.SettingError, match="FUSER_RACECHECK='yes': expected 0 or 1"):
        settings.racecheck()


def _row(block, **fields):
    from fuser.lowering.schedulers.rows import RowSchedule

    return RowSchedule(block, True, **fields)


ROW_VARIANTS = [
    # (case, kernel, schedule): each kind of row schedule the heuristic can pick, forced.
    (("softmax", "f32", (6, 1024)), 0, _row(128, lanes=8, vec=4, unroll=2)),  # rows share warps, online pass
    (("softmax", "f32", (6, 1024)), 0, _row(128, lanes=32, vec=4, iters=8, keep="loads")),  # rows share a block
    (("softmax", "f32", (6, 1024)), 0, _row(256, vec=4, iters=1, shared=True)),  # block per row, shared memory
    (("softmax", "f32", (6, 1024)), 0, _row(256, vec=4, unroll=1)),  # block per row, streamed
    (("layer_norm", "f32", (5, 1024)), 0, _row(128, lanes=16, vec=4, unroll=4)),  # Welford within groups
    (("layer_norm", "f32", (5, 1024)), 0, _row(512, vec=4, unroll=1)),  # Welford across the block
    (("gpt2_epilogues", "bf16", (1, 8, 768)), 0, _row(128, lanes=32, vec=8, iters=3, shared=True, keep="prefetch")),
    (("gpt2_epilogues", "bf16", (1, 8, 768)), 0, _row(64, vec=8, iters=2, keep="prefetch")),
    (("gpt2_epilogues", "bf16", (1, 8, 768)), 1, _row(128, lanes=16, vec=8, unroll=2)),
]


@pytest.mark.parametrize("case_key,kernel,schedule", ROW_VARIANTS,
                         ids=[f"{c[0]}-{s.describe()}" for c, _, s in ROW_VARIANTS])
def test_every_kind_of_row_schedule_runs_race_free(racecheck, case_key, kernel, schedule):
    """Forced with override_schedule: several rows a warp or a block (shuffles within a row's lanes,
    rows past the last one idle), rows kept in registers, in shared memory, prefetched, streamed
    with online and Welford passes — each race-free and equal to the reference."""
    from benchmarks.cases import Case, check

    case = Case(*case_key)
    fd = case.build()
    fd.override_schedule(kernel, schedule)
    inputs = case.inputs()
    ok, error = check(fd.execute(inputs, backend="cpu"), case.reference(inputs))
    assert ok, f"{case.label} under {schedule.describe()}: relative error {error}"
    assert fd.last_kernels()[kernel].schedule == schedule
