// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier messages of broadcast, broadcast_in_dim, squeeze, expand, reshape, permute,
// and of the result check every op shares. Each names the op, the dim and the extents.

func.func @broadcast_dim_out_of_range(%x: !fuser.tensor<?xf32>) {
  %r = fuser.broadcast %x dims [2] : !fuser.tensor<?xf32> -> !fuser.tensor<bx?xf32>
  func.return
}
// CHECK: fuser.broadcast: broadcast dim 2 is out of range for the rank-2 result

// -----

func.func @broadcast_keeps_wrong_rank(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.broadcast %x dims [0] : !fuser.tensor<?x4xf32> -> !fuser.tensor<bx?xf32>
  func.return
}
// CHECK: fuser.broadcast: a rank-2 result with broadcast dims [0] keeps 1 input dim(s), but the input [?, 4] has rank 2

// -----

func.func @broadcast_duplicate_dims(%x: !fuser.tensor<?xf32>) {
  %r = fuser.broadcast %x dims [0, 0] : !fuser.tensor<?xf32> -> !fuser.tensor<bxbx?xf32>
  func.return
}
// CHECK: fuser.broadcast: broadcast dims [0, 0] contain duplicates

// -----

func.func @broadcast_in_dim_count(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.broadcast_in_dim %x dims [0] : !fuser.tensor<?x4xf32> -> !fuser.tensor<?xbx4xf32>
  func.return
}
// CHECK: fuser.broadcast_in_dim: broadcast_dims [0] maps 1 input dim(s) but the input [?, 4] has rank 2 (one entry per input dim)

// -----

func.func @broadcast_in_dim_out_of_range(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.broadcast_in_dim %x dims [0, 3] : !fuser.tensor<?x4xf32> -> !fuser.tensor<?xbx4xf32>
  func.return
}
// CHECK: fuser.broadcast_in_dim: broadcast dim 3 is out of range for the rank-3 result

// -----

func.func @broadcast_in_dim_not_increasing(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.broadcast_in_dim %x dims [2, 0] : !fuser.tensor<?x4xf32> -> !fuser.tensor<4xbx?xf32>
  func.return
}
// CHECK: fuser.broadcast_in_dim: broadcast_dims [2, 0] must be strictly increasing

// -----

func.func @broadcast_in_dim_duplicates(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.broadcast_in_dim %x dims [1, 1] : !fuser.tensor<?x4xf32> -> !fuser.tensor<bx4xbxf32>
  func.return
}
// CHECK: fuser.broadcast_in_dim: broadcast_dims [1, 1] must be strictly increasing

// -----

func.func @squeeze_non_size_1(%x: !fuser.tensor<4x?xf32>) {
  %r = fuser.squeeze %x dims [0] : !fuser.tensor<4x?xf32> -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.squeeze: cannot squeeze dim 0 of [4, ?]: its extent is 4, not 1

// -----

// A dynamic extent may turn out to be anything: only 1 and `b` can be squeezed.
func.func @squeeze_dynamic(%x: !fuser.tensor<bx?xf32>) {
  %r = fuser.squeeze %x dims [1] : !fuser.tensor<bx?xf32> -> !fuser.tensor<bxf32>
  func.return
}
// CHECK: fuser.squeeze: cannot squeeze dim 1 of [b, ?]: its extent is ?, not 1

// -----

func.func @expand_non_broadcast(%x: !fuser.tensor<3x8xf32>) {
  %r = fuser.expand %x : !fuser.tensor<3x8xf32> -> !fuser.tensor<6x8xf32>
  func.return
}
// CHECK: fuser.expand: dim 0 has extent 3 and is not a broadcast dim, so it cannot expand to 6

// -----

func.func @expand_extent_operands(%x: !fuser.tensor<bx8xf32>, %n: i64) {
  %r = fuser.expand %x(%n, %n) : !fuser.tensor<bx8xf32> -> !fuser.tensor<?x8xf32>
  func.return
}
// CHECK: fuser.expand: result [?, 8] has 1 dynamic extent(s) but 2 extent operand(s) were given (one per `?`)

// -----

func.func @reshape_element_count(%x: !fuser.tensor<2x3x4xf32>) {
  %r = fuser.reshape %x : !fuser.tensor<2x3x4xf32> -> !fuser.tensor<5x5xf32>
  func.return
}
// CHECK: fuser.reshape: cannot reshape [2, 3, 4] (24 elements) to [5, 5] (25 elements)

// -----

func.func @permute_not_a_permutation(%x: !fuser.tensor<?x4x8xf32>) {
  %r = fuser.permute %x dims [0, 0, 1] : !fuser.tensor<?x4x8xf32> -> !fuser.tensor<?x?x4xf32>
  func.return
}
// CHECK: fuser.permute: dims [0, 0, 1] is not a permutation of the 3 dims of the input

// -----

// The shared result check: the declared result must agree with the shape rule.
func.func @result_dim_mismatch(%x: !fuser.tensor<?x4x8xf32>) {
  %r = fuser.permute %x dims [2, 0, 1] : !fuser.tensor<?x4x8xf32> -> !fuser.tensor<4x?x8xf32>
  func.return
}
// CHECK: fuser.permute: result dim 0 is 4, expected 8 (result [4, ?, 8], inferred [8, ?, 4])

// -----

func.func @result_rank_mismatch(%x: !fuser.tensor<bx8xf32>) {
  %r = fuser.squeeze %x dims [0] : !fuser.tensor<bx8xf32> -> !fuser.tensor<bx8xf32>
  func.return
}
// CHECK: fuser.squeeze: result has rank 2 ([b, 8]), expected rank 1 ([8])

// -----

func.func @result_dtype_mismatch(%x: !fuser.tensor<?xf32>) {
  %r = fuser.broadcast %x dims [0] : !fuser.tensor<?xf32> -> !fuser.tensor<bx?xf16>
  func.return
}
// CHECK: fuser.broadcast: result dtype is f16, expected f32

// -----

// Only fusion inputs arrive with a layout; an op's result layout is decided later.
func.func @result_with_layout(%x: !fuser.tensor<?x8xf32>) {
  %r = fuser.permute %x dims [1, 0] : !fuser.tensor<?x8xf32> -> !fuser.tensor<8x?xf32, order [0, 1]>
  func.return
}
// CHECK: fuser.permute: only fusion inputs carry a layout; the result has order [0, 1]
