// RUN: fuser-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// Verifier and parser messages of fuser.welford.

func.func @welford_integer_input(%x: !fuser.tensor<?x4xi32>) {
  %r = fuser.welford avg %x dims [1] : !fuser.tensor<?x4xi32> -> !fuser.tensor<?xi32>
  func.return
}
// CHECK: fuser.welford avg: needs a floating-point input, got i32

// -----

func.func @welford_dim_out_of_range(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.welford var_sum %x dims [2] : !fuser.tensor<?x4xf32> -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.welford var_sum: reduction dim 2 is out of range for the input [?, 4] (rank 2)

// -----

func.func @welford_duplicate_dims(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.welford avg %x dims [0, 0] : !fuser.tensor<?x4xf32> -> !fuser.tensor<4xf32>
  func.return
}
// CHECK: fuser.welford avg: reduction dims [0, 0] contain duplicates

// -----

// A low-precision input's statistics are f32, not the input dtype.
func.func @welford_low_precision_result(%x: !fuser.tensor<?x4xbf16>) {
  %r = fuser.welford var_sum %x dims [1] : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?xbf16>
  func.return
}
// CHECK: fuser.welford var_sum: result dtype is bf16, expected f32

// -----

// The count is an i64 tensor.
func.func @welford_count_dtype(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.welford n %x dims [1] : !fuser.tensor<?x4xf32> -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.welford n: result dtype is f32, expected i64

// -----

// keepdim leaves a broadcast dim where the reduced dim was.
func.func @welford_keepdim_rank(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.welford avg %x dims [1] keepdim : !fuser.tensor<?x4xf32> -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.welford avg: result has rank 1 ([?]), expected rank 2 ([?, b])

// -----

func.func @welford_result_dim(%x: !fuser.tensor<3x4xf32>) {
  %r = fuser.welford var_sum %x dims [0] : !fuser.tensor<3x4xf32> -> !fuser.tensor<3xf32>
  func.return
}
// CHECK: fuser.welford var_sum: result dim 0 is 3, expected 4 (result [3], inferred [4])

// -----

// The statistic is one of avg, var_sum, n.
func.func @welford_unknown_stat(%x: !fuser.tensor<3x4xf32>) {
  %r = fuser.welford mean %x dims [0] : !fuser.tensor<3x4xf32> -> !fuser.tensor<4xf32>
  func.return
}
// CHECK: invalid_welford_ops.mlir:[[# @LINE - 3]]:22
// CHECK: Expected `avg`, `var_sum`, or `n`.
