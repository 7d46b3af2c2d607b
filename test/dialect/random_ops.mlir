// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// Random tensors: one i64 extent per result dim, the two parameters of the distribution,
// and optionally the seed and offset (both or neither).

func.func @uniform(%n: i64, %lo: f64, %hi: f64, %s: i64, %o: i64) -> !fuser.tensor<?x4xf32> {
  %c4 = arith.constant 4 : i64
  %u = fuser.uniform [%n, %c4] %lo, %hi seed %s offset %o : (f64, f64) -> !fuser.tensor<?x4xf32>
  func.return %u : !fuser.tensor<?x4xf32>
}
// CHECK-LABEL: func.func @uniform
// CHECK: %{{.*}} = fuser.uniform[%n, %c4] %lo, %hi seed %s offset %o : (f64, f64) -> !fuser.tensor<?x4xf32>

// -----

// No seed: drawn from the process generator at every execution.
func.func @normal_unseeded(%mean: f64, %std: f32) -> !fuser.tensor<3xbxbf16> {
  %c3 = arith.constant 3 : i64
  %c1 = arith.constant 1 : i64
  %z = fuser.normal [%c3, %c1] %mean, %std : (f64, f32) -> !fuser.tensor<3xbxbf16>
  func.return %z : !fuser.tensor<3xbxbf16>
}
// CHECK-LABEL: func.func @normal_unseeded
// CHECK: %{{.*}} = fuser.normal[%c3, %c1] %mean, %std : (f64, f32) -> !fuser.tensor<3xbxbf16>
// CHECK-NOT: seed

// -----

// A rank-0 result has no extents; integer parameters are accepted.
func.func @scalar_f64(%a: i64, %b: i64, %s: i64) -> !fuser.tensor<f64> {
  %u = fuser.uniform [] %a, %b seed %s offset %s : (i64, i64) -> !fuser.tensor<f64>
  func.return %u : !fuser.tensor<f64>
}
// CHECK-LABEL: func.func @scalar_f64
// CHECK: fuser.uniform[] %a, %b seed %s offset %s : (i64, i64) -> !fuser.tensor<f64>
