"""Scans (fd.ops.cumsum / cumprod / cummax / cummin) against torch, on the reference interpreter
and on the cpu backend (the scan unit's CUDA C run on the host).

Lengths 1, 31, 32 (a thread per line), 33, 1000 (a block of 128 per line, chunks with a carry)
and 5000 (a block of 512); the scan dim first, in the middle and last; every dtype. The four
scans of one input along one dim share a kernel, so each dtype and schedule compiles once.

Tolerances against torch: f32/f64 sums are accumulated in another order (block-wide partial
sums) than torch's serial loop (in double for f32 on the CPU), so they agree to n ulps of the
largest partial sum; a real error (a lost carry, a wrong element) is the size of an element or
of a chunk's sum, far above that. f16/bf16 accumulate in f32 on both sides and round each
output once: one ulp of the output dtype. Integers, bools, max and min are exact.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from lowering_checks import assert_matches, requires_cpu_backend

pytestmark = requires_cpu_backend

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [(DataType.Double, np.float64), (DataType.Float, np.float32), (DataType.Half, np.float16),
          (DataType.BFloat16, BF16)]
INTS = [(DataType.Int, np.int64), (DataType.Int32, np.int32), (DataType.Bool, np.bool_)]
LENGTHS = [1, 31, 32, 33, 1000, 5000]
BACKENDS = ["reference", "cpu"]
KINDS = ["cumsum", "cumprod", "cummax", "cummin"]
ULP = {np.dtype(np.float64): 2.0**-52, np.dtype(np.float32): 2.0**-23, np.dtype(np.float16): 2.0**-10,
       BF16: 2.0**-7}
PROD_SCALE = 0.02
"""cumprod scans exp(PROD_SCALE * x): products stay near 1 over 5000 elements (no overflow)."""


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _torch(x: np.ndarray) -> torch.Tensor:
    if x.dtype == BF16:
        return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x))


def _numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(BF16)
    return t.numpy()


def torch_scans(x: np.ndarray, dim: int) -> list[np.ndarray]:
    """torch's cumsum(x), cumprod(exp(0.02 x)) (integers: of x), cummax(x), cummin(x)."""
    t = _torch(x)
    prod_input = torch.exp(t * PROD_SCALE) if t.is_floating_point() else t
    return [_numpy(torch.cumsum(t, dim)), _numpy(torch.cumprod(prod_input, dim)),
            _numpy(torch.cummax(t, dim).values), _numpy(torch.cummin(t, dim).values)]


