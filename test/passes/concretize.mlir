// The `concretize` pass (its errors: concretize-errors.mlir). Its options give the input
// extents of one fusion, so each case is a separate input file under Inputs/ (lit does not
// run those) with its CHECK lines here.
//
// Pad-to-broadcast (nvFuser's example), both modes, the env switch, and idempotence.
// RUN: fuser-opt %S/Inputs/concretize-pad-to-broadcast.mlir -p 'concretize{extents="8x3x2x5x6;8x7x4x9x5"}' | filecheck %s --check-prefix=P2B
// RUN: fuser-opt %S/Inputs/concretize-pad-to-broadcast.mlir -p 'concretize{extents="8x3x2x5x6;8x7x4x9x5" resize-extents=true},concretize{extents="8x3x2x5x6;8x7x4x9x5"}' | filecheck %s --check-prefix=P2B
// RUN: fuser-opt %S/Inputs/concretize-pad-to-broadcast.mlir -p 'concretize{extents="8x3x2x5x6;8x7x4x9x5" resize-extents=false}' | filecheck %s --check-prefix=P2B-SYM
// RUN: env FUSER_DISABLE=concretize_resize_extents fuser-opt %S/Inputs/concretize-pad-to-broadcast.mlir -p 'concretize{extents="8x3x2x5x6;8x7x4x9x5"}' | filecheck %s --check-prefix=P2B-SYM
// A batch of 1 changes nothing but that extent: dim 0 is not resized, it stays `?`.
// RUN: fuser-opt %S/Inputs/concretize-pad-to-broadcast.mlir -p 'concretize{extents="1x3x2x5x6;1x7x4x9x5"}' | filecheck %s --check-prefix=P2B
//
// Pad widths computed from a scalar input and `fuser.dim` with arith.
// RUN: fuser-opt %S/Inputs/concretize-ssa-widths.mlir -p 'concretize{extents="4x10" scalars="2"}' | filecheck %s --check-prefix=WIDTHS
// RUN: fuser-opt %S/Inputs/concretize-ssa-widths.mlir -p 'concretize{extents="4x10" scalars="2" resize-extents=false}' | filecheck %s --check-prefix=WIDTHS-SYM
//
// RoPE-like: slices with bounds from `fuser.dim` + arith.floordivsi, neg, cat.
// RUN: fuser-opt %S/Inputs/concretize-rope.mlir -p 'concretize{extents="2x3x16x8;64x8"}' | filecheck %s --check-prefix=ROPE
// RUN: fuser-opt %S/Inputs/concretize-rope.mlir -p 'concretize{extents="2x3x16x8;64x8" resize-extents=false}' | filecheck %s --check-prefix=ROPE-SYM
//
// A slice of rows lo:hi from scalar inputs: one row broadcasts, three rows iterate.
// RUN: fuser-opt %S/Inputs/concretize-slice-to-broadcast.mlir -p 'concretize{extents="6x5;7x5" scalars="3,4"}' | filecheck %s --check-prefix=ROW
// RUN: fuser-opt %S/Inputs/concretize-slice-to-broadcast.mlir -p 'concretize{extents="6x5;7x5" scalars="-2;-1" resize-extents=false}' | filecheck %s --check-prefix=ROW-SYM
// RUN: fuser-opt %S/Inputs/concretize-slice-to-broadcast.mlir -p 'concretize{extents="6x5;3x5" scalars="1,4" resize-extents=false}' | filecheck %s --check-prefix=ROWS-SYM
//
// Static and symbolic extents unified (both modes): a static broadcast shape fixes the `?`
// dims tied to it; an extent-1 weight may still expand (its tie is not exact, it stays `?`)
// unless this run's weight has extent 1 and expands: then it (and what is tied to it) is `b`.
// RUN: fuser-opt %S/Inputs/concretize-static-broadcast.mlir -p 'concretize{extents="4x8;8;3x5"}' | filecheck %s --check-prefix=STATIC
// RUN: fuser-opt %S/Inputs/concretize-static-broadcast.mlir -p 'concretize{extents="4x8;8;3x5" resize-extents=false}' | filecheck %s --check-prefix=STATIC
// RUN: fuser-opt %S/Inputs/concretize-static-broadcast.mlir -p 'concretize{extents="4x8;1;3x5" resize-extents=false}' | filecheck %s --check-prefix=STATIC-W1
// A static input extent fixes x's dim 1 only: the batch dim stays `?`.
// RUN: fuser-opt %S/Inputs/concretize-static-input.mlir -p 'concretize{extents="3x8;8"}' | filecheck %s --check-prefix=STATIC-IN
// RUN: fuser-opt %S/Inputs/concretize-static-input.mlir -p 'concretize{extents="1x8;8" resize-extents=false}' | filecheck %s --check-prefix=STATIC-IN
//
// Must not change: no resize op (in either mode, even with extent-1 inputs).
// RUN: fuser-opt %S/Inputs/concretize-no-resize.mlir -p 'concretize{extents="1x5;1x5"}' | filecheck %s --check-prefix=SAME
// RUN: fuser-opt %S/Inputs/concretize-no-resize.mlir -p 'concretize{extents="3x5;3x5" resize-extents=false}' | filecheck %s --check-prefix=SAME

