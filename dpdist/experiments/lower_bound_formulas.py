"""The lower bounds of the COLT 2026 paper as formulas: the value each theorem predicts at a
given n, d, k and privacy (Theorems 2 and 6 with their unspecified constants set to 1, Theorems
4 and 5 as certified bounds).
"""

from __future__ import annotations

import math

from scipy import optimize

from dpdist.exceptions import ValidationError

__all__ = ["theorem2_alpha", "theorem4_success_bound", "theorem5_risk_bound", "theorem6_n"]


# ----------------------------------------------------------------------------- the bounds


def theorem2_alpha(n: float, d: int, k: int, epsilon: float) -> float:
    """The alpha at which Theorem 2's sample complexity equals n, constants 1:
    ``n = k^2 / alpha^2 + k sqrt(d) / (alpha epsilon log(d / alpha))`` (the branch
    ``sqrt(d) exp(alpha_0 k) / epsilon`` of the minimum dropped: alpha_0 is unspecified)."""
    n, d, k, epsilon = float(n), float(d), float(k), float(epsilon)
    if not (n > 0 and d > 1 and k >= 1 and epsilon > 0):
        raise ValidationError("theorem2_alpha needs n > 0, d > 1, k >= 1, epsilon > 0")

    def excess(log_alpha: float) -> float:
        a = math.exp(log_alpha)
        return math.log(k * k / (a * a) + k * math.sqrt(d) / (a * epsilon * math.log(d / a))) - math.log(n)

    hi = math.log(d / math.e)  # the sample complexity decreases in alpha up to d / e
    if excess(hi) > 0:
        return d / math.e
    return float(math.exp(optimize.brentq(excess, -60.0, hi, xtol=1e-12)))


def theorem4_success_bound(n: int, m: int, epsilon: float, delta: float) -> float:
    """The most an (epsilon, delta)-DP algorithm on n rows can reach, averaged over m
    distributions indexed by a uniform codeword, as the probability of naming the codeword.

    Theorem 4's packing argument (Proposition 2 with alpha = 1), written out: any two samples of
    n rows differ in at most n rows, so by group privacy ``P[A(X_j) = i] >= e^{-n eps} (P[A(X_i)
    = i] - delta_n)``, ``delta_n = delta (e^{n eps} - 1) / (e^eps - 1)``. Summing over ``i != j``
    and averaging over j gives ``1 - p >= (m - 1) e^{-n eps} (p - delta_n)`` for the average
    success p, i.e. ``p <= (1 + (m - 1) e^{-n eps} delta_n) / (1 + (m - 1) e^{-n eps})``. With
    ``delta = 0`` (the theorem's pure DP) this is ``1 / (1 + (m - 1) e^{-n eps})``.
    """
    n, m, epsilon, delta = int(n), int(m), float(epsilon), float(delta)
    if n < 1 or m < 2 or not epsilon > 0 or not 0 <= delta < 1:
        raise ValidationError("theorem4_success_bound needs n >= 1, m >= 2, epsilon > 0, 0 <= delta < 1")
    w = (m - 1) * math.exp(-n * epsilon)
    w_delta = (m - 1) * delta * -math.expm1(-n * epsilon) / math.expm1(epsilon)  # (m-1) e^{-n eps} delta_n
    return min(1.0, (1.0 + w_delta) / (1.0 + w))


def theorem5_risk_bound(n: int, d: int, epsilon: float, delta: float) -> float:
    """Proposition 4 on Theorem 5's family: every (epsilon, delta)-DP algorithm on n rows has
    mean ``sin^2`` (over a uniform member of the family, the data and its coins) at least
    ``(1/8) (0.9 exp(-20 eps n / d) - 20 n delta / d)`` (0 when that is negative)."""
    n, d, epsilon, delta = float(n), float(d), float(epsilon), float(delta)
    return max(0.0, (0.9 * math.exp(-20.0 * epsilon * n / d) - 20.0 * n * delta / d) / 8.0)


def theorem6_n(d: int, epsilon: float) -> float:
    """Theorem 6's ``Omega(d / epsilon)`` with constant 1 (the paper leaves it unspecified)."""
    return float(d) / float(epsilon)
