"""Every op of the fuser dialect through the whole lowering (concretize → preseg → segment →
CUDA C → g++ → run on the CPU), checked against the numpy reference interpreter.

Shapes are not multiples of the 32-thread warp or the 128-thread pointwise block, include
extents of 1 in dynamic dims, broadcast dims (`1` in define_tensor) and empty tensors (an extent
of 0: the kernel is not launched, the outputs still have the right shape and dtype).

Compile cost: every distinct kernel source is one g++ run (~1 s here). So several ops share one
fusion wherever that still checks each op on its own output, and `lowering_checks.tie` joins the
extents of several inputs so their outputs fall in one kernel and one iteration domain. A
pointwise fusion run with other extents mostly reuses its kernel (only the split of the domain
into an outer loop and a grid-stride inner loop follows the extents); a reduction's schedule
follows the row length (threads, elements per thread), so each row length may be a new kernel.

The last tests compile a representative set of the generated sources for sm_90 with NVRTC and
with nvcc (each skipped, saying why, where that compiler is missing).
"""

from __future__ import annotations

import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from fuser_dialect.ops_compute import FULL_PRECISION_BINARY, INT_ONLY_BINARY, BinaryKind, UnaryKind
from lowering_checks import (BF16, assert_matches, check, compile_for_sm90, generated_not_compiled,
                             requires_cpu_backend, tie)

pytestmark = requires_cpu_backend

FLOATS = [(DataType.Double, np.float64), (DataType.Float, np.float32), (DataType.Half, np.float16),
          (DataType.BFloat16, BF16)]
INTS = [(DataType.Int, np.int64), (DataType.Int32, np.int32)]
ALL_DTYPES = FLOATS + INTS + [(DataType.Bool, np.bool_)]

# [rows, cols] of pointwise runs: 37*129 is no multiple of 32 or 128; extents of 1 in dynamic
# dims; empty tensors with a zero extent in either dim.
POINTWISE_SHAPES = [(37, 129), (1, 1), (3, 1), (1, 5), (0, 7), (4, 0)]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _floats(rng, shape, npdt, scale=3.0, specials=True):
    x = rng.standard_normal(shape) * scale
    if specials and x.size >= 8:
        x.flat[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -2.5, 1.5]
    return x.astype(npdt)


# ------------------------------------------------------------------------------------------------
# Unary ops
# ------------------------------------------------------------------------------------------------

FLOAT_UNARY = [k for k in UnaryKind if k != UnaryKind.BITWISE_NOT]
INT_UNARY = [UnaryKind.NEG, UnaryKind.ABS, UnaryKind.RELU, UnaryKind.SIGN, UnaryKind.FLOOR, UnaryKind.CEIL,
             UnaryKind.ROUND, UnaryKind.TRUNC, UnaryKind.LOGICAL_NOT, UnaryKind.BITWISE_NOT, UnaryKind.ISNAN,
             UnaryKind.ISINF, UnaryKind.EXP, UnaryKind.SQRT]  # exp/sqrt of ints compute in f32
# neg and sign of bool are left out: the dialect accepts them but the reference interpreter
# (numpy) raises TypeError, so there is no oracle.
BOOL_UNARY = [UnaryKind.ABS, UnaryKind.RELU, UnaryKind.FLOOR, UnaryKind.ROUND, UnaryKind.LOGICAL_NOT,
              UnaryKind.BITWISE_NOT, UnaryKind.ISNAN, UnaryKind.ISINF]


def unary_float_fusion():
    """Every unary kind on f64, f32, f16 and bf16 inputs: one pointwise kernel."""
    names = ["tie"]
    with FusionDefinition() as fd:
        xs = [fd.define_tensor(shape=[-1, -1], dtype=dt) for dt, _ in FLOATS]
        tie(fd, xs)
        for (dt, _), x in zip(FLOATS, xs):
            for k in FLOAT_UNARY:
                fd.add_output(getattr(fd.ops, str(k))(x))
                names.append(f"{k}({dt.value})")
    return fd, names


def test_unary_float_dtypes():
    fd, names = unary_float_fusion()
    rng = _rng(1)
    for shape in POINTWISE_SHAPES:
        inputs = [_floats(rng, shape, npdt) for _, npdt in FLOATS]
        kernels = check(fd, inputs, names)
        assert [k.scheduler for k in kernels] == ["pointwise"]


