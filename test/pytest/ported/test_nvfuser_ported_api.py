"""Ports of NVIDIA/Fuser's frontend tests of layouts, empty and CPU-scalar inputs, and of the
FusionDefinition API (class definitions, inspection, profiles, errors, caching, options): see
test_nvfuser_ported_frontend.py."""

from __future__ import annotations

import io
import re
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import fuser
from fuser import DataType, FusionDefinition, compute_contiguity, compute_tensor_descriptor
from nvfuser_ported import BACKENDS, check, define, ports, randn, strided


# --- layouts and empty tensors -------------------------------------------------------------------


@ports("test_compute_tensor_descriptor")
def test_compute_tensor_descriptor_of_sizes_and_strides():
    configs = [  # sizes, strides, contiguity, stride_order
        ([2, 1, 3, 1, 4, 3], [12, 4, 4, 4, 1, 0], [True, None, True, None, True, None], [5, 4, 3, 2, 1, 0]),
        ([2, 3, 1, 5, 4], [28, 4, 14, 0, 1], [False, None, True, None, True], [4, 2, 3, 1, 0]),
        ([2, 2, 1, 1, 2, 2, 2], [8, 4, 3, 9, 2, 0, 1], [None, True, True, None, True, None, True], [5, 4, 3, 6, 2, 1, 0]),
        ([2, 2, 1, 2, 4, 2], [2, 32, 1, 8, 0, 4], [False, True, True, False, None, None], [2, 5, 0, 4, 1, 3]),
        ([2, 2, 2, 2], [8, 4, 2, 1], [True, True, True, True], [3, 2, 1, 0]),
        ([2, 1, 3, 1, 4], [24, 4, 8, 4, 2], [True, True, None, None, False], [4, 2, 3, 1, 0]),
        ([2, 2, 2, 2], [8, 4, 0, 2], [True, True, None, False], [3, 2, 1, 0]),
    ]
    for sizes, strides, contiguity, order in configs:
        assert compute_tensor_descriptor(sizes, strides) == (contiguity, order)


@ports("test_compute_contiguity")
def test_compute_contiguity_of_sizes_and_strides():
    sizes = [2, 1, 3, 1, 4, 5, 6]
    assert compute_contiguity(sizes, [80, 30, 30, 456456465465, 0, 6, 1]) == [False, None, True, None, None, True, True]
    assert compute_contiguity(sizes, [800, 300, 300, 456456465465, 0, 60, 10]) == \
        [False, None, True, None, None, True, False]


@ports("test_stride_order_with_explicit_broadcast")
@pytest.mark.parametrize("backend", BACKENDS)
def test_inputs_with_broadcast_expanded_and_permuted_strides(backend):
    inputs = [randn(3).unsqueeze(-1), randn(2, 3, seed=1).unsqueeze(-1).expand(2, 3, 4).transpose(2, 0),
              strided((5, 4, 1, 5, 16), (960, 48, 16, 192, 1)), strided((2, 16, 3), (3, 0, 1))]

    def definition(fd):
        t0, t1, t2 = (fd.from_pytorch(x) for x in inputs[:3])
        t3 = fd.define_tensor(shape=[-1, 16, 3], contiguity=[None, True, True], dtype=DataType.Float,
                              stride_order=[1, 2, 0])
        c = fd.define_scalar(3.0)
        fd.add_output(fd.ops.add(fd.ops.broadcast(t0, [True, False, False]), t1))
        fd.add_output(fd.ops.add(t2, c))
        fd.add_output(fd.ops.mul(t3, c))

    check(definition, inputs, backend)


@ports("test_zero_size_dim", "test_expand_to_zero", "test_allocation_domain_concretization")
@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_inputs_and_outputs(backend):
    def definition(fd):
        fd.add_output(fd.ops.relu(fd.define_tensor(shape=[0, 0], contiguity=[True, True], dtype=DataType.Float)))
        t0, t1 = fd.define_tensor([1, -1]), fd.define_tensor([1, 1])
        fd.add_output(fd.ops.broadcast_in_dim(t0, shape=[0, 0], broadcast_dims=[0, 1]))
        fd.add_output(fd.ops.broadcast_in_dim(t1, shape=[0, 0], broadcast_dims=[0, 1]))  # expanded to 0
        t2 = fd.define_tensor(shape=[1, -1, 1, 1], contiguity=[True, None, None, None], dtype=DataType.Double,
                              stride_order=[0, 3, 2, 1])
        fd.add_output(fd.ops.mul(t2, fd.define_scalar(2.0, dtype=DataType.Double)))

    _, outs = check(definition, [torch.ones(0, 0), torch.zeros(1, 0), torch.zeros(1, 1),
                                 torch.zeros(0, dtype=torch.float64).as_strided((1, 0, 1, 1), (0, 1, 1, 1))], backend)
    assert [o.shape for o in outs] == [(0, 0), (0, 0), (0, 0), (1, 0, 1, 1)]


