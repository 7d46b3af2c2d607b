// RUN: fuser-opt %s --split-input-file -p fuser-preseg | filecheck %s --check-prefixes=CHECK,SWAP
// RUN: fuser-opt %s --split-input-file -p 'fuser-preseg{swap-unary=false}' | filecheck %s --check-prefixes=CHECK,NOSWAP
// The stages one by one (remove-bcast-squeeze alone leaves the casts to consecutive-cast):
// RUN: fuser-opt %s --split-input-file -p remove-bcast-squeeze | filecheck %s --check-prefix=RBS
// RUN: fuser-opt %s --split-input-file -p remove-bcast-squeeze,consecutive-cast,remove-bcast-squeeze,gather-to-take-along-axis,move-gather,allocation-order-inference,dce | filecheck %s --check-prefixes=CHECK,SWAP

// A RoPE-backward-like fusion (the shape of Thunder's traces): cos and sin arrive as bf16
// [S, D], go through broadcast → bf16→f32 cast → squeeze → f32→bf16 cast → broadcast before
// they meet the gradient. The pipeline collapses each chain to one broadcast of the input.
// With swap-unary the squeeze climbs the f32 cast and cancels the first broadcast, then the
// casts fold; without it the narrowing cast climbs the squeeze, folds, and the
// broadcast/squeeze pair meets in the second remove-bcast-squeeze.
func.func @rope_bwd(%g: !fuser.tensor<?x?x?x?xbf16>, %cos: !fuser.tensor<?x?xbf16>, %sin: !fuser.tensor<?x?xbf16>) -> !fuser.tensor<?x?x?x?xbf16> {
  %c1 = fuser.broadcast_in_dim %cos dims [1, 2] : !fuser.tensor<?x?xbf16> -> !fuser.tensor<bx?x?xbf16>
  %c2 = fuser.cast %c1 : !fuser.tensor<bx?x?xbf16> -> !fuser.tensor<bx?x?xf32>
  %c3 = fuser.squeeze %c2 dims [0] : !fuser.tensor<bx?x?xf32> -> !fuser.tensor<?x?xf32>
  %c4 = fuser.cast %c3 : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xbf16>
  %c5 = fuser.broadcast %c4 dims [0, 1] : !fuser.tensor<?x?xbf16> -> !fuser.tensor<bxbx?x?xbf16>
  %s1 = fuser.broadcast %sin dims [0] : !fuser.tensor<?x?xbf16> -> !fuser.tensor<bx?x?xbf16>
  %s2 = fuser.cast %s1 : !fuser.tensor<bx?x?xbf16> -> !fuser.tensor<bx?x?xf32>
  %s3 = fuser.squeeze %s2 dims [0] : !fuser.tensor<bx?x?xf32> -> !fuser.tensor<?x?xf32>
  %s4 = fuser.cast %s3 : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xbf16>
  %s5 = fuser.broadcast %s4 dims [0, 1] : !fuser.tensor<?x?xbf16> -> !fuser.tensor<bxbx?x?xbf16>
  %g32 = fuser.cast %g : !fuser.tensor<?x?x?x?xbf16> -> !fuser.tensor<?x?x?x?xf32>
  %cos32 = fuser.cast %c5 : !fuser.tensor<bxbx?x?xbf16> -> !fuser.tensor<bxbx?x?xf32>
  %sin32 = fuser.cast %s5 : !fuser.tensor<bxbx?x?xbf16> -> !fuser.tensor<bxbx?x?xf32>
  %a = fuser.binary mul %g32, %cos32 : (!fuser.tensor<?x?x?x?xf32>, !fuser.tensor<bxbx?x?xf32>) -> !fuser.tensor<?x?x?x?xf32>
  %n = fuser.unary neg %g32 : !fuser.tensor<?x?x?x?xf32> -> !fuser.tensor<?x?x?x?xf32>
  %b = fuser.binary mul %n, %sin32 : (!fuser.tensor<?x?x?x?xf32>, !fuser.tensor<bxbx?x?xf32>) -> !fuser.tensor<?x?x?x?xf32>
  %sum = fuser.binary add %a, %b : (!fuser.tensor<?x?x?x?xf32>, !fuser.tensor<?x?x?x?xf32>) -> !fuser.tensor<?x?x?x?xf32>
  %out = fuser.cast %sum : !fuser.tensor<?x?x?x?xf32> -> !fuser.tensor<?x?x?x?xbf16>
  func.return %out : !fuser.tensor<?x?x?x?xbf16>
}
// CHECK-LABEL: func.func @rope_bwd
// CHECK-SAME:    -> (!fuser.tensor<?x?x?x?xbf16> {fuser.stride_order_hint = array<i64: 3, 2, 1, 0>})
// CHECK-NEXT:    %[[C:[^ ]+]] = fuser.broadcast %cos dims [0, 1] : !fuser.tensor<?x?xbf16> -> !fuser.tensor<bxbx?x?xbf16>
// CHECK-NEXT:    %[[S:[^ ]+]] = fuser.broadcast %sin dims [0, 1] : !fuser.tensor<?x?xbf16> -> !fuser.tensor<bxbx?x?xbf16>
// CHECK-NEXT:    %g32 = fuser.cast %g
// CHECK-NEXT:    %cos32 = fuser.cast %[[C]] : !fuser.tensor<bxbx?x?xbf16> -> !fuser.tensor<bxbx?x?xf32>
// CHECK-NEXT:    %sin32 = fuser.cast %[[S]] : !fuser.tensor<bxbx?x?xbf16> -> !fuser.tensor<bxbx?x?xf32>
// CHECK-NEXT:    %a = fuser.binary mul %g32, %cos32
// CHECK-NEXT:    %n = fuser.unary neg %g32
// CHECK-NEXT:    %b = fuser.binary mul %n, %sin32
// CHECK-NEXT:    %sum = fuser.binary add %a, %b
// CHECK-NEXT:    %out = fuser.cast %sum
// CHECK-NEXT:    func.return %out
// CHECK-NOT:     fuser.squeeze

