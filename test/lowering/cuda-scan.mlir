// Scans: segmentation (`-p segment`) and the CUDA of the scan unit (`-t cuda`; the nominal extent
// of `?` dims is 1024 unless `extent` says). A line (every index but the scan dim) is owned by a
// block when the scan dim is innermost: chunks of blockDim elements, a warp scan with
// __shfl_up_sync, the warps' totals through shared memory, a carry between chunks. Otherwise a
// thread owns a line and walks it serially. The scan input's producers are computed in the kernel.
// RUN: fuser-opt %s --split-input-file -p segment | filecheck %s --check-prefix=SEG
// RUN: fuser-opt %s --split-input-file -t 'cuda{aligned=false}' | filecheck %s
// RUN: fuser-opt %s --split-input-file -t 'cuda{extent=8192 aligned=false}' | filecheck %s --check-prefix=LONG

// cumsum(exp(x) * 2) along the innermost dim: one kernel reading x once.
func.func @fused_producer(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %e = fuser.unary exp %x : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %two = arith.constant 2.000000e+00 : f64
  %m = fuser.binary mul %e, %two : (!fuser.tensor<?x?xf32>, f64) -> !fuser.tensor<?x?xf32>
  %s = fuser.scan sum %m dim 1 : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  func.return %s : !fuser.tensor<?x?xf32>
}
// SEG-LABEL: func.func @fused_producer
// SEG-SAME:    fuser.kernels = [{name = "fuser_kernel_0_scan", scheduler = "scan"}]
// SEG:         fuser.unary exp %x {fuser.kernel = 0 : i64}
// SEG:         fuser.binary mul %e, %two {fuser.kernel = 0 : i64}
// SEG-NEXT:    fuser.scan sum %m dim 1 {fuser.kernel = 0 : i64}

// CHECK-LABEL: // kernel 0 of @fused_producer: scan
// CHECK-NEXT:  // scheduler: scan, block per line, block: 128
// CHECK-NEXT:  extern "C" __global__ void __launch_bounds__(128) fuser_kernel_0_scan(
// CHECK:         __shared__ float carry0_warps[4];
// CHECK-NEXT:    const long long lines = ext{{[0-9]+}};
// CHECK-NEXT:    const long long len = ext{{[0-9]+}};
// CHECK:         for (long long line = blockIdx.x; line < lines; line += gridDim.x) {
// CHECK:           float carry0 = (float)0;
// CHECK-NEXT:      for (long long base = 0; base < len; base += blockDim.x) {
// CHECK-NEXT:        const long long si = base + threadIdx.x;
// CHECK-NEXT:        float x0 = (float)0;
// CHECK-NEXT:        if (si < len) {
// CHECK-NEXT:          const float [[V:v[0-9]+]] = fuser_ld(in{{[0-9]+}}, (o0) * st{{[0-9]+}} + (si) * st{{[0-9]+}});
// CHECK-NEXT:          const float [[E:t[0-9]+]] = expf([[V]]);
// CHECK-NEXT:          const float [[M:t[0-9]+]] = ([[E]] * ((float)2.0));
// CHECK-NEXT:          x0 = (float)[[M]];
// CHECK:             if (lane >= off) x0 = fuser_sum(up_x0, x0);
// CHECK:             carry0_warps[warp] = x0;
// CHECK:           __syncthreads();
// CHECK:             const float warp_x0 = carry0_warps[w];
// CHECK-NEXT:        if (w < warp) before_x0 = fuser_sum(before_x0, warp_x0);
// CHECK-NEXT:        total_x0 = fuser_sum(total_x0, warp_x0);
// CHECK:           __syncthreads();
// CHECK-NEXT:      x0 = fuser_sum(carry0, fuser_sum(before_x0, x0));
// CHECK-NEXT:      carry0 = fuser_sum(carry0, total_x0);
// CHECK-NEXT:      if (si < len) {
// CHECK-NEXT:        const float [[S:scan[0-9]+]] = (float)x0;
// CHECK-NEXT:        fuser_st(out{{[0-9]+}}, (o0) * st{{[0-9]+}} + (si) * st{{[0-9]+}}, [[S]]);
// CHECK-NOT:   fuser_ld
// CHECK:       FUSER_HOST_LAUNCHER(fuser_kernel_0_scan)