def unary_int_bool_fusion():
    names = ["tie"]
    with FusionDefinition() as fd:
        xs = [fd.define_tensor(shape=[-1, -1], dtype=dt) for dt, _ in INTS]
        b = fd.define_tensor(shape=[-1, -1], dtype=DataType.Bool)
        tie(fd, xs + [b])
        for (dt, _), x in zip(INTS, xs):
            for k in INT_UNARY:
                fd.add_output(getattr(fd.ops, str(k))(x))
                names.append(f"{k}({dt.value})")
        for k in BOOL_UNARY:
            fd.add_output(getattr(fd.ops, str(k))(b))
            names.append(f"{k}(i1)")
    return fd, names


def test_unary_int_and_bool():
    fd, names = unary_int_bool_fusion()
    rng = _rng(2)
    for shape in [(37, 129), (1, 1), (0, 3)]:
        inputs = [rng.integers(-50, 50, shape).astype(np.int64), rng.integers(-50, 50, shape).astype(np.int32),
                  rng.integers(0, 2, shape).astype(bool)]
        kernels = check(fd, inputs, names)
        assert len(kernels) == 1


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_sign_of_nan_is_zero_as_in_torch(backend):
    """sign(NaN) is 0 in torch (and nvFuser); numpy's NaN is not the oracle here."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.sign(x))
    (out,) = fd.execute([np.array([np.nan, -3, 0, 2], np.float32)], backend=backend)
    assert list(out) == [0, -1, 0, 1]


# ------------------------------------------------------------------------------------------------
# Binary ops: tensor (op) tensor with a broadcast operand, tensor (op) constant, scalar input (op) tensor
# ------------------------------------------------------------------------------------------------

FLOAT_BINARY = [k for k in BinaryKind if not str(k).startswith("bitwise") and k not in INT_ONLY_BINARY]
BOOL_BINARY = [k for k in BinaryKind if k not in (BinaryKind.SUB, BinaryKind.DIV, BinaryKind.FMOD, BinaryKind.REMAINDER)
               and k not in INT_ONLY_BINARY | FULL_PRECISION_BINARY]


def binary_fusion(dt: DataType):
    is_int = dt in (DataType.Int, DataType.Int32)
    full_precision = dt in (DataType.Double, DataType.Float)  # nextafter: f32/f64 only
    kinds = [k for k in (BinaryKind if is_int else FLOAT_BINARY)
             if full_precision or k not in FULL_PRECISION_BINARY]
    names = []
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dt)
        y = fd.define_tensor(shape=[1, -1], dtype=dt)  # broadcast dim 0
        s = fd.define_scalar(dtype=DataType.Int if is_int else DataType.Double)
        const = 3 if is_int else 1.5
        for k in kinds:
            f = getattr(fd.ops, str(k))
            fd.add_output(f(x, y))
            fd.add_output(f(x, const))
            names += [f"{k}(x, y)", f"{k}(x, {const})"]
            if not (is_int and k == BinaryKind.POW):  # an integer to a negative power is an error
                fd.add_output(f(s, x))
                names.append(f"{k}(s, x)")
        if is_int:  # promotion to f32 by a float constant; operators
            fd.add_output(fd.ops.add(x, 2.5))
            fd.add_output(x * s - y)
            names += ["add(x, 2.5)", "x * s - y"]
    return fd, names


@pytest.mark.parametrize("dt,npdt", FLOATS + INTS, ids=[dt.value for dt, _ in FLOATS + INTS])
def test_binary(dt, npdt):
    fd, names = binary_fusion(dt)
    rng = _rng(3)
    for rows, cols in [(9, 130), (1, 1), (0, 4)]:
        if npdt in (np.int64, np.int32):
            # Divisors are never 0 (an error on the reference, a trap on the device); exponents >= 0.
            x = rng.integers(1, 20, (rows, cols)) * rng.choice([-1, 1], (rows, cols))
            y = rng.integers(1, 5, (1, cols))
            inputs = [x.astype(npdt), y.astype(npdt), -7]
        else:
            inputs = [_floats(rng, (rows, cols), npdt, 2.0), _floats(rng, (1, cols), npdt, 2.0, specials=False), 0.75]
        kernels = check(fd, inputs, names)
        assert len(kernels) == 1


@pytest.mark.parametrize("dt, npdt", [(DataType.Int, np.int64), (DataType.Int32, np.int32)])
def test_integer_pow_is_exact_and_wraps(dt, npdt):
    """Regression (the first GPU run): integer pow went through a double pow, whose rounding
    truncated (-19)^3 to -6858 on the GPU; and beyond 2^53 a double cannot hold the exact power
    anywhere. Exact powers by squaring, wrapping like numpy and torch."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=dt)
        y = fd.define_tensor(shape=[-1], dtype=dt)
        fd.add_output(fd.ops.pow(x, y))
    base = np.array([-19, 3, 3, -3, 7, 0, 1, -1, 2], npdt)
    exponent = np.array([3, 39, 41, 37, 22, 0, 5, 7, 40], npdt)
    check(fd, [base, exponent])
    (got,) = fd.execute([base, exponent], backend="cpu")
    assert got[0] == -6859


