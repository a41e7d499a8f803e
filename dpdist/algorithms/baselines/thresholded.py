"""Non-private hard-thresholded covariance (Bickel and Levina 2008/09). NOT PRIVATE."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdist._validation import check_int, check_positive, check_probability
from dpdist.algorithms._base import Estimator, nonfinite_note, reports_empirical
from dpdist.algorithms._centering import CENTERING_CONSTRAINTS, centering_of
from dpdist.algorithms._constraints import Params, Real
from dpdist.algorithms.baselines._common import ThresholdPlanBase, triples_to_csr
from dpdist.data.validation import chunk_reading_notes
from dpdist.engine.gram import DEFAULT_TILE, clipped_second_moment, nonfinite_guard
from dpdist.engine.runtime import compute
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

    #: The parameters' rules, in the order a fit checks them (after the runtime ones of
    #: :data:`~dpdist.algorithms._base.BASE_PARAMETER_CONSTRAINTS`).
    _parameter_constraints = {
        "threshold": Real(low=0.0, allow_none=True),
        "sigma": Real(low=0.0, allow_none=True),
        "assume_centered": CENTERING_CONSTRAINTS["assume_centered"],
        "mean": CENTERING_CONSTRAINTS["mean"],
    }

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

    def _validate_together(self, p: Params, n_samples: Any, n_features: Any) -> Params:
        """The rules between the parameters and the shape: one of threshold / sigma, the mean's
        length; the threshold the fit applies."""
        if p.threshold is None and p.sigma is None:
            raise ValidationError("give either threshold or sigma")
        n = check_int(n_samples, "n_samples", low=2)
        d = check_int(n_features, "n_features", low=2)
        centering = centering_of(p, n_features=d)
        lam = p.threshold if p.threshold is not None else bickel_levina_threshold(p.sigma, n, d)
        return p.replace(n_samples=n, n_features=d, centering=centering, lam=lam)

    def _release_validated(self, X: Any, p: Params, plan: Any) -> Release:
        """Compute the thresholded second moment (NOT PRIVATE: one PrivacyWarning)."""
        return warn_if_unsafe(self._compute(X, p))

    def _fitted_attributes(self, rel: Release) -> dict:
        return {"covariance_": rel.values["covariance"], "location_": exact_location(rel),
                "threshold_": rel.parameters["threshold"], "release_": rel}

    def plan(self, n_samples: int, n_features: int, *, beta: float = 0.1) -> ThresholdedCovariancePlan:
        """Threshold and predicted entrywise error (no noise; NOT private); reads no data."""
        return self._plan_validated(self._validated_at(n_samples, n_features), check_probability(beta, "beta"))

    @reports_empirical("thresholded")
    def _plan_validated(self, p: Params, beta: float = 0.1) -> ThresholdedCovariancePlan:
        return _thresholded_plan(ThresholdedCovariancePlan, p.threshold, p.sigma, p.n_samples, p.n_features, beta)

    def _compute(self, X: Any, p: Params) -> Release:
        """The release from the opened input and validated values; checks nothing again."""
        n, d, centering, lam, scheduler = p.n_samples, p.n_features, p.centering, p.lam, p.scheduler
        Xg, finite = nonfinite_guard(X, p.on_nonfinite)
        mu = centering.mean
        if centering.private:  # not private here: the exact empirical mean
            mu = np.asarray(compute(Xg.mean(axis=0, dtype=np.float64), scheduler=scheduler,
                                    noised=False)[0], dtype=np.float64)
        Xc = Xg if mu is None else Xg - mu
        S = clipped_second_moment(Xc, math.inf, tile=p.tile_size)  # no clipping: plain (1/n) X^T X
        results = compute(*threshold_triples(S, lam, guard=finite), scheduler=scheduler,
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
            parameters={"n_samples": n, "n_features": d, "threshold": lam, "sigma": self.sigma,  # sigma as given
                        "on_nonfinite": p.on_nonfinite, "centering": _exact_record(centering)},
            noise_scales={},
            values={"covariance": M, **({} if mu is None else {"mean": mu})},
            notes=(NOT_PRIVATE_REASON, nonfinite_note(p.on_nonfinite), *chunk_reading_notes(X)),
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
    return _thresholded_plan(cls, threshold, sigma, n, d, beta, **extra)


def _thresholded_plan(cls: type, threshold: float | None, sigma: float | None, n: int, d: int, beta: float,
                      **extra):
    """:func:`thresholded_plan` on validated values."""
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
