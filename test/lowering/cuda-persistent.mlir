// `-t cuda` on inner persistent kernels (normalizations), for dense 16-byte aligned inputs on an
// H100 (lowering/schedulers/rows/: the heuristic scores schedules with the performance model).
// A row is walked by `lanes` threads, 4 floats (16 bytes) per access. Rows whose phases would
// read them again are kept on chip: each thread's share in a register array (`buf0[k * 4 + j]`,
// filled by the first phase, read by the later ones), or in dynamic shared memory when too long
// for registers; a value computed in one phase that a later phase reads (exp(x - max) in
// softmax) is kept the same way instead of being recomputed. Rows too long for either stream:
// max and sum of exp in one online pass, then the store pass re-reads the row (L2 hits).
// Weights are read with the row every time (L2 serves them; nothing is kept across rows).
// RUN: fuser-opt %s --split-input-file -t 'cuda{prelude=false}' | filecheck %s
// RUN: fuser-opt %s --split-input-file -t 'cuda{prelude=false extent=32768}' | filecheck %s --check-prefix=C32K
// RUN: fuser-opt %s --split-input-file -t 'cuda{prelude=false extent=65536}' | filecheck %s --check-prefix=ONLINE
// A dynamic row length is planned for as its power-of-two bucket (at least 1024): 96 as 1024.
// RUN: fuser-opt %s --split-input-file -t 'cuda{prelude=false extent=96}' | filecheck %s --check-prefix=BUCKET
// RUN: fuser-opt %s --split-input-file -t 'cuda{prelude=false aligned=false}' | filecheck %s --check-prefix=SCALAR

