"""fuser.uniform / fuser.normal (rand_like, randn_like): Philox values that are a function of
(seed, offset, logical element) only — bit-exact between the numpy reference and the generated
C (for normal too: api/test_nvfuser_semantics.py) — under any schedule; seeds are run-time
kernel arguments (no recompile, no new launch plan); dropout; statistics against torch."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from fuser_dialect import philox

from lowering_checks import assert_matches, check, requires_cpu_backend

pytestmark = requires_cpu_backend

FLOATS = [DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view({8: np.uint64, 4: np.uint32, 2: np.uint16}[a.dtype.itemsize])


def _seeded(build, shape=(-1, -1), dtype=DataType.Float):
    """A fusion of one input x of `shape` plus Int seed and offset inputs; `build(fd, x, s, o)`."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=list(shape), dtype=dtype)
        s = fd.define_scalar(dtype=DataType.Int)
        o = fd.define_scalar(dtype=DataType.Int)
        for out in build(fd, x, s, o):
            fd.add_output(out)
    return fd


def _zeros(shape, dtype: DataType) -> np.ndarray:
    return np.zeros(shape, dtype.numpy)


# --- Philox itself ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed, offset, sub, expected", [
    (0, 0, 0, (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (2**64 - 1, 2**64 - 1, 2**64 - 1, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (0x299F31D0A4093822, 0x85A308D3243F6A88, 0x0370734413198A2E, (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox_known_answers(seed, offset, sub, expected):
    """Random123's known-answer vectors for Philox4x32-10 (key = seed, counter = (offset, sub))."""
    words = philox.philox4x32(seed, offset, np.array([sub], np.uint64))
    assert tuple(int(w[0]) for w in words) == expected


# --- bit-exact uniform, tolerance normal, reference vs cpu --------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(7, 13), (1, 129), (33, 1)])
def test_uniform_bit_exact_between_reference_and_cpu(dtype, shape):
    fd = _seeded(lambda fd, x, s, o: [fd.ops.uniform(-2.5, 3.0, x.shape(), s, o, dtype=dtype)])
    inputs = [_zeros(shape, DataType.Float), 123456789, 42]
    (ref,) = fd.execute(inputs, backend="reference")
    (cpu,) = fd.execute(inputs, backend="cpu")
    assert ref.dtype == cpu.dtype == dtype.numpy and ref.shape == shape
    np.testing.assert_array_equal(_bits(cpu), _bits(ref))
    values = ref.astype(np.float64)
    assert values.min() >= -2.5 and values.max() <= 3.0


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_normal_matches_reference_within_tolerance(dtype):
    fd = _seeded(lambda fd, x, s, o: [fd.ops.normal(0.5, 2.0, x.shape(), s, o, dtype=dtype)])
    check(fd, [_zeros((31, 17), DataType.Float), -7, 3])


def test_uniform_matches_the_documented_formula():
    """Element i of an f32 uniform is word i % 4 of Philox(seed, offset, i // 4), >> 8, * 2^-24,
    and lo + (hi - lo) * u rounded per operation; computed here independently with torch."""
    fd = _seeded(lambda fd, x, s, o: [fd.ops.uniform(1.0, 5.0, x.shape(), s, o)])
    (cpu,) = fd.execute([_zeros((3, 7), DataType.Float), 5, 9], backend="cpu")
    i = np.arange(21, dtype=np.uint64)
    words = np.stack(philox.philox4x32(5, 9, i // 4))[(i % 4).astype(np.intp), np.arange(21)]
    u = torch.from_numpy((words >> 8).astype(np.float32)) * 2.0**-24
    expected = torch.tensor(1.0) + torch.tensor(4.0) * u
    np.testing.assert_array_equal(cpu.ravel(), expected.numpy())


# --- determinism across shapes and schedules ------------------------------------------------------


def test_same_values_under_different_schedules():
    """The same random tensor written by a vectorised pointwise kernel and by a row-reduction
    kernel that also sums it: identical bits, and the sum is the sum of those bits."""
    alone = _seeded(lambda fd, x, s, o: [fd.ops.rand_like(x, s, o)], shape=(64, 256))
    fused = _seeded(lambda fd, x, s, o: [u := fd.ops.rand_like(x, s, o), fd.ops.sum(u, [1])], shape=(64, 256))
    inputs = [_zeros((64, 256), DataType.Float), 2024, 1]
    (a,) = alone.execute(inputs, backend="cpu")
    vectorised = alone.last_kernels()[0]
    b, total = fused.execute(inputs, backend="cpu")
    rows = fused.last_kernels()
    assert "vector" in vectorised.source.split("// scheduler:")[1].splitlines()[0]
    assert {k.scheduler for k in rows} != {"pointwise"}
    np.testing.assert_array_equal(_bits(a), _bits(b))
    np.testing.assert_allclose(total, torch.from_numpy(a).sum(1).numpy(), rtol=1e-5)


def test_values_depend_on_the_logical_element_only():
    """A uniform of shape [n, 8] is the first n*8 values of one of shape [n*8] (same seed/offset)."""
    flat = _seeded(lambda fd, x, s, o: [fd.ops.uniform(0, 1, [x.size(0)], s, o)], shape=(-1,))
    grid = _seeded(lambda fd, x, s, o: [fd.ops.uniform(0, 1, [x.size(0), 8], s, o)], shape=(-1,))
    (a,) = flat.execute([_zeros((40,), DataType.Float), 3, 4], backend="cpu")
    (b,) = grid.execute([_zeros((5,), DataType.Float), 3, 4], backend="cpu")
    np.testing.assert_array_equal(a, b.ravel())


def test_dynamic_shapes_share_one_compilation():
    fd = _seeded(lambda fd, x, s, o: [fd.ops.randn_like(x, s, o)])
    for shape in [(3, 5), (17, 1), (1, 300), (0, 4)]:
        (got,) = fd.execute([_zeros(shape, DataType.Float), 11, 0], backend="cpu")
        (ref,) = fd.execute([_zeros(shape, DataType.Float), 11, 0], backend="reference")
        assert got.shape == shape
        assert_matches(got, ref, f"randn_like {shape}")
    assert len(fd.cache_info().entries) == 1  # one concretization (schedules may vary with the shape)


# --- seeds are run-time arguments -------------------------------------------------------------------


def test_twenty_seeds_one_compilation_and_one_launch_plan():
    fd = _seeded(lambda fd, x, s, o: [fd.ops.rand_like(x, s, o)])
    x = _zeros((9, 33), DataType.Float)
    seen = set()
    for seed in range(20):
        (got,) = fd.execute([x, seed, 100 - seed], backend="cpu")
        if seed:
            assert fd._get_executor().last_call_used_plan(), f"seed {seed} did not reuse the launch plan"
        (ref,) = fd.execute([x, seed, 100 - seed], backend="reference")
        np.testing.assert_array_equal(got, ref)
        seen.add(got.tobytes())
    assert len(seen) == 20
    assert fd.cache_info().misses == 1
    assert fd._get_executor().plan_count() == 1
    fd.execute([x, 987654321, 13579], backend="cpu")
    kernel = fd.last_cuda_code().split("// scheduler")[-1]
    assert "rng" in kernel and "987654321" not in kernel and "13579" not in kernel


def test_constant_seed_and_offset():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.uniform(0.0, 1.0, [5, 7], rng_seed=17, rng_offset=3))
    (ref,) = fd.execute([], backend="reference")
    (cpu,) = fd.execute([], backend="cpu")
    np.testing.assert_array_equal(cpu, ref)
    np.testing.assert_array_equal(ref.ravel(), philox.uniform_units(17, 3, 35, wide=False))


def test_unseeded_draws_differ_per_execution_and_follow_torch_manual_seed():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.rand_like(x))
        fd.add_output(fd.ops.rand_like(x))
    x = _zeros((16, 16), DataType.Float)
    a, b = fd.execute([x], backend="cpu")
    assert not np.array_equal(a, b), "two unseeded ops must not be merged"
    (c, _) = fd.execute([x], backend="cpu")
    assert not np.array_equal(a, c), "successive executions must differ"
    results = {}
    for backend in ("reference", "cpu", "cpu"):
        torch.manual_seed(1234)
        results.setdefault(backend, []).append(fd.execute([x], backend=backend))
    for ref, cpu in zip(results["reference"][0], results["cpu"][0]):
        np.testing.assert_array_equal(ref, cpu)
    for first, plan in zip(results["cpu"][0], results["cpu"][1]):
        np.testing.assert_array_equal(first, plan)


# --- dropout -------------------------------------------------------------------------------------


def _dropout(p: float):
    def build(fd, x, s, o):
        mask = fd.ops.lt(fd.ops.rand_like(x, s, o), p)
        return [fd.ops.where(mask, x * (1.0 / p), 0.0), mask]
    return _seeded(build)


def test_dropout_is_one_kernel_reproducible_and_matches_torch():
    keep = 0.8
    fd = _dropout(keep)
    x = np.random.default_rng(0).standard_normal((123, 77)).astype(np.float32)
    out_cpu, mask_cpu = fd.execute([x, 99, 0], backend="cpu")
    assert [k.scheduler for k in fd.last_kernels()] == ["pointwise"]
    out_ref, mask_ref = fd.execute([x, 99, 0], backend="reference")
    np.testing.assert_array_equal(mask_cpu, mask_ref)
    np.testing.assert_array_equal(out_cpu, out_ref)
    # The same dropout in torch from the documented uniform values.
    u = torch.from_numpy(philox.uniform_units(99, 0, x.size, wide=False).reshape(x.shape))
    expected = torch.where(u < keep, torch.from_numpy(x) * (1.0 / keep), 0.0)
    np.testing.assert_allclose(out_cpu, expected.numpy(), rtol=1e-6)
    # Another offset: another mask; the keep rate within 6 standard deviations.
    _, other = fd.execute([x, 99, 1], backend="cpu")
    assert (other != mask_cpu).mean() > 0.2
    n = x.size
    assert abs(mask_cpu.mean() - keep) < 6 * math.sqrt(keep * (1 - keep) / n)


# --- statistics (against torch's own generator) --------------------------------------------------


def _ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    both = np.sort(np.concatenate([a, b]))
    return float(np.max(np.abs(np.searchsorted(np.sort(a), both, "right") / a.size
                                - np.searchsorted(np.sort(b), both, "right") / b.size)))


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.Double], ids=lambda d: d.name)
def test_statistics_agree_with_torch(dtype):
    n = 1 << 16
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.uniform(-1.0, 3.0, [n], rng_seed=5, rng_offset=0, dtype=dtype))
        fd.add_output(fd.ops.normal(2.0, 0.5, [n], rng_seed=5, rng_offset=1, dtype=dtype))
    u, z = (v.numpy() for v in fd.execute([], backend="cpu"))  # no tensor inputs: torch outputs
    g = torch.Generator().manual_seed(5)
    tu = (torch.rand(n, generator=g, dtype=torch.float64) * 4 - 1).numpy()
    tz = torch.normal(2.0, 0.5, (n,), generator=g, dtype=torch.float64).numpy()
    # Two-sample KS at alpha = 1e-4: c(alpha) * sqrt(2 / n).
    bound = math.sqrt(-0.5 * math.log(1e-4 / 2)) * math.sqrt(2 / n)
    assert _ks_statistic(u.astype(np.float64), tu) < bound
    assert _ks_statistic(z.astype(np.float64), tz) < bound
    assert abs(u.mean() - 1.0) < 6 * math.sqrt(16 / 12 / n)
    assert abs(u.var() - 16 / 12) < 0.05
    assert abs(z.mean() - 2.0) < 6 * 0.5 / math.sqrt(n)
    assert abs(z.std() - 0.5) < 0.01
    assert np.isfinite(z).all()


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, error, words", [
    (lambda fd, x, s: fd.ops.uniform(0, 1, [4], dtype=DataType.Int), ValueError, "floating point"),
    (lambda fd, x, s: fd.ops.uniform(0, 1, [4], rng_seed=s), ValueError, "provided together"),
    (lambda fd, x, s: fd.ops.uniform(0, 1, [4], rng_seed=1.5, rng_offset=0), TypeError, "rng_seed"),
    (lambda fd, x, s: fd.ops.uniform(0, 1, [4], rng_seed=fd.define_scalar(1.0), rng_offset=0), TypeError,
     "Int Scalar"),
    (lambda fd, x, s: fd.ops.uniform(2, 1, [4]), ValueError, "minval"),
    (lambda fd, x, s: fd.ops.normal(0, -1.0, [4]), ValueError, "std"),
    (lambda fd, x, s: fd.ops.normal("0", 1.0, [4]), TypeError, "mean"),
    (lambda fd, x, s: fd.ops.uniform(0, 1, [3, -2]), ValueError, "extents must be >= 0"),
    (lambda fd, x, s: fd.ops.uniform(0, 1, 4), TypeError, "shape"),
    (lambda fd, x, s: fd.ops.rand_like(x, dtype=DataType.Bool), ValueError, "floating point"),
    (lambda fd, x, s: fd.ops.rand_like(3.0), TypeError, "rand_like: arg"),
])
def test_bad_arguments(call, error, words):
    with pytest.raises(error, match=words):
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1])
            s = fd.define_scalar(dtype=DataType.Int)
            fd.add_output(call(fd, x, s))


