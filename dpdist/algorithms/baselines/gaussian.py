"""Wang-Xu style private covariance: symmetric Gaussian noise on the whole clipped second
moment, then hard thresholding (Wang and Xu 2021; ALGORITHMS.md section 4)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dpdist._validation import check_int, check_positive, check_probability
from dpdist.algorithms._base import Estimator, check_nonfinite, nonfinite_note, reports_empirical
from dpdist.algorithms.baselines._common import triples_to_csr
from dpdist.algorithms.baselines.thresholded import ThresholdedCovariancePlan, bickel_levina_threshold
from dpdist.data.validation import as_dask_array, chunk_reading_notes
from dpdist.engine.gram import DEFAULT_TILE, clipped_second_moment, nonfinite_guard
from dpdist.engine.runtime import DEFAULT_TIMEOUT, check_scheduler, check_timeout, compute
from dpdist.engine.threshold import threshold_triples
from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import release_guarantee
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
from dpdist.privacy.calibration import subgaussian_clip, wang_xu_calibration
from dpdist.privacy.mechanisms.base import residual_note
from dpdist.privacy.mechanisms.gaussian import wang_xu_mechanism
from dpdist.privacy.noise import resolve_random_state
from dpdist.privacy.release import Release, warn_if_unsafe

__all__ = ["GaussianCovariance", "GaussianCovariancePlan", "WangXuCovariance", "wang_xu_noise_threshold"]

MECHANISM = "Wang-Xu Gaussian covariance (symmetric Gaussian noise on the clipped second moment, then thresholding)"


def wang_xu_noise_threshold(noise_sigma: float, n_features: int, beta: float = 0.1) -> float:
    """``noise_sigma * sqrt(2 log(d^2 / beta))``: with probability >= 1 - beta no pure-noise
    entry among the d^2 survives thresholding (Gaussian tail and a union bound)."""
    return noise_sigma * math.sqrt(2 * math.log(n_features**2 / beta))


@dataclass(frozen=True, kw_only=True)
class GaussianCovariancePlan(ThresholdedCovariancePlan):
    """:meth:`GaussianCovariance.plan`: a :class:`~dpdist.privacy.plan.Plan` whose
    ``noise_scale`` is the Gaussian standard deviation per released entry.

    ``error_bound`` is the largest entry error ``||M - Sigma||_max <= t + lambda_samp +
    lambda_noise`` (probability >= 1 - 2 beta): every entry of ``Sigma_hat + E - Sigma`` is
    below ``lambda_samp`` (Fact 1) plus ``lambda_noise`` (:func:`wang_xu_noise_threshold`), and
    hard thresholding at ``t`` moves an entry by at most ``t`` more. **Scale** (vacuity):
    ``sigma**2`` (every entry of a sigma-sub-Gaussian covariance is at most sigma^2); with
    ``clip`` only, ``sigma = clip`` (clipped entries are clip-sub-Gaussian).
    """

    epsilon: float
    delta: float
    clip: float
    sensitivity: float
    float_factor: float
    gaussian_sigma: float
    rule: str
    noise_threshold: float


class GaussianCovariance(Estimator):
    """(epsilon, delta)-DP covariance by the Gaussian mechanism on the clipped second moment.

    Parameters
    ----------
    epsilon, delta : float
    sigma : float, optional
        Sub-Gaussian scale: sets ``clip`` by R = sigma sqrt(2 log(6 n d / beta)) and the
        sampling part of the default threshold.
    clip : float, optional
        Entrywise truncation level R. One of sigma / clip is required.
    threshold : float, optional
        Hard threshold applied after the noise. Default: the noise level
        :func:`wang_xu_noise_threshold` plus, when sigma is given, the sampling level
        :func:`~dpdist.algorithms.baselines.thresholded.bickel_levina_threshold`.
    random_state : None or int
    scheduler, timeout
        Where and how long the fit may run (:mod:`dpdist.engine.runtime`).
    on_nonfinite : {"zero", "raise"}, default "zero"
        "zero": rows holding NaN or inf become zero rows before any statistic (uncounted);
        "raise": explicit validation mode (reveals one bit, recorded in the release).

    Attributes
    ----------
    covariance_ : scipy.sparse.csr_array (d, d)
    noise_scale_ : float
        Gaussian standard deviation per released entry.
    clip_, threshold_, privacy_, release_

    Notes
    -----
    **Guarantee.** (epsilon, delta)-DP, replace-one neighbours, for any input.
    **Sensitivity.** Rows clipped entrywise to [-R, R] have ``||y y^T||_F <= R^2 d``, so
    replacing one row moves ``(1/n) Y^T Y`` by at most ``2 R^2 d / n`` in Frobenius norm; the
    released upper triangle (diagonal included) has at most that L2 sensitivity.
    **Mechanism.** i.i.d. N(0, s^2) on the upper triangle, mirrored (symmetric noise), with s
    from :func:`dpdist.privacy.calibration.gaussian_sigma` (DR14 Theorem A.1 for epsilon < 1,
    the analytic Gaussian mechanism of Balle-Wang 2018 for epsilon >= 1). Thresholding is
    post-processing. Floating point: entries are clipped before the product and the noise is
    calibrated for ``kappa(n)`` times the sensitivity
    (:func:`~dpdist.privacy.calibration.gram_rounding_factor`), which bounds the computed
    matrix. The noise grows linearly with d: this is the baseline PrivCov is
    compared against (better below d of roughly 64 (k+1) log(d / delta_row)).
    Noise is added tile by tile on the workers; only entries surviving the threshold leave.
    **Float-safe noise.** Released entries are lattice points with an exactly sampled rounded
    Gaussian (:mod:`dpdist.privacy.mechanisms.gaussian`, where the argument is written); the
    release records the mechanism's event and states the requested (epsilon, delta).
    The dense d x d second moment is formed tile by tile, never whole.
    """

    def __init__(self, epsilon: float, delta: float, *, sigma: float | None = None, clip: float | None = None,
                 threshold: float | None = None, random_state: int | None = None, beta: float = 0.1,
                 scheduler: Any = None, tile_size: int = DEFAULT_TILE, on_nonfinite: str = "zero",
                 timeout: float | None = DEFAULT_TIMEOUT, ledger: Any = None, dataset: str | None = None):
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
        self.ledger = ledger
        self.dataset = dataset

    def _check_params(self) -> tuple:
        eps = check_epsilon(self.epsilon)
        delta = check_delta(self.delta)
        beta = check_probability(self.beta, "beta")
        sigma = check_positive(self.sigma, "sigma", allow_none=True)
        clip = check_positive(self.clip, "clip", allow_none=True)
        threshold = check_positive(self.threshold, "threshold", allow_none=True)
        if sigma is None and clip is None:
            raise ValidationError("give either sigma (the sub-Gaussian scale) or clip (the truncation level R)")
        return eps, delta, beta, sigma, clip, threshold

    def _resolve(self, n: int, d: int) -> dict:
        eps, delta, beta, sigma, clip, threshold = self._check_params()
        R = clip if clip is not None else subgaussian_clip(sigma, n, d, beta)
        cal = wang_xu_calibration(eps, delta, n, d, R)
        if threshold is not None:
            lam = threshold
        else:
            lam = wang_xu_noise_threshold(cal["gaussian_sigma"], d, beta)
            if sigma is not None:
                lam += bickel_levina_threshold(sigma, n, d, beta)
        return {"epsilon": eps, "delta": delta, "clip": R, "threshold": lam, **cal}

    @reports_empirical("wang_xu")
    def plan(self, n_samples: int, n_features: int) -> GaussianCovariancePlan:
        """Clip, Gaussian noise scale, threshold and the entrywise error bound for a data
        size (:class:`GaussianCovariancePlan`); reads no data."""
        n = check_int(n_samples, "n_samples", low=2)
        d = check_int(n_features, "n_features", low=2)
        p = self._resolve(n, d)
        beta = float(self.beta)
        sigma = float(self.sigma) if self.sigma is not None else p["clip"]
        noise = wang_xu_noise_threshold(p["gaussian_sigma"], d, beta)
        samp = bickel_levina_threshold(sigma, n, d, beta)
        return GaussianCovariancePlan(
            n_samples=n,
            n_features=d,
            privacy=ApproxDP(p["epsilon"], p["delta"]),
            noise_scale=p["gaussian_sigma"],
            error_bound=p["threshold"] + samp + noise,
            error_metric="||M - Sigma||_max (largest entry error), w.p. >= 1 - 2 beta",
            error_scale=sigma * sigma,
            error_scale_rule="sigma**2" if self.sigma is not None else
            "clip**2: no sigma given, clipped entries are clip-sub-Gaussian",
            sigma=None if self.sigma is None else float(self.sigma),
            beta=beta,
            sampling_threshold=samp,
            noise_threshold=noise,
            **p,
        )

    def _fit_release(self, X: Any) -> Release:
        return warn_if_unsafe(self._release(X))

    def _fitted_attributes(self, rel: Release) -> dict:
        return {
            "covariance_": rel.values["covariance"],
            "noise_scale_": rel.noise_scales["gaussian"],
            "clip_": rel.parameters["clip"],
            "threshold_": rel.parameters["threshold"],
            "privacy_": rel.privacy,
            "release_": rel,
        }

    def _release(self, X: Any) -> Release:
        """The release of one fit (no warning, no attributes: :class:`GaussianPCA` uses it)."""
        tile = check_int(self.tile_size, "tile_size")
        check_scheduler(self.scheduler)
        timeout = check_timeout(self.timeout)
        check_nonfinite(self.on_nonfinite)
        self._check_params()
        seed = resolve_random_state(self.random_state)
        X = as_dask_array(X)
        n, d = X.shape
        p = self._resolve(n, d)
        Xg, finite = nonfinite_guard(X, self.on_nonfinite)
        S = clipped_second_moment(Xg, p["clip"], tile=tile)
        mech = wang_xu_mechanism(p, d)
        results = compute(*threshold_triples(S, p["threshold"], guard=finite, release=mech.release(seed)),
                          scheduler=self.scheduler, timeout=timeout)
        M = triples_to_csr(list(results), d)
        notes = [residual_note(d * (d + 1) // 2, mech.noise), f"Gaussian scale rule: {p['rule']}",
                 nonfinite_note(self.on_nonfinite), *chunk_reading_notes(X)]
        return Release(
            mechanism=MECHANISM,
            privacy=release_guarantee([mech.event()], budget=ApproxDP(p["epsilon"], p["delta"])),
            parameters={"n_samples": n, "n_features": d, "sigma": self.sigma, "on_nonfinite": self.on_nonfinite, **p},
            noise_scales={"gaussian": p["gaussian_sigma"]},
            values={"covariance": M},
            seeding=seed.describe(),
            notes=tuple(notes),
            events=(("gaussian", mech.event()),),
            mechanisms=(mech.describe(),),
        )


#: The Wang-Xu baseline's canonical name (``--method wang-xu`` on the command line): the same
#: class as :class:`GaussianCovariance`, whose name is fixed public API.
WangXuCovariance = GaussianCovariance
