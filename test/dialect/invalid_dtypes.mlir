// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

// fp8 is a storage dtype: compute ops refuse it (the frontend casts it to f32 first).
func.func @fp8_add(%a: !fuser.tensor<?xf8E4M3FN>) -> !fuser.tensor<?xf8E4M3FN> {
  %r = fuser.binary add %a, %a : (!fuser.tensor<?xf8E4M3FN>, !fuser.tensor<?xf8E4M3FN>) -> !fuser.tensor<?xf8E4M3FN>
  func.return %r : !fuser.tensor<?xf8E4M3FN>
}
// CHECK: fuser.binary add: f8E4M3FN is a storage dtype; cast it to f32 (or wider) before computing on it

// -----

func.func @fp8_sum(%a: !fuser.tensor<?xf8E5M2>) -> !fuser.tensor<f8E5M2> {
  %r = fuser.reduction sum %a dims [0] : !fuser.tensor<?xf8E5M2> -> !fuser.tensor<f8E5M2>
  func.return %r : !fuser.tensor<f8E5M2>
}
// CHECK: fuser.reduction sum: f8E5M2 is a storage dtype; cast it to f32 (or wider) before computing on it

// -----

// Complex: only the listed ops.
func.func @complex_exp(%a: !fuser.tensor<?xc64>) -> !fuser.tensor<?xc64> {
  %r = fuser.unary exp %a : !fuser.tensor<?xc64> -> !fuser.tensor<?xc64>
  func.return %r : !fuser.tensor<?xc64>
}
// CHECK: fuser.unary exp: not supported on complex operands (c64); complex supports: neg, abs, real, imag

// -----

func.func @complex_lt(%a: !fuser.tensor<?xc128>) -> !fuser.tensor<?xi1> {
  %r = fuser.binary lt %a, %a : (!fuser.tensor<?xc128>, !fuser.tensor<?xc128>) -> !fuser.tensor<?xi1>
  func.return %r : !fuser.tensor<?xi1>
}
// CHECK: fuser.binary lt: not supported on complex operands (c128); complex supports: add, sub, mul, div, eq, ne

// -----

func.func @complex_max(%a: !fuser.tensor<?xc64>) -> !fuser.tensor<c64> {
  %r = fuser.reduction max %a dims [0] : !fuser.tensor<?xc64> -> !fuser.tensor<c64>
  func.return %r : !fuser.tensor<c64>
}
// CHECK: fuser.reduction max: not supported on complex operands (c64); complex supports: sum

// -----

func.func @complex_pow(%a: !fuser.tensor<?xc64>) -> !fuser.tensor<?xc64> {
  %r = fuser.binary pow %a, %a : (!fuser.tensor<?xc64>, !fuser.tensor<?xc64>) -> !fuser.tensor<?xc64>
  func.return %r : !fuser.tensor<?xc64>
}
// CHECK: fuser.binary pow: not supported on complex operands (c64); complex supports: add, sub, mul, div, eq, ne

// -----

func.func @complex_to_real(%a: !fuser.tensor<?xc64>) -> !fuser.tensor<?xf32> {
  %r = fuser.cast %a : !fuser.tensor<?xc64> -> !fuser.tensor<?xf32>
  func.return %r : !fuser.tensor<?xf32>
}
// CHECK: fuser.cast: cannot cast c64 to the real dtype f32: it would drop the imaginary part; use real, imag or abs

// -----

// abs of a complex tensor is real: a complex result is wrong.
func.func @complex_abs_type(%a: !fuser.tensor<?xc64>) -> !fuser.tensor<?xc64> {
  %r = fuser.unary abs %a : !fuser.tensor<?xc64> -> !fuser.tensor<?xc64>
  func.return %r : !fuser.tensor<?xc64>
}
// CHECK: fuser.unary abs: result dtype is c64, expected f32

