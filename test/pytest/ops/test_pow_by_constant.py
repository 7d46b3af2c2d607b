"""A float power by a constant exponent is computed as torch computes it: ATen's pow(Tensor,
Scalar) makes 0 a fill of ones, 1 a copy, 2 and 3 products, 0.5 a square root, -0.5 its
reciprocal (powf(-inf, -0.5) is 0, torch's NaN), -1 and -2 reciprocals, and only other exponents go to the general pow. The generated code does the same
(lowering/codegen/cuda_exprs.py POW_BY_CONSTANT): a few multiplies where powf is some forty
instructions and a dozen registers (RMSNorm's backward at Llama's size held 191 registers a
thread with powf(x, 1.0f) and powf(x, 2.0f), 14 KiB of loads in flight per SM; 128 and 66 KiB
without). Values: torch eager's, bit for bit (NaN signs aside), over zeros of both signs,
infinities, NaN, subnormals, negatives and huge values, on every backend under test."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from lowering_checks import backends_under_test, requires_cpu_backend

pytestmark = requires_cpu_backend

SPECIAL = [0.0, 1.0, 2.0, 3.0, 0.5, -0.5, -1.0, -2.0]
EXPONENTS = [*SPECIAL, 1.5]
DTYPES = {"f32": (DataType.Float, np.float32), "f64": (DataType.Double, np.float64)}
VALUES = [0.0, -0.0, 1.0, -1.0, -1.5, 2.5, 7.25, np.inf, -np.inf, np.nan, 1e-30, 1e-40, 3e10, -3e10, 1e200]


def _pow_fusion(dtype, exponent: float) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=dtype)
        fd.add_output(fd.ops.pow(x, fd.define_scalar(exponent)))
    return fd


# The reference interpreter too, where torch's special forms apply: its general pow rounds as
# numpy's does (within an ulp of torch's, compared with a tolerance by the other tests).
CASES = [(backend, exponent) for exponent in EXPONENTS
         for backend in (["reference"] if exponent in SPECIAL else []) + backends_under_test()]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend,exponent", CASES)
def test_power_by_a_constant_matches_torch(backend, dtype, exponent):
    fuser_dtype, np_dtype = DTYPES[dtype]
    with np.errstate(over="ignore"):
        x = np.array(VALUES, np_dtype)
    got = np.asarray(_pow_fusion(fuser_dtype, exponent).execute([x], backend=backend)[0])
    want = torch.pow(torch.from_numpy(x), exponent).numpy()
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), (got, want)
    assert np.array_equal(got[~nan], want[~nan]), (got, want)
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan])), (got, want)


@pytest.mark.parametrize("exponent,form", [(1.0, None), (2.0, "*"), (3.0, "*"), (-1.0, "/"), (0.5, "sqrt")])
def test_the_kernel_multiplies_instead_of_calling_pow(exponent, form):
    fd = _pow_fusion(DataType.Float, exponent)
    (kernel,) = fd.kernels_for([np.empty(1024, np.float32)], backend="cpu")
    body = kernel.source[kernel.source.index('extern "C" __global__ void __launch'):]
    assert "powf(" not in body, body
    if form is not None:
        assert form in body


def test_other_exponents_still_call_pow():
    fd = _pow_fusion(DataType.Float, 1.5)
    (kernel,) = fd.kernels_for([np.empty(1024, np.float32)], backend="cpu")
    assert "powf(" in kernel.source[kernel.source.index('extern "C" __global__ void __launch'):]
