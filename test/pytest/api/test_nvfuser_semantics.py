"""Where fuser must mean what nvFuser means, each against torch or nvFuser's documented behaviour,
on the "reference" and "cpu" backends: add_output(out, alias_input) positionally and an aliased
input returned updated; DataType.Null as a reduction dtype; the promotion of scalars and 0-d
tensors; 16-bit uniform below its rounded upper bound; seeded normal bit-identical between the
backends and unseeded random ops on the (seed, offset) progression; define_vector(n) as n scalar
inputs; factory fusions returning torch tensors. (Found as issue 22's "frontend fidelity"
defects.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fuser import DataType, FusionDefinition
from fuser_dialect import philox

BACKENDS = ["reference", "cpu"]


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.view({8: torch.int64, 4: torch.int32, 2: torch.int16}[t.element_size()]).numpy()


# --- 1. add_output(output, alias_input) positionally -------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_add_output_second_positional_argument_is_alias_input(backend):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.relu(t0), t0)  # nvFuser: add_output(output, alias_input=None)
    x = torch.tensor([[-1.0, 2.0], [3.0, -4.0]])
    assert fd.execute([x], backend=backend) == []
    torch.testing.assert_close(x, torch.tensor([[0.0, 2.0], [3.0, 0.0]]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_add_output_stride_order_positional_or_keyword(backend):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.neg(t0), [0, 1])  # nvFuser's other overload: add_output(output, stride_order)
        fd.add_output(fd.ops.abs(t0), stride_order=[0, 1])
    x = torch.randn(2, 3)
    neg, absolute = fd.execute([x], backend=backend)
    assert neg.stride() == absolute.stride() == (1, 2)
    torch.testing.assert_close(neg, -x)
    torch.testing.assert_close(absolute, x.abs())


def test_add_output_rejects_a_stride_order_given_twice():
    with pytest.raises(TypeError, match="stride order twice"):
        with FusionDefinition() as fd:
            t0 = fd.define_tensor(shape=[-1, -1])
            fd.add_output(fd.ops.neg(t0), [0, 1], stride_order=[0, 1])


# --- 2. an aliased input that is also returned comes back updated --------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_aliased_input_returned_is_the_updated_input(backend, kind):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.relu(t0), alias_input=t0)
        fd.add_output(t0)
        fd.add_output(fd.ops.neg(t0))  # computed before the write: from the old values
    x = torch.tensor([[-1.0, 2.0]])
    x = x if kind == "torch" else x.numpy()
    returned, negated = fd.execute([x], backend=backend)
    np.testing.assert_array_equal(np.asarray(x), [[0.0, 2.0]])
    np.testing.assert_array_equal(np.asarray(returned), [[0.0, 2.0]])
    np.testing.assert_array_equal(np.asarray(negated), [[1.0, -2.0]])


# --- 3. DataType.Null as a reduction dtype keeps the input dtype ---------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_null_reduction_dtype_keeps_the_input_dtype(backend):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.Half)
        fd.add_output(fd.ops.sum(t, dims=[1], dtype=DataType.Null))
        fd.add_output(fd.ops.max(t, dims=[0], keepdim=True, dtype=DataType.Null))
    x = torch.randn(4, 6).half()
    total, largest = fd.execute([x], backend=backend)
    assert total.dtype == largest.dtype == torch.float16
    torch.testing.assert_close(total, x.sum(1), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(largest, x.amax(0, keepdim=True))


# --- 4. one promotion rule: a scalar never raises a tensor's category width ----------------------


PROMOTIONS = [
    # (tensor dtype, build(fd, t) -> result, torch reference(x) -> tensor)
    (torch.int32, lambda fd, t: fd.ops.mul(t, fd.define_scalar(2.0)), lambda x: x * 2.0),
    (torch.bool, lambda fd, t: fd.ops.add(t, fd.define_scalar(0.5)), lambda x: x + 0.5),
    (torch.bool, lambda fd, t: fd.ops.add(t, 0.5), lambda x: x + 0.5),
    (torch.int64, lambda fd, t: fd.ops.mul(t, fd.define_scalar(3.0, DataType.Float)), lambda x: x * 3.0),
    (torch.float16, lambda fd, t: fd.ops.mul(t, fd.define_scalar(3.0)), lambda x: x * 3.0),
    (torch.int32, lambda fd, t: fd.ops.add(t, fd.define_scalar(7)), lambda x: x + 7),
    (torch.bool, lambda fd, t: fd.ops.where(t, fd.define_scalar(3.0, DataType.Float),
                                           fd.define_scalar(5.0, DataType.Float)),
     lambda x: torch.where(x, torch.tensor(3.0), torch.tensor(5.0))),
    # Python floats are Double Scalars (nvFuser's frontend makes them so): a Double tensor
    (torch.bool, lambda fd, t: fd.ops.where(t, 3.0, 5.0), lambda x: torch.where(x, 3.0, 5.0).double()),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,build,reference", PROMOTIONS, ids=range(len(PROMOTIONS)))
def test_scalar_does_not_widen_a_tensor(backend, dtype, build, reference):
    x = torch.tensor([1, 0, 1, 1]).to(dtype)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(build(fd, t))
    (got,) = fd.execute([x], backend=backend)
    want = reference(x)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_dim_tensor_promotes_as_in_torch(backend):
    """A 0-d tensor brings its dtype only from a higher category (torch.result_type)."""
    x, half = torch.arange(4), torch.randn(4).half()
    scale, small = torch.tensor(1.5, dtype=torch.float64), torch.tensor(2.0)
    with FusionDefinition() as fd:
        tx, th = fd.from_pytorch(x), fd.from_pytorch(half)
        ts, tf = fd.from_pytorch(scale), fd.from_pytorch(small)
        fd.add_output(fd.ops.mul(tx, ts))  # i64 * f64 0-d: f64
        fd.add_output(fd.ops.mul(th, tf))  # f16 * f32 0-d: f16
    lifted, kept = fd.execute([x, half, scale, small], backend=backend)
    assert (lifted.dtype, kept.dtype) == (torch.float64, torch.float16)
    torch.testing.assert_close(lifted, x * scale)
    torch.testing.assert_close(kept, half * small)



WHERE_DTYPES = [
    # nvFuser's test_where_dtypes: (x, y, define_scalar's dtype, result); with no dtype the
    # Scalar's is the value's (Double, Int, ComplexDouble), and a Python number is that Scalar
    (3.0, 5.0, None, torch.float64),
    (3.0, 5.0, DataType.Float, torch.float32),
    (3.0, 5.0, DataType.Double, torch.float64),
    (3, 5, DataType.Int32, torch.int32),
    (3, 5, None, torch.int64),
    (complex(3.0), complex(5.0), None, torch.complex128),
    (3.0 + 0j, 5.0 + 0j, DataType.ComplexFloat, torch.complex64),
    (3.0 + 0j, 5.0 + 0j, DataType.ComplexDouble, torch.complex128),
    (True, False, DataType.Bool, torch.bool),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("x,y,dtype,want", WHERE_DTYPES, ids=lambda v: str(v))
def test_where_of_two_scalars_has_nvfusers_dtype(backend, x, y, dtype, want):
    cond = torch.tensor([True, False])
    with FusionDefinition() as fd:
        c = fd.from_pytorch(cond)
        fd.add_output(fd.ops.where(c, fd.define_scalar(x, dtype), fd.define_scalar(y, dtype)))
        if dtype is None:
            fd.add_output(fd.ops.where(c, x, y))
    for got in fd.execute([cond], backend=backend):
        assert got.dtype == want
        assert got.tolist() == [x, y]


SCALAR_OPERANDS = {
    # every op that takes a scalar operand: build(fd, t, c, s) with a tensor t, a bool tensor c
    "add": lambda fd, t, c, s: fd.ops.add(t, s),
    "sub, scalar first": lambda fd, t, c, s: fd.ops.sub(s, t),
    "where, tensor and scalar": lambda fd, t, c, s: fd.ops.where(c, t, s),
    "where, two scalars": lambda fd, t, c, s: fd.ops.where(c, s, s),
    "clamp": lambda fd, t, c, s: fd.ops.clamp(t, s, None),
    "lerp": lambda fd, t, c, s: fd.ops.lerp(t, fd.ops.abs(t), s),
    "pad": lambda fd, t, c, s: fd.ops.pad(t, [1, 1], s),
    "full": lambda fd, t, c, s: fd.ops.full([3], s, t.dtype),
}


def _with_scalar(build, dtype: torch.dtype, spell):
    """(dtype, values) of build's result, or the exception type it raised."""
    x, cond = torch.tensor([-2, 0, 3]).to(dtype), torch.tensor([True, False, True])
    try:
        with FusionDefinition() as fd:
            fd.add_output(build(fd, fd.from_pytorch(x), fd.from_pytorch(cond), spell(fd)))
        (got,) = fd.execute([x, cond], backend="reference")
    except (TypeError, ValueError) as e:
        return type(e)
    return got.dtype, got.tolist()


