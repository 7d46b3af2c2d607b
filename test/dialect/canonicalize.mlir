// RUN: fuser-opt %s --split-input-file -p canonicalize | filecheck %s

// Canonicalizations that remove ops doing nothing (fuser_dialect/canonicalization.py),
// and the near misses they must leave alone.

func.func @identity_permute(%x: !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32> {
  %r = fuser.permute %x dims [0, 1] : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  func.return %r : !fuser.tensor<?x4xf32>
}
// CHECK-LABEL: func.func @identity_permute
// CHECK-NEXT:    func.return %x : !fuser.tensor<?x4xf32>

// -----

// A square transpose keeps the type but moves data.
func.func @square_transpose_stays(%x: !fuser.tensor<4x4xf32>) -> !fuser.tensor<4x4xf32> {
  %r = fuser.permute %x dims [1, 0] : !fuser.tensor<4x4xf32> -> !fuser.tensor<4x4xf32>
  func.return %r : !fuser.tensor<4x4xf32>
}
// CHECK-LABEL: func.func @square_transpose_stays
// CHECK-NEXT:    %r = fuser.permute %x dims [1, 0]
// CHECK-NEXT:    func.return %r

// -----

// An input that arrives column-major: the identity permute's result is the plain
// (row-major) type the fusion returns, so removing it would change the return type.
func.func @identity_permute_of_ordered_input_stays(%x: !fuser.tensor<?x4xf32, order [0, 1]>) -> !fuser.tensor<?x4xf32> {
  %r = fuser.permute %x dims [0, 1] : !fuser.tensor<?x4xf32, order [0, 1]> -> !fuser.tensor<?x4xf32>
  func.return %r : !fuser.tensor<?x4xf32>
}
// CHECK-LABEL: func.func @identity_permute_of_ordered_input_stays
// CHECK-NEXT:    %r = fuser.permute %x dims [0, 1]
// CHECK-NEXT:    func.return %r : !fuser.tensor<?x4xf32>

// -----

func.func @broadcast_and_squeeze_of_no_dims(%x: !fuser.tensor<?xbxf32>) -> !fuser.tensor<?xbxf32> {
  %b = fuser.broadcast %x dims [] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xbxf32>
  %s = fuser.squeeze %b dims [] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xbxf32>
  func.return %s : !fuser.tensor<?xbxf32>
}
// CHECK-LABEL: func.func @broadcast_and_squeeze_of_no_dims
// CHECK-NEXT:    func.return %x : !fuser.tensor<?xbxf32>

// -----

func.func @broadcast_in_dim_to_the_same_rank(%x: !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32> {
  %r = fuser.broadcast_in_dim %x dims [0, 1] : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  func.return %r : !fuser.tensor<?x4xf32>
}
// CHECK-LABEL: func.func @broadcast_in_dim_to_the_same_rank
// CHECK-NEXT:    func.return %x : !fuser.tensor<?x4xf32>

// -----

// A real broadcast and a real squeeze (the pair is remove-bcast-squeeze's business).
func.func @real_broadcast_and_squeeze_stay(%x: !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32> {
  %b = fuser.broadcast %x dims [0] : !fuser.tensor<?xf32> -> !fuser.tensor<bx?xf32>
  %s = fuser.squeeze %b dims [0] : !fuser.tensor<bx?xf32> -> !fuser.tensor<?xf32>
  func.return %s : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @real_broadcast_and_squeeze_stay
// CHECK-NEXT:    %b = fuser.broadcast %x dims [0]
// CHECK-NEXT:    %s = fuser.squeeze %b dims [0]

// -----

func.func @static_reshape_and_expand_to_the_same_dims(%x: !fuser.tensor<2x3xf32>) -> !fuser.tensor<2x3xf32> {
  %r = fuser.reshape %x : !fuser.tensor<2x3xf32> -> !fuser.tensor<2x3xf32>
  %e = fuser.expand %r : !fuser.tensor<2x3xf32> -> !fuser.tensor<2x3xf32>
  func.return %e : !fuser.tensor<2x3xf32>
}
// CHECK-LABEL: func.func @static_reshape_and_expand_to_the_same_dims
// CHECK-NEXT:    func.return %x : !fuser.tensor<2x3xf32>

// -----

// `?` extents taken from the input itself: still the same tensor.
func.func @dynamic_reshape_to_its_own_extents(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %m = fuser.dim %x, 0 : !fuser.tensor<?x?xf32>
  %n = fuser.dim %x, 1 : !fuser.tensor<?x?xf32>
  %r = fuser.reshape %x(%m, %n) : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  func.return %r : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @dynamic_reshape_to_its_own_extents
// CHECK-NEXT:    func.return %x : !fuser.tensor<?x?xf32>

// -----

// Same type, but the extents may regroup the elements (2x6 -> 3x4), or be swapped.
func.func @dynamic_reshape_to_other_extents_stays(%x: !fuser.tensor<?x?xf32>, %m: i64, %n: i64) -> (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) {
  %r = fuser.reshape %x(%m, %n) : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %d0 = fuser.dim %x, 0 : !fuser.tensor<?x?xf32>
  %d1 = fuser.dim %x, 1 : !fuser.tensor<?x?xf32>
  %t = fuser.reshape %x(%d1, %d0) : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  func.return %r, %t : !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @dynamic_reshape_to_other_extents_stays
// CHECK:         %r = fuser.reshape %x(%m, %n)
// CHECK:         %t = fuser.reshape %x(%d1, %d0)
// CHECK-NEXT:    func.return %r, %t

// -----

// A `?` dim that is 1 at run time expands to the operand's extent.
func.func @dynamic_expand_stays(%x: !fuser.tensor<?x4xf32>, %n: i64) -> !fuser.tensor<?x4xf32> {
  %e = fuser.expand %x(%n) : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  func.return %e : !fuser.tensor<?x4xf32>
}
// CHECK-LABEL: func.func @dynamic_expand_stays
// CHECK-NEXT:    %e = fuser.expand %x(%n)

// -----

// Zero widths, static or arith constants.
func.func @zero_pad(%x: !fuser.tensor<bx4xf32>, %v: f64) -> (!fuser.tensor<bx4xf32>, !fuser.tensor<bx4xf32>) {
  %r = fuser.pad %x [0:0, 0:0] value %v : (!fuser.tensor<bx4xf32>, f64) -> !fuser.tensor<bx4xf32>
  %zero = arith.constant 0 : i64
  %s = fuser.pad %x [0:0, %zero:0] value %v : (!fuser.tensor<bx4xf32>, f64) -> !fuser.tensor<bx?xf32>
  %t = fuser.pad %x [0:0, %zero:0] value %v : (!fuser.tensor<bx4xf32>, f64) -> !fuser.tensor<bx?xf32>
  func.return %r, %r : !fuser.tensor<bx4xf32>, !fuser.tensor<bx4xf32>
}
// CHECK-LABEL: func.func @zero_pad
// CHECK-NEXT:    func.return %x, %x : !fuser.tensor<bx4xf32>, !fuser.tensor<bx4xf32>

// -----

// A zero SSA width leaves the result `?`: the types differ and the pad stays
// (concretize makes the width static; then it goes).
func.func @zero_ssa_pad_with_dynamic_result_stays(%x: !fuser.tensor<4xf32>, %v: f64) -> !fuser.tensor<?xf32> {
  %zero = arith.constant 0 : i64
  %r = fuser.pad %x [%zero:0] value %v : (!fuser.tensor<4xf32>, f64) -> !fuser.tensor<?xf32>
  func.return %r : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @zero_ssa_pad_with_dynamic_result_stays
// CHECK:         %r = fuser.pad %x [%zero:0]

// -----

func.func @nonzero_pad_stays(%x: !fuser.tensor<4xf32>, %v: f64) -> !fuser.tensor<4xf32> {
  %r = fuser.pad %x [1:-1] value %v : (!fuser.tensor<4xf32>, f64) -> !fuser.tensor<4xf32>
  func.return %r : !fuser.tensor<4xf32>
}
// CHECK-LABEL: func.func @nonzero_pad_stays
// CHECK-NEXT:    %r = fuser.pad %x [1:-1]

// -----

// 0:4:1 of 4, and 0:100:1 (clamped) of a broadcast dim.
func.func @full_slice(%x: !fuser.tensor<4xbxf32>) -> !fuser.tensor<4xbxf32> {
  %r = fuser.slice %x [0:4:1, 0:100:1] : !fuser.tensor<4xbxf32> -> !fuser.tensor<4xbxf32>
  func.return %r : !fuser.tensor<4xbxf32>
}
// CHECK-LABEL: func.func @full_slice
// CHECK-NEXT:    func.return %x : !fuser.tensor<4xbxf32>

// -----

// On a `?` dim, 0:4 may cut; an SSA bound may be anything.
func.func @slice_of_dynamic_dims_stays(%x: !fuser.tensor<?xf32>, %y: !fuser.tensor<4xf32>, %e: i64) -> (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>) {
  %r = fuser.slice %x [0:4:1] : !fuser.tensor<?xf32> -> !fuser.tensor<?xf32>
  %s = fuser.slice %y [0:%e:1] : !fuser.tensor<4xf32> -> !fuser.tensor<?xf32>
  func.return %r, %s : !fuser.tensor<?xf32>, !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @slice_of_dynamic_dims_stays
// CHECK-NEXT:    %r = fuser.slice %x [0:4:1]
// CHECK-NEXT:    %s = fuser.slice %y [0:%e:1]

// -----

func.func @partial_slice_stays(%x: !fuser.tensor<4xf32>) -> !fuser.tensor<3xf32> {
  %r = fuser.slice %x [1:4:1] : !fuser.tensor<4xf32> -> !fuser.tensor<3xf32>
  func.return %r : !fuser.tensor<3xf32>
}
// CHECK-LABEL: func.func @partial_slice_stays
// CHECK-NEXT:    %r = fuser.slice %x [1:4:1]

// -----

func.func @same_type_cast(%x: !fuser.tensor<?xbf16>) -> !fuser.tensor<?xbf16> {
  %r = fuser.cast %x : !fuser.tensor<?xbf16> -> !fuser.tensor<?xbf16>
  func.return %r : !fuser.tensor<?xbf16>
}
// CHECK-LABEL: func.func @same_type_cast
// CHECK-NEXT:    func.return %x : !fuser.tensor<?xbf16>

// -----

// A real cast; and a same-dtype cast of a column-major input (it drops the layout).
func.func @real_casts_stay(%x: !fuser.tensor<?xbf16>, %y: !fuser.tensor<?x?xf32, order [0, 1]>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?x?xf32>) {
  %r = fuser.cast %x : !fuser.tensor<?xbf16> -> !fuser.tensor<?xf32>
  %s = fuser.cast %y : !fuser.tensor<?x?xf32, order [0, 1]> -> !fuser.tensor<?x?xf32>
  func.return %r, %s : !fuser.tensor<?xf32>, !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @real_casts_stay
// CHECK-NEXT:    %r = fuser.cast %x
// CHECK-NEXT:    %s = fuser.cast %y

// -----

// Static and broadcast extents are constants; a `?` extent is not. xDSL's arith
// folding then computes with the constants.
func.func @static_dims(%x: !fuser.tensor<?x8xbxf32>) -> (i64, i64, i64) {
  %d0 = fuser.dim %x, 0 : !fuser.tensor<?x8xbxf32>
  %d1 = fuser.dim %x, 1 : !fuser.tensor<?x8xbxf32>
  %d2 = fuser.dim %x, 2 : !fuser.tensor<?x8xbxf32>
  %n = arith.muli %d1, %d2 : i64
  func.return %d0, %d1, %n : i64, i64, i64
}
// CHECK-LABEL: func.func @static_dims
// CHECK-NEXT:    %d0 = fuser.dim %x, 0
// CHECK-NEXT:    %d1 = arith.constant 8 : i64
// CHECK-NEXT:    %n = arith.constant 8 : i64
// CHECK-NEXT:    func.return %d0, %d1, %n : i64, i64, i64
