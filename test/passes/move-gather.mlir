// RUN: fuser-opt %s --split-input-file -p move-gather | filecheck %s

// The bf16 logits are gathered directly; the cast moves after the take_along_axis.
// CHECK-LABEL: func.func @cast_then_take
// CHECK-NEXT:    %[[G:.*]] = fuser.take_along_axis %x[%i] dim 1 : (!fuser.tensor<?x?xbf16>, !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxbf16>
// CHECK-NEXT:    %[[C:.*]] = fuser.cast %[[G]] : !fuser.tensor<?xbxbf16> -> !fuser.tensor<?xbxf32>
// CHECK-NEXT:    func.return %[[C]]
func.func @cast_then_take(%x: !fuser.tensor<?x?xbf16>, %i: !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32> {
  %c = fuser.cast %x : !fuser.tensor<?x?xbf16> -> !fuser.tensor<?x?xf32>
  %0 = fuser.take_along_axis %c[%i] dim 1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32>
  func.return %0 : !fuser.tensor<?xbxf32>
}

// -----

// A unary op moves the same way.
// CHECK-LABEL: func.func @neg_then_take
// CHECK-NEXT:    %[[G:.*]] = fuser.take_along_axis %x[%i] dim 0
// CHECK-NEXT:    fuser.unary neg %[[G]]
func.func @neg_then_take(%x: !fuser.tensor<4x?xf32>, %i: !fuser.tensor<bx?xi64>) -> !fuser.tensor<bx?xf32> {
  %n = fuser.unary neg %x : !fuser.tensor<4x?xf32> -> !fuser.tensor<4x?xf32>
  %0 = fuser.take_along_axis %n[%i] dim 0 : (!fuser.tensor<4x?xf32>, !fuser.tensor<bx?xi64>) -> !fuser.tensor<bx?xf32>
  func.return %0 : !fuser.tensor<bx?xf32>
}

// -----

// Must not fire: the converted tensor is also a fusion output.
// CHECK-LABEL: func.func @cast_is_output
// CHECK-NEXT:    %c = fuser.cast %x
// CHECK-NEXT:    fuser.take_along_axis %c[%i]
func.func @cast_is_output(%x: !fuser.tensor<?x?xbf16>, %i: !fuser.tensor<?xbxi64>) -> (!fuser.tensor<?xbxf32>, !fuser.tensor<?x?xf32>) {
  %c = fuser.cast %x : !fuser.tensor<?x?xbf16> -> !fuser.tensor<?x?xf32>
  %0 = fuser.take_along_axis %c[%i] dim 1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32>
  func.return %0, %c : !fuser.tensor<?xbxf32>, !fuser.tensor<?x?xf32>
}

// -----

// Must not fire: the lookup tensor comes from a binary op.
// CHECK-LABEL: func.func @binary_producer
// CHECK:         fuser.binary sub
// CHECK-NEXT:    fuser.take_along_axis %d[%i]
func.func @binary_producer(%x: !fuser.tensor<?x?xf32>, %i: !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32> {
  %d = fuser.binary sub %x, %x : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  %0 = fuser.take_along_axis %d[%i] dim 1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32>
  func.return %0 : !fuser.tensor<?xbxf32>
}
