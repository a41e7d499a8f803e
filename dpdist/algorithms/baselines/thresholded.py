"""Non-private hard-thresholded covariance (Bickel and Levina 2008/09). NOT PRIVATE."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdist._validation import check_int, check_positive, check_probability
from dpdist.algorithms._base import Estimator, check_nonfinite, nonfinite_note, reports_empirical
from dpdist.algorithms._centering import DEFAULT_MEAN_FRACTION, check_centering
from dpdist.algorithms.baselines._common import ThresholdPlanBase, triples_to_csr
from dpdist.data.validation import as_dask_array, chunk_reading_notes
from dpdist.engine.gram import DEFAULT_TILE, clipped_second_moment, nonfinite_guard
from dpdist.engine.runtime import check_scheduler, compute
from dpdist.engine.threshold import threshold_triples
from dpdist.exceptions import ValidationError
from dpdist.algorithms._utility import SAMPLING_CONSTANT
from dpdist.privacy.release import Release, warn_if_unsafe

NOT_PRIVATE_REASON = "NOT PRIVATE: non-private reference estimator (no noise)"

__all__ = ["ThresholdedCovariance", "ThresholdedCovariancePlan", "bickel_levina_threshold"]


def bickel_levina_threshold(sigma: float, n_samples: int, n_features: int, beta: float = 0.1) -> float:
    """Default threshold ``C sigma^2 (sqrt(log(6d/beta)/n) + log(6d/beta)/n)``: Fact 1's
    entrywise sampling error (C = SAMPLING_CONSTANT), i.e. lambda ~ sigma^2 sqrt(log d / n)."""
    t = math.log(6 * n_features / beta)
    return SAMPLING_CONSTANT * sigma**2 * (math.sqrt(t / n_samples) + t / n_samples)


@dataclass(frozen=True, kw_only=True)
class ThresholdedCovariancePlan(ThresholdPlanBase):
    """:meth:`ThresholdedCovariance.plan` (NOT PRIVATE: ``privacy`` is None, ``noise_scale`` 0).

    With ``sigma``, ``error_bound`` is the largest entry error ``||M - Sigma||_max <= t +
    lambda_samp`` (probability >= 1 - beta; ``lambda_samp`` is Fact 1's entrywise sampling
    error, :func:`bickel_levina_threshold`, and hard thresholding at ``t`` moves an entry by at
    most ``t`` more). **Scale** (vacuity): ``sigma**2`` (every entry of a sigma-sub-Gaussian
    covariance is at most sigma^2). Without ``sigma`` there is no model, hence no prediction.
    Its fields are those of :class:`~dpdist.algorithms.baselines._common.ThresholdPlanBase`.
    """


class ThresholdedCovariance(Estimator):
    """Hard-thresholded empirical second moment ``T_lambda((1/n) X^T X)``. **Not private.**

    Parameters
    ----------
    threshold : float, optional
        lambda. Entries with ``|S_ij| < lambda`` are set to 0 (the diagonal is kept).
    sigma : float, optional
        Sub-Gaussian scale; when ``threshold`` is None, lambda is
        :func:`bickel_levina_threshold` (sigma, n, d).
    scheduler
        Where the fit runs (:mod:`dpdist.engine.runtime`).
    on_nonfinite : {"zero", "raise"}, default "zero"
        As for the private estimators.
    assume_centered : bool, default False
        False: the data are centred at ``mean`` when given, else at their exact empirical mean
        (this estimator is not private); True: the second moment ``(1/n) sum x x^T``.
    mean : array-like (d,), optional
        A mean to centre at.

    Attributes
    ----------
    covariance_ : scipy.sparse.csr_array
    location_ : ndarray (d,)
        The mean the data were centred at (zeros with ``assume_centered=True``).
    threshold_ : float
    release_ : Release
        With ``private=False`` and ``privacy=None``.

    Notes
    -----
    No privacy guarantee: this is the non-private reference of the comparisons (BL09 in
    the COLT 2026 paper's Table 1). Its output is labelled "not private" in its metadata and
    every fit emits a :class:`~dpdist.exceptions.PrivacyWarning`. The same-seed neighbour
    bound does not apply (there is no noise and no sensitivity bound: the rows are not
    clipped). A second moment that overflows float64 (entries beyond about 1e154) is refused
    rather than released as inf.
    """

    def __init__(self, *, threshold: float | None = None, sigma: float | None = None,
                 scheduler: Any = None, tile_size: int = DEFAULT_TILE, on_nonfinite: str = "zero",
                 assume_centered: bool = False, mean: Any = None):
        self.threshold = threshold
        self.sigma = sigma
        self.assume_centered = assume_centered
        self.mean = mean
        self.scheduler = scheduler
        self.tile_size = tile_size
        self.on_nonfinite = on_nonfinite

    def _fit_release(self, X: Any) -> Release:
        """Compute the thresholded second moment (NOT PRIVATE: one PrivacyWarning)."""
        return warn_if_unsafe(self._release(X))

    def _fitted_attributes(self, rel: Release) -> dict:
        return {"covariance_": rel.values["covariance"], "location_": exact_location(rel),
                "threshold_": rel.parameters["threshold"], "release_": rel}

    @reports_empirical("thresholded")
    def plan(self, n_samples: int, n_features: int, *, beta: float = 0.1) -> ThresholdedCovariancePlan:
        """Threshold and predicted entrywise error (no noise; NOT private); reads no data."""
        return thresholded_plan(ThresholdedCovariancePlan, self.threshold, self.sigma, n_samples, n_features, beta)

    def _release(self, X: Any) -> Release:
        """The release of one fit (no warning, no attributes: :class:`ThresholdedPCA` uses it)."""
        threshold = check_positive(self.threshold, "threshold", allow_none=True)
        sigma = check_positive(self.sigma, "sigma", allow_none=True)
        tile = check_int(self.tile_size, "tile_size")
        check_scheduler(self.scheduler)
        check_nonfinite(self.on_nonfinite)
        if self.threshold is None and self.sigma is None:
            raise ValidationError("give either threshold or sigma")
        check_centering(self.assume_centered, self.mean, DEFAULT_MEAN_FRACTION, None)
        X = as_dask_array(X)
        n, d = X.shape
        centering = check_centering(self.assume_centered, self.mean, DEFAULT_MEAN_FRACTION, None, n_features=d)
        lam = threshold if threshold is not None else bickel_levina_threshold(sigma, n, d)
        Xg, finite = nonfinite_guard(X, self.on_nonfinite)
        mu = centering.mean
        if centering.private:  # not private here: the exact empirical mean
            mu = np.asarray(compute(Xg.mean(axis=0, dtype=np.float64), scheduler=self.scheduler,
                                    noised=False)[0], dtype=np.float64)
        Xc = Xg if mu is None else Xg - mu
        S = clipped_second_moment(Xc, math.inf, tile=tile)  # no clipping: plain (1/n) X^T X
        results = compute(*threshold_triples(S, lam, guard=finite), scheduler=self.scheduler,
                          noised=False)
        M = triples_to_csr(list(results), d)
        if not np.isfinite(M.data).all():
            raise ValidationError(
                "the empirical second moment overflows float64 (entries beyond about 1e154); nothing was "
                "released: rescale the data (this non-private estimator does not clip)"
            )
        return Release(
            mechanism="Hard-thresholded empirical second moment (Bickel-Levina)",
            privacy=None,
            parameters={"n_samples": n, "n_features": d, "threshold": lam, "sigma": self.sigma,
                        "on_nonfinite": self.on_nonfinite, "centering": _exact_record(centering)},
            noise_scales={},
            values={"covariance": M, **({} if mu is None else {"mean": mu})},
            notes=(NOT_PRIVATE_REASON, nonfinite_note(self.on_nonfinite), *chunk_reading_notes(X)),
            private=False,
            not_private_reasons=(NOT_PRIVATE_REASON,),
        )



def _exact_record(centering) -> dict:
    """How the NOT PRIVATE estimator centred (the default: the exact empirical mean)."""
    if not centering.private:
        return centering.record()
    return {"mode": "exact-mean", "estimate": "covariance (1/n) sum (x - mean)(x - mean)^T",
            "mean_source": "the exact empirical mean (NOT PRIVATE, as this estimator)"}


def exact_location(rel: Release) -> np.ndarray:
    """The mean a release centred at (zeros when the data were taken as centred)."""
    mu = rel.values.get("mean")
    return np.zeros(rel.parameters["n_features"]) if mu is None else np.asarray(mu, dtype=np.float64)


def thresholded_plan(cls: type, threshold, sigma, n_samples: int, n_features: int, beta: float, **extra):
    """The plan of a thresholded second moment without noise (:class:`ThresholdedCovariancePlan`
    or a subclass, with ``extra`` fields)."""
    n = check_int(n_samples, "n_samples", low=2)
    d = check_int(n_features, "n_features", low=2)
    threshold = check_positive(threshold, "threshold", allow_none=True)
    sigma = check_positive(sigma, "sigma", allow_none=True)
    beta = check_probability(beta, "beta")
    if threshold is None and sigma is None:
        raise ValidationError("give either threshold or sigma")
    samp = None if sigma is None else bickel_levina_threshold(sigma, n, d, beta)
    t = threshold if threshold is not None else samp
    return cls(
        n_samples=n,
        n_features=d,
        privacy=None,
        noise_scale=0.0,
        error_bound=None if samp is None else t + samp,
        error_metric="||M - Sigma||_max (largest entry error), w.p. >= 1 - beta",
        error_scale=None if sigma is None else sigma * sigma,
        error_scale_rule="sigma**2" if sigma is not None else "",
        threshold=t,
        sampling_threshold=samp,
        sigma=sigma,
        beta=beta,
        **extra,
    )
