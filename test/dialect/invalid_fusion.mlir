// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Fusion-level checks (fuser_dialect/fusion.py verify_fusion): output layouts.

func.func @required_order_not_a_permutation(%x: !fuser.tensor<?x4xf32>) -> (!fuser.tensor<?x4xf32> {fuser.stride_order = array<i64: 0, 2>}) {
  func.return %x : !fuser.tensor<?x4xf32>
}
// CHECK: fusion @required_order_not_a_permutation: required stride order [0, 2] of output 0 is not a permutation of its 2 dims (f32[?, 4])

// -----

func.func @hinted_order_wrong_length(%x: !fuser.tensor<?x4xf32>) -> (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32> {fuser.stride_order_hint = array<i64: 0>}) {
  func.return %x, %x : !fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>
}
// CHECK: fusion @hinted_order_wrong_length: hinted stride order [0] of output 1 is not a permutation of its 2 dims (f32[?, 4])

// -----

func.func @requirement_and_hint(%x: !fuser.tensor<?x4xf32>) -> (!fuser.tensor<?x4xf32> {fuser.stride_order = array<i64: 0, 1>, fuser.stride_order_hint = array<i64: 1, 0>}) {
  func.return %x : !fuser.tensor<?x4xf32>
}
// CHECK: fusion @requirement_and_hint: output 0 has both a required (fuser.stride_order) and a hinted (fuser.stride_order_hint) stride order; a requirement leaves no room for a hint

// -----

func.func @order_not_an_i64_array(%x: !fuser.tensor<?x4xf32>) -> (!fuser.tensor<?x4xf32> {fuser.stride_order = 3}) {
  func.return %x : !fuser.tensor<?x4xf32>
}
// CHECK: fusion @order_not_an_i64_array: fuser.stride_order of output 0 must be an array<i64: ...>, got 3 : i64

// -----

func.func @order_on_a_scalar(%s: f64) -> (f64 {fuser.stride_order = array<i64: 0>}) {
  func.return %s : f64
}
// CHECK: fusion @order_on_a_scalar: output 0 is a scalar but has a required stride order
