// fuser_philox.h -- counter-based random numbers for generated kernels: Philox4x32-10 and the
// conversions of fuser.uniform / fuser.normal, bit for bit what fuser_dialect/philox.py computes
// (the numpy reference; its docstring states the element -> (subsequence, word) mapping).
//
// __host__ __device__ and self-contained (no CUDA headers, no <cstdint>): it compiles under NVRTC,
// nvcc and g++ with the CPU emulation. Multiplies and adds of the affine step use the _rn
// intrinsics on the GPU so that nvcc never fuses them into an FMA (the reference rounds each).
#ifndef FUSER_PHILOX_H
#define FUSER_PHILOX_H

#define FUSER_RNG_FN __host__ __device__ __forceinline__

struct fuser_philox_words {
  unsigned int w[4];
};

FUSER_RNG_FN unsigned int fuser_mulhilo32(unsigned int a, unsigned int b, unsigned int* hi) {
  const unsigned long long p = (unsigned long long)a * b;
  *hi = (unsigned int)(p >> 32);
  return (unsigned int)p;
}

// key = seed, counter = (offset low, offset high, subsequence low, subsequence high).
FUSER_RNG_FN fuser_philox_words fuser_philox(unsigned long long seed, unsigned long long offset,
                                             unsigned long long subsequence) {
  unsigned int c0 = (unsigned int)offset, c1 = (unsigned int)(offset >> 32);
  unsigned int c2 = (unsigned int)subsequence, c3 = (unsigned int)(subsequence >> 32);
  unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    unsigned int hi0, hi1;
    const unsigned int lo0 = fuser_mulhilo32(0xD2511F53u, c0, &hi0);
    const unsigned int lo1 = fuser_mulhilo32(0xCD9E8D57u, c2, &hi1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  fuser_philox_words out = {{c0, c1, c2, c3}};
  return out;
}

FUSER_RNG_FN float fuser_rng_unit_f32(unsigned int word) { return (float)(word >> 8) * 5.9604644775390625e-08f; }

FUSER_RNG_FN double fuser_rng_unit_f64(unsigned int high, unsigned int low) {
  const unsigned long long bits = (unsigned long long)(high >> 5) * 67108864ull + (low >> 6);
  return (double)bits * 1.1102230246251565e-16;
}

FUSER_RNG_FN float fuser_rng_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FUSER_RNG_FN double fuser_rng_mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// `seed_offset` points at the op's (seed, offset): run-time values, never compiled in.
FUSER_RNG_FN float fuser_uniform_f32(const unsigned long long* seed_offset, long long i, float lo, float hi) {
  const fuser_philox_words r = fuser_philox(seed_offset[0], seed_offset[1], (unsigned long long)i >> 2);
  return lo + fuser_rng_mul(hi - lo, fuser_rng_unit_f32(r.w[i & 3]));
}

FUSER_RNG_FN double fuser_uniform_f64(const unsigned long long* seed_offset, long long i, double lo, double hi) {
  const fuser_philox_words r = fuser_philox(seed_offset[0], seed_offset[1], (unsigned long long)i >> 1);
  const int k = 2 * (int)(i & 1);
  return lo + fuser_rng_mul(hi - lo, fuser_rng_unit_f64(r.w[k], r.w[k + 1]));
}

FUSER_RNG_FN float fuser_normal_f32(const unsigned long long* seed_offset, long long i, float mean, float std) {
  const fuser_philox_words r = fuser_philox(seed_offset[0], seed_offset[1], (unsigned long long)i >> 1);
  const int k = 2 * (int)(i & 1);
  const float u1 = fuser_rng_unit_f32(r.w[k]), u2 = fuser_rng_unit_f32(r.w[k + 1]);
  const float z = sqrtf(-2.0f * logf(1.0f - u1)) * cosf(6.2831853071795864769f * u2);
  return mean + fuser_rng_mul(std, z);
}

FUSER_RNG_FN double fuser_normal_f64(const unsigned long long* seed_offset, long long i, double mean, double std) {
  const fuser_philox_words r = fuser_philox(seed_offset[0], seed_offset[1], (unsigned long long)i);
  const double u1 = fuser_rng_unit_f64(r.w[0], r.w[1]), u2 = fuser_rng_unit_f64(r.w[2], r.w[3]);
  const double z = sqrt(-2.0 * log(1.0 - u1)) * cos(6.2831853071795864769 * u2);
  return mean + fuser_rng_mul(std, z);
}

#endif  // FUSER_PHILOX_H
