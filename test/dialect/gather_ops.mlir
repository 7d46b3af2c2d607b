// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// The gather family: gather (torch.gather), take_along_axis, index_select.

// torch.gather: the result is shaped like the index, which may be smaller than the
// input off the gathered dim (4 <= 6 in dim 0).
func.func @gather(%x: !fuser.tensor<6x?xf32>, %i: !fuser.tensor<4x3xi64>) -> !fuser.tensor<4x3xf32> {
  %r = fuser.gather %x[%i] dim 1 : (!fuser.tensor<6x?xf32>, !fuser.tensor<4x3xi64>) -> !fuser.tensor<4x3xf32>
  func.return %r : !fuser.tensor<4x3xf32>
}
// CHECK-LABEL: func.func @gather
// CHECK-NEXT: %r = fuser.gather %x[%i] dim 1 : (!fuser.tensor<6x?xf32>, !fuser.tensor<4x3xi64>) -> !fuser.tensor<4x3xf32>

// -----

// The cross-entropy lookup: one label per row (an i32 index works as well as i64).
func.func @take_along_axis(%logits: !fuser.tensor<?x?xbf16>, %labels: !fuser.tensor<?xbxi32>) -> !fuser.tensor<?xbxbf16> {
  %r = fuser.take_along_axis %logits[%labels] dim 1 : (!fuser.tensor<?x?xbf16>, !fuser.tensor<?xbxi32>) -> !fuser.tensor<?xbxbf16>
  func.return %r : !fuser.tensor<?xbxbf16>
}
// CHECK-LABEL: func.func @take_along_axis
// CHECK-NEXT: %r = fuser.take_along_axis %logits[%labels] dim 1 : (!fuser.tensor<?x?xbf16>, !fuser.tensor<?xbxi32>) -> !fuser.tensor<?xbxbf16>

// -----

// A 1-D index picks whole rows; a rank-0 index picks one (the dim stays, extent 1).
func.func @index_select(%x: !fuser.tensor<?x16xf64>, %rows: !fuser.tensor<?xi64>, %one: !fuser.tensor<i64>) -> (!fuser.tensor<?x16xf64>, !fuser.tensor<1x16xf64>) {
  %r = fuser.index_select %x[%rows] dim 0 : (!fuser.tensor<?x16xf64>, !fuser.tensor<?xi64>) -> !fuser.tensor<?x16xf64>
  %s = fuser.index_select %x[%one] dim 0 : (!fuser.tensor<?x16xf64>, !fuser.tensor<i64>) -> !fuser.tensor<1x16xf64>
  func.return %r, %s : !fuser.tensor<?x16xf64>, !fuser.tensor<1x16xf64>
}
// CHECK-LABEL: func.func @index_select
// CHECK-NEXT: %r = fuser.index_select %x[%rows] dim 0 : (!fuser.tensor<?x16xf64>, !fuser.tensor<?xi64>) -> !fuser.tensor<?x16xf64>
// CHECK-NEXT: %s = fuser.index_select %x[%one] dim 0 : (!fuser.tensor<?x16xf64>, !fuser.tensor<i64>) -> !fuser.tensor<1x16xf64>
