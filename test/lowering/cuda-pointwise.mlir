// `-t cuda` on pointwise kernels: one thread per element in a grid-stride loop over the
// inner dims, 128 threads a block; every global access through fuser_ld / fuser_st. For
// inputs of unknown alignment (`aligned=false`) every access is scalar; dense aligned inputs
// (the default) move 16 bytes an access where the innermost extent allows (VEC).
// RUN: fuser-opt %s --split-input-file -t 'cuda{aligned=false}' | filecheck %s
// RUN: fuser-opt %s --split-input-file -t cuda | filecheck %s --check-prefix=VEC
// With the prelude (what NVRTC / g++ compile): the access macros and fuser's own 16-bit types
// (lowering/runtime/fuser_f16.h), no CUDA header.
// RUN: fuser-opt %s --split-input-file -t 'cuda{prelude=true}' | filecheck %s --check-prefix=PRELUDE

// PRELUDE:     // fuser_prelude.cuh
// PRELUDE-NOT: #include <cuda_
// PRELUDE:     FUSER_F16_TYPE(__nv_bfloat16, fuser_float_to_bf16_bits, fuser_bf16_bits_to_float)
// PRELUDE-NOT: #include <cuda_
// PRELUDE:     __device__ __forceinline__ T fuser_ld(const T* ptr, I idx)
// PRELUDE:     __device__ __forceinline__ void fuser_st(T* ptr, I idx, typename fuser_identity<T>::type value)
// PRELUDE:     extern "C" __global__ void __launch_bounds__(128) fuser_kernel_0_pointwise(

// A 1-D chain with a bf16 output: flat loop, f32 compute, one conversion at the store.
func.func @chain(%x: !fuser.tensor<?xf32>) -> !fuser.tensor<?xbf16> {
  %e = fuser.unary exp %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xf32>
  %n = fuser.unary neg %e : !fuser.tensor<?xf32> -> !fuser.tensor<?xf32>
  %c = fuser.cast %n : !fuser.tensor<?xf32> -> !fuser.tensor<?xbf16>
  func.return %c : !fuser.tensor<?xbf16>
}
// With arrays to check (VEC), the loop is unrolled (its loads issued by a load stage: the first
// step's before the loop, each next step's while the step computes) and, the extents being below
// 2^31, its index is unsigned 32-bit.
// VEC-LABEL:   // kernel 0 of @chain: pointwise
// VEC-NEXT:    // scheduler: pointwise, block: 128, outer dims: [0], vector: [4], unroll: 2, 32-bit index, prefetch
// VEC:           const unsigned inner = (unsigned)(ext{{[0-9]+}} / 4);
// VEC:             fuser_ld_vec_if<4>(fuser_in, in{{[0-9]+}}, (iv0) * st{{[0-9]+}}, [[PL:pl[0-9]+]][lin_u]);
// VEC:           for (unsigned lin_step = blockIdx.x * blockDim.x + threadIdx.x; lin_step < inner; lin_step += 2u * gridDim.x * blockDim.x) {
// VEC-NEXT:        float [[PL]]_next[2][4];
// VEC-NEXT:        const unsigned lin_step_next = lin_step + 2u * gridDim.x * blockDim.x;
// VEC:               fuser_ld_vec_if<4>(fuser_in, in{{[0-9]+}}, (iv0) * st{{[0-9]+}}, [[PL]]_next[lin_u]);
// VEC:             fuser_st_vec<4>(out{{[0-9]+}}, (iv0) * st{{[0-9]+}}, so{{[0-9]+}});
// VEC:           for (int fuser_j = 0; fuser_j < 4; ++fuser_j) [[PL]][fuser_k][fuser_j] = [[PL]]_next[fuser_k][fuser_j];
// CHECK-LABEL: // kernel 0 of @chain: pointwise
// CHECK-NEXT:  // scheduler: pointwise, block: 128, outer dims: [0]
// CHECK-NEXT:  extern "C" __global__ void __launch_bounds__(128) fuser_kernel_0_pointwise(
// CHECK:         float const* __restrict__ [[IN:in[0-9]+]],
// CHECK:         __nv_bfloat16* __restrict__ [[OUT:out[0-9]+]],
// CHECK:       const long long inner = [[N:ext[0-9]+]];
// CHECK-NEXT:  for (long long lin = (long long)blockIdx.x * blockDim.x + threadIdx.x; lin < inner; lin += (long long)gridDim.x * blockDim.x) {
// CHECK-NEXT:    const long long i0 = lin;
// CHECK-NEXT:    const float [[V:v[0-9]+]] = fuser_ld([[IN]], (i0) * st{{[0-9]+}});
// CHECK-NEXT:    const float [[E:t[0-9]+]] = expf([[V]]);
// CHECK-NEXT:    const float [[NEG:t[0-9]+]] = (-[[E]]);
// CHECK-NEXT:    const float [[R:t[0-9]+]] = fuser_round_bf16((float)([[NEG]]));
// CHECK-NEXT:    fuser_st([[OUT]], (i0) * st{{[0-9]+}}, __float2bfloat16([[R]]));
// CHECK-NEXT:  }
// CHECK:       FUSER_HOST_LAUNCHER(fuser_kernel_0_pointwise)

