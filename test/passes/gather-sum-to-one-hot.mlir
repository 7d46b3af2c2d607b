// RUN: fuser-opt %s --split-input-file -p gather-sum-to-one-hot | filecheck %s

// sum over dim 1 of a size-1 take_along_axis becomes a masked row reduction.
// CHECK-LABEL: func.func @take_sum
// CHECK-NEXT:    %[[C:.*]] = fuser.dim %x, 1
// CHECK:         %[[IOTA:.*]] = fuser.iota %[[C]]
// CHECK-NEXT:    %[[ROW:.*]] = fuser.broadcast_in_dim %[[IOTA]] dims [1] : !fuser.tensor<?xi64> -> !fuser.tensor<bx?xi64>
// CHECK-NEXT:    %[[HIT:.*]] = fuser.binary eq %[[ROW]], %i : (!fuser.tensor<bx?xi64>, !fuser.tensor<?xbxi64>) -> !fuser.tensor<?x?xi1>
// CHECK:         %[[M:.*]] = fuser.where %[[HIT]], %x, %{{.*}} : (!fuser.tensor<?x?xi1>, !fuser.tensor<?x?xf32>, f64) -> !fuser.tensor<?x?xf32>
// CHECK-NEXT:    %[[S:.*]] = fuser.reduction sum %[[M]] dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    func.return %[[S]]
// CHECK-NOT:     take_along_axis
func.func @take_sum(%x: !fuser.tensor<?x?xf32>, %i: !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xf32> {
  %0 = fuser.take_along_axis %x[%i] dim 1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32>
  %1 = fuser.reduction sum %0 dims [1] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xf32>
  func.return %1 : !fuser.tensor<?xf32>
}

// -----

// A statically exact gather with keepdim, static extents: the iota length is a constant.
// CHECK-LABEL: func.func @gather_sum_keepdim
// CHECK:         arith.constant 16 : i64
// CHECK:         fuser.reduction sum %{{.*}} dims [1] keepdim : !fuser.tensor<8x16xf32> -> !fuser.tensor<8xbxf32>
func.func @gather_sum_keepdim(%x: !fuser.tensor<8x16xf32>, %i: !fuser.tensor<8xbxi64>) -> !fuser.tensor<8xbxf32> {
  %0 = fuser.gather %x[%i] dim 1 : (!fuser.tensor<8x16xf32>, !fuser.tensor<8xbxi64>) -> !fuser.tensor<8xbxf32>
  %1 = fuser.reduction sum %0 dims [1] keepdim : !fuser.tensor<8xbxf32> -> !fuser.tensor<8xbxf32>
  func.return %1 : !fuser.tensor<8xbxf32>
}

// -----

// Must not fire: the sum is over another dim.
// CHECK-LABEL: func.func @sum_other_dim
// CHECK-NEXT:    fuser.take_along_axis
// CHECK-NEXT:    fuser.reduction sum %0 dims [0]
func.func @sum_other_dim(%x: !fuser.tensor<?x?xf32>, %i: !fuser.tensor<?xbxi64>) -> !fuser.tensor<bxf32> {
  %0 = fuser.take_along_axis %x[%i] dim 1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32>
  %1 = fuser.reduction sum %0 dims [0] : !fuser.tensor<?xbxf32> -> !fuser.tensor<bxf32>
  func.return %1 : !fuser.tensor<bxf32>
}

// -----

// Must not fire: the index picks 2 entries per row (extent 2 on the gathered dim).
// CHECK-LABEL: func.func @two_per_row
// CHECK-NEXT:    fuser.take_along_axis
func.func @two_per_row(%x: !fuser.tensor<?x?xf32>, %i: !fuser.tensor<?x2xi64>) -> !fuser.tensor<?xf32> {
  %0 = fuser.take_along_axis %x[%i] dim 1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x2xi64>) -> !fuser.tensor<?x2xf32>
  %1 = fuser.reduction sum %0 dims [1] : !fuser.tensor<?x2xf32> -> !fuser.tensor<?xf32>
  func.return %1 : !fuser.tensor<?xf32>
}

// -----

// Must not fire: the gathered values are also a fusion output.
// CHECK-LABEL: func.func @gather_is_output
// CHECK-NEXT:    fuser.take_along_axis
func.func @gather_is_output(%x: !fuser.tensor<?x?xf32>, %i: !fuser.tensor<?xbxi64>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?xbxf32>) {
  %0 = fuser.take_along_axis %x[%i] dim 1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32>
  %1 = fuser.reduction sum %0 dims [1] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xf32>
  func.return %1, %0 : !fuser.tensor<?xf32>, !fuser.tensor<?xbxf32>
}
