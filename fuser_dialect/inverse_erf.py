"""erfinv and erfcinv for the reference interpreter (numpy and the math module have neither).

An initial estimate (M. Giles, "Approximating the erfinv function", GPU Computing Gems, 2010:
a polynomial in w = -log(1 - y^2)) refined by Newton's method on erf (on log erfc for the tails
of erfcinv, where erfc itself underflows long before its root does), in double precision: the
root to about one unit in the last place of a double. The cpu backend's emulation computes the
same steps in C (lowering/runtime/fuser_cpu_emu.h); the GPU uses CUDA's erfinv/erfcinv."""

from __future__ import annotations

import math

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
            -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
         -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
NEWTON_STEPS = 3


def _estimate(y: float) -> float:
    """Giles' single-precision approximation of erfinv(y), |y| < 1."""
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 5.0:
        w, coefficients = w - 2.5, _CENTRAL
    else:
        w, coefficients = math.sqrt(w) - 3.0, _TAIL
    p = 0.0
    for c in coefficients:
        p = c + p * w
    return p * y


def erfinv(y: float) -> float:
    """x with erf(x) = y: NaN outside [-1, 1] and for NaN, +-inf at +-1, y itself at +-0."""
    if math.isnan(y) or abs(y) > 1.0:
        return math.nan
    if abs(y) == 1.0:
        return math.copysign(math.inf, y)
    if y == 0.0:
        return y
    x = _estimate(y)
    for _ in range(NEWTON_STEPS):
        x -= (math.erf(x) - y) / (_TWO_OVER_SQRT_PI * math.exp(-x * x))
    return x


def erfcinv(y: float) -> float:
    """x with erfc(x) = y: NaN outside [0, 2] and for NaN, +inf at 0, -inf at 2."""
    if math.isnan(y) or y < 0.0 or y > 2.0:
        return math.nan
    if y == 0.0:
        return math.inf
    if y == 2.0:
        return -math.inf
    if y > 1.0:
        return -erfcinv(2.0 - y)
    if y >= 0.0625:  # 1 - y is exact enough here: start from erfinv, refine on erfc
        x = _estimate(1.0 - y)
        for _ in range(NEWTON_STEPS):
            x -= (math.erfc(x) - y) / (-_TWO_OVER_SQRT_PI * math.exp(-x * x))
        return x
    # The tail: Newton on log(erfc(x)) = log(y), from the asymptote erfc(x) ~ exp(-x^2)/(x sqrt(pi)).
    log_y = math.log(y)
    x = math.sqrt(-log_y)
    x = math.sqrt(max(-log_y - math.log(x * math.sqrt(math.pi)), 0.25))
    for _ in range(2 * NEWTON_STEPS):
        tail = math.erfc(x)
        if tail == 0.0:
            break
        x -= (math.log(tail) - log_y) / (-_TWO_OVER_SQRT_PI * math.exp(-x * x) / tail)
    return x


__all__ = ["erfcinv", "erfinv"]