func.func @softmax(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %m = fuser.reduction max %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %d = fuser.binary sub %x, %m : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %e = fuser.unary exp %d : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %s = fuser.reduction sum %e dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %y = fuser.binary div %e, %s : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  func.return %y : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: // kernel 0 of @softmax: inner_persistent
// CHECK-NEXT:  // scheduler: inner_persistent, 4 rows of 32 lanes, block: 128, vec: 4, iters: 8, keeps loads, min blocks/SM: {{[0-9]+}}
// CHECK-NEXT:  extern "C" __global__ void __launch_bounds__(128, {{[0-9]+}}) fuser_kernel_0_inner_persistent(
// CHECK-NOT:     __shared__
// CHECK:         const int fuser_lane = threadIdx.x % 32;
// CHECK-NEXT:    for (long long row0 = (long long)blockIdx.x * 4; row0 < rows; row0 += (long long)gridDim.x * 4) {
// CHECK-NEXT:      const long long row = row0 + threadIdx.x / 32;
// CHECK-NEXT:      const bool fuser_row_ok = row < rows;
// CHECK-NEXT:      const long long o0 = row;
// CHECK-NEXT:      float buf0[32];
// Phase 0 (max): a load stage issues the thread's 8 vectors of x (16 bytes each, predicated on
// the row's end, no branch), all before the body uses any; the body (unguarded: its updates are
// selects on the guard) keeps them in the register buffer...
// CHECK-NEXT:      float acc0 = (float)-INFINITY;
// CHECK-NEXT:      float [[PL:pl[0-9]+]][8][4];
// CHECK-NEXT:      #pragma unroll
// CHECK-NEXT:      for (int k = 0; k < 8; ++k) {
// CHECK-NEXT:        const long long rl = ((long long)k * 32 + fuser_lane) * 4;
// CHECK-NEXT:        const long long r1 = rl;
// CHECK-NEXT:        const bool fuser_in = fuser_row_ok && rl < rlen;
// CHECK-NEXT:        fuser_ld_vec_if<4>(fuser_in, in{{[0-9]+}}, (o0) * st{{[0-9]+}} + (r1) * st{{[0-9]+}}, [[PL]][k]);
// CHECK-NEXT:      }
// CHECK-NEXT:      #pragma unroll
// CHECK-NEXT:      for (int k = 0; k < 8; ++k) {
// CHECK-NEXT:        const long long rl = ((long long)k * 32 + fuser_lane) * 4;
// CHECK-NEXT:        const long long r1 = rl;
// CHECK-NEXT:        {
// CHECK-NEXT:          const bool fuser_in = fuser_row_ok && rl < rlen;
// CHECK-NEXT:          buf0[k * 4 + 0] = [[PL]][k][0];
// CHECK-NEXT:          const float [[V:v[0-9]+]] = buf0[k * 4 + 0];
// CHECK-NEXT:          buf0[k * 4 + 1] = [[PL]][k][1];
// CHECK:               acc0 = fuser_in ? (fuser_max(acc0, (float)[[V]])) : acc0;
// ...the row's 32 lanes (one warp) combine by shuffles; phase 1 (sum of exp) and the store
// loop read x back from the buffer (only the loads are kept: 32 floats a thread already; exp
// is recomputed), and no other global load happens.
// CHECK:           acc0 = fuser_group_reduce<32>(acc0, FuserMaxOp());
// CHECK-NOT:       fuser_ld
// CHECK:           const float {{v[0-9]+}} = buf0[k * 4 + 0];
// CHECK-NOT:       fuser_ld
// CHECK:           acc1 = fuser_group_reduce<32>(acc1, FuserSumOp());
// CHECK-NOT:       fuser_ld
// CHECK:           float [[SO:so[0-9]+]][4];
// CHECK-NEXT:      const float {{v[0-9]+}} = buf0[k * 4 + 0];
// CHECK-NOT:       fuser_ld
// CHECK:           fuser_st_vec<4>(out{{[0-9]+}}, (o0) * st{{[0-9]+}} + (r1) * st{{[0-9]+}}, [[SO]]);
// CHECK:       FUSER_HOST_LAUNCHER(fuser_kernel_0_inner_persistent)
// Beyond registers, the kept row lives in dynamic shared memory: element e of thread t at
// e * block + t; two slots (x, exp) would not fit at 32768 floats, so only the loads are kept
// and exp is recomputed from them. One block of 1024 threads an SM, 64 KiB of loads in flight.
// C32K:        // scheduler: inner_persistent, block per row, block: 1024, vec: 4, iters: 8, row in shared memory (keeps loads)
// C32K-NEXT:   extern "C" __global__ void __launch_bounds__(1024, 1) fuser_kernel_0_inner_persistent(
// C32K:          FUSER_DYNAMIC_SHARED(double, fuser_row_smem);
// C32K:          const auto buf0 = FUSER_SHARED_VIEW(float, fuser_row_smem, 0);
// C32K-NOT:      buf1
// In steps of 4 vectors, each step's loads staged (shared memory needs no constant index).
// C32K:          for (int k0 = 0; k0 < 8; k0 += 4) {
// C32K-NEXT:       float [[PL:pl[0-9]+]][4][4];
// C32K-NEXT:       #pragma unroll
// C32K-NEXT:       for (int kj = 0; kj < 4; ++kj) {
// C32K-NEXT:         const int k = k0 + kj;
// C32K:              fuser_ld_vec_if<4>(fuser_in, in{{[0-9]+}}, (o0) * st{{[0-9]+}} + (r1) * st{{[0-9]+}}, [[PL]][kj]);
// C32K:              buf0[(k * 4 + 0) * 1024 + threadIdx.x] = [[PL]][kj][0];
// Rows too long for either: max and sum of exp in one online pass (one rescale per vector),
// then the store pass; steps of 4 vectors a thread keep 64 bytes of loads in flight.
// ONLINE:      // scheduler: inner_persistent, block per row, block: 1024, vec: 4, streaming, unroll: 4
// ONLINE-NOT:    buf0
// ONLINE:        for (long long rc = 0; rc < rlen; rc += 16384LL) {
// ONLINE-NEXT:     float {{pl[0-9]+}}[4][4];
// ONLINE-NEXT:     #pragma unroll
// ONLINE-NEXT:     for (int k = 0; k < 4; ++k) {
// ONLINE-NEXT:       const long long rl = rc + ((long long)k * 1024 + fuser_lane) * 4;
// ONLINE:              if (fuser_in) { fuser_online_update_vec(acc0m, acc0s, fl{{[0-9]+}}); }
// ONLINE:        fuser_block_reduce_online(acc0m, acc0s, fuser_smem_f);
// ONLINE:        for (long long rc = 0; rc < rlen; rc += 16384LL) {
// ONLINE:            fuser_st_vec<4>(
// BUCKET:      // scheduler: inner_persistent, 4 rows of 32 lanes, block: 128, vec: 4, iters: 8, keeps loads, min blocks/SM: {{[0-9]+}}
// Inputs of unknown alignment: scalar accesses.
// SCALAR:      // scheduler: inner_persistent, block per row, block: 64, vec: 1, iters: 16, keeps loads, min blocks/SM: {{[0-9]+}}
// SCALAR-NOT:    fuser_ld_vec
// SCALAR:          [[PL:pl[0-9]+]][k{{j?}}] = fuser_ld_if(fuser_in, in{{[0-9]+}}, (o0) * st{{[0-9]+}} + (r1) * st{{[0-9]+}});
// SCALAR:          buf0[k] = [[PL]][k{{j?}}];
// SCALAR-NOT:    fuser_st_vec
// SCALAR:      FUSER_HOST_LAUNCHER

// -----

// layer-norm with weight and bias: x kept in buf0 across the mean and variance phases, the
// weight and bias (indexed by the reduced dim only) read with vectors in the store loop, for
// every row: other rows' reads of them are L2 hits, and registers go to bytes in flight.
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
// CHECK-NEXT:  // scheduler: inner_persistent, 4 rows of 32 lanes, block: 128, vec: 4, iters: 8, keeps loads, min blocks/SM: {{[0-9]+}}
// CHECK:           float buf0[32];
// CHECK:             fuser_ld_vec_if<4>(fuser_in, in{{[0-9]+}}, (o0) * st{{[0-9]+}} + (r1) * st{{[0-9]+}}, [[X:pl[0-9]+]][k]);
// CHECK:               buf0[k * 4 + 0] = [[X]][k][0];
// CHECK:           acc0 = fuser_group_reduce<32>(acc0, FuserSumOp());
// CHECK-NOT:       fuser_ld
// CHECK:           acc1 = fuser_group_reduce<32>(acc1, FuserSumOp());
// CHECK-NOT:       buf0[k * 4 + 0] = pl
// The store loop's stage loads weight and bias (in chunks of the row's vectors: a stage fills at
// most 32 registers), then the body stores, predicated on the row's end.
// CHECK:             fuser_ld_vec_if<4>(fuser_in, in{{[0-9]+}}, (r1) * st{{[0-9]+}}, pl{{[0-9]+}}[kj]);
// CHECK-NEXT:        fuser_ld_vec_if<4>(fuser_in, in{{[0-9]+}}, (r1) * st{{[0-9]+}}, pl{{[0-9]+}}[kj]);
// CHECK:               if (fuser_in) { fuser_st_vec<4>(out{{[0-9]+}}, (o0) * st{{[0-9]+}} + (r1) * st{{[0-9]+}}, so{{[0-9]+}}); }
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-NEXT:  }
// CHECK-NEXT:  FUSER_HOST_LAUNCHER(fuser_kernel_0_inner_persistent)
// C32K-LABEL:  // kernel 0 of @layer_norm: inner_persistent
// C32K-NEXT:   // scheduler: inner_persistent, block per row, block: 1024, vec: 4, iters: 8, row in shared memory (keeps loads)
// C32K-NOT:      inv0
// C32K:        FUSER_HOST_LAUNCHER