// --- pad-to-broadcast ------------------------------------------------------------------------
// Static mode: the padded dims' input extents (3, 2, 5, 6) and widths are static, the pad
// output is [?, b, 4, b, 5]: dims 1 and 3 (extent 1) broadcast, so the mul takes y's extents
// there (7 and 9 stay `?`), while y's dims 2 and 4, tied to the resized dims 4 and 5, become
// static. The batch dim stays `?` everywhere.
// P2B-LABEL: func.func @pad_to_broadcast
// P2B-SAME:    (%x: !fuser.tensor<?x3x2x5x6xf32>, %y: !fuser.tensor<?x?x4x?x5xf32>) -> !fuser.tensor<?x?x4x?x5xf32>
// P2B:         %p = fuser.pad %x [0:0, -1:-1, 1:1, -4:0, 0:-1] value %zero : (!fuser.tensor<?x3x2x5x6xf32>, f64) -> !fuser.tensor<?xbx4xbx5xf32>
// P2B-NEXT:    %m = fuser.binary mul %p, %y : (!fuser.tensor<?xbx4xbx5xf32>, !fuser.tensor<?x?x4x?x5xf32>) -> !fuser.tensor<?x?x4x?x5xf32>
// P2B-NEXT:    func.return %m : !fuser.tensor<?x?x4x?x5xf32>

// Symbolic mode: only the broadcast/iteration decision; every extent stays `?`.
// P2B-SYM-LABEL: func.func @pad_to_broadcast
// P2B-SYM-SAME:    (%x: !fuser.tensor<?x?x?x?x?xf32>, %y: !fuser.tensor<?x?x?x?x?xf32>) -> !fuser.tensor<?x?x?x?x?xf32>
// P2B-SYM:         %p = fuser.pad %x [0:0, -1:-1, 1:1, -4:0, 0:-1] value %zero : (!fuser.tensor<?x?x?x?x?xf32>, f64) -> !fuser.tensor<?xbx?xbx?xf32>
// P2B-SYM-NEXT:    %m = fuser.binary mul %p, %y : (!fuser.tensor<?xbx?xbx?xf32>, !fuser.tensor<?x?x?x?x?xf32>) -> !fuser.tensor<?x?x?x?x?xf32>

// --- SSA widths ----------------------------------------------------------------------------------
// Static mode: widths (2, 2*2-10 = -6) become constants; the scalar computation that only fed
// them is erased.
// WIDTHS-LABEL: func.func @ssa_widths
// WIDTHS-SAME:    (%x: !fuser.tensor<?x10xf32>, %w: i64) -> !fuser.tensor<?x6xf32>
// WIDTHS-NEXT:    %zero = arith.constant
// WIDTHS-NEXT:    %p = fuser.pad %x [0:0, 2:-6] value %zero : (!fuser.tensor<?x10xf32>, f64) -> !fuser.tensor<?x6xf32>
// WIDTHS-NEXT:    %e = fuser.unary exp %p : !fuser.tensor<?x6xf32> -> !fuser.tensor<?x6xf32>
// WIDTHS-NOT:     arith.muli