@pytest.mark.parametrize("op", SCALAR_OPERANDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.bool], ids=str)
@pytest.mark.parametrize("value", [True, 3, -1.75, 2.5], ids=repr)
def test_a_python_number_is_the_scalar_define_scalar_makes(op, dtype, value):
    """nvFuser's frontend turns a Python number operand into define_scalar(number): the same dtype
    and values in every op that takes a scalar (the builder decides both, so one backend serves)."""
    build = SCALAR_OPERANDS[op]
    raw = _with_scalar(build, dtype, lambda fd: value)
    assert raw == _with_scalar(build, dtype, lambda fd: fd.define_scalar(value))


# --- 5. uniform in f16/bf16 stays below its upper bound after rounding ---------------------------


@pytest.mark.parametrize("dtype,low,high", [(DataType.Half, 0.0, 1.0), (DataType.BFloat16, -1.5, 3.7),
                                            (DataType.Float, -1.5, 3.7)])
def test_uniform_is_below_high_after_rounding(dtype, low, high):
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.uniform(low, high, [2**20], rng_seed=0, rng_offset=0, dtype=dtype))
    ref, cpu = (fd.execute([], backend=b)[0] for b in BACKENDS)
    np.testing.assert_array_equal(_bits(ref), _bits(cpu))
    values = ref.double()
    assert values.min() >= torch.tensor(low, dtype=ref.dtype).double() and values.max() < high
    assert values.max() > high - 0.05  # the top of the range is still reached



