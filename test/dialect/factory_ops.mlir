// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// Tensor factories (iota, full) and the extent query (dim).

// iota(length, start, step): an integer or a float sequence.
func.func @iota(%n: i64, %start: i64, %step: i64, %fstart: f64, %fstep: f64) {
  %i = fuser.iota %n, %start, %step : (i64, i64) -> !fuser.tensor<?xi64>
  %f = fuser.iota %n, %fstart, %fstep : (f64, f64) -> !fuser.tensor<?xf32>
  func.return
}
// CHECK-LABEL: func.func @iota
// CHECK-NEXT: %i = fuser.iota %n, %start, %step : (i64, i64) -> !fuser.tensor<?xi64>
// CHECK-NEXT: %f = fuser.iota %n, %fstart, %fstep : (f64, f64) -> !fuser.tensor<?xf32>

// -----

// full: static dims need no operand; each `?` dim takes one i64 extent.
func.func @full(%n: i64, %m: i64, %v: f64, %flag: i1) {
  %s = fuser.full value %v : (f64) -> !fuser.tensor<2x3xf32>
  %d = fuser.full(%n, %m) value %v : (f64) -> !fuser.tensor<?xbx?xbf16>
  %b = fuser.full(%n) value %flag : (i1) -> !fuser.tensor<?xi1>
  %r0 = fuser.full value %v : (f64) -> !fuser.tensor<f64>
  func.return
}
// CHECK-LABEL: func.func @full
// CHECK-NEXT: %s = fuser.full value %v : (f64) -> !fuser.tensor<2x3xf32>
// CHECK-NEXT: %d = fuser.full(%n, %m) value %v : (f64) -> !fuser.tensor<?xbx?xbf16>
// CHECK-NEXT: %b = fuser.full(%n) value %flag : (i1) -> !fuser.tensor<?xi1>
// CHECK-NEXT: %r0 = fuser.full value %v : (f64) -> !fuser.tensor<f64>

// -----

// dim: the extent of one dim, as an i64 usable by arith and as an extent operand.
func.func @dim(%x: !fuser.tensor<?x8xf32, order [0, 1]>) -> !fuser.tensor<?x8xf32> {
  %n = fuser.dim %x, 0 : !fuser.tensor<?x8xf32, order [0, 1]>
  %c8 = fuser.dim %x, 1 : !fuser.tensor<?x8xf32, order [0, 1]>
  %total = arith.muli %n, %c8 : i64
  %v = arith.constant 1.000000e+00 : f64
  %r = fuser.full(%n) value %v : (f64) -> !fuser.tensor<?x8xf32>
  func.return %r : !fuser.tensor<?x8xf32>
}
// CHECK-LABEL: func.func @dim
// CHECK-NEXT: %n = fuser.dim %x, 0 : !fuser.tensor<?x8xf32, order [0, 1]>
// CHECK-NEXT: %c8 = fuser.dim %x, 1 : !fuser.tensor<?x8xf32, order [0, 1]>
// CHECK-NEXT: %total = arith.muli %n, %c8 : i64
