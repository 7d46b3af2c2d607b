// RUN: fuser-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// Parse errors of the fuser syntax: each points at the offending text.

func.func @bad_dtype(%x: !fuser.tensor<4x8xf99>) {
  func.return
}
// CHECK: invalid_syntax.mlir:[[# @LINE - 3]]:39
// CHECK-NEXT: func.func @bad_dtype(%x: !fuser.tensor<4x8xf99>) {
// CHECK-NEXT: {{^ +}}^^^^^^^^^{{$}}
// CHECK-NEXT: malformed fuser tensor type '<4x8xf99>': 'f99' is not an element type (expected one of f64, f32, f16, bf16, f8E4M3FN, f8E5M2, c64, c128, i64, i32, i1 after the dims)

// -----

// A dim is `?`, `b` or an integer: `-1` (nvFuser's "symbolic") is spelled `?` here.
func.func @bad_dim_token(%x: !fuser.tensor<-1x8xf32>) {
  func.return
}
// CHECK: invalid_syntax.mlir:[[# @LINE - 3]]:43
// CHECK: malformed fuser tensor type '<-1x8xf32>': dim 0 is '-1': expected `?` (dynamic), `b` (broadcast) or a static extent

// -----

func.func @missing_dtype(%x: !fuser.tensor<4x8>) {
  func.return
}
// CHECK: invalid_syntax.mlir:[[# @LINE - 3]]:43
// CHECK: malformed fuser tensor type '<4x8>': '8' is not an element type (expected one of f64, f32, f16, bf16, f8E4M3FN, f8E5M2, c64, c128, i64, i32, i1 after the dims)

// -----

func.func @order_not_a_permutation(%x: !fuser.tensor<?x?xf32, order [0, 0]>) {
  func.return
}
// CHECK: invalid_syntax.mlir:[[# @LINE - 3]]:53
// CHECK: order [0, 0] is not a permutation of the 2 dims of the tensor

// -----

func.func @order_wrong_length(%x: !fuser.tensor<?x?xf32, order [0, 1, 2]>) {
  func.return
}
// CHECK: invalid_syntax.mlir:[[# @LINE - 3]]:48
// CHECK: order [0, 1, 2] is not a permutation of the 2 dims of the tensor

// -----

// A comma after the element type introduces the layout and nothing else.
func.func @junk_after_comma(%x: !fuser.tensor<4xf32, strides [1]>) {
  func.return
}
// CHECK: invalid_syntax.mlir:[[# @LINE - 3]]:46
// CHECK: malformed fuser tensor type '<4xf32, strides [1]>': expected `order [...]` after the comma, got 'strides [1]'

// -----

// Pad widths come in `left:right` pairs.
func.func @pad_missing_right_width(%x: !fuser.tensor<4xf32>, %v: f64) {
  %r = fuser.pad %x [1] value %v : (!fuser.tensor<4xf32>, f64) -> !fuser.tensor<5xf32>
  func.return
}
// CHECK: invalid_syntax.mlir:[[# @LINE - 3]]:23
// CHECK: Expected ':'

// -----

func.func @pad_width_not_an_integer(%x: !fuser.tensor<4xf32>, %v: f64) {
  %r = fuser.pad %x [1:x] value %v : (!fuser.tensor<4xf32>, f64) -> !fuser.tensor<5xf32>
  func.return
}
// CHECK: invalid_syntax.mlir:[[# @LINE - 3]]:24
// CHECK: Expected integer literal

// -----

func.func @slice_ssa_step(%x: !fuser.tensor<4xf32>, %s: i64) {
  %r = fuser.slice %x [0:4:%s] : !fuser.tensor<4xf32> -> !fuser.tensor<4xf32>
  func.return
}
// CHECK: invalid_syntax.mlir:[[# @LINE - 3]]:23
// CHECK: fuser.slice: steps must be static integers

// -----

// Operand types are checked against the op's constraints while its syntax is parsed;
// the error points at the op.
func.func @builtin_tensor_operand(%x: tensor<?xf32>) {
  %r = fuser.unary exp %x : tensor<?xf32> -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: invalid_syntax.mlir:[[# @LINE - 3]]:3
// CHECK-NEXT: %r = fuser.unary exp %x : tensor<?xf32> -> !fuser.tensor<?xf32>
// CHECK: tensor<?xf32> should be of base attribute fuser.tensor

// -----

// An extent that does not fit in 64 bits cannot be emitted into a kernel.
func.func @huge(%x: !fuser.tensor<99999999999999999999xf32>) -> !fuser.tensor<99999999999999999999xf32> {
  func.return %x : !fuser.tensor<99999999999999999999xf32>
}
// CHECK: extent 99999999999999999999 does not fit in 64 bits (extents must be < 2**63)

// -----

// Each extent fits, but not the element count: no 64-bit index covers the tensor.
func.func @huge_count(%x: !fuser.tensor<9223372036854775807x9223372036854775807xf32>) -> !fuser.tensor<9223372036854775807x9223372036854775807xf32> {
  func.return %x : !fuser.tensor<9223372036854775807x9223372036854775807xf32>
}
// CHECK: the static extents 9223372036854775807x9223372036854775807 hold 85070591730234615847396907784232501249 elements, which does not fit in 64 bits (a tensor's element count must be < 2**63)