// Lines longer than 4096 elements: 512 threads a block (fewer chunks).
// LONG-LABEL: // kernel 0 of @fused_producer: scan
// LONG-NEXT:  // scheduler: scan, block per line, block: 512

// -----

// cummax and cummin along the outer dim share one kernel (a thread per line: neighbouring
// threads read neighbouring elements); f16 carries f32. Their difference reads both scan
// results, so it runs in a following pointwise kernel.
func.func @outer_dim(%x: !fuser.tensor<?x?xf16>) -> (!fuser.tensor<?x?xf16>, !fuser.tensor<?x?xf16>) {
  %s = fuser.scan max %x dim 0 : !fuser.tensor<?x?xf16> -> !fuser.tensor<?x?xf16>
  %n = fuser.scan min %x dim 0 : !fuser.tensor<?x?xf16> -> !fuser.tensor<?x?xf16>
  %d = fuser.binary sub %s, %n : (!fuser.tensor<?x?xf16>, !fuser.tensor<?x?xf16>) -> !fuser.tensor<?x?xf16>
  func.return %s, %d : !fuser.tensor<?x?xf16>, !fuser.tensor<?x?xf16>
}
// SEG-LABEL: func.func @outer_dim
// SEG-SAME:    {name = "fuser_kernel_0_scan", scheduler = "scan"}
// SEG-SAME:    {name = "fuser_kernel_1_pointwise", scheduler = "pointwise", reason = "split before fuser.binary: fuser.binary reads a scan result (it needs the whole prefix: a following kernel)"}
// SEG:         fuser.scan max %x dim 0 {fuser.kernel = 0 : i64}
// SEG-NEXT:    fuser.scan min %x dim 0 {fuser.kernel = 0 : i64}
// SEG-NEXT:    fuser.binary sub %s, %n {fuser.kernel = 1 : i64}

// CHECK-LABEL: // kernel 0 of @outer_dim: scan
// CHECK-NEXT:  // scheduler: scan, thread per line, block: 128
// CHECK-NOT:     __shared__
// CHECK:         for (long long line = (long long)blockIdx.x * blockDim.x + threadIdx.x; line < lines; line += (long long)gridDim.x * blockDim.x) {
// CHECK:           float carry0 = (float)-INFINITY;
// CHECK-NEXT:      float carry1 = (float)INFINITY;
// CHECK-NEXT:      for (long long si = 0; si < len; ++si) {
// CHECK-NEXT:        const float [[V:v[0-9]+]] = __half2float(fuser_ld(in{{[0-9]+}}, (si) * st{{[0-9]+}} + (o1) * st{{[0-9]+}}));
// CHECK-NEXT:        carry0 = fuser_max(carry0, (float)[[V]]);
// CHECK-NEXT:        carry1 = fuser_min(carry1, (float)[[V]]);
// CHECK:             fuser_st(out{{[0-9]+}}, (si) * st{{[0-9]+}} + (o1) * st{{[0-9]+}}, __float2half(scan{{[0-9]+}}));
// CHECK:             fuser_st(out{{[0-9]+}}, (si) * st{{[0-9]+}} + (o1) * st{{[0-9]+}}, __float2half(scan{{[0-9]+}}));
// CHECK-LABEL: // kernel 1 of @outer_dim: pointwise (split before fuser.binary: fuser.binary reads a scan result (it needs the whole prefix: a following kernel))

// -----