// Symbolic mode: extent 6 is not 1, so nothing changes.
// WIDTHS-SYM-LABEL: func.func @ssa_widths
// WIDTHS-SYM-SAME:    (%x: !fuser.tensor<?x?xf32>, %w: i64) -> !fuser.tensor<?x?xf32>
// WIDTHS-SYM:         %ww = arith.muli %w, %two : i64
// WIDTHS-SYM:         %p = fuser.pad %x [0:0, %w:%r] value %zero : (!fuser.tensor<?x?xf32>, f64) -> !fuser.tensor<?x?xf32>

// --- RoPE-like -------------------------------------------------------------------------------------
// Static mode: the sequence length (16, a slice bound of the cos cache), the head dim (8) and
// its halves (4) are static; batch and heads stay `?`; `fuser.dim` of a now-static dim is a
// constant and the half-dim arithmetic is gone.
// ROPE-LABEL: func.func @rope
// ROPE-SAME:    (%x: !fuser.tensor<?x?x16x8xf32>, %cos: !fuser.tensor<64x8xf32>) -> !fuser.tensor<?x?x16x8xf32>
// ROPE-NOT:     arith.floordivsi
// ROPE:         %c = fuser.slice %cos [0:16:1, 0:%{{.*}}:1] : !fuser.tensor<64x8xf32> -> !fuser.tensor<16x8xf32>
// ROPE-NEXT:    %x1 = fuser.slice %x [0:%b:1, 0:%h:1, 0:%{{.*}}:1, 0:4:1] : !fuser.tensor<?x?x16x8xf32> -> !fuser.tensor<?x?x16x4xf32>
// ROPE-NEXT:    %x2 = fuser.slice %x [0:%b:1, 0:%h:1, 0:%{{.*}}:1, 4:8:1] : !fuser.tensor<?x?x16x8xf32> -> !fuser.tensor<?x?x16x4xf32>
// ROPE-NEXT:    %n = fuser.unary neg %x2 : !fuser.tensor<?x?x16x4xf32> -> !fuser.tensor<?x?x16x4xf32>
// ROPE-NEXT:    %rot = fuser.cat %n, %x1 dim 3 : (!fuser.tensor<?x?x16x4xf32>, !fuser.tensor<?x?x16x4xf32>) -> !fuser.tensor<?x?x16x8xf32>
// ROPE-NEXT:    %cb = fuser.broadcast_in_dim %c dims [2, 3] : !fuser.tensor<16x8xf32> -> !fuser.tensor<bxbx16x8xf32>
// ROPE-NEXT:    %xc = fuser.binary mul %x, %cb : (!fuser.tensor<?x?x16x8xf32>, !fuser.tensor<bxbx16x8xf32>) -> !fuser.tensor<?x?x16x8xf32>

// Symbolic mode: no extent 1 anywhere, so the fusion is unchanged.
// ROPE-SYM-LABEL: func.func @rope
// ROPE-SYM-SAME:    (%x: !fuser.tensor<?x?x?x?xf32>, %cos: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?x?x?xf32>
// ROPE-SYM:         %half = arith.floordivsi %d, %two : i64
// ROPE-SYM:         %c = fuser.slice %cos [0:%s:1, 0:%dc:1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
// ROPE-SYM:         %rot = fuser.cat %n, %x1 dim 3 : (!fuser.tensor<?x?x?x?xf32>, !fuser.tensor<?x?x?x?xf32>) -> !fuser.tensor<?x?x?x?xf32>

// --- rows lo:hi ---------------------------------------------------------------------------------------
// One row (3:4): broadcast; the add takes y's 7 rows, which stay `?`.
// ROW-LABEL: func.func @slice_rows
// ROW-SAME:    (%x: !fuser.tensor<6x?xf32>, %y: !fuser.tensor<?x?xf32>, %lo: i64, %hi: i64) -> !fuser.tensor<?x?xf32>
// ROW:         %rows = fuser.slice %x [3:4:1, 0:%n:1] : !fuser.tensor<6x?xf32> -> !fuser.tensor<bx?xf32>
// ROW-NEXT:    %r = fuser.binary add %rows, %y : (!fuser.tensor<bx?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>

