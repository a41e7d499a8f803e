"""Wang-Xu style private covariance: symmetric Gaussian noise on the whole clipped second
moment, then hard thresholding (Wang and Xu 2021; ALGORITHMS.md section 4)."""

from __future__ import annotations

import math
from typing import Any

from dpdist.algorithms._base import Estimator, check_int, check_nonfinite, check_positive, nonfinite_note
from dpdist.algorithms.baselines._common import triples_to_csr
from dpdist.algorithms.baselines.thresholded import bickel_levina_threshold
from dpdist.data.validation import as_dask_array
from dpdist.engine.gram import DEFAULT_TILE, clipped_second_moment, nonfinite_guard
from dpdist.engine.runtime import DEFAULT_TIMEOUT, check_scheduler, check_timeout, compute
from dpdist.engine.threshold import threshold_triples
from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
from dpdist.privacy.calibration import subgaussian_clip, wang_xu_calibration
from dpdist.privacy.noise import FLOAT_NOISE_CAVEAT, NoiseField, resolve_random_state
from dpdist.privacy.release import Release, warn_if_unsafe

__all__ = ["GaussianCovariance", "wang_xu_noise_threshold"]

MECHANISM = "Wang-Xu Gaussian covariance (symmetric Gaussian noise on the clipped second moment, then thresholding)"


def wang_xu_noise_threshold(noise_sigma: float, n_features: int, beta: float = 0.1) -> float:
    """``noise_sigma * sqrt(2 log(d^2 / beta))``: with probability >= 1 - beta no pure-noise
    entry among the d^2 survives thresholding (Gaussian tail and a union bound)."""
    return noise_sigma * math.sqrt(2 * math.log(n_features**2 / beta))


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
    The dense d x d second moment is formed tile by tile, never whole.
    """

    def __init__(self, epsilon: float, delta: float, *, sigma: float | None = None, clip: float | None = None,
                 threshold: float | None = None, random_state: int | None = None, beta: float = 0.1,
                 scheduler: Any = None, tile_size: int = DEFAULT_TILE, on_nonfinite: str = "zero",
                 timeout: float | None = DEFAULT_TIMEOUT):
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

    def _resolve(self, n: int, d: int) -> dict:
        eps = check_epsilon(self.epsilon)
        delta = check_delta(self.delta)
        beta = check_positive(self.beta, "beta")
        check_positive(self.sigma, "sigma", allow_none=True)
        check_positive(self.clip, "clip", allow_none=True)
        check_positive(self.threshold, "threshold", allow_none=True)
        if self.sigma is None and self.clip is None:
            raise ValidationError("give either sigma (the sub-Gaussian scale) or clip (the truncation level R)")
        R = float(self.clip) if self.clip is not None else subgaussian_clip(self.sigma, n, d, beta)
        cal = wang_xu_calibration(eps, delta, n, d, R)
        if self.threshold is not None:
            lam = float(self.threshold)
        else:
            lam = wang_xu_noise_threshold(cal["gaussian_sigma"], d, beta)
            if self.sigma is not None:
                lam += bickel_levina_threshold(self.sigma, n, d, beta)
        return {"epsilon": eps, "delta": delta, "clip": R, "threshold": lam, **cal}

    def plan(self, n_samples: int, n_features: int) -> dict:
        """Clip, Gaussian noise scale and threshold for a data size; reads no data."""
        n = check_int(n_samples, "n_samples", low=2)
        d = check_int(n_features, "n_features", low=2)
        p = self._resolve(n, d)
        return {"n_samples": n, "n_features": d, "noise_scale": p["gaussian_sigma"], **p}

    def fit(self, X: Any, y: Any = None) -> "GaussianCovariance":
        """Release the private covariance of ``X`` (one PrivacyWarning when seeded)."""
        rel = warn_if_unsafe(self._release(X))
        self.covariance_ = rel.values["covariance"]
        self.noise_scale_ = rel.noise_scales["gaussian"]
        self.clip_ = rel.parameters["clip"]
        self.threshold_ = rel.parameters["threshold"]
        self.privacy_ = rel.privacy
        self.release_ = rel
        return self

    def _release(self, X: Any) -> Release:
        """The release of one fit (no warning, no attributes: :class:`GaussianPCA` uses it)."""
        tile = check_int(self.tile_size, "tile_size")
        check_scheduler(self.scheduler)
        timeout = check_timeout(self.timeout)
        check_nonfinite(self.on_nonfinite)
        check_epsilon(self.epsilon)
        check_delta(self.delta)
        seed = resolve_random_state(self.random_state)
        X = as_dask_array(X)
        n, d = X.shape
        p = self._resolve(n, d)
        Xg, finite = nonfinite_guard(X, self.on_nonfinite)
        S = clipped_second_moment(Xg, p["clip"], tile=tile)
        noise = NoiseField(seed, "wang-xu/gaussian", "gaussian", p["gaussian_sigma"], symmetric=True)
        results = compute(*threshold_triples(S, p["threshold"], noise, guard=finite), scheduler=self.scheduler,
                          timeout=timeout)
        M = triples_to_csr(list(results), d)
        notes = [FLOAT_NOISE_CAVEAT, f"Gaussian scale rule: {p['rule']}", nonfinite_note(self.on_nonfinite)]
        return Release(
            mechanism=MECHANISM,
            privacy=ApproxDP(p["epsilon"], p["delta"]),
            parameters={"n_samples": n, "n_features": d, "sigma": self.sigma, "on_nonfinite": self.on_nonfinite, **p},
            noise_scales={"gaussian": p["gaussian_sigma"]},
            values={"covariance": M},
            seeding=seed.describe(),
            notes=tuple(notes),
        )
