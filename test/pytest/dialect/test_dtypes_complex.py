"""complex64 / complex128 end to end against torch, on the reference interpreter and on the
generated CUDA run on the CPU: the supported ops (add, sub, mul, div, neg, eq, ne, abs, real,
imag, casts into complex, sum), torch's promotion, and clear refusals of everything else."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition

BACKENDS = ("reference", "cpu")
COMPLEX = {DataType.ComplexFloat: torch.complex64, DataType.ComplexDouble: torch.complex128}


def _random(shape, dtype, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, dtype=dtype, generator=g)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("shape", [(7, 13), (1, 33), (5, 1)])
def test_elementwise_ops_match_torch(backend, dtype, shape):
    a, b = _random(shape, COMPLEX[dtype], 1), _random((1, shape[1]), COMPLEX[dtype], 2)
    b[0, 0] = a[0, 0]  # one equal pair for eq/ne
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        y = fd.define_tensor(shape=[1, -1], dtype=dtype)  # broadcast against x
        for op in (fd.ops.add, fd.ops.sub, fd.ops.eq, fd.ops.ne, fd.ops.mul, fd.ops.div):
            fd.add_output(op(x, y))
        for op in (fd.ops.neg, fd.ops.real, fd.ops.imag, fd.ops.abs):
            fd.add_output(op(x))
        fd.add_output(fd.ops.add(fd.ops.mul(x, 2.5), 1))
        fd.add_output(fd.ops.isreal(x))
    a[-1, -1] = complex(a[-1, -1].real.item(), 0.0)  # one element with a zero imaginary part
    outs = fd.execute([a, b], backend=backend)
    exact = [a + b, a - b, a == b, a != b]
    close = [a * b, a / b]
    exact_unary = [-a, a.real, a.imag]
    for got, want in zip(outs, exact + close + exact_unary):
        assert got.dtype == want.dtype
    for got, want in zip(outs[:4], exact):
        assert torch.equal(got, want)
    for got, want in zip(outs[4:6], close):
        torch.testing.assert_close(got, want)
    for got, want in zip(outs[6:9], exact_unary):
        assert torch.equal(got, want)
    torch.testing.assert_close(outs[9], a.abs())
    torch.testing.assert_close(outs[10], a * 2.5 + 1)
    assert torch.equal(outs[11], torch.isreal(a)) and outs[11].sum() >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_casts_into_complex(backend):
    f = _random((6, 9), torch.float32, 3)
    i = torch.arange(-27, 27, dtype=torch.int64).reshape(6, 9)
    c = _random((6, 9), torch.complex64, 4)
    d = _random((6, 9), torch.complex128, 5)
    with FusionDefinition() as fd:
        tf = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        ti = fd.define_tensor(shape=[-1, 9], dtype=DataType.Int)
        tc = fd.define_tensor(shape=[-1, -1], dtype=DataType.ComplexFloat)
        td = fd.define_tensor(shape=[6, -1], dtype=DataType.ComplexDouble)
        fd.add_output(fd.ops.cast(tf, DataType.ComplexFloat))
        fd.add_output(fd.ops.cast(ti, DataType.ComplexDouble))
        fd.add_output(fd.ops.cast(tc, DataType.ComplexDouble))
        fd.add_output(fd.ops.cast(td, DataType.ComplexFloat))
    outs = fd.execute([f, i, c, d], backend=backend)
    for got, want in zip(outs, [f.to(torch.complex64), i.to(torch.complex128), c.to(torch.complex128),
                                d.to(torch.complex64)]):
        assert got.dtype == want.dtype and torch.equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("shape,dims", [((5, 300), [1]), ((300, 7), [0]), ((3, 1025), [1]), ((4, 5, 6), [0, 2]),
                                        ((2, 70_000), [1])])
def test_sum_matches_torch(backend, dtype, shape, dims):
    x = _random(shape, COMPLEX[dtype], 6)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1] * len(shape), dtype=dtype)
        fd.add_output(fd.ops.sum(t, dims))
        fd.add_output(fd.ops.sum(fd.ops.mul(t, t), dims, keepdim=True))
    s, sq = fd.execute([x], backend=backend)
    assert s.dtype == COMPLEX[dtype]
    torch.testing.assert_close(s, x.sum(dims), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(sq, (x * x).sum(dims, keepdim=True), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_promotion_follows_torch(backend):
    c = _random((4, 3), torch.complex64, 7)
    d = _random((4, 3), torch.float64, 8)
    i = torch.arange(12, dtype=torch.int32).reshape(4, 3)
    with FusionDefinition() as fd:
        tc = fd.define_tensor(shape=[-1, -1], dtype=DataType.ComplexFloat)
        td = fd.define_tensor(shape=[-1, -1], dtype=DataType.Double)
        ti = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int32)
        fd.add_output(fd.ops.add(tc, td))
        fd.add_output(fd.ops.mul(ti, tc))
    wide, narrow = fd.execute([c, d, i], backend=backend)
    assert wide.dtype == torch.promote_types(torch.complex64, torch.float64) == torch.complex128
    assert narrow.dtype == torch.complex64
    assert torch.equal(wide, c + d)
    torch.testing.assert_close(narrow, i * c)


def test_complex_kernels_use_fuser_complex():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.ComplexDouble)
        fd.add_output(fd.ops.abs(x))
    fd.execute([np.ones(5, np.complex128)], backend="cpu")
    source = fd.last_cuda_code()
    assert "#define FUSER_NEED_COMPLEX" in source and "fuser_complex<double> const* __restrict__" in source


@pytest.mark.parametrize("build,message", [
    (lambda fd, x: fd.ops.exp(x), "exp: not supported on complex operands .*complex supports: neg, abs, real, imag, isreal"),
    (lambda fd, x: fd.ops.lt(x, x), "lt: not supported on complex operands .*add, sub, mul, div, eq, ne"),
    (lambda fd, x: fd.ops.max(x, [0]), "max: not supported on complex operands .*complex supports: sum"),
    (lambda fd, x: fd.ops.sqrt(x), "sqrt: not supported on complex operands .*isreal, rsqrt"),
    (lambda fd, x: fd.ops.cast(x, DataType.Float), "cannot cast c64 to the real dtype f32"),
])
def test_unsupported_ops_are_refused_with_the_list(build, message):
    with pytest.raises(TypeError, match=message):
        with FusionDefinition() as fd:
            build(fd, fd.define_tensor(shape=[-1], dtype=DataType.ComplexFloat))


@pytest.mark.parametrize("backend", BACKENDS)
def test_real_and_imag_of_real_tensors(backend):
    """numpy's meaning (torch has no imag of a real tensor): real(x) is x, imag(x) zeros."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1])
        i = fd.define_tensor(shape=[-1], dtype=DataType.Int32)
        assert fd.ops.real(x) is x
        fd.add_output(fd.ops.imag(x))
        fd.add_output(fd.ops.imag(i))
    zf, zi = fd.execute([torch.full((5,), 3.0), torch.arange(5, dtype=torch.int32)], backend=backend)
    assert torch.equal(zf, torch.zeros(5)) and torch.equal(zi, torch.zeros(5, dtype=torch.int32))


def test_wrong_input_dtype_is_named():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.neg(fd.define_tensor(shape=[-1], dtype=DataType.ComplexFloat)))
    with pytest.raises(TypeError, match="input 0"):
        fd.execute([torch.zeros(3, dtype=torch.complex128)], backend="reference")


@pytest.mark.parametrize("dtype", COMPLEX)
def test_grid_reduction_of_two_complex_sums(dtype):
    """A whole-tensor sum large enough for a grid reduction: each block's partials go through
    the workspace, where a complex128 takes two 8-byte slots."""
    x = _random((3_000_000,), COMPLEX[dtype], 9)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], dtype=dtype)
        fd.add_output(fd.ops.sum(t, [0]))
        fd.add_output(fd.ops.sum(fd.ops.neg(t), [0]))
    total, negated = fd.execute([x], backend="cpu")
    assert "fuser_grid_last" in fd.last_cuda_code()  # the grid path, not a per-row one
    torch.testing.assert_close(total, x.sum(), rtol=1e-4, atol=1e-2)
    torch.testing.assert_close(negated, -x.sum(), rtol=1e-4, atol=1e-2)
