"""`fd.ops.var`, `fd.ops.var_mean` and `fd.ops.welford` (fuser_dialect/ops_welford.py) against
torch.var / torch.var_mean, on the "reference" backend (the numpy interpreter of fuser.welford)
and the "cpu" backend (the generated CUDA C of its decomposition, passes/decompose_welford.py):
dims, keepdim, corrections, static and dynamic shapes, every float dtype; a case where the naive
E[x^2] - E[x]^2 fails in f32; a layer-norm written with var_mean as one kernel reading its
input once; rows too long to keep on chip as one Welford pass."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from fuser.lowering.backends.cpu_runtime import cpu_compiler_available
from fuser.passes.decompose_welford import DecomposeWelfordPass
from fuser_dialect.fusion import make_context, the_fusion
from fuser_dialect.interpreter import interpret

BACKENDS = [
    "reference",
    pytest.param("cpu", marks=pytest.mark.skipif(not cpu_compiler_available(), reason="no g++ (C++20) for the cpu backend")),
]

BF16 = np.dtype(ml_dtypes.bfloat16)
NUMPY = {DataType.Double: np.float64, DataType.Float: np.float32, DataType.Half: np.float16, DataType.BFloat16: BF16}
# (rtol, atol) against torch: f16/bf16 results are rounded once from f32 on both sides, so
# they may differ by one unit in the last place where the f32 values straddle a boundary.
TOLERANCE = {DataType.Double: (1e-12, 1e-12), DataType.Float: (1e-5, 1e-6),
             DataType.Half: (2e-3, 1e-3), DataType.BFloat16: (1.6e-2, 1e-2)}


def _inputs(shape, dtype, seed=0, scale=2.0, offset=0.5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale + offset).astype(NUMPY[dtype])


def _torch(x: np.ndarray) -> torch.Tensor:
    if x.dtype == BF16:
        return torch.from_numpy(x.astype(np.float32)).bfloat16()
    return torch.from_numpy(x)


def _assert_close(got, expected: torch.Tensor, dtype: DataType, what: str) -> None:
    got = np.asarray(got)
    want = expected.float().numpy() if expected.dtype == torch.bfloat16 else expected.numpy()
    assert got.dtype == np.dtype(NUMPY[dtype]), f"{what}: dtype {got.dtype}, torch {expected.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, torch {want.shape}"
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=what)


def _var_mean_fusion(define_shape, dtype, dims, correction, keepdim) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=define_shape, dtype=dtype)
        var, mean = fd.ops.var_mean(x, dims, correction=correction, keepdim=keepdim)
        fd.add_output(var)
        fd.add_output(mean)
    return fd


def _dynamic(shape):
    return [-1] * len(shape)


def _static(shape):
    return list(shape)


# (shape, define_shape, dims, correction, keepdim, dtype): odd extents throughout.
CASES = [
    ((33, 129), _dynamic, [-1], 1, False, DataType.Float),
    ((33, 129), _static, [0], 0, True, DataType.Float),
    ((5, 6, 7), _dynamic, [0, 2], 2, False, DataType.Double),
    ((5, 6, 7), _dynamic, None, 1, False, DataType.Float),
    ((3, 4, 5), _static, [0, 1, 2], 2, True, DataType.Double),
    ((4, 3, 50), _static, [1, 2], 1, True, DataType.Half),
    ((17, 300), _dynamic, [-1], 0, True, DataType.BFloat16),
    ((7, 9, 11), _dynamic, [1], 1, False, DataType.Half),
    ((9, 2, 65), _dynamic, [0, -1], 0, False, DataType.BFloat16),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape,define,dims,correction,keepdim,dtype", CASES,
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_var_mean_matches_torch(backend, shape, define, dims, correction, keepdim, dtype):
    x = _inputs(shape, dtype, seed=len(shape) + correction)
    fd = _var_mean_fusion(define(shape), dtype, dims, correction, keepdim)
    var, mean = fd.execute([x], backend=backend)
    want_var, want_mean = torch.var_mean(_torch(x), dim=dims, correction=correction, keepdim=keepdim)
    _assert_close(var, want_var, dtype, "var")
    _assert_close(mean, want_mean, dtype, "mean")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_matches_torch(backend, correction):
    x = _inputs((6, 31), DataType.Float, seed=correction)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.var(t, [1], correction))
    (var,) = fd.execute([x], backend=backend)
    _assert_close(var, torch.var(_torch(x), dim=[1], correction=correction), DataType.Float, "var")


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_too_few_elements_give_inf_or_nan_as_torch(backend, correction):
    """torch divides by max(n - correction, 0): one element per row gives nan (0 / 0) unless
    correction is 0; two elements with correction 2 give inf."""
    x = _inputs((5, 1), DataType.Float)
    y = _inputs((5, 2), DataType.Float, seed=1)
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, 1])
        b = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.var(a, [1], correction))
        fd.add_output(fd.ops.var(b, [1], correction))
    one, two = fd.execute([x, y], backend=backend)
    _assert_close(one, torch.var(_torch(x), dim=[1], correction=correction), DataType.Float, "one element")
    _assert_close(two, torch.var(_torch(y), dim=[1], correction=correction), DataType.Float, "two elements")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [DataType.Float, DataType.Half])
def test_welford_gives_avg_var_sum_and_count(backend, dtype):
    """nvFuser's welford: (avg, var_sum, n); avg and var_sum in f32 for a half input, n in i64."""
    x = _inputs((7, 5, 23), dtype, seed=4)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 5, -1], dtype=dtype)
        avg, var_sum, n = fd.ops.welford(t, [0, 2])
        fd.add_output(avg)
        fd.add_output(var_sum)
        fd.add_output(n)
        fd.add_output(fd.ops.div(var_sum, n))  # nvFuser's own test: var_sum / n is the biased var
    avg, var_sum, n, var = fd.execute([x], backend=backend)
    xt = _torch(x).double()
    want_var, want_mean = torch.var_mean(xt, dim=[0, 2], correction=0)
    assert avg.dtype == var_sum.dtype == var.dtype == np.float32 and n.dtype == np.int64
    np.testing.assert_array_equal(n, np.full(5, 7 * 23))
    np.testing.assert_allclose(avg, want_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var_sum, (want_var * 7 * 23).numpy(), rtol=1e-5)
    np.testing.assert_allclose(var, want_var.numpy(), rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stable_where_the_naive_formula_cancels(backend):
    """Rows of 1e4 + noise of std 0.1 in f32: E[x^2] - E[x]^2 loses every digit (x^2 ~ 1e8 has
    an f32 spacing of 8, the variance is 0.01); ours matches torch's f64 result closely."""
    rng = np.random.default_rng(7)
    x = (1e4 + 0.1 * rng.standard_normal((16, 4099))).astype(np.float32)
    exact = torch.var(torch.from_numpy(x).double(), dim=1, correction=0).numpy()
    naive = np.mean(x * x, axis=1, dtype=np.float32) - np.mean(x, axis=1, dtype=np.float32) ** 2
    assert np.max(np.abs(naive - exact) / exact) > 0.1  # the naive formula really fails here
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.var(t, [1], correction=0))
    (var,) = fd.execute([x], backend=backend)
    np.testing.assert_allclose(var, exact, rtol=1e-3)


