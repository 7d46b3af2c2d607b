// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier messages of gather, take_along_axis and index_select.

func.func @gather_index_rank(%x: !fuser.tensor<?x?xf32>, %i: !fuser.tensor<?xi64>) {
  %r = fuser.gather %x[%i] dim 1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xi64>) -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.gather: index [?] has rank 1 but the input [?, ?] has rank 2; they must have the same rank

// -----

// torch.gather allows a smaller index off the gathered dim, never a larger one.
func.func @gather_index_extent_too_big(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<5x2xi64>) {
  %r = fuser.gather %x[%i] dim 1 : (!fuser.tensor<4x8xf32>, !fuser.tensor<5x2xi64>) -> !fuser.tensor<5x2xf32>
  func.return
}
// CHECK: fuser.gather: index extent 5 exceeds input extent 4 in dim 0 (only dim 1 is gathered)

// -----

func.func @gather_float_index(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<4x2xf32>) {
  %r = fuser.gather %x[%i] dim 1 : (!fuser.tensor<4x8xf32>, !fuser.tensor<4x2xf32>) -> !fuser.tensor<4x2xf32>
  func.return
}
// CHECK: fuser.gather: index must have an integer dtype, got f32

// -----

func.func @gather_dim_out_of_range(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<4x2xi64>) {
  %r = fuser.gather %x[%i] dim 2 : (!fuser.tensor<4x8xf32>, !fuser.tensor<4x2xi64>) -> !fuser.tensor<4x2xf32>
  func.return
}
// CHECK: fuser.gather: dim 2 is out of range for the input [4, 8] (rank 2)

// -----

// take_along_axis is exact: off the gathered dim the extents match (or one broadcasts).
func.func @take_along_axis_extents(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<3x1xi64>) {
  %r = fuser.take_along_axis %x[%i] dim 1 : (!fuser.tensor<4x8xf32>, !fuser.tensor<3x1xi64>) -> !fuser.tensor<3x1xf32>
  func.return
}
// CHECK: fuser.take_along_axis: index extent 3 differs from input extent 4 in dim 0; take_along_axis needs equal (or broadcast) extents off dim 1

// -----

func.func @take_along_axis_bool_index(%x: !fuser.tensor<4x8xf32>, %i: !fuser.tensor<4x1xi1>) {
  %r = fuser.take_along_axis %x[%i] dim 1 : (!fuser.tensor<4x8xf32>, !fuser.tensor<4x1xi1>) -> !fuser.tensor<4x1xf32>
  func.return
}
// CHECK: fuser.take_along_axis: index must have an integer dtype, got i1

// -----

func.func @index_select_2d_index(%x: !fuser.tensor<?x8xf32>, %i: !fuser.tensor<2x2xi64>) {
  %r = fuser.index_select %x[%i] dim 0 : (!fuser.tensor<?x8xf32>, !fuser.tensor<2x2xi64>) -> !fuser.tensor<2x8xf32>
  func.return
}
// CHECK: fuser.index_select: index must be 1-D or a rank-0 tensor, got [2, 2] (rank 2)

// -----

func.func @index_select_result(%x: !fuser.tensor<?x8xf32>, %i: !fuser.tensor<3xi64>) {
  %r = fuser.index_select %x[%i] dim 1 : (!fuser.tensor<?x8xf32>, !fuser.tensor<3xi64>) -> !fuser.tensor<?x8xf32>
  func.return
}
// CHECK: fuser.index_select: result dim 1 is 8, expected 3 (result [?, 8], inferred [?, 3])

// -----

// The result takes the input's dtype, not the index's.
func.func @gather_result_dtype(%x: !fuser.tensor<4x8xf16>, %i: !fuser.tensor<4x2xi64>) {
  %r = fuser.gather %x[%i] dim 1 : (!fuser.tensor<4x8xf16>, !fuser.tensor<4x2xi64>) -> !fuser.tensor<4x2xi64>
  func.return
}
// CHECK: fuser.gather: result dtype is i64, expected f16