INT_DIV_BY_ZERO = """
import numpy as np
from fuser import DataType, FusionDefinition
for dt, npdt in [(DataType.Int32, np.int32), (DataType.Int, np.int64)]:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=dt)
        y = fd.define_tensor(shape=[-1], dtype=dt)
        fd.add_output(fd.ops.div(x, y))
        fd.add_output(fd.ops.fmod(x, y))
    low = np.iinfo(npdt).min
    q, r = fd.execute([np.array([7, -7, 7, low, 5], npdt), np.array([2, 2, 0, -1, -1], npdt)], backend="cpu")
    assert list(q[[0, 1, 3, 4]]) == [3, -3, low, -5] and list(r[[0, 1, 3, 4]]) == [1, -1, 0, 0], (q, r)
print("survived")
"""


def test_integer_division_by_zero_does_not_kill_the_process():
    """Regression: `x / 0` and `x % 0` on integers (and MIN / -1) trapped in the generated C++
    (SIGFPE ended the Python process). The reference raises; a kernel cannot, so the value of a
    lane dividing by zero is unspecified (0); every other lane is still right. Run in a child
    process: a regression must fail this test, not kill the test run."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", INT_DIV_BY_ZERO], capture_output=True, text=True, env=env,
                          cwd=root, timeout=300)
    assert proc.returncode == 0 and "survived" in proc.stdout, (proc.returncode, proc.stdout, proc.stderr[-2000:])


def test_binary_bool_and_mixed_promotion():
    names = []
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], dtype=DataType.Bool)
        b = fd.define_tensor(shape=[-1, 1], dtype=DataType.Bool)  # broadcast dim 1
        h = fd.define_tensor(shape=[-1, -1], dtype=DataType.Half)
        bf = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        i = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int32)
        d = fd.define_tensor(shape=[-1, -1], dtype=DataType.Double)
        tie(fd, [a, h, bf, i, d])
        for k in BOOL_BINARY:
            fd.add_output(getattr(fd.ops, str(k))(a, b))
            fd.add_output(getattr(fd.ops, str(k))(a, True))
            names += [f"{k}(a, b)", f"{k}(a, True)"]
        fd.add_output(fd.ops.add(h, bf))  # f16 + bf16 -> f32
        fd.add_output(fd.ops.mul(i, h))  # i32 * f16 -> f16
        fd.add_output(fd.ops.sub(d, i))  # f64 - i32 -> f64
        fd.add_output(fd.ops.div(i, 2))  # i32 / 2 truncates
        fd.add_output(fd.ops.add(a, i))  # bool + i32 -> i32
        names = ["tie"] + names + ["f16+bf16", "i32*f16", "f64-i32", "i32/2", "bool+i32"]
    rng = _rng(4)
    for rows, cols in [(5, 33), (1, 1), (2, 0)]:
        inputs = [rng.integers(0, 2, (rows, cols)).astype(bool), rng.integers(0, 2, (rows, 1)).astype(bool),
                  _floats(rng, (rows, cols), np.float16), _floats(rng, (rows, cols), BF16),
                  rng.integers(-9, 9, (rows, cols)).astype(np.int32), _floats(rng, (rows, cols), np.float64)]
        kernels = check(fd, inputs, names)
        assert len(kernels) == 1


# ------------------------------------------------------------------------------------------------
# where, cast
# ------------------------------------------------------------------------------------------------


def test_where():
    with FusionDefinition() as fd:
        c = fd.define_tensor(shape=[-1, 1], dtype=DataType.Bool)
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        y = fd.define_tensor(shape=[1, -1], dtype=DataType.Half)
        i = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int32)
        tie(fd, [x, i])
        fd.add_output(fd.ops.where(c, x, y))      # bool cond, broadcast in both dims, f32 x f16
        fd.add_output(fd.ops.where(c, x, 2.0))    # scalar else
        fd.add_output(fd.ops.where(c, 1.0, y))    # scalar then
        fd.add_output(fd.ops.where(fd.ops.ne(x, 0), i, 7))  # float cond != 0 (a non-Bool cond is refused, as nvFuser)
        fd.add_output(fd.ops.where(fd.ops.ne(i, 0), x, i))  # int cond != 0
        fd.add_output(fd.ops.where(True, x, i))   # scalar cond
    rng = _rng(5)
    for rows, cols in [(7, 67), (1, 1), (0, 3)]:
        x = _floats(rng, (rows, cols), np.float32)
        if x.size:
            x.flat[0] = 0.0
        inputs = [rng.integers(0, 2, (rows, 1)).astype(bool), x, _floats(rng, (1, cols), np.float16),
                  rng.integers(-2, 2, (rows, cols)).astype(np.int32)]
        check(fd, inputs)
    # where(c, 1.0, y) has c:[?,1] and y:[1,?]; its output gets a column-major layout hint, which
    # the cpu backend used to reject ("the array must be C-contiguous"): see test_layouts below.


def test_cast_between_all_dtypes():
    """All 42 ordered pairs of the 7 dtypes in one kernel; rounding (1.5, 2.5, -2.5 to ints and
    narrow floats), truncation toward zero, float -> bool is != 0; NaN and inf only where the
    conversion is defined (float -> float / bool)."""
    names = ["tie"]
    with FusionDefinition() as fd:
        xs = [fd.define_tensor(shape=[-1], dtype=dt) for dt, _ in ALL_DTYPES]
        special = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        tie(fd, xs + [special])
        for (src, _), x in zip(ALL_DTYPES, xs):
            for dst, _ in ALL_DTYPES:
                if dst != src:
                    fd.add_output(fd.ops.cast(x, dst))
                    names.append(f"{src.value}->{dst.value}")
        for dst in (DataType.Double, DataType.Half, DataType.BFloat16, DataType.Bool):
            fd.add_output(fd.ops.cast(special, dst))
            names.append(f"special f32->{dst.value}")
    rng = _rng(6)
    for n in (133, 1, 0):
        vals = rng.standard_normal(n) * 40
        vals[:6] = [0, -0.0, 1.5, 2.5, -2.5, 300.7][:n]
        inputs = [(vals > 0) if npdt == np.bool_ else vals.astype(npdt) for _, npdt in ALL_DTYPES]
        special = (rng.standard_normal(n) * 1e5).astype(np.float32)  # overflows f16
        special[:3] = [np.nan, np.inf, -np.inf][:n]
        kernels = check(fd, inputs + [special], names)
        assert len(kernels) == 1


# ------------------------------------------------------------------------------------------------
# Reductions
# ------------------------------------------------------------------------------------------------

REDUCTIONS = ["sum", "prod", "max", "min"]


def reduction_fusion(dt: DataType, dims, rank: int):
    names = []
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * rank, dtype=dt)
        for k in REDUCTIONS:
            for keep in (False, True):
                fd.add_output(getattr(fd.ops, k)(x, dims=dims, keepdim=keep))
                names.append(f"{k}(dims={dims}, keepdim={keep})")
    return fd, names


def _signed_unit(rng, shape):
    """|x| in [0.5, 1.5): products of a few hundred stay in range."""
    return (rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)).astype(np.float32)


@pytest.mark.parametrize("dims", [[2], [-1], [0], [1], [0, 2], [1, 2], [0, 1, 2]], ids=str)
def test_reductions_f32(dims):
    """Inner dims (a block per row, block reduce), outer dims (a thread per kept element, serial
    loop), a kept dim between reduced ones, all dims (rank-0 result without keepdim)."""
    fd, names = reduction_fusion(DataType.Float, dims, 3)
    rng = _rng(7)
    x = _signed_unit(rng, (3, 5, 133))
    kernels = check(fd, [x], names, tol=(1e-4, 1e-5))
    assert [k.scheduler for k in kernels] == ["reduction"]


def test_reductions_nan_empty_and_size_one():
    """max/min propagate NaN; a row of length 0 gives the identity (0, 1, -inf, inf); no rows at all
    launches nothing; an extent of 1."""
    fd, names = reduction_fusion(DataType.Float, [1], 2)
    rng = _rng(8)
    x = _signed_unit(rng, (4, 37))
    x[1, 7] = np.nan
    x[2, 36] = np.nan
    check(fd, [x], names)
    check(fd, [np.zeros((3, 0), np.float32)], names)
    check(fd, [np.zeros((0, 5), np.float32)], names)
    check(fd, [_signed_unit(rng, (1, 1))], names)
    outer, names = reduction_fusion(DataType.Float, [0], 2)
    x = _signed_unit(rng, (37, 4))
    x[7, 1] = np.nan
    check(outer, [x], names)
    check(outer, [np.zeros((0, 3), np.float32)], names)


def test_reductions_other_dtypes():
    """f64, f16, bf16 (accumulate in f32), i64, i32 (accumulate in i64), bool, over an inner dim."""
    dtypes = [d for d in ALL_DTYPES if d[0] != DataType.Float]
    names = ["tie"]
    with FusionDefinition() as fd:
        xs = [fd.define_tensor(shape=[-1, -1], dtype=dt) for dt, _ in dtypes]
        tie(fd, xs)
        for (dt, _), x in zip(dtypes, xs):
            for k in REDUCTIONS:
                for keep in (False, True):
                    fd.add_output(getattr(fd.ops, k)(x, dims=[1], keepdim=keep))
                    names.append(f"{k}({dt.value}, keepdim={keep})")
        fd.add_output(fd.ops.sum(xs[1], dims=[1], dtype=DataType.Float))  # f16 summed as f32
        names.append("sum(f16, dtype=f32)")
    rng = _rng(9)
    inputs = []
    for _, npdt in dtypes:
        if npdt == np.bool_:
            inputs.append(rng.integers(0, 2, (33, 65)).astype(bool))
        elif np.dtype(npdt).kind == "i":
            inputs.append(rng.integers(-3, 4, (33, 65)).astype(npdt))
        else:
            inputs.append(rng.uniform(0.95, 1.05, (33, 65)).astype(npdt))
    kernels = check(fd, inputs, names)
    # The tie output is shaped like the reduction domain: stored by the same kernel.
    assert [k.scheduler for k in kernels] == ["reduction"]


# ------------------------------------------------------------------------------------------------
# Layout ops: broadcast, broadcast_in_dim, squeeze, expand, reshape, permute
# ------------------------------------------------------------------------------------------------


def test_broadcast_expand_squeeze():
    names = ["x + broadcast(v)", "broadcast_in_dim(v)", "expand(s)", "x * broadcast(squeeze(s))",
             "expand(broadcast_in_dim(u))"]
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1])  # [a, b, c]
        v = fd.define_tensor(shape=[-1])  # [c]
        s = fd.define_tensor(shape=[-1, 1, -1])  # [a, 1, c]: a broadcast input dim
        u = fd.define_tensor(shape=[-1], dtype=DataType.Int32)  # [b]
        a, b, c = x.size(0), x.size(1), x.size(2)
        fd.add_output(fd.ops.add(x, fd.ops.broadcast(v, [True, True, False])))
        fd.add_output(fd.ops.broadcast_in_dim(v, [a, b, c], [2]))
        fd.add_output(fd.ops.expand(s, [-1, b, -1]))
        fd.add_output(fd.ops.mul(x, fd.ops.broadcast(fd.ops.squeeze(s, [1]), [False, True, False])))
        fd.add_output(fd.ops.broadcast_in_dim(u, [a, b, c], [1]))
    rng = _rng(10)
    for a, b, c in [(3, 5, 37), (1, 1, 1), (2, 1, 3), (0, 4, 3), (2, 3, 0)]:
        f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)
        check(fd, [f32(a, b, c), f32(c), f32(a, 1, c), rng.integers(-9, 9, b).astype(np.int32)], names)


def test_permute_and_reshape():
    names = ["permute [2,0,1]", "reshape merge", "reshape(permute) flatten", "reshape split (static)",
             "reshape merge (static)"]
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1])
        y = fd.define_tensor(shape=[6, 10], dtype=DataType.Half)
        p = fd.ops.permute(x, [2, 0, 1])
        fd.add_output(p)
        fd.add_output(fd.ops.reshape(x, [x.size(0), x.size(1) * x.size(2)]))
        fd.add_output(fd.ops.reshape(p, [x.size(0) * x.size(1) * x.size(2)]))
        fd.add_output(fd.ops.reshape(y, [3, 2, 5, 2]))
        fd.add_output(fd.ops.reshape(fd.ops.permute(y, [1, 0]), [60]))
    rng = _rng(11)
    for shape in [(3, 5, 37), (1, 1, 1), (4, 1, 3), (0, 2, 3)]:
        check(fd, [rng.standard_normal(shape).astype(np.float32), rng.standard_normal((6, 10)).astype(np.float16)],
              names)


# ------------------------------------------------------------------------------------------------
# Resize: pad (negative widths crop), slice (steps, negative and out-of-range bounds), cat
# ------------------------------------------------------------------------------------------------


RESIZE_NAMES = ["pad (1,0)x(2,3) value 0.5", "pad crop (1,-1)x(-2,3)", "slice steps 2,3 to -1,-2",
                "slice -3: x 2:100", "cat dim 1", "cat dim 0 (3 inputs)"]


def resize_fusion():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.pad(x, [2, 3, 1, 0], 0.5))
        fd.add_output(fd.ops.pad(x, [-2, 3, 1, -1]))
        fd.add_output(fd.ops.slice(x, [1, 0], [-1, -2], [2, 3], python_slicing=True))
        fd.add_output(fd.ops.slice(x, [-3, 2], [100, 5], python_slicing=True))
        fd.add_output(fd.ops.cat([x, fd.ops.exp(x)], dim=1))
        fd.add_output(fd.ops.cat([x, fd.ops.neg(x), x], dim=0))
    return fd


def test_pad_slice_cat_static():
    fd, names = resize_fusion(), RESIZE_NAMES
    rng = _rng(12)
    # Resize extents are made static per call (concretize), so each shape compiles its kernels.
    for shape in [(7, 37), (4, 3)]:
        check(fd, [rng.standard_normal(shape).astype(np.float32)], names)


@pytest.mark.parametrize("resize_extents", [True, False], ids=["static-resize", "symbolic-resize"])
def test_pad_slice_scalar_bounds(resize_extents):
    """Pad widths and slice bounds from a scalar input, on i32 and bf16; with
    `concretize_resize_extents` disabled the kernel takes them as parameters."""
    disable = () if resize_extents else ("concretize_resize_extents",)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int32)
        h = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        w = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.pad(x, [w, -1], 9))
        fd.add_output(fd.ops.slice(h, [0, w], [h.size(0), h.size(1)], [1, 2], python_slicing=True))
    rng = _rng(13)
    for w in (2, 0):
        inputs = [rng.integers(-5, 5, (5, 11)).astype(np.int32), rng.standard_normal((3, 11)).astype(BF16), w]
        check(fd, inputs, _disable_options=disable)


# ------------------------------------------------------------------------------------------------
# Gather family
# ------------------------------------------------------------------------------------------------


def test_gather():
    """torch.gather: the index may be smaller than the input in the other dims."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        i = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
        j = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int32)
        fd.add_output(fd.ops.gather(x, i, 1))
        fd.add_output(fd.ops.gather(x, j, 0))
    rng = _rng(14)
    x = rng.standard_normal((6, 40)).astype(np.float32)
    check(fd, [x, rng.integers(0, 40, (5, 7)), rng.integers(0, 6, (9, 33)).astype(np.int32)])
    check(fd, [x, rng.integers(0, 40, (6, 70)), rng.integers(0, 6, (1, 1)).astype(np.int32)])
    check(fd, [x, rng.integers(0, 40, (0, 3)), rng.integers(0, 6, (2, 0)).astype(np.int32)])


