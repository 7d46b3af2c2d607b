// fuser.segment_set ends a kernel: what reads its result runs in the next one, even where
// one pointwise kernel could run everything; ops unrelated to it stay in the first kernel.
// RUN: fuser-opt %s --split-input-file -p segment | filecheck %s
// RUN: fuser-opt %s --split-input-file -t cuda | filecheck %s --check-prefix=CUDA

func.func @split(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) {
  %a = fuser.unary exp %x : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %s = fuser.segment_set %a : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %r = fuser.unary neg %s : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %u = fuser.unary abs %y : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  func.return %r, %u : !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @split
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_pointwise", scheduler = "pointwise"},
// CHECK-SAME:    {name = "fuser_kernel_1_pointwise", scheduler = "pointwise", reason = "split after fuser.segment_set (a segmentation hint)"}]
// CHECK:         fuser.unary exp %x {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.segment_set %a {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.unary neg %s {fuser.kernel = 1 : i64}
// CHECK-NEXT:    fuser.unary abs %y {fuser.kernel = 0 : i64}
// CUDA:          // kernel 1 of @split: pointwise (split after fuser.segment_set (a segmentation hint))

// -----

// The same fusion with fuser.set: one kernel.
func.func @no_split(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %a = fuser.unary exp %x : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %s = fuser.set %a : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %r = fuser.unary neg %s : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  func.return %r : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @no_split
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_pointwise", scheduler = "pointwise"}]
// CHECK:         fuser.set %a {fuser.kernel = 0 : i64}
