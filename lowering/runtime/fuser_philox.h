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

// Word k (0..3) of r without indexing r.w at a run-time index: an index the compiler cannot
// resolve puts the four words in local memory (a stack frame and local loads and stores); two
// levels of selects keep them in registers.
FUSER_RNG_FN unsigned int fuser_philox_word(const fuser_philox_words& r, unsigned int k) {
  const unsigned int low = (k & 1u) ? r.w[1] : r.w[0];
  const unsigned int high = (k & 1u) ? r.w[3] : r.w[2];
  return (k & 2u) ? high : low;
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
FUSER_RNG_FN float fuser_rng_add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
FUSER_RNG_FN float fuser_rng_div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
FUSER_RNG_FN double fuser_rng_mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
FUSER_RNG_FN double fuser_rng_add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
FUSER_RNG_FN double fuser_rng_div(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

// log and cos of the Box-Muller step, written out operation by operation in f64 (no libm: its
// results differ by an ulp between implementations), so that the reference's numpy code
// (fuser_dialect/philox.py: log_unit, cos_two_pi, the same constants, in the same order) gives
// the same bits. Every multiply and add rounds on its own (_rn on the GPU: never an FMA).
FUSER_RNG_FN double fuser_rng_series(double z, const double* c, int n) {
  double p = c[n - 1];
  for (int k = n - 2; k >= 0; --k) p = fuser_rng_add(fuser_rng_mul(p, z), c[k]);
  return p;
}

// log(x) for x in (0, 1]: x = m 2^e, m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh((m - 1) / (m + 1)).
FUSER_RNG_FN double fuser_rng_log(double x) {
  const double series[10] = {0.3333333333333333, 0.2, 0.14285714285714285, 0.1111111111111111,
                             0.09090909090909091, 0.07692307692307693, 0.06666666666666667,
                             0.058823529411764705, 0.05263157894736842, 0.047619047619047616};
  int e;
  double m = frexp(x, &e);
  if (m < 0.7071067811865476) {
    m = m * 2.0;
    e = e - 1;
  }
  const double f = m - 1.0;
  const double s = fuser_rng_div(f, fuser_rng_add(2.0, f));
  const double t = fuser_rng_add(s, s), z = fuser_rng_mul(s, s);
  const double log_m = fuser_rng_add(t, fuser_rng_mul(fuser_rng_mul(t, z), fuser_rng_series(z, series, 10)));
  const double de = (double)e;
  return fuser_rng_add(fuser_rng_mul(de, 0.6931471803691238),
                       fuser_rng_add(log_m, fuser_rng_mul(de, 1.9082149292705877e-10)));
}

// cos(2 pi u) for u in [0, 1): the nearest quarter turn q of 4u, then a series within pi/4.
FUSER_RNG_FN double fuser_rng_cos_two_pi(double u) {
  const double cos_series[10] = {-0.5, 0.041666666666666664, -0.001388888888888889, 2.48015873015873e-05,
                                 -2.755731922398589e-07, 2.08767569878681e-09, -1.1470745597729725e-11,
                                 4.779477332387385e-14, -1.5619206968586225e-16, 4.110317623312165e-19};
  const double sin_series[10] = {-0.16666666666666666, 0.008333333333333333, -0.0001984126984126984,
                                 2.7557319223985893e-06, -2.505210838544172e-08, 1.6059043836821613e-10,
                                 -7.647163731819816e-13, 2.8114572543455206e-15, -8.22063524662433e-18,
                                 1.9572941063391263e-20};
  const double four_u = fuser_rng_mul(4.0, u);
  const double q = floor(fuser_rng_add(four_u, 0.5));
  const double theta = fuser_rng_mul(four_u - q, 1.5707963267948966);
  const double z = fuser_rng_mul(theta, theta);
  const int quarter = (int)q & 3;
  if (quarter == 0 || quarter == 2) {
    const double c = fuser_rng_add(1.0, fuser_rng_mul(z, fuser_rng_series(z, cos_series, 10)));
    return quarter == 0 ? c : -c;
  }
  const double s = fuser_rng_add(theta, fuser_rng_mul(fuser_rng_mul(theta, z), fuser_rng_series(z, sin_series, 10)));
  return quarter == 3 ? s : -s;
}

// A standard normal value from two units (Box-Muller, cosine branch), in f64.
FUSER_RNG_FN double fuser_rng_box_muller(double u1, double u2) {
  return fuser_rng_mul(sqrt(-2.0 * fuser_rng_log(1.0 - u1)), fuser_rng_cos_two_pi(u2));
}

// The same steps in f32, for f32/f16/bf16 normals (an f32 kernel then runs no f64 instruction:
// f64 is 1/64 of the f32 rate on most GPUs). Constants are the f32 values, written exactly (hex);
// fuser_dialect/philox.py (log_unit_f32, cos_two_pi_f32) does the same operations in numpy f32.
FUSER_RNG_FN float fuser_rng_series_f32(float z, const float* c, int n) {
  float p = c[n - 1];
  for (int k = n - 2; k >= 0; --k) p = fuser_rng_add(fuser_rng_mul(p, z), c[k]);
  return p;
}

FUSER_RNG_FN float fuser_rng_log_f32(float x) {
  const float series[5] = {0x1.555556p-2f, 0x1.99999ap-3f, 0x1.24924ap-3f, 0x1.c71c72p-4f, 0x1.745d18p-4f};
  int e;
  float m = frexpf(x, &e);
  if (m < 0x1.6a09e6p-1f) {
    m = m * 2.0f;
    e = e - 1;
  }
  const float f = m - 1.0f;
  const float s = fuser_rng_div(f, fuser_rng_add(2.0f, f));
  const float t = fuser_rng_add(s, s), z = fuser_rng_mul(s, s);
  const float log_m = fuser_rng_add(t, fuser_rng_mul(fuser_rng_mul(t, z), fuser_rng_series_f32(z, series, 5)));
  const float de = (float)e;
  return fuser_rng_add(fuser_rng_mul(de, 0x1.62e3p-1f), fuser_rng_add(log_m, fuser_rng_mul(de, 0x1.2fefa2p-17f)));
}

FUSER_RNG_FN float fuser_rng_cos_two_pi_f32(float u) {
  const float cos_series[6] = {-0x1p-1f, 0x1.555556p-5f, -0x1.6c16c2p-10f, 0x1.a01a02p-16f, -0x1.27e4fcp-22f,
                               0x1.1eed8ep-29f};
  const float sin_series[6] = {-0x1.555556p-3f, 0x1.111112p-7f, -0x1.a01a02p-13f, 0x1.71de3ap-19f,
                               -0x1.ae6456p-26f, 0x1.612462p-33f};
  const float four_u = fuser_rng_mul(4.0f, u);
  const float q = floorf(fuser_rng_add(four_u, 0.5f));
  const float theta = fuser_rng_mul(four_u - q, 0x1.921fb6p+0f);
  const float z = fuser_rng_mul(theta, theta);
  const int quarter = (int)q & 3;
  if (quarter == 0 || quarter == 2) {
    const float c = fuser_rng_add(1.0f, fuser_rng_mul(z, fuser_rng_series_f32(z, cos_series, 6)));
    return quarter == 0 ? c : -c;
  }
  const float s = fuser_rng_add(theta, fuser_rng_mul(fuser_rng_mul(theta, z), fuser_rng_series_f32(z, sin_series, 6)));
  return quarter == 3 ? s : -s;
}

FUSER_RNG_FN float fuser_rng_box_muller_f32(float u1, float u2) {
  return fuser_rng_mul(sqrtf(fuser_rng_mul(-2.0f, fuser_rng_log_f32(1.0f - u1))), fuser_rng_cos_two_pi_f32(u2));
}

// `seed_offset` points at the op's (seed, offset): run-time values, never compiled in.
FUSER_RNG_FN float fuser_uniform_f32(const unsigned long long* seed_offset, long long i, float lo, float hi) {
  const fuser_philox_words r = fuser_philox(seed_offset[0], seed_offset[1], (unsigned long long)i >> 2);
  return lo + fuser_rng_mul(hi - lo, fuser_rng_unit_f32(fuser_philox_word(r, (unsigned int)i & 3u)));
}

FUSER_RNG_FN double fuser_uniform_f64(const unsigned long long* seed_offset, long long i, double lo, double hi) {
  const fuser_philox_words r = fuser_philox(seed_offset[0], seed_offset[1], (unsigned long long)i >> 1);
  const bool odd = (i & 1) != 0;
  return lo + fuser_rng_mul(hi - lo, fuser_rng_unit_f64(odd ? r.w[2] : r.w[0], odd ? r.w[3] : r.w[1]));
}

FUSER_RNG_FN float fuser_normal_f32(const unsigned long long* seed_offset, long long i, float mean, float std) {
  const fuser_philox_words r = fuser_philox(seed_offset[0], seed_offset[1], (unsigned long long)i >> 1);
  const bool odd = (i & 1) != 0;
  const float z = fuser_rng_box_muller_f32(fuser_rng_unit_f32(odd ? r.w[2] : r.w[0]),
                                           fuser_rng_unit_f32(odd ? r.w[3] : r.w[1]));
  return mean + fuser_rng_mul(std, z);
}

FUSER_RNG_FN double fuser_normal_f64(const unsigned long long* seed_offset, long long i, double mean, double std) {
  const fuser_philox_words r = fuser_philox(seed_offset[0], seed_offset[1], (unsigned long long)i);
  const double z = fuser_rng_box_muller(fuser_rng_unit_f64(r.w[0], r.w[1]), fuser_rng_unit_f64(r.w[2], r.w[3]));
  return mean + fuser_rng_mul(std, z);
}

#endif  // FUSER_PHILOX_H
