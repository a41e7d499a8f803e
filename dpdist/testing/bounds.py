"""The statistics of an audit: Clopper-Pearson bounds and the three lower bounds.

Each function turns bounds on the two error rates of a distinguishing test into a lower bound
on a privacy parameter (epsilon, GDP mu, zCDP rho); :mod:`dpdist.testing.audit` explains the
three notions and runs the tests. Depends on numpy and scipy only.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

__all__ = [
    "N_CANDIDATE_THRESHOLDS",
    "RENYI_ORDERS",
    "clopper_pearson",
    "epsilon_lower_bound",
    "gdp_mu_for_approx_dp",
    "mu_lower_bound",
    "renyi_bernoulli",
    "rho_lower_bound",
]

#: Orders alpha at which :func:`rho_lower_bound` evaluates the Renyi divergence. Any alpha
#: gives a valid bound, so a grid (whose maximum is taken) is as valid as the supremum.
RENYI_ORDERS = np.geomspace(1.0 + 1e-3, 1e3, 400)

#: Number of quantiles of the pooled selection-half statistic tried as thresholds.
N_CANDIDATE_THRESHOLDS = 199


# ---------------------------------------------------------------------------------------
# the statistics: Clopper-Pearson bounds and the three lower bounds
# ---------------------------------------------------------------------------------------


def clopper_pearson(successes: int, trials: int, confidence: float) -> tuple[float, float]:
    """Two-sided Clopper-Pearson (exact binomial) interval for a success probability.

    Parameters
    ----------
    successes : int
        Number of successes k, ``0 <= k <= trials``.
    trials : int
        Number of Bernoulli trials n >= 1.
    confidence : float
        Coverage ``1 - a`` in (0, 1); each side has error probability ``a / 2``.

    Returns
    -------
    (lower, upper) : tuple of float
        ``lower = Beta(a/2; k, n - k + 1)`` quantile (0 when k = 0) and ``upper =
        Beta(1 - a/2; k + 1, n - k)`` quantile (1 when k = n). Each end alone is a one-sided
        bound at level ``1 - a/2``: using the lower end of one rate and the upper end of
        another gives joint coverage >= ``confidence`` by the union bound.

    Examples
    --------
    >>> lo, hi = clopper_pearson(0, 10, 0.9)
    >>> round(hi, 6)  # 1 - 0.05 ** (1 / 10)
    0.258866
    """
    k, n = int(successes), int(trials)
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {k}, {n}")
    _check_confidence(confidence)
    a = 1.0 - float(confidence)
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def _cp_lower(k: np.ndarray, n: int, tail: float) -> np.ndarray:
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = stats.beta.ppf(tail, np.maximum(k, 1), n - k + 1)
    return np.where(k == 0, 0.0, out)


def _cp_upper(k: np.ndarray, n: int, tail: float) -> np.ndarray:
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = stats.beta.ppf(1 - tail, k + 1, np.maximum(n - k, 1))
    return np.where(k == n, 1.0, out)


def epsilon_lower_bound(p0_lower: float, p1_upper: float, delta: float = 0.0) -> float:
    """``max(0, ln((p0_lower - delta) / p1_upper))``: the epsilon that (epsilon, delta)-DP needs.

    ``p0_lower`` bounds from below the probability of the rejection set under D, ``p1_upper``
    bounds from above its probability under D'. Returns 0 when ``p0_lower <= delta``.

    Examples
    --------
    >>> round(epsilon_lower_bound(0.5, 0.1, 0.0), 6)  # ln 5
    1.609438
    """
    p0, p1, delta = np.asarray(p0_lower, float), np.asarray(p1_upper, float), float(delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        val = np.log(np.maximum(p0 - delta, 0.0)) - np.log(p1)
    out = np.where((p0 > delta) & (p1 > 0), np.maximum(val, 0.0), 0.0)
    return float(out) if out.ndim == 0 else out


def mu_lower_bound(p0_lower: float, p1_upper: float) -> float:
    """``max(0, Phi^-1(p0_lower) - Phi^-1(p1_upper))``: the mu that mu-GDP needs.

    Valid for a mechanism that is mu-GDP for some mu (a Gaussian trade-off function), e.g. a
    Gaussian mechanism; not a bound for an arbitrary (epsilon, delta) mechanism.

    Examples
    --------
    >>> round(mu_lower_bound(0.5, 0.15865525393145707), 6)  # Phi(-1)
    1.0
    """
    p0, p1 = np.asarray(p0_lower, float), np.asarray(p1_upper, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        val = special.ndtri(p0) - special.ndtri(p1)
    out = np.where((p0 > 0) & (p1 < 1), np.maximum(np.nan_to_num(val, nan=0.0, posinf=0.0), 0.0), 0.0)
    return float(out) if out.ndim == 0 else out


def renyi_bernoulli(p: float, q: float, alpha: np.ndarray | float) -> np.ndarray | float:
    """Renyi divergence ``D_alpha(Bern(p) || Bern(q))`` (natural log), alpha > 1.

    ``1 / (alpha - 1) * ln(p^alpha q^(1-alpha) + (1-p)^alpha (1-q)^(1-alpha))``, computed in
    log space. Infinite when q is 0 or 1 and p differs from it.

    Examples
    --------
    >>> round(float(renyi_bernoulli(0.5, 0.5, 2.0)), 12)
    0.0
    """
    a = np.asarray(alpha, dtype=np.float64)
    p, q = float(p), float(q)

    def term(x: float, y: float) -> np.ndarray:
        if x == 0.0:
            return np.full(a.shape, -np.inf)
        if y == 0.0:
            return np.full(a.shape, np.inf)
        return a * math.log(x) + (1.0 - a) * math.log(y)

    t1, t2 = term(p, q), term(1.0 - p, 1.0 - q)
    with np.errstate(invalid="ignore"):
        out = np.logaddexp(t1, t2) / (a - 1.0)
    return float(out) if out.ndim == 0 else out


def rho_lower_bound(p0_lower: float, p1_upper: float) -> float:
    """``sup_alpha max(D_alpha(Bern(p0_lower)||Bern(p1_upper)), D_alpha(Bern(p1_upper)||Bern(p0_lower))) / alpha``.

    A valid lower bound on rho for any rho-zCDP mechanism when ``p0_lower > p1_upper`` (0
    otherwise): for Bernoulli laws with ``q < p``, ``D_alpha(Bern(p)||Bern(q))`` increases in
    p and decreases in q, and ``D_alpha(Bern(q)||Bern(p))`` likewise, so replacing the true
    rates by their confidence bounds can only lower the divergence. Evaluated on the grid
    :data:`RENYI_ORDERS` (any order gives a valid bound).

    Examples
    --------
    >>> rho_lower_bound(0.3, 0.4)
    0.0
    """
    p0, p1 = float(p0_lower), float(p1_upper)
    if not p0 > p1:
        return 0.0
    a = RENYI_ORDERS
    best = max(np.max(renyi_bernoulli(p0, p1, a) / a), np.max(renyi_bernoulli(p1, p0, a) / a))
    return float(max(best, 0.0))


def gdp_mu_for_approx_dp(epsilon: float, delta: float) -> float:
    """Largest mu such that the Gaussian mechanism with ``Delta / sigma = mu`` is (epsilon, delta)-DP.

    Uses :func:`dpdist.privacy.mechanisms.gaussian.analytic_gaussian_sigma` (Balle and Wang 2018,
    Theorem 8, exact): ``mu_max = 1 / sigma(Delta=1, epsilon, delta)``.
    """
    from dpdist.privacy.mechanisms.gaussian import analytic_gaussian_sigma

    return 1.0 / analytic_gaussian_sigma(1.0, float(epsilon), float(delta))


def _check_confidence(confidence: float) -> float:
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    return c
