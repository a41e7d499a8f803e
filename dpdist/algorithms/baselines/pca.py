"""PCA baselines built on the covariance baselines: the top eigenvector of the Wang-Xu
Gaussian covariance (private) and of the hard-thresholded covariance (NOT private)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdist.algorithms._base import Estimator, check_int, check_positive
from dpdist.algorithms.baselines.gaussian import GaussianCovariance
from dpdist.algorithms.baselines.thresholded import ThresholdedCovariance, bickel_levina_threshold
from dpdist.algorithms.expmech_pca import leading_eigenvector
from dpdist.engine.gram import DEFAULT_TILE
from dpdist.engine.runtime import DEFAULT_TIMEOUT
from dpdist.privacy.expmech_calibration import davis_kahan_sin2
from dpdist.privacy.release import Release, warn_if_unsafe

__all__ = ["GaussianPCA", "ThresholdedPCA"]


def _pca_release(cov_release: Release, components: np.ndarray, eigenvalue: float, what: str) -> Release:
    return Release(
        mechanism=f"{cov_release.mechanism}; top eigenvector ({what})",
        privacy=cov_release.privacy,
        parameters=dict(cov_release.parameters),
        noise_scales=dict(cov_release.noise_scales),
        values={"components": components, "eigenvalue": eigenvalue, "covariance": cov_release.values["covariance"]},
        seeding=dict(cov_release.seeding),
        notes=tuple(cov_release.notes) + ("components are post-processing of the released covariance",),
        status=cov_release.status,
        private=cov_release.private,
        not_private_reasons=cov_release.not_private_reasons,
    )


class GaussianPCA(Estimator):
    """(epsilon, delta)-DP leading principal component from the Wang-Xu Gaussian covariance.

    Fits :class:`~dpdist.baselines.GaussianCovariance` (symmetric Gaussian noise on the
    whole entry-clipped second moment, then hard thresholding) and returns the top
    eigenvector of that estimate.

    Parameters
    ----------
    epsilon, delta, sigma, clip, threshold, random_state, beta, scheduler, tile_size, on_nonfinite, timeout
        Passed to :class:`~dpdist.baselines.GaussianCovariance`.

    Attributes
    ----------
    components_ : ndarray of shape (1, d)
    covariance_ : scipy.sparse.csr_array
        The released Wang-Xu estimate.
    noise_scale_, clip_, threshold_, privacy_, release_
    covariance_release_ : Release
        The covariance baseline's own release.

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
                 timeout: float | None = DEFAULT_TIMEOUT) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.sigma = sigma
        self.clip = clip
        self.threshold = threshold
        self.random_state = random_state
        self.beta = beta
        self.scheduler = scheduler
        self.tile_size = tile_size
        self.on_nonfinite = on_nonfinite
        self.timeout = timeout

    def _covariance_estimator(self) -> GaussianCovariance:
        return GaussianCovariance(
            self.epsilon, self.delta, sigma=self.sigma, clip=self.clip, threshold=self.threshold,
            random_state=self.random_state, beta=self.beta, scheduler=self.scheduler,
            tile_size=self.tile_size, on_nonfinite=self.on_nonfinite, timeout=self.timeout,
        )

    def plan(self, n_samples: int, n_features: int, *, k: int | None = None, eigengap: float | None = None) -> dict:
        """Noise scale, threshold and predicted error for a data size; reads no data.

        With the default threshold (noise level plus sampling level, needs ``sigma``) every
        entry of ``Sigma_hat + E - Sigma`` is below the threshold w.p. >= 1 - 2 beta, and for
        a k-RCS ``Sigma`` Lemma 3(1) gives ``||T(Sigma_hat + E) - Sigma||_op <= 2 k lambda``.
        With ``k`` (row sparsity of Sigma) and ``eigengap`` (absolute), ``sin2_bound`` is
        Davis-Kahan on that. ``lambda``, hence the bound, grows like ``d`` through the noise.
        """
        p = self._covariance_estimator().plan(n_samples, n_features)
        out = dict(p)
        if k is not None:
            k = check_int(k, "k", low=1, high=int(n_features))
            op = 2 * k * p["threshold"]
            out["operator_error_bound"] = op if self.sigma is not None and self.threshold is None else None
            if eigengap is not None and out["operator_error_bound"] is not None:
                out["sin2_bound"] = davis_kahan_sin2(op, eigengap)
        return out

    def fit(self, X: Any, y: Any = None) -> "GaussianPCA":
        """Fit the Wang-Xu covariance and release its top eigenvector (one PrivacyWarning when seeded)."""
        cov_rel = self._covariance_estimator()._release(X)
        v, lam = leading_eigenvector(cov_rel.values["covariance"])
        rel = warn_if_unsafe(_pca_release(cov_rel, v[None, :], lam, "post-processing"))
        self.covariance_release_ = cov_rel
        self.covariance_ = cov_rel.values["covariance"]
        self.components_ = v[None, :]
        self.noise_scale_ = cov_rel.noise_scales["gaussian"]
        self.clip_ = cov_rel.parameters["clip"]
        self.threshold_ = cov_rel.parameters["threshold"]
        self.privacy_ = rel.privacy
        self.release_ = rel
        return self