def take_along_axis_fusion():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        i = fd.define_tensor(shape=[-1, 1], dtype=DataType.Int)  # broadcast index dim
        j = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int32)
        xb = fd.define_tensor(shape=[1, -1], dtype=DataType.Half)  # broadcast input dim
        fd.add_output(fd.ops.take_along_axis(x, i, 1))
        fd.add_output(fd.ops.take_along_axis(x, j, 1))
        fd.add_output(fd.ops.take_along_axis(xb, j, 1))
    return fd


def _take_along_axis_inputs(rng, rows, cols):
    return [rng.standard_normal((rows, cols)).astype(np.float32), rng.integers(0, cols, (rows, 1)),
            rng.integers(0, cols, (rows, cols)).astype(np.int32), rng.standard_normal((1, cols)).astype(np.float16)]


def test_take_along_axis():
    fd = take_along_axis_fusion()
    rng = _rng(15)
    for rows, cols in [(6, 40), (1, 1)]:
        check(fd, _take_along_axis_inputs(rng, rows, cols))


def test_index_select():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], dtype=DataType.Half)
        i = fd.define_tensor(shape=[-1], dtype=DataType.Int)
        k = fd.define_tensor(shape=[-1], dtype=DataType.Int32)
        fd.add_output(fd.ops.index_select(x, i, 1))
        fd.add_output(fd.ops.index_select(x, k, 0))
        fd.add_output(fd.ops.index_select(x, i, -1))
    rng = _rng(16)
    x = rng.standard_normal((4, 9, 35)).astype(np.float16)
    check(fd, [x, rng.integers(0, 9, 13), rng.integers(0, 4, 3).astype(np.int32)])
    check(fd, [x, rng.integers(0, 9, 0), rng.integers(0, 4, 1).astype(np.int32)])