// Integer sums carry (and return) i64; max/min of bools carry int through the shuffles.
// Static extents are literals.
func.func @integers(%i: !fuser.tensor<8x100xi32>, %b: !fuser.tensor<8x100xi1>) -> (!fuser.tensor<8x100xi64>, !fuser.tensor<8x100xi1>) {
  %s = fuser.scan sum %i dim 1 : !fuser.tensor<8x100xi32> -> !fuser.tensor<8x100xi64>
  %m = fuser.scan max %b dim 1 : !fuser.tensor<8x100xi1> -> !fuser.tensor<8x100xi1>
  func.return %s, %m : !fuser.tensor<8x100xi64>, !fuser.tensor<8x100xi1>
}
// CHECK-LABEL: // kernel 0 of @integers: scan
// CHECK-NEXT:  // scheduler: scan, block per line, block: 128
// CHECK:         __shared__ long long carry0_warps[4];
// CHECK-NEXT:    __shared__ int carry1_warps[4];
// CHECK-NEXT:    const long long lines = 8LL;
// CHECK-NEXT:    const long long len = 100LL;
// CHECK:           long long carry0 = (long long)0;
// CHECK-NEXT:      int carry1 = 0;
// CHECK:               x0 = (long long){{v[0-9]+}};
// CHECK:               x1 = (int){{v[0-9]+}};
// CHECK:             if (lane >= off) x1 = fuser_max(up_x1, x1);
// CHECK:             const bool [[B:scan[0-9]+]] = (bool)x1;
// CHECK-NEXT:        fuser_st(out{{[0-9]+}}, (o0) * st{{[0-9]+}} + (si) * st{{[0-9]+}}, [[B]]);

// -----

// A reduction of a scan result runs in a row kernel after the scan.
func.func @reduction_of_scan(%x: !fuser.tensor<?x?xf64>) -> !fuser.tensor<?xf64> {
  %s = fuser.scan prod %x dim 1 : !fuser.tensor<?x?xf64> -> !fuser.tensor<?x?xf64>
  %r = fuser.reduction sum %s dims [1] : !fuser.tensor<?x?xf64> -> !fuser.tensor<?xf64>
  func.return %r : !fuser.tensor<?xf64>
}
// SEG-LABEL: func.func @reduction_of_scan
// SEG-SAME:    {name = "fuser_kernel_0_scan", scheduler = "scan"}
// SEG-SAME:    {name = "fuser_kernel_1_reduction", scheduler = "reduction", reason = "split before fuser.reduction: fuser.reduction reads a scan result (it needs the whole prefix: a following kernel)"}

// -----

// select fuses into a pointwise kernel: the position is the (wrapped) index, a kernel
// parameter; a constant index is a literal (-1 of a static extent of 4 is 3).
func.func @select(%x: !fuser.tensor<4x?xf32>, %k: i64) -> (!fuser.tensor<?xf32>, !fuser.tensor<4xf32>) {
  %last = arith.constant -1 : i64
  %a = fuser.select %x[%last] dim 0 : (!fuser.tensor<4x?xf32>, i64) -> !fuser.tensor<?xf32>
  %b = fuser.select %x[%k] dim 1 : (!fuser.tensor<4x?xf32>, i64) -> !fuser.tensor<4xf32>
  func.return %a, %b : !fuser.tensor<?xf32>, !fuser.tensor<4xf32>
}
// SEG-LABEL: func.func @select
// SEG-SAME:    fuser.kernels = [{name = "fuser_kernel_0_pointwise", scheduler = "pointwise"}]
// CHECK-LABEL: // kernel 0 of @select: pointwise
// CHECK:         fuser_ld(in{{[0-9]+}}, (3LL) * st{{[0-9]+}} + (i0) * st{{[0-9]+}})
// CHECK:         fuser_ld(in{{[0-9]+}}, (i0) * st{{[0-9]+}} + ((((long long)sc{{[0-9]+}}) < 0 ? ((long long)sc{{[0-9]+}}) + ext{{[0-9]+}} : ((long long)sc{{[0-9]+}}))) * st{{[0-9]+}})
