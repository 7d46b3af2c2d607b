"""Elementwise parity with torch: the ops nvFuser has beyond the basic set (signbit, frac,
inverse trig and hyperbolic functions, log10, erfc, erfinv/erfcinv, lgamma, isfinite/isposinf/
isneginf/isreal, truediv, remainder, atan2, nextafter, gcd, the shifts), the composites (addcmul, lerp, clamp,
threshold, silu, triu), and the NaN, integer-division and result-dtype bugs of issue #13.

Every case runs on the "reference" (numpy) and "cpu" (generated CUDA C run with g++) backends
and is compared with torch on CPU. Inputs hold the edge values (NaN, ±inf, ±0, INT_MIN, -1, 0,
shift counts out of range); one fusion per dtype with dynamic extents serves every case.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from fuser_dialect.interpreter import InterpreterError
from lowering_checks import BF16, requires_cpu_backend

pytestmark = requires_cpu_backend

BACKENDS = ["reference", "cpu"]
FLOATS = {"f64": DataType.Double, "f32": DataType.Float, "f16": DataType.Half, "bf16": DataType.BFloat16}
NUMPY = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": BF16, "i64": np.int64, "i32": np.int32,
         "i1": np.bool_}
TORCH = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
         "i64": torch.int64, "i32": torch.int32, "i1": torch.bool}
# (rtol, atol): torch (SLEEF) and glibc/numpy differ by an ulp or two in f32 and f64; f16/bf16
# compute in f32 on both sides and may round to neighbouring values.
TOLERANCE = {"f64": (1e-12, 1e-14), "f32": (4e-6, 1e-6), "f16": (1e-3, 1e-5), "bf16": (8e-3, 1e-5)}

SPECIAL_FLOATS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -3.0, 0.999, -0.25, 7.75,
                  1e-3, 100.0, 2.0, -100.5, 1.5, 3.0]


def to_torch(x: np.ndarray, dtype: str) -> torch.Tensor:
    if dtype == "bf16":  # torch cannot read ml_dtypes arrays: pass the bits (a NaN's sign too)
        return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x))


def assert_like_torch(got: np.ndarray, want: torch.Tensor, what: str, dtype: str | None = None) -> None:
    """got has torch's dtype and values: exact for integers and bools, within TOLERANCE of
    `dtype` (the compute dtype) for floats, NaN where torch has NaN."""
    want_dtype = next(k for k, v in TORCH.items() if v == want.dtype)
    assert got.dtype == np.dtype(NUMPY[want_dtype]), f"{what}: dtype {got.dtype}, torch {want.dtype}"
    if want_dtype not in FLOATS:
        np.testing.assert_array_equal(got, want.numpy(), err_msg=what)
        return
    rtol, atol = TOLERANCE[dtype or want_dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.double().numpy(), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=what)


def run(fd: FusionDefinition, inputs: list, backend: str) -> list[np.ndarray]:
    return [np.asarray(o) for o in fd.execute(inputs, backend=backend)]


# ------------------------------------------------------------------------------------------------
# Float ops, per dtype: one fusion of every unary and binary op on a [?, ?] pair of tensors
# ------------------------------------------------------------------------------------------------

UNARY = ["signbit", "frac", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log10",
         "erfc", "lgamma", "isfinite", "isposinf", "isneginf", "relu", "sign", "isnan", "isinf", "isreal"]
BINARY = ["truediv", "remainder", "atan2", "fmod", "div", "maximum", "minimum"]
FULL_PRECISION_BINARY = ["nextafter"]  # f32 and f64 only (as nvFuser)
TORCH_BINARY = {"truediv": torch.true_divide, "div": torch.true_divide}


def float_fusion(dtype: str) -> tuple[FusionDefinition, list[str]]:
    names = []
    binary = BINARY + (FULL_PRECISION_BINARY if dtype in ("f32", "f64") else [])
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=FLOATS[dtype])
        y = fd.define_tensor(shape=[-1, -1], dtype=FLOATS[dtype])
        for name in UNARY:
            fd.add_output(getattr(fd.ops, name)(x))
            names.append(name)
        for name in binary:
            fd.add_output(getattr(fd.ops, name)(x, y))
            names.append(name)
    return fd, names


def float_pairs(dtype: str, rng: np.random.Generator, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of special values, then random rows (an odd number of columns)."""
    pairs = np.array(list(itertools.product(SPECIAL_FLOATS, repeat=2)), np.float64).T
    cols = pairs.shape[1]
    x = np.concatenate([pairs[0][None], rng.standard_normal((rows, cols)) * 4])
    y = np.concatenate([pairs[1][None], rng.standard_normal((rows, cols)) * 4])
    return x.astype(NUMPY[dtype]), y.astype(NUMPY[dtype])


