// RUN: fuser-opt %s --split-input-file -p allocation-order-inference | filecheck %s
// Running it twice changes nothing (a hint is recomputed, a requirement never touched):
// RUN: fuser-opt %s --split-input-file -p allocation-order-inference,allocation-order-inference | filecheck %s

// A channels-last input gives a channels-last HINT (`fuser.stride_order_hint`), printed
// apart from a REQUIREMENT (`fuser.stride_order`).
func.func @channels_last(%x: !fuser.tensor<?x?x?x?xf32, order [3, 0, 2, 1]>) -> !fuser.tensor<?x?x?x?xf32> {
  %r = fuser.unary relu %x : !fuser.tensor<?x?x?x?xf32, order [3, 0, 2, 1]> -> !fuser.tensor<?x?x?x?xf32>
  func.return %r : !fuser.tensor<?x?x?x?xf32>
}
// CHECK-LABEL: func.func @channels_last
// CHECK-SAME:    -> (!fuser.tensor<?x?x?x?xf32> {fuser.stride_order_hint = array<i64: 3, 0, 2, 1>})

// -----

// A requirement is never overwritten, and gets no hint beside it.
func.func @requirement_kept(%x: !fuser.tensor<?x?x?x?xf32, order [3, 0, 2, 1]>) -> (!fuser.tensor<?x?x?x?xf32> {fuser.stride_order = array<i64: 3, 2, 1, 0>}, !fuser.tensor<?x?x?x?xf32>) {
  %r = fuser.unary relu %x : !fuser.tensor<?x?x?x?xf32, order [3, 0, 2, 1]> -> !fuser.tensor<?x?x?x?xf32>
  func.return %r, %r : !fuser.tensor<?x?x?x?xf32>, !fuser.tensor<?x?x?x?xf32>
}
// CHECK-LABEL: func.func @requirement_kept
// CHECK-SAME:    -> (!fuser.tensor<?x?x?x?xf32> {fuser.stride_order = array<i64: 3, 2, 1, 0>}, !fuser.tensor<?x?x?x?xf32> {fuser.stride_order_hint = array<i64: 3, 0, 2, 1>})
// CHECK-NOT:     fuser.stride_order_hint = array<i64: 3, 2, 1, 0>

// -----