@ports("test_allocation_domain_index_select")
@pytest.mark.parametrize("backend", BACKENDS)
def test_index_select_of_a_column_major_input(backend):
    def definition(fd):
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[0, 1])
        fd.add_output(fd.ops.index_select(t, fd.define_tensor(shape=[-1], dtype=DataType.Int), dim=1))

    check(definition, [strided((9, 28), (1, 9)), torch.tensor([3, 0, 27, 3])], backend)


@ports("test_expanded_bcast_tensor", "test_cpu_add", "test_full_with_cpu_inputs")
@pytest.mark.parametrize("backend", BACKENDS)
def test_0d_cpu_tensors_with_expanded_and_full_tensors(backend):
    """nvFuser's CPU scalar tensors: 0-d inputs (every fuser input is a host tensor here)."""
    def definition(fd):
        scale, t, mask = fd.define_tensor([]), fd.define_tensor([-1, -1, -1]), fd.define_tensor([-1, -1, -1],
                                                                                               dtype=DataType.Bool)
        fd.add_output(fd.ops.add(mask, fd.ops.add(scale, t)))
        full = fd.ops.full(shape=[2, 2], fill_value=fd.define_scalar(3.0), dtype=DataType.Float)
        fd.add_output(fd.ops.mul(scale, full))

    mask = torch.randint(0, 2, (5, 5), generator=torch.Generator().manual_seed(0)).bool().unsqueeze(-1).expand(5, 5, 5)
    check(definition, [torch.tensor(1.5), randn(5, 5, 5), mask], backend)


@ports("test_input_forwarding_device", "test_expanded_to_size_one")
@pytest.mark.parametrize("backend", BACKENDS)
def test_forwarded_inputs_come_back_on_the_cpu(backend):
    with FusionDefinition() as fd:
        fd.add_output(fd.define_tensor([]))
        fd.add_output(fd.define_tensor(shape=[1, -1], contiguity=[None, None], dtype=DataType.Int))
    x, y = torch.tensor(2.0), torch.randint(0, 10, (1, 1))
    scalar, ints = fd.execute([x, y], backend=backend)
    assert scalar.is_cpu and torch.equal(scalar, x) and torch.equal(ints, y)


@ports("test_broadcast_in_dim_no_redundant_set")
def test_broadcast_in_dim_without_new_dims_is_an_expand():
    def fusion(broadcast):
        with FusionDefinition() as fd:
            t0, t1 = fd.define_tensor([1, -1], contiguity=[None, True]), fd.define_tensor([-1, -1])
            b = fd.ops.broadcast_in_dim(t0, t1.shape(), [0, 1]) if broadcast else fd.ops.expand(t0, t1.shape())
            fd.add_output(fd.ops.add(b, t1))
        return str(fd)

    assert fusion(True) == fusion(False)


# --- reshapes, slices and cats of computed tensors ---------------------------------------------------


@ports("test_replaced_sizes_pr2714")
@pytest.mark.parametrize("backend", BACKENDS)
def test_reshapes_to_constant_extents_beside_pointwise_ops(backend):
    def definition(fd):
        t0, t1 = (fd.define_tensor([-1, -1], contiguity=[True, True], dtype=DataType.Float) for _ in "ab")
        tanh = fd.ops.tanh(t1)
        total = fd.ops.add(fd.ops.reshape(fd.ops.exp(t0), new_shape=[fd.define_scalar(4, dtype=DataType.Int)]),
                           fd.ops.reshape(tanh, new_shape=fd.define_vector([fd.define_scalar(4, dtype=DataType.Int)])))
        fd.add_output(total)
        fd.add_output(fd.ops.mul(tanh, fd.ops.reciprocal(t0)))
        fd.add_output(fd.ops.mul(total, fd.ops.reciprocal(fd.define_scalar(2.0, dtype=DataType.Double))))

    check(definition, [strided((2, 2), (2, 1)), strided((2, 2), (2, 1), seed=1)], backend)


