"""Ports of NVIDIA/Fuser's frontend tests of ops (indexing, scans, where, slices, pads, cats,
reductions, random ops, strides and aliases): see test_nvfuser_ported_frontend.py."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from fuser import DataType, FusionDefinition
from nvfuser_ported import BACKENDS, check, define, ports, randn, strided


def _both_dims(backend, build, inputs):
    """`build(fd, dim)` for dims 0 and 1 in one fusion, checked against torch."""
    check(lambda fd: [build(fd, d) for d in (0, 1)], lambda: [x.clone() for x in inputs] * 2, backend)


# --- indexing and scans ----------------------------------------------------------------------------


@ports("test_index_select", "test_take_along_axis", "test_gather")
@pytest.mark.parametrize("backend", BACKENDS)
def test_index_select_take_along_axis_and_gather_of_a_sum(backend):
    def build(fd, dim):
        t0, t1, idx, small = fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1]), \
            fd.define_tensor([-1], dtype=DataType.Int), fd.define_tensor([-1, -1], dtype=DataType.Int)
        along = fd.define_tensor([-1, -1], dtype=DataType.Int)
        total = fd.ops.add(t0, t1)
        fd.add_output(fd.ops.index_select(total, idx, dim))
        fd.add_output(fd.ops.take_along_axis(total, along, dim))
        fd.add_output(fd.ops.gather(total, small, dim))

    g = torch.Generator().manual_seed(0)
    inputs = [randn(4, 6, seed=1), randn(4, 6, seed=2), torch.randint(0, 4, (3,), generator=g),
              torch.randint(0, 4, (3, 2), generator=g), torch.randint(0, 4, (4, 6), generator=g)]
    _both_dims(backend, build, inputs)


@ports("test_index_select_scalar_indices")
@pytest.mark.parametrize("backend", BACKENDS)
def test_index_select_with_a_0d_index(backend):
    check(lambda fd: [fd.add_output(fd.ops.index_select(fd.define_tensor([-1, -1]),
                                                        fd.define_tensor([], dtype=DataType.Int), d)) for d in (0, 1)],
          [randn(4, 6), torch.tensor(2), randn(4, 6, seed=1), torch.tensor(3)], backend)


@ports("test_select")
@pytest.mark.parametrize("backend", BACKENDS)
def test_select_at_a_scalar_input(backend):
    check(lambda fd: [fd.add_output(fd.ops.select(fd.define_tensor([-1, -1]), fd.define_scalar(dtype=DataType.Int), d))
                      for d in (0, 1)], [randn(4, 6), 2, randn(4, 6, seed=1), 5], backend)


@ports("test_cumsum", "test_cumprod", "test_cummin", "test_cummax", "test_cumsum_int")
@pytest.mark.parametrize("backend", BACKENDS)
def test_scans_along_each_dim(backend):
    def build(fd, dim):
        t = fd.define_tensor([-1, -1])
        for scan in (fd.ops.cumsum, fd.ops.cumprod, fd.ops.cummin, fd.ops.cummax):
            fd.add_output(scan(t, dim))
        ints = fd.define_tensor([-1], dtype=DataType.Int32)
        fd.add_output(fd.ops.cast(fd.ops.cumsum(ints, dim=-1), dtype=DataType.Int))

    _both_dims(backend, build, [randn(4, 6), torch.arange(-2, 2, dtype=torch.int32)])


# --- where, addcmul, slices, iota, scalars ------------------------------------------------------------


@ports("test_where", "test_where_op")
@pytest.mark.parametrize("backend", BACKENDS)
def test_where_of_mixed_float_dtypes(backend):
    dtypes = [torch.float16, torch.float32, torch.bfloat16]
    pred = torch.tensor([True, False, True, True, False])
    inputs, wants = [], []
    with FusionDefinition() as fd:
        for k, (a, b) in enumerate(itertools.product(dtypes, dtypes)):
            x, y = randn(5, dtype=a, seed=k), randn(5, dtype=b, seed=k + 10)
            tensors = [fd.define_tensor(sizes=v.shape, strides=v.stride(), dtype=dt)
                       for v, dt in ((pred, DataType.Bool), (x, _DT[a]), (y, _DT[b]))]
            fd.add_output(fd.ops.where(*tensors))
            inputs += [pred, x, y]
            wants.append(torch.where(pred, x, y))
    for got, want in zip(fd.execute(inputs, backend=backend), wants):
        torch.testing.assert_close(got, want)


_DT = {torch.float16: DataType.Half, torch.float32: DataType.Float, torch.bfloat16: DataType.BFloat16}


@ports("test_where_dtypes")
@pytest.mark.parametrize("backend", BACKENDS)
def test_where_of_two_scalars_takes_their_dtype(backend):
    scalars = [((3.0, None), torch.float64), ((3.0, DataType.Float), torch.float32),
               ((3.0, DataType.Double), torch.float64), ((3, DataType.Int32), torch.int32), ((3, None), torch.int64),
               ((complex(3.0), None), torch.complex128), ((3.0 + 0j, DataType.ComplexFloat), torch.complex64),
               ((3.0 + 0j, DataType.ComplexDouble), torch.complex128), ((True, DataType.Bool), torch.bool)]
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1], dtype=DataType.Bool)
        for (value, dtype), _ in scalars:
            other = type(value)(5) if not isinstance(value, bool) else False
            fd.add_output(fd.ops.where(t, fd.define_scalar(value, dtype), fd.define_scalar(other, dtype)))
    cond = torch.arange(2).bool()
    outs = fd.execute([cond], backend=backend)
    assert [o.dtype for o in outs] == [dtype for _, dtype in scalars]
    for out, ((value, _), dtype) in zip(outs, scalars):
        other = type(value)(5) if not isinstance(value, bool) else False
        assert torch.equal(out, torch.where(cond, torch.tensor(value), torch.tensor(other)).to(dtype))


@ports("test_addcmul")
@pytest.mark.parametrize("backend", BACKENDS)
def test_addcmul_with_a_value(backend):
    check(lambda fd: fd.add_output(fd.ops.addcmul(*(fd.define_tensor([-1]) for _ in "abc"), fd.define_scalar(0.1))),
          [randn(4, seed=s) for s in range(3)], backend)


@ports("test_slice", "test_slice_api")
@pytest.mark.parametrize("backend", BACKENDS)
def test_slice_with_static_shape_and_vector_bounds(backend):
    x = randn(2, 5, 10)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float, stride_order=[2, 1, 0])
        fd.add_output(fd.ops.slice(t, start_indices=(0, 1, 2), end_indices=(2, 5, 10), strides=(1, 1, 1)))
        fd.add_output(fd.ops.slice(t, [0, 1, 2], t.shape()))
        fd.add_output(fd.ops.slice(t, fd.define_vector([0, 1, 2]), t.shape()))
        fd.add_output(fd.ops.slice(t, fd.define_vector(3), fd.define_vector(3)))
    for out in fd.execute([x, 0, 1, 2, *x.shape], backend=backend):
        torch.testing.assert_close(out, x[:, 1:, 2:])


@ports("test_iota")
@pytest.mark.parametrize("backend", BACKENDS)
def test_iota_with_scalar_start_and_step(backend):
    with FusionDefinition() as fd:
        for length, start, step, dtype in [(2, 0, 2, DataType.Int), (3, 100, 1, DataType.Int32)]:
            fd.add_output(fd.ops.iota(*(fd.define_scalar(v) for v in (length, start, step)), dtype))
    first, second = fd.execute([], backend=backend)
    assert torch.equal(first, torch.tensor([0, 2])) and torch.equal(second, torch.tensor([100, 101, 102], dtype=torch.int32))


@ports("test_scalar_only_inputs", "test_input_scalar")
@pytest.mark.parametrize("backend", BACKENDS)
def test_scalar_inputs(backend):
    def definition(fd):
        total = fd.ops.add(fd.define_scalar(), fd.define_scalar())
        fd.add_output(fd.ops.mul(fd.ops.full(shape=[2, 2], fill_value=fd.define_scalar(1.0, DataType.Float),
                                             dtype=DataType.Float), total))
        fd.add_output(fd.ops.mul(fd.define_tensor([-1]), fd.define_scalar()))

    _, (full, scaled) = check(definition, [2.0, 3.0, randn(3), 0.1], backend)
    assert torch.equal(full, torch.full([2, 2], 5.0))


# --- aliases ---------------------------------------------------------------------------------------


@ports("test_alias_output_to_input")
@pytest.mark.parametrize("backend", BACKENDS)
def test_output_written_into_its_input_is_not_returned(backend):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor([-1, -1])
        t1 = fd.ops.add(t0, fd.define_scalar(1.0))
        fd.add_output(t1, alias_input=t0)
        fd.add_output(fd.ops.add(t1, fd.define_scalar(2.0)))
    x = torch.ones(4, 4)
    (out,) = fd.execute([x], backend=backend)
    assert torch.equal(out, torch.full((4, 4), 4.0)) and torch.equal(x, torch.full((4, 4), 2.0))


@ports("test_returning_aliased_outputs")
@pytest.mark.parametrize("backend", BACKENDS)
def test_relu_written_into_its_input_and_returned_three_times(backend):
    """Three outputs, all the relu of the input, which is updated in place. nvFuser also makes
    the two plain relu outputs views of the input's buffer; fuser returns fresh buffers for them
    (only the returned input itself is the input)."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True] * 4, dtype=DataType.Float)
        relu = fd.ops.where(fd.ops.gt(t0, fd.define_scalar(0.0, dtype=DataType.Double)), t0,
                            fd.define_scalar(0.0, dtype=DataType.Double))
        fd.add_output(relu)
        fd.add_output(relu, t0)
        fd.add_output(relu)
        fd.add_output(t0)
    x = randn(1, 2, 3, 4)
    want = x.relu()
    outs = fd.execute([x], backend=backend)
    assert len(outs) == 3 and outs[2] is x
    for out in [*outs, x]:
        torch.testing.assert_close(out, want)


