// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// Reductions: sum/prod/max/min over dims; keepdim leaves broadcast dims in place.

func.func @reduction_kinds(%x: !fuser.tensor<?x?x8xf32>) {
  %sum = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<?x8xf32>
  %prod = fuser.reduction prod %x dims [0, 2] : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<?xf32>
  %max = fuser.reduction max %x dims [2] keepdim : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<?x?xbxf32>
  %min = fuser.reduction min %x dims [0, 1] keepdim : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<bxbx8xf32>
  func.return
}
// CHECK-LABEL: func.func @reduction_kinds
// CHECK-NEXT: %sum = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<?x8xf32>
// CHECK-NEXT: %prod = fuser.reduction prod %x dims [0, 2] : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<?xf32>
// CHECK-NEXT: %max = fuser.reduction max %x dims [2] keepdim : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<?x?xbxf32>
// CHECK-NEXT: %min = fuser.reduction min %x dims [0, 1] keepdim : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<bxbx8xf32>

// -----

// Reducing every dim without keepdim gives a rank-0 tensor; low-precision and integer
// inputs keep their dtype (f16/bf16 accumulate in f32 internally).
func.func @reduction_to_rank0(%h: !fuser.tensor<?x?xf16>, %n: !fuser.tensor<?xi32>) {
  %a = fuser.reduction sum %h dims [0, 1] : !fuser.tensor<?x?xf16> -> !fuser.tensor<f16>
  %b = fuser.reduction max %n dims [0] : !fuser.tensor<?xi32> -> !fuser.tensor<i32>
  func.return
}
// CHECK-LABEL: func.func @reduction_to_rank0
// CHECK-NEXT: %a = fuser.reduction sum %h dims [0, 1] : !fuser.tensor<?x?xf16> -> !fuser.tensor<f16>
// CHECK-NEXT: %b = fuser.reduction max %n dims [0] : !fuser.tensor<?xi32> -> !fuser.tensor<i32>
