"""PrivCov's operator-norm error bounds and the least sample size that meets a target.

Utility only: these predict what a release is worth (``plan()``, ``min_samples()`` and the
release's utility record) and never enter a noise scale. The calibrations they read are
:mod:`dpdist.privacy.mechanisms.privcov.calibration` (selection ``"paper"``) and
:mod:`dpdist.privacy.mechanisms.privcov.zcdp_calibration` (``"laplace"`` and ``"gumbel"``).
"""

from __future__ import annotations

import math

from dpdist._validation import check_positive
from dpdist.algorithms._utility import SAMPLING_CONSTANT, search_min_samples
from dpdist.privacy.mechanisms.privcov.calibration import (
    PrivCovCalibration,
    privcov_calibration,
    subgaussian_clip,
)
from dpdist.privacy.mechanisms.privcov.zcdp_calibration import (
    PrivCovGumbelCalibration,
    PrivCovZCDPCalibration,
    _privcov_gumbel_logs,
    _privcov_zcdp_logs,
)

__all__ = ["privcov_error_bound", "privcov_gumbel_error_bound", "privcov_min_samples", "privcov_zcdp_error_bound"]


def _sampling_lambda(sigma: float, n: int, d: int, beta: float) -> float:
    """Theorem 1's ``lambda_samp = C sigma^2 (sqrt(log(6d/beta)/n) + log(6d/beta)/n)``: every
    entry of the sample second moment within it of Sigma, but with probability beta/3."""
    t = math.log(6 * d / beta)
    return SAMPLING_CONSTANT * sigma**2 * (math.sqrt(t / n) + t / n)


def privcov_error_bound(cal: PrivCovCalibration, sigma: float, beta: float) -> dict:
    """Theorem 1's operator-norm error bound for a calibration, with its pieces.

    From the proof of Theorem 1, equation (4): with probability >= 1 - beta (when no entry is
    clipped), ``||M - Sigma||_op <= 6 k lambda`` with ``lambda = lambda_samp + lambda_priv``,
    ``lambda_samp = C sigma^2 (sqrt(log(6d/beta)/n) + log(6d/beta)/n)`` (C =
    :data:`SAMPLING_CONSTANT`) and ``lambda_priv = b log(12 d^2 / beta)``.
    """
    n, d, k = cal.n_samples, cal.n_features, cal.k
    lam_samp = _sampling_lambda(sigma, n, d, beta)
    lam_priv = cal.laplace_scale * math.log(12 * d**2 / beta)
    lam = lam_samp + lam_priv
    return {
        "lambda_samp": lam_samp,
        "lambda_priv": lam_priv,
        "lambda": lam,
        "error_bound": 6 * k * lam,
        "relative_error_bound": 6 * k * lam / sigma**2,
    }


def privcov_min_samples(
    target_error: float,
    epsilon: float,
    delta: float,
    n_features: int,
    k: int,
    *,
    sigma: float,
    beta: float,
    clip: float | None = None,
) -> int:
    """Least n for which :func:`privcov_error_bound` is <= ``target_error`` (an absolute
    operator-norm error; divide by sigma^2 for Problem 1's alpha). The clip level follows
    :func:`subgaussian_clip` at each n unless ``clip`` is fixed."""
    target_error = check_positive(target_error, "target_error")

    def bound(n: int) -> float:
        r = clip if clip is not None else subgaussian_clip(sigma, n, n_features, beta)
        cal = privcov_calibration(epsilon, delta, n, n_features, k, r)
        return privcov_error_bound(cal, sigma, beta)["error_bound"]

    return search_min_samples(bound, target_error, start=4, limit=1 << 62)