def test_non_integer_seed_at_execute():
    fd = _seeded(lambda fd, x, s, o: [fd.ops.rand_like(x, s, o)])
    for backend in ("reference", "cpu"):
        with pytest.raises(TypeError, match="integer"):
            fd.execute([_zeros((2, 2), DataType.Float), 1.5, 0], backend=backend)


def test_bfloat16_rounding_matches_ml_dtypes():
    """bf16 values are the f32 uniform rounded to nearest even (what ml_dtypes does); one that
    rounded up to the upper bound 1.0 is the lower bound 0.0 instead ([low, high) in bf16)."""
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.uniform(0.0, 1.0, [257], rng_seed=8, rng_offset=8, dtype=DataType.BFloat16))
    (got,) = fd.execute([], backend="cpu")  # no tensor inputs: a torch tensor
    expected = philox.uniform_units(8, 8, 257, wide=False).astype(ml_dtypes.bfloat16)
    assert (expected == 1.0).sum() == 1  # this seed has one such value
    expected[expected == 1.0] = 0.0
    np.testing.assert_array_equal(got.view(torch.int16).numpy(), _bits(expected))


# --- normal at f32 speed: f32 Box-Muller, compile-time Philox words (issue 38) --------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(7, 13), (64, 256)])
def test_normal_bit_exact_between_reference_and_cpu(dtype, shape):
    """The kernel's Box-Muller (f32 for f32/f16/bf16, f64 for f64) and the reference's are the
    same operations: every bit agrees, over enough elements to reach every quarter turn and
    both log branches."""
    fd = _seeded(lambda fd, x, s, o: [fd.ops.normal(0.5, 2.0, x.shape(), s, o, dtype=dtype)])
    inputs = [_zeros(shape, DataType.Float), 987654321, 7]
    (ref,) = fd.execute(inputs, backend="reference")
    (cpu,) = fd.execute(inputs, backend="cpu")
    assert ref.dtype == cpu.dtype == dtype.numpy
    np.testing.assert_array_equal(_bits(cpu), _bits(ref))


