"""PCA baselines built on the covariance baselines: the top eigenvector of the Wang-Xu
Gaussian covariance (private) and of the hard-thresholded covariance (NOT private)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdist._validation import check_int, check_probability
from dpdist.algorithms._base import Estimator, reports_empirical
from dpdist.algorithms._projection import Projection
from dpdist.algorithms._centering import DEFAULT_MEAN_FRACTION
from dpdist.algorithms.baselines.gaussian import GaussianCovariance, GaussianCovariancePlan, _location
from dpdist.algorithms.baselines.thresholded import ThresholdedCovariance, ThresholdedCovariancePlan
from dpdist.algorithms.expmech_pca.release import leading_eigenvector
from dpdist.engine.gram import DEFAULT_TILE
from dpdist.algorithms._utility import davis_kahan_sin2
from dpdist.privacy.release import Release, warn_if_unsafe

__all__ = ["GaussianPCA", "GaussianPCAPlan", "ThresholdedPCA", "ThresholdedPCAPlan"]

_SIN2 = ("sin^2(v_hat, v_1), w.p. >= 1 - 2 beta (Lemma 3(1) and Davis-Kahan)", 1.0, "1: sin^2 <= 1 always")


@dataclass(frozen=True, kw_only=True)
class GaussianPCAPlan(GaussianCovariancePlan):
    """:meth:`GaussianPCA.plan`: the Wang-Xu covariance's plan, plus, with ``k`` (row sparsity
    of Sigma), ``operator_error_bound = 2 k lambda`` (Lemma 3(1)) and, with ``eigengap`` too,
    ``sin2_bound`` (Davis-Kahan), which is then the plan's ``error_bound`` (scale 1). Without
    them the error is the covariance's entrywise bound (scale ``sigma**2``)."""

    k: int | None = None
    eigengap: float | None = None
    operator_error_bound: float | None = None
    sin2_bound: float | None = None


@dataclass(frozen=True, kw_only=True)
class ThresholdedPCAPlan(ThresholdedCovariancePlan):
    """:meth:`ThresholdedPCA.plan` (NOT PRIVATE): as :class:`GaussianPCAPlan` without noise."""

    k: int | None = None
    eigengap: float | None = None
    operator_error_bound: float | None = None
    sin2_bound: float | None = None


def _with_pca_error(plan, k, eigengap, default_threshold: bool):
    """``plan`` with Lemma 3(1)'s operator bound (with ``k``, and only for the default
    threshold, which makes every entry error below it) and the Davis-Kahan sin^2 (with
    ``eigengap``); the sin^2 becomes the plan's error."""
    fields: dict = {}
    if k is not None:
        k = check_int(k, "k", low=1, high=plan.n_features)
        fields["k"] = k
        if default_threshold and plan.sigma is not None:
            fields["operator_error_bound"] = 2 * k * plan.threshold
    if eigengap is not None:
        fields["eigengap"] = eigengap
        if fields.get("operator_error_bound") is not None:
            sin2 = davis_kahan_sin2(fields["operator_error_bound"], eigengap)
            metric, scale, rule = _SIN2
            fields.update(sin2_bound=sin2, error_bound=sin2, error_metric=metric, error_scale=scale,
                          error_scale_rule=rule)
    return dataclasses.replace(plan, **fields) if fields else plan


def _pca_release(cov_release: Release, components: np.ndarray, eigenvalue: float, what: str) -> Release:
    return Release(
        mechanism=f"{cov_release.mechanism}; top eigenvector ({what})",
        privacy=cov_release.privacy,
        parameters=dict(cov_release.parameters),
        noise_scales=dict(cov_release.noise_scales),
        values={"components": components, "eigenvalue": eigenvalue, "covariance": cov_release.values["covariance"],
                **({"mean": cov_release.values["mean"]} if "mean" in cov_release.values else {})},
        seeding=dict(cov_release.seeding),
        notes=tuple(cov_release.notes) + ("components are post-processing of the released covariance",),
        status=cov_release.status,
        private=cov_release.private,
        not_private_reasons=cov_release.not_private_reasons,
    )