@ports("test_inplace_update_on_non_contiguous_inputs")
@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_update_of_a_strided_input(backend):
    def definition(fd):
        t0 = fd.define_tensor(shape=[2, 2], contiguity=[False, True], dtype=DataType.Float, stride_order=[0, 1])
        zero = fd.define_scalar(0.0, dtype=DataType.Double)
        relu = fd.ops.set(fd.ops.cast(fd.ops.where(fd.ops.gt(t0, zero), t0, zero), dtype=DataType.Float))
        fd.add_output(relu, t0)
        fd.add_output(relu)

    x = strided((2, 2), (1, 3))
    before = x.clone()
    _, (out,) = check(definition, lambda: [x.copy_(before)], backend)  # x restored for each run
    torch.testing.assert_close(out, before.relu())
    torch.testing.assert_close(x, before.relu())


@ports("test_bcast_squeeze_replace_aliased_output")
@pytest.mark.parametrize("backend", BACKENDS)
def test_reshape_written_into_another_input(backend):
    def definition(fd):
        t0 = fd.define_tensor(shape=[1, 1, 8], contiguity=[None, None, True], dtype=DataType.BFloat16)
        t1 = fd.define_tensor(shape=[1, 8], contiguity=[None, True], dtype=DataType.BFloat16)
        squeezed = fd.ops.reshape(t0, new_shape=[1, 8])
        fd.add_output(fd.ops.set(squeezed), t1)
        fd.add_output(squeezed)

    x, y = randn(1, 1, 8, dtype=torch.bfloat16), torch.zeros(1, 8, dtype=torch.bfloat16)
    _, (out,) = check(definition, lambda: [x, y.zero_()], backend)
    assert torch.equal(out, x.squeeze(1)) and torch.equal(y, x.squeeze(1))


