"""Counter-based random numbers: Philox4x32-10 in numpy, bit for bit what
lowering/runtime/fuser_philox.h computes in a kernel.

The value of logical element i of a random tensor (i: the row-major linear index over the
op's result shape) is a pure function of (seed, offset, i), so it does not depend on the
block, the grid, the vector width or which kernel computes it:

- one Philox call: key = seed (low word, high word), counter = (offset low, offset high,
  subsequence low, subsequence high). Different offsets never share a counter, whatever the
  element count: an offset selects a stream.
- uniform f32/f16/bf16: subsequence i // 4, word i % 4; u = (word >> 8) * 2**-24, exact in
  f32 and in [0, 1). The value is lo + (hi - lo) * u computed in f32 (each operation rounded,
  never fused), then rounded to f16/bf16; a value that rounded to hi or past it is lo (rounded),
  so results lie in [lo, hi) in their dtype (as nvFuser, which maps the rounded hi to lo).
- uniform f64: subsequence i // 2, words 2(i % 2) and 2(i % 2) + 1 give 53 bits; the same
  formula in f64.
- normal (Box-Muller, cosine branch): f32/f16/bf16 subsequence i // 2, words 2(i % 2) and
  2(i % 2) + 1 give u1, u2 as above (f32); f64 subsequence i, words (0, 1) and (2, 3) give
  53-bit u1, u2. z = sqrt(-2 log(1 - u1)) cos(2 pi u2) (1 - u1 is in (0, 1]: no log(0)),
  computed in f64 for f64 and in f32 for f32/f16/bf16 (an f32 kernel runs no f64 instruction);
  value = mean + std * z in that dtype. log and cos are not libm's (whose last bit differs
  between numpy, glibc and CUDA) but written out here (`log_unit`, `cos_two_pi`, and in f32
  `log_unit_f32`, `cos_two_pi_f32`: exact range reduction, then series, every operation rounded
  once) and identically in the kernel header, so normal values, like uniform ones, are
  bit-identical between the reference and the cpu backend (and the GPU: _rn intrinsics, no FMA).

Without a seed and offset, a random op gets (seed, offset) per execution as in nvFuser: one
seed and a first offset per execution, op k (the unseeded ops in program order) uses
(seed, first + k), on every backend alike, so successive executions differ. Where they come from:
- torch with CUDA initialized: exactly nvFuser's progression on the default CUDA generator —
  seed = its seed, first = its Philox offset // 4, and the offset advances by 4 per op;
- torch on the host: seed = torch.initial_seed(), first = one draw from torch's default
  generator (it has no Philox offset), so after `torch.manual_seed(s)` a run repeats;
- without torch, or after `philox.manual_seed(s)`: fuser's own (seed, offset) counter,
  seed s (or one from the OS), first offset 0, advancing by the op count per execution.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

_MASK32 = np.uint64(0xFFFFFFFF)
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
ROUNDS = 10



def as_u64(value: int) -> int:
    """A seed or offset (an i64 scalar of the fusion) as the 64 bits Philox uses."""
    return int(value) & 0xFFFFFFFFFFFFFFFF


def philox4x32(seed: int, offset: int, subsequence: np.ndarray) -> tuple[np.ndarray, ...]:
    """The four 32-bit words (uint32 arrays shaped like `subsequence`) of Philox4x32-10."""
    seed, offset = as_u64(seed), as_u64(offset)
    sub = np.asarray(subsequence, dtype=np.uint64)
    c0 = np.full(sub.shape, offset & 0xFFFFFFFF, np.uint64)
    c1 = np.full(sub.shape, offset >> 32, np.uint64)
    c2, c3 = sub & _MASK32, sub >> np.uint64(32)
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    for r in range(ROUNDS):
        if r:
            k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
        p0, p1 = _M0 * c0, _M1 * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & _MASK32,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & _MASK32)
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))


def _pick(words: tuple[np.ndarray, ...], lane: np.ndarray) -> np.ndarray:
    return np.choose(lane, words)


def _unit_f32(word: np.ndarray) -> np.ndarray:
    return (word >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)


def _unit_f64(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    bits = (high.astype(np.uint64) >> np.uint64(5)) * np.uint64(1 << 26) + (low.astype(np.uint64) >> np.uint64(6))
    return bits.astype(np.float64) * np.float64(2.0**-53)


def uniform_units(seed: int, offset: int, count: int, wide: bool) -> np.ndarray:
    """u in [0, 1) for elements 0..count-1: f64 with `wide` (53 bits), else f32 (24 bits)."""
    i = np.arange(count, dtype=np.uint64)
    if wide:
        words = philox4x32(seed, offset, i >> np.uint64(1))
        pair = (i & np.uint64(1)).astype(np.intp) * 2
        return _unit_f64(_pick(words, pair), _pick(words, pair + 1))
    words = philox4x32(seed, offset, i >> np.uint64(2))
    return _unit_f32(_pick(words, (i & np.uint64(3)).astype(np.intp)))


def normal_units(seed: int, offset: int, count: int, wide: bool) -> np.ndarray:
    """Standard normal values for elements 0..count-1 (f64 with `wide`, else f32)."""
    i = np.arange(count, dtype=np.uint64)
    if wide:
        w = philox4x32(seed, offset, i)
        u1, u2 = _unit_f64(w[0], w[1]), _unit_f64(w[2], w[3])
        radius = np.sqrt(-2.0 * log_unit(1.0 - u1))
        return radius * cos_two_pi(u2)
    words = philox4x32(seed, offset, i >> np.uint64(1))
    pair = (i & np.uint64(1)).astype(np.intp) * 2
    u1, u2 = _unit_f32(_pick(words, pair)), _unit_f32(_pick(words, pair + 1))
    radius = np.sqrt(np.float32(-2.0) * log_unit_f32(np.float32(1.0) - u1))
    return radius * cos_two_pi_f32(u2)


# --- log and cos of the Box-Muller step, written out (see the module doc) ------------------------

LN2_HI, LN2_LO = 0.6931471803691238, 1.9082149292705877e-10
"""ln 2 = LN2_HI + LN2_LO; LN2_HI has trailing zero bits, so e * LN2_HI is exact for |e| < 2**11."""
SQRT_HALF = 0.7071067811865476
HALF_PI = 1.5707963267948966
LOG_SERIES = (0.3333333333333333, 0.2, 0.14285714285714285, 0.1111111111111111, 0.09090909090909091,
              0.07692307692307693, 0.06666666666666667, 0.058823529411764705, 0.05263157894736842,
              0.047619047619047616)
"""1 / (2k + 1), k = 1..10: log(m) = 2 atanh(s) = 2s (1 + s^2/3 + s^4/5 + ...), s = (m - 1) / (m + 1)."""
COS_SERIES = (-0.5, 0.041666666666666664, -0.001388888888888889, 2.48015873015873e-05, -2.755731922398589e-07,
              2.08767569878681e-09, -1.1470745597729725e-11, 4.779477332387385e-14, -1.5619206968586225e-16,
              4.110317623312165e-19)
"""(-1)^n / (2n)!, n = 1..10 (|theta| <= pi/4: the next term is below 1e-22)."""
SIN_SERIES = (-0.16666666666666666, 0.008333333333333333, -0.0001984126984126984, 2.7557319223985893e-06,
              -2.505210838544172e-08, 1.6059043836821613e-10, -7.647163731819816e-13, 2.8114572543455206e-15,
              -8.22063524662433e-18, 1.9572941063391263e-20)
"""(-1)^n / (2n + 1)!, n = 1..10."""


def _series(z: np.ndarray, coefficients: tuple[float, ...]) -> np.ndarray:
    """c[0] + z (c[1] + z (c[2] + ...)), one rounding per operation (Horner)."""
    p = np.full(z.shape, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        p = p * z + c
    return p


def log_unit(x: np.ndarray) -> np.ndarray:
    """log(x) for f64 x in (0, 1]: x = m 2^e with m in [sqrt(1/2), sqrt(2)), then the atanh series of
    m (exact range reduction; within a few ulps of the true log)."""
    m, e = np.frexp(x)
    small = m < SQRT_HALF
    m = np.where(small, m * 2.0, m)
    e = np.where(small, e - 1, e).astype(np.float64)
    f = m - 1.0
    s = f / (2.0 + f)
    t = s + s
    z = s * s
    log_m = t + (t * z) * _series(z, LOG_SERIES)
    return e * LN2_HI + (log_m + e * LN2_LO)


def cos_two_pi(u: np.ndarray) -> np.ndarray:
    """cos(2 pi u) for f64 u in [0, 1): the quarter turn q nearest to 4u is exact, and the rest,
    |4u - q| <= 1/2, is an angle within pi/4 for the cos or sin series (q picks which, and the sign)."""
    q = np.floor(4.0 * u + 0.5)
    theta = (4.0 * u - q) * HALF_PI
    z = theta * theta
    cos = 1.0 + z * _series(z, COS_SERIES)
    sin = theta + (theta * z) * _series(z, SIN_SERIES)
    quarter = q.astype(np.int64) & 3
    return np.choose(quarter, (cos, -sin, -cos, sin))


# The f32 Box-Muller step of f32/f16/bf16 normals: the same range reductions with f32 constants
# (their exact f32 values, as the kernel header writes them in hex) and shorter series (f32 needs
# no more), every operation in numpy float32, rounded once, as the kernel does it.
_F32 = np.float32
LN2_HI_F32, LN2_LO_F32 = _F32(float.fromhex("0x1.62e3p-1")), _F32(float.fromhex("0x1.2fefa2p-17"))
"""fdlibm's logf split of ln 2 (LN2_HI_F32 has trailing zero bits: e * LN2_HI_F32 is exact)."""
SQRT_HALF_F32 = _F32(float.fromhex("0x1.6a09e6p-1"))
HALF_PI_F32 = _F32(float.fromhex("0x1.921fb6p+0"))
LOG_SERIES_F32 = tuple(_F32(float.fromhex(h)) for h in
                       ("0x1.555556p-2", "0x1.99999ap-3", "0x1.24924ap-3", "0x1.c71c72p-4", "0x1.745d18p-4"))