def scan_fusion(dtype: DataType, rank: int, dim: int, shape: list[int] | None = None) -> FusionDefinition:
    """The four scans of one input along `dim`: one scan kernel."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=shape or [-1] * rank, dtype=dtype)
        floating = dtype in (d for d, _ in FLOATS)
        fd.add_output(fd.ops.cumsum(x, dim))
        fd.add_output(fd.ops.cumprod(fd.ops.exp(x * PROD_SCALE) if floating else x, dim))
        fd.add_output(fd.ops.cummax(x, dim))
        fd.add_output(fd.ops.cummin(x, dim))
    return fd


def _tolerance(kind: str, expected: np.ndarray, length: int) -> tuple[float, float] | None:
    if expected.dtype not in ULP or kind in ("cummax", "cummin"):
        return (0.0, 0.0) if expected.dtype in ULP else None
    narrow = expected.dtype in (np.dtype(np.float16), BF16)
    accumulation = ULP[np.dtype(np.float32) if narrow else expected.dtype] * length
    wide = expected.astype(np.float64)
    magnitude = float(np.max(np.abs(wide[np.isfinite(wide)]), initial=1.0))
    if kind == "cumprod":  # relative error grows with the number of factors
        return 2 * ULP[expected.dtype] + 4 * accumulation, 0.0
    return 2 * ULP[expected.dtype], 4 * accumulation * magnitude + (ULP[expected.dtype] if narrow else 0.0)


def check_against_torch(fd, x: np.ndarray, dim: int, backend: str, what: str):
    outputs = fd.execute([x], backend=backend)
    for kind, got, expected in zip(KINDS, outputs, torch_scans(x, dim)):
        assert_matches(got, expected, f"{what} {kind} ({backend})", _tolerance(kind, expected, x.shape[dim]))
    return fd.last_kernels()


def _floats(rng, shape, npdt) -> np.ndarray:
    return rng.standard_normal(shape).astype(npdt)


def _ints(rng, shape, npdt) -> np.ndarray:
    if npdt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    # Products of -1 and 1 (and a few 2s) cannot overflow; sums of small integers neither.
    x = rng.choice(np.array([-1, 1], npdt), size=shape)
    x.flat[:: max(1, x.size // 20)] = 2
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,npdt", FLOATS + INTS, ids=lambda v: getattr(v, "name", None))
def test_scans_along_the_last_dim(dtype, npdt, backend):
    fd = scan_fusion(dtype, 2, 1)
    rng = _rng(7)
    make = _floats if npdt in [n for _, n in FLOATS] else _ints
    schedules = set()
    for length in LENGTHS:
        x = make(rng, (3, length), npdt)
        kernels = check_against_torch(fd, x, 1, backend, f"[3, {length}] dim 1")
        if backend == "cpu":
            assert [k.scheduler for k in kernels] == ["scan"], "the four scans share one kernel"
            schedules.add(kernels[0].source.split("// scheduler: scan, ")[1].split("\n")[0])
    if backend == "cpu":
        assert schedules == {"thread per line, block: 128", "block per line, block: 128",
                             "block per line, block: 512"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,npdt", [(DataType.Float, np.float32), (DataType.Int32, np.int32)], ids=["f32", "i32"])
@pytest.mark.parametrize("dim", [0, 1, 2], ids=["first", "middle", "last"])
def test_scans_of_every_dim_of_a_rank3_tensor(dim, dtype, npdt, backend):
    """Lines of an outer scan dim are read by neighbouring threads; 150 lines need two blocks."""
    fd = scan_fusion(dtype, 3, dim)
    rng = _rng(11 + dim)
    make = _floats if npdt == np.float32 else _ints
    for length in (1, 33, 1000):
        shape = [3, 5, 10]
        shape[dim] = length
        check_against_torch(fd, make(rng, tuple(shape), npdt), dim, backend, f"{shape} dim {dim}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dim", [0, 1])
def test_static_extents(dim, backend):
    """Static extents are literals in the kernel; the same results."""
    rng = _rng(3)
    for length in (31, 1000):
        shape = [4, 4]
        shape[dim] = length
        fd = scan_fusion(DataType.Float, 2, dim, shape=shape)
        check_against_torch(fd, _floats(rng, tuple(shape), np.float32), dim, backend, f"static {shape}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,npdt", [(DataType.Float, np.float32), (DataType.Half, np.float16)], ids=["f32", "f16"])
def test_nan_and_inf_propagate_as_in_torch(dtype, npdt, backend):
    """cummax/cummin: once a NaN is seen every later element is NaN; sums of inf and -inf are NaN."""
    fd = scan_fusion(dtype, 2, 1)
    for length in (20, 300):
        x = _floats(_rng(5), (4, length), npdt)
        x[0, 3] = np.nan
        x[1, 0] = np.nan
        x[2, 7], x[2, 250 % length] = np.inf, -np.inf
        x[3, length - 1] = np.nan
        check_against_torch(fd, x, 1, backend, f"[4, {length}] with NaN/inf")


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_tensors(backend):
    fd = scan_fusion(DataType.Float, 2, 1)
    for shape in [(0, 5), (3, 0)]:
        outputs = fd.execute([np.zeros(shape, np.float32)], backend=backend)
        assert [o.shape for o in outputs] == [shape] * 4


def test_producer_cone_fuses_and_moves_the_minimum_bytes():
    """cumsum(exp(x) * 2): one kernel reading x once and writing the result once."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.cumsum(fd.ops.exp(x) * 2, 1))
    x = _floats(_rng(9), (6, 1000), np.float32) * 0.1
    expected = torch.cumsum(torch.exp(torch.from_numpy(x)) * 2, 1).numpy()
    for backend in BACKENDS:
        (got,) = fd.execute([x], backend=backend)
        assert_matches(got, expected, backend, (1e-5, 4 * 2.0**-23 * 1000 * float(np.abs(expected).max())))
    (kernel,) = fd.last_kernels()
    assert kernel.scheduler == "scan"
    assert (kernel.bytes_loaded, kernel.bytes_stored) == (x.nbytes, x.nbytes)


