// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier messages of reductions.

func.func @reduction_dim_out_of_range(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.reduction sum %x dims [2] : !fuser.tensor<?x4xf32> -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.reduction sum: reduction dim 2 is out of range for the input [?, 4] (rank 2)

// -----

func.func @reduction_duplicate_dims(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.reduction max %x dims [1, 1] : !fuser.tensor<?x4xf32> -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.reduction max: reduction dims [1, 1] contain duplicates

// -----

// keepdim leaves a broadcast dim where the reduced dim was.
func.func @reduction_keepdim_result(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.reduction min %x dims [1] keepdim : !fuser.tensor<?x4xf32> -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.reduction min: result has rank 1 ([?]), expected rank 2 ([?, b])

// -----

func.func @reduction_result_dim(%x: !fuser.tensor<3x4xf32>) {
  %r = fuser.reduction sum %x dims [0] : !fuser.tensor<3x4xf32> -> !fuser.tensor<3xf32>
  func.return
}
// CHECK: fuser.reduction sum: result dim 0 is 3, expected 4 (result [3], inferred [4])
