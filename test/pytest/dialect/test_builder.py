"""FusionDefinition, op by op, run on the reference backend against references written
out here independently of the interpreter (loops, Python's math and slicing, explicit
F.pad / torch.gather semantics), plus the execute() API: dtype promotion, low-precision
rounding, output layouts, input checking and the printed IR."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.parser import Parser

from fuser import DataType, FusionDefinition
from fuser_dialect import make_context
from fuser_dialect.fusion import output_order
from fuser_dialect.ops_compute import BinaryKind, UnaryKind

BF16 = np.dtype(ml_dtypes.bfloat16)


def run(build, inputs, **kw):
    """Defines a fusion with `build(fd)` (returning one output or a tuple) and runs it on
    the reference backend; returns (fd, outputs)."""
    with FusionDefinition() as fd:
        outs = build(fd)
        for o in outs if isinstance(outs, tuple) else (outs,):
            fd.add_output(o)
    return fd, fd.execute(inputs, backend="reference", **kw)


def run1(build, *inputs):
    return run(build, list(inputs))[1][0]


def per_element(fn, *arrays, dtype):
    """fn over the elements (as Python numbers), the result cast to dtype once."""
    arrays = np.broadcast_arrays(*[np.asarray(a) for a in arrays])
    out = [fn(*(v.item() for v in vs)) for vs in zip(*(a.reshape(-1) for a in arrays))]
    return np.array(out, dtype=np.float64 if dtype.kind == "f" or dtype == BF16 else None).astype(dtype).reshape(
        arrays[0].shape
    )


X = np.array([[0.5, -1.5, 2.5, 3.0], [-0.25, 1.0, -2.5, 0.75], [4.0, -3.0, 0.0, 1.5]], np.float32)
POS = np.abs(X) + np.float32(0.125)

# -- elementwise ------------------------------------------------------------------------

UNARY_REF = {
    UnaryKind.NEG: lambda v: -v,
    UnaryKind.ABS: abs,
    UnaryKind.EXP: math.exp,
    UnaryKind.EXP2: lambda v: 2.0**v,
    UnaryKind.EXPM1: math.expm1,
    UnaryKind.LOG: math.log,
    UnaryKind.LOG2: math.log2,
    UnaryKind.LOG1P: math.log1p,
    UnaryKind.SQRT: math.sqrt,
    UnaryKind.RSQRT: lambda v: 1 / math.sqrt(v),
    UnaryKind.RECIPROCAL: lambda v: 1 / v,
    UnaryKind.RELU: lambda v: v if v > 0 else 0.0,
    UnaryKind.SIGMOID: lambda v: 1 / (1 + math.exp(-v)),
    UnaryKind.TANH: math.tanh,
    UnaryKind.SIN: math.sin,
    UnaryKind.COS: math.cos,
    UnaryKind.ERF: math.erf,
    UnaryKind.FLOOR: math.floor,
    UnaryKind.CEIL: math.ceil,
    UnaryKind.ROUND: round,  # Python rounds half to even, as the device does
    UnaryKind.TRUNC: math.trunc,
    UnaryKind.SIGN: lambda v: (v > 0) - (v < 0),
}
NEEDS_POSITIVE = {UnaryKind.LOG, UnaryKind.LOG2, UnaryKind.SQRT, UnaryKind.RSQRT, UnaryKind.LOG1P, UnaryKind.RECIPROCAL}


@pytest.mark.parametrize("kind", list(UNARY_REF), ids=str)
def test_unary_f32(kind):
    x = POS if kind in NEEDS_POSITIVE else X
    got = run1(lambda fd: getattr(fd.ops, str(kind))(fd.define_tensor([-1, -1])), x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, per_element(UNARY_REF[kind], x, dtype=np.dtype(np.float32)), rtol=1e-6, atol=1e-7)


def test_unary_predicates_and_logical_not_yield_bool():
    x = np.array([0.0, np.nan, np.inf, -np.inf, -2.0], np.float32)
    isnan, isinf, lnot = run(
        lambda fd: (lambda t: (fd.ops.isnan(t), fd.ops.isinf(t), fd.ops.logical_not(t)))(fd.define_tensor([-1])), [x]
    )[1]
    assert isnan.dtype == isinf.dtype == lnot.dtype == np.bool_
    assert isnan.tolist() == [False, True, False, False, False]
    assert isinf.tolist() == [False, False, True, True, False]
    assert lnot.tolist() == [True, False, False, False, False]


def test_bitwise_not_and_neg_on_ints():
    x = np.array([0, 5, -3], np.int32)
    inv, neg = run(lambda fd: (lambda t: (fd.ops.bitwise_not(t), -t))(fd.define_tensor([-1], dtype=DataType.Int32)), [x])[1]
    assert inv.tolist() == [-1, -6, 2] and inv.dtype == np.int32
    assert neg.tolist() == [0, -5, 3]


def test_float_only_unary_on_an_int_tensor_computes_in_f32():
    # exp(int) is a float in torch; the builder casts to f32 first.
    x = np.array([0, 1, 2], np.int64)
    got = run1(lambda fd: fd.ops.exp(fd.define_tensor([-1], dtype=DataType.Int)), x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [1.0, math.e, math.e**2], rtol=1e-6)


BINARY_REF = {
    BinaryKind.ADD: lambda a, b: a + b,
    BinaryKind.SUB: lambda a, b: a - b,
    BinaryKind.MUL: lambda a, b: a * b,
    BinaryKind.DIV: lambda a, b: a / b,
    BinaryKind.POW: lambda a, b: abs(a) ** b,  # with |a|: no complex results
    BinaryKind.FMOD: math.fmod,
    BinaryKind.MAXIMUM: max,
    BinaryKind.MINIMUM: min,
    BinaryKind.EQ: lambda a, b: a == b,
    BinaryKind.NE: lambda a, b: a != b,
    BinaryKind.LT: lambda a, b: a < b,
    BinaryKind.LE: lambda a, b: a <= b,
    BinaryKind.GT: lambda a, b: a > b,
    BinaryKind.GE: lambda a, b: a >= b,
    BinaryKind.LOGICAL_AND: lambda a, b: bool(a) and bool(b),
    BinaryKind.LOGICAL_OR: lambda a, b: bool(a) or bool(b),
}
Y = np.array([[2.0, 0.5, -2.5, 3.0], [1.0, -4.0, 2.0, 0.0], [0.5, 1.5, 7.0, -1.5]], np.float32)


@pytest.mark.parametrize("kind", list(BINARY_REF), ids=str)
def test_binary_f32_tensors(kind):
    a, b = (np.abs(X), Y) if kind == BinaryKind.POW else (X, Y)
    b = np.where(b == 0, np.float32(1), b) if kind in (BinaryKind.DIV, BinaryKind.FMOD) else b
    got = run1(lambda fd: getattr(fd.ops, str(kind))(fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1])), a, b)
    predicate = kind in (BinaryKind.EQ, BinaryKind.NE, BinaryKind.LT, BinaryKind.LE, BinaryKind.GT, BinaryKind.GE,
                         BinaryKind.LOGICAL_AND, BinaryKind.LOGICAL_OR)
    want = per_element(BINARY_REF[kind], a, b, dtype=np.dtype(np.bool_ if predicate else np.float32))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("kind", ["bitwise_and", "bitwise_or", "bitwise_xor"])
def test_bitwise_binary_on_ints(kind):
    a, b = np.array([12, -1, 5], np.int64), np.array([10, 7, 0], np.int64)
    ref = {"bitwise_and": lambda p, q: p & q, "bitwise_or": lambda p, q: p | q, "bitwise_xor": lambda p, q: p ^ q}[kind]
    got = run1(lambda fd: getattr(fd.ops, kind)(fd.define_tensor([-1], dtype=DataType.Int),
                                                fd.define_tensor([-1], dtype=DataType.Int)), a, b)
    assert got.tolist() == [ref(p, q) for p, q in zip(a.tolist(), b.tolist())]


def test_integer_div_truncates_and_fmod_takes_the_dividends_sign():
    a, b = np.array([7, -7, 7, -7], np.int32), np.array([2, 2, -2, -2], np.int32)
    q, r = run(lambda fd: (lambda p, d: (fd.ops.div(p, d), fd.ops.fmod(p, d)))(
        fd.define_tensor([-1], dtype=DataType.Int32), fd.define_tensor([-1], dtype=DataType.Int32)), [a, b])[1]
    assert q.tolist() == [3, -3, -3, 3] and q.dtype == np.int32  # C division, not Python's floor
    assert r.tolist() == [1, -1, 1, -1]


def test_scalar_operands_on_either_side_and_operators():
    s = 1.5
    got = run(lambda fd: (lambda t, k: (t * k, k - t, 2 - t, t / 4, -t, t + t))(
        fd.define_tensor([-1, -1]), fd.define_scalar(dtype=DataType.Double)), [X, s])[1]
    for g, w in zip(got, [X * s, s - X, 2 - X, X / 4, -X, X + X]):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w.astype(np.float32), rtol=1e-6)


def test_broadcast_dims_broadcast_in_binary_ops():
    row = np.array([[10.0, 20.0, 30.0, 40.0]], np.float32)
    got = run1(lambda fd: fd.ops.add(fd.define_tensor([-1, -1]), fd.define_tensor([1, -1])), X, row)
    want = [[X[i][j] + row[0][j] for j in range(4)] for i in range(3)]
    np.testing.assert_allclose(got, want)


def test_where_with_tensor_and_scalar_branches():
    cond = X > 0
    got_t, got_s = run(lambda fd: (lambda c, a, b: (fd.ops.where(c, a, b), fd.ops.where(c, a, -1.0)))(
        fd.define_tensor([-1, -1], dtype=DataType.Bool), fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1])),
        [cond, X, Y])[1]
    np.testing.assert_array_equal(got_t, [[X[i][j] if cond[i][j] else Y[i][j] for j in range(4)] for i in range(3)])
    np.testing.assert_array_equal(got_s, [[X[i][j] if cond[i][j] else -1.0 for j in range(4)] for i in range(3)])


def test_where_with_a_non_bool_condition_is_refused_as_by_nvfuser():
    """nvFuser (and torch) take a Bool condition only; a comparison says what was meant."""
    c = np.array([0, 2, -1], np.int64)
    with pytest.raises(TypeError, match=r"where: the condition must be of DataType Bool, got i64\[\?\]"):
        run1(lambda fd: fd.ops.where(fd.define_tensor([-1], dtype=DataType.Int), 1.0, 0.0), c)
    got = run1(lambda fd: fd.ops.where(fd.ops.ne(fd.define_tensor([-1], dtype=DataType.Int), 0), 1.0, 0.0), c)
    assert got.tolist() == [0.0, 1.0, 1.0]


# -- dtype promotion ----------------------------------------------------------------------

PROMOTION = [
    # (lhs dtype, rhs: dtype or Python value, expected result)
    (DataType.Half, DataType.BFloat16, np.float32),  # no common 16-bit type
    (DataType.Half, DataType.Float, np.float32),
    (DataType.BFloat16, DataType.Double, np.float64),
    (DataType.Int32, DataType.Int, np.int64),
    (DataType.Int32, DataType.Half, np.float16),  # a float tensor wins over any int
    (DataType.Bool, DataType.Int32, np.int32),
    (DataType.Half, 2.5, np.float16),  # a Python float does not widen a float tensor
    (DataType.BFloat16, 3, BF16),
    (DataType.Int32, 7, np.int32),  # nor a Python int an int tensor
    (DataType.Int32, 0.5, np.float32),  # a float scalar makes an int tensor the default float
    (DataType.Bool, 2, np.int64),
    (DataType.Bool, True, np.bool_),
]


@pytest.mark.parametrize("lhs,rhs,want", PROMOTION, ids=lambda v: getattr(v, "name", str(v)))
def test_dtype_promotion(lhs, rhs, want):
    a = np.ones(3, lhs.numpy)

    def build(fd):
        t = fd.define_tensor([-1], dtype=lhs)
        return fd.ops.add(t, fd.define_tensor([-1], dtype=rhs) if isinstance(rhs, DataType) else rhs)

    inputs = [a, np.ones(3, rhs.numpy)] if isinstance(rhs, DataType) else [a]
    got = run1(build, *inputs)
    assert got.dtype == np.dtype(want)
    expected = 1 + (1 if isinstance(rhs, DataType) else rhs)
    np.testing.assert_array_equal(got.astype(np.float64), np.full(3, float(expected) if want != np.bool_ else 1.0))


def test_cat_promotes_its_inputs():
    got = run1(lambda fd: fd.ops.cat([fd.define_tensor([-1], dtype=DataType.Int32),
                                      fd.define_tensor([-1], dtype=DataType.Half)]),
               np.array([1, 2], np.int32), np.array([0.5], np.float16))
    assert got.dtype == np.float16 and got.tolist() == [1.0, 2.0, 0.5]


# -- low precision: compute in f32, round once ----------------------------------------------


@pytest.mark.parametrize("dtype", [DataType.BFloat16, DataType.Half], ids=lambda d: d.name)
def test_low_precision_elementwise_rounds_once_from_f32(dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(64).astype(dtype.numpy)
    b = rng.standard_normal(64).astype(dtype.numpy)
    mul, sig = run(lambda fd: (lambda p, q: (p * q, fd.ops.sigmoid(p)))(
        fd.define_tensor([-1], dtype=dtype), fd.define_tensor([-1], dtype=dtype)), [a, b])[1]
    f32 = np.float32
    want_mul = [f32(f32(p) * f32(q)) for p, q in zip(a.astype(f32).tolist(), b.astype(f32).tolist())]
    want_sig = [f32(1 / (1 + math.exp(-p))) for p in a.astype(f32).tolist()]
    assert mul.dtype == sig.dtype == dtype.numpy
    np.testing.assert_array_equal(mul, np.array(want_mul, f32).astype(dtype.numpy))
    np.testing.assert_array_equal(sig, np.array(want_sig, f32).astype(dtype.numpy))


@pytest.mark.parametrize("dtype,n", [(DataType.BFloat16, 1000), (DataType.Half, 3000)], ids=["bf16", "f16"])
def test_low_precision_sum_accumulates_in_f32(dtype, n):
    # Accumulating in the 16-bit type itself stalls at 256 (bf16) / 2048 (f16).
    got = run1(lambda fd: fd.ops.sum(fd.define_tensor([-1], dtype=dtype), [0]), np.ones(n, dtype.numpy))
    assert got.dtype == dtype.numpy and float(got) == n


def test_cast_rounds_to_nearest_even_and_truncates_to_int():
    x = np.array([1.00390625, 1.01171875, -2.7, 2.7, 0.0, -0.0], np.float32)
    bf, i32, b = run(lambda fd: (lambda t: (fd.ops.cast(t, DataType.BFloat16), fd.ops.cast(t, DataType.Int32),
                                            fd.ops.cast(t, DataType.Bool)))(fd.define_tensor([-1])), [x])[1]
    # 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to the even one (1).
    assert bf.astype(np.float32).tolist()[:2] == [1.0, 1.015625]
    assert i32.tolist() == [1, 1, -2, 2, 0, 0]
    assert b.tolist() == [True, True, True, True, False, False]


# -- reductions ------------------------------------------------------------------------------


def _reduce_ref(x, dims, keepdim, fn):
    out_shape = [1 if d in dims else n for d, n in enumerate(x.shape)]
    out = np.empty(out_shape, np.float64)
    for idx in itertools.product(*[range(n) for n in out_shape]):
        ranges = [range(x.shape[d]) if d in dims else [idx[d]] for d in range(x.ndim)]
        out[idx] = fn([float(x[i]) for i in itertools.product(*ranges)])
    return out if keepdim else out.reshape([n for d, n in enumerate(out_shape) if d not in dims])


@pytest.mark.parametrize("kind,fn", [("sum", math.fsum), ("prod", math.prod), ("max", max), ("min", min)])
@pytest.mark.parametrize("dims", [[0], [1], [0, 2], [-1], [0, 1, 2]], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions(kind, fn, dims, keepdim):
    x = np.random.default_rng(1).uniform(-2, 2, (2, 3, 4)).astype(np.float32)
    got = run1(lambda fd: getattr(fd.ops, kind)(fd.define_tensor([-1, -1, -1]), dims, keepdim=keepdim), x)
    want = _reduce_ref(x, {d % 3 for d in dims}, keepdim, fn)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_reduction_dtype_argument_casts_first():
    x = np.array([[1, 2], [3, 4]], np.int32)
    got = run1(lambda fd: fd.ops.sum(fd.define_tensor([-1, -1], dtype=DataType.Int32), [1], dtype=DataType.Double), x)
    assert got.dtype == np.float64 and got.tolist() == [3.0, 7.0]


# -- layout ops --------------------------------------------------------------------------------


def test_broadcast_inserts_size_1_dims():
    got = run1(lambda fd: fd.ops.broadcast(fd.define_tensor([-1, -1]), [True, False, True, False]), X)
    assert got.shape == (1, 3, 1, 4)
    assert all(got[0, i, 0, j] == X[i, j] for i in range(3) for j in range(4))


def test_broadcast_in_dim_maps_dims_and_expands():
    v = np.array([1.0, 2.0, 3.0], np.float32)
    got = run1(lambda fd: fd.ops.broadcast_in_dim(fd.define_tensor([-1]), [2, 3, 4], [1]), v)
    assert got.shape == (2, 3, 4)
    assert all(got[i, j, k] == v[j] for i in range(2) for j in range(3) for k in range(4))


def test_broadcast_in_dim_with_a_runtime_extent():
    v = np.array([1.0, 2.0], np.float32)

    def build(fd):
        t, n = fd.define_tensor([-1]), fd.define_scalar(dtype=DataType.Int)
        return fd.ops.broadcast_in_dim(t, [n, t.size(0)], [1])

    _, (got,) = run(build, [v, 3])
    assert got.shape == (3, 2) and got.tolist() == [[1.0, 2.0]] * 3


def test_expand_static_and_dynamic():
    row = np.array([[1.0, 2.0]], np.float32)

    def build(fd):
        t, n = fd.define_tensor([1, -1]), fd.define_scalar(dtype=DataType.Int)
        return fd.ops.expand(t, [4, -1]), fd.ops.expand(t, [n, -1])

    _, (s, d) = run(build, [row, 5])
    assert s.tolist() == [[1.0, 2.0]] * 4 and d.tolist() == [[1.0, 2.0]] * 5


def test_squeeze_accepts_negative_dims():
    x = np.arange(3, dtype=np.float32).reshape(1, 3, 1)
    got = run1(lambda fd: fd.ops.squeeze(fd.define_tensor([1, -1, 1]), [0, -1]), x)
    assert got.tolist() == [0.0, 1.0, 2.0]


def test_permute():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = run1(lambda fd: fd.ops.permute(fd.define_tensor([-1, -1, -1]), [2, 0, 1]), x)
    assert got.shape == (4, 2, 3)
    assert all(got[k, i, j] == x[i, j, k] for i in range(2) for j in range(3) for k in range(4))


@pytest.mark.parametrize("new_shape", [[6, 2], [2, -1], [-1], [3, 2, 2]], ids=str)
def test_reshape_static(new_shape):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = run1(lambda fd: fd.ops.reshape(fd.define_tensor([3, 4]), new_shape), x)
    flat = [v for row in x.tolist() for v in row]  # row-major order is kept
    assert [v for v in got.reshape(-1).tolist()] == flat
    assert math.prod(got.shape) == 12 and all(n == w for n, w in zip(got.shape, new_shape) if w != -1)


def test_reshape_with_runtime_extents_and_inferred_dim():
    x = np.arange(12, dtype=np.float32).reshape(2, 6)

    def build(fd):
        t, n = fd.define_tensor([-1, -1]), fd.define_scalar(dtype=DataType.Int)
        return fd.ops.reshape(t, [n, -1])

    _, (got,) = run(build, [x, 4])
    assert got.shape == (4, 3) and got.reshape(-1).tolist() == list(range(12))


# -- resize ops ------------------------------------------------------------------------------


def pad_reference(x: np.ndarray, torch_widths, value):
    """torch.nn.functional.pad(constant): widths (left, right) per dim from the LAST dim;
    a negative width removes elements from that side."""
    widths = [(0, 0)] * x.ndim
    for k in range(len(torch_widths) // 2):
        widths[x.ndim - 1 - k] = (torch_widths[2 * k], torch_widths[2 * k + 1])
    shape = [n + lo + hi for n, (lo, hi) in zip(x.shape, widths)]
    out = np.full(shape, value, x.dtype)
    for idx in itertools.product(*[range(n) for n in shape]):
        src = tuple(i - lo for i, (lo, _) in zip(idx, widths))
        if all(0 <= s < n for s, n in zip(src, x.shape)):
            out[idx] = x[src]
    return out


@pytest.mark.parametrize("widths", [[1, 2], [1, 2, 0, 1], [-1, 1, 2, -2], [0, -3], [-2, -2, 1, 0]], ids=str)
def test_pad(widths):
    got = run1(lambda fd: fd.ops.pad(fd.define_tensor([-1, -1]), widths, 9.0), X)
    np.testing.assert_array_equal(got, pad_reference(X, widths, 9.0))


def test_pad_with_runtime_widths_and_default_value():
    def build(fd):
        t, w = fd.define_tensor([-1, -1]), fd.define_scalar(dtype=DataType.Int)
        return fd.ops.pad(t, [w, 1, 0, w])

    for w in (2, -1):
        _, (got,) = run(build, [X, w])
        np.testing.assert_array_equal(got, pad_reference(X, [w, 1, 0, w], 0.0))


def test_pad_of_an_int_tensor():
    x = np.array([[1, 2]], np.int64)
    got = run1(lambda fd: fd.ops.pad(fd.define_tensor([1, -1], dtype=DataType.Int), [1, 1], 7), x)
    assert got.dtype == np.int64 and got.tolist() == [[7, 1, 2, 7]]


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=2),
    widths=st.lists(st.integers(-2, 3), min_size=4, max_size=4),
)
def test_pad_hypothesis_matches_f_pad_and_the_static_shape_rule(shape, widths):
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    widths = widths[: 2 * len(shape)]
    if any(n + widths[2 * k] + widths[2 * k + 1] < 0 for k, n in enumerate(reversed(shape))):
        return  # a negative extent is rejected when the fusion is defined (tested elsewhere)
    with FusionDefinition() as fd:
        out = fd.ops.pad(fd.define_tensor([n if n > 1 else 1 for n in shape]), widths, -1.0)
        fd.add_output(out)
    (got,) = fd.execute([x], backend="reference")
    want = pad_reference(x, widths, -1.0)
    np.testing.assert_array_equal(got, want)
    # The extents the shape rule inferred at definition time are the ones that come out.
    assert [1 if e in (-2,) else e for e in out.type.shape] == list(want.shape)


def test_slice_negative_and_out_of_range_bounds_follow_python():
    """With python_slicing=True (fuser's own; nvFuser's rules refuse these bounds)."""
    x = np.arange(10, dtype=np.float32)

    def py(fd, t, *bounds):
        return fd.ops.slice(t, *bounds, python_slicing=True)

    got = run(lambda fd: (lambda t: (py(fd, t, [-3], [100]), py(fd, t, [2], [-2], [3]),
                                     py(fd, t, [-100], [3]), py(fd, t, [7], [2])))(fd.define_tensor([-1])),
              [x])[1]
    xs = x.tolist()
    assert [g.tolist() for g in got] == [xs[-3:100], xs[2:-2:3], xs[-100:3], xs[7:2]]


@settings(max_examples=80, deadline=None)
@given(
    extent=st.integers(1, 6),
    start=st.integers(-8, 8),
    stop=st.integers(-8, 8),
    step=st.integers(1, 3),
    static=st.booleans(),
)
def test_slice_hypothesis_matches_python_slicing(extent, start, stop, step, static):
    x = np.arange(extent * 2, dtype=np.float32).reshape(extent, 2)
    dims = [extent if extent > 1 else 1, 2] if static else [-1, -1]
    with FusionDefinition() as fd:
        out = fd.ops.slice(fd.define_tensor(dims), [start, 0], [stop, 2], [step, 1], python_slicing=True)
        fd.add_output(out)
    (got,) = fd.execute([x], backend="reference")
    want = [row for row in x.tolist()[start:stop:step]]
    assert got.tolist() == want
    if static:  # the definition-time extent is the run-time one
        assert {-2: 1}.get(out.type.shape[0], out.type.shape[0]) == len(want)


def test_slice_with_runtime_bounds():
    x = np.arange(10, dtype=np.float32)

    def build(fd):
        t, s, e = fd.define_tensor([-1]), fd.define_scalar(dtype=DataType.Int), fd.define_scalar(dtype=DataType.Int)
        return fd.ops.slice(t, [s], [e], [2], python_slicing=True)

    with FusionDefinition() as fd:
        fd.add_output(build(fd))
    for s, e in [(1, 8), (-4, 100), (5, 2)]:
        assert fd.execute([x, s, e], backend="reference")[0].tolist() == x.tolist()[s:e:2]


def test_cat():
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(4, dtype=np.float32).reshape(2, 2)
    got = run1(lambda fd: fd.ops.cat([fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1])], dim=-1), a, b)
    assert got.tolist() == [ra + rb for ra, rb in zip(a.tolist(), b.tolist())]
    got0 = run1(lambda fd: fd.ops.cat([fd.define_tensor([-1, 3]), fd.define_tensor([1, 3])], dim=0), a, a[:1])
    assert got0.tolist() == a.tolist() + a[:1].tolist()


# -- gather family -------------------------------------------------------------------------------


def torch_gather_reference(x, index, dim):
    """out[i][j][k] = x[i][index[i][j][k]][k] (dim 1), by loops."""
    out = np.empty(index.shape, x.dtype)
    for idx in itertools.product(*[range(n) for n in index.shape]):
        src = list(idx)
        src[dim] = index[idx]
        out[idx] = x[tuple(src)]
    return out


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_with_a_smaller_index(dim):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    index = np.array([[3, 0], [1, 1], [0, 2]], np.int64)  # smaller than x in both dims
    got = run1(lambda fd: fd.ops.gather(fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1], dtype=DataType.Int), dim),
               x, index)
    np.testing.assert_array_equal(got, torch_gather_reference(x, index, dim % 2))


def test_take_along_axis_cross_entropy_lookup():
    logits = np.random.default_rng(2).standard_normal((4, 7)).astype(ml_dtypes.bfloat16)
    labels = np.array([[6], [0], [3], [3]], np.int32)
    got = run1(lambda fd: fd.ops.take_along_axis(fd.define_tensor([-1, -1], dtype=DataType.BFloat16),
                                                 fd.define_tensor([-1, 1], dtype=DataType.Int32), 1), logits, labels)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got, np.take_along_axis(logits, labels.astype(np.int64), axis=1))


@pytest.mark.parametrize("dim", [0, 1])
def test_index_select(dim):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    index = np.array([2, 0, 2], np.int64)
    got = run1(lambda fd: fd.ops.index_select(fd.define_tensor([-1, -1]), fd.define_tensor([-1], dtype=DataType.Int),
                                              dim), x, index)
    want = [[x[i][j] for j in range(4)] for i in index] if dim == 0 else [[row[i] for i in index] for row in x]
    assert got.tolist() == want


# -- factories and sizes ------------------------------------------------------------------------


def test_iota_int_and_float():
    ints, floats = run(lambda fd: (fd.ops.iota(5, 2, 3), fd.ops.iota(4, 0.5, 0.25, DataType.Float)), [])[1]
    # No tensor inputs: torch tensors, as nvFuser returns (numpy arrays where torch is not installed).
    assert str(ints.dtype).endswith("int64") and ints.tolist() == [2 + 3 * k for k in range(5)]
    assert str(floats.dtype).endswith("float32") and floats.tolist() == [0.5 + 0.25 * k for k in range(4)]


def test_iota_with_a_runtime_length():
    def build(fd):
        return fd.ops.iota(fd.define_scalar(dtype=DataType.Int))

    _, (got,) = run(build, [4])
    assert got.tolist() == [0, 1, 2, 3]


def test_full_static_dynamic_and_low_precision():
    def build(fd):
        t = fd.define_tensor([-1, -1])
        return fd.ops.full([t.size(1), 2], 1.5, DataType.BFloat16), fd.ops.full([2], True, DataType.Bool)

    _, (a, b) = run(build, [X])
    assert a.dtype == BF16 and a.shape == (4, 2) and a.astype(np.float32).tolist() == [[1.5, 1.5]] * 4
    assert b.tolist() == [True, True]


def test_size_and_scalar_arithmetic_as_outputs():
    def build(fd):
        t = fd.define_tensor([-1, -1])
        n, m = t.shape()
        return n * m + 1, m // 3, n - m

    _, outs = run(build, [np.zeros((6, 7), np.float32)])
    assert [int(v) for v in outs] == [43, 2, -1]


def test_scalar_constant_and_input_in_tensor_math():
    def build(fd):
        t, s = fd.define_tensor([-1]), fd.define_scalar(dtype=DataType.Double)
        return t * fd.define_scalar(2.0) + s

    _, (got,) = run(build, [np.array([1.0, 2.0], np.float32), 0.5])
    assert got.tolist() == [2.5, 4.5]


# -- output layouts ----------------------------------------------------------------------------


def test_output_stride_order_column_major():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1])
        fd.add_output(fd.ops.neg(t), stride_order=[0, 1])
        fd.add_output(fd.ops.neg(t))
    col, row = fd.execute([x], backend="reference")
    assert col.strides == (4, 12)  # dim 0 fastest
    assert row.strides == (16, 4)
    np.testing.assert_array_equal(col, -x)
    assert "fuser.stride_order = array<i64: 0, 1>" in str(fd)


def test_output_stride_order_3d():
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.abs(fd.define_tensor([-1, -1, -1], dtype=DataType.Double)), stride_order=[2, 0, 1])
    (got,) = fd.execute([x], backend="reference")
    # stride_order[i] ranks dim i (0 = fastest): dim 1 fastest, then dim 2, then dim 0.
    assert got.strides == (8 * 3 * 4, 8, 8 * 3)
    np.testing.assert_array_equal(got, x)


def test_input_stride_order_accepts_either_memory_layout():
    x = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.mul(fd.define_tensor([-1, -1], stride_order=[0, 1]), 2.0))
    assert "order [0, 1]" in str(fd)
    (got,) = fd.execute([x], backend="reference")
    np.testing.assert_array_equal(got, 2 * np.asarray(x))
    (got,) = fd.execute([np.ascontiguousarray(x)], backend="reference")
    np.testing.assert_array_equal(got, 2 * np.asarray(x))


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_stride_order_op_is_a_required_output_layout(backend):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1])
        col = fd.ops.stride_order(fd.ops.neg(t), [0, 1])
        fd.add_output(col)
        fd.add_output(fd.ops.exp(fd.ops.stride_order(t, [0, 1])))  # an intermediate: values only
    assert output_order(fd.fusion, 0) == ((0, 1), True) and output_order(fd.fusion, 1) == (None, False)
    for inputs in ([x], [torch.from_numpy(x)]):
        got, ex = fd.execute(inputs, backend=backend)
        assert tuple(got.stride()) == (1, 3) if isinstance(got, torch.Tensor) else got.strides == (4, 12)
        np.testing.assert_array_equal(np.asarray(got), -x)
        np.testing.assert_allclose(np.asarray(ex), np.exp(x), rtol=1e-6)


def test_stride_order_op_errors():
    with pytest.raises(ValueError, match=r"stride_order: \[0, 0\] is not a permutation of range\(2\) for the 2-d"):
        with FusionDefinition() as fd:
            fd.ops.stride_order(fd.define_tensor([-1, -1]), [0, 0])
    with pytest.raises(ValueError, match=r"add_output #0: stride_order \[1, 0\] contradicts the "
                                         r"fd.ops.stride_order \[0, 1\] of this tensor"):
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.stride_order(fd.define_tensor([-1, -1]), [0, 1]), stride_order=[1, 0])
    with FusionDefinition() as fd:  # the same order twice is fine
        fd.add_output(fd.ops.stride_order(fd.define_tensor([-1, -1]), [0, 1]), stride_order=[0, 1])


@pytest.mark.parametrize("order", [[0, 0], [1], [0, 2]], ids=str)
def test_add_output_rejects_a_non_permutation(order):
    with pytest.raises(ValueError, match=r"add_output: stride_order .* is not a permutation of range\(2\)"):
        with FusionDefinition() as fd:
            fd.add_output(fd.define_tensor([-1, -1]), stride_order=order)


# -- wrong inputs to execute ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_input_fusion():
    with FusionDefinition() as fd:
        a = fd.define_tensor([-1, 4], dtype=DataType.Float)
        b = fd.define_tensor([1, -1], dtype=DataType.Half)
        s = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(a + fd.ops.cast(b, DataType.Float) * s)
    return fd


A_OK, B_OK = np.ones((2, 4), np.float32), np.ones((1, 4), np.float16)
BAD_INPUTS = [
    ([A_OK, B_OK], ValueError, r"fusion @fusion takes 3 inputs, got 2"),
    ([A_OK, B_OK, 1, 2], ValueError, r"takes 3 inputs, got 4"),
    ([A_OK.astype(np.float64), B_OK, 1], TypeError, r"input 0 \(f32\[\?, 4\]\): expected dtype float32, got float64"),
    ([A_OK[0], B_OK, 1], ValueError, r"input 0 \(f32\[\?, 4\]\): expected rank 2, got shape \[4\]"),
    ([np.ones((2, 5), np.float32), B_OK, 1], ValueError,
     r"input 0 \(f32\[\?, 4\]\): dim 1 is a static extent of 4 but the input has extent 5"),
    ([A_OK, np.ones((2, 4), np.float16), 1], ValueError,
     r"input 1 \(f16\[b, \?\]\): dim 0 is a broadcast dim of 1 but the input has extent 2"),
    ([A_OK, B_OK, 1.5], TypeError, r"input 2 \(i64\): expected an integer scalar, got float"),
    ([[1.0, 2.0], B_OK, 1], TypeError, r"input 0 \(f32\[\?, 4\]\): expected a numpy array or torch tensor, got list"),
    ([A_OK, B_OK.astype(np.int16), 1], TypeError, r"input 1 \(f16\[b, \?\]\): expected dtype float16, got int16"),
]


@pytest.mark.parametrize("inputs,exc,message", BAD_INPUTS, ids=lambda v: v if isinstance(v, str) else "")
def test_execute_rejects_wrong_inputs_naming_the_input(three_input_fusion, inputs, exc, message):
    with pytest.raises(exc, match=message):
        three_input_fusion.execute(inputs, backend="reference")


def test_execute_accepts_numpy_scalars_and_rejects_unknown_backends(three_input_fusion):
    (got,) = three_input_fusion.execute([A_OK, B_OK, np.int64(3)], backend="reference")
    assert got.tolist() == [[4.0] * 4] * 2
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        three_input_fusion.execute([A_OK, B_OK, 3], backend="gpu")


def test_builder_errors_name_the_op_and_extents():
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 4])
        with pytest.raises(ValueError, match=r"fuser.squeeze: cannot squeeze dim 1 of \[\?, 4\]: its extent is 4, not 1"):
            fd.ops.squeeze(x, [1])
        with pytest.raises(ValueError, match=r"fuser.binary add: dim 1 has extents 4 and 5"):
            fd.ops.add(x, fd.define_tensor([-1, 5]))
        with pytest.raises(ValueError, match=r"fuser.gather: index must have an integer dtype, got f32"):
            fd.ops.gather(x, fd.define_tensor([-1, 4]), 1)
        with pytest.raises(ValueError, match=r"fuser.reduction sum: dim 2 is out of range for a tensor of rank 2"):
            fd.ops.sum(x, [2])
        with pytest.raises(TypeError, match=r"neg: arg must be a Tensor, got int"):
            fd.ops.neg(3)
        fd.add_output(x)


def test_a_fusion_without_outputs_is_an_error():
    with pytest.raises(ValueError, match="no outputs"):
        with FusionDefinition() as fd:
            fd.define_tensor([-1])


# -- printing ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rich_fusion():
    """One fusion using most ops, layouts and runtime scalars: its text must re-parse."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 8], dtype=DataType.BFloat16, stride_order=[0, 1])
        lab = fd.define_tensor([-1, 1], dtype=DataType.Int)
        w = fd.define_scalar(dtype=DataType.Int)
        xf = fd.ops.cast(x, DataType.Float)
        m = fd.ops.max(xf, [1], keepdim=True)
        e = fd.ops.exp(xf - m)
        lse = fd.ops.log(fd.ops.sum(e, [1], keepdim=True)) + m
        picked = fd.ops.take_along_axis(xf, lab, 1)
        padded = fd.ops.pad(xf, [w, -1], 0.0)
        sliced = fd.ops.slice(xf, [0, -3], [-1, 8], [2, 1], python_slicing=True)
        cat = fd.ops.cat([xf, xf], 1)
        iota = fd.ops.iota(x.size(0))
        fd.add_output(lse - picked, stride_order=[0, 1])
        fd.add_output(padded)
        fd.add_output(sliced)
        fd.add_output(fd.ops.reshape(cat, [-1]))
        fd.add_output(iota)
    return fd