// After remove-bcast-squeeze alone: the first broadcast and the squeeze are gone, the
// bf16 → f32 → bf16 casts remain.
// RBS-LABEL: func.func @rope_bwd
// RBS-NEXT:    %[[C2:[^ ]+]] = fuser.cast %cos : !fuser.tensor<?x?xbf16> -> !fuser.tensor<?x?xf32>
// RBS-NEXT:    %[[C4:[^ ]+]] = fuser.cast %[[C2]] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xbf16>
// RBS-NEXT:    %c5 = fuser.broadcast %[[C4]] dims [0, 1]
// RBS-NEXT:    %[[S2:[^ ]+]] = fuser.cast %sin : !fuser.tensor<?x?xbf16> -> !fuser.tensor<?x?xf32>
// RBS-NEXT:    %[[S4:[^ ]+]] = fuser.cast %[[S2]] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xbf16>
// RBS-NEXT:    %s5 = fuser.broadcast %[[S4]] dims [0, 1]

// -----

// broadcast → cast(f32) → squeeze → cast(bf16) straight from an input to an output: the
// output must not alias the input, so what consecutive-cast leaves is the 2-cast copy.
func.func @chain_to_output(%x: !fuser.tensor<?x?xbf16>) -> !fuser.tensor<?x?xbf16> {
  %b = fuser.broadcast %x dims [0] : !fuser.tensor<?x?xbf16> -> !fuser.tensor<bx?x?xbf16>
  %c = fuser.cast %b : !fuser.tensor<bx?x?xbf16> -> !fuser.tensor<bx?x?xf32>
  %s = fuser.squeeze %c dims [0] : !fuser.tensor<bx?x?xf32> -> !fuser.tensor<?x?xf32>
  %d = fuser.cast %s : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xbf16>
  func.return %d : !fuser.tensor<?x?xbf16>
}
// CHECK-LABEL: func.func @chain_to_output
// SWAP-NEXT:     %[[F:[^ ]+]] = fuser.cast %x : !fuser.tensor<?x?xbf16> -> !fuser.tensor<?x?xf32>
// SWAP-NEXT:     %[[B:[^ ]+]] = fuser.cast %[[F]] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xbf16>
// SWAP-NEXT:     func.return %[[B]]
// Without the swap, the cast climbs the squeeze and folds; the broadcast/squeeze pair
// then stays as the copy.
// NOSWAP-NEXT:   %[[B:[^ ]+]] = fuser.broadcast %x dims [0]
// NOSWAP-NEXT:   %[[S:[^ ]+]] = fuser.squeeze %[[B]] dims [0] : !fuser.tensor<bx?x?xbf16> -> !fuser.tensor<?x?xbf16>
// NOSWAP-NEXT:   func.return %[[S]]

// -----