// The reference is the input with the most mapped non-broadcast dims: %x (2 dims, column
// major) beats %y (1 dim, row major).
func.func @reference_most_mapped(%x: !fuser.tensor<?x?xf32, order [0, 1]>, %y: !fuser.tensor<bx?xf32>) -> !fuser.tensor<?x?xf32> {
  %s = fuser.binary add %x, %y : (!fuser.tensor<?x?xf32, order [0, 1]>, !fuser.tensor<bx?xf32>) -> !fuser.tensor<?x?xf32>
  func.return %s : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @reference_most_mapped
// CHECK-SAME:    -> (!fuser.tensor<?x?xf32> {fuser.stride_order_hint = array<i64: 0, 1>})

// -----

// Row-major inputs give row-major hints; a permute maps dims across.
func.func @permute(%x: !fuser.tensor<?x?x?xf32>) -> (!fuser.tensor<?x?x?xf32>, !fuser.tensor<?x?x?xf32>) {
  %p = fuser.permute %x dims [2, 0, 1] : !fuser.tensor<?x?x?xf32> -> !fuser.tensor<?x?x?xf32>
  %n = fuser.unary neg %x : !fuser.tensor<?x?x?xf32> -> !fuser.tensor<?x?x?xf32>
  func.return %p, %n : !fuser.tensor<?x?x?xf32>, !fuser.tensor<?x?x?xf32>
}
// Output dim 0 is input dim 2 (innermost), dim 1 is input dim 0 (outermost), dim 2 is input dim 1.
// CHECK-LABEL: func.func @permute
// CHECK-SAME:    -> (!fuser.tensor<?x?x?xf32> {fuser.stride_order_hint = array<i64: 0, 2, 1>}, !fuser.tensor<?x?x?xf32> {fuser.stride_order_hint = array<i64: 2, 1, 0>})

// -----

// A reduction drops the reduced dim; the others keep their order (NHWC without C is NHW).
func.func @reduction(%x: !fuser.tensor<?x?x?x?xf32, order [3, 0, 2, 1]>) -> (!fuser.tensor<?x?x?xf32>, !fuser.tensor<?x?x?xf32>) {
  %s = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?x?x?xf32, order [3, 0, 2, 1]> -> !fuser.tensor<?x?x?xf32>
  %t = fuser.reduction sum %x dims [3] : !fuser.tensor<?x?x?x?xf32, order [3, 0, 2, 1]> -> !fuser.tensor<?x?x?xf32>
  func.return %s, %t : !fuser.tensor<?x?x?xf32>, !fuser.tensor<?x?x?xf32>
}
// Reducing W of NHWC leaves N, C, H with C innermost: order [2, 0, 1].
// CHECK-LABEL: func.func @reduction
// CHECK-SAME:    -> (!fuser.tensor<?x?x?xf32> {fuser.stride_order_hint = array<i64: 2, 1, 0>}, !fuser.tensor<?x?x?xf32> {fuser.stride_order_hint = array<i64: 2, 0, 1>})

// -----

// A new broadcast dim goes right outside the outermost dim that follows it logically:
// channels-last [N, C, H, W] -> [N, b, C, H, W] is laid out N, b, H, W, C.
func.func @broadcast_dim(%x: !fuser.tensor<?x?x?x?xf32, order [3, 0, 2, 1]>) -> !fuser.tensor<?xbx?x?x?xf32> {
  %b = fuser.broadcast %x dims [1] : !fuser.tensor<?x?x?x?xf32, order [3, 0, 2, 1]> -> !fuser.tensor<?xbx?x?x?xf32>
  func.return %b : !fuser.tensor<?xbx?x?x?xf32>
}
// CHECK-LABEL: func.func @broadcast_dim
// CHECK-SAME:    -> (!fuser.tensor<?xbx?x?x?xf32> {fuser.stride_order_hint = array<i64: 4, 3, 0, 2, 1>})

// -----

// A dim that maps to no input (from a factory) goes outermost.
func.func @unmapped_dim(%x: !fuser.tensor<?x?xf32, order [0, 1]>, %n: i64) -> !fuser.tensor<?x?x?xf32> {
  %b = fuser.broadcast %x dims [0] : !fuser.tensor<?x?xf32, order [0, 1]> -> !fuser.tensor<bx?x?xf32>
  %zero = arith.constant 0.0 : f64
  %d0 = fuser.dim %x, 0 : !fuser.tensor<?x?xf32, order [0, 1]>
  %d1 = fuser.dim %x, 1 : !fuser.tensor<?x?xf32, order [0, 1]>
  %f = fuser.full(%n, %d0, %d1) value %zero : (f64) -> !fuser.tensor<?x?x?xf32>
  %s = fuser.binary add %b, %f : (!fuser.tensor<bx?x?xf32>, !fuser.tensor<?x?x?xf32>) -> !fuser.tensor<?x?x?xf32>
  func.return %s : !fuser.tensor<?x?x?xf32>
}
// CHECK-LABEL: func.func @unmapped_dim
// CHECK-SAME:    -> (!fuser.tensor<?x?x?xf32> {fuser.stride_order_hint = array<i64: 2, 0, 1>})

// -----

// No input maps to the output: no hint; an existing hint is then left as it is.
func.func @no_reference(%n: i64) -> (!fuser.tensor<?xi64>, !fuser.tensor<?xi64> {fuser.stride_order_hint = array<i64: 0>}) {
  %zero = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %i = fuser.iota %n, %zero, %one : (i64, i64) -> !fuser.tensor<?xi64>
  func.return %i, %i : !fuser.tensor<?xi64>, !fuser.tensor<?xi64>
}
// CHECK-LABEL: func.func @no_reference
// CHECK-SAME:    -> (!fuser.tensor<?xi64>, !fuser.tensor<?xi64> {fuser.stride_order_hint = array<i64: 0>})

// -----

// An existing hint is recomputed.
func.func @hint_replaced(%x: !fuser.tensor<?x?xf32, order [0, 1]>) -> (!fuser.tensor<?x?xf32> {fuser.stride_order_hint = array<i64: 1, 0>}) {
  %r = fuser.unary exp %x : !fuser.tensor<?x?xf32, order [0, 1]> -> !fuser.tensor<?x?xf32>
  func.return %r : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @hint_replaced
// CHECK-SAME:    -> (!fuser.tensor<?x?xf32> {fuser.stride_order_hint = array<i64: 0, 1>})

// -----

// Scalar outputs get nothing.
func.func @scalar_output(%x: !fuser.tensor<?x?xf32>) -> (i64, !fuser.tensor<?x?xf32>) {
  %d = fuser.dim %x, 0 : !fuser.tensor<?x?xf32>
  %r = fuser.unary exp %x : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  func.return %d, %r : i64, !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @scalar_output
// CHECK-SAME:    -> (i64, !fuser.tensor<?x?xf32> {fuser.stride_order_hint = array<i64: 1, 0>})