// One row with negative bounds (-2:-1), symbolic mode: still broadcast, bounds stay SSA.
// ROW-SYM-LABEL: func.func @slice_rows
// ROW-SYM:         %rows = fuser.slice %x [%lo:%hi:1, 0:%n:1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<bx?xf32>
// ROW-SYM-NEXT:    %r = fuser.binary add %rows, %y : (!fuser.tensor<bx?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>

// Three rows (1:4), symbolic mode: iteration, nothing changes.
// ROWS-SYM-LABEL: func.func @slice_rows
// ROWS-SYM:         %rows = fuser.slice %x [%lo:%hi:1, 0:%n:1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
// ROWS-SYM-NEXT:    %r = fuser.binary add %rows, %y : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>

// --- must not change ------------------------------------------------------------------------------------
// SAME-LABEL: func.func @no_resize(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?xf32> {
// SAME-NEXT:    %a = fuser.binary add %x, %y : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
// SAME-NEXT:    %n = fuser.dim %a, 1 : !fuser.tensor<?x?xf32>
// SAME-NEXT:    %s = fuser.reduction sum %a dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
// SAME-NEXT:    func.return %s : !fuser.tensor<?xf32>
// SAME-NEXT:  }

// --- static and symbolic extents unified ----------------------------------------------------------------
// x is tied to the static 4x8 by the mul, w to 8 by the expand that this run decides does not
// expand; the reduction keeps 4 rows; `fuser.dim` of the now
// static dim 1 is gone and the full it sized is static.
// STATIC-LABEL: func.func @static_broadcast
// STATIC-SAME:    (%x: !fuser.tensor<4x8xf32>, %w: !fuser.tensor<8xf32>, %y: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<4x8xf32>, !fuser.tensor<?x?xf32>, !fuser.tensor<8xf32>)
// STATIC-NEXT:    %s = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<4x8xf32> -> !fuser.tensor<4xbxf32>
// STATIC-NEXT:    %c = fuser.binary sub %x, %s : (!fuser.tensor<4x8xf32>, !fuser.tensor<4xbxf32>) -> !fuser.tensor<4x8xf32>
// STATIC-NEXT:    %wb = fuser.broadcast_in_dim %w dims [1] : !fuser.tensor<8xf32> -> !fuser.tensor<bx8xf32>
// STATIC-NEXT:    %we = fuser.expand %wb : !fuser.tensor<bx8xf32> -> !fuser.tensor<4x8xf32>
// STATIC-NEXT:    %o = fuser.binary mul %c, %we : (!fuser.tensor<4x8xf32>, !fuser.tensor<4x8xf32>) -> !fuser.tensor<4x8xf32>
// STATIC-NEXT:    %e = fuser.unary exp %y : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
// STATIC-NOT:     fuser.dim
// STATIC:         %z = fuser.full value %zero : (f64) -> !fuser.tensor<8xf32>

// STATIC-W1-LABEL: func.func @static_broadcast
// STATIC-W1-SAME:    (%x: !fuser.tensor<4x8xf32>, %w: !fuser.tensor<bxf32>, %y: !fuser.tensor<?x?xf32>)
// STATIC-W1:         %wb = fuser.broadcast_in_dim %w dims [1] : !fuser.tensor<bxf32> -> !fuser.tensor<bxbxf32>
// STATIC-W1-NEXT:    %we = fuser.expand %wb : !fuser.tensor<bxbxf32> -> !fuser.tensor<4x8xf32>
// STATIC-W1-NEXT:    %o = fuser.binary mul %c, %we : (!fuser.tensor<4x8xf32>, !fuser.tensor<4x8xf32>) -> !fuser.tensor<4x8xf32>

// STATIC-IN-LABEL: func.func @static_input
// STATIC-IN-SAME:    (%x: !fuser.tensor<?x8xf32>, %w: !fuser.tensor<8xf32>) -> !fuser.tensor<?x8xf32>
// STATIC-IN:         %b = fuser.binary mul %x, %x : (!fuser.tensor<?x8xf32>, !fuser.tensor<?x8xf32>) -> !fuser.tensor<?x8xf32>