def _layer_norm(dtype: DataType, eps: float = 1e-5) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        xf = fd.ops.cast(x, DataType.Float)
        var, mean = fd.ops.var_mean(xf, [1], correction=0, keepdim=True)
        y = fd.ops.mul(fd.ops.sub(xf, mean), fd.ops.rsqrt(fd.ops.add(var, eps)))
        fd.add_output(fd.ops.cast(y, dtype))
    return fd


@pytest.mark.skipif(not cpu_compiler_available(), reason="no g++ (C++20) for the cpu backend")
@pytest.mark.parametrize("dtype,shape", [(DataType.Float, (64, 1000)), (DataType.BFloat16, (33, 4096))],
                         ids=["f32", "bf16"])
def test_layer_norm_with_var_mean_is_one_kernel_reading_its_input_once(dtype, shape):
    x = _inputs(shape, dtype, seed=3, offset=3.0)
    fd = _layer_norm(dtype)
    (y,) = fd.execute([x], backend="cpu")
    kernels = fd.last_kernels()
    assert [k.scheduler for k in kernels] == ["inner_persistent"], [k.name for k in kernels]
    assert kernels[0].bytes_loaded == x.nbytes
    assert kernels[0].bytes_stored == y.nbytes
    want = torch.nn.functional.layer_norm(_torch(x).float(), shape[-1:], eps=1e-5).to(_torch(x).dtype)
    _assert_close(y, want, dtype, "layer_norm")
    (ref,) = fd.execute([x], backend="reference")
    _assert_close(ref, want, dtype, "layer_norm (reference)")


@pytest.mark.skipif(not cpu_compiler_available(), reason="no g++ (C++20) for the cpu backend")
@pytest.mark.parametrize("shape,dims", [((4, 70000), [1]), ((96, 300), [0]), ((3, 5, 40000), [0, 2])],
                         ids=["long-rows", "outer", "batch-norm-like"])
