"""fp8 (float8_e4m3fn, float8_e5m2) end to end, bit for bit against torch, on the reference
interpreter and on the generated CUDA run on the CPU: every fp8 pattern to f32, a dense sweep
of f32 (ties, subnormals, out of range, NaN, inf) to fp8, the other dtypes both ways, data
movement, and the frontend's f32 compute for arithmetic on fp8 operands."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from fuser_dialect.float8 import fp8_bits_to_f32

BACKENDS = ("reference", "cpu")
FP8 = {DataType.Float8_e4m3fn: torch.float8_e4m3fn, DataType.Float8_e5m2: torch.float8_e5m2}
TORCH_OF = {DataType.Float: torch.float32, DataType.Double: torch.float64, DataType.Half: torch.float16,
            DataType.BFloat16: torch.bfloat16, DataType.Int: torch.int64, DataType.Int32: torch.int32,
            DataType.Bool: torch.bool, **FP8}


def _bits(t: torch.Tensor) -> np.ndarray:
    """The raw bits of a tensor: NaN payloads and signs compared too."""
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(width).numpy()


def _cast_fusion(src: DataType, dst: DataType, rank: int = 1) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * rank, dtype=src)
        fd.add_output(fd.ops.cast(x, dst))
    return fd


def _all_patterns(torch_dtype) -> torch.Tensor:
    return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch_dtype)


def _f32_sweep(dtype: DataType) -> torch.Tensor:
    """A dense sweep of f32 bit patterns plus every tie between neighbouring fp8 values, the
    values just around each tie, subnormals, the overflow boundaries, NaNs and infinities."""
    sweep = np.arange(0, 2**32, 40_961, dtype=np.uint64).astype(np.uint32).view(np.float32)
    name = "f8E4M3FN" if dtype == DataType.Float8_e4m3fn else "f8E5M2"
    finite = np.unique(fp8_bits_to_f32(np.arange(256, dtype=np.uint8), name))
    finite = finite[np.isfinite(finite)].astype(np.float64)
    ties = ((finite[1:] + finite[:-1]) / 2).astype(np.float32)
    around = np.concatenate([np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 448.0, 464.0, 464.0001, 480.0, 57344.0,
                        61439.0, 61440.0, 1e30, -1e30, 2.0**-9, 2.0**-10, 3 * 2.0**-11, 2.0**-16, 2.0**-17,
                        1.5 * 2.0**-17, 1e-45], dtype=np.float32)
    values = np.concatenate([sweep, ties, -ties, around, special]).astype(np.float32)
    return torch.from_numpy(values)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("target", [DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16,
                                    DataType.Bool])
def test_every_fp8_pattern_to_float(backend, dtype, target):
    patterns = _all_patterns(FP8[dtype])
    (out,) = _cast_fusion(dtype, target).execute([patterns], backend=backend)
    expected = patterns.to(TORCH_OF[target])
    assert out.dtype == expected.dtype
    if target in (DataType.Half, DataType.BFloat16):
        # The 16-bit stores of the cpu backend write CUDA's canonical NaN (0x7fff), not torch's
        # payload: compare NaNs as NaNs there, every other value bit for bit.
        nan = torch.isnan(expected.float())
        assert torch.equal(torch.isnan(out.float()), nan)
        out, expected = out[~nan], expected[~nan]
    np.testing.assert_array_equal(_bits(out), _bits(expected))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", FP8)
def test_every_finite_fp8_pattern_to_integers(backend, dtype):
    patterns = _all_patterns(FP8[dtype])
    finite = patterns[torch.isfinite(patterns.float())]
    for target in (DataType.Int, DataType.Int32):
        (out,) = _cast_fusion(dtype, target).execute([finite], backend=backend)
        assert torch.equal(out, finite.to(TORCH_OF[target]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", FP8)
def test_f32_sweep_to_fp8_is_bit_exact(backend, dtype):
    values = _f32_sweep(dtype)
    (out,) = _cast_fusion(DataType.Float, dtype).execute([values], backend=backend)
    expected = values.to(FP8[dtype])
    assert out.dtype == FP8[dtype]
    mismatches = np.nonzero(_bits(out) != _bits(expected))[0]
    assert mismatches.size == 0, f"{values[mismatches[:5]].tolist()} -> {_bits(out)[mismatches[:5]]}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("source", [DataType.Double, DataType.Half, DataType.BFloat16, DataType.Int,
                                    DataType.Int32, DataType.Bool])
def test_other_dtypes_to_fp8(backend, dtype, source):
    rng = np.random.default_rng(0)
    if source in (DataType.Int, DataType.Int32, DataType.Bool):
        values = torch.from_numpy(rng.integers(-70_000, 70_000, 4000)).to(TORCH_OF[source])
    else:
        wide = rng.standard_normal(4000) * 2.0 ** rng.integers(-20, 18, 4000)
        # 1.0625 + 2**-40 rounds to the tie 1.0625 in f32 first: torch rounds twice, so must we.
        wide = np.concatenate([wide, [1.0625 + 2**-40, 1.0625 - 2**-40, 1e300, -1e300, np.nan, np.inf]])
        values = torch.from_numpy(wide).to(TORCH_OF[source])
    (out,) = _cast_fusion(source, dtype).execute([values], backend=backend)
    np.testing.assert_array_equal(_bits(out), _bits(values.to(FP8[dtype])))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fp8_to_fp8_and_numpy_inputs(backend):
    import ml_dtypes

    patterns = _all_patterns(torch.float8_e4m3fn)
    (out,) = _cast_fusion(DataType.Float8_e4m3fn, DataType.Float8_e5m2).execute([patterns], backend=backend)
    np.testing.assert_array_equal(_bits(out), _bits(patterns.to(torch.float8_e5m2)))
    # numpy in, numpy (ml_dtypes) out, same bits.
    array = patterns.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn)
    (out,) = _cast_fusion(DataType.Float8_e4m3fn, DataType.Float8_e5m2).execute([array], backend=backend)
    assert out.dtype == np.dtype(ml_dtypes.float8_e5m2)
    np.testing.assert_array_equal(out.view(np.uint8), _bits(patterns.to(torch.float8_e5m2)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("shape", [(3, 5, 7), (1, 33, 2), (17, 1, 65)])
def test_fp8_data_movement_keeps_bits(backend, dtype, shape):
    """permute, slice, broadcast and cat move fp8 values without touching them (NaNs aside:
    a kernel computes on floats, and an e5m2 NaN comes back as torch's canonical one)."""
    finite = _all_patterns(FP8[dtype])
    finite = finite[torch.isfinite(finite.float())]
    x = finite[torch.randint(0, finite.numel(), shape, generator=torch.Generator().manual_seed(1))]
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], dtype=dtype)
        p = fd.ops.permute(t, [2, 0, 1])
        fd.add_output(p)
        fd.add_output(fd.ops.slice(t, [0, 0, 1], [shape[0], shape[1], shape[2]]))
        fd.add_output(fd.ops.cat([t, t], dim=1))
        fd.add_output(fd.ops.sum(t, [2]))
    permuted, sliced, joined, summed = fd.execute([x], backend=backend)
    np.testing.assert_array_equal(_bits(permuted), _bits(x.permute(2, 0, 1)))
    np.testing.assert_array_equal(_bits(sliced), _bits(x[:, :, 1:]))
    np.testing.assert_array_equal(_bits(joined), _bits(torch.cat([x, x], dim=1)))
    assert summed.dtype == torch.float32  # fp8 computes in f32
    torch.testing.assert_close(summed, x.float().sum(2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fp8_arithmetic_computes_in_f32(backend):
    rng = np.random.default_rng(2)
    a = torch.from_numpy(rng.standard_normal((9, 13)).astype(np.float32)).to(torch.float8_e4m3fn)
    b = torch.from_numpy(rng.standard_normal((9, 13)).astype(np.float32)).to(torch.float8_e5m2)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float8_e4m3fn)
        y = fd.define_tensor(shape=[-1, 13], dtype=DataType.Float8_e5m2)
        z = fd.ops.mul(fd.ops.add(x, y), 0.5)
        fd.add_output(z)
        fd.add_output(fd.ops.cast(fd.ops.exp(x), DataType.Float8_e5m2))
    z, e = fd.execute([a, b], backend=backend)
    assert z.dtype == torch.float32
    torch.testing.assert_close(z, (a.float() + b.float()) * 0.5)
    np.testing.assert_array_equal(_bits(e), _bits(torch.exp(a.float()).to(torch.float8_e5m2)))


def test_fp8_kernels_name_the_cuda_fp8_storage_types():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.cast(x, DataType.Float8_e4m3fn))
    fd.execute([np.ones(5, np.float32)], backend="cpu")
    source = fd.last_cuda_code()
    assert "#define FUSER_NEED_FP8" in source and "__nv_fp8_e4m3* __restrict__" in source
    assert "fuser_to_e4m3(" in source
    with FusionDefinition() as plain:
        x = plain.define_tensor(shape=[-1], dtype=DataType.Float)
        plain.add_output(plain.ops.neg(x))
    plain.execute([np.ones(5, np.float32)], backend="cpu")
    assert "#define FUSER_NEED_FP8" not in plain.last_cuda_code()


def test_wrong_input_dtype_is_named():
    fd = _cast_fusion(DataType.Float8_e4m3fn, DataType.Float)
    with pytest.raises(TypeError, match="input 0"):
        fd.execute([torch.zeros(3, dtype=torch.float8_e5m2)], backend="reference")


def test_null_dtype_is_refused_where_a_dtype_is_needed():
    with pytest.raises(ValueError, match="DataType.Null is a placeholder"):
        with FusionDefinition() as fd:
            fd.define_tensor(shape=[-1], dtype=DataType.Null)
    with pytest.raises(ValueError, match="cast: dtype"):
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1])
            fd.ops.cast(x, DataType.Null)
    with pytest.raises(ValueError, match="full: dtype"):
        with FusionDefinition() as fd:
            fd.ops.full([2, 3], 1.0, DataType.Null)
    assert DataType.Null.name == "Null"
