"""The analytic Gaussian mechanism's condition, typed from the paper, for the calibration tests.

Balle & Wang 2018, Theorem 8: a Gaussian mechanism of L2 sensitivity ``D`` and noise ``N(0,
s^2 I)`` is (eps, delta)-DP iff ``Phi(D / (2 s) - eps s / D) - e^eps Phi(-D / (2 s) - eps s /
D) <= delta``. Written here with scipy's normal CDF only, independently of
:mod:`dpdist.privacy.mechanisms.gaussian`, so a test can check a returned sigma against it.
"""

from __future__ import annotations

import math

from scipy import special


def bw_delta(sensitivity: float, epsilon: float, sigma: float) -> float:
    """The smallest delta at which N(0, sigma^2) noise on a ``sensitivity`` query is
    (epsilon, delta)-DP (Theorem 8)."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return float(special.ndtr(a - b) - math.exp(epsilon) * special.ndtr(-a - b))


def assert_smallest_sigma(sigma: float, sensitivity: float, epsilon: float, delta: float) -> None:
    """``sigma`` meets (epsilon, delta) and no sigma smaller by one part in 1e6 does: the
    analytic Gaussian mechanism's sigma, up to the root's tolerance."""
    assert bw_delta(sensitivity, epsilon, sigma) <= delta
    assert bw_delta(sensitivity, epsilon, sigma * (1 - 1e-6)) > delta