def test_gather_index_out_of_range_is_an_error():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        i = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
        fd.add_output(fd.ops.gather(x, i, 1))
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(IndexError, match="index 4 is out of range"):
        fd.execute([x, np.array([[0, 4]] * 3)], backend="cpu")


# ------------------------------------------------------------------------------------------------
# Factories: iota, full
# ------------------------------------------------------------------------------------------------


IOTA_FULL_NAMES = ["x + iota f32", "iota i64 5,-2", "iota i32", "iota f16", "iota f64", "full bf16",
                   "full bool", "full i32", "x * full f32"]


def iota_full_fusion():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1])
        n = x.size(0)
        fd.add_output(fd.ops.add(x, fd.ops.iota(n, 2, 3, DataType.Float)))
        fd.add_output(fd.ops.iota(n, 5, -2, DataType.Int))
        fd.add_output(fd.ops.iota(n, dtype=DataType.Int32))
        fd.add_output(fd.ops.iota(n, 0.5, 0.25, DataType.Half))
        fd.add_output(fd.ops.iota(n, 0.5, 0.25, DataType.Double))
        fd.add_output(fd.ops.full([n], 3.25, DataType.BFloat16))
        fd.add_output(fd.ops.full([n], True, DataType.Bool))
        fd.add_output(fd.ops.full([n], 7, DataType.Int32))
        fd.add_output(fd.ops.mul(x, fd.ops.full([n], -1.5, DataType.Float)))
    return fd