@ports("test_reshape_squeeze_concretization", "test_sum_sliced_reshape_to_broadcast")
@pytest.mark.parametrize("backend", BACKENDS)
def test_slices_whose_reshapes_squeeze(backend):
    def definition(fd):
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float, stride_order=[2, 1, 0])
        one, eight = fd.define_scalar(1, dtype=DataType.Int), fd.define_scalar(8, dtype=DataType.Int)
        sliced = fd.ops.slice(t, start_indices=[0, 0, 0], end_indices=[1, 2, 4], strides=[1, 1, 1])
        fd.add_output(fd.ops.reshape(fd.ops.reshape(sliced, new_shape=[one, eight]), new_shape=[eight]))
        u = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True] * 4, dtype=DataType.Float)
        halves = fd.ops.reshape(u, new_shape=[fd.define_scalar(e, dtype=DataType.Int) for e in (2, 3, 5, 4, 2)])
        last = fd.ops.slice(halves, start_indices=[0] * 5, end_indices=[2, 3, 5, 4, 1], strides=[1] * 5)
        fd.add_output(fd.ops.sum(last, dims=[4], keepdim=False, dtype=DataType.Null))  # a squeeze, in effect

    check(definition, [strided((2, 5, 10), (50, 10, 1)), randn(4, 3, 5, 4, seed=1)], backend)


# --- FusionDefinition: definitions, inspection, errors ------------------------------------------------


@ports("test_no_definition", "test_func_definition", "test_def_op_in_schedule")
def test_class_definitions():
    x = randn(4, 4)

    class Sigmoid(FusionDefinition):
        def definition(self):
            self.add_output(self.ops.sigmoid(self.from_pytorch(x)))

    class Scheduled(Sigmoid):
        def schedule(self):  # nvFuser: a definition op here is an error; fuser takes no schedule at all
            self.ops.relu(self.t0)

    with pytest.raises(NotImplementedError, match="defines nothing"):
        FusionDefinition().execute([x])  # as nvFuser: the base definition() is called
    for backend in BACKENDS:
        torch.testing.assert_close(Sigmoid().execute([x], backend=backend)[0], torch.sigmoid(x))
    with pytest.raises(NotImplementedError, match="user schedules are not supported"):
        Scheduled().execute([x])


@ports("test_python_version_API")
def test_version_compares_with_strings_and_versions():
    assert fuser.version() > "0.0.0" and fuser.version() > fuser.Version("0.0.0")


@ports("test_static_tensor_sizes")
@pytest.mark.parametrize("backend", BACKENDS)
def test_from_pytorch_with_static_sizes(backend):
    x, y = randn(4, 5, 1), randn(1, 5, 6, seed=1)
    with FusionDefinition() as fd:
        a, b = fd.from_pytorch(x, static_sizes=True), fd.from_pytorch(y, static_sizes=True)
        fd.add_output(fd.ops.mul(a, b))
    assert a.type.shape[:2] == (4, 5)
    torch.testing.assert_close(fd.execute([x, y], backend=backend)[0], x * y)


@ports("test_cuda_code_and_scheduled_fusion_ir_strings")
def test_cuda_code_and_scheduled_ir_of_executed_and_given_inputs():
    """Before an execution the last_* strings are empty (nvFuser raises); cuda_code_for of inputs
    not compiled yet compiles them (nvFuser raises "not compiled"); user schedules are refused
    (test_class_definitions)."""
    x = randn(2, 2, 2, 2)

    class Relu(FusionDefinition):
        def definition(self):
            self.add_output(self.ops.relu(self.from_pytorch(x)))

    with FusionDefinition() as tanh:
        tanh.add_output(tanh.ops.tanh(tanh.from_pytorch(x)))
    with FusionDefinition() as two_sums:
        t = two_sums.from_pytorch(x)
        two_sums.add_output(two_sums.ops.sum(t, [0]))
        two_sums.add_output(two_sums.ops.sum(t, [-1]))
    for fd in (Relu(), tanh, two_sums):
        assert fd.last_cuda_code() == "" and fd.last_scheduled_fusion_ir() == ""
        fd.execute([x], backend="cpu")
        assert "__global__" in fd.last_cuda_code() and "__global__" in fd.last_cuda_code(intrinsic_code=True)
        assert "fuser." in fd.last_scheduled_fusion_ir() and fd.last_scheduled_fusion_ir(tensor_transforms=True)
        assert "func.func" in fd.fusion_ir()
        assert fd.cuda_code_for([x]) == fd.last_cuda_code() and fd.cuda_code_for([x], intrinsic_code=True)
        assert "// segment 0" in fd.scheduled_fusion_ir_for([x], tensor_transforms=True)
        assert "__global__" in fd.cuda_code_for([randn(8, 8, 8, 8)])


