// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// The tensor type in all its forms survives custom -> custom and generic -> custom.

// Every element type; `?` dynamic, `b` broadcast and static dims; rank 0.
func.func @dtypes_and_dims(%a: !fuser.tensor<?xf64>, %b: !fuser.tensor<bx4xf32>, %c: !fuser.tensor<2x?xbxf16>,
                           %d: !fuser.tensor<bf16>, %e: !fuser.tensor<0xi64>, %f: !fuser.tensor<?x?xi32>,
                           %g: !fuser.tensor<bxbxi1>) {
  func.return
}
// CHECK-LABEL: func.func @dtypes_and_dims(
// CHECK-SAME: %a: !fuser.tensor<?xf64>, %b: !fuser.tensor<bx4xf32>, %c: !fuser.tensor<2x?xbxf16>,
// CHECK-SAME: %d: !fuser.tensor<bf16>, %e: !fuser.tensor<0xi64>, %f: !fuser.tensor<?x?xi32>,
// CHECK-SAME: %g: !fuser.tensor<bxbxi1>)

// -----

// Input layouts: `order [...]` (stride_order[i] ranks dim i, 0 = fastest). Spaces inside the
// type are optional and printed canonically.
func.func @input_layouts(%nchw_as_nhwc: !fuser.tensor<?x3x?x?xf32, order [3, 0, 2, 1]>,
                         %col_major: !fuser.tensor<?x?xbf16,order[0,1]>,
                         %rank0: !fuser.tensor<f32, order []>) {
  func.return
}
// CHECK-LABEL: func.func @input_layouts(
// CHECK-SAME: %nchw_as_nhwc: !fuser.tensor<?x3x?x?xf32, order [3, 0, 2, 1]>,
// CHECK-SAME: %col_major: !fuser.tensor<?x?xbf16, order [0, 1]>,
// An empty order is the default layout: it prints as no order at all.
// CHECK-SAME: %rank0: !fuser.tensor<f32>)

// -----

// Output layouts: a user REQUIREMENT (fuser.stride_order) and an inferred HINT
// (fuser.stride_order_hint) stay distinct; outputs without either print bare.
func.func @output_layouts(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?x?xf32> {fuser.stride_order = array<i64: 0, 1>},
                                                         !fuser.tensor<?x?xf32> {fuser.stride_order_hint = array<i64: 1, 0>},
                                                         !fuser.tensor<?x?xf32>) {
  func.return %x, %x, %x : !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @output_layouts(%x: !fuser.tensor<?x?xf32>) ->
// CHECK-SAME: (!fuser.tensor<?x?xf32> {fuser.stride_order = array<i64: 0, 1>},
// CHECK-SAME: !fuser.tensor<?x?xf32> {fuser.stride_order_hint = array<i64: 1, 0>},
// CHECK-SAME: !fuser.tensor<?x?xf32>) {
// CHECK-NEXT: func.return %x, %x, %x

// -----

// Scalar inputs (runtime scalars) sit beside tensors.
func.func @scalar_inputs(%x: !fuser.tensor<?xf32>, %s: f64, %n: i64, %flag: i1) {
  func.return
}
// CHECK-LABEL: func.func @scalar_inputs(%x: !fuser.tensor<?xf32>, %s: f64, %n: i64, %flag: i1)

// -----

// fp8 (storage only) and complex element types; ops on them keep their dtype, and real/imag/abs
// of a complex tensor give the real dtype of its parts.
func.func @fp8_and_complex(%a: !fuser.tensor<?x3xf8E4M3FN>, %b: !fuser.tensor<bxf8E5M2>,
                           %c: !fuser.tensor<?xbxc64>, %d: !fuser.tensor<2x?xc128, order [0, 1]>)
    -> (!fuser.tensor<3x?xf8E4M3FN>, !fuser.tensor<?x3xf32>, !fuser.tensor<?xbxf32>,
        !fuser.tensor<?xbxf32>, !fuser.tensor<?xbxc128>, !fuser.tensor<?xc128>) {
  %p = fuser.permute %a dims [1, 0] : !fuser.tensor<?x3xf8E4M3FN> -> !fuser.tensor<3x?xf8E4M3FN>
  %f = fuser.cast %a : !fuser.tensor<?x3xf8E4M3FN> -> !fuser.tensor<?x3xf32>
  %re = fuser.unary real %c : !fuser.tensor<?xbxc64> -> !fuser.tensor<?xbxf32>
  %abs = fuser.unary abs %c : !fuser.tensor<?xbxc64> -> !fuser.tensor<?xbxf32>
  %w = fuser.cast %c : !fuser.tensor<?xbxc64> -> !fuser.tensor<?xbxc128>
  %s = fuser.reduction sum %d dims [0] : !fuser.tensor<2x?xc128, order [0, 1]> -> !fuser.tensor<?xc128>
  func.return %p, %f, %re, %abs, %w, %s : !fuser.tensor<3x?xf8E4M3FN>, !fuser.tensor<?x3xf32>, !fuser.tensor<?xbxf32>, !fuser.tensor<?xbxf32>, !fuser.tensor<?xbxc128>, !fuser.tensor<?xc128>
}
// CHECK-LABEL: func.func @fp8_and_complex(
// CHECK-SAME: %a: !fuser.tensor<?x3xf8E4M3FN>, %b: !fuser.tensor<bxf8E5M2>,
// CHECK-SAME: %c: !fuser.tensor<?xbxc64>, %d: !fuser.tensor<2x?xc128, order [0, 1]>)
// CHECK: fuser.permute %{{.*}} dims [1, 0] : !fuser.tensor<?x3xf8E4M3FN> -> !fuser.tensor<3x?xf8E4M3FN>
// CHECK: fuser.cast %{{.*}} : !fuser.tensor<?x3xf8E4M3FN> -> !fuser.tensor<?x3xf32>
// CHECK: fuser.unary real %{{.*}} : !fuser.tensor<?xbxc64> -> !fuser.tensor<?xbxf32>
// CHECK: fuser.unary abs %{{.*}} : !fuser.tensor<?xbxc64> -> !fuser.tensor<?xbxf32>
// CHECK: fuser.cast %{{.*}} : !fuser.tensor<?xbxc64> -> !fuser.tensor<?xbxc128>
// CHECK: fuser.reduction sum %{{.*}} dims [0] : !fuser.tensor<2x?xc128, order [0, 1]> -> !fuser.tensor<?xc128>