@pytest.mark.parametrize("dtype,low,high", [(DataType.Half, -1.5, 3.7), (DataType.BFloat16, -1.5, 3.7),
                                            (DataType.Half, 0.0, 1.0), (DataType.Float, -1.5, 3.7)],
                         ids=lambda v: str(v))
def test_uniform_is_at_most_the_value_below_rounded_high(dtype, low, high):
    """nvFuser's test_uniform_range: every sample is >= low rounded to the dtype and <= the
    largest value of the dtype below high rounded to it (f16 in [-1.5, 3.7): 3.697265625, never
    half(3.7) = 3.69921875), bit-identical on both backends; 16-bit samples reach both ends."""
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.uniform(fd.define_scalar(low), fd.define_scalar(high), [2**20], rng_seed=1,
                                     rng_offset=0, dtype=dtype))
    ref, cpu = (fd.execute([], backend=b)[0] for b in BACKENDS)
    np.testing.assert_array_equal(_bits(ref), _bits(cpu))
    lowest = torch.tensor(low, dtype=ref.dtype)
    top = torch.nextafter(torch.tensor(high, dtype=ref.dtype), lowest)
    assert ref.min() >= lowest and ref.max() <= top
    if ref.element_size() == 2:
        assert ref.min() == lowest and ref.max() == top


# --- 6. seeded normal values are bit-identical; unseeded ops follow the (seed, offset) progression -


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16],
                         ids=lambda d: d.name)
def test_seeded_normal_bit_identical_between_reference_and_cpu(dtype):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        s = fd.define_scalar(DataType.Int)
        fd.add_output(fd.ops.normal(0.5, 2.0, x.shape(), rng_seed=s, rng_offset=3, dtype=dtype))
        fd.add_output(fd.ops.randn_like(x, rng_seed=s, rng_offset=4))
    inputs = [torch.zeros(64, 64), 7]
    ref, cpu = (fd.execute(inputs, backend=b) for b in BACKENDS)
    for r, c in zip(ref, cpu):
        np.testing.assert_array_equal(_bits(r), _bits(c))
    z = ref[1].double()
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05


