"""nvFuser's rules where fuser's frontend takes nvFuser's names (issue 36, nvFuser's OpInfo
database run against fuser): lower-rank operands broadcast on the left; every definition and
argument error is a RuntimeError (and still the ValueError/TypeError it was) naming the op and
the value, never an xDSL exception; the inputs nvFuser refuses are refused, not read as
something else; the cat of one tensor; integer pow with negative exponents as torch; expand of
an extent-1 dim. Values are checked against numpy or torch on the reference backend and on every
kernel backend under test."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from fuser_dialect.errors import FuserError, FuserValueError, raise_user_error, reports_errors
from lowering_checks import backends_under_test
from xdsl.utils.exceptions import DiagnosticException, VerifyException

BACKENDS = ["reference", *backends_under_test()]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _define(build) -> FusionDefinition:
    with FusionDefinition() as fd:
        build(fd)
    return fd


def _refused(build, error: type[BaseException], match: str) -> BaseException:
    """The error defining `build` raises: `error`, a RuntimeError (nvFuser's kind), never xDSL's."""
    with pytest.raises(error, match=match) as info:
        _define(build)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, FuserError)
    assert not isinstance(info.value, DiagnosticException)
    return info.value


# -- 1. lower-rank operands broadcast on the left (numpy's rule) ---------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_binary_ops_broadcast_a_lower_rank_operand_on_the_left(backend):
    a, b = _rng(0).standard_normal((2, 1)).astype(np.float32), _rng(1).standard_normal(2).astype(np.float32)
    c = _rng(2).standard_normal((3, 4, 2)).astype(np.float32)

    # Trailing dims are aligned, as numpy aligns them: [2, 1] against [3, 4, 2] puts 2 against 4.
    _refused(lambda fd: fd.ops.maximum(fd.define_tensor([2, 1]), fd.define_tensor([3, 4, 2])), ValueError,
             r"fuser.binary maximum: dim 1 has extents 2 and 4, which neither match nor broadcast")

    def build(fd):
        ta, tb, tc = fd.define_tensor([-1, 1]), fd.define_tensor([-1]), fd.define_tensor([-1, -1, -1])
        fd.add_output(fd.ops.add(ta, tb))
        fd.add_output(fd.ops.mul(tb, ta))
        fd.add_output(fd.ops.sub(tc, tb))
        fd.add_output(fd.ops.lt(tb, tc))
        fd.add_output(fd.ops.pow(fd.ops.abs(tb), tc))

    fd = _define(build)
    text = str(fd)
    assert "fuser.broadcast" in text  # the IR stays explicit: the broadcast is an op
    got = fd.execute([a, b, c], backend=backend)
    want = [a + b, b * a, c - b, b < c, np.abs(b) ** c]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6)
        assert np.asarray(g).shape == w.shape


@pytest.mark.parametrize("backend", BACKENDS)
def test_where_and_ternaries_broadcast_lower_rank_operands_on_the_left(backend):
    rng = _rng(3)
    cond = rng.standard_normal(5) > 0
    x, y = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((2, 3, 1)).astype(np.float32)
    w = rng.random(5).astype(np.float32)

    def build(fd):
        tcond, tx = fd.define_tensor([-1], dtype=DataType.Bool), fd.define_tensor([-1, -1])
        ty, tw = fd.define_tensor([-1, -1, 1]), fd.define_tensor([-1])
        fd.add_output(fd.ops.where(tcond, tx, ty))      # [5], [3, 5], [2, 3, 1] -> [2, 3, 5]
        fd.add_output(fd.ops.where(tcond, 1.0, tx))     # a scalar branch
        fd.add_output(fd.ops.lerp(tw, tx, 0.25))        # [5] start, [3, 5] end
        fd.add_output(fd.ops.lerp(tx, ty, tw))          # a lower-rank weight
        fd.add_output(fd.ops.addcmul(tw, tx, ty, 0.5))  # all three ranks
        fd.add_output(fd.ops.clamp(tx, tw, 0.5))        # a lower-rank bound

    got = _define(build).execute([cond, x, y, w], backend=backend)
    tx, ty, tw = (torch.from_numpy(v) for v in (x, y, w))
    want = [np.where(cond, x, y), np.where(cond, 1.0, x).astype(np.float32), torch.lerp(tw, tx, 0.25).numpy(),
            torch.lerp(tx, ty, tw).numpy(), torch.addcmul(tw, tx, ty, value=0.5).numpy(),
            torch.clamp(tx, tw, torch.tensor(0.5)).numpy()]
    for g, e in zip(got, want):
        assert np.asarray(g).shape == e.shape
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-6)


# -- 2. errors are RuntimeErrors naming the op and the value; no xDSL exception --------------------


def test_a_complex_iota_start_or_step_is_a_runtime_error_naming_it():
    _refused(lambda fd: fd.add_output(fd.ops.iota(5, complex(1, 2), 1.0, DataType.Float)), TypeError,
             r"iota: start = \(1\+2j\) does not match dtype Float")
    _refused(lambda fd: fd.add_output(fd.ops.iota(5, fd.define_scalar(complex(1, 2)), 1.0, DataType.Float)),
             TypeError, r"iota: start is a c128 Scalar, which does not match dtype Float")
    _refused(lambda fd: fd.add_output(fd.ops.iota(5, 0.0, fd.define_scalar(dtype=DataType.ComplexFloat),
                                                  DataType.Double)),
             TypeError, r"iota: step is a c64 Scalar")
    _refused(lambda fd: fd.add_output(fd.ops.iota(fd.define_scalar(complex(3, 0)), 0, 1, DataType.Int)),
             TypeError, r"iota: length must be an integer, got a c128 Scalar")
    _refused(lambda fd: fd.add_output(fd.ops.iota(5, 0.5, 1, DataType.Int)), TypeError,
             r"iota: start = 0.5 is a float, which does not match dtype Int")


def test_a_complex_pad_value_on_a_real_tensor_is_a_runtime_error_naming_it():
    _refused(lambda fd: fd.add_output(fd.ops.pad(fd.define_tensor([-1]), [1, 1], complex(1, 2))), TypeError,
             r"pad: the pad value \(1\+2j\) is complex but the tensor f32\[\?\] is not")
    _refused(lambda fd: fd.add_output(fd.ops.pad(fd.define_tensor([-1]), [1, 1], fd.define_scalar(1j))), TypeError,
             r"pad: the pad value Scalar\(c128\) is complex")


@pytest.mark.parametrize("build, error, match", [
    (lambda fd: fd.ops.broadcast(fd.define_tensor([2, 3]), [True, False]), ValueError, r"is_broadcast_dim"),
    (lambda fd: fd.ops.cat([fd.define_tensor([-1]), fd.define_tensor([-1, -1])], 0), ValueError, r"rank"),
    (lambda fd: fd.ops.cat([fd.define_tensor([-1]), fd.define_tensor([-1])], 1), ValueError, r"dim 1 is out of range"),
    (lambda fd: fd.ops.permute(fd.define_tensor([-1, -1]), [0, 0]), ValueError, r"permute"),
    (lambda fd: fd.ops.sum(fd.define_tensor([-1, -1]), [2]), ValueError, r"dim 2 is out of range"),
    (lambda fd: fd.ops.reshape(fd.define_tensor([2, 3]), [-1, -1]), ValueError, r"at most one -1"),
    (lambda fd: fd.ops.squeeze(fd.define_tensor([-1, 1]), [0]), ValueError, r"cannot squeeze dim 0"),
    (lambda fd: fd.ops.uniform(0.0, 1.0, [2], dtype=DataType.Int), ValueError, r"floating point"),
    (lambda fd: fd.ops.add(fd.define_tensor([-1]), "x"), TypeError, r"add"),
    (lambda fd: fd.define_tensor([10.0]), TypeError, r"define_tensor: shape\[0\] = 10.0: expected an int"),
    (lambda fd: fd.define_tensor([2**63]), TypeError, r"does not fit in 64 bits"),  # and a ValueError
    (lambda fd: fd.define_tensor([-1, -1], contiguity=[True, True, True]), ValueError, r"3 entries for 2 dims"),
    (lambda fd: fd.ops.take_along_axis(fd.define_tensor([4, 2]), fd.define_tensor([3, 1], dtype=DataType.Int), 2),
     ValueError, r"dim 2 is out of range"),
], ids=["broadcast", "cat-rank", "cat-dim", "permute", "sum-dim", "reshape", "squeeze", "uniform-int",
        "add-str", "shape-float", "shape-int64", "contiguity", "take_along_axis"])
def test_definition_errors_are_runtime_errors_and_keep_their_kind(build, error, match):
    _refused(build, error, match)


def test_a_verifier_error_leaves_as_a_fuser_value_error_naming_the_op():
    """What a verifier finds (an op the builder let through) is fuser's ValueError, a RuntimeError
    with the verifier's message, not xDSL's VerifyException."""
    class Probe:
        def op(self):
            raise VerifyException("fuser.iota: start must be a scalar, got !fuser.tensor<c128>")

    probe = Probe()
    with pytest.raises(FuserValueError, match=r"^fuser.iota: start must be a scalar") as info:
        reports_errors(Probe.op, "iota")(probe)
    assert not isinstance(info.value, DiagnosticException) and isinstance(info.value, RuntimeError)
    with pytest.raises(FuserError, match=r"^pad: KeyError: 'x'"):  # another kind: said as what it is
        try:
            {}["x"]
        except KeyError as e:
            raise_user_error(e, "pad")


@pytest.mark.parametrize("backend", BACKENDS)
def test_execute_errors_are_runtime_errors_and_keep_their_kind(backend):
    fd = _define(lambda fd: fd.add_output(fd.ops.add(fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1]))))
    x = np.ones((2, 3), np.float32)
    for inputs, error, match in (([x], ValueError, r"2 inputs"), ([x, x.astype(np.float64)], TypeError, r"dtype"),
                                 ([x, np.ones((4, 3), np.float32)], ValueError, r"dim 0 has extents 2 and 4"),
                                 (x, TypeError, r"execute takes a list of inputs")):
        with pytest.raises(error, match=match) as info:
            fd.execute(inputs, backend=backend)
        assert isinstance(info.value, RuntimeError) and not isinstance(info.value, DiagnosticException)


# -- 3. what nvFuser refuses is refused -----------------------------------------------------------


def test_negative_extents_of_full_define_vector_and_reshape_are_refused():
    _refused(lambda fd: fd.add_output(fd.ops.full([2, -2], 1.0, DataType.Float)), ValueError,
             r"full: shape\[1\] = -2 is not an extent")
    _refused(lambda fd: fd.add_output(fd.ops.full([-1], 1.0, DataType.Float)), ValueError,
             r"full: shape\[0\] = -1 is not an extent")
    _refused(lambda fd: fd.define_vector([2, -2]), ValueError, r"define_vector: values\[1\] = -2 is neither -1")
    _refused(lambda fd: fd.add_output(fd.ops.reshape(fd.define_tensor([-1]), [2, -2])), ValueError,
             r"reshape: new_shape\[1\] = -2 is not an extent")
    _refused(lambda fd: fd.add_output(fd.ops.iota(-1)), ValueError, r"iota: length -1 is negative")
    # -1 stays reshape's inferred extent, in a vector too
    fd = _define(lambda fd: fd.add_output(fd.ops.reshape(fd.define_tensor([-1]), fd.define_vector([2, -1]))))
    assert fd.execute([np.arange(6, dtype=np.float32)], backend="reference")[0].shape == (2, 3)


@pytest.mark.parametrize("start, end, strides, match", [
    ([-1, -2], [5, 5], [7, 7], r"slice: dim 0 of f32\[\?, \?\] starts at -1; start_indices must be >= 0"),
    ([3, 4], [1, 2], [1, 1], r"slice: dim 0 of f32\[\?, \?\] ends at 1, before its start 3"),
    ([0, 0], [5, 5], [5, 5], r"slice: dim 0 of f32\[\?, \?\] has stride 5; strides must be 1"),
    ([0, 0], [-1, 5], None, r"ends at -1, before its start 0"),
])
def test_slices_nvfuser_refuses_are_refused_and_python_slicing_takes_them(start, end, strides, match):
    _refused(lambda fd: fd.add_output(fd.ops.slice(fd.define_tensor([-1, -1]), start, end, strides)), ValueError, match)
    x = np.arange(100, dtype=np.float32).reshape(10, 10)
    fd = _define(lambda fd: fd.add_output(fd.ops.slice(fd.define_tensor([-1, -1]), start, end, strides,
                                                       python_slicing=True)))
    steps = strides or [1, 1]
    want = x[start[0]:end[0]:steps[0], start[1]:end[1]:steps[1]]
    for backend in BACKENDS:
        np.testing.assert_array_equal(np.asarray(fd.execute([x], backend=backend)[0]), want)


def test_slice_bounds_given_as_scalars_are_not_refused_at_definition():
    """nvFuser checks constant bounds only; run-time ones are normalized as torch does."""
    def build(fd):
        t, s = fd.define_tensor([-1]), fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.slice(t, [s], [t.size(0)]))

    x = np.arange(6, dtype=np.float32)
    assert _define(build).execute([x, -2], backend="reference")[0].tolist() == [4.0, 5.0]


def test_a_non_bool_where_condition_is_refused():
    _refused(lambda fd: fd.add_output(fd.ops.where(fd.define_tensor([-1]), fd.define_tensor([-1]), 0.0)), TypeError,
             r"where: the condition must be of DataType Bool, got f32\[\?\]")
    _refused(lambda fd: fd.add_output(fd.ops.where(fd.define_scalar(1.0), fd.define_tensor([-1]), 0.0)), TypeError,
             r"where: the condition must be of DataType Bool, got a f64 Scalar")
    _refused(lambda fd: fd.add_output(fd.ops.where(1, fd.define_tensor([-1]), 0.0)), TypeError,
             r"where: the condition must be a Bool tensor, Scalar or bool, got 1")


@pytest.mark.parametrize("start, step, dtype, error, match", [
    (0, 0, DataType.Int, ValueError, r"iota: step = 0: the step must not be zero"),
    (1.0, 0.0, DataType.Float, ValueError, r"iota: step = 0.0: the step must not be zero"),
    (1.0, -0.0, DataType.Double, ValueError, r"the step must not be zero"),
    (math.inf, 1.0, DataType.Float, ValueError, r"iota: start = inf: start and step must be finite"),
    (0.0, math.nan, DataType.Double, ValueError, r"iota: step = nan: start and step must be finite"),
    (0.0, -math.inf, DataType.Float, ValueError, r"step = -inf"),
])
def test_iota_steps_of_zero_and_non_finite_starts_or_steps_are_refused(start, step, dtype, error, match):
    _refused(lambda fd: fd.add_output(fd.ops.iota(10, start, step, dtype)), error, match)
    # as constant Scalars too (nvFuser's OpInfo defines them so)
    _refused(lambda fd: fd.add_output(fd.ops.iota(10, fd.define_scalar(start), fd.define_scalar(step), dtype)),
             error, match.replace(" = ", ".*").replace("iota: ", "iota: "))


@pytest.mark.parametrize("backend", BACKENDS)
def test_iota_with_legal_starts_and_steps_matches_torch(backend):
    def build(fd):
        fd.add_output(fd.ops.iota(7, 3, -2, DataType.Int))
        fd.add_output(fd.ops.iota(5, 0.5, 0.25, DataType.Float))
        fd.add_output(fd.ops.iota(4, 2, 3, DataType.Double))  # integer start and step of a float iota: exact

    got = _define(build).execute([], backend=backend)
    want = [torch.arange(3, 3 - 2 * 7, -2), torch.arange(5, dtype=torch.float32) * 0.25 + 0.5,
            torch.arange(2, 14, 3, dtype=torch.float64)]
    for g, w in zip(got, want):
        torch.testing.assert_close(torch.as_tensor(g), w)


def test_pad_values_of_another_kind_of_dtype_are_refused():
    _refused(lambda fd: fd.add_output(fd.ops.pad(fd.define_tensor([-1], dtype=DataType.ComplexFloat), [1, 1], 2.5)),
             TypeError, r"pad: the pad value 2.5 \(float\) is a real floating-point number but the tensor c64\[\?\] "
                        r"is complex")
    _refused(lambda fd: fd.add_output(fd.ops.pad(fd.define_tensor([-1], dtype=DataType.ComplexDouble), [1, 1],
                                                 fd.define_scalar(2.5))),
             TypeError, r"pad: the pad value Scalar\(f64\) \(f64\) is a real floating-point number")


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_tensors_pad_with_complex_values(backend):
    rng = _rng(4)
    x = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))).astype(np.complex64)

    def build(fd):
        t = fd.define_tensor([-1, -1], dtype=DataType.ComplexFloat)
        s = fd.define_scalar(dtype=DataType.ComplexDouble)
        fd.add_output(fd.ops.pad(t, [1, 2, 0, 1], complex(1, 2)))
        fd.add_output(fd.ops.pad(t, [-1, 2], s))
        fd.add_output(fd.ops.pad(t, [1, 1], complex(3, 0)))
        fd.add_output(fd.ops.pad(t, [1, 1]))
        fd.add_output(fd.ops.pad(t, [1, 1], 2))  # an integer fill is exact: taken

    got = _define(build).execute([x, 2 - 1j], backend=backend)
    want = [np.pad(x, ((0, 1), (1, 2)), constant_values=1 + 2j), np.pad(x[:, 1:], ((0, 0), (0, 2)), constant_values=2 - 1j),
            np.pad(x, ((0, 0), (1, 1)), constant_values=3), np.pad(x, ((0, 0), (1, 1))),
            np.pad(x, ((0, 0), (1, 1)), constant_values=2)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)
        assert np.asarray(g).dtype == np.complex64


# -- 4. cat of one tensor --------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_cat_of_one_tensor_is_a_copy_of_it(backend):
    x, y = _rng(5).standard_normal(7).astype(np.float32), _rng(6).standard_normal((3, 16)).astype(np.float32)

    def build(fd):
        a, b = fd.define_tensor([-1]), fd.define_tensor([-1, 16])
        fd.add_output(fd.ops.cat([a], 0))
        fd.add_output(fd.ops.cat([b], -1))
        fd.add_output(fd.ops.exp(fd.ops.cat([b], 0)))

    got = _define(build).execute([x, y], backend=backend)
    want = [torch.cat([torch.from_numpy(x)]), torch.cat([torch.from_numpy(y)], -1), torch.cat([torch.from_numpy(y)]).exp()]
    for g, w in zip(got, want):
        torch.testing.assert_close(torch.as_tensor(np.asarray(g)), w)
    _refused(lambda fd: fd.ops.cat([fd.define_tensor([-1])], 1), ValueError, r"dim 1 is out of range")


CAT_OF_ONE = """builtin.module {
  func.func @fusion(%0: !fuser.tensor<?x16xf32>) -> !fuser.tensor<?x16xf32> {
    %1 = fuser.cat %0 dim DIM : (!fuser.tensor<?x16xf32>) -> !fuser.tensor<?x16xf32>
    func.return %1 : !fuser.tensor<?x16xf32>
  }
}"""


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "reference"])
@pytest.mark.parametrize("dim", [0, 1])
def test_a_fuser_cat_of_one_input_in_the_ir_compiles_and_runs(backend, dim):
    """The IR's own one-input cat (fuser-opt -t cuda emits the same source): the kernel compiles."""
    fd = FusionDefinition.from_ir(CAT_OF_ONE.replace("DIM", str(dim)))
    x = _rng(7).standard_normal((5, 16)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(fd.execute([x], backend=backend)[0]), x)


# -- 5. integer pow with negative exponents: torch's values on every backend -----------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=["i64", "i32"])
def test_integer_pow_with_negative_exponents_matches_torch(backend, dtype):
    base = torch.arange(-3, 4, dtype=dtype).repeat(7)
    exponent = torch.arange(-3, 4, dtype=dtype).repeat_interleave(7)
    fuser_dtype = DataType.Int if dtype == torch.int64 else DataType.Int32

    def build(fd):
        b, e = fd.define_tensor([-1], dtype=fuser_dtype), fd.define_tensor([-1], dtype=fuser_dtype)
        fd.add_output(fd.ops.pow(b, e))
        fd.add_output(fd.ops.pow(b, -3))
        fd.add_output(fd.ops.pow(-1, e))
        fd.add_output(b ** e)

    got = _define(build).execute([base, exponent], backend=backend)
    want = [torch.pow(base, exponent), torch.pow(base, torch.tensor(-3, dtype=dtype)),
            torch.pow(torch.tensor(-1, dtype=dtype), exponent), base ** exponent]
    for g, w in zip(got, want):
        assert torch.equal(torch.as_tensor(g), w), (g, w)


# -- 6. expand of an extent-1 dim --------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_extent_one_dim_expands_as_in_torch(backend):
    """Funnel's relative attention: x[..., :1].expand(2, 4, 3, 3) * 2; a slice [0:1] of a static
    dim gives a static extent 1 (not a broadcast dim), which torch and nvFuser expand."""
    x = torch.from_numpy(_rng(8).standard_normal((2, 4, 3, 5)).astype(np.float32))

    def build(fd):
        t = fd.define_tensor([2, 4, 3, 5])
        d = fd.define_tensor([-1, -1, -1, -1])
        first = fd.ops.slice(t, [0, 0, 0, 0], [2, 4, 3, 1])
        fd.add_output(fd.ops.mul(fd.ops.expand(first, [2, 4, 3, 3]), 2.0))
        dyn = fd.ops.slice(d, [0, 0, 0, 0], [d.size(0), d.size(1), d.size(2), 1])
        fd.add_output(fd.ops.expand(dyn, [d.size(0), d.size(1), d.size(2), 3]))
        row = fd.ops.reshape(fd.ops.slice(t, [0, 0, 0, 0], [1, 1, 1, 5]), [5, 1])  # [5, 1]: a static 1
        fd.add_output(fd.ops.broadcast_in_dim(row, [3, 5, 4], [1, 2]))

    got = _define(build).execute([x, x], backend=backend)
    want = [x[..., :1].expand(2, 4, 3, 3) * 2, x[..., :1].expand(2, 4, 3, 3),
            x[0, 0, 0].reshape(5, 1).expand(3, 5, 4)]
    for g, w in zip(got, want):
        torch.testing.assert_close(torch.as_tensor(g), w)


def test_a_non_unit_static_extent_still_does_not_expand():
    _refused(lambda fd: fd.add_output(fd.ops.expand(fd.define_tensor([2, 3]), [2, 4])), ValueError,
             r"fuser.expand: dim 1 has extent 3 and is not a broadcast dim, so it cannot expand to 4")


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_funnel_relative_attention_expand_compiles_with_fuser(dynamic):
    from torch_checks import compare_with_eager

    def f(x):
        return x[..., :1].expand(2, 4, 3, 3) * 2

    torch._dynamo.reset()
    try:
        reports = compare_with_eager(f, torch.randn(2, 4, 3, 5, requires_grad=True), dynamic=dynamic)
    finally:
        torch._dynamo.reset()
    fused = {op for report in reports for region in report.fusions for op in region.ops}
    assert "aten.expand.default" in fused and "aten.mul.Tensor" in fused


def test_torch_slices_keep_torchs_rules_under_torch_compile():
    """torch.compile's slices are torch's (an empty x[5:2] among them): the translation takes
    python_slicing, so nvFuser's refusals never refuse a region."""
    from torch_checks import compare_with_eager

    def f(x):
        return x[5:2] * 2, x[:, 3:] + 1, x.narrow(1, 2, 0) * 3

    torch._dynamo.reset()
    try:
        reports = compare_with_eager(f, torch.randn(8, 6), backward=False)
    finally:
        torch._dynamo.reset()
    assert any(region.ops for report in reports for region in report.fusions)