def test_iota_and_full():
    fd, names = iota_full_fusion(), IOTA_FULL_NAMES
    rng = _rng(17)
    for n in (133, 1, 0):
        check(fd, [rng.standard_normal(n).astype(np.float32)], names)


def test_factories_without_inputs():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.iota(10, 1, 1, DataType.Int))
        fd.add_output(fd.ops.full([3, 4], 2.0, DataType.Float))
    check(fd, [])


# ------------------------------------------------------------------------------------------------
# Layouts of inputs and outputs, scalars in and out, the grid-stride loop
# ------------------------------------------------------------------------------------------------


def test_layouts():
    """Inputs that are not C-contiguous (Fortran order, strided, reversed) and outputs with a
    required stride order. Regression: the cpu backend passed such arrays to the CPU runtime,
    which refused them ("the array must be C-contiguous")."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        e = fd.ops.exp(x)
        fd.add_output(e)
        fd.add_output(fd.ops.neg(x), stride_order=[0, 1])  # column-major required
    rng = _rng(18)
    a = rng.standard_normal((5, 14)).astype(np.float32)
    for view in (a, np.asfortranarray(a), a[:, ::2], a[::-1], a.T):
        check(fd, [view])
    _, neg = fd.execute([a], backend="cpu")
    assert neg.strides[0] < neg.strides[1], f"stride_order [0, 1] not honoured: strides {neg.strides}"


def test_broadcast_operands_hoisted_out_of_the_outer_loop():
    """A bias broadcast over rows and a RoPE-like table broadcast over batch and heads: the leading
    dims become a loop inside each thread (blockIdx.y splits it) and the broadcast operand's load
    is hoisted out of it. Shapes with and without an outer loop (inner extent below 128)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        b = fd.define_tensor(shape=[1, -1], dtype=DataType.Half)
        q = fd.define_tensor(shape=[-1, -1, -1, -1])  # [batch, heads, seq, dim]
        cos = fd.define_tensor(shape=[-1, -1])  # [seq, dim]
        fd.add_output(fd.ops.add(x, b))
        c = fd.ops.broadcast(cos, [True, True, False, False])
        fd.add_output(fd.ops.sub(fd.ops.mul(q, c), fd.ops.neg(c)))
    rng = _rng(21)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    for (rows, cols), (bt, h, sq, d) in [((300, 200), (2, 3, 16, 64)), ((7, 129), (1, 2, 3, 5)),
                                         ((3, 5), (2, 1, 1, 1)), ((0, 130), (2, 3, 0, 8))]:
        inputs = [f32(rows, cols), rng.standard_normal((1, cols)).astype(np.float16), f32(bt, h, sq, d), f32(sq, d)]
        (kernel,) = check(fd, inputs)
        if rows == 300:  # [300, 200] and [2, 3, 16, 64]: both groups loop over leading dims
            assert kernel.source.count("olin_step < outer;") == 2, kernel.source