def torch_op(name: str):
    if name in TORCH_BINARY:
        return TORCH_BINARY[name]
    return getattr(torch, name)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", list(FLOATS))
def test_float_ops_match_torch(dtype, backend):
    fd, names = float_fusion(dtype)
    rng = np.random.default_rng(7)
    for rows in (3, 0):  # the same kernel for another extent, and an empty tensor
        x, y = float_pairs(dtype, rng, rows)
        tx, ty = to_torch(x, dtype), to_torch(y, dtype)
        outs = run(fd, [x, y], backend)
        for name, got in zip(names, outs):
            want = torch_op(name)(tx) if name in UNARY else torch_op(name)(tx, ty)
            assert_like_torch(got, want, f"{name}({dtype}) on {backend}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_relu_keeps_nan_and_negative_zero_and_sign_of_nan_is_zero(backend):
    """Regression (issue #13): relu(NaN) was 0 on every backend; sign(NaN) was NaN. torch says
    relu(NaN) = NaN, relu(-0.0) = -0.0, sign(NaN) = 0."""
    x = np.array([math.nan, -0.0, -2.0, 3.0, -math.inf], np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.relu(t))
        fd.add_output(fd.ops.sign(t))
    relu, sign = run(fd, [x], backend)
    assert np.isnan(relu[0]) and np.signbit(relu[1]) and relu[2:].tolist() == [0.0, 3.0, 0.0]
    assert sign.tolist() == [0.0, 0.0, -1.0, 1.0, -1.0]


# ------------------------------------------------------------------------------------------------
# Integer ops: gcd, shifts, division family, on i32 and i64 (exact)
# ------------------------------------------------------------------------------------------------

INT_OPS = ["gcd", "bitwise_left_shift", "bitwise_right_shift", "logical_right_shift", "remainder", "fmod", "div",
           "truediv"]


def int_fusion(dtype: str) -> FusionDefinition:
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1], dtype=DataType.Int if dtype == "i64" else DataType.Int32)
        b = fd.define_tensor(shape=[-1], dtype=DataType.Int if dtype == "i64" else DataType.Int32)
        for name in INT_OPS:
            fd.add_output(getattr(fd.ops, name)(a, b))
    return fd


def int_pairs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(NUMPY[dtype])
    width = 8 * np.dtype(NUMPY[dtype]).itemsize
    values = [info.min, info.max, info.min + 1, -1, 0, 1, 7, -7, 12, -18, 3, 1 << 20, -(1 << 20) - 5]
    counts = [-1, -width - 1, 0, 1, 3, width - 1, width, width + 1, 100, 2, 17, -7]
    pairs = list(itertools.product(values, values + counts))
    return (np.array([p[0] for p in pairs], NUMPY[dtype]), np.array([p[1] for p in pairs], NUMPY[dtype]))