COS_SERIES_F32 = tuple(_F32(float.fromhex(h)) for h in
                       ("-0x1p-1", "0x1.555556p-5", "-0x1.6c16c2p-10", "0x1.a01a02p-16", "-0x1.27e4fcp-22",
                        "0x1.1eed8ep-29"))
SIN_SERIES_F32 = tuple(_F32(float.fromhex(h)) for h in
                       ("-0x1.555556p-3", "0x1.111112p-7", "-0x1.a01a02p-13", "0x1.71de3ap-19", "-0x1.ae6456p-26",
                        "0x1.612462p-33"))


def _series_f32(z: np.ndarray, coefficients: tuple) -> np.ndarray:
    p = np.full(z.shape, coefficients[-1], np.float32)
    for c in reversed(coefficients[:-1]):
        p = p * z + c
    return p


def log_unit_f32(x: np.ndarray) -> np.ndarray:
    """log(x) for f32 x in (0, 1], in f32 (as fuser_rng_log_f32)."""
    m, e = np.frexp(x.astype(np.float32))
    small = m < SQRT_HALF_F32
    m = np.where(small, m * _F32(2.0), m).astype(np.float32)
    e = np.where(small, e - 1, e).astype(np.float32)
    f = m - _F32(1.0)
    s = f / (_F32(2.0) + f)
    t = s + s
    z = s * s
    log_m = t + (t * z) * _series_f32(z, LOG_SERIES_F32)
    return e * LN2_HI_F32 + (log_m + e * LN2_LO_F32)


