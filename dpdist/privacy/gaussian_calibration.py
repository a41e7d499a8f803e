"""Gaussian mechanism calibration: the noise scale for an L2 sensitivity at (epsilon, delta), and
the Wang-Xu release of the whole entry-clipped second moment that uses it.

Each function implements one formula of a paper and cites it. Nothing here sees data.
"""

from __future__ import annotations

import math

from scipy import optimize

from dpdist._validation import check_int, check_positive
from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import gaussian_profile_delta
from dpdist.privacy.budget import check_delta, check_epsilon
from dpdist.privacy.float_rounding import float_sensitivity

__all__ = [
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "gaussian_mu",
    "gaussian_sigma",
    "wang_xu_calibration",
]


def classic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Classic Gaussian mechanism (DR14 Theorem A.1): sigma = Delta sqrt(2 ln(1.25/delta)) / eps.

    Valid for eps < 1 only.
    """
    if not epsilon < 1:
        raise ValidationError("the classic Gaussian mechanism needs epsilon < 1")
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest sigma of the analytic Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    ``delta(sigma) = Phi(D/(2 s) - eps s / D) - e^eps Phi(-D/(2 s) - eps s / D)`` is
    decreasing in s; we return the s where it equals ``delta`` (found by bracketing root
    search, then nudged up by one part in 1e9 so the inequality holds after rounding; for a
    small mu and epsilon, delta is evaluated without cancellation,
    :func:`~dpdist.privacy.accounting.gaussian_profile_delta`). Exact (necessary and
    sufficient) for every eps > 0.
    """

    def excess(s: float) -> float:
        a = sensitivity / (2 * s)
        b = epsilon * s / sensitivity
        return gaussian_profile_delta(sensitivity / s, epsilon, a - b, -a - b) - delta

    lo, hi = 1e-12 * sensitivity, sensitivity
    while excess(hi) > 0:
        hi *= 2
    s = optimize.brentq(excess, lo, hi, xtol=1e-15 * sensitivity, rtol=1e-14)
    return s * (1 + 1e-9)


def gaussian_mu(epsilon: float, delta: float) -> float:
    """The largest mu such that mu-GDP implies (epsilon, delta)-DP: ``1 / sigma`` of the analytic
    Gaussian mechanism at sensitivity 1 (mu-GDP is exactly the profile of the Gaussian mechanism
    with noise multiplier 1/mu; Dong, Roth and Su 2019, Corollary 2.13). Gaussian stages that
    compose in GDP share ``mu^2``."""
    return 1.0 / analytic_gaussian_sigma(1.0, check_epsilon(epsilon), check_delta(delta))


def gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> tuple[float, str]:
    """Gaussian noise scale for an L2 ``sensitivity`` at (eps, delta), for every eps > 0: the
    analytic Gaussian mechanism (:func:`analytic_gaussian_sigma`). Its condition on sigma is
    necessary and sufficient for one Gaussian mechanism to be (eps, delta)-DP, so no other
    calibration of a single Gaussian release (the classic formula, a zCDP conversion) is
    smaller; at delta = 1e-6 it is 24% below the classic formula at eps = 0.5 and 31% below
    at eps = 0.1.
    Returns (sigma, rule)."""
    return analytic_gaussian_sigma(sensitivity, epsilon, delta), "analytic (Balle-Wang 2018)"


def wang_xu_calibration(
    epsilon: float, delta: float, n_samples: int, n_features: int, clip: float
) -> dict:
    """Wang-Xu 2021 style release of the whole entry-clipped second moment.

    Rows y with entries in [-R, R] have ``||y y^T||_F <= R^2 d``; replacing one row moves
    (1/n) sum y y^T by at most ``2 R^2 d / n`` in Frobenius norm, which bounds the L2
    sensitivity of the released upper triangle (diagonal included). Symmetric Gaussian noise
    of scale :func:`gaussian_sigma` on that triangle is (eps, delta)-DP.

    The noise is calibrated for ``kappa(n)`` times that sensitivity, which bounds the
    computed matrix (:func:`gram_rounding_factor`: terms ``|y_i| |y_i|^T`` of Frobenius norm
    ``||y_i||^2 <= R^2 d = B``).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    clip = check_positive(clip, "clip")
    n = check_int(n_samples, "n_samples", low=1)
    d = check_int(n_features, "n_features", low=1)
    sens = 2 * clip**2 * d / n
    sens_fl, kappa = float_sensitivity(sens, n)
    sigma, rule = gaussian_sigma(sens_fl, epsilon, delta)
    return {"sensitivity": sens, "float_factor": kappa, "gaussian_sigma": sigma, "rule": rule}
