// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier messages of scatter: each names the operand, the dim and the extents.

func.func @scatter_index_rank(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<4xi64>, %s: !fuser.tensor<4x8xf32>) {
  %r = fuser.scatter %x[%i] = %s dim 1 : (!fuser.tensor<4x8xf32>, !fuser.tensor<4xi64>, !fuser.tensor<4x8xf32>) -> !fuser.tensor<4x8xf32>
  func.return
}
// CHECK: fuser.scatter: index [4] has rank 1 but the input [4, 8] has rank 2; they must have the same rank

// -----

func.func @scatter_src_rank(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<4x2xi64>, %s: !fuser.tensor<8xf32>) {
  %r = fuser.scatter %x[%i] = %s dim 1 : (!fuser.tensor<4x8xf32>, !fuser.tensor<4x2xi64>, !fuser.tensor<8xf32>) -> !fuser.tensor<4x8xf32>
  func.return
}
// CHECK: fuser.scatter: src [8] has rank 1 but the input [4, 8] has rank 2; they must have the same rank

// -----

func.func @scatter_float_index(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<4x2xf32>, %s: !fuser.tensor<4x2xf32>) {
  %r = fuser.scatter %x[%i] = %s dim 1 : (!fuser.tensor<4x8xf32>, !fuser.tensor<4x2xf32>, !fuser.tensor<4x2xf32>) -> !fuser.tensor<4x8xf32>
  func.return
}
// CHECK: fuser.scatter: index must have an integer dtype, got f32

// -----

func.func @scatter_src_dtype(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<4x2xi64>, %s: !fuser.tensor<4x2xf16>) {
  %r = fuser.scatter %x[%i] = %s dim 1 : (!fuser.tensor<4x8xf32>, !fuser.tensor<4x2xi64>, !fuser.tensor<4x2xf16>) -> !fuser.tensor<4x8xf32>
  func.return
}
// CHECK: fuser.scatter: src dtype f16 differs from the input's f32

// -----

// Every index element needs a src element.
func.func @scatter_index_beyond_src(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<4x3xi64>, %s: !fuser.tensor<4x2xf32>) {
  %r = fuser.scatter %x[%i] = %s dim 1 : (!fuser.tensor<4x8xf32>, !fuser.tensor<4x3xi64>, !fuser.tensor<4x2xf32>) -> !fuser.tensor<4x8xf32>
  func.return
}
// CHECK: fuser.scatter: index extent 3 exceeds src extent 2 in dim 1

// -----

// Off the scattered dim the index picks positions of the input itself.
func.func @scatter_index_beyond_input(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<5x2xi64>, %s: !fuser.tensor<5x2xf32>) {
  %r = fuser.scatter %x[%i] = %s dim 1 : (!fuser.tensor<4x8xf32>, !fuser.tensor<5x2xi64>, !fuser.tensor<5x2xf32>) -> !fuser.tensor<4x8xf32>
  func.return
}
// CHECK: fuser.scatter: index extent 5 exceeds input extent 4 in dim 0 (only dim 1 is scattered)

// -----

func.func @scatter_dim_out_of_range(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<4x2xi64>, %s: !fuser.tensor<4x2xf32>) {
  %r = fuser.scatter %x[%i] = %s dim 2 : (!fuser.tensor<4x8xf32>, !fuser.tensor<4x2xi64>, !fuser.tensor<4x2xf32>) -> !fuser.tensor<4x8xf32>
  func.return
}
// CHECK: fuser.scatter: dim 2 is out of range for the input [4, 8] (rank 2)

// -----

// The result is shaped like the input, not like the index.
func.func @scatter_result_shape(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<4x2xi64>, %s: !fuser.tensor<4x2xf32>) {
  %r = fuser.scatter %x[%i] = %s dim 1 : (!fuser.tensor<4x8xf32>, !fuser.tensor<4x2xi64>, !fuser.tensor<4x2xf32>) -> !fuser.tensor<4x2xf32>
  func.return
}
// CHECK: fuser.scatter: result dim 1 is 2, expected 8
