// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier messages of matmul and linear: they quote both operands.

func.func @matmul_k_mismatch(%a: !fuser.tensor<4x5xf32>, %b: !fuser.tensor<6x3xf32>) {
  %r = fuser.matmul %a, %b : (!fuser.tensor<4x5xf32>, !fuser.tensor<6x3xf32>) -> !fuser.tensor<4x3xf32>
  func.return
}
// CHECK: fuser.matmul: arg1 f32[4, 5] has K = 5 (dim 1) but arg2 f32[6, 3] has K = 6 (dim 0); the contracted dims must be equal

// -----

// A 1-D arg2 is contracted along its only dim.
func.func @matmul_vector_k_mismatch(%a: !fuser.tensor<?x5xf32>, %b: !fuser.tensor<7xf32>) {
  %r = fuser.matmul %a, %b : (!fuser.tensor<?x5xf32>, !fuser.tensor<7xf32>) -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.matmul: arg1 f32[?, 5] has K = 5 (dim 1) but arg2 f32[7] has K = 7 (dim 0); the contracted dims must be equal

// -----

func.func @matmul_batch_mismatch(%a: !fuser.tensor<2x4x5xf32>, %b: !fuser.tensor<3x5x6xf32>) {
  %r = fuser.matmul %a, %b : (!fuser.tensor<2x4x5xf32>, !fuser.tensor<3x5x6xf32>) -> !fuser.tensor<2x4x6xf32>
  func.return
}
// CHECK: fuser.matmul: dim 0 has extents 2 and 3, which neither match nor broadcast (batch dims of arg1 f32[2, 4, 5] and arg2 f32[3, 5, 6])

// -----

func.func @matmul_dtypes(%a: !fuser.tensor<4x5xf32>, %b: !fuser.tensor<5x3xf16>) {
  %r = fuser.matmul %a, %b : (!fuser.tensor<4x5xf32>, !fuser.tensor<5x3xf16>) -> !fuser.tensor<4x3xf32>
  func.return
}
// CHECK: fuser.matmul: arg2 f16[5, 3] and arg1 f32[4, 5] have different dtypes; cast one of them first

// -----

func.func @matmul_integer(%a: !fuser.tensor<4x5xi64>, %b: !fuser.tensor<5x3xi64>) {
  %r = fuser.matmul %a, %b : (!fuser.tensor<4x5xi64>, !fuser.tensor<5x3xi64>) -> !fuser.tensor<4x3xi64>
  func.return
}
// CHECK: fuser.matmul: arg1 i64[4, 5] must have a floating-point dtype (f64, f32, f16, bf16)

// -----

func.func @matmul_rank0(%a: !fuser.tensor<f32>, %b: !fuser.tensor<5xf32>) {
  %r = fuser.matmul %a, %b : (!fuser.tensor<f32>, !fuser.tensor<5xf32>) -> !fuser.tensor<f32>
  func.return
}
// CHECK: fuser.matmul: arg1 f32[] has rank 0; it needs at least rank 1

// -----

// The declared result must be what the shape rule infers (here the N dim is wrong).
func.func @matmul_result(%a: !fuser.tensor<4x5xf32>, %b: !fuser.tensor<5x3xf32>) {
  %r = fuser.matmul %a, %b : (!fuser.tensor<4x5xf32>, !fuser.tensor<5x3xf32>) -> !fuser.tensor<4x7xf32>
  func.return
}
// CHECK: fuser.matmul: result dim 1 is 7, expected 3 (result [4, 7], inferred [4, 3])

// -----

func.func @matmul_result_dtype(%a: !fuser.tensor<4x5xbf16>, %b: !fuser.tensor<5x3xbf16>) {
  %r = fuser.matmul %a, %b : (!fuser.tensor<4x5xbf16>, !fuser.tensor<5x3xbf16>) -> !fuser.tensor<4x3xf32>
  func.return
}
// CHECK: fuser.matmul: result dtype is f32, expected bf16

// -----

func.func @linear_k_mismatch(%x: !fuser.tensor<?x8xf32>, %w: !fuser.tensor<16x9xf32>) {
  %y = fuser.linear %x, %w : (!fuser.tensor<?x8xf32>, !fuser.tensor<16x9xf32>) -> !fuser.tensor<?x16xf32>
  func.return
}
// CHECK: fuser.linear: input f32[?, 8] has K = 8 (dim 1) but weight f32[16, 9] has K = 9 (dim 1); the contracted dims must be equal

// -----

func.func @linear_weight_rank(%x: !fuser.tensor<?x8xf32>, %w: !fuser.tensor<2x16x8xf32>) {
  %y = fuser.linear %x, %w : (!fuser.tensor<?x8xf32>, !fuser.tensor<2x16x8xf32>) -> !fuser.tensor<?x16xf32>
  func.return
}
// CHECK: fuser.linear: weight f32[2, 16, 8] has rank 3; it must be [N, K] or [K]

// -----

func.func @linear_bias_extent(%x: !fuser.tensor<?x8xf32>, %w: !fuser.tensor<16x8xf32>, %b: !fuser.tensor<12xf32>) {
  %y = fuser.linear %x, %w, %b : (!fuser.tensor<?x8xf32>, !fuser.tensor<16x8xf32>, !fuser.tensor<12xf32>) -> !fuser.tensor<?x16xf32>
  func.return
}
// CHECK: fuser.linear: bias f32[12] has 12 entries but weight f32[16, 8] has N = 16 (dim 0)

// -----

func.func @linear_vector_weight_bias(%x: !fuser.tensor<?x8xf32>, %w: !fuser.tensor<8xf32>, %b: !fuser.tensor<f32>) {
  %y = fuser.linear %x, %w, %b : (!fuser.tensor<?x8xf32>, !fuser.tensor<8xf32>, !fuser.tensor<f32>) -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.linear: a 1-D weight f32[8] takes no bias (got bias f32[])

// -----

func.func @linear_bias_rank(%x: !fuser.tensor<?x8xf32>, %w: !fuser.tensor<4x8xf32>, %b: !fuser.tensor<2x4xf32>) {
  %y = fuser.linear %x, %w, %b : (!fuser.tensor<?x8xf32>, !fuser.tensor<4x8xf32>, !fuser.tensor<2x4xf32>) -> !fuser.tensor<?x4xf32>
  func.return
}
// CHECK: fuser.linear: bias f32[2, 4] has rank 2; expected [N] or rank 0 (f32[4, 8])

// -----

func.func @linear_bias_dtype(%x: !fuser.tensor<?x8xbf16>, %w: !fuser.tensor<16x8xbf16>, %b: !fuser.tensor<16xf32>) {
  %y = fuser.linear %x, %w, %b : (!fuser.tensor<?x8xbf16>, !fuser.tensor<16x8xbf16>, !fuser.tensor<16xf32>) -> !fuser.tensor<?x16xbf16>
  func.return
}
// CHECK: fuser.linear: bias f32[16] and input bf16[?, 8] have different dtypes; cast one of them first
