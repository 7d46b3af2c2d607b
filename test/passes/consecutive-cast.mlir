// RUN: fuser-opt %s --split-input-file -p consecutive-cast | filecheck %s

// =======================================================================================
// Chains that fold to the narrowest anchor.

// f64 → f32 → f16 → f32 → f64 ⇒ f64 → f16 → f64.
func.func @anchor_half(%x: !fuser.tensor<?xf64>) -> !fuser.tensor<?xf64> {
  %a = fuser.cast %x : !fuser.tensor<?xf64> -> !fuser.tensor<?xf32>
  %b = fuser.cast %a : !fuser.tensor<?xf32> -> !fuser.tensor<?xf16>
  %c = fuser.cast %b : !fuser.tensor<?xf16> -> !fuser.tensor<?xf32>
  %d = fuser.cast %c : !fuser.tensor<?xf32> -> !fuser.tensor<?xf64>
  func.return %d : !fuser.tensor<?xf64>
}
// CHECK-LABEL: func.func @anchor_half
// CHECK-NEXT:    %[[H:[^ ]+]] = fuser.cast %x : !fuser.tensor<?xf64> -> !fuser.tensor<?xf16>
// CHECK-NEXT:    %[[D:[^ ]+]] = fuser.cast %[[H]] : !fuser.tensor<?xf16> -> !fuser.tensor<?xf64>
// CHECK-NEXT:    func.return %[[D]] : !fuser.tensor<?xf64>

// -----

// f64 → f32 → f64 → f16 ⇒ f64 → f16.
func.func @narrow_end(%x: !fuser.tensor<?x4xf64>) -> !fuser.tensor<?x4xf16> {
  %a = fuser.cast %x : !fuser.tensor<?x4xf64> -> !fuser.tensor<?x4xf32>
  %b = fuser.cast %a : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf64>
  %c = fuser.cast %b : !fuser.tensor<?x4xf64> -> !fuser.tensor<?x4xf16>
  func.return %c : !fuser.tensor<?x4xf16>
}
// CHECK-LABEL: func.func @narrow_end
// CHECK-NEXT:    %[[C:[^ ]+]] = fuser.cast %x : !fuser.tensor<?x4xf64> -> !fuser.tensor<?x4xf16>
// CHECK-NEXT:    func.return %[[C]]

// -----

