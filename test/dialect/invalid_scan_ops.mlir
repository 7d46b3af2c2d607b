// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier messages of scan and select.

func.func @scan_dim_out_of_range(%x: !fuser.tensor<4x8xf32>) {
  %r = fuser.scan sum %x dim 2 : !fuser.tensor<4x8xf32> -> !fuser.tensor<4x8xf32>
  func.return
}
// CHECK: fuser.scan sum: dim 2 is out of range for the input [4, 8] (rank 2)

// -----

// torch.cumsum of int32 returns int64.
func.func @scan_int_sum_keeps_dtype(%x: !fuser.tensor<4x8xi32>) {
  %r = fuser.scan sum %x dim 1 : !fuser.tensor<4x8xi32> -> !fuser.tensor<4x8xi32>
  func.return
}
// CHECK: fuser.scan sum: result dtype is i32, expected i64

// -----

// max and min keep the dtype.
func.func @scan_max_widens(%x: !fuser.tensor<4x8xi1>) {
  %r = fuser.scan max %x dim 1 : !fuser.tensor<4x8xi1> -> !fuser.tensor<4x8xi64>
  func.return
}
// CHECK: fuser.scan max: result dtype is i64, expected i1

// -----

func.func @scan_changes_shape(%x: !fuser.tensor<4x?xf16>) {
  %r = fuser.scan prod %x dim 0 : !fuser.tensor<4x?xf16> -> !fuser.tensor<5x?xf16>
  func.return
}
// CHECK: fuser.scan prod: result dim 0 is 5, expected 4 (result [5, ?], inferred [4, ?])

// -----

func.func @scan_rank0(%x: !fuser.tensor<f32>) {
  %r = fuser.scan min %x dim 0 : !fuser.tensor<f32> -> !fuser.tensor<f32>
  func.return
}
// CHECK: fuser.scan min: dim 0 is out of range for the input [] (rank 0)

// -----

func.func @select_dim_out_of_range(%x: !fuser.tensor<4x8xf32>, %k: i64) {
  %r = fuser.select %x[%k] dim 2 : (!fuser.tensor<4x8xf32>, i64) -> !fuser.tensor<4x8xf32>
  func.return
}
// CHECK: fuser.select: dim 2 is out of range for the input [4, 8] (rank 2)

// -----

// A constant index is checked against a static extent (torch's range: -extent..extent-1).
func.func @select_index_out_of_range(%x: !fuser.tensor<4x8xf32>) {
  %k = arith.constant 8 : i64
  %r = fuser.select %x[%k] dim 1 : (!fuser.tensor<4x8xf32>, i64) -> !fuser.tensor<4xf32>
  func.return
}
// CHECK: fuser.select: index 8 is out of range for dim 1 of extent 8 (valid: -8..7)

// -----

func.func @select_negative_index_out_of_range(%x: !fuser.tensor<4x8xf32>) {
  %k = arith.constant -5 : i64
  %r = fuser.select %x[%k] dim 0 : (!fuser.tensor<4x8xf32>, i64) -> !fuser.tensor<8xf32>
  func.return
}
// CHECK: fuser.select: index -5 is out of range for dim 0 of extent 4 (valid: -4..3)

// -----

func.func @select_float_index(%x: !fuser.tensor<4x8xf32>, %k: f64) {
  %r = fuser.select %x[%k] dim 0 : (!fuser.tensor<4x8xf32>, f64) -> !fuser.tensor<8xf32>
  func.return
}
// CHECK: fuser.select: index must be an i64 or i32 scalar, got f64

// -----

// The selected dim goes: the result has one dim less.
func.func @select_keeps_dim(%x: !fuser.tensor<4x8xf32>, %k: i64) {
  %r = fuser.select %x[%k] dim 0 : (!fuser.tensor<4x8xf32>, i64) -> !fuser.tensor<1x8xf32>
  func.return
}
// CHECK: fuser.select: result has rank 2 ([1, 8]), expected rank 1 ([8])
