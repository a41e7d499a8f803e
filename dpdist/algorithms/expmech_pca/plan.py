"""The plan of :class:`~dpdist.algorithms.expmech_pca.estimator.ExpMechSparsePCA`: Theorem 7's
error bound for a calibration and the least sample size that meets a target (utility only; the
calibration is :mod:`dpdist.privacy.mechanisms.expmech`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpdist._validation import check_positive, check_probability
from dpdist.algorithms._utility import SAMPLING_CONSTANT, search_min_samples
from dpdist.privacy.mechanisms.expmech import (
    ExpMechCalibration,
    _check_prob,
    expmech_calibration,
    expmech_clip,
)
from dpdist.algorithms.plan import Plan


@dataclass(frozen=True, kw_only=True)
class ExpMechPlan(Plan):
    """:meth:`ExpMechSparsePCA.plan`: a :class:`~dpdist.algorithms.plan.Plan` whose
    ``noise_scale`` is the block's Gaussian sigma (sigma_priv) and whose ``error_bound`` is
    Theorem 7's: with ``eigengap``, the ``sin^2`` bound (scale 1, as ``sin^2 <= 1``); without,
    the Rayleigh deficit ``lambda_1 - v_hat^T Sigma v_hat`` (scale ``sigma**2``, which bounds
    lambda_1 for sigma-sub-Gaussian rows). With ``clip`` only, both use ``sigma = clip``
    (entries clipped to [-clip, clip] are clip-sub-Gaussian). An infeasible enumeration
    (``C(d, k) > max_subsets``) is an unmet condition. With a private mean the calibration
    gives the block ``1 - mean_fraction`` of the Gaussian part (``privacy`` is the whole budget) and ``error`` adds
    ``eta_center`` (k times :func:`~dpdist.algorithms._centering.centring_error`, at beta) to
    the deficit like the sampling term; the bound then holds with probability >= 1 - 2 beta.
    """

    mechanism: str
    k: int
    n_subsets: int
    max_subsets: int
    feasible: bool
    dense_second_moment_bytes: int
    clip: float
    noise_scales: dict
    calibration: ExpMechCalibration
    error: dict
    centering: str = "assume-centered"
    mean_noise_scale: float | None = None


def expmech_error_bound(
    cal: ExpMechCalibration, sigma: float, beta: float, eigengap: float | None = None
) -> dict:
    """The error bound the proof of Theorem 7 gives for a calibration, with its pieces.

    On four events of probability >= 1 - beta/4 each (no entry clipped, given tau >=
    :func:`expmech_clip`; sampling; selection; block noise):

    - ``eta_samp = C sigma^2 (sqrt(t/n) + t/n)``, ``t = k log d + log(4/beta)`` (Lemma 2,
      ``C`` = :data:`~dpdist.algorithms._utility.SAMPLING_CONSTANT`);
    - ``eta_select = (2 Delta_q / (epsilon/2)) (log C(d, k) + log(4/beta))`` (Lemma 28);
    - ``eta_noise = sigma_priv (2 sqrt(k) + sqrt(2 log(4/beta)))`` (Gaussian k x k operator
      norm, Gordon's bound plus Lipschitz concentration; symmetrising does not increase it);

    the Rayleigh deficit ``lambda_1 - v_hat^T Sigma v_hat`` is at most
    ``2 eta_samp + eta_select + 2 eta_noise`` and ``sin^2(v_hat, v_1) <= deficit /
    eigengap`` (Lemma 18), where ``eigengap = lambda_1 - lambda_2`` is absolute.
    ``clipping_ok`` says whether ``clip`` is at least Theorem 7's tau for this sigma.
    """
    return error_bound(cal, sigma, _check_prob(beta), eigengap)


def error_bound(cal: ExpMechCalibration, sigma: float, beta: float, eigengap: float | None = None) -> dict:
    """:func:`expmech_error_bound` for a checked ``beta`` (the estimator's validated value)."""
    n, d, k = cal.n_samples, cal.n_features, cal.k
    t = k * math.log(max(d, 2)) + math.log(4.0 / beta)
    eta_samp = SAMPLING_CONSTANT * float(sigma) ** 2 * (math.sqrt(t / n) + t / n)
    log_range = math.lgamma(d + 1) - math.lgamma(k + 1) - math.lgamma(d - k + 1)
    eta_select = (2.0 * cal.score_sensitivity / cal.selection_epsilon) * (log_range + math.log(4.0 / beta))
    eta_noise = cal.gaussian_sigma * (2.0 * math.sqrt(k) + math.sqrt(2.0 * math.log(4.0 / beta)))
    deficit = 2.0 * eta_samp + eta_select + 2.0 * eta_noise
    out = {
        "beta": beta,
        "eta_samp": eta_samp,
        "eta_select": eta_select,
        "eta_noise": eta_noise,
        "rayleigh_deficit_bound": deficit,
        "clipping_ok": cal.clip >= expmech_clip(sigma, n, d, beta) * (1 - 1e-12),
    }
    if eigengap is not None:
        gap = check_positive(eigengap, "eigengap")
        out["eigengap"] = gap
        out["sin2_bound"] = min(1.0, deficit / gap)
    return out


def expmech_min_samples(
    target_sin2: float,
    epsilon: float,
    delta: float,
    n_features: int,
    k: int,
    *,
    sigma: float,
    eigengap: float,
    beta: float,
    clip: float | None = None,
) -> int:
    """Least n whose :func:`expmech_error_bound` ``sin2_bound`` is <= ``target_sin2``.

    ``clip`` follows :func:`expmech_clip` at each n unless given.
    """
    target = check_probability(target_sin2, "target_sin2")

    def bound(n: int) -> float:
        tau = clip if clip is not None else expmech_clip(sigma, n, n_features, beta)
        cal = expmech_calibration(epsilon, delta, n, n_features, k, tau, beta=beta)
        return expmech_error_bound(cal, sigma, beta, eigengap)["sin2_bound"]

    return search_min_samples(bound, target, start=2, limit=1 << 62)