class GaussianPCA(Projection, Estimator):
    """(epsilon, delta)-DP leading principal component from the Wang-Xu Gaussian covariance.

    Fits :class:`~dpdist.baselines.GaussianCovariance` (symmetric Gaussian noise on the
    whole entry-clipped second moment, then hard thresholding) and returns the top
    eigenvector of that estimate.

    Parameters
    ----------
    epsilon, delta, sigma, clip, threshold, random_state, beta, scheduler, tile_size, on_nonfinite
        Passed to :class:`~dpdist.baselines.GaussianCovariance`.
    assume_centered, mean, mean_fraction, mean_clip
        Centring, passed to :class:`~dpdist.baselines.GaussianCovariance`: by default the
        component is that of the covariance around a privately released mean.

    Attributes
    ----------
    components_ : ndarray of shape (1, d)
    covariance_ : scipy.sparse.csr_array
        The released Wang-Xu estimate.
    noise_scale_, clip_, threshold_, privacy_, release_
        ``release_`` holds the covariance baseline's release (privacy, parameters, noise
        scales, the covariance) plus the component.

    Notes
    -----
    **Guarantee.** (epsilon, delta)-DP under replace-one neighbours, for any input, exactly
    that of :class:`~dpdist.baselines.GaussianCovariance` (Frobenius sensitivity
    ``2 R^2 d / n`` of the clipped second moment, Gaussian mechanism); the eigenvector is
    post-processing and costs nothing more. Its per-entry noise grows linearly with d.
    """

    def __init__(self, epsilon: float, delta: float, *, sigma: float | None = None, clip: float | None = None,
                 threshold: float | None = None, random_state: Any = None, beta: float = 0.1,
                 scheduler: Any = None, tile_size: int = DEFAULT_TILE, on_nonfinite: str = "zero",
                 assume_centered: bool = False, mean: Any = None, mean_fraction: float = DEFAULT_MEAN_FRACTION,
                 mean_clip: float | None = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.sigma = sigma
        self.clip = clip
        self.threshold = threshold
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip
        self.random_state = random_state
        self.beta = beta
        self.scheduler = scheduler
        self.tile_size = tile_size
        self.on_nonfinite = on_nonfinite

    #: The covariance baseline's parameters, with its rules.
    _parameter_constraints = GaussianCovariance._parameter_constraints

    def _covariance_estimator(self) -> GaussianCovariance:
        return GaussianCovariance(
            self.epsilon, self.delta, sigma=self.sigma, clip=self.clip, threshold=self.threshold,
            random_state=self.random_state, beta=self.beta, scheduler=self.scheduler,
            tile_size=self.tile_size, on_nonfinite=self.on_nonfinite,
            assume_centered=self.assume_centered, mean=self.mean, mean_fraction=self.mean_fraction,
            mean_clip=self.mean_clip,
        )

    def _validate_together(self, params, n_samples, n_features):
        """The covariance baseline's rules and derived values (clip, centring, calibration, threshold)."""
        return self._covariance_estimator()._validate_together(params, n_samples, n_features)

    @reports_empirical("wang_xu_pca")
    def plan(self, n_samples: int, n_features: int, *, k: int | None = None,
             eigengap: float | None = None) -> GaussianPCAPlan:
        """Noise scale, threshold and predicted error for a data size; reads no data.

        With the default threshold (noise level plus sampling level, needs ``sigma``) every
        entry of ``Sigma_hat + E - Sigma`` is below the threshold w.p. >= 1 - 2 beta, and for
        a k-RCS ``Sigma`` Lemma 3(1) gives ``||T(Sigma_hat + E) - Sigma||_op <= 2 k lambda``.
        With ``k`` (row sparsity of Sigma) and ``eigengap`` (absolute), ``sin2_bound`` is
        Davis-Kahan on that. ``lambda``, hence the bound, grows like ``d`` through the noise.
        """
        return self._plan_validated(self._validated_at(n_samples, n_features), k, eigengap)

    def _plan_validated(self, params, k: int | None = None, eigengap: float | None = None) -> GaussianPCAPlan:
        p = self._covariance_estimator()._plan_validated(params)
        plan = GaussianPCAPlan(**{f.name: getattr(p, f.name) for f in dataclasses.fields(p) if f.init})
        return _with_pca_error(plan, k, eigengap, default_threshold=params.threshold is None)

    def _release_validated(self, X: Any, params, plan) -> Release:
        """The Wang-Xu covariance's release and its top eigenvector (one PrivacyWarning when seeded)."""
        cov_rel = self._covariance_estimator()._compute(X, params)
        v, lam = leading_eigenvector(cov_rel.values["covariance"])
        return warn_if_unsafe(_pca_release(cov_rel, v[None, :], lam, "post-processing"), stacklevel=4)

    def _fitted_attributes(self, rel: Release) -> dict:
        return {
            "covariance_": rel.values["covariance"],
            "components_": rel.values["components"],
            "location_": _location(rel),
            "noise_scale_": rel.noise_scales["gaussian"],
            "clip_": rel.parameters["clip"],
            "threshold_": rel.parameters["threshold"],
            "privacy_": rel.privacy,
            "release_": rel,
        }


class ThresholdedPCA(Projection, Estimator):
    """Top eigenvector of the hard-thresholded empirical second moment. **NOT PRIVATE.**

    Parameters
    ----------
    threshold, sigma, scheduler, tile_size, on_nonfinite, assume_centered, mean
        Passed to :class:`~dpdist.baselines.ThresholdedCovariance` (by default the data are
        centred at their exact mean: this estimator is not private).

    Attributes
    ----------
    components_ : ndarray of shape (1, d)
    covariance_ : scipy.sparse.csr_array
    threshold_ : float
    release_ : Release
        ``private=False``, ``privacy=None``.

    Notes
    -----
    **No privacy guarantee**: the non-private reference (BL09) of the comparisons. Its
    release metadata says "NOT PRIVATE" and every fit emits one
    :class:`~dpdist.exceptions.PrivacyWarning`.
    """

    def __init__(self, *, threshold: float | None = None, sigma: float | None = None, scheduler: Any = None,
                 tile_size: int = DEFAULT_TILE, on_nonfinite: str = "zero",
                 assume_centered: bool = False, mean: Any = None) -> None:
        self.threshold = threshold
        self.sigma = sigma
        self.assume_centered = assume_centered
        self.mean = mean
        self.scheduler = scheduler
        self.tile_size = tile_size
        self.on_nonfinite = on_nonfinite

    #: The covariance baseline's parameters, with its rules.
    _parameter_constraints = ThresholdedCovariance._parameter_constraints

    def _covariance_estimator(self) -> ThresholdedCovariance:
        return ThresholdedCovariance(threshold=self.threshold, sigma=self.sigma, scheduler=self.scheduler,
                                     tile_size=self.tile_size, on_nonfinite=self.on_nonfinite,
                                     assume_centered=self.assume_centered, mean=self.mean)

    def _validate_together(self, params, n_samples, n_features):
        """The covariance baseline's rules and the threshold the fit applies."""
        return self._covariance_estimator()._validate_together(params, n_samples, n_features)

    @reports_empirical("thresholded_pca")
    def plan(self, n_samples: int, n_features: int, *, k: int | None = None, eigengap: float | None = None,
             beta: float = 0.1) -> ThresholdedPCAPlan:
        """Threshold and predicted error (no noise; NOT private); reads no data.

        With ``sigma`` and the default threshold (Fact 1's entrywise sampling level), Lemma
        3(1) gives ``||T(Sigma_hat) - Sigma||_op <= 2 k lambda`` for a k-RCS Sigma; with
        ``eigengap``, ``sin2_bound`` is Davis-Kahan on that.
        """
        return self._plan_validated(self._validated_at(n_samples, n_features), k, eigengap,
                                    check_probability(beta, "beta"))

    def _plan_validated(self, params, k: int | None = None, eigengap: float | None = None,
                        beta: float = 0.1) -> ThresholdedPCAPlan:
        p = self._covariance_estimator()._plan_validated(params, beta)
        plan = ThresholdedPCAPlan(**{f.name: getattr(p, f.name) for f in dataclasses.fields(p) if f.init})
        return _with_pca_error(plan, k, eigengap, default_threshold=params.threshold is None)

    def _release_validated(self, X: Any, params, plan) -> Release:
        """Top eigenvector of the thresholded second moment (NOT PRIVATE: one PrivacyWarning)."""
        cov_rel = self._covariance_estimator()._compute(X, params)
        v, lam = leading_eigenvector(cov_rel.values["covariance"])
        return warn_if_unsafe(_pca_release(cov_rel, v[None, :], lam, "NOT PRIVATE"), stacklevel=4)

    def _fitted_attributes(self, rel: Release) -> dict:
        return {
            "covariance_": rel.values["covariance"],
            "components_": rel.values["components"],
            "location_": _location(rel),
            "threshold_": rel.parameters["threshold"],
            "release_": rel,
        }
