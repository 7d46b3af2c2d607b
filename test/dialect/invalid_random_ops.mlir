// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @int_result(%n: i64, %a: f64) -> !fuser.tensor<?xi64> {
  %u = fuser.uniform [%n] %a, %a : (f64, f64) -> !fuser.tensor<?xi64>
  func.return %u : !fuser.tensor<?xi64>
}
// CHECK: fuser.uniform: random distributions only create floating point tensors, got i64[?]

// -----

func.func @too_few_extents(%n: i64, %a: f64) -> !fuser.tensor<?x4xf32> {
  %z = fuser.normal [%n] %a, %a : (f64, f64) -> !fuser.tensor<?x4xf32>
  func.return %z : !fuser.tensor<?x4xf32>
}
// CHECK: fuser.normal: result f32[?, 4] has rank 2 but 1 extent operand(s) were given (one per dim)

// -----

func.func @bool_parameter(%n: i64, %a: f64, %b: i1) -> !fuser.tensor<?xf32> {
  %z = fuser.normal [%n] %a, %b : (f64, i1) -> !fuser.tensor<?xf32>
  func.return %z : !fuser.tensor<?xf32>
}
// CHECK: fuser.normal: std must be an f64, f32, i64 or i32 scalar, got i1

// -----

func.func @seed_without_offset(%n: i64, %a: f64, %s: i64) -> !fuser.tensor<?xf32> {
  %u = "fuser.uniform"(%n, %a, %a, %s) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}> : (i64, f64, f64, i64) -> !fuser.tensor<?xf32>
  func.return %u : !fuser.tensor<?xf32>
}
// CHECK: fuser.uniform: seed and offset must be given together (got only the seed)

// -----

func.func @layout_on_result(%n: i64, %a: f64) -> !fuser.tensor<?x?xf32, order [0, 1]> {
  %u = fuser.uniform [%n, %n] %a, %a : (f64, f64) -> !fuser.tensor<?x?xf32, order [0, 1]>
  func.return %u : !fuser.tensor<?x?xf32, order [0, 1]>
}
// CHECK: fuser.uniform: only fusion inputs carry a layout; the result has order [0, 1]

// -----

func.func @f32_seed(%n: i64, %a: f64, %s: f32) -> !fuser.tensor<?xf32> {
  %u = "fuser.uniform"(%n, %a, %a, %s, %s) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>}> : (i64, f64, f64, f32, f32) -> !fuser.tensor<?xf32>
  func.return %u : !fuser.tensor<?xf32>
}
// CHECK: operand 'rng_seed' at position 3 does not verify