# --- reductions --------------------------------------------------------------------------------------


@ports("test_welford")
@pytest.mark.parametrize("backend", BACKENDS)
def test_welford_mean_and_variance(backend):
    with FusionDefinition() as fd:
        mean, var_sum, n = fd.ops.welford(fd.define_tensor([-1, -1]), [-1])
        fd.add_output(fd.ops.div(var_sum, n))
        fd.add_output(mean)
    x = randn(2, 5)
    var, mean = fd.execute([x], backend=backend)
    torch.testing.assert_close((var, mean), torch.var_mean(x, [-1], correction=0))


@ports("test_var_correction", "test_var_mean_correction", "test_all_dim_var_mean")
@pytest.mark.filterwarnings("ignore:var.*degrees of freedom is <= 0:UserWarning")
@pytest.mark.parametrize("backend", BACKENDS)
def test_var_and_var_mean_for_each_correction(backend):
    """Corrections 0 to 6 of two elements (the legacy range: beyond 1, torch's inf/negative values)."""
    def definition(fd):
        t, cube = fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1, -1])
        for correction in range(7):
            fd.add_output(fd.ops.var(t, [-1], correction))
            for out in fd.ops.var_mean(t, [-1], correction):
                fd.add_output(out)
        for correction in (0, 1):
            for out in fd.ops.var_mean(cube, [0, 1, 2], correction):
                fd.add_output(out)

    check(definition, [randn(2, 2), randn(2, 2, 2, seed=1)], backend, equal_nan=True)


