"""The plans of :class:`~dpdist.algorithms.sparse_pca.estimator.SpectralNorm` and
:class:`~dpdist.algorithms.sparse_pca.estimator.SparsePCA`: noise, private tests, centring and
the utility bound at a size, from public values only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdist.algorithms._centering import check_centering, mean_mechanism, mean_offset_bounds
from dpdist.algorithms.friendly_steps import FriendlySetup
from dpdist.algorithms._friendly_forecast import (
    REJECTION_LEVEL,
    BatchForecast,
    count_pass_probability,
    weight_pass_probability,
)
from dpdist.exceptions import ValidationError
from dpdist.algorithms._utility import search_min_samples
from dpdist.privacy.mechanisms.privpca.calibration import (
    DEFAULT_BETA,
    FriendlyTestCalibration,
    GaussianReleaseCalibration,
)
from dpdist.algorithms.plan import Plan


def _plan_tests(setup: FriendlySetup, cal: FriendlyTestCalibration, q=None, forecast: BatchForecast | None = None) -> dict:
    """The two private tests at this size: their noise, thresholds, the margin a run whose
    batches are all good would have on the Z test, and, given the forecast (``q`` the
    probability that one batch is good, ``forecast`` the batch statistics of the reference
    instance), the probability that each passes and that both do."""
    m = setup.n_batches
    margin_all_good = m - cal.weight_threshold  # Z = m when every batch befriends every other
    out = {
        "count_test": {"scale": cal.count_scale, "bound": cal.count_bound, "threshold": cal.count_threshold},
        "weight_test": {"scale": cal.weight_scale, "bound": cal.weight_bound, "threshold": cal.weight_threshold},
        "weight_test_margin_if_all_good": margin_all_good,
        "weight_test_margin_in_noise_scales": margin_all_good / cal.weight_scale,
        "tests_can_pass": bool(margin_all_good > 0),
    }
    if forecast is not None:
        z_mean, z_sd = forecast.z_moments(m)

        def p_count(qq):
            qq = np.clip(qq, 0.0, 1.0)
            return float(np.mean(count_pass_probability(qq, m, cal.count_threshold, cal.count_scale, cal.count_bound)))

        p_weight = weight_pass_probability(z_mean, z_sd, cal.weight_threshold, cal.weight_scale, cal.weight_bound)
        q = np.asarray(q, dtype=np.float64)
        se = forecast.standard_error(q)
        lo, hi = p_count(q - 2 * se), p_count(q + 2 * se)
        out.update({
            "good_batch_probability": float(np.mean(q)),
            "expected_good_batches": float(m * np.mean(q)),
            "expected_weight_sum": z_mean,
            "count_test_pass_probability": p_count(q),
            "count_test_pass_probability_range": [lo, hi],
            "weight_test_pass_probability": p_weight,
            "pass_probability": p_count(q) * p_weight,
            "pass_probability_range": [lo * p_weight, hi * p_weight],
        })
    return out


def _tests_unmet(tests: dict, name: str) -> tuple:
    if not tests["tests_can_pass"]:
        return (f"{name}'s friend-weight test cannot pass even when every batch is good (margin "
                f"{tests['weight_test_margin_if_all_good']:.3g} <= 0): the fit raises NoPrivateResult",)
    p = tests.get("pass_probability")
    if p is not None and p < REJECTION_LEVEL:
        return (f"{name}'s private tests are predicted to pass with probability {p:.3g} (good-set count test "
                f"{tests['count_test_pass_probability']:.3g}: {tests['expected_good_batches']:.4g} good batches "
                f"expected of {tests['count_test']['threshold'] - tests['count_test']['bound']:.4g} needed; "
                f"friend-weight test {tests['weight_test_pass_probability']:.3g}) on the model's reference "
                "instance: the fit would most likely raise NoPrivateResult and spend its budget",)
    return ()


def _plan_centring(est, setup: FriendlySetup, mean_share, lambda_1: float) -> tuple[dict, tuple, bool]:
    """The plan's centring fields, its unmet condition (if any), and whether the mean is private.

    ``mean_offset_bound`` bounds ``||w||_2``, ``w = mu - mu_hat``
    (:func:`~dpdist.algorithms._centering.mean_offset_bounds`, at beta). The plans apply the
    algorithms' bounds to the centred rows' second moment ``Sigma + w w^T``; they name it an
    unmet condition when that matrix may leave the model: ``||w||^2 > gap lambda_1 / 10``
    (Weyl then no longer keeps its relative eigengap above 0.8 gap) or a squared entry of ``w``
    above tau (``w w^T``'s entries off Sigma's pattern could then survive the threshold).
    """
    centering = check_centering(est.assume_centered, est.mean, est.mean_fraction, est.mean_clip,
                                n_features=setup.n_features)
    mech = (mean_mechanism(centering, mean_share, setup.n_samples, setup.n_features, setup.float_bounds.entry_clip)
            if centering.private else None)
    w_inf, w_2 = mean_offset_bounds(centering, mech, setup.sigma, setup.n_samples, setup.n_features, setup.beta)
    why = []
    if w_2 * w_2 > setup.gap * lambda_1 / 10:
        why.append(f"the bound {w_2 * w_2:.3g} on ||mu - mu_hat||^2 exceeds gap lambda_1 / 10 = "
                   f"{setup.gap * lambda_1 / 10:.3g}")
    if w_inf * w_inf > setup.tau:
        why.append(f"the bound {w_inf * w_inf:.3g} on its largest squared entry exceeds tau = {setup.tau:.3g}")
    unmet: tuple = ()
    if why:
        unmet = (f"centring at the private mean: {' and '.join(why)}, so the centred rows may leave the model the "
                 "bound assumes (more rows, or a public mean, bring mu_hat closer)",)
    fields = {"centering": centering.mode, "mean_offset_bound": w_2,
              "mean_noise_scale": None if mech is None else mech.noise_scales()["gaussian"]}
    return fields, unmet, mech is not None


@dataclass(frozen=True, kw_only=True)
class SpectralNormPlan(Plan):
    """:meth:`SpectralNorm.plan`: a :class:`~dpdist.algorithms.plan.Plan` whose ``noise_scale``
    is the Gaussian sigma on the norm as the release uses and reports it (after the lattice's
    rounding charge; ``sensitivity`` and the error bound use the calibrated sigma, a relative
    difference near 1e-9) and whose ``error_bound`` is Lemma 21's
    ``|lambda_hat - lambda_1| <= 10 k tau + sigma sqrt(2 log(4/beta))`` (when the tests pass).

    **Scale** (vacuity): ``lambda_1``, the norm estimated (``lambda_1`` of :meth:`plan`,
    default ``sigma**2``, the largest value Model 1 allows). Private tests that cannot pass
    even on ideal data are an unmet condition, and so are tests predicted to pass with
    probability below 1/2.

    **Will it release?** ``tests`` holds, besides the tests' noise and thresholds, the
    forecast on the model's reference instance (:mod:`dpdist.algorithms._friendly_forecast`):
    the probability that a batch is good, the good batches and weight sum expected, and the
    probability that the count test, the weight test and both pass (with ``*_range``, the
    forecast's Monte Carlo resolution); ``release_probability`` (and its range) is that of
    returning a result rather than ``NoPrivateResult``. From public parameters only.

    **Centring.** ``centering`` is how the fit centres; with a private mean the calibration is
    at the share ``1 - mean_fraction`` (``privacy`` is the whole budget), ``mean_noise_scale``
    is the mean's noise, and the error bound adds ``mean_offset_bound**2`` (the most the
    rank-one term ``w w^T`` left by centring at ``mu_hat`` raises the top eigenvalue), holding
    then with probability >= 1 - 2 beta.
    """

    n_batches: int
    batch_size: int
    tau: float
    lambda_1_assumed: float
    sensitivity: float
    tests: dict
    threshold_error: float
    noise_error: float
    relative_error_bound: float
    meets_theorem_3_requirement: bool
    release_probability: float | None = None
    release_probability_range: list | None = None
    centering: str = "assume-centered"
    mean_noise_scale: float | None = None
    mean_offset_bound: float = 0.0


@dataclass(frozen=True, kw_only=True)
class SparsePCAPlan(Plan):
    """:meth:`SparsePCA.plan`: a :class:`~dpdist.algorithms.plan.Plan` whose ``noise_scale`` is
    the projector's Gaussian noise as the release uses and reports it (after the lattice's
    rounding charge; ``sigma_priv`` is the calibrated value; with a private ``lambda_hat`` both
    are for the assumed one) and whose ``error_bound`` is the ``sin^2``
    bound of the proof of Theorem 3 (``min(1, 4 E^2)``, when the tests pass).

    **Scale** (vacuity): 1, since ``sin^2 <= 1`` always (a bound of 1 says nothing about the
    direction). Unmet conditions: private tests that cannot pass even on ideal data, and
    PrivNorm's predicted error above ``gap lambda_1 / 10`` (Theorem 3 needs ``lambda_hat``
    within it), and private tests predicted to pass with probability below 1/2.

    **Will it release?** ``norm_tests`` and ``pca_tests`` hold each stage's forecast as in
    :class:`SpectralNormPlan` (PrivPCA's over the law of PrivNorm's ``lambda_hat``, with the
    probability that it is positive, since PrivPCA runs only then); ``release_probability``
    (and its range) is the probability that both stages pass.

    **Centring.** With a private mean every stage is calibrated at the share ``1 -
    mean_fraction`` (``privacy`` is the whole budget); ``sin2_error_bound`` is Theorem 3's bound
    for the centred rows' second moment ``Sigma + w w^T``, ``centring_sin_bound`` bounds the
    angle between its top eigenvector and Sigma's (``min(1, ||w||^2 / (gap lambda_1))``,
    :class:`SparsePCA`'s Notes), and ``error_bound`` is ``min(1, (sqrt(sin2_error_bound) +
    centring_sin_bound)^2)``, holding then with probability >= 1 - 2 beta.
    """

    n_batches: int
    batch_size: int
    tau: float
    lambda_1_assumed: float
    lambda_hat_assumed: float
    sigma_priv: float
    projector_sensitivity: float
    pca_tests: dict
    projector_bias: float
    projector_noise: float
    projector_error_bound: float
    sin2_error_bound: float
    noise_max_entry: float
    support_recoverable: bool
    norm_noise_scale: float | None = None
    norm_error_bound: float | None = None
    norm_within_gap_over_10: bool | None = None
    norm_tests: dict | None = None
    budget_split: dict | None = None
    release_probability: float | None = None
    release_probability_range: list | None = None
    centering: str = "assume-centered"
    mean_noise_scale: float | None = None
    mean_offset_bound: float = 0.0
    centring_sin_bound: float = 0.0


def _min_samples(est, error_at, target: float, *, start: int) -> int:
    """:func:`search_min_samples` for a plan that may centre at a private mean: a size at which
    the mean cannot be computed exactly (its integer sums would overflow) has no bound, and a
    target that no size reaches says why."""
    private = check_centering(**est._centring()).private

    def err(n):
        try:
            return error_at(n)
        except ValidationError as exc:
            if private and "private mean cannot be computed exactly" in str(exc):
                return math.inf
            raise

    try:
        return search_min_samples(err, target, start=start)
    except ValidationError as exc:
        if not private or "not reachable" not in str(exc):
            raise
        raise ValidationError(
            f"{exc} with a private mean: its exact integer sums (below 2**52) coarsen its lattice as n grows, so "
            "its rounding error stops falling, and at a very large n it cannot be computed at all; a public "
            "mean=MEAN or assume_centered=True lifts this") from None


def privnorm_error_bound(cal: GaussianReleaseCalibration, k: int, tau: float, beta: float = DEFAULT_BETA) -> dict:
    """Predicted absolute error of PrivNorm when its tests pass on Model 1 data (Lemma 21).

    ``|lambda_hat - lambda_1| <= 10 k tau + sigma sqrt(2 log(4/beta))``: Lemma 3 bounds the
    thresholding error by 10 k tau given ``||Sigma_bar - Sigma||_max <= 3 tau`` (Lemma 11),
    and the Gaussian tail bounds |g| except with probability beta/4 (Mill's inequality).
    """
    bias = 10.0 * int(k) * float(tau)
    noise = cal.sigma * math.sqrt(2.0 * math.log(4.0 / beta))
    return {"threshold_error": bias, "noise_error": noise, "error_bound": bias + noise}


def privpca_error_bound(
    sigma_priv: float, k: int, tau: float, gap: float, lambda_1: float, n_features: int, beta: float = DEFAULT_BETA
) -> dict:
    """Predicted sin^2 error of PrivPCA on Model 2 data (Lemma 12 and the proof of Theorem 3).

    ``E = 2 sqrt(2) k (20 k tau / (gap lambda_1) + 2 sigma_priv sqrt(log(4 d / beta)))``
    bounds ``||(P~ + P~^T)/2 - P||_op``; Lemma 1 with gap 1 then gives ``sin <= 2 E``, so the
    predicted ``sin^2 <= min(1, 4 E^2)``. Also returns whether the top-k^2 step can find the
    support: the noise maximum ``sigma_priv sqrt(2 log(d^2))`` against the smallest entry of
    ``u u^T`` on a k-sparse unit vector, at best ``1/k``.
    """
    d = int(n_features)
    k = int(k)
    bias = 20.0 * k * float(tau) / (float(gap) * float(lambda_1))
    noise = 2.0 * float(sigma_priv) * math.sqrt(math.log(4.0 * d / beta))
    e = 2.0 * math.sqrt(2.0) * k * (bias + noise)
    noise_max = float(sigma_priv) * math.sqrt(2.0 * math.log(max(d * d, 2)))
    return {
        "projector_bias": bias,
        "projector_noise": noise,
        "projector_error_bound": e,
        "sin2_error_bound": min(1.0, 4.0 * e * e),
        "noise_max_entry": noise_max,
        "support_recoverable": noise_max < 1.0 / k,
    }
