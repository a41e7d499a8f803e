"""Utility bounds that several estimators' plans share: the sampling constant, operator-norm
bounds of sampling and of symmetric Gaussian noise, the Davis-Kahan ``sin^2`` bound, and the
search for the least sample size at which a predicted error meets a target.

Utility only: nothing here enters a noise scale.
"""

from __future__ import annotations

import math

from dpdist._validation import check_positive, check_probability
from dpdist.exceptions import ValidationError

__all__ = [
    "SAMPLING_CONSTANT",
    "davis_kahan_sin2",
    "sampling_operator_error",
    "search_min_samples",
    "symmetric_gaussian_operator_bound",
]

#: Constant C of Fact 1 (Wainwright 2019, Lemma 6.26) used by the *utility* bounds of
#: ``plan()``. The paper leaves it unspecified; 4 is our documented choice (Bernstein's
#: inequality for products of two N(0, sigma^2) coordinates gives a constant below 4 with the
#: paper's log(6d/beta) union term for d >= 2). It never enters a noise scale.
SAMPLING_CONSTANT = 4.0


def _check_prob(beta: float, name: str = "beta") -> float:
    return check_probability(beta, name)


def search_min_samples(error_at, target: float, *, start: int = 40, limit: int = 10**40) -> int:
    """Least n with ``error_at(n) <= target`` for a non-increasing ``error_at`` (doubling,
    then bisection to 0.1% relative precision). Raises ValidationError when unreachable."""
    target = check_positive(target, "target error")
    lo, hi = start // 2, start
    while error_at(hi) > target:
        lo, hi = hi, hi * 2
        if hi > limit:
            raise ValidationError(f"target error {target} is not reachable at any sample size")
    while hi - lo > max(1, lo // 1000):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if error_at(mid) <= target else (mid, hi)
    return int(hi)


def symmetric_gaussian_operator_bound(entry_sigma: float, n_features: int, beta: float) -> float:
    """``||E||_op`` bound for a symmetric d x d matrix with i.i.d. N(0, s^2) upper triangle.

    With probability >= 1 - beta, ``||E||_op <= s (3 sqrt(d) + 14.2 sqrt(log d) + 2 sqrt(log(1/beta)))``:
    the mean bound of Bandeira and van Handel (2016, Theorem 1.1, with their epsilon = 1/2:
    ``1.5 (2 s sqrt(d) + 6 s sqrt(log d) / sqrt(log 1.5))``) plus Gaussian concentration
    (``||E||_op`` is ``sqrt(2) s``-Lipschitz in the upper-triangle standard normals).
    Utility only (``plan()``); never enters a noise scale.
    """
    beta = _check_prob(beta)
    d = int(n_features)
    s = float(entry_sigma)
    mean = 1.5 * (2.0 * math.sqrt(d) + 6.0 * math.sqrt(math.log(max(d, 2))) / math.sqrt(math.log(1.5)))
    return s * (mean + 2.0 * math.sqrt(math.log(1.0 / beta)))


def sampling_operator_error(sigma: float, n_samples: int, s: int, n_features: int, beta: float) -> float:
    """Lemma 2: ``C sigma^2 (sqrt(t/n) + t/n)``, ``t = s log d + log(1/beta)``, the operator-norm
    sampling error of every s x s principal block at once (s = d: the whole matrix).
    ``C`` = :data:`SAMPLING_CONSTANT`. Utility only."""
    beta = _check_prob(beta)
    n, d = int(n_samples), int(n_features)
    t = int(s) * math.log(max(d, 2)) + math.log(1.0 / beta)
    return SAMPLING_CONSTANT * float(sigma) ** 2 * (math.sqrt(t / n) + t / n)


def davis_kahan_sin2(operator_error: float, eigengap: float) -> float:
    """``min(1, (2 ||E||_op / eigengap)^2)``: the Davis-Kahan bound (Yu, Wang and Samworth
    2015, Corollary 1) on ``sin^2`` between the top eigenvectors of ``A`` and ``A + E``."""
    gap = check_positive(eigengap, "eigengap")
    return min(1.0, (2.0 * float(operator_error) / gap) ** 2)