def logical_right_shift_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Zero-fill shift of the value's bits (nvFuser's logical_right_shift; torch has none):
    counts < 0 or >= the width shift every bit out."""
    width = 8 * a.dtype.itemsize
    out = [((int(x) & ((1 << width) - 1)) >> int(s)) if 0 <= s < width else 0 for x, s in zip(a, b)]
    return np.array([v - (1 << width) if v >= 1 << (width - 1) else v for v in out], a.dtype)


def wrapping_truncating_division(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """C's / and % (truncating), with MIN / -1 == MIN and MIN % -1 == 0 (what the device
    computes; torch traps on MIN / -1 with SIGFPE, so it cannot be the oracle there)."""
    width = 8 * a.dtype.itemsize
    q, r = [], []
    for x, y in zip(a.tolist(), b.tolist()):
        quotient = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        q.append((quotient + (1 << (width - 1))) % (1 << width) - (1 << (width - 1)))
        r.append(x - quotient * y)
    return np.array(q, a.dtype), np.array(r, a.dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["i64", "i32"])
def test_integer_ops_match_torch(dtype, backend):
    fd = int_fusion(dtype)
    a, b = int_pairs(dtype)
    nonzero = b != 0
    a, b = a[nonzero], b[nonzero]  # a zero divisor: see test_integer_division_by_zero
    outs = dict(zip(INT_OPS, run(fd, [a, b], backend)))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    assert_like_torch(outs["gcd"], torch.gcd(ta, tb), f"gcd({dtype})")
    assert_like_torch(outs["bitwise_left_shift"], torch.bitwise_left_shift(ta, tb), f"<<({dtype})")
    assert_like_torch(outs["bitwise_right_shift"], torch.bitwise_right_shift(ta, tb), f">>({dtype})")
    assert_like_torch(outs["truediv"], torch.true_divide(ta, tb), f"truediv({dtype})")
    np.testing.assert_array_equal(outs["logical_right_shift"], logical_right_shift_reference(a, b))
    q, r = wrapping_truncating_division(a, b)
    np.testing.assert_array_equal(outs["div"], q, err_msg=f"div({dtype})")
    np.testing.assert_array_equal(outs["fmod"], r, err_msg=f"fmod({dtype})")
    # torch where it defines the result: everything but MIN / -1.
    safe = ~((a == np.iinfo(a.dtype).min) & (b == -1))
    assert_like_torch(outs["div"][safe], torch.div(ta[safe], tb[safe], rounding_mode="trunc"), f"div({dtype})")
    assert_like_torch(outs["fmod"], torch.fmod(ta, tb), f"fmod({dtype})")
    assert_like_torch(outs["remainder"], torch.remainder(ta, tb), f"remainder({dtype})")


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_ops_broadcast_and_empty(backend):
    """A broadcast operand and an empty extent (gcd's reference loop once returned the
    broadcast operand's shape for an empty tensor)."""
    names = ["gcd", "bitwise_left_shift", "logical_right_shift"]
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
        b = fd.define_tensor(shape=[1, -1], dtype=DataType.Int)
        for name in names:
            fd.add_output(getattr(fd.ops, name)(a, b))
    for rows in (0, 3):
        a_np = (np.arange(rows * 4).reshape(rows, 4) * 6 - 5).astype(np.int64)
        b_np = np.array([[4, -6, 70, 0]], np.int64)
        ta, tb = torch.from_numpy(a_np), torch.from_numpy(b_np)
        gcd, shl, lshr = run(fd, [a_np, b_np], backend)
        assert_like_torch(gcd, torch.gcd(ta, tb), f"gcd rows={rows}")
        assert_like_torch(shl, torch.bitwise_left_shift(ta, tb), f"<< rows={rows}")
        np.testing.assert_array_equal(lshr, logical_right_shift_reference(a_np.reshape(-1), np.broadcast_to(
            b_np, a_np.shape).reshape(-1)).reshape(a_np.shape))


@pytest.mark.parametrize("dtype", ["i64", "i32"])
def test_integer_division_by_zero(dtype):
    """A zero divisor: the reference raises (as torch does), a kernel cannot and gives 0 in
    that lane; every other lane is right."""
    fd = int_fusion(dtype)
    a, b = np.array([7, -7, 5], NUMPY[dtype]), np.array([0, 2, 0], NUMPY[dtype])
    with pytest.raises(InterpreterError, match="integer division by zero"):
        fd.execute([a, b], backend="reference")
    outs = dict(zip(INT_OPS, run(fd, [a, b], "cpu")))
    assert outs["div"].tolist() == [0, -3, 0] and outs["fmod"].tolist() == [0, -1, 0]
    assert outs["remainder"].tolist() == [0, 1, 0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_unary_predicates_on_integers_and_bools(backend):
    x = np.array([np.iinfo(np.int32).min, -1, 0, 5], np.int32)
    flags = np.array([True, False, True, False])
    names = ["signbit", "isfinite", "isposinf", "isneginf", "isreal", "relu", "sign"]
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], dtype=DataType.Int32)
        f = fd.define_tensor(shape=[-1], dtype=DataType.Bool)
        for name in names:
            fd.add_output(getattr(fd.ops, name)(t))
        for name in names[:5]:
            fd.add_output(getattr(fd.ops, name)(f))
    outs = run(fd, [x, flags], backend)
    tx, tf = torch.from_numpy(x), torch.from_numpy(flags)
    wants = [getattr(torch, n)(tx) for n in names] + [getattr(torch, n)(tf) for n in names[:5]]
    for i, (got, want) in enumerate(zip(outs, wants)):
        assert_like_torch(got, want, f"output {i}")


# ------------------------------------------------------------------------------------------------
# Composites
# ------------------------------------------------------------------------------------------------


