// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// Scans (cumsum, cumprod, cummax, cummin: one op with a kind) and select.

// A scan keeps its input's shape; floats keep their dtype.
func.func @scans(%x: !fuser.tensor<?x8xbf16>) -> (!fuser.tensor<?x8xbf16>, !fuser.tensor<?x8xbf16>, !fuser.tensor<?x8xbf16>, !fuser.tensor<?x8xbf16>) {
  %s = fuser.scan sum %x dim 1 : !fuser.tensor<?x8xbf16> -> !fuser.tensor<?x8xbf16>
  %p = fuser.scan prod %x dim 0 : !fuser.tensor<?x8xbf16> -> !fuser.tensor<?x8xbf16>
  %m = fuser.scan max %x dim 1 : !fuser.tensor<?x8xbf16> -> !fuser.tensor<?x8xbf16>
  %n = fuser.scan min %x dim 0 : !fuser.tensor<?x8xbf16> -> !fuser.tensor<?x8xbf16>
  func.return %s, %p, %m, %n : !fuser.tensor<?x8xbf16>, !fuser.tensor<?x8xbf16>, !fuser.tensor<?x8xbf16>, !fuser.tensor<?x8xbf16>
}
// CHECK-LABEL: func.func @scans
// CHECK-NEXT: %s = fuser.scan sum %x dim 1 : !fuser.tensor<?x8xbf16> -> !fuser.tensor<?x8xbf16>
// CHECK-NEXT: %p = fuser.scan prod %x dim 0 : !fuser.tensor<?x8xbf16> -> !fuser.tensor<?x8xbf16>
// CHECK-NEXT: %m = fuser.scan max %x dim 1 : !fuser.tensor<?x8xbf16> -> !fuser.tensor<?x8xbf16>
// CHECK-NEXT: %n = fuser.scan min %x dim 0 : !fuser.tensor<?x8xbf16> -> !fuser.tensor<?x8xbf16>

// -----

// As torch: sums and products of integers and bools are i64; max and min keep the dtype.
// Broadcast dims stay broadcast.
func.func @integer_scans(%i: !fuser.tensor<bx?xi32>, %b: !fuser.tensor<?xi1>) -> (!fuser.tensor<bx?xi64>, !fuser.tensor<?xi64>, !fuser.tensor<bx?xi32>, !fuser.tensor<?xi1>) {
  %s = fuser.scan sum %i dim 1 : !fuser.tensor<bx?xi32> -> !fuser.tensor<bx?xi64>
  %p = fuser.scan prod %b dim 0 : !fuser.tensor<?xi1> -> !fuser.tensor<?xi64>
  %m = fuser.scan max %i dim 0 : !fuser.tensor<bx?xi32> -> !fuser.tensor<bx?xi32>
  %n = fuser.scan min %b dim 0 : !fuser.tensor<?xi1> -> !fuser.tensor<?xi1>
  func.return %s, %p, %m, %n : !fuser.tensor<bx?xi64>, !fuser.tensor<?xi64>, !fuser.tensor<bx?xi32>, !fuser.tensor<?xi1>
}
// CHECK-LABEL: func.func @integer_scans
// CHECK-NEXT: %s = fuser.scan sum %i dim 1 : !fuser.tensor<bx?xi32> -> !fuser.tensor<bx?xi64>
// CHECK-NEXT: %p = fuser.scan prod %b dim 0 : !fuser.tensor<?xi1> -> !fuser.tensor<?xi64>
// CHECK-NEXT: %m = fuser.scan max %i dim 0 : !fuser.tensor<bx?xi32> -> !fuser.tensor<bx?xi32>
// CHECK-NEXT: %n = fuser.scan min %b dim 0 : !fuser.tensor<?xi1> -> !fuser.tensor<?xi1>

// -----

// select removes the dim; the index is a constant (negative counts from the end) or a
// run-time scalar, i64 or i32.
func.func @select(%x: !fuser.tensor<4x?x3xf32>, %k: i64, %j: i32) -> (!fuser.tensor<?x3xf32>, !fuser.tensor<4x3xf32>, !fuser.tensor<4x?xf32>) {
  %last = arith.constant -1 : i64
  %a = fuser.select %x[%last] dim 0 : (!fuser.tensor<4x?x3xf32>, i64) -> !fuser.tensor<?x3xf32>
  %b = fuser.select %x[%k] dim 1 : (!fuser.tensor<4x?x3xf32>, i64) -> !fuser.tensor<4x3xf32>
  %c = fuser.select %x[%j] dim 2 : (!fuser.tensor<4x?x3xf32>, i32) -> !fuser.tensor<4x?xf32>
  func.return %a, %b, %c : !fuser.tensor<?x3xf32>, !fuser.tensor<4x3xf32>, !fuser.tensor<4x?xf32>
}
// CHECK-LABEL: func.func @select
// CHECK-NEXT: %last = arith.constant -1 : i64
// CHECK-NEXT: %a = fuser.select %x[%last] dim 0 : (!fuser.tensor<4x?x3xf32>, i64) -> !fuser.tensor<?x3xf32>
// CHECK-NEXT: %b = fuser.select %x[%k] dim 1 : (!fuser.tensor<4x?x3xf32>, i64) -> !fuser.tensor<4x3xf32>
// CHECK-NEXT: %c = fuser.select %x[%j] dim 2 : (!fuser.tensor<4x?x3xf32>, i32) -> !fuser.tensor<4x?xf32>

// -----

// Selecting from a rank-1 tensor gives a rank-0 tensor.
func.func @select_to_rank0(%x: !fuser.tensor<?xi64>, %k: i64) -> !fuser.tensor<i64> {
  %a = fuser.select %x[%k] dim 0 : (!fuser.tensor<?xi64>, i64) -> !fuser.tensor<i64>
  func.return %a : !fuser.tensor<i64>
}
// CHECK-LABEL: func.func @select_to_rank0
// CHECK-NEXT: %a = fuser.select %x[%k] dim 0 : (!fuser.tensor<?xi64>, i64) -> !fuser.tensor<i64>