@ports("test_pad_cache")
@pytest.mark.parametrize("backend", BACKENDS)
def test_pad_widths_and_fill_values_are_part_of_the_cache_key(backend):
    x = randn(2, 3)
    for widths, fill in (([1, 1], None), ([2, 2], None), ([1, 1], 2.0), ([1, 1], None)):
        def definition(fd):
            value = None if fill is None else fd.define_scalar(fill)
            fd.add_output(fd.ops.pad(fd.define_tensor([-1, -1]), widths, value))

        for _ in range(2):  # the second run is a cache hit
            check(definition, [x], backend)


@ports("test_slice_error_checks")
@pytest.mark.parametrize("backend", BACKENDS)
def test_slice_bounds_and_rank_checks(backend):
    """As nvFuser's direct frontend: a negative start, an end before its start and a stride other
    than 1 are refused (RuntimeErrors, and ValueErrors), as are rank mismatches; bounds without
    strides and legal ones run. fuser's python_slicing=True takes Python's rules for the first three."""
    for x in (randn(10, 10), randn(5, 5, seed=1)):
        for start, end, stride, what in (([-1, -2], [5, 5], [7, 7], "dim 0 of f32.* starts at -1"),
                                         ([3, 4], [1, 2], [1, 1], "dim 0 of f32.* ends at 1, before its start 3"),
                                         ([0, 0], [5, 5], [5, 5], "dim 0 of f32.* has stride 5; strides must be 1")):
            for error in (RuntimeError, ValueError):
                with pytest.raises(error, match=what):
                    define(lambda fd: fd.add_output(fd.ops.slice(fd.from_pytorch(x), start, end, stride)))
            check(lambda fd: fd.add_output(fd.ops.slice(fd.from_pytorch(x), start, end, stride, python_slicing=True)),
                  [x], backend)
        for start, end in (([2, 2], [4, 4]), ([6, 6], [8, 8])):
            check(lambda fd: fd.add_output(fd.ops.slice(fd.from_pytorch(x), start, end)), [x], backend)
        for start, end, stride, what in (([0] * 3, [4] * 3, [1] * 3, "3 starts, 3 ends and 3 strides for a tensor of rank 2"),
                                         ([0] * 3, [4] * 2, [1] * 2, "3 starts, 2 ends"),
                                         ([0] * 2, [4] * 2, [1] * 3, "2 ends and 3 strides")):
            with pytest.raises(RuntimeError, match=what):
                define(lambda fd: fd.add_output(fd.ops.slice(fd.from_pytorch(x), start, end, stride)))


@ports("test_mismatched_input_types")
def test_inputs_of_the_wrong_kind_or_dtype_are_named():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.mul(fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float),
                                 fd.define_scalar()))
    x = torch.rand(15)
    for inputs, error, what in (([2.0, 2.0], TypeError, r"input 0 \(f32\[\?\]\): expected a numpy array or torch tensor"),
                                ([x, x], TypeError, r"input 1 \(f64\): expected a float scalar, got Tensor"),
                                ([x.half(), 2.0], TypeError, r"input 0 .*expected dtype float32, got torch.float16"),
                                ([x, 2.0 + 1.0j], TypeError, r"input 1 \(f64\): expected a float scalar, got complex")):
        with pytest.raises(error, match=what):
            fd.execute(inputs, backend="reference")


@ports("test_repro_script_generation")
def test_print_repro_prints_a_script_that_runs():
    x, y = randn(4, 4), randn(4, 4, seed=1)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.mul(fd.from_pytorch(x), fd.from_pytorch(y)))
    printed = io.StringIO()
    stdout, sys.stdout = sys.stdout, printed
    try:
        fd.execute([x, y], backend="reference", print_repro=True)
    finally:
        sys.stdout = stdout
    script = printed.getvalue()
    assert script == fd.repro_script_for([x, y]) + "\n"  # print() adds a newline
    assert script.count("torch.testing.make_tensor((4, 4), dtype=torch.float32, device='cpu')") == 2
    assert "FusionDefinition.from_ir" in script and script.rstrip().endswith("fd.execute(inputs)")
    namespace: dict = {}
    exec(compile(script.replace("fd.execute(inputs)", "out = fd.execute(inputs, backend='reference')"),
                 "<repro>", "exec"), namespace)
    assert namespace["out"][0].shape == (4, 4)


