// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier messages of iota, full and dim.

func.func @dim_out_of_range(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.dim %x, 2 : !fuser.tensor<?x4xf32>
  func.return
}
// CHECK: fuser.dim: dim 2 is out of range for f32[?, 4] (rank 2)

// -----

func.func @full_extent_count(%n: i64, %v: f64) {
  %r = fuser.full(%n) value %v : (f64) -> !fuser.tensor<?x?xf32>
  func.return
}
// CHECK: fuser.full: result f32[?, ?] has 2 dynamic extent(s) but 1 extent operand(s) were given (one per `?`)

// -----

func.func @full_value_not_scalar(%v: !fuser.tensor<f32>) {
  %r = fuser.full value %v : (!fuser.tensor<f32>) -> !fuser.tensor<4xf32>
  func.return
}
// CHECK: fuser.full: fill value must be a scalar, got !fuser.tensor<f32>

// -----

func.func @iota_not_1d(%n: i64) {
  %r = fuser.iota %n, %n, %n : (i64, i64) -> !fuser.tensor<?x?xi64>
  func.return
}
// CHECK: fuser.iota: result must be 1-D, got i64[?, ?]