def privcov_zcdp_error_bound(cal: PrivCovZCDPCalibration, sigma: float, beta: float) -> dict:
    """Operator-norm error bound of PrivCov with the zCDP calibration, with its pieces.

    With probability >= 1 - beta, when no entry is clipped::

        ||M - Sigma||_op <= 6 k (lambda_samp + lambda_priv) + lambda_release
        lambda_samp    = C sigma^2 (sqrt(log(6d/beta)/n) + log(6d/beta)/n)      (as Theorem 1)
        lambda_priv    = b log(6 d^2 / beta)                  (every selection noise, k < d)
        lambda_release = sigma_rel sqrt((k + 2) log(12 d / beta))

    Proof (Theorem 1's, with the release noise kept apart; docs/privacy/privcov.md): the
    events "no clipping" and "every entry of Sigma_hat within lambda_samp" fail with
    probability beta/3 each (Theorem 1), "every one of the d^2 selection noises within
    lambda_priv" with at most ``d^2 e^{-lambda_priv / b} = beta/6``. On them, an entry with
    ``|Sigma_ij| > 2 (lambda_samp + lambda_priv)`` beats every zero entry of its row, so it is
    selected (Theorem 1's (7)). Write ``M - Sigma = Z + E``: Z holds the release noise of M
    (``(z_ij + z_ji) / 2`` on each mutually selected pair, ``z_ii`` on the diagonal), E the
    rest. E has at most 3k non-zero entries a row (M is (k+1)-RCS, Sigma k-RCS), each at most
    ``2 (lambda_samp + lambda_priv)`` (unselected entries by (7), released ones within
    lambda_samp), so ``||E||_op <= 6 k (lambda_samp + lambda_priv)``. Given the selection
    (independent of the release noise), Z is a symmetric Gaussian series whose variance
    ``||sum A^2||`` is at most ``sigma_rel^2 (1 + k / 2)`` (a diagonal entry of variance
    sigma_rel^2 and at most k pairs of variance sigma_rel^2 / 2 a row), so ``||Z||_op <=
    lambda_release`` but with probability ``2 d e^{-lambda_release^2 / (2 sigma_rel^2 (1 +
    k/2))} = beta/6`` (Tropp 2012, Theorem 4.1.1). The lattice's rounding (at most
    ``2**-28`` of the noise scales) is left out, as in Theorem 1's bound.
    """
    n, d, k = cal.n_samples, cal.n_features, cal.k
    log_sel, log_rel = _privcov_zcdp_logs(d, beta)
    lam_samp = _sampling_lambda(sigma, n, d, beta)
    lam_priv = cal.laplace_scale * log_sel if cal.selection_coefficient else 0.0
    lam_rel = cal.gaussian_sigma * math.sqrt((k + 2) * log_rel)
    err = 6 * k * (lam_samp + lam_priv) + lam_rel
    return {
        "lambda_samp": lam_samp,
        "lambda_priv": lam_priv,
        "lambda_release": lam_rel,
        "lambda": lam_samp + lam_priv,
        "error_bound": err,
        "relative_error_bound": err / sigma**2,
    }


def privcov_gumbel_error_bound(cal: PrivCovGumbelCalibration, sigma: float, beta: float) -> dict:
    """Operator-norm error bound of PrivCov with Gumbel selection, with its pieces.

    With probability >= 1 - beta, when no entry is clipped::

        ||M - Sigma||_op <= 6 k (lambda_samp + lambda_priv) + lambda_release
        lambda_samp    = C sigma^2 (sqrt(log(6d/beta)/n) + log(6d/beta)/n)      (as Theorem 1)
        lambda_priv    = beta_g (t_up + t_low) / 2                               (0 when k = d)
        t_up = log(12 d^2 / beta),  t_low = log(t_up)
        lambda_release = sigma_rel sqrt((k + 2) log(12 d / beta))

    Proof (docs/privacy/privcov.md): as :func:`privcov_zcdp_error_bound`'s, with the
    selection event "every Gumbel ``G_ij`` lies in ``[-t_low, t_up]``", which fails with
    probability at most ``d^2 e^-t_up + d^2 exp(-e^t_low) = beta/6`` (``P(G > t) <= e^-t``,
    ``P(G < -t) = exp(-e^t)``). On it, an entry with ``|Sigma_ij| > 2 lambda_samp + beta_g
    (t_up + t_low)`` has key (in data units) ``|S_ij| + beta_g G_ij > lambda_samp + beta_g
    t_up``, above the key of every zero entry of its row; at most k - 1 other entries of the
    row are non-zero, so it is selected, and every unselected entry is at most ``2
    (lambda_samp + lambda_priv)``. The rest is unchanged (E with at most 3k non-zero entries a
    row, the matrix Gaussian series for the release noise).
    """
    n, d, k = cal.n_samples, cal.n_features, cal.k
    t_sel, log_rel = _privcov_gumbel_logs(d, beta)
    lam_samp = _sampling_lambda(sigma, n, d, beta)
    lam_priv = cal.gumbel_scale * t_sel / 2.0 if cal.selection_steps else 0.0
    lam_rel = cal.gaussian_sigma * math.sqrt((k + 2) * log_rel)
    err = 6 * k * (lam_samp + lam_priv) + lam_rel
    return {
        "lambda_samp": lam_samp,
        "lambda_priv": lam_priv,
        "lambda_release": lam_rel,
        "lambda": lam_samp + lam_priv,
        "error_bound": err,
        "relative_error_bound": err / sigma**2,
    }