// -----

// A per-row input (a scale [rows, 1]) is read once per row, by lane 0 of each warp (of each
// row's group of lanes when rows share a warp), and shared with a shuffle: hoisted above the
// phase loops.
func.func @row_scale(%x: !fuser.tensor<?x?xf32>, %s: !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32> {
  %xs = fuser.binary mul %x, %s : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %m = fuser.reduction max %xs dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %d = fuser.binary sub %xs, %m : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  func.return %d : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: // kernel 0 of @row_scale: inner_persistent
// CHECK:           const long long o0 = row;
// CHECK-NEXT:      float buf0[32];
// CHECK-NEXT:      const float [[S:h[0-9]+]] = fuser_lane0<32>(((threadIdx.x & 31) == 0 && fuser_row_ok) ? (float)(fuser_ld(in{{[0-9]+}}, (o0) * st{{[0-9]+}})) : (float)0);
// CHECK:           for (int k = 0; k < 8; ++k) {
// CHECK:             (v{{[0-9]+}} * [[S]])
// SCALAR-LABEL: // kernel 0 of @row_scale: inner_persistent
// SCALAR:          const float {{h[0-9]+}} = fuser_lane0<32>(((threadIdx.x & 31) == 0) ? (float)(fuser_ld(in{{[0-9]+}}, (o0) * st{{[0-9]+}})) : (float)0);

// -----

// Short static rows (96 floats): 8 rows of 16 lanes a block of 128 threads, 2 vectors a lane;
// a row's lanes reduce by shuffles within their group, and the lanes of a row past the last
// one load and store nothing.
func.func @softmax_96(%x: !fuser.tensor<?x96xf32>) -> !fuser.tensor<?x96xf32> {
  %m = fuser.reduction max %x dims [1] keepdim : !fuser.tensor<?x96xf32> -> !fuser.tensor<?xbxf32>
  %d = fuser.binary sub %x, %m : (!fuser.tensor<?x96xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x96xf32>
  %e = fuser.unary exp %d : !fuser.tensor<?x96xf32> -> !fuser.tensor<?x96xf32>
  %s = fuser.reduction sum %e dims [1] keepdim : !fuser.tensor<?x96xf32> -> !fuser.tensor<?xbxf32>
  %y = fuser.binary div %e, %s : (!fuser.tensor<?x96xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x96xf32>
  func.return %y : !fuser.tensor<?x96xf32>
}
// CHECK-LABEL: // kernel 0 of @softmax_96: inner_persistent
// CHECK-NEXT:  // scheduler: inner_persistent, 8 rows of 16 lanes, block: 128, vec: 4, iters: 2, keeps loads, min blocks/SM: {{[0-9]+}}
// CHECK:         const int fuser_lane = threadIdx.x % 16;
// CHECK-NEXT:    for (long long row0 = (long long)blockIdx.x * 8; row0 < rows; row0 += (long long)gridDim.x * 8) {
// CHECK-NEXT:      const long long row = row0 + threadIdx.x / 16;
// CHECK-NEXT:      const bool fuser_row_ok = row < rows;
// CHECK:             const bool fuser_in = fuser_row_ok && rl < rlen;
// CHECK:           acc0 = fuser_group_reduce<16>(acc0, FuserMaxOp());
// CHECK-NOT:       fuser_block_reduce
// CHECK:       FUSER_HOST_LAUNCHER

// -----

// The per-row load of a row that shares its warp: that row's lane 0 loads, if the row exists.
func.func @row_scale_96(%x: !fuser.tensor<?x96xf32>, %s: !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x96xf32> {
  %xs = fuser.binary mul %x, %s : (!fuser.tensor<?x96xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x96xf32>
  %m = fuser.reduction max %xs dims [1] keepdim : !fuser.tensor<?x96xf32> -> !fuser.tensor<?xbxf32>
  %d = fuser.binary sub %xs, %m : (!fuser.tensor<?x96xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x96xf32>
  func.return %d : !fuser.tensor<?x96xf32>
}
// CHECK-LABEL: // kernel 0 of @row_scale_96: inner_persistent
// CHECK:           const float [[S:h[0-9]+]] = fuser_lane0<16>(((threadIdx.x & 15) == 0 && fuser_row_ok) ? (float)(fuser_ld(in{{[0-9]+}}, (o0) * st{{[0-9]+}})) : (float)0);
// CHECK:           acc0 = fuser_group_reduce<16>(acc0, FuserMaxOp());
