// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// Ops that move or re-label dims: broadcast, broadcast_in_dim, squeeze, expand, reshape, permute.

func.func @broadcast(%x: !fuser.tensor<?x8xf32>) -> !fuser.tensor<bx?xbx8xf32> {
  %r = fuser.broadcast %x dims [0, 2] : !fuser.tensor<?x8xf32> -> !fuser.tensor<bx?xbx8xf32>
  func.return %r : !fuser.tensor<bx?xbx8xf32>
}
// CHECK-LABEL: func.func @broadcast
// CHECK-NEXT: %r = fuser.broadcast %x dims [0, 2] : !fuser.tensor<?x8xf32> -> !fuser.tensor<bx?xbx8xf32>

// -----

// A rank-0 input broadcast to rank 1 (nvFuser's scalar-to-tensor broadcast).
func.func @broadcast_rank0(%x: !fuser.tensor<f32>) -> !fuser.tensor<bxf32> {
  %r = fuser.broadcast %x dims [0] : !fuser.tensor<f32> -> !fuser.tensor<bxf32>
  func.return %r : !fuser.tensor<bxf32>
}
// CHECK-LABEL: func.func @broadcast_rank0
// CHECK-NEXT: %r = fuser.broadcast %x dims [0] : !fuser.tensor<f32> -> !fuser.tensor<bxf32>

// -----

func.func @broadcast_in_dim(%x: !fuser.tensor<?x4xf16>) -> !fuser.tensor<?xbx4xf16> {
  %r = fuser.broadcast_in_dim %x dims [0, 2] : !fuser.tensor<?x4xf16> -> !fuser.tensor<?xbx4xf16>
  func.return %r : !fuser.tensor<?xbx4xf16>
}
// CHECK-LABEL: func.func @broadcast_in_dim
// CHECK-NEXT: %r = fuser.broadcast_in_dim %x dims [0, 2] : !fuser.tensor<?x4xf16> -> !fuser.tensor<?xbx4xf16>

// -----

// Both broadcast dims and static extent-1 dims can be squeezed.
func.func @squeeze(%x: !fuser.tensor<bx?x1xbf16>) -> !fuser.tensor<?xbf16> {
  %r = fuser.squeeze %x dims [0, 2] : !fuser.tensor<bx?x1xbf16> -> !fuser.tensor<?xbf16>
  func.return %r : !fuser.tensor<?xbf16>
}
// CHECK-LABEL: func.func @squeeze
// CHECK-NEXT: %r = fuser.squeeze %x dims [0, 2] : !fuser.tensor<bx?x1xbf16> -> !fuser.tensor<?xbf16>

// -----

// Static target extents need no operands; a `?` target takes one i64 extent operand.
func.func @expand(%x: !fuser.tensor<bx8xf32>, %n: i64) -> (!fuser.tensor<4x8xf32>, !fuser.tensor<?x8xf32>) {
  %s = fuser.expand %x : !fuser.tensor<bx8xf32> -> !fuser.tensor<4x8xf32>
  %d = fuser.expand %x(%n) : !fuser.tensor<bx8xf32> -> !fuser.tensor<?x8xf32>
  func.return %s, %d : !fuser.tensor<4x8xf32>, !fuser.tensor<?x8xf32>
}
// CHECK-LABEL: func.func @expand
// CHECK-NEXT: %s = fuser.expand %x : !fuser.tensor<bx8xf32> -> !fuser.tensor<4x8xf32>
// CHECK-NEXT: %d = fuser.expand %x(%n) : !fuser.tensor<bx8xf32> -> !fuser.tensor<?x8xf32>

// -----

func.func @reshape(%x: !fuser.tensor<2x3x4xi32>, %y: !fuser.tensor<?x?xi64>, %m: i64, %n: i64) -> (!fuser.tensor<6x4xi32>, !fuser.tensor<?x2x?xi64>) {
  %s = fuser.reshape %x : !fuser.tensor<2x3x4xi32> -> !fuser.tensor<6x4xi32>
  %d = fuser.reshape %y(%m, %n) : !fuser.tensor<?x?xi64> -> !fuser.tensor<?x2x?xi64>
  func.return %s, %d : !fuser.tensor<6x4xi32>, !fuser.tensor<?x2x?xi64>
}
// CHECK-LABEL: func.func @reshape
// CHECK-NEXT: %s = fuser.reshape %x : !fuser.tensor<2x3x4xi32> -> !fuser.tensor<6x4xi32>
// CHECK-NEXT: %d = fuser.reshape %y(%m, %n) : !fuser.tensor<?x?xi64> -> !fuser.tensor<?x2x?xi64>

// -----

// Result dim i is input dim dims[i]; a layout-carrying input yields a plain result.
func.func @permute(%x: !fuser.tensor<?x3x?xi1, order [0, 2, 1]>) -> !fuser.tensor<?x?x3xi1> {
  %r = fuser.permute %x dims [2, 0, 1] : !fuser.tensor<?x3x?xi1, order [0, 2, 1]> -> !fuser.tensor<?x?x3xi1>
  func.return %r : !fuser.tensor<?x?x3xi1>
}
// CHECK-LABEL: func.func @permute
// CHECK-NEXT: %r = fuser.permute %x dims [2, 0, 1] : !fuser.tensor<?x3x?xi1, order [0, 2, 1]> -> !fuser.tensor<?x?x3xi1>