def test_returned_inputs_scalars_and_duplicates():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        s = fd.define_scalar(dtype=DataType.Double)
        e = fd.ops.mul(x, s)
        fd.add_output(x)
        fd.add_output(e)
        fd.add_output(e)
        fd.add_output(x.size(1))
    x = _rng(19).standard_normal((4, 9)).astype(np.float32)
    check(fd, [x, 2.5])
    out = fd.execute([x, -1.5], backend="cpu")
    assert out[0] is not x and np.array_equal(out[0], x)


def test_grid_stride_loop():
    """More elements than the largest grid (65535 blocks x 128 threads, one element a step, the
    schedule forced so): threads loop. (The heuristic unrolls this kernel's loop 4 steps deep.)"""
    from fuser.lowering.schedulers.pointwise import PointwiseSchedule

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.add(x, 1.0))
    n = 65535 * 128 + 77
    x = np.arange(n, dtype=np.float32)
    fd.override_schedule(0, PointwiseSchedule(128, (0,)))
    (out,) = fd.execute([x], backend="cpu")
    (kernel,) = fd.last_kernels()
    assert kernel.grid[0] == 65535 and kernel.block[0] == 128
    assert_matches(out, x + 1, "x + 1")
    assert kernel.bytes_loaded == kernel.bytes_stored == 4 * n


