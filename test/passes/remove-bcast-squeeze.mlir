// RUN: fuser-opt %s --split-input-file -p remove-bcast-squeeze | filecheck %s
// RUN: fuser-opt %s --split-input-file -p 'remove-bcast-squeeze{swap-unary=true}' | filecheck %s
// RUN: fuser-opt %s --split-input-file -p 'remove-bcast-squeeze{swap-unary=false}' | filecheck %s --check-prefix=NOSWAP

// =======================================================================================
// Pairs that compose to the identity.

// broadcast then squeeze of the same dim: the pair is its input.
func.func @bcast_squeeze_identity(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %b = fuser.broadcast %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbx?xf32>
  %s = fuser.squeeze %b dims [1] : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<?x?xf32>
  %r = fuser.unary relu %s : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  func.return %r : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @bcast_squeeze_identity
// CHECK-NEXT:    %r = fuser.unary relu %x : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
// CHECK-NEXT:    func.return %r
// NOSWAP-LABEL: func.func @bcast_squeeze_identity
// NOSWAP-NEXT:    %r = fuser.unary relu %x

// -----

// squeeze then broadcast of the same dim.
func.func @squeeze_bcast_identity(%x: !fuser.tensor<?xbx?xf32>) -> !fuser.tensor<?xbx?xf32> {
  %n = fuser.unary neg %x : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<?xbx?xf32>
  %s = fuser.squeeze %n dims [1] : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<?x?xf32>
  %b = fuser.broadcast %s dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbx?xf32>
  func.return %b : !fuser.tensor<?xbx?xf32>
}
// CHECK-LABEL: func.func @squeeze_bcast_identity
// CHECK-NEXT:    %n = fuser.unary neg %x
// CHECK-NEXT:    func.return %n : !fuser.tensor<?xbx?xf32>

// -----

// broadcast_in_dim counts as a broadcast.
func.func @bcast_in_dim_squeeze(%x: !fuser.tensor<?x4xf16>) -> !fuser.tensor<?x4xf16> {
  %b = fuser.broadcast_in_dim %x dims [0, 2] : !fuser.tensor<?x4xf16> -> !fuser.tensor<?xbx4xf16>
  %s = fuser.squeeze %b dims [1] : !fuser.tensor<?xbx4xf16> -> !fuser.tensor<?x4xf16>
  %r = fuser.unary abs %s : !fuser.tensor<?x4xf16> -> !fuser.tensor<?x4xf16>
  func.return %r : !fuser.tensor<?x4xf16>
}
// CHECK-LABEL: func.func @bcast_in_dim_squeeze
// CHECK-NEXT:    %r = fuser.unary abs %x
// CHECK-NEXT:    func.return %r

// -----

// A broadcast or squeeze that changes no dim is its input.
func.func @identity_squeeze(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %s = fuser.squeeze %x dims [] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %r = fuser.unary exp %s : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  func.return %r : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @identity_squeeze
// CHECK-NEXT:    %r = fuser.unary exp %x
// CHECK-NEXT:    func.return %r

// -----

// =======================================================================================
// Pairs that compose to one squeeze or one broadcast.

// broadcast ∘ broadcast = one broadcast ([?,?] -> [b,?,?] -> [b,?,b,?]).
func.func @bcast_bcast(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<bx?xbx?xf32> {
  %a = fuser.broadcast %x dims [0] : !fuser.tensor<?x?xf32> -> !fuser.tensor<bx?x?xf32>
  %b = fuser.broadcast %a dims [2] : !fuser.tensor<bx?x?xf32> -> !fuser.tensor<bx?xbx?xf32>
  func.return %b : !fuser.tensor<bx?xbx?xf32>
}
// CHECK-LABEL: func.func @bcast_bcast
// CHECK-NEXT:    %b = fuser.broadcast %x dims [0, 2] : !fuser.tensor<?x?xf32> -> !fuser.tensor<bx?xbx?xf32>
// CHECK-NEXT:    func.return %b

// -----

// squeeze ∘ squeeze = one squeeze, dims numbered in the first input.
func.func @squeeze_squeeze(%x: !fuser.tensor<bx?xbx?xbxi32>) -> !fuser.tensor<?x?xi32> {
  %a = fuser.squeeze %x dims [0, 4] : !fuser.tensor<bx?xbx?xbxi32> -> !fuser.tensor<?xbx?xi32>
  %b = fuser.squeeze %a dims [1] : !fuser.tensor<?xbx?xi32> -> !fuser.tensor<?x?xi32>
  func.return %b : !fuser.tensor<?x?xi32>
}
// CHECK-LABEL: func.func @squeeze_squeeze
// CHECK-NEXT:    %b = fuser.squeeze %x dims [0, 2, 4] : !fuser.tensor<bx?xbx?xbxi32> -> !fuser.tensor<?x?xi32>
// CHECK-NEXT:    func.return %b

// -----

// broadcast [0, 2] then squeeze [0]: one new dim cancels, one stays.
func.func @bcast_squeeze_to_bcast(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?xbx?xf32> {
  %a = fuser.broadcast %x dims [0, 2] : !fuser.tensor<?x?xf32> -> !fuser.tensor<bx?xbx?xf32>
  %b = fuser.squeeze %a dims [0] : !fuser.tensor<bx?xbx?xf32> -> !fuser.tensor<?xbx?xf32>
  func.return %b : !fuser.tensor<?xbx?xf32>
}
// CHECK-LABEL: func.func @bcast_squeeze_to_bcast
// CHECK-NEXT:    %b = fuser.broadcast %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbx?xf32>
// CHECK-NEXT:    func.return %b

// -----

// broadcast [0] then squeeze [0, 2]: the new dim cancels, an old broadcast dim goes.
func.func @bcast_squeeze_to_squeeze(%x: !fuser.tensor<?xbx?xf32>) -> !fuser.tensor<?x?xf32> {
  %a = fuser.broadcast %x dims [0] : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<bx?xbx?xf32>
  %b = fuser.squeeze %a dims [0, 2] : !fuser.tensor<bx?xbx?xf32> -> !fuser.tensor<?x?xf32>
  func.return %b : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @bcast_squeeze_to_squeeze
// CHECK-NEXT:    %b = fuser.squeeze %x dims [1] : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<?x?xf32>
// CHECK-NEXT:    func.return %b

// -----

// The first op has another use: it stays for that use, the second reads its input.
func.func @first_multi_use(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<bx?xbx?xf32>, !fuser.tensor<bx?x?xf32>) {
  %a = fuser.broadcast %x dims [0] : !fuser.tensor<?x?xf32> -> !fuser.tensor<bx?x?xf32>
  %b = fuser.broadcast %a dims [2] : !fuser.tensor<bx?x?xf32> -> !fuser.tensor<bx?xbx?xf32>
  func.return %b, %a : !fuser.tensor<bx?xbx?xf32>, !fuser.tensor<bx?x?xf32>
}
// CHECK-LABEL: func.func @first_multi_use
// CHECK-NEXT:    %a = fuser.broadcast %x dims [0]
// CHECK-NEXT:    %b = fuser.broadcast %x dims [0, 2]
// CHECK-NEXT:    func.return %b, %a

// -----

// =======================================================================================
// Mixed compositions are left alone.

// [?,b] -> broadcast [0] -> [b,?,b] -> squeeze [2] -> [b,?]: a broadcast in front and a
// squeeze at the back (a move of a unit dim), not one op.
func.func @mixed(%x: !fuser.tensor<?xbxf32>) -> !fuser.tensor<bx?xf32> {
  %a = fuser.broadcast %x dims [0] : !fuser.tensor<?xbxf32> -> !fuser.tensor<bx?xbxf32>
  %b = fuser.squeeze %a dims [2] : !fuser.tensor<bx?xbxf32> -> !fuser.tensor<bx?xf32>
  func.return %b : !fuser.tensor<bx?xf32>
}
// CHECK-LABEL: func.func @mixed
// CHECK-NEXT:    %a = fuser.broadcast %x dims [0] : !fuser.tensor<?xbxf32> -> !fuser.tensor<bx?xbxf32>
// CHECK-NEXT:    %b = fuser.squeeze %a dims [2] : !fuser.tensor<bx?xbxf32> -> !fuser.tensor<bx?xf32>
// CHECK-NEXT:    func.return %b

// -----

// squeeze [1] then broadcast [2]: a squeeze and a broadcast at different places.
func.func @mixed_squeeze_bcast(%x: !fuser.tensor<?xbx?xf32>) -> !fuser.tensor<?x?xbxf32> {
  %a = fuser.squeeze %x dims [1] : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<?x?xf32>
  %b = fuser.broadcast %a dims [2] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xbxf32>
  func.return %b : !fuser.tensor<?x?xbxf32>
}
// CHECK-LABEL: func.func @mixed_squeeze_bcast
// CHECK-NEXT:    %a = fuser.squeeze %x dims [1]
// CHECK-NEXT:    %b = fuser.broadcast %a dims [2]
// CHECK-NEXT:    func.return %b

// -----

// The composition is the identity up to the type (a static 1 becomes a broadcast dim): the
// users of the pair expect `b`, so it stays.
func.func @identity_type_differs(%x: !fuser.tensor<?x1xf32>) -> !fuser.tensor<?xbxf32> {
  %n = fuser.unary neg %x : !fuser.tensor<?x1xf32> -> !fuser.tensor<?x1xf32>
  %s = fuser.squeeze %n dims [1] : !fuser.tensor<?x1xf32> -> !fuser.tensor<?xf32>
  %b = fuser.broadcast %s dims [1] : !fuser.tensor<?xf32> -> !fuser.tensor<?xbxf32>
  func.return %b : !fuser.tensor<?xbxf32>
}
// CHECK-LABEL: func.func @identity_type_differs
// CHECK-NEXT:    %n = fuser.unary neg %x
// CHECK-NEXT:    %s = fuser.squeeze %n dims [1]
// CHECK-NEXT:    %b = fuser.broadcast %s dims [1]
// CHECK-NEXT:    func.return %b

// -----

// =======================================================================================
// Fusion outputs.

// An output must not become a fusion input (it would alias it): left alone.
func.func @output_not_forwarded_to_input(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %b = fuser.broadcast %x dims [0] : !fuser.tensor<?x?xf32> -> !fuser.tensor<bx?x?xf32>
  %s = fuser.squeeze %b dims [0] : !fuser.tensor<bx?x?xf32> -> !fuser.tensor<?x?xf32>
  func.return %s : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @output_not_forwarded_to_input
// CHECK-NEXT:    %b = fuser.broadcast %x dims [0]
// CHECK-NEXT:    %s = fuser.squeeze %b dims [0]
// CHECK-NEXT:    func.return %s

// -----

// An output must not become another output with a different layout: left alone.
func.func @output_not_forwarded_to_other_layout(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?x?xf32> {fuser.stride_order = array<i64: 0, 1>}, !fuser.tensor<?x?xf32>) {
  %y = fuser.unary neg %x : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %b = fuser.broadcast %y dims [2] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xbxf32>
  %s = fuser.squeeze %b dims [2] : !fuser.tensor<?x?xbxf32> -> !fuser.tensor<?x?xf32>
  func.return %y, %s : !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @output_not_forwarded_to_other_layout
// CHECK-NEXT:    %y = fuser.unary neg %x
// CHECK-NEXT:    %b = fuser.broadcast %y dims [2]
// CHECK-NEXT:    %s = fuser.squeeze %b dims [2]
// CHECK-NEXT:    func.return %y, %s

// -----

// ... but it may become another output with the same layout.
func.func @output_forwarded_same_layout(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?x?xf32> {fuser.stride_order = array<i64: 0, 1>}, !fuser.tensor<?x?xf32> {fuser.stride_order = array<i64: 0, 1>}) {
  %y = fuser.unary neg %x : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %b = fuser.broadcast %y dims [2] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xbxf32>
  %s = fuser.squeeze %b dims [2] : !fuser.tensor<?x?xbxf32> -> !fuser.tensor<?x?xf32>
  func.return %y, %s : !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @output_forwarded_same_layout
// CHECK-NEXT:    %y = fuser.unary neg %x
// CHECK-NEXT:    func.return %y, %y

// -----

// A replaced 4-D output keeps its channels-last requirement.
func.func @output_keeps_required_order(%x: !fuser.tensor<?x?x?x?xf32>) -> (!fuser.tensor<?x?x?x?xf32> {fuser.stride_order = array<i64: 3, 0, 2, 1>}) {
  %y = fuser.unary neg %x : !fuser.tensor<?x?x?x?xf32> -> !fuser.tensor<?x?x?x?xf32>
  %b = fuser.broadcast %y dims [4] : !fuser.tensor<?x?x?x?xf32> -> !fuser.tensor<?x?x?x?xbxf32>
  %s = fuser.squeeze %b dims [4] : !fuser.tensor<?x?x?x?xbxf32> -> !fuser.tensor<?x?x?x?xf32>
  func.return %s : !fuser.tensor<?x?x?x?xf32>
}
// CHECK-LABEL: func.func @output_keeps_required_order
// CHECK-SAME:    -> (!fuser.tensor<?x?x?x?xf32> {fuser.stride_order = array<i64: 3, 0, 2, 1>})
// CHECK-NEXT:    %y = fuser.unary neg %x
// CHECK-NEXT:    func.return %y

// -----

// =======================================================================================
// Unary swap (default on; off with swap-unary=false).

// broadcast → relu → squeeze becomes relu.
func.func @swap_relu(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %b = fuser.broadcast %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbx?xf32>
  %r = fuser.unary relu %b : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<?xbx?xf32>
  %s = fuser.squeeze %r dims [1] : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<?x?xf32>
  func.return %s : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @swap_relu
// CHECK-NEXT:    %[[R:[^ ]+]] = fuser.unary relu %x : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
// CHECK-NEXT:    func.return %[[R]] : !fuser.tensor<?x?xf32>
// NOSWAP-LABEL: func.func @swap_relu
// NOSWAP-NEXT:    %b = fuser.broadcast %x dims [1]
// NOSWAP-NEXT:    %r = fuser.unary relu %b
// NOSWAP-NEXT:    %s = fuser.squeeze %r dims [1]
// NOSWAP-NEXT:    func.return %s

// -----

// broadcast → cast(f32) → squeeze → cast(bf16): only the casts remain (consecutive-cast's job).
func.func @swap_cast(%x: !fuser.tensor<?x?xbf16>) -> !fuser.tensor<?x?xbf16> {
  %b = fuser.broadcast %x dims [0] : !fuser.tensor<?x?xbf16> -> !fuser.tensor<bx?x?xbf16>
  %c = fuser.cast %b : !fuser.tensor<bx?x?xbf16> -> !fuser.tensor<bx?x?xf32>
  %s = fuser.squeeze %c dims [0] : !fuser.tensor<bx?x?xf32> -> !fuser.tensor<?x?xf32>
  %d = fuser.cast %s : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xbf16>
  func.return %d : !fuser.tensor<?x?xbf16>
}
// NOSWAP-LABEL: func.func @swap_cast
// NOSWAP-NEXT:    %b = fuser.broadcast %x dims [0]
// NOSWAP-NEXT:    %c = fuser.cast %b
// NOSWAP-NEXT:    %s = fuser.squeeze %c dims [0]
// NOSWAP-NEXT:    %d = fuser.cast %s
// CHECK-LABEL: func.func @swap_cast
// CHECK-NEXT:    %[[C:[^ ]+]] = fuser.cast %x : !fuser.tensor<?x?xbf16> -> !fuser.tensor<?x?xf32>
// CHECK-NEXT:    %d = fuser.cast %[[C]] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xbf16>
// CHECK-NEXT:    func.return %d

// -----

// squeeze → exp → neg → broadcast: the broadcast climbs two unary ops, one per rewrite.
func.func @swap_two_unaries(%x: !fuser.tensor<bx?xf32>) -> !fuser.tensor<bx?xf32> {
  %s = fuser.squeeze %x dims [0] : !fuser.tensor<bx?xf32> -> !fuser.tensor<?xf32>
  %e = fuser.unary exp %s : !fuser.tensor<?xf32> -> !fuser.tensor<?xf32>
  %n = fuser.unary neg %e : !fuser.tensor<?xf32> -> !fuser.tensor<?xf32>
  %b = fuser.broadcast %n dims [0] : !fuser.tensor<?xf32> -> !fuser.tensor<bx?xf32>
  func.return %b : !fuser.tensor<bx?xf32>
}
// CHECK-LABEL: func.func @swap_two_unaries
// CHECK-NEXT:    %[[E:[^ ]+]] = fuser.unary exp %x : !fuser.tensor<bx?xf32> -> !fuser.tensor<bx?xf32>
// CHECK-NEXT:    %[[N:[^ ]+]] = fuser.unary neg %[[E]] : !fuser.tensor<bx?xf32> -> !fuser.tensor<bx?xf32>
// CHECK-NEXT:    func.return %[[N]]
// CHECK-NOT:     fuser.broadcast
// CHECK-NOT:     fuser.squeeze

// -----

// A binary op with one tensor operand (and a scalar) is a simple unary op too.
func.func @swap_binary_scalar(%x: !fuser.tensor<?xf32>, %k: f64) -> !fuser.tensor<?xf32> {
  %b = fuser.broadcast %x dims [1] : !fuser.tensor<?xf32> -> !fuser.tensor<?xbxf32>
  %m = fuser.binary mul %b, %k : (!fuser.tensor<?xbxf32>, f64) -> !fuser.tensor<?xbxf32>
  %s = fuser.squeeze %m dims [1] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xf32>
  func.return %s : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @swap_binary_scalar
// CHECK-NEXT:    %[[M:[^ ]+]] = fuser.binary mul %x, %k : (!fuser.tensor<?xf32>, f64) -> !fuser.tensor<?xf32>
// CHECK-NEXT:    func.return %[[M]]

// -----

// A where with one tensor operand (the condition) is a simple unary op as well.
func.func @swap_where(%c: !fuser.tensor<?xi1>, %a: f64, %b: f64) -> !fuser.tensor<?xf32> {
  %x = fuser.broadcast %c dims [0] : !fuser.tensor<?xi1> -> !fuser.tensor<bx?xi1>
  %w = fuser.where %x, %a, %b : (!fuser.tensor<bx?xi1>, f64, f64) -> !fuser.tensor<bx?xf32>
  %s = fuser.squeeze %w dims [0] : !fuser.tensor<bx?xf32> -> !fuser.tensor<?xf32>
  func.return %s : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @swap_where
// CHECK-NEXT:    %[[W:[^ ]+]] = fuser.where %c, %a, %b : (!fuser.tensor<?xi1>, f64, f64) -> !fuser.tensor<?xf32>
// CHECK-NEXT:    func.return %[[W]]

// -----

// broadcast_in_dim → cast → squeeze of a different kind: the squeeze climbs the cast and the
// pair composes to one broadcast.
func.func @swap_to_broadcast(%x: !fuser.tensor<?xf16>) -> !fuser.tensor<?xbxf32> {
  %b = fuser.broadcast_in_dim %x dims [1] : !fuser.tensor<?xf16> -> !fuser.tensor<bx?xbxf16>
  %c = fuser.cast %b : !fuser.tensor<bx?xbxf16> -> !fuser.tensor<bx?xbxf32>
  %s = fuser.squeeze %c dims [0] : !fuser.tensor<bx?xbxf32> -> !fuser.tensor<?xbxf32>
  func.return %s : !fuser.tensor<?xbxf32>
}
// CHECK-LABEL: func.func @swap_to_broadcast
// CHECK-NEXT:    %[[B:[^ ]+]] = fuser.broadcast %x dims [1] : !fuser.tensor<?xf16> -> !fuser.tensor<?xbxf16>
// CHECK-NEXT:    %[[C:[^ ]+]] = fuser.cast %[[B]] : !fuser.tensor<?xbxf16> -> !fuser.tensor<?xbxf32>
// CHECK-NEXT:    func.return %[[C]]

// -----

// Swapping into a required output keeps the requirement.
func.func @swap_output_keeps_order(%x: !fuser.tensor<?x?x?x?xf32>) -> (!fuser.tensor<?x?x?x?xf32> {fuser.stride_order = array<i64: 3, 0, 2, 1>}) {
  %b = fuser.broadcast %x dims [0] : !fuser.tensor<?x?x?x?xf32> -> !fuser.tensor<bx?x?x?x?xf32>
  %r = fuser.unary relu %b : !fuser.tensor<bx?x?x?x?xf32> -> !fuser.tensor<bx?x?x?x?xf32>
  %s = fuser.squeeze %r dims [0] : !fuser.tensor<bx?x?x?x?xf32> -> !fuser.tensor<?x?x?x?xf32>
  func.return %s : !fuser.tensor<?x?x?x?xf32>
}
// CHECK-LABEL: func.func @swap_output_keeps_order
// CHECK-SAME:    -> (!fuser.tensor<?x?x?x?xf32> {fuser.stride_order = array<i64: 3, 0, 2, 1>})
// CHECK-NEXT:    %[[R:[^ ]+]] = fuser.unary relu %x
// CHECK-NEXT:    func.return %[[R]]

// -----

// =======================================================================================
// Swaps that must not happen.

// The unary result has another use: no swap (it would duplicate the relu).
func.func @no_swap_multi_use(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbx?xf32>) {
  %b = fuser.broadcast %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbx?xf32>
  %r = fuser.unary relu %b : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<?xbx?xf32>
  %s = fuser.squeeze %r dims [1] : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<?x?xf32>
  %e = fuser.unary exp %r : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<?xbx?xf32>
  func.return %s, %e : !fuser.tensor<?x?xf32>, !fuser.tensor<?xbx?xf32>
}
// CHECK-LABEL: func.func @no_swap_multi_use
// CHECK-NEXT:    %b = fuser.broadcast %x dims [1]
// CHECK-NEXT:    %r = fuser.unary relu %b
// CHECK-NEXT:    %s = fuser.squeeze %r dims [1]
// CHECK-NEXT:    %e = fuser.unary exp %r
// CHECK-NEXT:    func.return %s, %e

// -----

// The unary result is a fusion output: no swap.
func.func @no_swap_output(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbx?xf32>) {
  %b = fuser.broadcast %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbx?xf32>
  %r = fuser.unary relu %b : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<?xbx?xf32>
  %s = fuser.squeeze %r dims [1] : !fuser.tensor<?xbx?xf32> -> !fuser.tensor<?x?xf32>
  func.return %s, %r : !fuser.tensor<?x?xf32>, !fuser.tensor<?xbx?xf32>
}
// CHECK-LABEL: func.func @no_swap_output
// CHECK-NEXT:    %b = fuser.broadcast %x dims [1]
// CHECK-NEXT:    %r = fuser.unary relu %b
// CHECK-NEXT:    %s = fuser.squeeze %r dims [1]
// CHECK-NEXT:    func.return %s, %r

// -----

// The pair around the unary op would compose to a mixed result: no swap.
func.func @no_swap_mixed(%x: !fuser.tensor<?xbxf32>) -> !fuser.tensor<bx?xf32> {
  %a = fuser.broadcast %x dims [0] : !fuser.tensor<?xbxf32> -> !fuser.tensor<bx?xbxf32>
  %n = fuser.unary neg %a : !fuser.tensor<bx?xbxf32> -> !fuser.tensor<bx?xbxf32>
  %b = fuser.squeeze %n dims [2] : !fuser.tensor<bx?xbxf32> -> !fuser.tensor<bx?xf32>
  func.return %b : !fuser.tensor<bx?xf32>
}
// CHECK-LABEL: func.func @no_swap_mixed
// CHECK-NEXT:    %a = fuser.broadcast %x dims [0]
// CHECK-NEXT:    %n = fuser.unary neg %a
// CHECK-NEXT:    %b = fuser.squeeze %n dims [2]
// CHECK-NEXT:    func.return %b

// -----

// No replaceable op above the unary op: nothing to merge with, no swap.
func.func @no_swap_without_partner(%x: !fuser.tensor<?xbxf32>) -> !fuser.tensor<?xf32> {
  %n = fuser.unary neg %x : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xbxf32>
  %s = fuser.squeeze %n dims [1] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xf32>
  func.return %s : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @no_swap_without_partner
// CHECK-NEXT:    %n = fuser.unary neg %x
// CHECK-NEXT:    %s = fuser.squeeze %n dims [1]
// CHECK-NEXT:    func.return %s

// -----

// A binary op with two tensor operands is not a simple unary op: no swap.
func.func @no_swap_binary(%x: !fuser.tensor<?xf32>, %y: !fuser.tensor<?xbxf32>) -> !fuser.tensor<?xf32> {
  %b = fuser.broadcast %x dims [1] : !fuser.tensor<?xf32> -> !fuser.tensor<?xbxf32>
  %m = fuser.binary add %b, %y : (!fuser.tensor<?xbxf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?xbxf32>
  %s = fuser.squeeze %m dims [1] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xf32>
  func.return %s : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @no_swap_binary
// CHECK-NEXT:    %b = fuser.broadcast %x dims [1]
// CHECK-NEXT:    %m = fuser.binary add %b, %y
// CHECK-NEXT:    %s = fuser.squeeze %m dims [1]
// CHECK-NEXT:    func.return %s