def composite_fusion(dtype: str) -> FusionDefinition:
    with FusionDefinition() as fd:
        a, b, c = (fd.define_tensor(shape=[-1, -1], dtype=FLOATS[dtype]) for _ in range(3))
        w = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(fd.ops.addcmul(a, b, c, 0.5))
        fd.add_output(fd.ops.lerp(a, b, c))
        fd.add_output(fd.ops.lerp(a, b, 0.75))
        fd.add_output(fd.ops.lerp(a, b, w))
        fd.add_output(fd.ops.clamp(a, -0.5, 1.0))
        fd.add_output(fd.ops.threshold(a, 0.25, -9.0))
        fd.add_output(fd.ops.silu(a))
    return fd


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", list(FLOATS))
def test_composites_match_torch(dtype, backend):
    fd = composite_fusion(dtype)
    rng = np.random.default_rng(3)
    a, b = float_pairs(dtype, rng, 2)
    c = (rng.standard_normal(a.shape) * 2).astype(NUMPY[dtype])
    weight = 0.3
    ta, tb, tc = (to_torch(v, dtype) for v in (a, b, c))
    wants = [torch.addcmul(ta, tb, tc, value=0.5), torch.lerp(ta, tb, tc), torch.lerp(ta, tb, 0.75),
             torch.lerp(ta, tb, weight), torch.clamp(ta, -0.5, 1.0),
             torch.nn.functional.threshold(ta, 0.25, -9.0), torch.nn.functional.silu(ta)]
    names = ["addcmul", "lerp(tensor weight)", "lerp(0.75)", "lerp(Scalar weight)", "clamp", "threshold", "silu"]
    for name, got, want in zip(names, run(fd, [a, b, c, weight], backend), wants):
        assert_like_torch(got, want, f"{name}({dtype}) on {backend}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_triu_batched_dynamic_and_static(backend):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], dtype=DataType.Float)
        s = fd.define_tensor(shape=[3, 5], dtype=DataType.Int32)
        b = fd.define_tensor(shape=[-1, -1], dtype=DataType.Bool)
        for offset in (0, 2, -1):
            fd.add_output(fd.ops.triu(x, offset))
        fd.add_output(fd.ops.triu(s, 1))
        fd.add_output(fd.ops.triu(b, -2))
    rng = np.random.default_rng(5)
    for shape in [(2, 4, 7), (3, 6, 2), (1, 1, 1)]:
        x_np = rng.standard_normal(shape).astype(np.float32)
        s_np = rng.integers(-9, 9, (3, 5)).astype(np.int32)
        b_np = rng.integers(0, 2, shape[1:]).astype(bool)
        outs = run(fd, [x_np, s_np, b_np], backend)
        tx = torch.from_numpy(x_np)
        wants = [torch.triu(tx, k) for k in (0, 2, -1)] + [torch.triu(torch.from_numpy(s_np), 1),
                                                            torch.triu(torch.from_numpy(b_np), -2)]
        for i, (got, want) in enumerate(zip(outs, wants)):
            assert_like_torch(got, want, f"triu output {i} for {shape}")


# ------------------------------------------------------------------------------------------------
# Result dtypes: reductions of bool/int, scalar operands
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_sum_and_prod_of_bool_and_int32_are_int64(backend):
    """Regression (issue #13): sum([True, True, False]) was True; torch and nvFuser give an i64 2."""
    flags = np.array([[True, True, False], [True, True, True]])
    small = np.array([[2, -3, 4], [1 << 20, 1 << 12, 3]], np.int32)  # the i32 product overflows
    with FusionDefinition() as fd:
        f = fd.define_tensor(shape=[-1, -1], dtype=DataType.Bool)
        i = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int32)
        fd.add_output(fd.ops.sum(f, [0, 1]))
        fd.add_output(fd.ops.sum(f, [1]))
        fd.add_output(fd.ops.prod(f, [1]))
        fd.add_output(fd.ops.sum(i, [0]))
        fd.add_output(fd.ops.prod(i, [1]))
        fd.add_output(fd.ops.sum(i, [1], dtype=DataType.Int32))  # an explicit dtype wins
    tf, ti = torch.from_numpy(flags), torch.from_numpy(small)
    wants = [tf.sum(), tf.sum(1), tf.prod(1), ti.sum(0), ti.prod(1), ti.sum(1, dtype=torch.int32)]
    for k, (got, want) in enumerate(zip(run(fd, [flags, small], backend), wants)):
        assert_like_torch(got, want, f"output {k}")


