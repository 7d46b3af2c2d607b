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
  never fused), then rounded to f16/bf16 — which may round up to hi.
- uniform f64: subsequence i // 2, words 2(i % 2) and 2(i % 2) + 1 give 53 bits; the same
  formula in f64.
- normal (Box-Muller, cosine branch): f32/f16/bf16 subsequence i // 2, words 2(i % 2) and
  2(i % 2) + 1 give u1, u2 as above (f32); f64 subsequence i, words (0, 1) and (2, 3) give
  53-bit u1, u2. z = sqrt(-2 log(1 - u1)) cos(2 pi u2) (1 - u1 is in (0, 1]: no log(0)),
  value = mean + std * z. libm and numpy may differ by an ulp here.

Without a seed and offset, a random op draws both once per execution (`draw_states`; one
pair per unseeded op, in program order, on every backend alike), so successive executions
differ. They come from torch's default generator when torch is loaded (as torch's own random
ops, they advance it, and after `torch.manual_seed(s)` a run repeats), else — or once
`manual_seed` was called — from fuser's own numpy generator, seeded from the OS at first use.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

_MASK32 = np.uint64(0xFFFFFFFF)
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
ROUNDS = 10

TWO_PI_F32 = np.float32(6.2831853071795864769)
TWO_PI_F64 = np.float64(6.2831853071795864769)


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
        u1, u2, two_pi, one = _unit_f64(w[0], w[1]), _unit_f64(w[2], w[3]), TWO_PI_F64, np.float64(1)
    else:
        words = philox4x32(seed, offset, i >> np.uint64(1))
        pair = (i & np.uint64(1)).astype(np.intp) * 2
        u1, u2 = _unit_f32(_pick(words, pair)), _unit_f32(_pick(words, pair + 1))
        two_pi, one = TWO_PI_F32, np.float32(1)
    radius = np.sqrt(-2 * np.log(one - u1)).astype(u1.dtype)
    return radius * np.cos(two_pi * u2)


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
        self.own: np.random.Generator | None = None

    def manual_seed(self, seed: int) -> None:
        with self.lock:
            self.own = np.random.default_rng(as_u64(seed))

    def draw(self, count: int) -> list[tuple[int, int]]:
        torch = sys.modules.get("torch")
        with self.lock:
            if self.own is None and torch is not None:
                pairs = torch.randint(-(2**63), 2**63 - 1, (count, 2), dtype=torch.int64).tolist()
            else:
                if self.own is None:
                    self.own = np.random.default_rng()  # seeded from the OS
                pairs = self.own.integers(0, 2**64, (count, 2), dtype=np.uint64).tolist()
        return [(as_u64(seed), as_u64(offset)) for seed, offset in pairs]


GENERATOR = _Generator()


def manual_seed(seed: int) -> None:
    """Gives unseeded random ops fuser's own generator, seeded with `seed` (from then on
    torch's generator is no longer used)."""
    GENERATOR.manual_seed(seed)


def draw_states(count: int) -> list[tuple[int, int]]:
    """`count` fresh (seed, offset) pairs: one per unseeded random op of an execution."""
    return GENERATOR.draw(count) if count else []
