"""The estimators :class:`SpectralNorm` (PrivNorm) and :class:`SparsePCA` (PrivPCA): they
validate, call the functions of :mod:`dpdist.algorithms.sparse_pca.release` and copy the
release into ``*_`` attributes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpdist._validation import check_positive
from dpdist.algorithms._base import Estimator, reports_empirical
from dpdist.algorithms._projection import Projection
from dpdist.algorithms._centering import DEFAULT_MEAN_FRACTION, check_centering
from dpdist.algorithms.friendly_steps import friendly_setup
from dpdist.algorithms._friendly_forecast import REJECTION_LEVEL, batch_forecast, lambda_hat_points
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
from dpdist.privacy.mechanisms.privpca.mechanism import PrivNormMechanism, PrivPCAMechanism
from dpdist.privacy.mechanisms.privpca.calibration import (
    DEFAULT_BETA,
    default_n_batches,
    friendly_test_calibration,
    privnorm_calibration,
    privpca_calibration,
    split_norm_and_pca_budget,
)
from dpdist.privacy.release import Release
from dpdist.algorithms.sparse_pca.plan import (
    SparsePCAPlan,
    SpectralNormPlan,
    _min_samples,
    _plan_centring,
    _plan_tests,
    _tests_unmet,
    privnorm_error_bound,
    privpca_error_bound,
)
from dpdist.algorithms.sparse_pca.release import _check_common, _check_lambda_hat, private_norm, sparse_pca


def _location(rel: Release) -> dict:
    """``location_``: the mean the fit centred at (zeros when the data were taken as centred)."""
    mu = rel.values.get("mean")
    d = rel.parameters["n_features"]
    return {"location_": np.zeros(d) if mu is None else np.asarray(mu, dtype=np.float64)}


class SpectralNorm(Estimator):
    """Private operator norm of a k-RCS covariance: PrivNorm (Algorithm 3).

    Parameters
    ----------
    k, epsilon, delta, gap, sigma, n_batches, tau, random_state, scheduler
        As in :func:`private_norm`.
    beta : float, default 0.05
        Failure probability of the utility statements (eq. (11), default m, plan()).
    shuffle_batches : bool, default False
        Batches from a public random permutation instead of consecutive row ranges.
    on_nonfinite : {"zero", "raise"}, default "zero"
        See :func:`private_norm`.
    require_useful : bool, default False
        True: ``fit`` refuses (``ValidationError``) before reading any data or reserving any
        budget when :meth:`plan` at the data's shape says the release would be rejected (its
        private tests predicted to pass with probability below 1/2) or vacuous. The plan
        depends only on public parameters and the shape, never on the data, so the refusal
        leaks nothing.
    assume_centered : bool, default False
        As scikit-learn's ``EmpiricalCovariance``: False (default) centres the data, so the norm
        estimated is that of the covariance; True takes the rows as mean-zero (their second
        moment's norm, the algorithm as published).
    mean : array-like (d,), optional
        A public mean to centre at (recorded as public in the release; costs nothing).
        Without it the mean is released privately with ``mean_fraction`` of the budget.
    mean_fraction : float in (0, 1), default 0.1
        Share of (epsilon, delta) spent on the private mean.
    mean_clip : float, optional
        L2 radius the rows are scaled to for the private mean; it must cover the norms of the
        raw rows (default: the entry clip times ``sqrt(d)``). ``sigma`` describes the centred
        rows ``x - mean``.

    Attributes
    ----------
    norm_ : float
        The released estimate of ``lambda_1``.
    location_ : ndarray of shape (n_features,)
        The mean the data were centred at (released or public); zeros with
        ``assume_centered=True``.
    noise_scale_ : float
        Standard deviation of the Gaussian noise on the norm.
    tau_ : float
    n_batches_ : int
    privacy_ : ApproxDP
    release_ : Release

    Notes
    -----
    See :func:`private_norm` for the guarantee: (epsilon, delta)-DP under replace-one
    neighbours for any input (Lemma 20). Parameters are validated in :meth:`fit`; a failed fit
    (including a ``NoPrivateResult``) changes nothing (:mod:`dpdist.algorithms._base`).

    The norm is a functional of the covariance, so it is centred like the covariance
    estimators: the private mean first (its own share, its own event), then PrivNorm on ``x -
    mu_hat`` with the rest; its sensitivity analysis is unchanged since ``mu_hat`` is public by
    then (:func:`private_norm`). The rank-one term ``w w^T`` (``w = mu - mu_hat``) that
    centring at ``mu_hat`` leaves in the second moment raises the top eigenvalue by between 0
    and ``||w||^2``; :meth:`plan` adds that to the error.
    """

    def __init__(
        self,
        k: int,
        epsilon: float,
        delta: float,
        *,
        gap: float,
        sigma: float,
        n_batches: int | None = None,
        tau: float | None = None,
        random_state=None,
        scheduler=None,
        beta: float = DEFAULT_BETA,
        shuffle_batches: bool = False,
        on_nonfinite: str = "zero",
        require_useful: bool = False,
        assume_centered: bool = False,
        mean: Any = None,
        mean_fraction: float = DEFAULT_MEAN_FRACTION,
        mean_clip: float | None = None,
    ):
        self.k = k
        self.epsilon = epsilon
        self.delta = delta
        self.gap = gap
        self.sigma = sigma
        self.n_batches = n_batches
        self.tau = tau
        self.random_state = random_state
        self.scheduler = scheduler
        self.beta = beta
        self.shuffle_batches = shuffle_batches
        self.on_nonfinite = on_nonfinite
        self.require_useful = require_useful
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip

    def _fit_release(self, X) -> Release:
        return private_norm(
            X, self.k, self.epsilon, self.delta, gap=self.gap, sigma=self.sigma, n_batches=self.n_batches,
            tau=self.tau, beta=self.beta, shuffle_batches=self.shuffle_batches,
            random_state=self.random_state, scheduler=self.scheduler,
            on_nonfinite=self.on_nonfinite, **self._centring(),
        )

    def _centring(self) -> dict:
        return {"assume_centered": self.assume_centered, "mean": self.mean, "mean_fraction": self.mean_fraction,
                "mean_clip": self.mean_clip}

    def _fitted_attributes(self, rel: Release) -> dict:
        return {
            **_location(rel),
            "norm_": float(rel.values["norm"]),
            "noise_scale_": float(rel.noise_scales["norm/sigma"]),
            "tau_": float(rel.parameters["tau"]),
            "n_batches_": int(rel.parameters["n_batches"]),
            "privacy_": rel.privacy,
            "release_": rel,
        }

    def plan(self, n_samples: int, n_features: int, *, lambda_1: float | None = None) -> SpectralNormPlan:
        """Noise scales, tau, m, the error Lemma 21 predicts at this size, and the probability
        that the private tests pass (``tests``, ``release_probability``; on the model's
        reference instance, :mod:`dpdist.algorithms._friendly_forecast`); reads no data.

        ``lambda_1`` (default ``sigma**2``, the largest value Model 1 allows) turns the
        absolute error bound into a relative one, is the scale the vacuity check uses, and is
        the reference instance's top eigenvalue.
        """
        return self._plan(n_samples, n_features, lambda_1)

    def _plan(self, n_samples, n_features, lambda_1=None, *, forecast: bool = True) -> SpectralNormPlan:
        epsilon, delta = _check_common(self.k, self.epsilon, self.delta, self.gap, self.sigma,
                                       self.n_batches, self.tau, self.beta, self.scheduler)
        mean_share, share = check_centering(**self._centring()).split(epsilon, delta)
        setup = friendly_setup(n_samples, n_features, self.k, self.gap, self.sigma, self.n_batches, self.tau,
                       self.beta, [(share.epsilon, share.delta)])
        cal = privnorm_calibration(share.epsilon, share.delta, setup.k, setup.tau, setup.float_bounds)
        err = privnorm_error_bound(cal, setup.k, setup.tau, setup.beta)
        lam = check_positive(lambda_1, "lambda_1", allow_none=True) or setup.sigma**2
        centring, centring_unmet, private_mean = _plan_centring(self, setup, mean_share, lam)
        bound = err["error_bound"] + centring["mean_offset_bound"] ** 2
        fc = (batch_forecast(setup.n_features, setup.k, setup.gap, lam, min(setup.sizes), setup.tau)
              if forecast else None)
        tests = _plan_tests(setup, friendly_test_calibration(share.epsilon, share.delta, setup.n_batches),
                            fc and fc.q_norm(), fc)
        prob = "1 - 2 beta (Lemma 21, plus centring at the private mean)" if private_mean else "1 - beta (Lemma 21)"
        return SpectralNormPlan(
            n_samples=setup.n_samples,
            n_features=setup.n_features,
            privacy=ApproxDP(epsilon, delta),
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

    def min_samples(self, target_relative_error: float, n_features: int, *, lambda_1: float | None = None) -> int:
        """Least n whose :meth:`plan` relative error bound is <= the target (m held at its
        value for that n: ``n_batches`` if set, else the default)."""
        epsilon, delta = _check_common(self.k, self.epsilon, self.delta, self.gap, self.sigma,
                                       self.n_batches, self.tau, self.beta, self.scheduler)
        _, share = check_centering(**self._centring()).split(epsilon, delta)
        return _min_samples(
            self,
            lambda n: self._plan(n, n_features, lambda_1, forecast=False).relative_error_bound,
            target_relative_error,
            start=max(40, 2 * (self.n_batches or default_n_batches(share.epsilon, share.delta, beta=self.beta))),
        )


class SparsePCA(Projection, Estimator):
    """Private leading k-sparse principal component: PrivNorm then PrivPCA (Theorem 3).

    Parameters
    ----------
    k, epsilon, delta, gap, sigma, n_batches, tau, random_state, scheduler
        As in :func:`sparse_pca`.
    norm_fraction : float, default 0.5
        Share of (epsilon, delta) spent by PrivNorm; ignored when ``lambda_hat`` is given.
    lambda_hat : float, optional
        A public estimate of ``lambda_1``: PrivNorm is skipped and PrivPCA gets the whole budget.
    beta : float, default 0.05
    shuffle_batches : bool, default False
    on_nonfinite : {"zero", "raise"}, default "zero"
        See :func:`private_norm`.
    require_useful : bool, default False
        True: ``fit`` refuses (``ValidationError``) before reading any data or reserving any
        budget when :meth:`plan` at the data's shape says the release would be rejected (its
        private tests predicted to pass with probability below 1/2) or vacuous. The plan
        depends only on public parameters and the shape, never on the data, so the refusal
        leaks nothing.
    assume_centered, mean, mean_fraction, mean_clip
        Centring, as in :class:`SpectralNorm` (default: a private mean with 10% of the budget;
        PrivNorm and PrivPCA split the rest by ``norm_fraction``).

    Attributes
    ----------
    components_ : ndarray of shape (1, d)
        Unit vector; exactly zero off its (at most 2 k^2) active coordinates.
    location_ : ndarray of shape (n_features,)
        The mean the data were centred at (released or public; zeros with
        ``assume_centered=True``); :meth:`transform` subtracts it.
    lambda_hat_ : float
    noise_scale_ : float
        sigma_priv of the projector release.
    tau_ : float
    n_batches_ : int
    privacy_ : ApproxDP
    release_ : Release

    Notes
    -----
    See :func:`sparse_pca`: (epsilon, delta)-DP under replace-one neighbours for any input
    (Corollary 1, Lemma 20, basic composition). Parameters are validated in :meth:`fit`; a
    failed fit (including a ``NoPrivateResult``) changes nothing (:mod:`dpdist.algorithms._base`).

    **Centring.** By default the mean is released first (clipped-mean Gaussian mechanism,
    ``mean_fraction`` of the budget, rows scaled to L2 norm ``mean_clip``) and PrivNorm and
    PrivPCA run on ``x - mu_hat``. Privacy: ``mu_hat`` is public once released, and ``x -> x -
    mu_hat`` is a fixed per-row map applied before the entry clip, so the second stage's
    sensitivity analysis (Lemmas 9-10, the float bounds) holds verbatim for the centred rows;
    the stages compose by basic composition. The public bounds must now cover: ``sigma`` (hence
    the entry clip and tau) the centred rows, ``mean_clip`` the norms of the raw rows.

    Utility: with ``w = mu - mu_hat``, the centred rows ``(x - mu) + w`` have second moment
    ``Sigma' = Sigma + w w^T`` (up to the cross terms ``(1/b) sum (x - mu) w^T``, of mean zero
    and of the order of the batch sampling error times ``||w|| / sigma``), a rank-one,
    positive semidefinite perturbation of norm ``||w||^2``. Davis-Kahan: with ``v'`` the top
    eigenvector of ``Sigma'`` and ``P`` the projector on ``Sigma``'s eigenvectors of
    eigenvalue at most ``lambda_2``, ``P`` commutes with ``Sigma``, so ``(lambda_1' - Sigma) P
    v' = P w w^T v'`` and ``sin(v', v_1) = ||P v'|| <= ||w||^2 / (lambda_1' - lambda_2) <=
    ||w||^2 / (lambda_1 - lambda_2)``, as ``lambda_1' >= lambda_1`` (Weyl, ``w w^T >= 0``).
    Angles between lines add, so ``sin(v_hat, v_1) <= sin(v_hat, v') + ||w||^2 / (gap
    lambda_1)``: :meth:`plan` adds this term (``centring_sin_bound``, with ``||w||`` bounded by
    :func:`~dpdist.algorithms._centering.mean_offset_bounds`) to Theorem 3's bound for
    ``Sigma'``, and names an unmet condition when ``Sigma'`` may leave the model.
    """

    def __init__(
        self,
        k: int,
        epsilon: float,
        delta: float,
        *,
        gap: float,
        sigma: float,
        n_batches: int | None = None,
        tau: float | None = None,
        norm_fraction: float = 0.5,
        lambda_hat: float | None = None,
        random_state=None,
        scheduler=None,
        beta: float = DEFAULT_BETA,
        shuffle_batches: bool = False,
        on_nonfinite: str = "zero",
        require_useful: bool = False,
        assume_centered: bool = False,
        mean: Any = None,
        mean_fraction: float = DEFAULT_MEAN_FRACTION,
        mean_clip: float | None = None,
    ):
        self.k = k
        self.epsilon = epsilon
        self.delta = delta
        self.gap = gap
        self.sigma = sigma
        self.n_batches = n_batches
        self.tau = tau
        self.norm_fraction = norm_fraction
        self.lambda_hat = lambda_hat
        self.random_state = random_state
        self.scheduler = scheduler
        self.beta = beta
        self.shuffle_batches = shuffle_batches
        self.on_nonfinite = on_nonfinite
        self.require_useful = require_useful
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip

    _centring = SpectralNorm._centring

    def _fit_release(self, X) -> Release:
        return sparse_pca(
            X, self.k, self.epsilon, self.delta, gap=self.gap, sigma=self.sigma,
            norm_fraction=self.norm_fraction, lambda_hat=self.lambda_hat, n_batches=self.n_batches,
            tau=self.tau, beta=self.beta, shuffle_batches=self.shuffle_batches,
            random_state=self.random_state, scheduler=self.scheduler,
            on_nonfinite=self.on_nonfinite, **self._centring(),
        )

    def _fitted_attributes(self, rel: Release) -> dict:
        return {
            **_location(rel),
            "components_": np.asarray(rel.values["components"]),
            "lambda_hat_": float(rel.values["lambda_hat"]),
            "noise_scale_": float(rel.noise_scales["pca/sigma_priv"]),
            "tau_": float(rel.parameters["tau"]),
            "n_batches_": int(rel.parameters["n_batches"]),
            "privacy_": rel.privacy,
            "release_": rel,
        }

    def _budgets(self):
        """(PrivNorm's budget or None, PrivPCA's): the share left after a private mean, split."""
        epsilon, delta = _check_common(self.k, self.epsilon, self.delta, self.gap, self.sigma,
                                       self.n_batches, self.tau, self.beta, self.scheduler)
        _, share = check_centering(**self._centring()).split(epsilon, delta)
        if self.lambda_hat is not None:
            _check_lambda_hat(self.lambda_hat)
            return None, (share.epsilon, share.delta)
        return split_norm_and_pca_budget(share.epsilon, share.delta, self.norm_fraction)

    @reports_empirical("privpca")
    def plan(self, n_samples: int, n_features: int, *, lambda_1: float | None = None) -> SparsePCAPlan:
        """Noise scales, tau, m and the sin^2 error Theorem 3's proof predicts; reads no data.

        ``lambda_1`` is the anticipated top eigenvalue (default: ``lambda_hat`` if given, else
        ``sigma**2``, the largest value Model 1 allows, i.e. the optimistic case). Without a
        given ``lambda_hat``, sigma_priv is planned at ``lambda_hat = (1 - gap/10) lambda_1``,
        the worst value Proposition 1 allows.

        ``pca_tests``, ``norm_tests`` and ``release_probability`` give the probability that the
        private tests pass, on the model's reference instance (top eigenvalue ``lambda_1``;
        :mod:`dpdist.algorithms._friendly_forecast`).
        """
        return self._plan(n_samples, n_features, lambda_1)

    def _plan(self, n_samples, n_features, lambda_1=None, *, forecast: bool = True) -> SparsePCAPlan:
        norm_budget, (ep, dp) = self._budgets()
        budgets = [(ep, dp)] if norm_budget is None else [norm_budget, (ep, dp)]
        setup = friendly_setup(n_samples, n_features, self.k, self.gap, self.sigma, self.n_batches, self.tau,
                       self.beta, budgets)
        lam = check_positive(lambda_1, "lambda_1", allow_none=True) or (
            float(self.lambda_hat) if self.lambda_hat is not None else setup.sigma**2)
        lam_hat = float(self.lambda_hat) if self.lambda_hat is not None else (1 - setup.gap / 10) * lam
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
                lam_points, p_run = np.array([float(self.lambda_hat)]), 1.0
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
        mean_share, _ = check_centering(**self._centring()).split(check_epsilon(self.epsilon), check_delta(self.delta))
        centring, centring_unmet, private_mean = _plan_centring(self, setup, mean_share, lam)
        # the angle the centring's rank-one term turns the top eigenvector by (Davis-Kahan, Notes)
        centring["centring_sin_bound"] = min(1.0, centring["mean_offset_bound"] ** 2 / (setup.gap * lam))
        bound = min(1.0, (math.sqrt(err["sin2_error_bound"]) + centring["centring_sin_bound"]) ** 2)
        prob = ("1 - 2 beta when the tests pass (proof of Theorem 3, plus centring at the private mean)"
                if private_mean else "1 - beta when the tests pass (proof of Theorem 3)")
        return SparsePCAPlan(
            n_samples=setup.n_samples,
            n_features=setup.n_features,
            privacy=ApproxDP(check_epsilon(self.epsilon), check_delta(self.delta)),
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

    def min_samples(self, target_sin2: float, n_features: int, *, lambda_1: float | None = None) -> int:
        """Least n whose :meth:`plan` predicts ``sin^2 <= target_sin2`` (and, when PrivNorm
        runs, a lambda_hat within gap/10 as Theorem 3 requires); m is held at ``n_batches`` or
        its default."""

        def err(n):
            p = self._plan(n, n_features, lambda_1, forecast=False)
            ok = p.norm_within_gap_over_10 is not False
            return p.error_bound if ok else math.inf

        norm_budget, (ep, dp) = self._budgets()
        pairs = [(ep, dp)] if norm_budget is None else [norm_budget, (ep, dp)]
        m = self.n_batches or max(default_n_batches(e, d, beta=self.beta) for e, d in pairs)
        return _min_samples(self, err, target_sin2, start=max(40, 2 * m))