def test_pointwise_consumer_runs_in_a_following_kernel():
    """A value computed from a scan result needs the whole prefix: the scan result is written,
    then a pointwise kernel reads it. An input-shaped output is stored by the scan kernel."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        e = fd.ops.exp(x)
        fd.add_output(e)
        fd.add_output(fd.ops.cummax(e, 0) - e)
    x = _floats(_rng(4), (50, 7), np.float32)
    t = torch.exp(torch.from_numpy(x))
    for backend in BACKENDS:
        got_e, got_d = fd.execute([x], backend=backend)
        assert_matches(got_e, t.numpy(), f"exp ({backend})")
        assert_matches(got_d, (torch.cummax(t, 0).values - t).numpy(), f"cummax - e ({backend})")
    kernels = fd.last_kernels()
    assert [k.scheduler for k in kernels] == ["scan", "pointwise"]
    # exp(x) is computed once, in the scan kernel, and written for the output and the consumer.
    assert kernels[0].bytes_loaded == x.nbytes and kernels[0].bytes_stored == 2 * x.nbytes


def test_scans_of_different_dims_are_different_kernels():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Double)
        fd.add_output(fd.ops.cumsum(x, 0))
        fd.add_output(fd.ops.cumsum(x, -1))
    x = _floats(_rng(8), (40, 70), np.float64)
    t = torch.from_numpy(x)
    for backend in BACKENDS:
        rows, cols = fd.execute([x], backend=backend)
        assert_matches(rows, torch.cumsum(t, 0).numpy(), f"dim 0 ({backend})")
        assert_matches(cols, torch.cumsum(t, 1).numpy(), f"dim 1 ({backend})")
    assert [k.scheduler for k in fd.last_kernels()] == ["scan", "scan"]


def test_bad_arguments():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        with pytest.raises(ValueError, match="cumsum: dim 2 is out of range for a tensor of rank 2"):
            fd.ops.cumsum(x, 2)
        with pytest.raises(TypeError, match="cumprod: arg must be a Tensor, got float"):
            fd.ops.cumprod(1.5, 0)
        with pytest.raises(TypeError, match=r"cummax: dim = 0.5: expected an int"):
            fd.ops.cummax(x, 0.5)
        fd.add_output(fd.ops.cummin(x, -2))
    assert "fuser.scan min %0 dim 0" in str(fd)


@pytest.mark.parametrize("backend", BACKENDS)
def test_line_invariant_operand(backend):
    """x + b with b broadcast along the scan dim: b is read once per line (hoisted out of the
    walk along the line); scanned along the other dim, b varies along the line."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, 1], dtype=DataType.Float)
        fd.add_output(fd.ops.cumsum(x + b, 1))
        fd.add_output(fd.ops.cummax(x + b, 0))
    x, b = _floats(_rng(12), (5, 300), np.float32), _floats(_rng(13), (5, 1), np.float32)
    t = torch.from_numpy(x) + torch.from_numpy(b)
    along, across = fd.execute([x, b], backend=backend)
    assert_matches(along, torch.cumsum(t, 1).numpy(), f"cumsum ({backend})", (1e-5, 1e-3))
    assert_matches(across, torch.cummax(t, 0).values.numpy(), f"cummax ({backend})", (0.0, 0.0))
    if backend == "cpu":
        assert [k.scheduler for k in fd.last_kernels()] == ["scan", "scan"]
        assert "fuser_lane0" in fd.last_kernels()[0].source  # b: one load per warp and line


# --- issue 38: what fails on a GPU fails here -----------------------------------------------------


def test_a_scan_block_that_is_no_whole_number_of_warps_is_refused():
    """The block-wide scan combines whole warps (blockDim.x >> 5 of them): a forced block of 48
    threads lost the partial warp's total and gave wrong values; override_schedule refuses it,
    naming the field, as it refuses other blocks no GPU can run."""
    from fuser.lowering.schedulers.scan import ScanSchedule

    fd = scan_fusion(DataType.Float, 2, 1)
    x = _floats(_rng(21), (4, 1000), np.float32)
    for schedule, why in [(ScanSchedule(48, True), r"block: 48 is not a multiple of 32"),
                          (ScanSchedule(2048, True), r"block: 2048 threads; a block has 1 to 1024"),
                          (ScanSchedule(0, False), r"block: 0 threads"),
                          (ScanSchedule(64, False, split=True), r"split: a split line is scanned by blocks")]:
        fd.override_schedule(0, schedule)
        with pytest.raises(ValueError, match=r"override_schedule: kernel 0 \(scan\).*" + why):
            fd.execute([x], backend="cpu")
    fd.override_schedule(0, ScanSchedule(96, True))  # three whole warps: runs, and right
    check_against_torch(fd, x, 1, "cpu", "forced block of 96")
    fd.override_schedule(0, ScanSchedule(64, True, split=True))  # a split over 8 chunks of 128
    check_against_torch(fd, x, 1, "cpu", "forced split")