def cos_two_pi_f32(u: np.ndarray) -> np.ndarray:
    """cos(2 pi u) for f32 u in [0, 1), in f32 (as fuser_rng_cos_two_pi_f32)."""
    four_u = _F32(4.0) * u.astype(np.float32)
    q = np.floor(four_u + _F32(0.5))
    theta = (four_u - q) * HALF_PI_F32
    z = theta * theta
    cos = _F32(1.0) + z * _series_f32(z, COS_SERIES_F32)
    sin = theta + (theta * z) * _series_f32(z, SIN_SERIES_F32)
    quarter = q.astype(np.int64) & 3
    return np.choose(quarter, (cos, -sin, -cos, sin)).astype(np.float32)


def affine(units: np.ndarray, base: float, scale_from: float, kind: str) -> np.ndarray:
    """base + (scale_from - base) * u (uniform: lo, hi) or base + scale_from * z (normal:
    mean, std), in the dtype of `units`; each operation rounds (no fused multiply-add)."""
    t = units.dtype.type
    scale = t(scale_from) - t(base) if kind == "uniform" else t(scale_from)
    return t(base) + scale * units


# --- the process generator (ops given no seed and offset) ---------------------------------


class _Generator:
    """(seed, offset) pairs for random ops without rng_seed/rng_offset (see the module doc)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.own_seed: int | None = None
        self.next_offset = 0

    def manual_seed(self, seed: int) -> None:
        with self.lock:
            self.own_seed, self.next_offset = as_u64(seed), 0

    def draw(self, count: int) -> list[tuple[int, int]]:
        torch = sys.modules.get("torch")
        with self.lock:
            if self.own_seed is None and torch is not None:
                seed, first = _torch_state(torch, count)
            else:
                if self.own_seed is None:
                    self.own_seed = int(np.random.default_rng().integers(0, 2**64, dtype=np.uint64))  # from the OS
                seed, first = self.own_seed, self.next_offset
                self.next_offset += count
        return [(as_u64(seed), as_u64(first + k)) for k in range(count)]


def _torch_state(torch, count: int) -> tuple[int, int]:
    """(seed, first offset) of an execution from torch's default generators (see the module doc)."""
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        try:
            generator = cuda.default_generators[cuda.current_device()]
            offset = generator.get_offset()
            generator.set_offset(offset + 4 * count)  # nvFuser: 4 per op, its offset is offset // 4 + k
            return generator.initial_seed(), offset // 4
        except (AttributeError, RuntimeError, IndexError):
            pass  # a torch without Philox offsets: the CPU generator's way below
    # The CPU generator (Mersenne Twister) has no Philox offset: one draw from it starts the execution.
    return torch.initial_seed(), int(torch.randint(0, 2**62, (1,), dtype=torch.int64))


GENERATOR = _Generator()
_execution = threading.local()


def manual_seed(seed: int) -> None:
    """Gives unseeded random ops fuser's own generator, seeded with `seed` at offset 0 (from
    then on torch's generators are no longer used)."""
    GENERATOR.manual_seed(seed)


def draw_states(count: int) -> list[tuple[int, int]]:
    """The (seed, offset) pairs of one execution's `count` unseeded random ops, in program order."""
    return GENERATOR.draw(count) if count else []


class execution_states:
    """`with execution_states(count):` draws one execution's pairs at once (as a kernel backend
    does); `next_state()` inside hands them out in program order."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __enter__(self) -> None:
        _execution.pending = draw_states(self.count)[::-1]

    def __exit__(self, *exc) -> None:
        _execution.pending = None


def next_state() -> tuple[int, int]:
    """The next op's pair of the current execution (a fresh draw outside `execution_states`)."""
    pending = getattr(_execution, "pending", None)
    return pending.pop() if pending else draw_states(1)[0]
