"""The numpy reference interpreter on fusions written as fuser IR: the semantics every
backend must reproduce (C integer division, NaN-propagating max/min, casts, empty
reductions, IR forms the builder does not emit) and its run-time errors, which must name
the op, the dim and the extents."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from xdsl.parser import Parser

from fuser_dialect import make_context
from fuser_dialect.fusion import the_fusion
from fuser_dialect.extents import ExtentError
from fuser_dialect.interpreter import InterpreterError, interpret


def run_ir(body: str, *inputs):
    """Parses and verifies one fusion (`func.func @f...`) and interprets it."""
    module = Parser(make_context(), body).parse_module()
    module.verify()
    return interpret(the_fusion(module), list(inputs))


def f32(*values):
    return np.array(values, np.float32)


# -- arithmetic semantics ------------------------------------------------------------------


def test_integer_division_truncates_toward_zero_and_fmod_keeps_the_dividends_sign():
    q, r = run_ir(
        """
        func.func @f(%a: !fuser.tensor<?xi64>, %b: !fuser.tensor<?xi64>) -> (!fuser.tensor<?xi64>, !fuser.tensor<?xi64>) {
          %q = fuser.binary div %a, %b : (!fuser.tensor<?xi64>, !fuser.tensor<?xi64>) -> !fuser.tensor<?xi64>
          %r = fuser.binary fmod %a, %b : (!fuser.tensor<?xi64>, !fuser.tensor<?xi64>) -> !fuser.tensor<?xi64>
          func.return %q, %r : !fuser.tensor<?xi64>, !fuser.tensor<?xi64>
        }""",
        np.array([7, -7, 7, -7, 0], np.int64),
        np.array([2, 2, -2, -2, 3], np.int64),
    )
    assert q.tolist() == [math.trunc(a / b) for a, b in [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 3)]]
    assert r.tolist() == [int(math.fmod(a, b)) for a, b in [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 3)]]


def test_integer_division_by_zero_is_an_error():
    with pytest.raises(InterpreterError, match="fuser.binary div: integer division by zero"):
        run_ir(
            """
            func.func @f(%a: !fuser.tensor<?xi32>, %d: i64) -> !fuser.tensor<?xi32> {
              %q = fuser.binary div %a, %d : (!fuser.tensor<?xi32>, i64) -> !fuser.tensor<?xi32>
              func.return %q : !fuser.tensor<?xi32>
            }""",
            np.array([1, 2], np.int32),
            0,
        )


def test_maximum_minimum_and_max_min_reductions_propagate_nan():
    x = f32(1.0, np.nan, 3.0)
    mx, mn, rmax, rmin = run_ir(
        """
        func.func @f(%x: !fuser.tensor<3xf32>, %y: !fuser.tensor<3xf32>) -> (!fuser.tensor<3xf32>, !fuser.tensor<3xf32>, !fuser.tensor<f32>, !fuser.tensor<f32>) {
          %a = fuser.binary maximum %x, %y : (!fuser.tensor<3xf32>, !fuser.tensor<3xf32>) -> !fuser.tensor<3xf32>
          %b = fuser.binary minimum %x, %y : (!fuser.tensor<3xf32>, !fuser.tensor<3xf32>) -> !fuser.tensor<3xf32>
          %c = fuser.reduction max %x dims [0] : !fuser.tensor<3xf32> -> !fuser.tensor<f32>
          %d = fuser.reduction min %x dims [0] : !fuser.tensor<3xf32> -> !fuser.tensor<f32>
          func.return %a, %b, %c, %d : !fuser.tensor<3xf32>, !fuser.tensor<3xf32>, !fuser.tensor<f32>, !fuser.tensor<f32>
        }""",
        x,
        f32(2.0, 0.0, np.nan),
    )
    assert mx[0] == 2.0 and math.isnan(mx[1]) and math.isnan(mx[2])
    assert mn[0] == 1.0 and math.isnan(mn[1]) and math.isnan(mn[2])
    assert math.isnan(rmax) and math.isnan(rmin)


def test_scalar_operands_take_the_tensor_dtype():
    # 0.1 as an f64 scalar added to an f32 tensor computes in f32, like torch.
    (got,) = run_ir(
        """
        func.func @f(%x: !fuser.tensor<?xf32>, %s: f64) -> !fuser.tensor<?xf32> {
          %r = fuser.binary add %x, %s : (!fuser.tensor<?xf32>, f64) -> !fuser.tensor<?xf32>
          func.return %r : !fuser.tensor<?xf32>
        }""",
        f32(1.0, 2.0),
        0.1,
    )
    assert got.dtype == np.float32 and got.tolist() == [np.float32(1.0) + np.float32(0.1), np.float32(2.0) + np.float32(0.1)]


def test_bf16_binary_computes_in_f32_and_rounds_once():
    bf16 = ml_dtypes.bfloat16
    a = np.array([1.0, 3.0, 100.0], bf16)
    b = np.array([2.0 ** -8, 2.0 ** -7, 0.3], bf16)
    (got,) = run_ir(
        """
        func.func @f(%a: !fuser.tensor<3xbf16>, %b: !fuser.tensor<3xbf16>) -> !fuser.tensor<3xbf16> {
          %r = fuser.binary add %a, %b : (!fuser.tensor<3xbf16>, !fuser.tensor<3xbf16>) -> !fuser.tensor<3xbf16>
          func.return %r : !fuser.tensor<3xbf16>
        }""",
        a,
        b,
    )
    want = [np.float32(p) + np.float32(q) for p, q in zip(a.astype(np.float32), b.astype(np.float32))]
    assert got.dtype == np.dtype(bf16)
    np.testing.assert_array_equal(got, np.array(want, np.float32).astype(bf16))


def test_casts_float_to_bool_is_nonzero_and_bf16_to_int_truncates():
    b, i = run_ir(
        """
        func.func @f(%x: !fuser.tensor<4xf32>, %h: !fuser.tensor<3xbf16>) -> (!fuser.tensor<4xi1>, !fuser.tensor<3xi32>) {
          %b = fuser.cast %x : !fuser.tensor<4xf32> -> !fuser.tensor<4xi1>
          %i = fuser.cast %h : !fuser.tensor<3xbf16> -> !fuser.tensor<3xi32>
          func.return %b, %i : !fuser.tensor<4xi1>, !fuser.tensor<3xi32>
        }""",
        f32(0.0, -0.0, 0.25, np.nan),
        np.array([2.75, -2.75, 0.5], ml_dtypes.bfloat16),
    )
    assert b.tolist() == [False, False, True, True]
    assert i.tolist() == [2, -2, 0]


def test_low_precision_sum_accumulates_in_f32():
    (got,) = run_ir(
        """
        func.func @f(%x: !fuser.tensor<?xf16>) -> !fuser.tensor<f16> {
          %s = fuser.reduction sum %x dims [0] : !fuser.tensor<?xf16> -> !fuser.tensor<f16>
          func.return %s : !fuser.tensor<f16>
        }""",
        np.ones(3000, np.float16),
    )
    assert float(got) == 3000.0  # f16 accumulation would stop at 2048


def test_reductions_over_an_empty_dim_give_the_identity():
    s, p, mx, mn = run_ir(
        """
        func.func @f(%x: !fuser.tensor<2x?xf32>) -> (!fuser.tensor<2xf32>, !fuser.tensor<2xf32>, !fuser.tensor<2xf32>, !fuser.tensor<2xf32>) {
          %s = fuser.reduction sum %x dims [1] : !fuser.tensor<2x?xf32> -> !fuser.tensor<2xf32>
          %p = fuser.reduction prod %x dims [1] : !fuser.tensor<2x?xf32> -> !fuser.tensor<2xf32>
          %a = fuser.reduction max %x dims [1] : !fuser.tensor<2x?xf32> -> !fuser.tensor<2xf32>
          %b = fuser.reduction min %x dims [1] : !fuser.tensor<2x?xf32> -> !fuser.tensor<2xf32>
          func.return %s, %p, %a, %b : !fuser.tensor<2xf32>, !fuser.tensor<2xf32>, !fuser.tensor<2xf32>, !fuser.tensor<2xf32>
        }""",
        np.zeros((2, 0), np.float32),
    )
    assert s.tolist() == [0.0, 0.0] and p.tolist() == [1.0, 1.0]
    assert mx.tolist() == [-math.inf] * 2 and mn.tolist() == [math.inf] * 2


def test_arith_on_extents_feeds_ops():
    # n = dim0 * 2 - 1 via arith, used as a full extent and an SSA pad width.
    full, padded = run_ir(
        """
        func.func @f(%x: !fuser.tensor<?xf32>) -> (!fuser.tensor<?xi64>, !fuser.tensor<?xf32>) {
          %d = fuser.dim %x, 0 : !fuser.tensor<?xf32>
          %two = arith.constant 2 : i64
          %one = arith.constant 1 : i64
          %m = arith.muli %d, %two : i64
          %n = arith.subi %m, %one : i64
          %v = arith.constant 7 : i64
          %full = fuser.full(%n) value %v : (i64) -> !fuser.tensor<?xi64>
          %zero = arith.constant 0.0 : f64
          %p = fuser.pad %x [%one:%n] value %zero : (!fuser.tensor<?xf32>, f64) -> !fuser.tensor<?xf32>
          func.return %full, %p : !fuser.tensor<?xi64>, !fuser.tensor<?xf32>
        }""",
        f32(1.0, 2.0),
    )
    assert full.tolist() == [7, 7, 7]
    assert padded.tolist() == [0.0, 1.0, 2.0, 0.0, 0.0, 0.0]


def test_iota_float_and_dim_of_a_broadcast_dim():
    (got,) = run_ir(
        """
        func.func @f(%x: !fuser.tensor<bx?xf32>) -> !fuser.tensor<?xf32> {
          %n = fuser.dim %x, 1 : !fuser.tensor<bx?xf32>
          %one = fuser.dim %x, 0 : !fuser.tensor<bx?xf32>
          %len = arith.addi %n, %one : i64
          %start = arith.constant -1.0 : f64
          %step = arith.constant 0.5 : f64
          %r = fuser.iota %len, %start, %step : (f64, f64) -> !fuser.tensor<?xf32>
          func.return %r : !fuser.tensor<?xf32>
        }""",
        np.zeros((1, 3), np.float32),
    )
    assert got.dtype == np.float32 and got.tolist() == [-1.0, -0.5, 0.0, 0.5]


def test_gather_with_an_index_smaller_than_the_input():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    index = np.array([[4, 0], [2, 2]], np.int32)
    (got,) = run_ir(
        """
        func.func @f(%x: !fuser.tensor<4x5xf32>, %i: !fuser.tensor<2x2xi32>) -> !fuser.tensor<2x2xf32> {
          %r = fuser.gather %x[%i] dim 1 : (!fuser.tensor<4x5xf32>, !fuser.tensor<2x2xi32>) -> !fuser.tensor<2x2xf32>
          func.return %r : !fuser.tensor<2x2xf32>
        }""",
        x,
        index,
    )
    assert got.tolist() == [[x[r][index[r][c]] for c in range(2)] for r in range(2)]


def test_take_along_axis_broadcasts_a_broadcast_index_dim():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = run_ir(
        """
        func.func @f(%x: !fuser.tensor<2x3xf32>, %i: !fuser.tensor<bx2xi64>) -> !fuser.tensor<2x2xf32> {
          %r = fuser.take_along_axis %x[%i] dim 1 : (!fuser.tensor<2x3xf32>, !fuser.tensor<bx2xi64>) -> !fuser.tensor<2x2xf32>
          func.return %r : !fuser.tensor<2x2xf32>
        }""",
        x,
        np.array([[2, 0]], np.int64),
    )
    assert got.tolist() == [[2.0, 0.0], [5.0, 3.0]]


def test_index_select_with_a_rank_0_index_keeps_the_dim():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = run_ir(
        """
        func.func @f(%x: !fuser.tensor<2x3xf32>, %i: !fuser.tensor<i64>) -> !fuser.tensor<2x1xf32> {
          %r = fuser.index_select %x[%i] dim 1 : (!fuser.tensor<2x3xf32>, !fuser.tensor<i64>) -> !fuser.tensor<2x1xf32>
          func.return %r : !fuser.tensor<2x1xf32>
        }""",
        x,
        np.array(2, np.int64),
    )
    assert got.tolist() == [[2.0], [5.0]]


def test_pad_crop_beyond_the_extent_eats_the_other_sides_padding():
    # extent 3, left +4, right -5: 2 elements, out[i] = x[i - 4] -> both are padding.
    # (Cropping the input first and padding after would give 5 elements.)
    (got,) = run_ir(
        """
        func.func @f(%x: !fuser.tensor<3xf32>, %v: f64) -> !fuser.tensor<2xf32> {
          %r = fuser.pad %x [4:-5] value %v : (!fuser.tensor<3xf32>, f64) -> !fuser.tensor<2xf32>
          func.return %r : !fuser.tensor<2xf32>
        }""",
        f32(1.0, 2.0, 3.0),
        9.0,
    )
    assert got.tolist() == [9.0, 9.0]


# -- run-time errors --------------------------------------------------------------------------

ELEMENTWISE_DYNAMIC = """
func.func @f(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %r = fuser.binary add %x, %y : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  func.return %r : !fuser.tensor<?x?xf32>
}"""


def test_mismatched_dynamic_extents_are_an_error():
    with pytest.raises(ExtentError, match=r"fuser.binary add: dim 1 has extents 3 and 4 at run time, which neither match nor broadcast"):
        run_ir(ELEMENTWISE_DYNAMIC, np.ones((2, 3), np.float32), np.ones((2, 4), np.float32))


def test_a_dynamic_dim_of_extent_1_does_not_broadcast():
    # Only `b` dims broadcast: a `?` that happens to be 1 is a mismatch, as in nvFuser.
    with pytest.raises(ExtentError, match=r"dim 0 has extents 1 and 2 at run time"):
        run_ir(ELEMENTWISE_DYNAMIC, np.ones((1, 3), np.float32), np.ones((2, 3), np.float32))


@pytest.mark.parametrize(
    "op,index,message",
    [
        ("gather", [[0], [5]], r"fuser.gather: index 5 is out of range for extent 4 along dim 1"),
        ("gather", [[-1], [0]], r"fuser.gather: index -1 is out of range for extent 4 along dim 1"),
        ("take_along_axis", [[4], [0]], r"fuser.take_along_axis: index 4 is out of range for extent 4 along dim 1"),
    ],
)
def test_out_of_range_gather_index_is_an_error(op, index, message):
    with pytest.raises(InterpreterError, match=message):
        run_ir(
            f"""
            func.func @f(%x: !fuser.tensor<2x4xf32>, %i: !fuser.tensor<2xbxi64>) -> !fuser.tensor<2xbxf32> {{
              %r = fuser.{op} %x[%i] dim 1 : (!fuser.tensor<2x4xf32>, !fuser.tensor<2xbxi64>) -> !fuser.tensor<2xbxf32>
              func.return %r : !fuser.tensor<2xbxf32>
            }}""",
            np.zeros((2, 4), np.float32),
            np.array(index, np.int64),
        )


def test_out_of_range_index_select_is_an_error():
    with pytest.raises(InterpreterError, match=r"fuser.index_select: index 3 is out of range for extent 3 along dim 0"):
        run_ir(
            """
            func.func @f(%x: !fuser.tensor<?x2xf32>, %i: !fuser.tensor<?xi64>) -> !fuser.tensor<?x2xf32> {
              %r = fuser.index_select %x[%i] dim 0 : (!fuser.tensor<?x2xf32>, !fuser.tensor<?xi64>) -> !fuser.tensor<?x2xf32>
              func.return %r : !fuser.tensor<?x2xf32>
            }""",
            np.zeros((3, 2), np.float32),
            np.array([0, 3], np.int64),
        )


def test_gather_index_larger_than_the_input_at_run_time_is_an_error():
    with pytest.raises(ExtentError, match=r"fuser.gather: index extent 3 exceeds input extent 2 in dim 0"):
        run_ir(
            """
            func.func @f(%x: !fuser.tensor<?x4xf32>, %i: !fuser.tensor<?x1xi64>) -> !fuser.tensor<?x1xf32> {
              %r = fuser.gather %x[%i] dim 1 : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x1xi64>) -> !fuser.tensor<?x1xf32>
              func.return %r : !fuser.tensor<?x1xf32>
            }""",
            np.zeros((2, 4), np.float32),
            np.zeros((3, 1), np.int64),
        )


def test_reshape_to_a_different_element_count_at_run_time_is_an_error():
    with pytest.raises(ExtentError, match=r"fuser.reshape: cannot reshape \[2, 6\] \(12 elements\) to \[5, 2\] \(10 elements\) at run time"):
        run_ir(
            """
            func.func @f(%x: !fuser.tensor<?x?xf32>, %m: i64) -> !fuser.tensor<?x2xf32> {
              %r = fuser.reshape %x(%m) : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x2xf32>
              func.return %r : !fuser.tensor<?x2xf32>
            }""",
            np.zeros((2, 6), np.float32),
            5,
        )


def test_expand_of_a_dim_that_is_not_1_at_run_time_is_an_error():
    with pytest.raises(ExtentError, match=r"fuser.expand: dim 0 of extent 3 cannot expand to 5"):
        run_ir(
            """
            func.func @f(%x: !fuser.tensor<?x2xf32>, %n: i64) -> !fuser.tensor<?x2xf32> {
              %r = fuser.expand %x(%n) : !fuser.tensor<?x2xf32> -> !fuser.tensor<?x2xf32>
              func.return %r : !fuser.tensor<?x2xf32>
            }""",
            np.zeros((3, 2), np.float32),
            5,
        )


def test_pad_cropping_below_zero_at_run_time_is_an_error():
    with pytest.raises(ExtentError, match=r"fuser.pad: dim 0 of extent 2 padded by \(-2, -1\) at run time has negative extent -1"):
        run_ir(
            """
            func.func @f(%x: !fuser.tensor<?xf32>, %w: i64, %v: f64) -> !fuser.tensor<?xf32> {
              %r = fuser.pad %x [%w:-1] value %v : (!fuser.tensor<?xf32>, f64) -> !fuser.tensor<?xf32>
              func.return %r : !fuser.tensor<?xf32>
            }""",
            f32(1.0, 2.0),
            -2,
            0.0,
        )


def test_cat_inputs_disagreeing_at_run_time_is_an_error():
    with pytest.raises(ExtentError, match=r"fuser.cat: input 1 has extent 3 in dim 1 at run time but input 0 has 2"):
        run_ir(
            """
            func.func @f(%a: !fuser.tensor<?x?xf32>, %b: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
              %r = fuser.cat %a, %b dim 0 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
              func.return %r : !fuser.tensor<?x?xf32>
            }""",
            np.zeros((1, 2), np.float32),
            np.zeros((1, 3), np.float32),
        )


def test_interpreter_errors_are_value_errors():
    # Callers of execute() catch one family of errors for bad inputs and bad extents.
    assert issubclass(InterpreterError, ValueError)
