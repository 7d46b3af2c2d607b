// `-t cuda` on reduction kernels (the nominal extent of `?` dims is 1024 unless `extent` says;
// inputs dense and 16-byte aligned unless `aligned=false`).
// Inner reduction: a row is walked by a group of lanes, 16 bytes an access, steps of `unroll`
// vectors a thread; the lanes combine (fuser_block_reduce when the row is the block, shuffles
// within the group when rows share a block) and the row's lane 0 stores the row result.
// Outer reduction: a column kernel, threads (and blocks) along the reduced dim, rows across a warp.
// RUN: fuser-opt %s --split-input-file -t 'cuda{prelude=false}' | filecheck %s
// RUN: fuser-opt %s --split-input-file -t 'cuda{extent=65536 prelude=false}' | filecheck %s --check-prefix=LONG

func.func @row_sum(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?xf32> {
  %s = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %s : !fuser.tensor<?xf32>
}
// One pass over the row, nothing kept: 8 rows of 16 lanes a block (rows are many: `?` rows are
// planned for as any batch), 4 vectors (64 bytes) of loads in flight a thread.
// CHECK-LABEL: // kernel 0 of @row_sum: reduction
// CHECK-NEXT:  // scheduler: reduction, 8 rows of 16 lanes, block: 128, vec: 4, streaming, unroll: 4, min blocks/SM: {{[0-9]+}}
// CHECK-NEXT:  extern "C" __global__ void __launch_bounds__(128, {{[0-9]+}}) fuser_kernel_0_reduction(
// CHECK:         const int fuser_lane = threadIdx.x % 16;
// CHECK-NEXT:    for (long long row0 = (long long)blockIdx.x * 8; row0 < rows; row0 += (long long)gridDim.x * 8) {
// CHECK:           float acc0 = (float)0;
// CHECK-NEXT:      for (long long rc = 0; rc < rlen; rc += 256LL) {
// CHECK-NEXT:        float [[PL:pl[0-9]+]][4][4];
// CHECK-NEXT:        #pragma unroll
// CHECK-NEXT:        for (int k = 0; k < 4; ++k) {
// CHECK-NEXT:          const long long rl = rc + ((long long)k * 16 + fuser_lane) * 4;
// CHECK-NEXT:          const long long r1 = rl;
// CHECK-NEXT:          const bool fuser_in = fuser_row_ok && rl < rlen;
// CHECK-NEXT:          fuser_ld_vec_if<4>(fuser_in, in{{[0-9]+}}, (o0) * st{{[0-9]+}} + (r1) * st{{[0-9]+}}, [[PL]][k]);
// CHECK-NEXT:        }
// CHECK-NEXT:        #pragma unroll
// CHECK-NEXT:        for (int k = 0; k < 4; ++k) {
// CHECK:                 const float [[V:v[0-9]+]] = [[PL]][k][0];
// CHECK:                 acc0 = fuser_in ? (fuser_sum(acc0, (float)[[V]])) : acc0;
// CHECK:           acc0 = fuser_group_reduce<16>(acc0, FuserSumOp());
// CHECK-NOT:       fuser_block_reduce
// CHECK:           if (fuser_row_ok && fuser_lane == 0) {
// CHECK-NEXT:        fuser_st(out{{[0-9]+}}, (o0) * st{{[0-9]+}}, red{{[0-9]+}});
// Rows of 65536 (a bucket of its own): the same shape, a 64 KiB-deep streamed row a group.
// LONG-LABEL:  // kernel 0 of @row_sum: reduction
// LONG-NEXT:   // scheduler: reduction, 8 rows of 16 lanes, block: 128, vec: 4, streaming, unroll: 4, min blocks/SM: {{[0-9]+}}
// LONG:          acc0 = fuser_group_reduce<16>(acc0, FuserSumOp());
// LONG-NOT:      fuser_block_reduce
// LONG:          if (fuser_row_ok && fuser_lane == 0) {

// -----

// max / min identities and NaN-propagating combines; i32 accumulates in long long. Static
// extents (one domain for both reductions) are literals, not parameters. 16 rows: a row is a
// block of 256 threads, so that the few rows still spread over 16 SMs.
func.func @max_min(%x: !fuser.tensor<16x1000xf16>, %i: !fuser.tensor<16x1000xi32>) -> (!fuser.tensor<16xbxf16>, !fuser.tensor<16xi32>) {
  %m = fuser.reduction max %x dims [1] keepdim : !fuser.tensor<16x1000xf16> -> !fuser.tensor<16xbxf16>
  %n = fuser.reduction min %i dims [1] : !fuser.tensor<16x1000xi32> -> !fuser.tensor<16xi32>
  func.return %m, %n : !fuser.tensor<16xbxf16>, !fuser.tensor<16xi32>
}
// CHECK-LABEL: // kernel 0 of @max_min: reduction
// CHECK-NEXT:  // scheduler: reduction, block per row, block: 256, vec: 4, streaming, unroll: 1, min blocks/SM: 4
// CHECK:       __shared__ float fuser_smem_f[{{[0-9]+}}];
// CHECK-NEXT:  __shared__ long long fuser_smem_ll[{{[0-9]+}}];
// CHECK-NEXT:  const long long rows = 16LL;
// CHECK-NEXT:  const long long rlen = 1000LL;
// CHECK:       float acc0 = (float)-INFINITY;
// CHECK:         acc0 = fuser_in ? (fuser_max(acc0, (float)v{{[0-9]+}})) : acc0;
// CHECK:       acc0 = fuser_block_reduce(acc0, FuserMaxOp(), (float)-INFINITY, fuser_smem_f);
// CHECK:       long long acc1 = (long long)9223372036854775807LL;
// CHECK:         acc1 = fuser_in ? (fuser_min(acc1, (long long)v{{[0-9]+}})) : acc1;
// CHECK:       acc1 = fuser_block_reduce(acc1, FuserMinOp(), (long long)9223372036854775807LL, fuser_smem_ll);
// CHECK:       if (fuser_lane == 0) {
// CHECK-NEXT:    fuser_st(out{{[0-9]+}}, (o0) * st{{[0-9]+}}, __float2half(red{{[0-9]+}}));
// CHECK-NEXT:    fuser_st(out{{[0-9]+}}, (o0) * st{{[0-9]+}}, red{{[0-9]+}});

// -----

func.func @outer_sum(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<bx?xf32> {
  %s = fuser.reduction sum %x dims [0] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<bx?xf32>
  func.return %s : !fuser.tensor<bx?xf32>
}
// CHECK-LABEL: // kernel 0 of @outer_sum: reduction
// A column kernel (rows/columns.py): 4 rows a thread (the arrays allow 16-byte accesses), 8
// threads across the rows and the rest along the reduced dim walking it in staged steps of one
// vector load each, an accumulator a row, combined through shared memory; the row's thread 0
// stores the 4 sums.
// CHECK-NEXT:  // scheduler: reduction, thread per row, block: [[B:[0-9]+]], 4 rows a thread ([[C:[0-9]+]] rows x [[T:[0-9]+]] threads along them)
// CHECK-NEXT:  extern "C" __global__ void __launch_bounds__([[B]], {{[0-9]+}}) fuser_kernel_0_reduction(
// CHECK:       __shared__ float fuser_smem_f[[[B]]];
// CHECK:       const int fuser_tx = threadIdx.x % [[C]];
// CHECK-NEXT:  const int fuser_ty = threadIdx.x / [[C]];
// CHECK-NEXT:  for (long long row0 = (long long)blockIdx.x * [[C]]; row0 < (rows / 4LL); row0 += (long long)gridDim.x * [[C]]) {
// CHECK-NEXT:    const long long row = (row0 + fuser_tx) * 4LL;
// CHECK-NEXT:    const bool fuser_row_ok = row < rows;
// CHECK-NEXT:    const long long o1 = row;
// CHECK-NEXT:    float acc0_0 = (float)0;
// CHECK-NEXT:    float acc0_1 = (float)0;
// CHECK-NEXT:    float acc0_2 = (float)0;
// CHECK-NEXT:    float acc0_3 = (float)0;
// CHECK-NEXT:    for (long long rc = (long long)blockIdx.y * {{[0-9]+}}LL; rc < rlen; rc += (long long)gridDim.y * {{[0-9]+}}LL) {
// CHECK:             fuser_ld_vec_if<4>(fuser_in, in{{[0-9]+}}, (r0) * st{{[0-9]+}} + (o1) * st{{[0-9]+}}, [[PL:pl[0-9]+]][k]);
// CHECK:             acc0_0 = fuser_in ? (fuser_sum(acc0_0, (float)v{{[0-9]+}})) : acc0_0;
// CHECK:             acc0_3 = fuser_in ? (fuser_sum(acc0_3, (float)v{{[0-9]+}})) : acc0_3;
// CHECK:         acc0_0 = fuser_column_reduce<[[C]], [[T]]>(acc0_0, FuserSumOp(), fuser_smem_f);
// CHECK:         acc0_3 = fuser_column_reduce<[[C]], [[T]]>(acc0_3, FuserSumOp(), fuser_smem_f);
// CHECK-NOT:     fuser_block_reduce
// CHECK:         if (fuser_row_ok && fuser_ty == 0) {
// CHECK-NEXT:      fuser_st(out{{[0-9]+}}, (o1) * st{{[0-9]+}}, red{{[0-9]+}});
// CHECK-NEXT:      fuser_st(out{{[0-9]+}}, ((o1 + 1)) * st{{[0-9]+}}, red{{[0-9]+}});
// CHECK:       FUSER_HOST_LAUNCHER(fuser_kernel_0_reduction)

// -----

// A variance: sum(x), then sum((x - mean)^2) with mean = sum / n, in one Welford pass over the
// streamed row: (count, mean, M2) of each vector folded into the thread's (shifted by its first
// element), re-expressed against the row's lane 0's shift, then Chan's merge across the row's
// lanes (the block's, or the group's when rows share a block), so x is read once; the second
// sum is M2 + n * (mean - c)^2 for the IR's own center c.
func.func @variance(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?xbxf32>, !fuser.tensor<?xf32>) {
  %s = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %n = fuser.dim %x, 1 : !fuser.tensor<?x?xf32>
  %m = fuser.binary div %s, %n : (!fuser.tensor<?xbxf32>, i64) -> !fuser.tensor<?xbxf32>
  %d = fuser.binary sub %x, %m : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %q = fuser.binary mul %d, %d : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  %v = fuser.reduction sum %q dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %m, %v : !fuser.tensor<?xbxf32>, !fuser.tensor<?xf32>
}
// CHECK-LABEL: // kernel 0 of @variance: inner_persistent
// CHECK:           fuser_welford_update_vec(acc0n, acc0a, acc0q, acc0k, fl{{[0-9]+}});
// CHECK:         fuser_group_common_shift<16>(acc0n, acc0a, acc0k);
// CHECK-NEXT:    fuser_group_reduce_welford<16>(acc0n, acc0a, acc0q);
// CHECK-NOT:     fuser_block_reduce(
// LONG-LABEL:  // kernel 0 of @variance: inner_persistent
// LONG:            const float [[L:fl[0-9]+]][4] = {(float)v{{[0-9]+}}, (float)v{{[0-9]+}}, (float)v{{[0-9]+}}, (float)v{{[0-9]+}}};
// LONG-NEXT:       fuser_welford_update_vec(acc0n, acc0a, acc0q, acc0k, [[L]]);
// LONG:          fuser_group_common_shift<16>(acc0n, acc0a, acc0k);
// LONG-NEXT:     fuser_group_reduce_welford<16>(acc0n, acc0a, acc0q);
// LONG-NEXT:     acc0a += acc0k;
// LONG-NEXT:     const float [[SUM:red[0-9]+]] = (float)(acc0a * acc0n);
// LONG:          const float [[DEV:dev[0-9]+]] = (acc0a - (float){{t[0-9]+}});
// LONG-NEXT:     const float red{{[0-9]+}} = (float)(acc0q + acc0n * [[DEV]] * [[DEV]]);
// LONG-NOT:      fuser_block_reduce(

// -----

// Must not become a Welford pass: the center comes from another input, not from sum(x).
func.func @not_a_variance(%x: !fuser.tensor<?x?xf32>, %c: !fuser.tensor<?xbxf32>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>) {
  %s = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  %d = fuser.binary sub %x, %c : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %q = fuser.binary mul %d, %d : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  %v = fuser.reduction sum %q dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %s, %v : !fuser.tensor<?xf32>, !fuser.tensor<?xf32>
}
// LONG-LABEL:  // kernel 0 of @not_a_variance: reduction
// LONG-NOT:      fuser_welford
// LONG:          fuser_block_reduce(acc0, FuserSumOp(), (float)0, fuser_smem_f);
// LONG:          fuser_block_reduce(acc1, FuserSumOp(), (float)0, fuser_smem_f);