def test_f32_normal_is_within_a_few_ulps_of_the_exact_transform():
    """The f32 steps (their own series and constants) against the same two units transformed in
    f64 with numpy's libm: a few f32 ulps of the value, or of 1 near 0 (the cosine's zero)."""
    count = 1 << 16
    z = philox.normal_units(2024, 3, count, wide=False)
    i = np.arange(count, dtype=np.uint64)
    words = philox.philox4x32(2024, 3, i >> np.uint64(1))
    pair = (i & np.uint64(1)).astype(np.intp) * 2
    u1 = philox._unit_f32(np.choose(pair, words)).astype(np.float64)
    u2 = philox._unit_f32(np.choose(pair + 1, words)).astype(np.float64)
    exact = np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
    assert z.dtype == np.float32
    ulp = np.spacing(np.maximum(np.abs(exact), 1.0).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(z - exact) / ulp) <= 4


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16, DataType.Double], ids=lambda d: d.name)
@pytest.mark.parametrize("distribution", ["uniform", "normal"])
def test_random_kernels_keep_philox_in_registers_and_f32_in_f32(distribution, dtype):
    """sm_90 SASS of the kernel of x + rand (2-D, vectorised): no stack frame, no local memory
    (the Philox words are picked with compile-time indices), and no f64 instruction where no
    value is f64 (normal's f32 Box-Muller)."""
    from fuser.lowering.backends import compile as cc
    from fuser.lowering.backends.resources import ptxas_reports, sass_of
    from fuser.lowering.backends.sass import SassUnavailable

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        r = getattr(fd.ops, distribution)(0.0, 1.0, x.shape(), dtype=dtype)
        fd.add_output(fd.ops.add(x, fd.ops.cast(r, DataType.Float)))
    (kernel,) = fd.kernels_for([np.empty((64, 4096), np.float32)])
    try:
        report = ptxas_reports(kernel.source, "sm_90")[kernel.name]
        sass = sass_of(kernel.source, "sm_90")[kernel.name]
    except (cc.CompilerUnavailable, SassUnavailable) as e:
        pytest.skip(f"no NVRTC/nvdisasm: {e}")
    assert (report.stack_bytes, report.spill_bytes, sass.local_loads, sass.local_stores) == (0, 0, 0, 0)
    if dtype != DataType.Double:
        ptx = cc.compile_cuda(kernel.source, "sm_90", (), output="ptx").cubin.decode(errors="replace")
        assert ".f64" not in ptx, "f64 instructions in a kernel without f64 values"
