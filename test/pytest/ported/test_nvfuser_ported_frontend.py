"""NVIDIA/Fuser's Python frontend tests, ported: every test name of
tests/python/direct/test_python_frontend.py and tests/python/direct/test_repro.py (NVIDIA/Fuser
81c4b22fd750, 2026-04-03) and of the legacy tests/python/test_python_frontend.py (as of its removal
in a092ad9e3, 2026-01-28) is either ported — a test here or in test_nvfuser_ported_*.py marked
@ports(name) — or listed in NOT_PORTED with the reason. `test_every_upstream_name_is_ported_or_listed`
keeps that true.

The ports check the same fusions in fuser's style: tiny shapes, CPU torch tensors, torch eager as
the reference (often the definition itself, run by nvfuser_ported.TorchFD), on the "reference"
and "cpu" backends. Where fuser differs on purpose the test says so (e.g. nvFuser's
FusionCache/serde checks, printed Python definitions and data_ptr identities of aliased outputs
have no counterpart: fuser prints MLIR and returns fresh output buffers).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import test_nvfuser_ported_api
import test_nvfuser_ported_ops
import test_nvfuser_ported_repro
import test_nvfuser_ported_repro_models
import test_nvfuser_ported_repro_rotary
from fuser import DataType, FusionDefinition
from nvfuser_ported import BACKENDS, check, define, ported_names, ports, randn, strided

UPSTREAM = {
    "tests/python/direct/test_python_frontend.py": """
        test_addcmul test_alias_output_to_input test_all_dim_var_mean test_allocation_domain_concretization
        test_allocation_domain_index_select test_basic test_basic_fp16 test_bcast_squeeze_replace_aliased_output
        test_broadcast test_broadcast_and_stride_order test_broadcast_in_dim_no_redundant_set test_broadcast_mixing
        test_cast_double_to_half test_cast_fp8 test_cast_scalar test_cat test_complex_constants test_complex_rsqrt
        test_compute_tensor_descriptor test_constant_nans test_cpu_add test_cummax test_cummin test_cumprod
        test_cumsum test_define_broadcast_tensor test_define_contiguous_tensor test_define_noncontiguous_tensor
        test_define_tensor_contiguity_with_stride_order test_dynamic_bcast_in_dim test_dynamic_full
        test_dynamic_reshape test_embedding test_empty_reshape test_execute_with_tuple_and_list test_expand
        test_expand_to_zero test_expanded_bcast_tensor test_expanded_reduction test_expanded_to_size_one
        test_explicit_broadcast_input test_full_with_cpu_inputs test_gather test_gcd test_implicit_broadcast_input
        test_index_select test_index_select_scalar_indices test_inplace_update_on_non_contiguous_inputs
        test_input_forwarding_device test_input_scalar test_integer_division test_iota test_issue4888
        test_mark_alias_pass test_misaligned_add test_nextafter test_normal test_output_stride_order
        test_output_stride_order_with_reduction test_packed_fp4 test_pad test_pad_dynamic test_pad_expanded_empty
        test_pad_prior_cat test_prod test_promote_to_double test_random_distinct_values test_real_imag
        test_reduction_complex_number test_replaced_sizes_pr2714 test_reshape_dynamic
        test_reshape_squeeze_concretization test_returning_aliased_outputs test_right_shift_arithmetic
        test_right_shift_logical test_right_shift_logical_sizeof_dtype test_scalar_only_inputs
        test_scatter_output_intermediate test_scatter_scalar_src test_segment_set test_select test_signbit
        test_single_segment_multi_device test_slice test_squeeze test_stride_order_with_explicit_broadcast
        test_sum_sliced_reshape_to_broadcast test_take_along_axis test_tensor_ndim test_tensor_shape
        test_tensor_shape_expand_bcast test_tensor_shape_nobcast test_tensor_shape_with_output_bcast
        test_tensor_size_both_args_bcast test_triu test_uniform test_validate_precomputed_values test_var_correction
        test_var_mean_correction test_welford test_where test_where_dtypes test_zero_size_dim""",
    "tests/python/test_python_frontend.py (legacy; names not in the direct file)": """
        test_arithmetic_ops test_broadcast_in_dim_with_dynamic_shapes test_cat_qwen2_v2 test_cat_symbolic
        test_compute_contiguity test_cuda_code_and_scheduled_fusion_ir_strings test_cumsum_int test_debug_output
        test_def_op_in_schedule test_deterministic_random test_enable_disable_options test_fix_2549
        test_from_pytorch_fails_on_cpu_tensor test_func_definition test_fusion_definition_error_cache
        test_fusion_information test_fusion_profiler test_fusion_profiler_user_schedule
        test_fusion_profiler_with_noncodegen_kernels test_import_conflict_nvfuser_then_direct test_issue1129
        test_issue1246 test_issue1270 test_issue1273 test_issue1277 test_issue1279 test_issue1310 test_issue1393
        test_issue1691 test_issue1706 test_issue1872 test_issue1953 test_issue2755 test_issue3292
        test_mismatched_input_types test_nanogpt_mha_dpa test_nanogpt_split_mha_linears test_no_definition
        test_ops_broadcast test_pad_cache test_prim_layer_norm_fwd test_prim_rms_norm_fwd test_python_version_API
        test_reduction_transpose_sched_issue2317 test_remove_empty_issue_2545 test_repro_script_generation
        test_segmentation_reduction_pointwise_epilogue test_selected_device test_slice_api test_slice_error_checks
        test_static_tensor_sizes test_uniform_range test_unpadded_catop_issue2275_repro1
        test_unpadded_catop_issue2275_repro2 test_where_op""",
    "tests/python/direct/test_repro.py": """
        test_ca_map_concrete_loop_id test_domain_map_hang test_issue1129 test_issue1246 test_issue1270
        test_issue1273 test_issue1277 test_issue1279 test_issue1310 test_issue1393 test_issue1691 test_issue1706
        test_issue1872 test_issue1953 test_issue2275_repro1 test_issue2275_repro2 test_issue2317 test_issue2354
        test_issue2395 test_issue2532 test_issue2545 test_issue2549 test_issue2664_repro1 test_issue2664_repro2
        test_issue2664_repro3 test_issue2664_repro4 test_issue2755 test_issue2853 test_issue3192 test_issue3227
        test_issue3292 test_issue3369 test_issue4444 test_issue4459 test_issue4670 test_issue5377
        test_loop_promotion_cyclic_war test_reduction_reference_missing_input_ids test_register_aliasing_bug
        test_reshape_cancellation test_shared_memory_usage test_ws_tma_normalization1 test_ws_tma_normalization2
        test_ws_tma_normalization3 test_ws_tma_normalization4 test_ws_tma_normalization5
        test_ws_tma_normalization6""",
}
"""Every test name of the three upstream files (the legacy file's names shared with the direct
file are listed once, under the direct file)."""

NOT_PORTED = {
    "test_selected_device": "needs two GPUs (runs the fusion on cuda:1)",
    "test_single_segment_multi_device": "needs a GPU: mixes a CUDA tensor with CPU scalar tensors in one fusion "
                                        "and expects nvFuser's KernelExecutor error",
    "test_packed_fp4": "fuser has no DataType.Float4_e2m1fn_x2 (packed fp4); nvFuser tests it on Blackwell only",
    "test_import_conflict_nvfuser_then_direct": "fuser is one module: there is no nvfuser / nvfuser_direct pair "
                                                "whose double import warns",
    "test_fusion_profiler_user_schedule": "user schedules (FusionDefinition.schedule) are deliberately not "
                                          "supported: fuser schedules every segment itself",
    "test_from_pytorch_fails_on_cpu_tensor": "the opposite of fuser's design: CPU tensors are ordinary inputs "
                                             "(the cpu and reference backends run on them)",
    "test_mark_alias_pass": "fuser never returns a view of an input (no MarkAliasesPrepare pass): a reshape's "
                            "output is a fresh buffer, so its data_ptr differs by design",
    "test_debug_output": "fuser has no execute(capture_debug_output=True) / fd.debug_output(): it has no "
                         "NVFUSER_DUMP debug stream (FUSER_LOG logs through the logging module instead)",
    "test_issue2853": "asserts nvFuser's refusal (KernelExecutor) of a fusion with a CPU scalar output beside a "
                      "CUDA output: a device-placement rule with no counterpart on fuser's host backends",
}
"""Upstream test names not ported, with why."""


def test_every_upstream_name_is_ported_or_listed():
    upstream = {name for names in UPSTREAM.values() for name in names.split()}
    assert len(upstream) == 191
    ported = ported_names(__import__(__name__), test_nvfuser_ported_ops, test_nvfuser_ported_api,
                          test_nvfuser_ported_repro, test_nvfuser_ported_repro_models, test_nvfuser_ported_repro_rotary)
    assert not ported - upstream, f"ports of names upstream lacks: {sorted(ported - upstream)}"
    assert not set(NOT_PORTED) & ported, f"both ported and listed: {sorted(set(NOT_PORTED) & ported)}"
    assert upstream == ported | set(NOT_PORTED), f"neither ported nor listed: {sorted(upstream - ported - set(NOT_PORTED))}"
    assert len(ported) >= 0.95 * len(upstream)


# --- definitions, casts, broadcasts ----------------------------------------------------------------


@ports("test_basic", "test_basic_fp16")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_add_mul_then_float_sum(backend, dtype):
    def definition(fd):
        t0, t1 = (fd.define_tensor([-1, -1, -1], dtype=DataType.Half if half else DataType.Float) for _ in "ab")
        total = fd.ops.sum(fd.ops.mul(fd.ops.add(t0, t1), fd.define_scalar(3.0)), [-1], False, DataType.Float)
        fd.add_output(fd.ops.cast(total, DataType.Half) if half else total)

    half = dtype == torch.float16
    _, (out,) = check(definition, [torch.ones(2, 4, 8, dtype=dtype)] * 2, backend)
    assert torch.equal(out, torch.full((2, 4), 48.0, dtype=dtype))  # (1 + 1) * 3 summed over 8


DECLARED_INPUTS = [  # (define_tensor arguments, input)
    (dict(shape=[2, 3], contiguity=True), torch.randn(2, 3)),
    (dict(shape=[-1, -1], contiguity=[False, True]), torch.randn(8).as_strided([2, 3], [4, 1])),
    (dict(shape=[1, 2, 1], contiguity=True), torch.randn(2).as_strided([1, 2, 1], [0, 1, 0])),
    (dict(shape=[1, 2], contiguity=True, stride_order=[0, 1]), torch.randn(1, 2)),
]


@ports("test_define_contiguous_tensor", "test_define_noncontiguous_tensor", "test_define_broadcast_tensor",
       "test_define_tensor_contiguity_with_stride_order")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("declared,x", DECLARED_INPUTS, ids=["contiguous", "strided", "broadcast", "stride_order"])
def test_declared_layouts_accept_matching_inputs(backend, declared, x):
    with FusionDefinition() as fd:
        t = fd.define_tensor(**declared)
        fd.add_output(fd.ops.add(t, t))
    torch.testing.assert_close(fd.execute([x], backend=backend)[0], x * 2)


@ports("test_cast_scalar")
@pytest.mark.parametrize("backend", BACKENDS)
def test_scalar_cast_to_int32_keeps_an_int32_sum(backend):
    def definition(fd):
        t0, t1 = (fd.define_tensor([-1, -1, -1], dtype=DataType.Int32) for _ in range(2))
        c = fd.ops.cast(fd.define_scalar(3.0), DataType.Int32)
        fd.add_output(fd.ops.sum(fd.ops.mul(fd.ops.add(t0, t1), c), [-1], False, DataType.Int32))

    _, (out,) = check(definition, [torch.ones(2, 4, 8, dtype=torch.int32)] * 2, backend)
    assert out.dtype == torch.int32 and torch.equal(out, torch.full((2, 4), 48, dtype=torch.int32))


@ports("test_cast_double_to_half", "test_promote_to_double")
@pytest.mark.parametrize("backend", BACKENDS)
def test_casts_and_promotion_to_double(backend):
    def definition(fd):
        a, b = fd.define_tensor([-1, -1], dtype=DataType.Double), fd.define_tensor([-1, -1], dtype=DataType.Double)
        h = fd.define_tensor([-1, -1], dtype=DataType.Half)
        half_sum = fd.ops.add(fd.ops.cast(a, DataType.Half), fd.ops.cast(b, DataType.Half))
        fd.add_output(fd.ops.cast(fd.ops.relu(half_sum), DataType.Half))
        fd.add_output(fd.ops.relu(fd.ops.add(h, a)))  # f16 + f64: f64

    _, (half, double) = check(definition, [randn(2, 4, dtype=torch.float64, seed=s) for s in (1, 2)]
                              + [randn(2, 4, dtype=torch.float16)], backend)
    assert (half.dtype, double.dtype) == (torch.float16, torch.float64)


@ports("test_cast_fp8")
@pytest.mark.parametrize("backend", BACKENDS)
def test_casts_to_and_from_fp8(backend):
    """fp8 e4m3fn and e5m2 (e8m0, Blackwell-only upstream, has no fuser dtype), both ways."""
    wide = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
    fp8 = {torch.float8_e4m3fn: DataType.Float8_e4m3fn, torch.float8_e5m2: DataType.Float8_e5m2}
    wide_dt = [DataType.Double, DataType.Float, DataType.Half, DataType.BFloat16]
    inputs, wants = [], []
    with FusionDefinition() as fd:
        for (w, wdt), (f, fdt) in itertools.product(zip(wide, wide_dt), fp8.items()):
            x, y = randn(5, 5, dtype=w), randn(5, 5).to(f)
            fd.add_output(fd.ops.cast(fd.from_pytorch(x), fdt))
            fd.add_output(fd.ops.cast(fd.from_pytorch(y), wdt))
            inputs += [x, y]
            wants += [x.to(f), y.to(w)]
    for got, want in zip(fd.execute(inputs, backend=backend), wants):
        assert got.dtype == want.dtype
        assert torch.equal(got.float(), want.float())


@ports("test_broadcast", "test_ops_broadcast", "test_implicit_broadcast_input", "test_explicit_broadcast_input",
       "test_broadcast_mixing")
@pytest.mark.parametrize("backend", BACKENDS)
def test_broadcast_and_broadcast_in_dim(backend):
    def definition(fd):
        v, t, ones, col = (fd.define_tensor(s) for s in ([-1], [-1, -1, -1], [1, 1, -1], [-1, 1]))
        fd.add_output(fd.ops.add(fd.ops.broadcast(v, [True, False, True]), t))
        fd.add_output(fd.ops.add(fd.ops.broadcast_in_dim(v, [2, 3, 4], [1]), t))
        fd.add_output(fd.ops.add(fd.ops.broadcast_in_dim(ones, [2, 3, 4], [0, 1, 2]), t))
        fd.add_output(fd.ops.add(col, fd.ops.broadcast_in_dim(v, [3, 3], [0])))

    check(definition, [randn(3, seed=1), randn(2, 3, 4, seed=2), randn(1, 1, 4, seed=3), randn(3, 1, seed=4)],
          backend)


@ports("test_dynamic_bcast_in_dim", "test_dynamic_full")
@pytest.mark.parametrize("backend", BACKENDS)
def test_broadcast_in_dim_and_full_with_scalar_input_shapes(backend):
    def definition(fd):
        row = fd.define_tensor([1, -1], contiguity=[None, True])
        d0, d1 = fd.define_scalar(None, dtype=DataType.Int), fd.define_scalar(None, dtype=DataType.Int)
        fill = fd.define_scalar(None, dtype=DataType.Float)
        t = fd.define_tensor([-1, -1])
        fd.add_output(fd.ops.add(fd.ops.broadcast_in_dim(row, (d0, d1), (0, 1)), t))
        fd.add_output(fd.ops.add(fd.ops.full((d0, d1), fill, DataType.Float), t))

    check(definition, [randn(1, 4), 3, 4, 2.5, randn(3, 4, seed=1)], backend)


@ports("test_tensor_ndim", "test_execute_with_tuple_and_list")
@pytest.mark.parametrize("backend", BACKENDS)
def test_reshape_to_a_define_vector_shape(backend):
    x = randn(*[2] * 12)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.sum(fd.ops.reshape(t, fd.define_vector(10)), dims=[3]))
    shape = [2] * 9 + [8]
    for given in (shape, tuple(shape)):  # a list or a tuple for the vector: one fusion either way
        torch.testing.assert_close(fd.execute([x, given], backend=backend)[0], x.reshape(shape).sum(3))


@ports("test_dynamic_reshape")
@pytest.mark.parametrize("backend", BACKENDS)
def test_reshape_to_a_size_and_int32_scalars(backend):
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], [True, True])
        d1, d2 = fd.define_scalar(dtype=DataType.Int32), fd.define_scalar(dtype=DataType.Int32)
        fd.add_output(fd.ops.reshape(x, [fd.ops.size(x, 0), d1, d2]))
    x = torch.rand(3, 4)
    (y,) = fd.execute([x, 2, 2], backend=backend)
    assert y.shape == (3, 2, 2) and torch.equal(y.flatten(), x.flatten())


@ports("test_reshape_dynamic")
@pytest.mark.parametrize("backend", BACKENDS)
def test_reshape_to_extents_computed_from_a_scalar_input(backend):
    """thunder's reshape to [n, 192 // n] built of scalar ops. nvFuser takes the Double that
    192 * reciprocal(n) is as an extent; fuser refuses float extents on purpose
    (test_float_scalar_as_extent_is_a_clear_type_error in api/test_scalar_extents_and_outputs.py),
    so it is cast."""
    def definition(fd):
        n = fd.define_scalar(None, dtype=DataType.Int)
        t = fd.define_tensor([-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float, stride_order=[2, 1, 0])
        n1 = fd.ops.mul(fd.define_scalar(1, dtype=DataType.Int), n)
        negative = fd.ops.ne(fd.ops.signbit(n1), fd.define_scalar(False, dtype=DataType.Bool))
        rem = fd.ops.cast(fd.ops.fmod(fd.define_scalar(192, dtype=DataType.Int), n1), dtype=DataType.Int)
        inexact = fd.ops.bitwise_and(negative, fd.ops.ne(rem, fd.define_scalar(0, dtype=DataType.Int)))
        quotient = fd.ops.mul(fd.define_scalar(192, dtype=DataType.Int), fd.ops.reciprocal(n1))
        cols = fd.ops.cast(fd.ops.sub(quotient, fd.ops.cast(inexact, dtype=DataType.Int)), DataType.Int)
        fd.add_output(fd.ops.sum(fd.ops.reshape(t, new_shape=[n, cols]), dims=[1], keepdim=False, dtype=DataType.Null))

    check(definition, [32, strided((4, 8, 6), (48, 6, 1))], backend)


@ports("test_empty_reshape")
@pytest.mark.parametrize("backend", BACKENDS)
def test_reshape_of_an_empty_tensor(backend):
    def definition(fd):
        t = fd.define_tensor([-1, 1, -1, -1, -1], contiguity=[False, None, True, True, True], dtype=DataType.Int,
                             stride_order=[4, 3, 2, 1, 0])
        fd.add_output(fd.ops.reshape(t, new_shape=[fd.define_scalar(5, dtype=DataType.Int),
                                                   fd.define_scalar(0, dtype=DataType.Int)]))

    _, (out,) = check(definition, [torch.zeros((0, 1, 2, 3, 4), dtype=torch.int64)], backend)
    assert out.shape == (5, 0)


@ports("test_squeeze")
@pytest.mark.parametrize("backend", BACKENDS)
def test_squeeze_broadcast_dims(backend):
    def definition(fd):
        t0 = fd.define_tensor(shape=[-1], contiguity=[True])
        t1 = fd.define_tensor(sizes=[1, 4, 1], strides=[4, 1, 1])
        t2 = fd.define_tensor(sizes=[2, 1, 4], strides=[4, 4, 1])
        summed = fd.ops.sum(fd.ops.squeeze(t2, [-2]), [0])
        fd.add_output(fd.ops.mul(fd.ops.mul(t0, fd.ops.squeeze(t1, [0, -1])), summed))

    check(definition, [randn(4), randn(1, 4, 1, seed=1), randn(2, 1, 4, seed=2)], backend)


@ports("test_expanded_reduction")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_of_an_expanded_input(backend, keepdim):
    def definition(fd):
        t = fd.define_tensor([-1, -1], contiguity=[None, None], dtype=DataType.Float, stride_order=[1, 0])
        fd.add_output(fd.ops.sum(t, dims=[0], keepdim=keepdim, dtype=DataType.Null))

    check(definition, [torch.tensor(1.0).as_strided((2, 3), (0, 0))], backend)


@ports("test_expand")
@pytest.mark.parametrize("backend", BACKENDS)
def test_expand_to_another_inputs_sizes(backend):
    x, y = randn(1, 1, 4), randn(2, 3, 4, seed=1)
    with FusionDefinition() as fd:
        t0, t1 = fd.from_pytorch(x), fd.from_pytorch(y)
        fd.add_output(fd.ops.mul(fd.ops.expand(t0, y.size()), t1))
    torch.testing.assert_close(fd.execute([x, y], backend=backend)[0], x.expand(2, 3, 4) * y)


@ports("test_tensor_shape", "test_tensor_shape_nobcast", "test_tensor_size_both_args_bcast",
       "test_tensor_shape_expand_bcast")
@pytest.mark.parametrize("backend", BACKENDS)
def test_broadcast_in_dim_to_shapes_and_sizes_of_other_inputs(backend):
    def definition(fd):
        t0, v, t2, row, col = (fd.define_tensor(s) for s in ([-1, -1, -1], [-1], [-1, -1], [1, -1], [-1, 1]))
        t1, u = fd.define_tensor([-1, 1, -1], contiguity=[True, None, True]), fd.define_tensor([-1, 1, -1])
        fd.add_output(fd.ops.sub(t0, fd.ops.broadcast_in_dim(v, fd.ops.shape(t0), [2])))
        fd.add_output(fd.ops.add(t2, fd.ops.broadcast_in_dim(t2, fd.ops.shape(t2), [0, 1])))
        shape = [fd.ops.size(col, 0), fd.ops.size(row, 1)]
        fd.add_output(fd.ops.add(fd.ops.broadcast_in_dim(row, shape, [0, 1]), fd.ops.broadcast_in_dim(col, shape, [0, 1])))
        t1_b = fd.ops.broadcast_in_dim(t1, fd.ops.shape(t0), [0, 1, 2])
        fd.add_output(fd.ops.broadcast_in_dim(u, fd.ops.shape(t1_b), [0, 1, 2]))

    check(definition, [randn(2, 3, 4), randn(4, seed=1), randn(2, 3, seed=2), randn(1, 3, seed=3),
                       randn(2, 1, seed=4), randn(2, 1, 4, seed=5), randn(2, 1, 4, seed=6)], backend)


@ports("test_tensor_shape_with_output_bcast", "test_broadcast_in_dim_with_dynamic_shapes")
@pytest.mark.parametrize("backend", BACKENDS)
def test_one_definition_for_two_input_shapes(backend):
    with FusionDefinition() as fd:
        t0, v = fd.define_tensor([-1, -1, -1], contiguity=[True] * 3), fd.define_tensor([-1], contiguity=[True])
        fd.add_output(fd.ops.broadcast_in_dim(fd.ops.sum(t0, dims=[2]), t0.shape(), [0, 1]))
        fd.add_output(fd.ops.add(t0, fd.ops.broadcast_in_dim(v, t0.shape(), [2])))
    for shape in ((2, 3, 4), (4, 5, 32)):
        x, y = randn(*shape), randn(shape[2], seed=1)
        summed, added = fd.execute([x, y], backend=backend)
        torch.testing.assert_close(summed, x.sum(2, keepdim=True).expand(shape))
        torch.testing.assert_close(added, x + y)
    if backend == "cpu":
        assert fd.cache_info().misses == 1  # symbolic extents: the second shape hits the cache


@ports("test_pad", "test_pad_dynamic")
@pytest.mark.parametrize("backend", BACKENDS)
def test_pad_widths_and_values(backend):
    def definition(fd):
        t = fd.define_tensor([1, -1, -1])
        for widths in ([1, 1, 1, 1], [0, 0, 2, 3], [0, 0, 0, 0], [2, 3], [2, 3, 0, 0, 0, 0]):
            fd.add_output(fd.ops.pad(t, widths))
        fd.add_output(fd.ops.pad(t, [2, 3], fd.define_scalar(2.0)))
        w = fd.ops.cast(fd.ops.mul(fd.define_scalar(2.5, dtype=DataType.Float), fd.define_scalar(7, dtype=DataType.Int)),
                        dtype=DataType.Int)  # 17
        fd.add_output(fd.ops.pad(t, [w, w, w, w]))
        fd.add_output(fd.ops.pad(t, fd.define_vector([w, w, w, w], dtype=DataType.Int)))

    _, outs = check(definition, [randn(1, 2, 3)], backend)
    assert outs[-1].shape == (1, 36, 37)


@ports("test_pad_expanded_empty", "test_pad_prior_cat")
@pytest.mark.parametrize("backend", BACKENDS)
def test_pad_of_an_expanded_empty_input_and_pads_before_cat(backend):
    def definition(fd):
        empty, t0, t1 = fd.define_tensor([-1, -1, -1], dtype=DataType.Double), fd.define_tensor([-1, -1]), \
            fd.define_tensor([-1, -1])
        fd.add_output(fd.ops.pad(empty, [0, 0, 1, 1, 1, 0], fd.define_scalar(-3.70753, dtype=DataType.Double)))
        fd.add_output(fd.ops.cat([fd.ops.pad(t0, [0, 0, 0, 8]), fd.ops.pad(t1, [0, 0, 0, 7])], 1))

    check(definition, [torch.zeros(0, dtype=torch.float64).as_strided((2, 0, 3), (0, 0, 0)), randn(2, 4),
                       randn(3, 3, seed=1)], backend)


@ports("test_cat")
@pytest.mark.parametrize("backend", BACKENDS)
def test_cat_along_each_dim_beside_an_unused_empty_input(backend):
    def definition(fd):
        t0, t1, t2, _ = (fd.define_tensor([-1, -1]) for _ in range(4))
        fd.add_output(fd.ops.cat([t0, t1], 1))
        fd.add_output(fd.ops.cat([t0, t2], 0))

    check(definition, [randn(2, 4), randn(2, 3, seed=1), randn(4, 4, seed=2), randn(0, 4)], backend)


# --- complex, special values, integers ---------------------------------------------------------------


@ports("test_complex_constants", "test_complex_rsqrt")
@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_constant_and_complex_rsqrt(backend):
    x, c64, c128 = torch.arange(2).type(torch.complex64), randn(4, dtype=torch.complex64), randn(4, dtype=torch.complex128)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.mul(fd.from_pytorch(x), fd.define_scalar(complex(3.0, 0.5))))
        fd.add_output(fd.ops.rsqrt(fd.from_pytorch(c64)))
        fd.add_output(fd.ops.rsqrt(fd.from_pytorch(c128)))
    scaled, r64, r128 = fd.execute([x, c64, c128], backend=backend)
    assert (scaled.dtype, r64.dtype, r128.dtype) == (torch.complex64, torch.complex64, torch.complex128)
    torch.testing.assert_close(scaled, x * (3.0 + 0.5j))
    torch.testing.assert_close(r64, c64.rsqrt())
    torch.testing.assert_close(r128, c128.rsqrt())


@ports("test_constant_nans", "test_validate_precomputed_values")
@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_constants_and_nan_scalar_inputs(backend):
    def definition(fd):
        fd.add_output(fd.ops.add(fd.define_tensor([-1, -1]), fd.define_scalar(float("nan"))))
        fd.add_output(fd.ops.ge(fd.define_tensor([-1, -1]), fd.define_scalar(None, dtype=DataType.Double)))

    _, (nans, never) = check(definition, [randn(4, 4), strided((2, 5), (5, 1)), float("nan")], backend, equal_nan=True)
    assert nans.isnan().all() and not never.any()


@ports("test_gcd", "test_integer_division")
@pytest.mark.parametrize("backend", BACKENDS)
def test_gcd_and_integer_divisions(backend):
    def definition(fd):
        a, b = fd.define_tensor([-1], dtype=DataType.Int), fd.define_tensor([-1], dtype=DataType.Int)
        fd.add_output(fd.ops.gcd(a, b))
        fd.add_output(fd.ops.div(a, b))  # truncating, as torch.div(rounding_mode="trunc")
        fd.add_output(fd.ops.truediv(a, b))

    b = randn(64, dtype=torch.int64, seed=1)
    check(definition, [randn(64, dtype=torch.int64), torch.where(b == 0, 7, b)], backend)


@ports("test_right_shift_arithmetic", "test_right_shift_logical", "test_right_shift_logical_sizeof_dtype")
@pytest.mark.parametrize("backend", BACKENDS)
def test_right_shifts(backend):
    values = [-1, -2147483648, 1073741824, -64463884, -65968277, 4042311, -98914167, 5526216]
    logical = {torch.int32: [536870911, 268435456, 134217728, 528812926, 528624877, 505288, 524506641, 690777],
               torch.int64: [2305843009213693951, 2305843008945258496, 134217728, 2305843009205635966,
                             2305843009205447917, 505288, 2305843009201329681, 690777]}  # jax's shift_right_logical
    with FusionDefinition() as fd:
        for dtype in (DataType.Int32, DataType.Int):
            t = fd.define_tensor([-1], dtype=dtype)
            fd.add_output(fd.ops.bitwise_right_shift(t, fd.define_scalar(3)))
            fd.add_output(fd.ops.logical_right_shift(t, fd.define_scalar(3)))
            fd.add_output(fd.ops.logical_right_shift(t, fd.define_scalar(None, dtype=DataType.Int)))
    xs = [torch.tensor(values, dtype=torch.int32), torch.tensor(values, dtype=torch.int64)]
    outs = iter(fd.execute([xs[0], 32, xs[1], 64], backend=backend))
    for x in xs:
        assert torch.equal(next(outs), torch.bitwise_right_shift(x, 3))
        assert torch.equal(next(outs), torch.tensor(logical[x.dtype], dtype=x.dtype))
        assert torch.equal(next(outs), torch.zeros_like(x))  # by the whole width: nothing left


@ports("test_nextafter")
@pytest.mark.parametrize("backend", BACKENDS)
def test_nextafter_of_tensors_and_scalars(backend):
    xs = [randn(4), randn(4, dtype=torch.float64, seed=1)]
    with FusionDefinition() as fd:
        ts = [fd.from_pytorch(x) for x in xs]
        ss = [fd.define_scalar(1.0, dtype=DataType.Float), fd.define_scalar(-1.0, dtype=DataType.Double)]
        for a, b in itertools.product(ts + ss, ts + ss):
            out = fd.ops.nextafter(a, b)
            if out.is_tensor():
                fd.add_output(out)
    values = xs + [1.0, -1.0]
    outs = iter(fd.execute(xs, backend=backend))
    for a, b in itertools.product(values, values):
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            assert torch.equal(next(outs), torch.nextafter(torch.as_tensor(a), torch.as_tensor(b)))


@ports("test_signbit", "test_arithmetic_ops", "test_segment_set")
@pytest.mark.parametrize("backend", BACKENDS)
def test_signbit_operators_and_segment_set(backend):
    def definition(fd):
        t0, t1 = fd.define_tensor([-1, -1, -1]), fd.define_tensor([-1, -1, -1])
        fd.add_output(fd.ops.where(fd.ops.signbit(t0), fd.ops.neg(fd.ops.abs(t1)), fd.ops.abs(t1)))
        c0 = fd.define_scalar(1.0)
        neg, absolute = -t0, abs(t0)  # Python operators on Tensors and Scalars
        fd.add_output(neg)
        fd.add_output(absolute)
        fd.add_output(-neg * (c0 - t0 * t0) / absolute + abs(c0) ** -c0 - c0)
        fd.add_output(fd.ops.relu(fd.ops.segment_set(fd.ops.neg(t0))))

    check(definition, [randn(3, 4, 5), randn(3, 4, 5, seed=1)], backend)


@ports("test_misaligned_add")
@pytest.mark.parametrize("backend", BACKENDS)
def test_add_of_a_misaligned_input(backend):
    x, y = torch.ones(1025)[1:], torch.ones(1024)  # x starts 4 bytes into its buffer: no vector access
    check(lambda fd: fd.add_output(fd.ops.add(fd.from_pytorch(x), fd.from_pytorch(y))), [x, y], backend)
