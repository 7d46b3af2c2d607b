// `-t cuda` on inner persistent kernels (normalizations). Blocks loop over rows; each thread
// keeps its `iters` elements of the row in a register array (`buf0[k]`, filled by the first
// phase, read by the later ones), so x is read once; a value computed in one phase that a later
// phase reads (exp(x - max) in softmax) is kept the same way instead of being recomputed; loads that do not depend on the row
// (weights, biases) are kept across rows (`inv0[k]`, filled on the block's first row only).
// The block size follows the nominal row length (option `extent`, default 1024): 1/8 of the
// row rounded up to a warp, at most 1024 threads; beyond 32 elements a thread, no registers.
// RUN: fuser-opt %s --split-input-file -t cuda | filecheck %s
// RUN: fuser-opt %s --split-input-file -t 'cuda{extent=4096}' | filecheck %s --check-prefix=C4K
// RUN: fuser-opt %s --split-input-file -t 'cuda{extent=32768}' | filecheck %s --check-prefix=C32K
// RUN: fuser-opt %s --split-input-file -t 'cuda{extent=65536}' | filecheck %s --check-prefix=ONLINE

func.func @softmax(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %m = fuser.reduction max %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %d = fuser.binary sub %x, %m : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %e = fuser.unary exp %d : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %s = fuser.reduction sum %e dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %y = fuser.binary div %e, %s : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  func.return %y : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: // kernel 0 of @softmax: inner_persistent
// CHECK-NEXT:  // scheduler: inner_persistent, block per row, block: 128, iters: 8
// CHECK-NEXT:  extern "C" __global__ void __launch_bounds__(128) fuser_kernel_0_inner_persistent(
// CHECK:         __shared__ float fuser_smem_f[{{[0-9]+}}];
// CHECK:         for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
// CHECK-NEXT:      const long long o0 = row;
// CHECK-NEXT:      float buf0[8];
// CHECK-NEXT:      float buf1[8];
// Phase 0 (max) loads x into the register buffer...
// CHECK-NEXT:      float acc0 = (float)-INFINITY;
// CHECK-NEXT:      #pragma unroll
// CHECK-NEXT:      for (int k = 0; k < 8; ++k) {
// CHECK-NEXT:        const long long rl = threadIdx.x + (long long)k * blockDim.x;
// CHECK-NEXT:        if (rl < rlen) {
// CHECK-NEXT:          const long long r1 = rl;
// CHECK-NEXT:          buf0[k] = fuser_ld(in{{[0-9]+}}, (o0) * st{{[0-9]+}} + (r1) * st{{[0-9]+}});
// CHECK-NEXT:          const float [[V:v[0-9]+]] = buf0[k];
// CHECK-NEXT:          acc0 = fuser_max(acc0, (float)[[V]]);
// CHECK:           acc0 = fuser_block_reduce(acc0, FuserMaxOp(), (float)-INFINITY, fuser_smem_f);
// ...phase 1 (sum of exp) reads it back and keeps exp(x - max) in buf1, which the store loop
// reads instead of computing exp again; no other global load.
// CHECK-NOT:       fuser_ld
// CHECK:           buf1[k] = [[E:t[0-9]+]];
// CHECK-NEXT:      acc1 = fuser_sum(acc1, (float)[[E]]);
// CHECK-NOT:       fuser_ld
// CHECK:           acc1 = fuser_block_reduce(acc1, FuserSumOp(), (float)0, fuser_smem_f);
// CHECK-NOT:       fuser_ld
// CHECK-NOT:       expf
// CHECK:           const float [[W:v[0-9]+]] = buf1[k];
// CHECK-NOT:       fuser_ld
// CHECK:           fuser_st(out{{[0-9]+}}, (o0) * st{{[0-9]+}} + (r1) * st{{[0-9]+}}, t{{[0-9]+}});
// CHECK:       FUSER_HOST_LAUNCHER(fuser_kernel_0_inner_persistent)
//
// C4K:         // scheduler: inner_persistent, block per row, block: 512, iters: 8
// C4K-NEXT:    extern "C" __global__ void __launch_bounds__(512) fuser_kernel_0_inner_persistent(
// C4K:           float buf0[8];
// Beyond 8 elements a thread the kept row lives in dynamic shared memory (registers would
// spill): element k of thread t at k * block + t; two slots (x, exp) would not fit 200 KB at
// 32768 floats, so only the loads are kept and exp is recomputed from them.
// C32K:        // scheduler: inner_persistent, block per row, block: 1024, iters: 32, row in shared memory (keeps loads)
// C32K-NEXT:   extern "C" __global__ void __launch_bounds__(1024) fuser_kernel_0_inner_persistent(
// C32K:          FUSER_DYNAMIC_SHARED(double, fuser_row_smem);
// C32K:          const auto buf0 = FUSER_SHARED_VIEW(float, fuser_row_smem, 0);
// C32K-NOT:      buf1
// C32K:          #pragma unroll 4
// C32K-NEXT:     for (int k = 0; k < 32; ++k) {
// C32K:            buf0[k * 1024 + threadIdx.x] = fuser_ld(
// Rows too long for registers: max and sum of exp in one online pass, then the store pass.
// ONLINE:      // scheduler: inner_persistent, block per row, block: 1024, iters: 0
// ONLINE-NOT:    buf0
// ONLINE:        for (long long rl = threadIdx.x; rl < rlen; rl += blockDim.x) {
// ONLINE:          fuser_online_update(acc0m, acc0s, (float)v{{[0-9]+}});
// ONLINE:        fuser_block_reduce_online(acc0m, acc0s, fuser_smem_f);
// ONLINE:        for (long long rl = threadIdx.x; rl < rlen; rl += blockDim.x) {
// ONLINE:          fuser_st(

// -----

// layer-norm with weight and bias: x kept in buf0 across the mean and variance phases, the
// weight and bias (indexed by the reduced dim only) kept in inv0/inv1 across rows.
func.func @layer_norm(%x: !fuser.tensor<?x?xf32>, %w: !fuser.tensor<?xf32>, %b: !fuser.tensor<?xf32>) -> !fuser.tensor<?x?xf32> {
  %n = fuser.dim %x, 1 : !fuser.tensor<?x?xf32>
  %s1 = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %mean = fuser.binary div %s1, %n : (!fuser.tensor<?xbxf32>, i64) -> !fuser.tensor<?xbxf32>
  %d = fuser.binary sub %x, %mean : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %d2 = fuser.binary mul %d, %d : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  %s2 = fuser.reduction sum %d2 dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %var = fuser.binary div %s2, %n : (!fuser.tensor<?xbxf32>, i64) -> !fuser.tensor<?xbxf32>
  %eps = arith.constant 1.000000e-05 : f64
  %ve = fuser.binary add %var, %eps : (!fuser.tensor<?xbxf32>, f64) -> !fuser.tensor<?xbxf32>
  %inv = fuser.unary rsqrt %ve : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xbxf32>
  %nrm = fuser.binary mul %d, %inv : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %wb = fuser.broadcast %w dims [0] : !fuser.tensor<?xf32> -> !fuser.tensor<bx?xf32>
  %sc = fuser.binary mul %nrm, %wb : (!fuser.tensor<?x?xf32>, !fuser.tensor<bx?xf32>) -> !fuser.tensor<?x?xf32>
  %bb = fuser.broadcast %b dims [0] : !fuser.tensor<?xf32> -> !fuser.tensor<bx?xf32>
  %y = fuser.binary add %sc, %bb : (!fuser.tensor<?x?xf32>, !fuser.tensor<bx?xf32>) -> !fuser.tensor<?x?xf32>
  func.return %y : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: // kernel 0 of @layer_norm: inner_persistent
// CHECK:       __launch_bounds__(128)
// CHECK:         float inv0[8];
// CHECK-NEXT:    float inv1[8];
// CHECK-NEXT:    bool fuser_first_row = true;
// CHECK-NEXT:    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
// CHECK-NEXT:      const long long o0 = row;
// CHECK-NEXT:      float buf0[8];
// CHECK:             buf0[k] = fuser_ld(
// CHECK:           acc0 = fuser_block_reduce(acc0, FuserSumOp(), (float)0, fuser_smem_f);
// CHECK-NOT:       fuser_ld
// CHECK:           acc1 = fuser_block_reduce(acc1, FuserSumOp(), (float)0, fuser_smem_f);
// CHECK-NOT:       buf0[k] = fuser_ld
// CHECK:             if (fuser_first_row) inv0[k] = fuser_ld(in{{[0-9]+}}, (r1) * st{{[0-9]+}});
// CHECK:             if (fuser_first_row) inv1[k] = fuser_ld(in{{[0-9]+}}, (r1) * st{{[0-9]+}});
// CHECK:             fuser_st(out{{[0-9]+}}, (o0) * st{{[0-9]+}} + (r1) * st{{[0-9]+}}, t{{[0-9]+}});
// CHECK:         fuser_first_row = false;
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-NEXT:  FUSER_HOST_LAUNCHER(fuser_kernel_0_inner_persistent)
// C4K-LABEL:   // kernel 0 of @layer_norm: inner_persistent
// C4K-NEXT:    // scheduler: inner_persistent, block per row, block: 512, iters: 8
// At 32768 floats the row (128 KB) fits shared memory but not with both weights beside it:
// the weights are read again for every row instead of kept.
// C32K-LABEL:  // kernel 0 of @layer_norm: inner_persistent
// C32K-NEXT:   // scheduler: inner_persistent, block per row, block: 1024, iters: 32, row in shared memory (keeps loads, weights re-read)
// C32K-NOT:      inv0
// C32K:          const auto buf0 = FUSER_SHARED_VIEW(float, fuser_row_smem, 0);
// C32K-NOT:      inv0
// C32K:        FUSER_HOST_LAUNCHER

// -----

// A per-row input (a scale [rows, 1]) is read once per row, by lane 0 of each warp, and
// shared with a shuffle: hoisted above the phase loops.
func.func @row_scale(%x: !fuser.tensor<?x?xf32>, %s: !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32> {
  %xs = fuser.binary mul %x, %s : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %m = fuser.reduction max %xs dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %d = fuser.binary sub %xs, %m : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  func.return %d : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: // kernel 0 of @row_scale: inner_persistent
// CHECK:         for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
// CHECK-NEXT:      const long long o0 = row;
// CHECK-NEXT:      float buf0[8];
// CHECK-NEXT:      const float [[S:h[0-9]+]] = fuser_lane0((threadIdx.x & 31) == 0 ? (float)(fuser_ld(in{{[0-9]+}}, (o0) * st{{[0-9]+}})) : (float)0);
// CHECK:           for (int k = 0; k < 8; ++k) {
// CHECK:             (v{{[0-9]+}} * [[S]])