def test_print_reparses_with_the_parser_to_the_same_text(rich_fusion):
    text = str(rich_fusion)
    module = Parser(make_context(), text).parse_module()
    module.verify()
    assert str(module) == text.rstrip("\n") or f"{module}\n" == text


def test_print_reparses_with_fuser_opt(rich_fusion):
    text = str(rich_fusion)
    proc = subprocess.run([sys.executable, "-m", "fuser.tools.fuser_opt"], input=text, capture_output=True, text=True,
                          cwd=_repo_root())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == text.strip()


def test_reparsed_fusion_computes_the_same(rich_fusion):
    from fuser_dialect.fusion import the_fusion
    from fuser_dialect.interpreter import interpret

    x = np.random.default_rng(3).standard_normal((5, 8)).astype(ml_dtypes.bfloat16)
    inputs = [x, np.array([[0], [7], [3], [3], [1]], np.int64), 2]
    direct = rich_fusion.execute(inputs, backend="reference")
    reparsed = interpret(the_fusion(Parser(make_context(), str(rich_fusion)).parse_module()), inputs)
    for a, b in zip(direct, reparsed, strict=True):
        np.testing.assert_array_equal(a, b)


def _repo_root() -> str:
    import os

    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


# -- issue #11: values that do not fit, values of another definition ------------------------------