SCALAR_WHERE = [
    # (x, y, expected dtype): typed Scalars keep their dtype, and a Python number is the Scalar
    # define_scalar makes of it (Bool, Int, Double), as nvFuser's frontend converts it
    (True, False, "i1"),
    ("f64", "f64", "f64"),
    ("i32", "i32", "i32"),
    ("i32", 5, "i64"),  # 5 is an Int Scalar: Int32 with Int is Int (nvFuser)
    ("i64", "f64", "f64"),
    (1.0, 0.0, "f64"),  # two Double Scalars give a Double tensor (nvFuser's test_where_dtypes)
    (1, 0, "i64"),
    (True, 2, "i64"),
    ("i32", 0.5, "f64"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("x,y,want", SCALAR_WHERE, ids=lambda v: str(v))
def test_where_of_scalars_has_the_scalars_dtype(x, y, want, backend):
    values = {"f64": 2.5, "i32": 3, "i64": 4}
    inputs = [np.array([True, False, True])]
    with FusionDefinition() as fd:
        c = fd.define_tensor(shape=[-1], dtype=DataType.Bool)
        operands = []
        for v in (x, y):
            if isinstance(v, str):
                operands.append(fd.define_scalar(dtype=DataType(v)))
                inputs.append(values[v])
            else:
                operands.append(v)
        fd.add_output(fd.ops.where(c, *operands))
    (got,) = run(fd, inputs, backend)
    assert got.dtype == np.dtype(NUMPY[want])
    picked = [values[v] if isinstance(v, str) else v for v in (x, y)]
    assert got.tolist() == [NUMPY[want](picked[0]), NUMPY[want](picked[1]), NUMPY[want](picked[0])]


TENSOR_SCALAR = [
    # (tensor dtype, scalar: DataType of a Scalar input or a Python number, result)
    ("i32", "f64", "f32"),  # a Double Scalar lifts an int tensor to the default float dtype, as torch (issue 22)
    ("i32", 0.5, "f32"),  # a Python float lifts it to the default dtype (torch)
    ("f16", "f64", "f16"),  # neither widens a tensor of its own category
    ("bf16", 2.5, "bf16"),
    ("i32", "i64", "i32"),
    ("i1", "i32", "i64"),  # a Scalar that lifts the category brings its default dtype, never its width
    ("i1", 3, "i64"),
]


@pytest.mark.parametrize("tensor,scalar,want", TENSOR_SCALAR, ids=lambda v: str(v))
def test_tensor_scalar_promotion(tensor, scalar, want):
    x = np.array([1, 0, 1], NUMPY[tensor])
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], dtype=DataType(tensor))
        s = fd.define_scalar(dtype=DataType(scalar)) if isinstance(scalar, str) else scalar
        fd.add_output(fd.ops.add(t, s))
    inputs = [x] + ([2] if isinstance(scalar, str) else [])
    (got,) = run(fd, inputs, "reference")
    assert got.dtype == np.dtype(NUMPY[want])


# ------------------------------------------------------------------------------------------------
# Bad input
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("build,error,match", [
    (lambda fd, f, i: fd.ops.gcd(f, f), TypeError, "gcd: needs integer"),
    (lambda fd, f, i: fd.ops.bitwise_left_shift(i, 1.5), TypeError, "bitwise_left_shift: needs integer"),
    (lambda fd, f, i: (lambda h: fd.ops.nextafter(h, h))(fd.ops.cast(f, DataType.Half)), TypeError,
     "nextafter: needs f32 or f64 operands, got f16"),
    (lambda fd, f, i: fd.ops.nextafter(i, i), TypeError, "nextafter: needs f32 or f64 operands, got i64"),
    (lambda fd, f, i: fd.ops.bitwise_and(f, f), TypeError, "bitwise_and: needs integer or bool"),
    (lambda fd, f, i: fd.ops.frac(i), TypeError, "frac: arg must be a floating-point tensor, got i64"),
    (lambda fd, f, i: fd.ops.lerp(i, i, 0.5), TypeError, "lerp: start must be a floating-point tensor, got i64"),
    (lambda fd, f, i: fd.ops.triu(i, 0), ValueError, "triu: arg must have at least 2 dims, got rank 1"),
    (lambda fd, f, i: fd.ops.clamp(f), ValueError, "clamp: at least one of min and max"),
])
def test_bad_input_is_a_clear_error(build, error, match):
    with pytest.raises(error, match=match):
        with FusionDefinition() as fd:
            f = fd.define_tensor(shape=[-1], dtype=DataType.Float)
            i = fd.define_tensor(shape=[-1], dtype=DataType.Int)
            fd.add_output(build(fd, f, i))


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_alpha_ops_mod_and_shift_operators_match_torch(backend):
    """nvFuser's add_alpha / sub_alpha / mod and Tensor `<<` / `>>` against torch."""
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        i = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
        fd.add_output(fd.ops.add_alpha(a, b, 2.0))
        fd.add_output(fd.ops.sub_alpha(a, b, 0.5))
        fd.add_output(fd.ops.mod(i, 3))
        fd.add_output(i << 2)
        fd.add_output(i >> 1)
        fd.add_output(fd.ops.triu(a, diagonal=1))
    gen = torch.Generator().manual_seed(7)
    x, y = torch.randn(5, 7, generator=gen), torch.randn(5, 7, generator=gen)
    n = torch.randint(-40, 40, (5, 7), generator=gen)
    expected = [torch.add(x, y, alpha=2.0), torch.sub(x, y, alpha=0.5), torch.fmod(n, 3), n << 2, n >> 1,
                torch.triu(x, 1)]
    for got, want in zip(fd.execute([x, y, n], backend=backend), expected):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)


