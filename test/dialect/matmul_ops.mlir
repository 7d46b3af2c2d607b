// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// Matrix products: fuser.matmul (torch.matmul) and fuser.linear (F.linear). Both run as host
// segments; here only their syntax and result types.

// 2-D @ 2-D: [M, K] @ [K, N] -> [M, N]; K is contracted (a dynamic K matches a static one).
func.func @matmul_2d(%a: !fuser.tensor<?x?xf32>, %b: !fuser.tensor<64x?xf32>) -> !fuser.tensor<?x?xf32> {
  %r = fuser.matmul %a, %b : (!fuser.tensor<?x?xf32>, !fuser.tensor<64x?xf32>) -> !fuser.tensor<?x?xf32>
  func.return %r : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @matmul_2d
// CHECK-NEXT: %r = fuser.matmul %a, %b : (!fuser.tensor<?x?xf32>, !fuser.tensor<64x?xf32>) -> !fuser.tensor<?x?xf32>

// -----

// 1-D operands drop their dim from the result: a dot product is rank 0.
func.func @matmul_vectors(%m: !fuser.tensor<?x8xbf16>, %v: !fuser.tensor<8xbf16>, %u: !fuser.tensor<?xbf16>) -> (!fuser.tensor<?xbf16>, !fuser.tensor<bf16>, !fuser.tensor<8xbf16>) {
  %mv = fuser.matmul %m, %v : (!fuser.tensor<?x8xbf16>, !fuser.tensor<8xbf16>) -> !fuser.tensor<?xbf16>
  %dot = fuser.matmul %v, %v : (!fuser.tensor<8xbf16>, !fuser.tensor<8xbf16>) -> !fuser.tensor<bf16>
  %vm = fuser.matmul %u, %m : (!fuser.tensor<?xbf16>, !fuser.tensor<?x8xbf16>) -> !fuser.tensor<8xbf16>
  func.return %mv, %dot, %vm : !fuser.tensor<?xbf16>, !fuser.tensor<bf16>, !fuser.tensor<8xbf16>
}
// CHECK-LABEL: func.func @matmul_vectors
// CHECK-NEXT: %mv = fuser.matmul %m, %v : (!fuser.tensor<?x8xbf16>, !fuser.tensor<8xbf16>) -> !fuser.tensor<?xbf16>
// CHECK-NEXT: %dot = fuser.matmul %v, %v : (!fuser.tensor<8xbf16>, !fuser.tensor<8xbf16>) -> !fuser.tensor<bf16>
// CHECK-NEXT: %vm = fuser.matmul %u, %m : (!fuser.tensor<?xbf16>, !fuser.tensor<?x8xbf16>) -> !fuser.tensor<8xbf16>

// -----

// Batch dims broadcast right-aligned: [b, 3, M, K] @ [5, 1?, K, N] -> [5, 3, M, N].
func.func @matmul_batched(%a: !fuser.tensor<bx3x?x16xf16>, %b: !fuser.tensor<5x?x16x?xf16>) -> !fuser.tensor<5x3x?x?xf16> {
  %r = fuser.matmul %a, %b : (!fuser.tensor<bx3x?x16xf16>, !fuser.tensor<5x?x16x?xf16>) -> !fuser.tensor<5x3x?x?xf16>
  func.return %r : !fuser.tensor<5x3x?x?xf16>
}
// CHECK-LABEL: func.func @matmul_batched
// CHECK-NEXT: %r = fuser.matmul %a, %b : (!fuser.tensor<bx3x?x16xf16>, !fuser.tensor<5x?x16x?xf16>) -> !fuser.tensor<5x3x?x?xf16>

// -----

// linear: [..., K] x [N, K] (+ [N]) -> [..., N]; the bias is optional.
func.func @linear(%x: !fuser.tensor<?x?x32xf32>, %w: !fuser.tensor<?x32xf32>, %bias: !fuser.tensor<?xf32>) -> (!fuser.tensor<?x?x?xf32>, !fuser.tensor<?x?x?xf32>) {
  %y = fuser.linear %x, %w : (!fuser.tensor<?x?x32xf32>, !fuser.tensor<?x32xf32>) -> !fuser.tensor<?x?x?xf32>
  %z = fuser.linear %x, %w, %bias : (!fuser.tensor<?x?x32xf32>, !fuser.tensor<?x32xf32>, !fuser.tensor<?xf32>) -> !fuser.tensor<?x?x?xf32>
  func.return %y, %z : !fuser.tensor<?x?x?xf32>, !fuser.tensor<?x?x?xf32>
}
// CHECK-LABEL: func.func @linear
// CHECK-NEXT: %y = fuser.linear %x, %w : (!fuser.tensor<?x?x32xf32>, !fuser.tensor<?x32xf32>) -> !fuser.tensor<?x?x?xf32>
// CHECK-NEXT: %z = fuser.linear %x, %w, %bias : (!fuser.tensor<?x?x32xf32>, !fuser.tensor<?x32xf32>, !fuser.tensor<?xf32>) -> !fuser.tensor<?x?x?xf32>

// -----

// A 1-D weight drops the N dim; a rank-0 bias broadcasts over N.
func.func @linear_vector_weight(%x: !fuser.tensor<4x?xf64>, %w: !fuser.tensor<?xf64>, %v: !fuser.tensor<3x?xf64>, %bias: !fuser.tensor<f64>) -> (!fuser.tensor<4xf64>, !fuser.tensor<4x3xf64>) {
  %y = fuser.linear %x, %w : (!fuser.tensor<4x?xf64>, !fuser.tensor<?xf64>) -> !fuser.tensor<4xf64>
  %z = fuser.linear %x, %v, %bias : (!fuser.tensor<4x?xf64>, !fuser.tensor<3x?xf64>, !fuser.tensor<f64>) -> !fuser.tensor<4x3xf64>
  func.return %y, %z : !fuser.tensor<4xf64>, !fuser.tensor<4x3xf64>
}
// CHECK-LABEL: func.func @linear_vector_weight
// CHECK-NEXT: %y = fuser.linear %x, %w : (!fuser.tensor<4x?xf64>, !fuser.tensor<?xf64>) -> !fuser.tensor<4xf64>
// CHECK-NEXT: %z = fuser.linear %x, %v, %bias : (!fuser.tensor<4x?xf64>, !fuser.tensor<3x?xf64>, !fuser.tensor<f64>) -> !fuser.tensor<4x3xf64>