// -----

// A bias broadcast over rows: the rows become an outer loop inside each thread (blockIdx.y
// splits it) and the bias load, which does not depend on the row, is hoisted out of it, with
// the arithmetic on it (its cast).
func.func @bias(%x: !fuser.tensor<?x?xf32>, %b: !fuser.tensor<bx?xf16>) -> !fuser.tensor<?x?xf32> {
  %c = fuser.cast %b : !fuser.tensor<bx?xf16> -> !fuser.tensor<bx?xf32>
  %a = fuser.binary add %x, %c : (!fuser.tensor<?x?xf32>, !fuser.tensor<bx?xf32>) -> !fuser.tensor<?x?xf32>
  func.return %a : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: // kernel 0 of @bias: pointwise
// CHECK:       __launch_bounds__(128)
// CHECK:       for (long long lin = (long long)blockIdx.x * blockDim.x + threadIdx.x; lin < inner; lin += (long long)gridDim.x * blockDim.x) {
// CHECK-NEXT:    const long long i1 = lin;
// CHECK-NEXT:    const long long outer = ext{{[0-9]+}};
// CHECK-NEXT:    const float [[H:h[0-9]+]] = __half2float(fuser_ld(in{{[0-9]+}}, (i1) * st{{[0-9]+}}));
// CHECK-NEXT:    const float [[C:t[0-9]+]] = (float)([[H]]);
// CHECK-NEXT:    for (long long olin = blockIdx.y; olin < outer; olin += (long long)gridDim.y) {
// CHECK-NEXT:      const long long i0 = olin;
// CHECK-NEXT:      const float [[X:v[0-9]+]] = fuser_ld(in{{[0-9]+}}, (i0) * st{{[0-9]+}} + (i1) * st{{[0-9]+}});
// CHECK-NEXT:      const float [[S:t[0-9]+]] = ([[X]] + [[C]]);
// CHECK-NEXT:      fuser_st(out{{[0-9]+}}, (i0) * st{{[0-9]+}} + (i1) * st{{[0-9]+}}, [[S]]);

// -----

// Outputs of unrelated extents: one launch, blockIdx.z picks the group; pad reads its input
// only inside the bounds test: a load of the step's load stage predicated on it (no branch
// around the load), the body selecting it where the index lies inside.
func.func @groups(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) {
  %e = fuser.unary exp %x : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %zero = arith.constant 0.000000e+00 : f64
  %p = fuser.pad %x [0:0, 1:1] value %zero : (!fuser.tensor<?x?xf32>, f64) -> !fuser.tensor<?x?xf32>
  func.return %e, %p : !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: // kernel 0 of @groups: pointwise
// CHECK:       if (blockIdx.z == 0) {
// CHECK:         for (long long lin_step = (long long)blockIdx.x * blockDim.x + threadIdx.x; lin_step < inner; lin_step += 1LL * (long long)gridDim.x * blockDim.x) {
// CHECK:           expf(
// CHECK:           fuser_st(
// CHECK:       if (blockIdx.z == 1) {
// CHECK:         for (long long lin_step = (long long)blockIdx.x * blockDim.x + threadIdx.x; lin_step < inner; lin_step += 1LL * (long long)gridDim.x * blockDim.x) {
// CHECK:           const bool fuser_in = lin < inner;
// CHECK-NEXT:      [[PL:pl[0-9]+]][lin_u] = fuser_ld_if(fuser_in && (((i1 >= 1LL && i1 < (1LL + [[E:ext[0-9]+]])))), in{{[0-9]+}}, (i0) * st{{[0-9]+}} + (((i1) - 1LL)) * st{{[0-9]+}});
// CHECK:           const bool fuser_in = lin < inner;
// CHECK-NEXT:      float [[P:p[0-9]+]] = ((float)0.0);
// CHECK-NEXT:      if (((i1) >= 1LL && (i1) < 1LL + [[E]])) {
// CHECK-NEXT:        const float [[V:v[0-9]+]] = [[PL]][lin_u];
// CHECK-NEXT:        [[P]] = [[V]];
// CHECK-NEXT:      }
// CHECK-NEXT:      if (fuser_in) { fuser_st(out{{[0-9]+}}, (i0) * st{{[0-9]+}} + (i1) * st{{[0-9]+}}, [[P]]); }
// CHECK-NOT:   blockIdx.z == 2
// CHECK:       FUSER_HOST_LAUNCHER(fuser_kernel_0_pointwise)

// -----

// scatter is a pull: each element starts from the input and scans the index along dim for the
// last element naming it, inside the index's extent off dim (a smaller index scatters less).
func.func @scatter(%x: !fuser.tensor<?x?xf32>, %i: !fuser.tensor<?x?xi64>, %s: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %r = fuser.scatter %x[%i] = %s dim 1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xi64>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  func.return %r : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: // kernel 0 of @scatter: pointwise
// CHECK:         const float [[X:v[0-9]+]] = fuser_ld(in{{[0-9]+}}, (i0) * st{{[0-9]+}} + (i1) * st{{[0-9]+}});
// CHECK-NEXT:    float [[R:u[0-9]+]] = [[X]];
// CHECK-NEXT:    if ((i0) < ext{{[0-9]+}}) {
// CHECK-NEXT:      for (long long [[K:k[0-9]+]] = 0; [[K]] < ext{{[0-9]+}}; ++[[K]]) {
// CHECK-NEXT:        const long long [[V:v[0-9]+]] = fuser_ld(in{{[0-9]+}}, (i0) * st{{[0-9]+}} + ([[K]]) * st{{[0-9]+}});
// CHECK-NEXT:        const long long [[P:ix[0-9]+]] = fuser_checked_index(err{{[0-9]+}}, 0, (long long)([[V]]), ext{{[0-9]+}});
// CHECK-NEXT:        if ([[P]] == (i1)) {
// CHECK-NEXT:          const float [[S:v[0-9]+]] = fuser_ld(in{{[0-9]+}}, (i0) * st{{[0-9]+}} + ([[K]]) * st{{[0-9]+}});
// CHECK-NEXT:          [[R]] = [[S]];
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    fuser_st(out{{[0-9]+}}, (i0) * st{{[0-9]+}} + (i1) * st{{[0-9]+}}, [[R]]);

// -----

// isreal: the imaginary part compared with zero on complex; a constant true on real values
// (no load needed for the value, but the operand is still read as the fusion says).
func.func @isreal(%c: !fuser.tensor<?xc64>, %x: !fuser.tensor<?xf32>) -> (!fuser.tensor<?xi1>, !fuser.tensor<?xi1>) {
  %a = fuser.unary isreal %c : !fuser.tensor<?xc64> -> !fuser.tensor<?xi1>
  %b = fuser.unary isreal %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xi1>
  func.return %a, %b : !fuser.tensor<?xi1>, !fuser.tensor<?xi1>
}
// CHECK-LABEL: // kernel 0 of @isreal: pointwise
// CHECK:         const fuser_complex<float> [[C:v[0-9]+]] = fuser_ld(
// CHECK:         const bool [[A:t[0-9]+]] = (([[C]]).im == 0);
// CHECK:         const bool [[B:t[0-9]+]] = (bool)true;

// -----

// erfinv / erfcinv: CUDA's functions by name (the cpu emulation defines the same names).
func.func @inverse_erf(%x: !fuser.tensor<?xf32>, %y: !fuser.tensor<?xf64>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?xf64>) {
  %a = fuser.unary erfinv %x : !fuser.tensor<?xf32> -> !fuser.tensor<?xf32>
  %b = fuser.unary erfcinv %y : !fuser.tensor<?xf64> -> !fuser.tensor<?xf64>
  func.return %a, %b : !fuser.tensor<?xf32>, !fuser.tensor<?xf64>
}
// CHECK-LABEL: // kernel 0 of @inverse_erf: pointwise
// CHECK:         const float [[A:t[0-9]+]] = erfinvf([[X:v[0-9]+]]);
// CHECK:         const double [[B:t[0-9]+]] = erfcinv([[Y:v[0-9]+]]);
