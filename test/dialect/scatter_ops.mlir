// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// fuser.scatter (torch.scatter): the result is shaped like the input; the index may be smaller
// than the input off the scattered dim (2 <= 4 in dim 0) and smaller than src everywhere.
func.func @scatter(%x: !fuser.tensor<4x?xf32>, %i: !fuser.tensor<2x3xi64>, %s: !fuser.tensor<?x5xf32>) -> !fuser.tensor<4x?xf32> {
  %r = fuser.scatter %x[%i] = %s dim 1 : (!fuser.tensor<4x?xf32>, !fuser.tensor<2x3xi64>, !fuser.tensor<?x5xf32>) -> !fuser.tensor<4x?xf32>
  func.return %r : !fuser.tensor<4x?xf32>
}
// CHECK-LABEL: func.func @scatter
// CHECK-NEXT: %r = fuser.scatter %x[%i] = %s dim 1 : (!fuser.tensor<4x?xf32>, !fuser.tensor<2x3xi64>, !fuser.tensor<?x5xf32>) -> !fuser.tensor<4x?xf32>

// -----

// One target per row (a one-hot), an i32 index, a broadcast src; along dim 0 of a 3-D input.
func.func @scatter_one_per_row(%x: !fuser.tensor<?x?x8xbf16>, %i: !fuser.tensor<bx?x8xi32>, %s: !fuser.tensor<bxbx8xbf16>) -> !fuser.tensor<?x?x8xbf16> {
  %r = fuser.scatter %x[%i] = %s dim 0 : (!fuser.tensor<?x?x8xbf16>, !fuser.tensor<bx?x8xi32>, !fuser.tensor<bxbx8xbf16>) -> !fuser.tensor<?x?x8xbf16>
  func.return %r : !fuser.tensor<?x?x8xbf16>
}
// CHECK-LABEL: func.func @scatter_one_per_row
// CHECK-NEXT: %r = fuser.scatter %x[%i] = %s dim 0 : (!fuser.tensor<?x?x8xbf16>, !fuser.tensor<bx?x8xi32>, !fuser.tensor<bxbx8xbf16>) -> !fuser.tensor<?x?x8xbf16>