@ports("test_prod")
@pytest.mark.parametrize("backend", BACKENDS)
def test_prod_overloads(backend):
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1, -1])
        fd.add_output(fd.ops.prod(t, DataType.Float))  # nvFuser's prod(arg, dtype): every dim
        fd.add_output(fd.ops.prod(t, 1, False, DataType.Float))
        fd.add_output(fd.ops.prod(t, 1, True, DataType.Float))
        fd.add_output(fd.ops.prod(t, [-1], False, DataType.Float))
    x = 1 + randn(2, 4, 8) / 10
    wants = [x.prod(), x.prod(1), x.prod(1, True), x.prod(-1)]
    for got, want in zip(fd.execute([x], backend=backend), wants):
        torch.testing.assert_close(got, want)


@ports("test_reduction_complex_number", "test_real_imag")
@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_sum_real_and_imag(backend):
    def definition(fd):
        for dtype in (DataType.ComplexFloat, DataType.ComplexDouble):
            t = fd.define_tensor([-1, -1], dtype=dtype)
            fd.add_output(fd.ops.sum(t, [-1], False, dtype))
            fd.add_output(fd.ops.real(t))
            fd.add_output(fd.ops.imag(t))

    check(definition, [randn(2, 8, dtype=torch.complex64), randn(2, 8, dtype=torch.complex128)], backend)


@ports("test_output_stride_order_with_reduction", "test_output_stride_order")
@pytest.mark.parametrize("backend", BACKENDS)
def test_stride_order_op_for_every_permutation(backend):
    x, y = torch.arange(24.0).reshape(2, 3, 4), randn(2, 3, 4, 5)
    perms = list(itertools.permutations(range(3)))
    with FusionDefinition() as fd:
        t, u = fd.from_pytorch(x), fd.from_pytorch(y)
        plus, summed = fd.ops.add(t, fd.define_scalar(3.0)), fd.ops.sum(u, dims=[2])
        for perm in perms:
            fd.add_output(fd.ops.stride_order(plus, perm))
            fd.add_output(fd.ops.stride_order(summed, perm))
    outs = fd.execute([x, y], backend=backend)
    for perm, got, reduced in zip(perms, outs[::2], outs[1::2]):
        torch.testing.assert_close(got, x + 3.0)
        torch.testing.assert_close(reduced, y.sum(2))
        for out in (got, reduced):  # stride_order[d] ranks dim d: 0 is the fastest
            assert sorted(range(3), key=lambda d: out.stride(d)) == sorted(range(3), key=lambda d: perm[d])