@pytest.mark.parametrize("shape", [[2**70], [-1, 2**63]])
def test_static_extents_beyond_64_bits_are_rejected(shape):
    with pytest.raises(ValueError, match=r"shape\[\d\] = \d+ does not fit in 64 bits"):
        with FusionDefinition() as fd:
            fd.define_tensor(shape=shape)


def test_pad_width_beyond_64_bits_is_rejected():
    with pytest.raises(ValueError, match=r"pad width #1 = \d+ does not fit in 64 bits"):
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1])
            fd.add_output(fd.ops.pad(x, [0, 2**64]))


def test_integer_scalar_input_out_of_range_names_the_input():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Int)
        n = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.add(x, n))
    with pytest.raises(ValueError, match=r"input 1 \(i64\): \d+ does not fit in the input's 64-bit integer type"):
        fd.execute([np.arange(3), 2**64], backend="reference")


def test_tensors_of_another_definition_are_a_clear_error():
    with FusionDefinition() as other:
        y = other.define_tensor(shape=[-1])
        other.add_output(y)
    with pytest.raises(ValueError, match=r"operand #1 of fuser.binary was defined in another FusionDefinition"):
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1])
            fd.add_output(fd.ops.add(x, y))
    with pytest.raises(ValueError, match=r"add_output #0 was defined in another FusionDefinition"):
        with FusionDefinition() as fd:
            fd.define_tensor(shape=[-1])
            fd.add_output(y)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_out_of_range_index_is_an_index_error_on_every_backend(backend):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        i = fd.define_tensor(shape=[-1, 1], dtype=DataType.Int)
        fd.add_output(fd.ops.take_along_axis(x, i, 1))
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(IndexError, match="out of range"):
        fd.execute([x, np.array([[0], [4], [1]])], backend=backend)


def test_a_dtype_given_as_contiguity_is_an_error():
    """`define_tensor([-1, -1], DataType.Int)` put the dtype in nvFuser's second parameter,
    contiguity, and silently defined a Float tensor."""
    with FusionDefinition() as fd:
        with pytest.raises(TypeError, match=r"the second argument is contiguity, got DataType.Int; pass the dtype "
                                            r"as dtype=DataType.Int"):
            fd.define_tensor([-1, -1], DataType.Int)
        with pytest.raises(ValueError, match="has 1 entries for 2 dims"):
            fd.define_tensor([-1, -1], [True])
        x = fd.define_tensor([-1, -1], [True, None], DataType.Int)
        assert x.dtype == DataType.Int
        fd.add_output(x)