def test_rows_off_chip_are_one_welford_pass(shape, dims):
    """Rows too long to keep on chip (and outer reductions, a thread per column): var_mean is
    one Welford pass, so the input is read once; on rows of 1e4 + noise, where a naive one-pass
    formula loses every digit, it stays within 2e-6 of the f64 variance (f32 two-pass: ~1e-7)."""
    rng = np.random.default_rng(11)
    x = (1e4 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1] * len(shape))
        var, mean = fd.ops.var_mean(t, dims, correction=1)
        fd.add_output(var)
        fd.add_output(mean)
    var, mean = fd.execute([x], backend="cpu")
    (kernel,) = fd.last_kernels()
    assert "fuser_welford_update" in kernel.source
    assert kernel.bytes_loaded == x.nbytes
    want_var, want_mean = torch.var_mean(torch.from_numpy(x).double(), dim=dims, correction=1)
    np.testing.assert_allclose(var, want_var.numpy(), rtol=2e-6)
    np.testing.assert_allclose(mean, want_mean.numpy(), rtol=1e-6)


@pytest.mark.skipif(not cpu_compiler_available(), reason="no g++ (C++20) for the cpu backend")
def test_layer_norm_off_chip_reads_its_rows_twice_not_three_times():
    """A layer-norm written by hand (mean, then the mean of squared deviations) on rows too
    long to keep on chip: the statistics are one Welford pass, the normalised store the second."""
    x = _inputs((4, 70000), DataType.Float, seed=5, offset=50.0)
    fd = _layer_norm(DataType.Float)
    (y,) = fd.execute([x], backend="cpu")
    (kernel,) = fd.last_kernels()
    assert kernel.bytes_loaded == 2 * x.nbytes
    want = torch.nn.functional.layer_norm(torch.from_numpy(x), x.shape[-1:], eps=1e-5)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-4, atol=1e-4)


def test_decomposition_preserves_the_reference_results():
    """The reference interpreter gives the same values before and after decompose-welford."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 6, -1], dtype=DataType.Half)
        avg, var_sum, n = fd.ops.welford(t, [0, 2])
        var, mean = fd.ops.var_mean(t, [1], correction=1, keepdim=True)
        for out in (avg, var_sum, n, var, mean):
            fd.add_output(out)
    x = _inputs((4, 6, 9), DataType.Half, seed=11)
    before = interpret(fd.fusion, [x])
    module = fd.module.clone()
    DecomposeWelfordPass().apply(make_context(), module)
    assert "fuser.welford" not in str(module)
    after = interpret(the_fusion(module), [x])
    for b, a in zip(before, after):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=2e-3, atol=1e-5)


@pytest.mark.skipif(not cpu_compiler_available(), reason="no g++ (C++20) for the cpu backend")
def test_torch_compile_translates_var_and_var_mean():
    """torch.compile(backend=fuser) maps aten.var / aten.var_mean with an integer correction to
    fd.ops.var / var_mean; a fractional correction (fuser takes ints) stays eager."""
    from fuser.torch_backend import make_backend

    def fn(x):
        var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
        return torch.var(x, dim=[0, 2], correction=2), var, mean, torch.var(x * 2, dim=1, correction=0.5)

    torch._dynamo.reset()
    reports: list = []
    compiled = torch.compile(fn, backend=make_backend(reports))
    try:
        x = torch.randn(4, 5, 33, generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-5)
    finally:
        torch._dynamo.reset()
    (report,) = reports
    fused = {op for region in report.fusions for op in region.ops}
    assert {"aten.var.correction", "aten.var_mean.correction"} <= fused
    assert report.eager_ops["aten.var.correction"] == 1  # the fractional correction


# -- bad arguments -------------------------------------------------------------------------------


def _check_raises(error, match, build):
    with pytest.raises(error, match=match):
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
            i = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
            fd.add_output(build(fd, x, i))


def test_integer_input_is_a_type_error():
    _check_raises(TypeError, "var: arg must be a floating-point tensor, got i64", lambda fd, x, i: fd.ops.var(i, [0]))


def test_non_tensor_arg_is_a_type_error():
    _check_raises(TypeError, "welford: arg must be a Tensor, got float", lambda fd, x, i: fd.ops.welford(1.0, [0])[0])


def test_dim_out_of_range_is_a_value_error():
    _check_raises(ValueError, "dim 2 is out of range for a tensor of rank 2",
                  lambda fd, x, i: fd.ops.var_mean(x, [2])[0])


def test_non_integer_correction_is_a_type_error():
    _check_raises(TypeError, r"var: correction = 0.5: expected an int", lambda fd, x, i: fd.ops.var(x, [1], 0.5))