@pytest.mark.parametrize("backend", BACKENDS)
def test_many_scans_are_split_into_kernels_that_fit_registers_and_shared_memory(backend):
    """200 cumsums of one f64 tensor were one scan kernel with 200 warp-total arrays of 32 doubles
    (51,200 bytes of static shared memory: ptxas refuses more than 48 KiB) and 200 carries in
    registers (a 7 KB stack and ~20 KB of spills). A scan kernel now carries at most
    MAX_CARRY_BYTES a thread; segmentation splits the rest and says why in the IR."""
    from fuser.lowering.backends.static_shared import static_shared_bytes
    from fuser.lowering.schedulers.scan import MAX_CARRY_BYTES

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Double)
        for k in range(200):
            fd.add_output(fd.ops.cumsum(x * float(k % 7 + 1), 1))
    x = _floats(_rng(22), (3, 700), np.float64)
    outputs = fd.execute([x], backend=backend)
    t = torch.from_numpy(x)
    for k, got in enumerate(outputs):
        assert_matches(got, torch.cumsum(t * float(k % 7 + 1), 1).numpy(), f"cumsum {k} ({backend})",
                       _tolerance("cumsum", torch.cumsum(t * 7.0, 1).numpy(), 700))
    if backend != "cpu":
        return
    kernels = fd.last_kernels()
    assert len(kernels) == -(-200 * 8 // MAX_CARRY_BYTES) and {k.scheduler for k in kernels} == {"scan"}
    for k in kernels:
        assert static_shared_bytes(k.source, k.name) <= 200 * 8 * (k.block[0] // 32) // len(kernels) + 8 * 16
    ir = fd.scheduled_fusion_ir_for([x])
    assert "split before fuser.scan: 13 scans carry 104 bytes a thread, more than the 96 one scan kernel keeps in " \
           "registers" in ir


def _long_scans(rank: int) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * rank, dtype=DataType.Float)
        e = fd.ops.exp(x * 0.001)
        fd.add_output(fd.ops.cumsum(x, -1))
        fd.add_output(fd.ops.cummax(x, -1))
        fd.add_output(e)  # an output stored from the scan's loop (pass 1 only)
        fd.add_output(fd.ops.cumprod(e, -1))
    return fd


def test_a_long_1d_scan_runs_over_the_whole_gpu():
    """A cumsum of f32 [2^26] ran as one block of 512 threads (1 of 132 SMs busy); a long line
    is now cut into chunks over SPLIT_BLOCKS_PER_SM blocks an SM, in two launches of one kernel
    (reduce, then scan from the earlier chunks' totals)."""
    from fuser.lowering.schedulers.scan import SPLIT_BLOCKS_PER_SM

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.cumsum(x, 0))
    (kernel,) = fd.kernels_for([np.empty(1 << 26, np.float32)])
    assert kernel.schedule.split and kernel.block == (512, 1, 1)
    assert kernel.grid == (SPLIT_BLOCKS_PER_SM * 132, 1, 1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(50_000,), (3, 70_001), (1, 16_384)], ids=str)
def test_split_scans_match_torch(shape, backend):
    fd = _long_scans(len(shape))
    x = _rng(23).standard_normal(shape).astype(np.float32)
    t = torch.from_numpy(x).double()
    e = torch.exp(t * 0.001)
    expected = [torch.cumsum(t, -1), torch.cummax(t, -1).values, e, torch.cumprod(e, -1)]
    for _ in range(2):  # the full path, then the launch plan's replay
        outputs = fd.execute([x], backend=backend)
        for name, got, want in zip(("cumsum", "cummax", "exp", "cumprod"), outputs, expected):
            want = want.float().numpy()
            tol = (0.0, 0.0) if name == "cummax" else (1e-5, 8 * 2.0**-23 * shape[-1] * float(np.abs(want).max()))
            assert_matches(got, want, f"{name} {shape} ({backend})", tol)
    if backend == "cpu":
        (kernel,) = fd.last_kernels()
        assert kernel.schedule.split and kernel.grid[0] > 1
        # x is read twice (pass 0 and pass 1), the outputs written once; the chunks' totals are
        # a few bytes per block.
        assert 2 * x.nbytes <= kernel.bytes_loaded < 2 * x.nbytes + 16 * 4 * 3 * kernel.grid[0] ** 2
        assert 4 * x.nbytes <= kernel.bytes_stored <= 4 * x.nbytes + 3 * 4 * kernel.grid[0]


def test_split_scan_of_integers_is_exact():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Int32)
        fd.add_output(fd.ops.cumsum(x, 0))
        fd.add_output(fd.ops.cummin(x, 0))
    x = _rng(24).integers(-1000, 1000, 40_000).astype(np.int32)
    total, low = fd.execute([x], backend="cpu")
    np.testing.assert_array_equal(total, np.cumsum(x.astype(np.int64)))
    np.testing.assert_array_equal(low, np.minimum.accumulate(x))
    assert fd.last_kernels()[0].schedule.split


def test_split_scan_is_race_free(monkeypatch):
    from fuser.lowering import settings

    monkeypatch.setenv("FUSER_RACECHECK", "1")
    settings.reload()
    try:
        fd = _long_scans(1)
        x = _rng(25).standard_normal(20_000).astype(np.float32)
        got = fd.execute([x], backend="cpu")[0]
        assert_matches(got, np.cumsum(x.astype(np.float64)).astype(np.float32), "racecheck split cumsum",
                       (1e-5, 1e-2))
    finally:
        monkeypatch.undo()
        settings.reload()