// f32 → f64 → f32 ⇒ the input itself.
func.func @round_trip(%x: !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32> {
  %a = fuser.cast %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xf64>
  %b = fuser.cast %a : !fuser.tensor<?xf64> -> !fuser.tensor<?xf32>
  %r = fuser.unary relu %b : !fuser.tensor<?xf32> -> !fuser.tensor<?xf32>
  func.return %r : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @round_trip
// CHECK-NEXT:    %r = fuser.unary relu %x
// CHECK-NEXT:    func.return %r

// -----

// bf16 → f32 → bf16 ⇒ the input; i32 → i64 → i32 ⇒ the input.
func.func @round_trip_bf16_i32(%x: !fuser.tensor<?xbf16>, %i: !fuser.tensor<?xi32>) -> (!fuser.tensor<?xbf16>, !fuser.tensor<?xi32>) {
  %a = fuser.cast %x : !fuser.tensor<?xbf16> -> !fuser.tensor<?xf32>
  %b = fuser.cast %a : !fuser.tensor<?xf32> -> !fuser.tensor<?xbf16>
  %n = fuser.unary neg %b : !fuser.tensor<?xbf16> -> !fuser.tensor<?xbf16>
  %c = fuser.cast %i : !fuser.tensor<?xi32> -> !fuser.tensor<?xi64>
  %d = fuser.cast %c : !fuser.tensor<?xi64> -> !fuser.tensor<?xi32>
  %m = fuser.unary abs %d : !fuser.tensor<?xi32> -> !fuser.tensor<?xi32>
  func.return %n, %m : !fuser.tensor<?xbf16>, !fuser.tensor<?xi32>
}
// CHECK-LABEL: func.func @round_trip_bf16_i32
// CHECK-NEXT:    %n = fuser.unary neg %x
// CHECK-NEXT:    %m = fuser.unary abs %i
// CHECK-NEXT:    func.return %n, %m

// -----

// Widening steps drop: bf16 → f32 → f64 ⇒ bf16 → f64.
func.func @widen(%x: !fuser.tensor<?xbf16>) -> !fuser.tensor<?xf64> {
  %a = fuser.cast %x : !fuser.tensor<?xbf16> -> !fuser.tensor<?xf32>
  %b = fuser.cast %a : !fuser.tensor<?xf32> -> !fuser.tensor<?xf64>
  func.return %b : !fuser.tensor<?xf64>
}
// CHECK-LABEL: func.func @widen
// CHECK-NEXT:    %b = fuser.cast %x : !fuser.tensor<?xbf16> -> !fuser.tensor<?xf64>
// CHECK-NEXT:    func.return %b

// -----

// A cast to its own dtype is its input.
func.func @noop_cast(%x: !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32> {
  %a = fuser.cast %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xf32>
  %r = fuser.unary exp %a : !fuser.tensor<?xf32> -> !fuser.tensor<?xf32>
  func.return %r : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @noop_cast
// CHECK-NEXT:    %r = fuser.unary exp %x
// CHECK-NEXT:    func.return %r

// =======================================================================================
// Incompatible pairs start a new section.

// -----

// bf16 → f32 → f16: bf16 and f16 are incompatible; nothing folds.
func.func @bf16_f16(%x: !fuser.tensor<?xbf16>) -> !fuser.tensor<?xf16> {
  %a = fuser.cast %x : !fuser.tensor<?xbf16> -> !fuser.tensor<?xf32>
  %b = fuser.cast %a : !fuser.tensor<?xf32> -> !fuser.tensor<?xf16>
  func.return %b : !fuser.tensor<?xf16>
}
// CHECK-LABEL: func.func @bf16_f16
// CHECK-NEXT:    %a = fuser.cast %x : !fuser.tensor<?xbf16> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    %b = fuser.cast %a : !fuser.tensor<?xf32> -> !fuser.tensor<?xf16>
// CHECK-NEXT:    func.return %b

// -----

// f32 → i32 → f32 truncates: float and integer are incompatible.
func.func @f32_i32(%x: !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32> {
  %a = fuser.cast %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xi32>
  %b = fuser.cast %a : !fuser.tensor<?xi32> -> !fuser.tensor<?xf32>
  func.return %b : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @f32_i32
// CHECK-NEXT:    %a = fuser.cast %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xi32>
// CHECK-NEXT:    %b = fuser.cast %a : !fuser.tensor<?xi32> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    func.return %b

// -----

// f64 → f32 → f16 → bf16 → f32: the f16/bf16 step ends the first section; each section
// folds on its own: f64 → f16 | f16 → bf16 | bf16 → f32.
func.func @sections(%x: !fuser.tensor<?xf64>) -> !fuser.tensor<?xf32> {
  %a = fuser.cast %x : !fuser.tensor<?xf64> -> !fuser.tensor<?xf32>
  %b = fuser.cast %a : !fuser.tensor<?xf32> -> !fuser.tensor<?xf16>
  %c = fuser.cast %b : !fuser.tensor<?xf16> -> !fuser.tensor<?xbf16>
  %d = fuser.cast %c : !fuser.tensor<?xbf16> -> !fuser.tensor<?xf32>
  func.return %d : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @sections
// CHECK-NEXT:    %[[H:[^ ]+]] = fuser.cast %x : !fuser.tensor<?xf64> -> !fuser.tensor<?xf16>
// CHECK-NEXT:    %[[B:[^ ]+]] = fuser.cast %[[H]] : !fuser.tensor<?xf16> -> !fuser.tensor<?xbf16>
// CHECK-NEXT:    %[[F:[^ ]+]] = fuser.cast %[[B]] : !fuser.tensor<?xbf16> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    func.return %[[F]]

// -----

// i64 → i32 → i64 wraps: the narrow anchor stays, nothing folds.
func.func @int_wrap(%x: !fuser.tensor<?xi64>) -> !fuser.tensor<?xi64> {
  %a = fuser.cast %x : !fuser.tensor<?xi64> -> !fuser.tensor<?xi32>
  %b = fuser.cast %a : !fuser.tensor<?xi32> -> !fuser.tensor<?xi64>
  func.return %b : !fuser.tensor<?xi64>
}
// CHECK-LABEL: func.func @int_wrap
// CHECK-NEXT:    %a = fuser.cast %x : !fuser.tensor<?xi64> -> !fuser.tensor<?xi32>
// CHECK-NEXT:    %b = fuser.cast %a : !fuser.tensor<?xi32> -> !fuser.tensor<?xi64>

// -----

// A cast to bool is a test, not a precision change: f32 → i1 → f32 stays.
func.func @to_bool(%x: !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32> {
  %a = fuser.cast %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xi1>
  %b = fuser.cast %a : !fuser.tensor<?xi1> -> !fuser.tensor<?xf32>
  func.return %b : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @to_bool
// CHECK-NEXT:    %a = fuser.cast %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xi1>
// CHECK-NEXT:    %b = fuser.cast %a : !fuser.tensor<?xi1> -> !fuser.tensor<?xf32>

// =======================================================================================
// Intermediates with other uses or that are outputs end a chain.

// -----

func.func @intermediate_multi_use(%x: !fuser.tensor<?xf64>) -> (!fuser.tensor<?xf64>, !fuser.tensor<?xf32>) {
  %a = fuser.cast %x : !fuser.tensor<?xf64> -> !fuser.tensor<?xf32>
  %e = fuser.unary exp %a : !fuser.tensor<?xf32> -> !fuser.tensor<?xf32>
  %b = fuser.cast %a : !fuser.tensor<?xf32> -> !fuser.tensor<?xf16>
  %c = fuser.cast %b : !fuser.tensor<?xf16> -> !fuser.tensor<?xf64>
  func.return %c, %e : !fuser.tensor<?xf64>, !fuser.tensor<?xf32>
}
// The chain starts at %a: %a → f16 → f64 cannot shrink, and %x → %a stays for %e.
// CHECK-LABEL: func.func @intermediate_multi_use
// CHECK-NEXT:    %a = fuser.cast %x : !fuser.tensor<?xf64> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    %e = fuser.unary exp %a
// CHECK-NEXT:    %b = fuser.cast %a : !fuser.tensor<?xf32> -> !fuser.tensor<?xf16>
// CHECK-NEXT:    %c = fuser.cast %b : !fuser.tensor<?xf16> -> !fuser.tensor<?xf64>
// CHECK-NEXT:    func.return %c, %e

// -----

func.func @intermediate_output(%x: !fuser.tensor<?xf32>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?xf64>) {
  %a = fuser.cast %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xf64>
  %b = fuser.cast %a : !fuser.tensor<?xf64> -> !fuser.tensor<?xf32>
  %r = fuser.unary relu %b : !fuser.tensor<?xf32> -> !fuser.tensor<?xf32>
  func.return %r, %a : !fuser.tensor<?xf32>, !fuser.tensor<?xf64>
}
// CHECK-LABEL: func.func @intermediate_output
// CHECK-NEXT:    %a = fuser.cast %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xf64>
// CHECK-NEXT:    %b = fuser.cast %a : !fuser.tensor<?xf64> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    %r = fuser.unary relu %b
// CHECK-NEXT:    func.return %r, %a

// -----

// The chain's end is an output: it must not become the input (an alias). A 2-cast
// round trip stays; a longer one shrinks to 2 casts.
func.func @output_not_input(%x: !fuser.tensor<?xf32>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>) {
  %a = fuser.cast %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xf64>
  %b = fuser.cast %a : !fuser.tensor<?xf64> -> !fuser.tensor<?xf32>
  %c = fuser.cast %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xf64>
  %d = fuser.cast %c : !fuser.tensor<?xf64> -> !fuser.tensor<?xf32>
  %e = fuser.cast %d : !fuser.tensor<?xf32> -> !fuser.tensor<?xf64>
  %f = fuser.cast %e : !fuser.tensor<?xf64> -> !fuser.tensor<?xf32>
  func.return %b, %f : !fuser.tensor<?xf32>, !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @output_not_input
// CHECK-NEXT:    %a = fuser.cast %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xf64>
// CHECK-NEXT:    %b = fuser.cast %a : !fuser.tensor<?xf64> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    %[[C:[^ ]+]] = fuser.cast %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xf64>
// CHECK-NEXT:    %[[F:[^ ]+]] = fuser.cast %[[C]] : !fuser.tensor<?xf64> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    func.return %b, %[[F]]

// -----

// The folded end keeps the output's required layout.
func.func @output_keeps_order(%x: !fuser.tensor<?x?xf64>) -> (!fuser.tensor<?x?xf16> {fuser.stride_order = array<i64: 0, 1>}) {
  %a = fuser.cast %x : !fuser.tensor<?x?xf64> -> !fuser.tensor<?x?xf32>
  %b = fuser.cast %a : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf16>
  func.return %b : !fuser.tensor<?x?xf16>
}
// CHECK-LABEL: func.func @output_keeps_order
// CHECK-SAME:    -> (!fuser.tensor<?x?xf16> {fuser.stride_order = array<i64: 0, 1>})
// CHECK-NEXT:    %b = fuser.cast %x : !fuser.tensor<?x?xf64> -> !fuser.tensor<?x?xf16>
// CHECK-NEXT:    func.return %b

// =======================================================================================
// Narrowing casts move above a single-use squeeze/reshape so that the chain folds.

// -----

// upcast → squeeze → downcast ⇒ squeeze.
func.func @move_above_squeeze(%x: !fuser.tensor<?xbxbf16>) -> !fuser.tensor<?xbf16> {
  %a = fuser.cast %x : !fuser.tensor<?xbxbf16> -> !fuser.tensor<?xbxf32>
  %s = fuser.squeeze %a dims [1] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xf32>
  %b = fuser.cast %s : !fuser.tensor<?xf32> -> !fuser.tensor<?xbf16>
  func.return %b : !fuser.tensor<?xbf16>
}
// CHECK-LABEL: func.func @move_above_squeeze
// CHECK-NEXT:    %b = fuser.squeeze %x dims [1] : !fuser.tensor<?xbxbf16> -> !fuser.tensor<?xbf16>
// CHECK-NEXT:    func.return %b

// -----

// upcast → reshape → squeeze → downcast ⇒ reshape → squeeze (the cast climbs both).
func.func @move_above_reshape(%x: !fuser.tensor<2x3xf16>) -> !fuser.tensor<6xf16> {
  %a = fuser.cast %x : !fuser.tensor<2x3xf16> -> !fuser.tensor<2x3xf64>
  %r = fuser.reshape %a : !fuser.tensor<2x3xf64> -> !fuser.tensor<bx6xf64>
  %s = fuser.squeeze %r dims [0] : !fuser.tensor<bx6xf64> -> !fuser.tensor<6xf64>
  %b = fuser.cast %s : !fuser.tensor<6xf64> -> !fuser.tensor<6xf16>
  func.return %b : !fuser.tensor<6xf16>
}
// CHECK-LABEL: func.func @move_above_reshape
// CHECK-NEXT:    %[[R:[^ ]+]] = fuser.reshape %x : !fuser.tensor<2x3xf16> -> !fuser.tensor<bx6xf16>
// CHECK-NEXT:    %[[S:[^ ]+]] = fuser.squeeze %[[R]] dims [0] : !fuser.tensor<bx6xf16> -> !fuser.tensor<6xf16>
// CHECK-NEXT:    func.return %[[S]]

// -----

// Not above a broadcast.
func.func @not_above_broadcast(%x: !fuser.tensor<?xbf16>) -> !fuser.tensor<?xbxbf16> {
  %a = fuser.cast %x : !fuser.tensor<?xbf16> -> !fuser.tensor<?xf32>
  %s = fuser.broadcast %a dims [1] : !fuser.tensor<?xf32> -> !fuser.tensor<?xbxf32>
  %b = fuser.cast %s : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xbxbf16>
  func.return %b : !fuser.tensor<?xbxbf16>
}
// CHECK-LABEL: func.func @not_above_broadcast
// CHECK-NEXT:    %a = fuser.cast %x
// CHECK-NEXT:    %s = fuser.broadcast %a dims [1]
// CHECK-NEXT:    %b = fuser.cast %s
// CHECK-NEXT:    func.return %b

// -----

// Not above a squeeze with another use, nor one that is an output.
func.func @not_above_shared_squeeze(%x: !fuser.tensor<?xbxbf16>) -> (!fuser.tensor<?xbf16>, !fuser.tensor<?xf32>) {
  %a = fuser.cast %x : !fuser.tensor<?xbxbf16> -> !fuser.tensor<?xbxf32>
  %s = fuser.squeeze %a dims [1] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xf32>
  %b = fuser.cast %s : !fuser.tensor<?xf32> -> !fuser.tensor<?xbf16>
  func.return %b, %s : !fuser.tensor<?xbf16>, !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @not_above_shared_squeeze
// CHECK-NEXT:    %a = fuser.cast %x
// CHECK-NEXT:    %s = fuser.squeeze %a dims [1]
// CHECK-NEXT:    %b = fuser.cast %s
// CHECK-NEXT:    func.return %b, %s

// -----

// A widening cast does not move, and a narrowing one only when a cast sits above.
func.func @no_move(%x: !fuser.tensor<?xbxbf16>, %y: !fuser.tensor<?xbxf32>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?xbf16>) {
  %s = fuser.squeeze %x dims [1] : !fuser.tensor<?xbxbf16> -> !fuser.tensor<?xbf16>
  %a = fuser.cast %s : !fuser.tensor<?xbf16> -> !fuser.tensor<?xf32>
  %t = fuser.squeeze %y dims [1] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xf32>
  %b = fuser.cast %t : !fuser.tensor<?xf32> -> !fuser.tensor<?xbf16>
  func.return %a, %b : !fuser.tensor<?xf32>, !fuser.tensor<?xbf16>
}
// CHECK-LABEL: func.func @no_move
// CHECK-NEXT:    %s = fuser.squeeze %x dims [1]
// CHECK-NEXT:    %a = fuser.cast %s
// CHECK-NEXT:    %t = fuser.squeeze %y dims [1]
// CHECK-NEXT:    %b = fuser.cast %t
// CHECK-NEXT:    func.return %a, %b
