// RUN: fuser-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier messages of fuser.set and fuser.segment_set: the copy has its input's dtype and dims.

func.func @set_dtype(%x: !fuser.tensor<?xf32>) {
  %r = fuser.set %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xf16>
  func.return
}
// CHECK: fuser.set: result dtype is f16, expected f32

// -----

func.func @set_rank(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.set %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?xf32>
  func.return
}
// CHECK: fuser.set: result has rank 1 ([?]), expected rank 2 ([?, 4])

// -----

func.func @segment_set_extent(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.segment_set %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x8xf32>
  func.return
}
// CHECK: fuser.segment_set: result dim 1 is 8, expected 4 (result [?, 8], inferred [?, 4])

// -----

func.func @segment_set_layout(%x: !fuser.tensor<?x4xf32>) {
  %r = fuser.segment_set %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32, order [0, 1]>
  func.return
}
// CHECK: fuser.segment_set: only fusion inputs carry a layout; the result has order [0, 1]
