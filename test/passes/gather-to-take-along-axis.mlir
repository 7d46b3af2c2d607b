// RUN: fuser-opt %s --split-input-file -p gather-to-take-along-axis | filecheck %s
// RUN: fuser-opt %s --split-input-file -p 'gather-to-take-along-axis{exact=0}' | filecheck %s --check-prefix=EXACT

// Static extents equal off the gathered dim: the gather is exact.
// CHECK-LABEL: func.func @static_exact
// CHECK-NEXT:    %0 = fuser.take_along_axis %x[%i] dim 1 : (!fuser.tensor<8x16xf32>, !fuser.tensor<8xbxi64>) -> !fuser.tensor<8xbxf32>
// EXACT-LABEL: func.func @static_exact
// EXACT-NEXT:    fuser.take_along_axis
func.func @static_exact(%x: !fuser.tensor<8x16xf32>, %i: !fuser.tensor<8xbxi64>) -> !fuser.tensor<8xbxf32> {
  %0 = fuser.gather %x[%i] dim 1 : (!fuser.tensor<8x16xf32>, !fuser.tensor<8xbxi64>) -> !fuser.tensor<8xbxf32>
  func.return %0 : !fuser.tensor<8xbxf32>
}

// -----

// Must not fire statically: the index may have fewer rows than the input (torch.gather allows it).
// With exact=0 (the executor saw equal extents at run time) it fires.
// CHECK-LABEL: func.func @dynamic
// CHECK-NEXT:    %0 = fuser.gather %x[%i] dim 1
// EXACT-LABEL: func.func @dynamic
// EXACT-NEXT:    %0 = fuser.take_along_axis %x[%i] dim 1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32>
func.func @dynamic(%x: !fuser.tensor<?x?xf32>, %i: !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32> {
  %0 = fuser.gather %x[%i] dim 1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32>
  func.return %0 : !fuser.tensor<?xbxf32>
}

// -----

// Must not fire: the index has 4 rows, the input 8 (a real torch.gather, non-exact).
// CHECK-LABEL: func.func @smaller_index
// CHECK-NEXT:    %0 = fuser.gather %x[%i] dim 1
// EXACT-LABEL: func.func @smaller_index
// EXACT-NEXT:    %0 = fuser.gather %x[%i] dim 1
func.func @smaller_index(%x: !fuser.tensor<8x16xf32>, %i: !fuser.tensor<4x2xi64>) -> !fuser.tensor<4x2xf32> {
  %0 = fuser.gather %x[%i] dim 1 : (!fuser.tensor<8x16xf32>, !fuser.tensor<4x2xi64>) -> !fuser.tensor<4x2xf32>
  func.return %0 : !fuser.tensor<4x2xf32>
}

// -----

// Must not fire: an index dim that broadcasts against a static input dim is not exact.
// CHECK-LABEL: func.func @broadcast_index_row
// CHECK-NEXT:    %0 = fuser.gather %x[%i] dim 1
func.func @broadcast_index_row(%x: !fuser.tensor<8x16xf32>, %i: !fuser.tensor<bx3xi64>) -> !fuser.tensor<bx3xf32> {
  %0 = fuser.gather %x[%i] dim 1 : (!fuser.tensor<8x16xf32>, !fuser.tensor<bx3xi64>) -> !fuser.tensor<bx3xf32>
  func.return %0 : !fuser.tensor<bx3xf32>
}