// ... and nothing at all when the chain feeds another op.
func.func @chain_to_op(%x: !fuser.tensor<?x?xbf16>) -> !fuser.tensor<?x?xbf16> {
  %b = fuser.broadcast %x dims [0] : !fuser.tensor<?x?xbf16> -> !fuser.tensor<bx?x?xbf16>
  %c = fuser.cast %b : !fuser.tensor<bx?x?xbf16> -> !fuser.tensor<bx?x?xf32>
  %s = fuser.squeeze %c dims [0] : !fuser.tensor<bx?x?xf32> -> !fuser.tensor<?x?xf32>
  %d = fuser.cast %s : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xbf16>
  %r = fuser.unary relu %d : !fuser.tensor<?x?xbf16> -> !fuser.tensor<?x?xbf16>
  func.return %r : !fuser.tensor<?x?xbf16>
}
// CHECK-LABEL: func.func @chain_to_op
// CHECK-NEXT:    %r = fuser.unary relu %x : !fuser.tensor<?x?xbf16> -> !fuser.tensor<?x?xbf16>
// CHECK-NEXT:    func.return %r

// -----

// Through the whole pipeline a channels-last requirement stays a requirement (no hint is
// added), while the other output, fed by a channels-last input, gets a channels-last hint.
func.func @layouts(%x: !fuser.tensor<?x?x?x?xf32, order [3, 0, 2, 1]>, %y: !fuser.tensor<?x?x?x?xf32>) -> (!fuser.tensor<?x?x?x?xf32> {fuser.stride_order = array<i64: 3, 0, 2, 1>}, !fuser.tensor<?x?x?x?xf32>) {
  %b = fuser.broadcast %y dims [4] : !fuser.tensor<?x?x?x?xf32> -> !fuser.tensor<?x?x?x?xbxf32>
  %e = fuser.unary exp %b : !fuser.tensor<?x?x?x?xbxf32> -> !fuser.tensor<?x?x?x?xbxf32>
  %s = fuser.squeeze %e dims [4] : !fuser.tensor<?x?x?x?xbxf32> -> !fuser.tensor<?x?x?x?xf32>
  %n = fuser.unary neg %x : !fuser.tensor<?x?x?x?xf32, order [3, 0, 2, 1]> -> !fuser.tensor<?x?x?x?xf32>
  func.return %s, %n : !fuser.tensor<?x?x?x?xf32>, !fuser.tensor<?x?x?x?xf32>
}
// CHECK-LABEL: func.func @layouts
// CHECK-SAME:    -> (!fuser.tensor<?x?x?x?xf32> {fuser.stride_order = array<i64: 3, 0, 2, 1>}, !fuser.tensor<?x?x?x?xf32> {fuser.stride_order_hint = array<i64: 3, 0, 2, 1>})
// SWAP-NEXT:     %[[E:[^ ]+]] = fuser.unary exp %y
// SWAP-NEXT:     %n = fuser.unary neg %x
// SWAP-NEXT:     func.return %[[E]], %n
// NOSWAP-NEXT:   %b = fuser.broadcast %y dims [4]
// NOSWAP-NEXT:   %e = fuser.unary exp %b
// NOSWAP-NEXT:   %s = fuser.squeeze %e dims [4]

// -----

// Cross-entropy's target logit: the cast of the bf16 logits is not materialised for the
// gather; the gather is exact (static extents) and reads the bf16 input directly.
// CHECK-LABEL: func.func @ce_target
// CHECK-NEXT:    %[[G:[0-9]+]] = fuser.take_along_axis %x[%i] dim 1 : (!fuser.tensor<8x32xbf16>, !fuser.tensor<8xbxi64>) -> !fuser.tensor<8xbxbf16>
// CHECK-NEXT:    fuser.cast %[[G]] : !fuser.tensor<8xbxbf16> -> !fuser.tensor<8xbxf32>
// CHECK-NOT:     fuser.gather
func.func @ce_target(%x: !fuser.tensor<8x32xbf16>, %i: !fuser.tensor<8xbxi64>) -> !fuser.tensor<8xbxf32> {
  %c = fuser.cast %x : !fuser.tensor<8x32xbf16> -> !fuser.tensor<8x32xf32>
  %0 = fuser.gather %c[%i] dim 1 : (!fuser.tensor<8x32xf32>, !fuser.tensor<8xbxi64>) -> !fuser.tensor<8xbxf32>
  func.return %0 : !fuser.tensor<8xbxf32>
}
