"""Float -> integer casts have one semantics on every backend: CUDA's (cvt.rzi: toward zero,
saturating to the integer type's range, NaN -> 0), which is what torch eager gives on a GPU.

numpy, and a C cast on x86, give the type's minimum for NaN, +-inf and out-of-range values
instead: before the fix the reference interpreter and the cpu backend gave INT_MIN where a GPU
gives 0 or INT_MAX, and the tests trusted the reference. The oracle here is the definition,
computed exactly with Python integers; on a machine with a GPU, torch's CUDA cast too.

Every float dtype (f64, f32, f16, bf16, both fp8 formats) to every integer dtype (i32, i64), over
NaN, +-inf, +-0, fractions, the integer types' boundaries and values just past them, and huge
values; each input value is first rounded to the source dtype, as the tensor holds it.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from lowering_checks import backends_under_test, requires_cpu_backend

pytestmark = requires_cpu_backend

SOURCES = {"f64": (DataType.Double, np.dtype(np.float64)), "f32": (DataType.Float, np.dtype(np.float32)),
           "f16": (DataType.Half, np.dtype(np.float16)), "bf16": (DataType.BFloat16, np.dtype(ml_dtypes.bfloat16)),
           "f8e4m3": (DataType.Float8_e4m3fn, np.dtype(ml_dtypes.float8_e4m3fn)),
           "f8e5m2": (DataType.Float8_e5m2, np.dtype(ml_dtypes.float8_e5m2))}
TARGETS = {"i32": (DataType.Int32, np.dtype(np.int32)), "i64": (DataType.Int, np.dtype(np.int64))}

VALUES = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, -0.5, 0.9999, -0.9999, 1.5, -1.5, 2.5, -2.5,
          127.9, -128.9, 255.5, 448.0, -448.0, 57344.0, 65504.0, -65504.0, 65520.0, 2.0**24 + 2, 2.0**31 - 1,
          2.0**31 - 128, -(2.0**31) + 128, 2.0**31 - 0.5, 2.0**31, 2.0**31 + 0.5, -(2.0**31), -(2.0**31) - 0.5,
          -(2.0**31) - 1, 2.0**32, -(2.0**32), 2.0**53 + 2, 2.0**63 - 1024, -(2.0**63) + 1024, 2.0**63, -(2.0**63),
          -(2.0**63) - 2048, 2.0**64, 1e19, -1e19, 1e30, -1e30, 3e38, -3e38, 1.7e308, -1.7e308, 5e-324, -5e-324]


def cuda_semantics(value: float, target: np.dtype) -> int:
    """cvt.rzi.s32/s64 of `value`, exactly."""
    info = np.iinfo(target)
    if math.isnan(value):
        return 0
    if math.isinf(value):
        return int(info.max) if value > 0 else int(info.min)
    return max(int(info.min), min(int(info.max), math.trunc(value)))


def _cast_fusion(src: str, dst: str) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=SOURCES[src][0])
        fd.add_output(fd.ops.cast(x, TARGETS[dst][0]))
    return fd


def _inputs(src: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.array(VALUES, np.float64).astype(SOURCES[src][1])


@pytest.mark.parametrize("backend", ["reference", *backends_under_test()])
@pytest.mark.parametrize("dst", sorted(TARGETS))
@pytest.mark.parametrize("src", list(SOURCES))
def test_float_to_int_saturates_and_maps_nan_to_zero(src, dst, backend):
    x = _inputs(src)
    expected = np.array([cuda_semantics(float(v), TARGETS[dst][1]) for v in x.astype(np.float64)], TARGETS[dst][1])
    (got,) = _cast_fusion(src, dst).execute([x], backend=backend)
    got = np.asarray(got.cpu() if hasattr(got, "cpu") else got)
    assert got.dtype == TARGETS[dst][1]
    bad = np.flatnonzero(got != expected)
    assert not bad.size, (f"{src} -> {dst} on {backend}: " + ", ".join(
        f"{float(x[i].astype(np.float64))!r} gave {got[i]}, CUDA gives {expected[i]}" for i in bad[:6]))


@pytest.mark.parametrize("backend", ["reference", *backends_under_test()])
def test_a_computed_value_casts_alike(backend):
    """The cast of a value computed in the kernel (x * 1e10 overflows i32 and is NaN for NaN)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.cast(fd.ops.mul(x, 1e10), DataType.Int32))
        fd.add_output(fd.ops.cast(fd.ops.sqrt(x), DataType.Int))
    x = np.array([[1.0, -1.0, math.nan, 0.25], [2.0**-30, -(2.0**-30), math.inf, 4.0]], np.float32)
    i32, i64 = (np.asarray(o) for o in fd.execute([x], backend=backend))
    np.testing.assert_array_equal(i32, [[2**31 - 1, -(2**31), 0, 2**31 - 1], [9, -9, 2**31 - 1, 2**31 - 1]])
    np.testing.assert_array_equal(i64, [[1, 0, 0, 0], [0, 0, 2**63 - 1, 2]])


def test_torch_on_cuda_agrees():
    """Where a GPU is here: torch's own cast on the GPU is the same as the definition above."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    for src in ("f64", "f32", "f16", "bf16"):
        x = _inputs(src)
        t = torch.from_numpy(x.astype(np.float64)).to(getattr(torch, {"f64": "float64", "f32": "float32",
                                                                      "f16": "float16", "bf16": "bfloat16"}[src]))
        for dst, (_, npdt) in TARGETS.items():
            want = t.cuda().to(getattr(torch, "int32" if dst == "i32" else "int64")).cpu().numpy()
            np.testing.assert_array_equal(want, [cuda_semantics(float(v), npdt) for v in x.astype(np.float64)])