# ------------------------------------------------------------------------------------------------
# erfinv / erfcinv: against torch.erfinv, and erfcinv through erfc itself (torch has no erfcinv)
# ------------------------------------------------------------------------------------------------


def _inverse_erf_inputs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    y = np.concatenate([np.linspace(-0.99, 0.99, 199), [math.nan, math.inf, -math.inf, 1.0, -1.0, 1.5, -0.0, 0.0]])
    tails = np.logspace(-30 if dtype in ("f64", "f32") else -4, -1, 40)
    z = np.concatenate([np.linspace(0.01, 1.99, 199), tails, 2 - tails[-10:], [0.0, 2.0, -0.5, 2.5, math.nan]])
    return y.astype(NUMPY[dtype]), z.astype(NUMPY[dtype])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", list(FLOATS))
def test_erfinv_and_erfcinv(dtype, backend):
    with FusionDefinition() as fd:
        y = fd.define_tensor(shape=[-1], dtype=FLOATS[dtype])
        z = fd.define_tensor(shape=[-1], dtype=FLOATS[dtype])
        fd.add_output(fd.ops.erfinv(y))
        fd.add_output(fd.ops.erfcinv(z))
    ys, zs = _inverse_erf_inputs(dtype)
    inv, cinv = run(fd, [ys, zs], backend)
    # torch's double erfinv is up to 1e-8 (relative) off the root near +-1; the round trip
    # below holds fuser's to the dtype's last place, so f64 is compared at f32's tolerance here.
    assert_like_torch(inv, torch.erfinv(to_torch(ys, dtype)), "erfinv", dtype if dtype != "f64" else "f32")
    assert np.signbit(inv[ys.size - 2]) and inv[ys.size - 1] == 0  # erfinv(-0.0) is -0.0
    # Round trips: erf (erfc) of the result gives the input back, to the accuracy of the
    # result's dtype (the function's slope there times an ulp of x), after the defined edges.
    ulp = {"f64": 2.0**-52, "f32": 2.0**-23, "f16": 2.0**-10, "bf16": 2.0**-7}[dtype]
    for yi, xi in zip(ys[:199].astype(np.float64), inv[:199].astype(np.float64)):
        slope = 2 / math.sqrt(math.pi) * math.exp(-xi * xi)
        assert abs(math.erf(xi) - yi) <= 4 * ulp * (abs(yi) + slope * abs(xi)), (yi, xi, math.erf(xi))
    z64, x64 = zs.astype(np.float64), cinv.astype(np.float64)
    assert x64[-5] == math.inf and x64[-4] == -math.inf and np.isnan(x64[-3:]).all()
    for zi, xi in zip(z64[:-5], x64[:-5]):
        if math.isinf(xi):  # an input that rounded to an end of [0, 2] in this dtype
            assert zi == (0.0 if xi > 0 else 2.0), (zi, xi)
            continue
        slope = 2 / math.sqrt(math.pi) * math.exp(-xi * xi)
        allowed = 4 * ulp * (zi + slope * abs(xi)) + (1e-14 if dtype == "f64" else 0)
        assert abs(math.erfc(xi) - zi) <= allowed, (zi, xi, math.erfc(xi))
