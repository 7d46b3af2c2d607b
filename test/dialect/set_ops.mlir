// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// Copies: fuser.set and fuser.segment_set (a copy that ends a kernel).

func.func @set(%x: !fuser.tensor<?x8xbxf32>) -> !fuser.tensor<?x8xbxf32> {
  %r = fuser.set %x : !fuser.tensor<?x8xbxf32> -> !fuser.tensor<?x8xbxf32>
  func.return %r : !fuser.tensor<?x8xbxf32>
}
// CHECK-LABEL: func.func @set
// CHECK-NEXT: %r = fuser.set %x : !fuser.tensor<?x8xbxf32> -> !fuser.tensor<?x8xbxf32>

// -----

// An input layout stays on the input: the copy has none.
func.func @segment_set(%x: !fuser.tensor<?x?xbf16, order [0, 1]>) -> !fuser.tensor<?x?xbf16> {
  %r = fuser.segment_set %x : !fuser.tensor<?x?xbf16, order [0, 1]> -> !fuser.tensor<?x?xbf16>
  func.return %r : !fuser.tensor<?x?xbf16>
}
// CHECK-LABEL: func.func @segment_set
// CHECK-NEXT: %r = fuser.segment_set %x : !fuser.tensor<?x?xbf16, order [0, 1]> -> !fuser.tensor<?x?xbf16>

// -----

func.func @rank0(%x: !fuser.tensor<i64>) -> !fuser.tensor<i64> {
  %r = fuser.set %x : !fuser.tensor<i64> -> !fuser.tensor<i64>
  func.return %r : !fuser.tensor<i64>
}
// CHECK-LABEL: func.func @rank0
// CHECK-NEXT: %r = fuser.set %x : !fuser.tensor<i64> -> !fuser.tensor<i64>