def test_box_muller_log_and_cos_are_accurate():
    x = np.linspace(2.0**-53, 1.0, 100_001)
    np.testing.assert_allclose(philox.log_unit(x), np.log(x), rtol=1e-15, atol=1e-300)
    u = np.arange(100_000) / 100_000
    np.testing.assert_allclose(philox.cos_two_pi(u), np.cos(2 * np.pi * u), rtol=0, atol=1e-15)


def _two_unseeded():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.rand_like(x))
        fd.add_output(fd.ops.randn_like(x))
    return fd


def _seeded_pair(seed: int, first: int):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.rand_like(x, rng_seed=seed, rng_offset=first))
        fd.add_output(fd.ops.randn_like(x, rng_seed=seed, rng_offset=first + 1))
    return fd


@pytest.mark.parametrize("backend", BACKENDS)
def test_unseeded_ops_use_the_torch_seed_and_consecutive_offsets(backend):
    """Per execution one seed (torch's) and a first offset; op k uses first + k (nvFuser)."""
    x = torch.zeros(300)
    torch.manual_seed(11)
    got = _two_unseeded().execute([x], backend=backend)
    torch.manual_seed(11)
    first = int(torch.randint(0, 2**62, (1,), dtype=torch.int64))
    want = _seeded_pair(torch.initial_seed(), first).execute([x], backend=backend)  # the seed is 11
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_bits(g), _bits(w))


def test_unseeded_offsets_advance_per_execution_with_fusers_own_generator(monkeypatch):
    monkeypatch.setattr(philox, "GENERATOR", philox._Generator())
    philox.manual_seed(5)
    fd = _two_unseeded()
    x = torch.zeros(50)
    runs = [fd.execute([x], backend=b) for b in ("cpu", "reference", "cpu")]
    for k, run in enumerate(runs):  # executions take offsets (0, 1), (2, 3), (4, 5)
        for g, w in zip(run, _seeded_pair(5, 2 * k).execute([x], backend="reference")):
            np.testing.assert_array_equal(_bits(g), _bits(w))
    philox.manual_seed(5)  # a new seed restarts at offset 0
    for g, w in zip(fd.execute([x], backend="cpu"), runs[0]):
        np.testing.assert_array_equal(_bits(g), _bits(w))


# --- 7. define_vector(n): n separate scalar inputs (or one list) ---------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_define_vector_takes_separate_scalar_inputs(backend):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1])
        v = fd.define_vector(3)
        u = fd.define_tensor(shape=[-1, -1, -1])
        fd.add_output(fd.ops.add(fd.ops.reshape(t, v), u), alias_input=u)
        fd.add_output(fd.ops.reshape(t, v))
    x = torch.arange(24.0)
    for shape_inputs in ([2, 3, 4], [[2, 3, 4]], [(2, 3, 4)]):
        target = torch.ones(2, 3, 4)
        (reshaped,) = fd.execute([x, *shape_inputs, target], backend=backend)
        torch.testing.assert_close(reshaped, x.reshape(2, 3, 4))
        torch.testing.assert_close(target, x.reshape(2, 3, 4) + 1)
    with pytest.raises(TypeError, match="define_vector of size 3.*list of 2"):
        fd.execute([x, [2, 12], torch.ones(2, 3, 4)], backend=backend)


# --- 8. a fusion without tensor inputs returns torch tensors (regression) -----------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_factory_fusion_returns_torch_tensors(backend):
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.full([2, 3], 1.5, DataType.Float))
    (out,) = fd.execute([], backend=backend)
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, torch.full((2, 3), 1.5))


# --- 9. a reduction of a broadcast of a reduction (regression of the segmentation bug) ----------


@pytest.mark.parametrize("backend", BACKENDS)
def test_prod_of_broadcast_min_of_max(backend):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        n = fd.ops.min(fd.ops.max(x, [0], keepdim=True), [0], keepdim=False)
        fd.add_output(fd.ops.prod(fd.ops.broadcast(n, [True]), [0], keepdim=True))
    (out,) = fd.execute([np.array([3.0], np.float32)], backend=backend)
    np.testing.assert_array_equal(out, [3.0])
