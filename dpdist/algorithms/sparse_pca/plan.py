"""The plans of :class:`~dpdist.algorithms.sparse_pca.estimator.SpectralNorm` and
:class:`~dpdist.algorithms.sparse_pca.estimator.SparsePCA`: noise, private tests, centring and
the utility bound at a size, from public values only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdist.algorithms._centering import mean_offset_bounds
from dpdist.algorithms.friendly_steps import FriendlySetup
from dpdist._validation import check_positive
from dpdist.algorithms._friendly_forecast import (
    REJECTION_LEVEL,
    BatchForecast,
    batch_forecast,
    count_pass_probability,
    lambda_hat_points,
    weight_pass_probability,
)
from dpdist.exceptions import ValidationError
from dpdist.algorithms._utility import search_min_samples
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.mechanisms.privpca.mechanism import PrivNormMechanism, PrivPCAMechanism
from dpdist.privacy.mechanisms.privpca.calibration import (
    DEFAULT_BETA,
    FriendlyTestCalibration,
    GaussianReleaseCalibration,
    friendly_test_calibration,
    privnorm_calibration,
    privpca_calibration,
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


def _plan_centring(p, lambda_1: float) -> tuple[dict, tuple, bool]:
    """The plan's centring fields, its unmet condition (if any), and whether the mean is private.

    ``p`` holds the validated parameters with their ``setup``, ``centering`` and
    ``mean_mechanism``. ``mean_offset_bound`` bounds ``||w||_2``, ``w = mu - mu_hat``
    (:func:`~dpdist.algorithms._centering.mean_offset_bounds`, at beta). The plans apply the
    algorithms' bounds to the centred rows' second moment ``Sigma + w w^T``; they name it an
    unmet condition when that matrix may leave the model: ``||w||^2 > gap lambda_1 / 10``
    (Weyl then no longer keeps its relative eigengap above 0.8 gap) or a squared entry of ``w``
    above tau (``w w^T``'s entries off Sigma's pattern could then survive the threshold).
    """
    setup, centering, mech = p.setup, p.centering, p.mean_mechanism
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


def _min_samples(private: bool, error_at, target: float, *, start: int) -> int:
    """:func:`search_min_samples` for a plan that may centre at a private mean (``private``): a
    size at which the mean cannot be computed exactly (its integer sums would overflow) has no
    bound, and a target that no size reaches says why."""

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


def spectral_norm_plan(p, lambda_1: float | None = None, *, forecast: bool = True) -> SpectralNormPlan:
    """:meth:`SpectralNorm.plan <dpdist.algorithms.sparse_pca.estimator.SpectralNorm.plan>` from the
    validated parameters ``p`` (with their ``setup``, centring and the stage's budget);
    ``forecast=False`` leaves out the tests' pass probabilities (a sample-size search)."""
    setup, (_, share_epsilon, share_delta) = p.setup, p.stages[0]
    cal = privnorm_calibration(share_epsilon, share_delta, setup.k, setup.tau, setup.float_bounds)
    err = privnorm_error_bound(cal, setup.k, setup.tau, setup.beta)
    lam = check_positive(lambda_1, "lambda_1", allow_none=True) or setup.sigma**2
    centring, centring_unmet, private_mean = _plan_centring(p, lam)
    bound = err["error_bound"] + centring["mean_offset_bound"] ** 2
    fc = (batch_forecast(setup.n_features, setup.k, setup.gap, lam, min(setup.sizes), setup.tau)
          if forecast else None)
    tests = _plan_tests(setup, friendly_test_calibration(share_epsilon, share_delta, setup.n_batches),
                        fc and fc.q_norm(), fc)
    prob = "1 - 2 beta (Lemma 21, plus centring at the private mean)" if private_mean else "1 - beta (Lemma 21)"
    return SpectralNormPlan(
        n_samples=setup.n_samples,
        n_features=setup.n_features,
        privacy=ApproxDP(p.epsilon, p.delta),
        noise_scale=PrivNormMechanism.from_calibration(cal).noise_scales()["release"],  # as released
        error_bound=bound,
        error_metric=f"|lambda_hat - lambda_1|, w.p. >= {prob} when the tests pass",
        error_scale=lam,
        error_scale_rule="lambda_1" if lambda_1 is not None else "lambda_1 = sigma**2, the largest Model 1 allows",
        unmet_conditions=_tests_unmet(tests, "PrivNorm") + centring_unmet,
        n_batches=setup.n_batches,
        batch_size=min(setup.sizes),
        tau=setup.tau,
        lambda_1_assumed=lam,
        sensitivity=cal.sensitivity,
        tests=tests,
        threshold_error=err["threshold_error"],
        noise_error=err["noise_error"],
        relative_error_bound=bound / lam,
        meets_theorem_3_requirement=bound <= setup.gap * lam / 10,
        release_probability=tests.get("pass_probability"),
        release_probability_range=tests.get("pass_probability_range"),
        **centring,
    )


def sparse_pca_plan(p, lambda_1: float | None = None, *, forecast: bool = True) -> SparsePCAPlan:
    """:meth:`SparsePCA.plan <dpdist.algorithms.sparse_pca.estimator.SparsePCA.plan>` from the
    validated parameters ``p`` (with their ``setup``, centring and the stages' budgets);
    ``forecast=False`` leaves out the tests' pass probabilities (a sample-size search)."""
    setup = p.setup
    budgets = {name: (e, dl) for name, e, dl in p.stages}
    norm_budget, (ep, dp) = budgets.get("norm"), budgets["pca"]
    lam = check_positive(lambda_1, "lambda_1", allow_none=True) or (
        p.lambda_hat if p.lambda_hat is not None else setup.sigma**2)
    lam_hat = p.lambda_hat if p.lambda_hat is not None else (1 - setup.gap / 10) * lam
    pcal = privpca_calibration(ep, dp, setup.k, setup.tau, setup.gap, lam_hat, setup.float_bounds)
    err = privpca_error_bound(pcal.sigma, setup.k, setup.tau, setup.gap, lam, setup.n_features, setup.beta)
    fc = (batch_forecast(setup.n_features, setup.k, setup.gap, lam, min(setup.sizes), setup.tau)
          if forecast else None)
    pca_cal = friendly_test_calibration(ep, dp, setup.n_batches)
    if norm_budget is not None:
        ncal = privnorm_calibration(norm_budget[0], norm_budget[1], setup.k, setup.tau, setup.float_bounds)
    if fc is None:
        pca_tests = _plan_tests(setup, pca_cal)
    else:
        if norm_budget is None:  # lambda_hat is public: PrivPCA always runs
            lam_points, p_run = np.array([p.lambda_hat]), 1.0
        else:  # lambda_hat = ||T_5tau(Sigma)||_op + PrivNorm's noise; PrivPCA runs when it is > 0
            points = lambda_hat_points(fc.norm_of_thresholded, ncal.sigma)
            lam_points, p_run = points[points > 0], float(np.mean(points > 0))
        pca_tests = _plan_tests(setup, pca_cal, fc.q_pca(lam_points) if lam_points.size else np.zeros(1), fc)
        if norm_budget is not None:
            pca_tests["lambda_hat_positive_probability"] = p_run
            for key in ("count_test_pass_probability", "pass_probability"):
                pca_tests[key] *= p_run
            for key in ("count_test_pass_probability_range", "pass_probability_range"):
                pca_tests[key] = [v * p_run for v in pca_tests[key]]
    unmet = _tests_unmet(pca_tests, "PrivPCA")
    release_probability = pca_tests.get("pass_probability")
    release_range = pca_tests.get("pass_probability_range")
    norm: dict = {}
    if norm_budget is not None:
        nerr = privnorm_error_bound(ncal, setup.k, setup.tau, setup.beta)
        norm = {
            "norm_noise_scale": PrivNormMechanism.from_calibration(ncal).noise_scales()["release"],
            "norm_error_bound": nerr["error_bound"],
            "norm_within_gap_over_10": nerr["error_bound"] <= setup.gap * lam / 10,
            "norm_tests": _plan_tests(setup, friendly_test_calibration(*norm_budget, setup.n_batches),
                                      fc and fc.q_norm(), fc),
            "budget_split": {"norm": list(norm_budget), "pca": [ep, dp]},
        }
        if fc is not None:
            release_probability *= norm["norm_tests"]["pass_probability"]
            release_range = [a * b for a, b in zip(release_range, norm["norm_tests"]["pass_probability_range"])]
        unmet = _tests_unmet(norm["norm_tests"], "PrivNorm") + unmet
        if not norm["norm_within_gap_over_10"]:
            unmet += (f"PrivNorm's predicted error {nerr['error_bound']:.3g} exceeds gap lambda_1 / 10 = "
                      f"{setup.gap * lam / 10:.3g} (Theorem 3 needs lambda_hat within it)",)
    said = any("predicted to pass" in u for u in unmet)
    if fc is not None and release_probability < REJECTION_LEVEL and not said:
        unmet += (f"PrivNorm's and PrivPCA's private tests are predicted to pass together with probability "
                  f"{release_probability:.3g} on the model's reference instance: the fit would most likely "
                  "raise NoPrivateResult and spend its budget",)
    centring, centring_unmet, private_mean = _plan_centring(p, lam)
    # the angle the centring's rank-one term turns the top eigenvector by (Davis-Kahan, SparsePCA's Notes)
    centring["centring_sin_bound"] = min(1.0, centring["mean_offset_bound"] ** 2 / (setup.gap * lam))
    bound = min(1.0, (math.sqrt(err["sin2_error_bound"]) + centring["centring_sin_bound"]) ** 2)
    prob = ("1 - 2 beta when the tests pass (proof of Theorem 3, plus centring at the private mean)"
            if private_mean else "1 - beta when the tests pass (proof of Theorem 3)")
    return SparsePCAPlan(
        n_samples=setup.n_samples,
        n_features=setup.n_features,
        privacy=ApproxDP(p.epsilon, p.delta),
        noise_scale=PrivPCAMechanism.from_calibration(pcal, setup.n_features).noise_scales()["projector"],
        error_bound=bound,
        error_metric=f"sin^2(v_hat, v_1), w.p. >= {prob}",
        error_scale=1.0,
        error_scale_rule="1: sin^2 <= 1 always",
        unmet_conditions=unmet + centring_unmet,
        n_batches=setup.n_batches,
        batch_size=min(setup.sizes),
        tau=setup.tau,
        lambda_1_assumed=lam,
        lambda_hat_assumed=lam_hat,
        sigma_priv=pcal.sigma,
        projector_sensitivity=pcal.sensitivity,
        pca_tests=pca_tests,
        release_probability=release_probability,
        release_probability_range=release_range,
        **err,
        **norm,
        **centring,
    )