@ports("test_fusion_definition_error_cache")
def test_an_error_finishing_a_definition_is_raised_every_time():
    """nvFuser's case is a CPU non-scalar tensor; fuser's finishing error is a fusion without outputs."""
    for _ in range(2):
        with pytest.raises(ValueError, match="the fusion has no outputs"):
            with FusionDefinition() as fd:
                fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)


@ports("test_fusion_information")
@pytest.mark.parametrize("backend", BACKENDS)
def test_inputs_outputs_and_extents(backend):
    """fuser's inputs()/outputs() are the Tensors (nvFuser: their ids) and extents() names each
    dynamic extent as (input, dim) (nvFuser: the ids -1 .. -6)."""
    x = torch.ones(2, 4, 8)
    with FusionDefinition() as fd:
        t0, t1 = fd.from_pytorch(x), fd.from_pytorch(x)
        out = fd.ops.sum(fd.ops.mul(fd.ops.add(t0, t1), fd.define_scalar(3.0)), [-1], False, DataType.Float)
        fd.add_output(out)
    assert torch.equal(fd.execute([x, x], backend=backend)[0], torch.full((2, 4), 48.0))
    assert [t.value for t in fd.inputs()] == [t0.value, t1.value] and [t.value for t in fd.outputs()] == [out.value]
    assert fd.extents() == [(i, d) for i in range(2) for d in range(3)]


@ports("test_enable_disable_options")
def test_unknown_scheduler_options_are_refused():
    """nvFuser's fuse_matmul / matmul_expr_eval pick its matmul scheduler, which then refuses
    the fusion; fuser has no such options and refuses them by name."""
    a, b = randn(24, 8), randn(8, 16, seed=1)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.matmul(fd.from_pytorch(a), fd.from_pytorch(b)))
    with pytest.raises(ValueError, match="fuse_matmul"):
        fd.execute([a, b], backend="cpu", _enable_options=["fuse_matmul"], _disable_options=["matmul_expr_eval"])
    torch.testing.assert_close(fd.execute([a, b], backend="cpu")[0], a @ b)


@ports("test_fusion_profiler", "test_fusion_profiler_with_noncodegen_kernels")
def test_profile_has_one_entry_per_kernel():
    x, y = randn(2, 5), randn(2, 5, seed=1)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.sum(fd.ops.sum(fd.ops.add(fd.from_pytorch(x), fd.from_pytorch(y)), -1), -1))
    with pytest.raises(ValueError, match="not previously called with profiling"):
        fd.profile()
    torch.testing.assert_close(fd.execute([x, y], backend="cpu", profile=True)[0], (x + y).sum())
    profile = fd.profile()
    assert profile.fusion_id >= 0 and profile.segments == len(profile.kernel_profiles) == len(fd.last_kernels()) >= 1
    a, b, w = randn(2, 4, 16, dtype=torch.bfloat16), randn(2, 4, 16, dtype=torch.bfloat16, seed=1), \
        randn(16, 16, dtype=torch.bfloat16, seed=2)
    with FusionDefinition() as lin:
        lin.add_output(lin.ops.add(lin.ops.linear(lin.from_pytorch(a), lin.from_pytorch(w)), lin.from_pytorch(b)))
    torch.testing.assert_close(lin.execute([a, w, b], backend="cpu", profile=True)[0], F.linear(a, w) + b)
    assert all(k.name and k.scheduler for k in lin.profile().kernel_profiles)


@ports("test_segmentation_reduction_pointwise_epilogue")
@pytest.mark.parametrize("backend", BACKENDS)
def test_segments_of_a_reduction_with_an_epilogue(backend):
    """nvFuser makes two segments (reduction, pointwise) and maps their ids; fuser's segments
    say where each input comes from: a fusion input or an earlier segment's output."""
    x, y = randn(2, 32), randn(2, 128, seed=1)

    def definition(fd):
        t0, t1 = fd.define_tensor([-1, -1]), fd.define_tensor([-1, -1])
        fd.add_output(fd.ops.add(t1, fd.ops.sum(t0, [-1], True, DataType.Float)))

    fd, _ = check(definition, [x, y], backend)
    segments = fd.segment([x, y])
    assert 1 <= len(segments) <= 2 and segments[-1].outputs[-1] == [0]
    assert {"input 0", "input 1"} <= {str(origin) for s in segments for origin in s.inputs}
