// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier messages of pad, slice and cat.

func.func @pad_widths_wrong_length(%x: !fuser.tensor<?x8xf32>, %v: f64) {
  %r = fuser.pad %x [1:1] value %v : (!fuser.tensor<?x8xf32>, f64) -> !fuser.tensor<?x8xf32>
  func.return
}
// CHECK: fuser.pad: 2 pad widths given for a tensor of rank 2 (expected 4: a left and a right width per dim)

// -----

// Negative widths crop, but not below zero elements.
func.func @pad_negative_extent(%x: !fuser.tensor<4x8xf32>, %v: f64) {
  %r = fuser.pad %x [0:0, -5:-4] value %v : (!fuser.tensor<4x8xf32>, f64) -> !fuser.tensor<4x?xf32>
  func.return
}
// CHECK: fuser.pad: dim 1 of extent 8 padded by (-5, -4) has negative extent -1

// -----

func.func @pad_value_not_scalar(%x: !fuser.tensor<4xf32>, %v: !fuser.tensor<f32>) {
  %r = fuser.pad %x [1:1] value %v : (!fuser.tensor<4xf32>, !fuser.tensor<f32>) -> !fuser.tensor<6xf32>
  func.return
}
// CHECK: fuser.pad: pad value must be a scalar, got !fuser.tensor<f32>

// -----

func.func @pad_result_extent(%x: !fuser.tensor<4xf32>, %v: f64) {
  %r = fuser.pad %x [1:2] value %v : (!fuser.tensor<4xf32>, f64) -> !fuser.tensor<6xf32>
  func.return
}
// CHECK: fuser.pad: result dim 0 is 6, expected 7 (result [6], inferred [7])

// -----

func.func @slice_bounds_wrong_length(%x: !fuser.tensor<?x8xf32>) {
  %r = fuser.slice %x [0:4:1] : !fuser.tensor<?x8xf32> -> !fuser.tensor<4xf32>
  func.return
}
// CHECK: fuser.slice: 1 start/stop pairs and 1 steps given for a tensor of rank 2

// -----

func.func @slice_step_not_positive(%x: !fuser.tensor<8xf32>) {
  %r = fuser.slice %x [6:0:-1] : !fuser.tensor<8xf32> -> !fuser.tensor<6xf32>
  func.return
}
// CHECK: fuser.slice: dim 0 has step -1; steps must be positive

// -----

// Bounds clamp to the extent: 2:100 of 5 has 3 elements.
func.func @slice_result_extent(%x: !fuser.tensor<5xf32>) {
  %r = fuser.slice %x [2:100:1] : !fuser.tensor<5xf32> -> !fuser.tensor<98xf32>
  func.return
}
// CHECK: fuser.slice: result dim 0 is 98, expected 3 (result [98], inferred [3])

// -----

func.func @cat_extents_off_axis(%a: !fuser.tensor<2x8xf32>, %b: !fuser.tensor<3x7xf32>) {
  %r = fuser.cat %a, %b dim 0 : (!fuser.tensor<2x8xf32>, !fuser.tensor<3x7xf32>) -> !fuser.tensor<5x8xf32>
  func.return
}
// CHECK: fuser.cat: input 1 has extent 7 in dim 1 but input 0 has 8; all inputs must agree off the cat dim 0

// -----

func.func @cat_dtype_mismatch(%a: !fuser.tensor<2x8xf32>, %b: !fuser.tensor<3x8xf16>) {
  %r = fuser.cat %a, %b dim 0 : (!fuser.tensor<2x8xf32>, !fuser.tensor<3x8xf16>) -> !fuser.tensor<5x8xf32>
  func.return
}
// CHECK: fuser.cat: input 1 has dtype f16, input 0 has f32

// -----

func.func @cat_rank_mismatch(%a: !fuser.tensor<2x8xf32>, %b: !fuser.tensor<8xf32>) {
  %r = fuser.cat %a, %b dim 0 : (!fuser.tensor<2x8xf32>, !fuser.tensor<8xf32>) -> !fuser.tensor<?x8xf32>
  func.return
}
// CHECK: fuser.cat: input 1 has rank 1, input 0 has rank 2

// -----

func.func @cat_dim_out_of_range(%a: !fuser.tensor<2x8xf32>) {
  %r = fuser.cat %a, %a dim 2 : (!fuser.tensor<2x8xf32>, !fuser.tensor<2x8xf32>) -> !fuser.tensor<2x8xf32>
  func.return
}
// CHECK: fuser.cat: cat dim 2 is out of range for inputs of rank 2