class ThresholdedPCA(Estimator):
    """Top eigenvector of the hard-thresholded empirical second moment. **NOT PRIVATE.**

    Parameters
    ----------
    threshold, sigma, scheduler, tile_size, on_nonfinite, timeout
        Passed to :class:`~dpdist.baselines.ThresholdedCovariance`.

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
                 timeout: float | None = DEFAULT_TIMEOUT) -> None:
        self.threshold = threshold
        self.sigma = sigma
        self.scheduler = scheduler
        self.tile_size = tile_size
        self.on_nonfinite = on_nonfinite
        self.timeout = timeout

    def plan(self, n_samples: int, n_features: int, *, k: int | None = None, eigengap: float | None = None,
             beta: float = 0.1) -> dict:
        """Threshold and predicted error (no noise; NOT private); reads no data.

        With ``sigma`` and the default threshold (Fact 1's entrywise sampling level), Lemma
        3(1) gives ``||T(Sigma_hat) - Sigma||_op <= 2 k lambda`` for a k-RCS Sigma; with
        ``eigengap``, ``sin2_bound`` is Davis-Kahan on that.
        """
        n = check_int(n_samples, "n_samples", low=2)
        d = check_int(n_features, "n_features", low=2)
        check_positive(self.threshold, "threshold", allow_none=True)
        check_positive(self.sigma, "sigma", allow_none=True)
        out: dict = {"n_samples": n, "n_features": d, "private": False, "noise_scale": 0.0}
        if self.threshold is not None:
            out["threshold"] = float(self.threshold)
        elif self.sigma is not None:
            out["threshold"] = bickel_levina_threshold(self.sigma, n, d, beta)
        if k is not None and self.sigma is not None and self.threshold is None:
            k = check_int(k, "k", low=1, high=d)
            out["operator_error_bound"] = 2 * k * out["threshold"]
            if eigengap is not None:
                out["sin2_bound"] = davis_kahan_sin2(out["operator_error_bound"], eigengap)
        return out

    def fit(self, X: Any, y: Any = None) -> "ThresholdedPCA":
        """Top eigenvector of the thresholded second moment (NOT PRIVATE: one PrivacyWarning)."""
        cov_rel = ThresholdedCovariance(threshold=self.threshold, sigma=self.sigma, scheduler=self.scheduler,
                                        tile_size=self.tile_size, on_nonfinite=self.on_nonfinite,
                                        timeout=self.timeout)._release(X)
        v, lam = leading_eigenvector(cov_rel.values["covariance"])
        rel = warn_if_unsafe(_pca_release(cov_rel, v[None, :], lam, "NOT PRIVATE"))
        self.covariance_ = cov_rel.values["covariance"]
        self.components_ = v[None, :]
        self.threshold_ = cov_rel.parameters["threshold"]
        self.release_ = rel
        return self
