// Host segments: fuser.matmul and fuser.linear each run as a library call of their own
// (scheduler "host"); the ops before them fuse into kernels that write their operands, the
// ops after them into kernels that read their results.
// RUN: fuser-opt %s --split-input-file -p segment | filecheck %s
// RUN: fuser-opt %s --split-input-file -t 'cuda{prelude=false}' | filecheck %s --check-prefix=CUDA

// A matmul of two fusion inputs, returned as is: no kernel at all.
func.func @matmul_alone(%a: !fuser.tensor<?x?xf32>, %b: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %r = fuser.matmul %a, %b : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  func.return %r : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @matmul_alone
// CHECK-SAME:    fuser.kernels = [{name = "fuser_host_0_matmul", scheduler = "host", reason = "fuser.matmul runs on the host (library call)"}]
// CHECK:         fuser.matmul %a, %b {fuser.kernel = 0 : i64}
// CUDA:          // host segment 0 of @matmul_alone: fuser.matmul (fuser.matmul runs on the host (library call))
// CUDA-NOT:      __global__

// -----

// The epilogue (bias, a gelu, a scale) is one kernel after the host segment; the bias
// broadcast moves after the matmul with its consumer instead of being a kernel before it.
func.func @epilogue(%x: !fuser.tensor<?x?xf32>, %w: !fuser.tensor<?x?xf32>, %b: !fuser.tensor<?xf32>) -> !fuser.tensor<?x?xf32> {
  %bb = fuser.broadcast %b dims [0] : !fuser.tensor<?xf32> -> !fuser.tensor<bx?xf32>
  %m = fuser.matmul %x, %w : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  %y = fuser.binary add %m, %bb : (!fuser.tensor<?x?xf32>, !fuser.tensor<bx?xf32>) -> !fuser.tensor<?x?xf32>
  %t = fuser.unary tanh %y : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %two = arith.constant 2.000000e+00 : f64
  %r = fuser.binary mul %t, %two : (!fuser.tensor<?x?xf32>, f64) -> !fuser.tensor<?x?xf32>
  func.return %r : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @epilogue
// CHECK-SAME:    fuser.kernels = [{name = "fuser_host_0_matmul", scheduler = "host", reason = "fuser.matmul runs on the host (library call)"},
// CHECK-SAME:    {name = "fuser_kernel_1_pointwise", scheduler = "pointwise", reason = "split after fuser.matmul: reads a host segment's result"}]
// CHECK:         fuser.broadcast %b dims [0] {fuser.kernel = 1 : i64}
// CHECK-NEXT:    fuser.matmul %x, %w {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.binary add {{.*}} {fuser.kernel = 1 : i64}
// CHECK-NEXT:    fuser.unary tanh {{.*}} {fuser.kernel = 1 : i64}
// CHECK:         fuser.binary mul {{.*}} {fuser.kernel = 1 : i64}
// CUDA:          // host segment 0 of @epilogue: fuser.matmul
// CUDA:          // kernel 1 of @epilogue: pointwise (split after fuser.matmul: reads a host segment's result)
// CUDA:          __global__

// -----

// Operand producers (a cast of x, a transpose of w) are one kernel before the host segment.
// %xf is read on both sides: kernel 0 writes it for the matmul, and kernel 2 recomputes the
// cheap cast from %x instead of reloading it (an op in two kernels is tagged with the last).
func.func @producers(%x: !fuser.tensor<?x?xbf16>, %w: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %xf = fuser.cast %x : !fuser.tensor<?x?xbf16> -> !fuser.tensor<?x?xf32>
  %wt = fuser.permute %w dims [1, 0] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %m = fuser.matmul %xf, %wt : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  %r = fuser.binary add %m, %xf : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  func.return %r : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @producers
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_pointwise", scheduler = "pointwise"},
// CHECK-SAME:    {name = "fuser_host_1_matmul", scheduler = "host", reason = "fuser.matmul runs on the host (library call)"},
// CHECK-SAME:    {name = "fuser_kernel_2_pointwise", scheduler = "pointwise", reason = "split after fuser.matmul: reads a host segment's result"}]
// CHECK:         fuser.cast %x {fuser.kernel = 2 : i64}
// CHECK-NEXT:    fuser.permute %w dims [1, 0] {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.matmul %xf, %wt {fuser.kernel = 1 : i64}
// CHECK-NEXT:    fuser.binary add %m, %xf {fuser.kernel = 2 : i64}

// -----

// Two linears with a pointwise op between them: host, kernel, host. The reduction after the
// second runs in a row kernel of its own stage.
func.func @mlp(%x: !fuser.tensor<?x?xf32>, %w1: !fuser.tensor<?x?xf32>, %b1: !fuser.tensor<?xf32>, %w2: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?xf32> {
  %h = fuser.linear %x, %w1, %b1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>, !fuser.tensor<?xf32>) -> !fuser.tensor<?x?xf32>
  %a = fuser.unary relu %h : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %o = fuser.linear %a, %w2 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  %s = fuser.reduction sum %o dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %s : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @mlp
// CHECK-SAME:    fuser.kernels = [{name = "fuser_host_0_linear", scheduler = "host", reason = "fuser.linear runs on the host (library call)"},
// CHECK-SAME:    {name = "fuser_kernel_1_pointwise", scheduler = "pointwise", reason = "split after fuser.linear: reads a host segment's result"},
// CHECK-SAME:    {name = "fuser_host_2_linear", scheduler = "host", reason = "fuser.linear runs on the host (library call)"},
// CHECK-SAME:    {name = "fuser_kernel_3_{{reduction|inner_persistent}}", scheduler = "{{reduction|inner_persistent}}", reason = "split after fuser.linear: reads a host segment's result"}]
// CHECK:         fuser.linear %x, %w1, %b1 {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.unary relu %h {fuser.kernel = 1 : i64}
// CHECK-NEXT:    fuser.linear %a, %w2 {fuser.kernel = 2 : i64}
// CHECK-NEXT:    fuser.reduction sum %o dims [1] {fuser.kernel = 3 : i64}

// -----

// Ops that do not depend on the matmul and feed only other outputs keep their own kernel
// before it; the matmul result, returned AND read by the epilogue, is written once.
func.func @independent(%x: !fuser.tensor<?x?xf32>, %w: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) {
  %e = fuser.unary exp %x : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %m = fuser.matmul %x, %w : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  %n = fuser.unary neg %m : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  func.return %e, %m, %n : !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @independent
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_pointwise", scheduler = "pointwise"},
// CHECK-SAME:    {name = "fuser_host_1_matmul", scheduler = "host", reason = "fuser.matmul runs on the host (library call)"},
// CHECK-SAME:    {name = "fuser_kernel_2_pointwise", scheduler = "pointwise", reason = "split after fuser.matmul: reads a host segment's result"}]
// CHECK:         fuser.unary exp %x {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.matmul %x, %w {fuser.kernel = 1 : i64}
// CHECK-NEXT:    fuser.unary neg %m {fuser.kernel = 2 : i64}
