// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier messages of unary, binary, where and cast.

func.func @unary_float_only(%x: !fuser.tensor<?xi64>) {
  %r = fuser.unary exp %x : !fuser.tensor<?xi64> -> !fuser.tensor<?xi64>
  func.return
}
// CHECK: fuser.unary exp: needs a floating-point input, got i64

// -----

func.func @unary_predicate_result(%x: !fuser.tensor<?xf32>) {
  %r = fuser.unary isnan %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.unary isnan: result dtype is f32, expected i1

// -----

// Promotion is explicit in the IR: the builder inserts the casts.
func.func @binary_dtype_mismatch(%x: !fuser.tensor<?xf32>, %y: !fuser.tensor<?xf16>) {
  %r = fuser.binary add %x, %y : (!fuser.tensor<?xf32>, !fuser.tensor<?xf16>) -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.binary add: tensor operands have dtypes f32 and f16; cast one of them first

// -----

func.func @binary_rank_mismatch(%x: !fuser.tensor<?x4xf32>, %y: !fuser.tensor<4xf32>) {
  %r = fuser.binary mul %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<4xf32>) -> !fuser.tensor<?x4xf32>
  func.return
}
// CHECK: fuser.binary mul: operands have different ranks ([?, 4], [4]); broadcast explicitly first

// -----

func.func @binary_incompatible_extents(%x: !fuser.tensor<?x4xf32>, %y: !fuser.tensor<?x5xf32>) {
  %r = fuser.binary sub %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x5xf32>) -> !fuser.tensor<?x4xf32>
  func.return
}
// CHECK: fuser.binary sub: dim 1 has extents 4 and 5, which neither match nor broadcast

// -----

// Two scalars are arith's business, not a tensor op.
func.func @binary_no_tensor(%a: f64, %b: f64) {
  %r = fuser.binary add %a, %b : (f64, f64) -> !fuser.tensor<f32>
  func.return
}
// CHECK: fuser.binary: at least one operand must be a tensor (use arith for scalars)

// -----

func.func @binary_compare_result(%x: !fuser.tensor<?xf32>, %y: !fuser.tensor<?xf32>) {
  %r = fuser.binary lt %x, %y : (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.binary lt: result dtype is f32, expected i1

// -----

func.func @where_condition_not_bool(%c: !fuser.tensor<?xf32>, %x: !fuser.tensor<?xf32>, %y: !fuser.tensor<?xf32>) {
  %r = fuser.where %c, %x, %y : (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>, !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.where: condition must have dtype i1, got f32

// -----

func.func @where_value_dtypes(%c: !fuser.tensor<?xi1>, %x: !fuser.tensor<?xf32>, %y: !fuser.tensor<?xbf16>) {
  %r = fuser.where %c, %x, %y : (!fuser.tensor<?xi1>, !fuser.tensor<?xf32>, !fuser.tensor<?xbf16>) -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.where: values have dtypes f32 and bf16; cast one of them first

// -----

func.func @where_extents(%c: !fuser.tensor<3xi1>, %x: !fuser.tensor<4xf32>, %y: !fuser.tensor<4xf32>) {
  %r = fuser.where %c, %x, %y : (!fuser.tensor<3xi1>, !fuser.tensor<4xf32>, !fuser.tensor<4xf32>) -> !fuser.tensor<4xf32>
  func.return
}
// CHECK: fuser.where: dim 0 has extents 3 and 4, which neither match nor broadcast

// -----

func.func @cast_changes_shape(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.cast %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x8xf16>
  func.return
}
// CHECK: fuser.cast: result dim 1 is 8, expected 4 (result [?, 8], inferred [?, 4])

// -----

// Scalars are f64, f32, i64, i32 or i1: other types have no fuser dtype.
func.func @binary_unsupported_scalar(%s: i8, %x: !fuser.tensor<?xf32>) {
  %r = fuser.binary add %s, %x : (i8, !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.binary: lhs must be a tensor or a scalar, got i8

// -----

func.func @where_index_condition(%c: index, %x: !fuser.tensor<?xf32>) {
  %r = fuser.where %c, %x, %x : (index, !fuser.tensor<?xf32>, !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.where: condition must be a tensor or a scalar, got index

// -----

func.func @unary_frac_of_int(%x: !fuser.tensor<?xi32>) {
  %r = fuser.unary frac %x : !fuser.tensor<?xi32> -> !fuser.tensor<?xi32>
  func.return
}
// CHECK: fuser.unary frac: needs a floating-point input, got i32
// -----

func.func @unary_signbit_result(%x: !fuser.tensor<?xf16>) {
  %r = fuser.unary signbit %x : !fuser.tensor<?xf16> -> !fuser.tensor<?xf16>
  func.return
}
// CHECK: fuser.unary signbit: result dtype is f16, expected i1
// -----

func.func @binary_gcd_of_floats(%x: !fuser.tensor<?xf32>) {
  %r = fuser.binary gcd %x, %x : (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.binary gcd: needs integer (i32 or i64) operands, got f32
// -----

func.func @binary_shift_of_bools(%x: !fuser.tensor<?xi1>) {
  %r = fuser.binary bitwise_left_shift %x, %x : (!fuser.tensor<?xi1>, !fuser.tensor<?xi1>) -> !fuser.tensor<?xi1>
  func.return
}
// CHECK: fuser.binary bitwise_left_shift: needs integer (i32 or i64) operands, got i1
// -----

func.func @binary_logical_right_shift_of_floats(%x: !fuser.tensor<?xf64>) {
  %r = fuser.binary logical_right_shift %x, %x : (!fuser.tensor<?xf64>, !fuser.tensor<?xf64>) -> !fuser.tensor<?xf64>
  func.return
}
// CHECK: fuser.binary logical_right_shift: needs integer (i32 or i64) operands, got f64
// -----

func.func @binary_bitwise_of_floats(%x: !fuser.tensor<?xf32>) {
  %r = fuser.binary bitwise_xor %x, %x : (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.binary bitwise_xor: needs integer or bool operands, got f32
// -----

func.func @binary_nextafter_of_half(%x: !fuser.tensor<?xf16>) {
  %r = fuser.binary nextafter %x, %x : (!fuser.tensor<?xf16>, !fuser.tensor<?xf16>) -> !fuser.tensor<?xf16>
  func.return
}
// CHECK: fuser.binary nextafter: needs f32 or f64 operands, got f16
// -----

func.func @binary_atan2_of_ints(%x: !fuser.tensor<?xi64>) {
  %r = fuser.binary atan2 %x, %x : (!fuser.tensor<?xi64>, !fuser.tensor<?xi64>) -> !fuser.tensor<?xi64>
  func.return
}
// CHECK: fuser.binary atan2: needs floating-point operands, got i64
// -----

func.func @binary_truediv_of_ints_result(%x: !fuser.tensor<?xi64>) {
  %r = fuser.binary truediv %x, %x : (!fuser.tensor<?xi64>, !fuser.tensor<?xi64>) -> !fuser.tensor<?xi64>
  func.return
}
// CHECK: fuser.binary truediv: result dtype is i64, expected f32