# ------------------------------------------------------------------------------------------------
# The generated CUDA compiles for sm_90 (NVRTC, nvcc)
# ------------------------------------------------------------------------------------------------


def _representative_sources() -> dict[str, str]:
    """CUDA sources of fusions above, one per kernel shape and dtype family: every unary function
    in four float dtypes, integer binary ops, all casts, inner and outer reductions, pad/slice/cat,
    the gather family, iota/full, and an inner-persistent normalization (softmax) with a
    row-invariant load (weights kept in registers)."""
    rng = _rng(20)
    sources: dict[str, str] = {}

    def run(label, fd, inputs):
        fd.execute(inputs, backend="cpu")
        for k, kernel in enumerate(fd.last_kernels()):
            sources[f"{label}#{k}"] = kernel.source

    fd, _ = unary_float_fusion()
    run("unary", fd, [_floats(rng, (3, 5), npdt) for _, npdt in FLOATS])
    fd, _ = binary_fusion(DataType.Int32)
    run("binary-i32", fd, [np.ones((2, 3), np.int32), np.ones((1, 3), np.int32), 2])
    fd, _ = binary_fusion(DataType.BFloat16)
    run("binary-bf16", fd, [np.ones((2, 3), BF16), np.ones((1, 3), BF16), 2.0])
    fd, _ = reduction_fusion(DataType.Float, [2], 3)
    run("reduction-inner", fd, [_signed_unit(rng, (3, 5, 133))])
    fd, _ = reduction_fusion(DataType.Float, [0], 3)
    run("reduction-outer", fd, [_signed_unit(rng, (3, 5, 133))])
    run("resize", resize_fusion(), [rng.standard_normal((7, 37)).astype(np.float32)])
    run("take_along_axis", take_along_axis_fusion(), _take_along_axis_inputs(rng, 6, 40))
    run("iota+full", iota_full_fusion(), [rng.standard_normal(133).astype(np.float32)])
    with FusionDefinition() as fd:  # softmax times a bf16 weight (row-invariant, kept in registers)
        x = fd.define_tensor(shape=[-1, -1])
        w = fd.define_tensor(shape=[-1], dtype=DataType.BFloat16)
        m = fd.ops.max(x, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(x, m))
        sm = fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True))
        fd.add_output(fd.ops.mul(sm, fd.ops.broadcast(w, [True, False])))
    run("softmax*w", fd, [rng.standard_normal((4, 300)).astype(np.float32), rng.standard_normal(300).astype(BF16)])
    return sources


@pytest.fixture(scope="module")
def representative_sources():
    return _representative_sources()


@pytest.mark.parametrize("backend", ["nvrtc", "nvcc"])
def test_generated_cuda_compiles_for_sm90(backend, representative_sources, tmp_path, monkeypatch):
    kinds = {kind: sum(f"// scheduler: {kind}," in src for src in representative_sources.values())
             for kind in ("pointwise", "reduction", "inner_persistent")}
    assert all(kinds.values()), f"every scheduler kind is compiled: {kinds}"
    compile_for_sm90(representative_sources, backend, tmp_path, monkeypatch)


def test_every_generated_kernel_compiles_with_nvrtc(tmp_path, monkeypatch):
    """Every kernel the tests above ran on the cpu backend (when they ran in this process; run
    last in this file), compiled for sm_90 with NVRTC (~0.1-0.3 s a kernel)."""
    sources = generated_not_compiled("nvrtc")
    if not sources:
        pytest.skip("no kernels were generated in this process (run the whole file)")
    compile_for_sm90(sources, "nvrtc", tmp_path, monkeypatch)