@ports("test_broadcast_and_stride_order")
@pytest.mark.parametrize("backend", BACKENDS)
def test_broadcast_output_in_a_column_major_stride_order(backend):
    x = randn(2, 3, 4)
    with FusionDefinition() as fd:
        b = fd.ops.broadcast(fd.from_pytorch(x), is_broadcast_dim=[False, True, False, False])
        fd.add_output(fd.ops.stride_order(b, stride_order=[0, 1, 2, 3]))  # direct bindings' spelling
        fd.add_output(b, stride_order=[0, 1, 2, 3])  # the legacy add_output(..., stride_order=)
    for out in fd.execute([x], backend=backend):
        assert torch.equal(out, x.unsqueeze(1)) and out.stride() == (1, 2, 2, 6)


# --- random ops ------------------------------------------------------------------------------------


@ports("test_normal", "test_uniform")
@pytest.mark.parametrize("backend", BACKENDS)
def test_normal_and_uniform_statistics(backend):
    n = 2**16
    with FusionDefinition() as fd:
        shape = fd.define_tensor([-1, -1]).shape()
        fd.add_output(fd.ops.normal(fd.define_scalar(3.7), fd.define_scalar(2.5), shape, dtype=DataType.Double))
        fd.add_output(fd.ops.uniform(fd.define_scalar(1.8), fd.define_scalar(1223.5), shape, dtype=DataType.Double))
    torch.manual_seed(0)
    normal, uniform = fd.execute([torch.zeros(64, n // 64)], backend=backend)
    assert normal.dtype == uniform.dtype == torch.float64
    assert abs(normal.mean() - 3.7) < 0.05 and abs(normal.std() - 2.5) < 0.05
    assert abs(uniform.mean() - (1.8 + 1223.5) / 2) < 7
    assert 1.8 <= uniform.min() < 1.8 + 0.5 and 1223.5 - 0.5 < uniform.max() < 1223.5


@ports("test_random_distinct_values")
@pytest.mark.parametrize("backend", BACKENDS)
def test_random_values_are_distinct(backend):
    dtypes = [DataType.Double, DataType.Float, DataType.Half, DataType.BFloat16]
    with FusionDefinition() as fd:
        for dtype, op in itertools.product(dtypes, (fd.ops.uniform, fd.ops.normal)):
            zero, one = fd.define_scalar(0.0, dtype=DataType.Double), fd.define_scalar(1.0, dtype=DataType.Double)
            fd.add_output(op(zero, one, shape=[2, 2], dtype=dtype))
    for _ in range(10):
        for out in fd.execute([], backend=backend):
            flat = out.flatten()
            pairs = ((flat[:, None] == flat[None, :]) ^ torch.eye(4, dtype=torch.bool)).sum() // 2
            assert pairs < 3, f"three or more equal draws in {out}"


# --- embedding -----------------------------------------------------------------------------------------


@ports("test_embedding")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("padding_idx,max_norm,norm_type,flags", [
    (None, None, None, None), (-2, None, None, True), (None, 1e-5, None, None), (-2, 1e-5, 1.0, True),
    (None, 1.0, 3.0, None), (None, 1.0, float("inf"), None),
])
def test_embedding_with_optional_scalar_inputs(backend, padding_idx, max_norm, norm_type, flags):
    """Each optional argument given is a Scalar input (flags: scale_grad_by_freq and sparse);
    with max_norm the returned rows are torch's (fuser does not renormalise `weight` in place)."""
    optional = [(padding_idx, DataType.Int), (max_norm, DataType.Float), (norm_type, DataType.Float),
                (flags, DataType.Bool), (flags, DataType.Bool)]
    with FusionDefinition() as fd:
        index = fd.define_tensor([-1], contiguity=[True], dtype=DataType.Int)
        weight = fd.define_tensor([-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        args = [None if v is None else fd.define_scalar(value=None, dtype=dt) for v, dt in optional]
        fd.add_output(fd.ops.embedding_fwd(index, weight, *args))
    index, weight = torch.randint(10, (3,), generator=torch.Generator().manual_seed(0)), randn(10, 3, dtype=torch.bfloat16)
    (out,) = fd.execute([index, weight, *(v for v, _ in optional if v is not None)], backend=backend)
    want = F.embedding(index, weight.clone(), padding_idx, max_norm, 2.0 if norm_type is None else norm_type)
    torch.testing.assert_close(out, want)


@ports("test_deterministic_random")
@pytest.mark.parametrize("backend", BACKENDS)
def test_unseeded_random_ops_equal_seeded_ones_at_the_executions_offsets(backend, monkeypatch):
    """Stateful (unseeded) uniform/normal equal stateless ones given the seed and the offset of
    each execution. With torch, fuser draws each execution's first offset from torch's generator
    (api/test_nvfuser_semantics.py); with fuser's own generator, as here, executions take offsets
    0, 1, ..."""
    from fuser_dialect import philox

    monkeypatch.setattr(philox, "GENERATOR", philox._Generator())
    x = randn(5, 9)
    for op in ("uniform", "normal"):
        def definition(fd, seeded):
            t = fd.from_pytorch(x)
            a, b = fd.define_scalar(0.3, DataType.Float), fd.define_scalar(1.7, DataType.Float)
            state = dict(rng_seed=fd.define_scalar(DataType.Int), rng_offset=fd.define_scalar(DataType.Int)) if seeded else {}
            fd.add_output(fd.ops.mul(t, getattr(fd.ops, op)(a, b, shape=[5, 9], **state)))

        stateful, stateless = define(lambda fd: definition(fd, False)), define(lambda fd: definition(fd, True))
        for seed in (0, 12345):
            philox.manual_seed(seed)
            runs = [stateful.execute([x], backend=backend)[0] for _ in range(4)]
            for offset, run in enumerate(runs):
                torch.testing.assert_close(run, stateless.execute([x, seed, offset], backend=backend)[0])


@ports("test_uniform_range")
@pytest.mark.parametrize("backend", BACKENDS)
def test_uniform_values_stay_in_range(backend):
    """[left, right) with right rounded to the dtype first, as nvFuser bounds it: every sample is at
    most the dtype's largest value below rounded `right` (f16: 3.697265625 for 3.7, whose f16 is
    3.69921875; api/test_nvfuser_semantics.py's rule). The ends of the range are reached in
    f16/bf16."""
    dtypes = [DataType.Double, DataType.Float, DataType.Half, DataType.BFloat16]
    left, right = -1.5, 3.7
    with FusionDefinition() as fd:
        for dtype in dtypes:
            fd.add_output(fd.ops.uniform(fd.define_scalar(left, dtype=DataType.Double),
                                         fd.define_scalar(right, dtype=DataType.Double),
                                         shape=fd.define_vector([2**16], dtype=DataType.Int), dtype=dtype))
    for out in fd.execute([], backend=backend):
        low, high = torch.tensor(left, dtype=out.dtype), torch.tensor(right, dtype=out.dtype)
        top = torch.nextafter(high, low)  # the largest value below right rounded to the dtype
        assert low <= out.min() and out.max() <= top and out.max().double() < right
        assert abs(out.double().mean() - (left + right) / 2) < 0.05
        if out.dtype in (torch.float16, torch.bfloat16):
            assert out.min() == low and out.max() == top


# --- triu, scatter -----------------------------------------------------------------------------------


@ports("test_triu")
@pytest.mark.parametrize("backend", BACKENDS)
def test_triu_below_the_diagonal(backend):
    check(lambda fd: fd.add_output(fd.ops.triu(fd.define_tensor([-1, -1], dtype=DataType.Half), -1)),
          [randn(4, 16, dtype=torch.float16)], backend)


@ports("test_scatter_output_intermediate", "test_scatter_scalar_src")
@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_of_a_tensor_and_of_a_scalar_input(backend):
    x = randn(16, 8)
    _, index = torch.topk(x, k=4, dim=0)  # distinct rows per column

    def definition(fd):
        t, idx = fd.define_tensor([-1, -1], contiguity=[True, True]), fd.define_tensor([-1, -1], dtype=DataType.Int)
        fd.add_output(fd.ops.sigmoid(fd.ops.scatter(t, idx, fd.define_tensor([-1, -1]), 0)))
        fd.add_output(fd.ops.scatter(t, idx, fd.define_scalar(None, dtype=DataType.Double), 0))

    check(definition, [x, index, randn(4, 8, seed=1), 1.5], backend)
