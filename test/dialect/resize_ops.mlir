// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// The resize family: pad, slice, cat (output extent = input extent + left + right).

// Static widths, per dim `left:right` in dim order; negative widths crop (F.pad).
// A broadcast dim padded by 0:0 stays broadcast.
func.func @pad_static(%x: !fuser.tensor<bx4x8xf32>) -> !fuser.tensor<bx7x6xf32> {
  %zero = arith.constant 0.000000e+00 : f64
  %r = fuser.pad %x [0:0, 1:2, -1:-1] value %zero : (!fuser.tensor<bx4x8xf32>, f64) -> !fuser.tensor<bx7x6xf32>
  func.return %r : !fuser.tensor<bx7x6xf32>
}
// CHECK-LABEL: func.func @pad_static
// CHECK:      %r = fuser.pad %x [0:0, 1:2, -1:-1] value %zero : (!fuser.tensor<bx4x8xf32>, f64) -> !fuser.tensor<bx7x6xf32>

// -----

// SSA widths print in place; `-1` beside them is a static crop, not "dynamic".
func.func @pad_ssa(%x: !fuser.tensor<?x8xi64>, %w: i64, %fill: i64) -> !fuser.tensor<?x?xi64> {
  %r = fuser.pad %x [%w:-1, 2:%w] value %fill : (!fuser.tensor<?x8xi64>, i64) -> !fuser.tensor<?x?xi64>
  func.return %r : !fuser.tensor<?x?xi64>
}
// CHECK-LABEL: func.func @pad_ssa
// CHECK-NEXT: %r = fuser.pad %x [%w:-1, 2:%w] value %fill : (!fuser.tensor<?x8xi64>, i64) -> !fuser.tensor<?x?xi64>

// -----

// Static `start:stop:step` per dim with torch semantics: -1 counts from the end,
// out-of-range bounds clamp. 0:-1:2 of 8 is [0, 2, 4, 6]; 2:100:1 of 5 is 3 elements.
func.func @slice_static(%x: !fuser.tensor<8x5xf16>) -> !fuser.tensor<4x3xf16> {
  %r = fuser.slice %x [0:-1:2, 2:100:1] : !fuser.tensor<8x5xf16> -> !fuser.tensor<4x3xf16>
  func.return %r : !fuser.tensor<4x3xf16>
}
// CHECK-LABEL: func.func @slice_static
// CHECK-NEXT: %r = fuser.slice %x [0:-1:2, 2:100:1] : !fuser.tensor<8x5xf16> -> !fuser.tensor<4x3xf16>

// -----

// SSA starts and stops (steps are always static).
func.func @slice_ssa(%x: !fuser.tensor<?x?xbf16>, %s: i64, %e: i64) -> !fuser.tensor<?x?xbf16> {
  %r = fuser.slice %x [%s:%e:1, 0:%e:3] : !fuser.tensor<?x?xbf16> -> !fuser.tensor<?x?xbf16>
  func.return %r : !fuser.tensor<?x?xbf16>
}
// CHECK-LABEL: func.func @slice_ssa
// CHECK-NEXT: %r = fuser.slice %x [%s:%e:1, 0:%e:3] : !fuser.tensor<?x?xbf16> -> !fuser.tensor<?x?xbf16>

// -----

// Static extents add up on the cat dim; one dynamic input makes it dynamic.
func.func @cat(%a: !fuser.tensor<2x8xf32>, %b: !fuser.tensor<3x8xf32>, %c: !fuser.tensor<?x8xf32>) -> (!fuser.tensor<5x8xf32>, !fuser.tensor<?x8xf32>) {
  %s = fuser.cat %a, %b dim 0 : (!fuser.tensor<2x8xf32>, !fuser.tensor<3x8xf32>) -> !fuser.tensor<5x8xf32>
  %d = fuser.cat %a, %b, %c dim 0 : (!fuser.tensor<2x8xf32>, !fuser.tensor<3x8xf32>, !fuser.tensor<?x8xf32>) -> !fuser.tensor<?x8xf32>
  func.return %s, %d : !fuser.tensor<5x8xf32>, !fuser.tensor<?x8xf32>
}
// CHECK-LABEL: func.func @cat
// CHECK-NEXT: %s = fuser.cat %a, %b dim 0 : (!fuser.tensor<2x8xf32>, !fuser.tensor<3x8xf32>) -> !fuser.tensor<5x8xf32>
// CHECK-NEXT: %d = fuser.cat %a, %b, %c dim 0 : (!fuser.tensor<2x8xf32>, !fuser.tensor<3x8xf32>, !fuser.tensor<?x8xf32>) -> !fuser.tensor<?x8xf32>

// -----

// Off the cat dim, a broadcast dim and a static 1 agree (both have extent 1).
func.func @cat_broadcast_and_one(%a: !fuser.tensor<bx4xf32>, %b: !fuser.tensor<1x3xf32>) -> !fuser.tensor<1x7xf32> {
  %r = fuser.cat %a, %b dim 1 : (!fuser.tensor<bx4xf32>, !fuser.tensor<1x3xf32>) -> !fuser.tensor<1x7xf32>
  func.return %r : !fuser.tensor<1x7xf32>
}
// CHECK-LABEL: func.func @cat_broadcast_and_one
// CHECK-NEXT: %r = fuser.cat %a, %b dim 1 : (!fuser.tensor<bx4xf32>, !fuser.tensor<1x3xf32>) -> !fuser.tensor<1x7xf32>

// -----

// Spacing inside the lists is free (static lists are read by a fast path; an SSA entry
// sends the list to the token-by-token path); both print canonically.
func.func @list_spacing(%x: !fuser.tensor<4x4xf32>, %v: f64, %w: i64) -> (!fuser.tensor<6x3xf32>, !fuser.tensor<?x4xf32>, !fuser.tensor<2x4xf32>) {
  %a = fuser.pad %x [ 1 : 1 ,0:-1] value %v : (!fuser.tensor<4x4xf32>, f64) -> !fuser.tensor<6x3xf32>
  %b = fuser.pad %x [ %w : 1 , 0:0 ] value %v : (!fuser.tensor<4x4xf32>, f64) -> !fuser.tensor<?x4xf32>
  %c = fuser.slice %x [1:3:1,  0 : 4 : 1] : !fuser.tensor<4x4xf32> -> !fuser.tensor<2x4xf32>
  func.return %a, %b, %c : !fuser.tensor<6x3xf32>, !fuser.tensor<?x4xf32>, !fuser.tensor<2x4xf32>
}
// CHECK-LABEL: func.func @list_spacing
// CHECK-NEXT: %a = fuser.pad %x [1:1, 0:-1] value %v
// CHECK-NEXT: %b = fuser.pad %x [%w:1, 0:0] value %v
// CHECK-NEXT: %c = fuser.slice %x [1:3:1, 0:4:1]
