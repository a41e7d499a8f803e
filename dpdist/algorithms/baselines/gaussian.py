"""Wang-Xu style private covariance: symmetric Gaussian noise on the whole clipped second
moment, then hard thresholding (Wang and Xu 2021), the dense baseline the paper compares against."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dpdist._validation import check_int
from dpdist.algorithms._base import Estimator, nonfinite_note, reports_empirical
from dpdist.algorithms._centering import (
    CENTERING_CONSTRAINTS,
    DEFAULT_MEAN_FRACTION,
    centering_of,
    centre_data,
    centring_error,
    mean_mechanism,
    mean_notes,
    stage_guarantee,
)
from dpdist.algorithms._constraints import Delta, Epsilon, Params, Real
from dpdist.algorithms.baselines._common import ThresholdPlanBase, triples_to_csr
from dpdist.algorithms.baselines.thresholded import bickel_levina_threshold
from dpdist.data.validation import chunk_reading_notes
from dpdist.engine.gram import DEFAULT_TILE, clipped_second_moment, nonfinite_guard
from dpdist.engine.runtime import compute
from dpdist.engine.threshold import threshold_triples
from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.mechanisms.gaussian import wang_xu_calibration
from dpdist.privacy.mechanisms.privcov.calibration import subgaussian_clip
from dpdist.privacy.mechanisms.base import residual_note
from dpdist.privacy.mechanisms.gaussian import wang_xu_mechanism
from dpdist.privacy.noise.streams import resolve_random_state
from dpdist.privacy.release import Release, warn_if_unsafe

__all__ = ["GaussianCovariance", "GaussianCovariancePlan", "wang_xu_noise_threshold"]

MECHANISM = "Wang-Xu Gaussian covariance (symmetric Gaussian noise on the clipped second moment, then thresholding)"
#: The private mean and the Gaussian release are both Gaussian mechanisms: they compose
#: exactly in Gaussian DP (:mod:`dpdist.algorithms._centering`).
COMPOSITION = "gdp"


def wang_xu_noise_threshold(noise_sigma: float, n_features: int, beta: float = 0.1) -> float:
    """``noise_sigma * sqrt(2 log(d^2 / beta))``: with probability >= 1 - beta no pure-noise
    entry among the d^2 survives thresholding (Gaussian tail and a union bound)."""
    return noise_sigma * math.sqrt(2 * math.log(n_features**2 / beta))


@dataclass(frozen=True, kw_only=True)
class GaussianCovariancePlan(ThresholdPlanBase):
    """:meth:`GaussianCovariance.plan`: a :class:`~dpdist.algorithms.plan.Plan` whose
    ``noise_scale`` is the Gaussian standard deviation per released entry.

    ``error_bound`` is the largest entry error ``||M - Sigma||_max <= t + lambda_samp +
    lambda_noise`` (probability >= 1 - 2 beta): every entry of ``Sigma_hat + E - Sigma`` is
    below ``lambda_samp`` (Fact 1) plus ``lambda_noise`` (:func:`wang_xu_noise_threshold`), and
    hard thresholding at ``t`` moves an entry by at most ``t`` more. **Scale** (vacuity):
    ``sigma**2`` (every entry of a sigma-sub-Gaussian covariance is at most sigma^2); with
    ``clip`` only, ``sigma = clip`` (clipped entries are clip-sub-Gaussian).

    **Centring.** With a private mean, the Gaussian noise is calibrated at the share
    ``1 - mean_fraction`` of the budget's ``mu^2`` (the two Gaussian stages compose in GDP;
    ``privacy`` is the whole budget) and the bound adds
    ``lambda_center`` (:func:`~dpdist.algorithms._centering.centring_error`, at beta): it then
    holds with probability >= 1 - 3 beta. ``mean_noise_scale`` is the mean's noise.
    """

    epsilon: float
    delta: float
    clip: float
    sensitivity: float
    float_factor: float
    gaussian_sigma: float
    rule: str
    noise_threshold: float
    centering: str = "assume-centered"
    mean_noise_scale: float | None = None
    lambda_center: float = 0.0


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
    scheduler
        Where the fit runs (:mod:`dpdist.engine.runtime`).
    on_nonfinite : {"zero", "raise"}, default "zero"
        "zero": rows holding NaN or inf become zero rows before any statistic (uncounted);
        "raise": explicit validation mode (reveals one bit, recorded in the release).
    assume_centered, mean, mean_fraction, mean_clip
        Centring, as :class:`~dpdist.SparseCovariance`: by default the data are centred at a
        mean released with ``mean_fraction`` of the budget (rows scaled to L2 norm
        ``mean_clip``, default ``clip * sqrt(d)``); ``mean=`` a public mean;
        ``assume_centered=True`` the second moment with the whole budget.

    Attributes
    ----------
    covariance_ : scipy.sparse.csr_array (d, d)
    location_ : ndarray (d,)
        The mean the data were centred at (zeros with ``assume_centered=True``).
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
    from :func:`dpdist.privacy.mechanisms.gaussian.gaussian_sigma` (DR14 Theorem A.1 for epsilon < 1,
    the analytic Gaussian mechanism of Balle-Wang 2018 for epsilon >= 1). Thresholding is
    post-processing. Floating point: entries are clipped before the product and the noise is
    calibrated for ``kappa(n)`` times the sensitivity
    (:func:`~dpdist.privacy.float_rounding.gram_rounding_factor`), which bounds the computed
    matrix. The noise grows linearly with d: this is the baseline PrivCov is
    compared against (better below d of roughly 64 (k+1) log(d / delta_row)).
    Noise is added tile by tile on the workers; only entries surviving the threshold leave.
    **Centring.** The private mean (:mod:`dpdist.privacy.mechanisms.mean`) is released first;
    the rows ``x - mu_hat`` are then clipped: the sensitivity above is unchanged (the mean is
    public by then, a fixed per-row map), and ``clip`` must cover the centred entries. The two
    stages compose exactly in Gaussian DP (:mod:`dpdist.algorithms._centering`).
    **Float-safe noise.** Released entries are lattice points with an exactly sampled rounded
    Gaussian (:mod:`dpdist.privacy.mechanisms.gaussian`, where the argument is written); the
    release records the mechanism's event and states the requested (epsilon, delta).
    The dense d x d second moment is formed tile by tile, never whole.
    """

    #: The parameters' rules, in the order a fit checks them (after the runtime ones of
    #: :data:`~dpdist.algorithms._base.BASE_PARAMETER_CONSTRAINTS`).
    _parameter_constraints = {
        "epsilon": Epsilon(),
        "delta": Delta(),
        "beta": Real(low=0.0, high=1.0),
        "sigma": Real(low=0.0, allow_none=True),
        "clip": Real(low=0.0, allow_none=True),
        "threshold": Real(low=0.0, allow_none=True),
        **CENTERING_CONSTRAINTS,
    }

    def __init__(self, epsilon: float, delta: float, *, sigma: float | None = None, clip: float | None = None,
                 threshold: float | None = None, random_state: int | None = None, beta: float = 0.1,
                 scheduler: Any = None, tile_size: int = DEFAULT_TILE, on_nonfinite: str = "zero",
                 assume_centered: bool = False, mean: Any = None, mean_fraction: float = DEFAULT_MEAN_FRACTION,
                 mean_clip: float | None = None):
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
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip

    def _validate_together(self, p: Params, n_samples: Any, n_features: Any) -> Params:
        """The rules between the parameters and the shape, then what follows from them: the
        clip, the centring and the mean's mechanism, the budget's shares, the Gaussian
        calibration and the threshold (``resolved``, recorded in the release's parameters)."""
        if p.sigma is None and p.clip is None:
            raise ValidationError("give either sigma (the sub-Gaussian scale) or clip (the truncation level R)")
        n = check_int(n_samples, "n_samples", low=2)
        d = check_int(n_features, "n_features", low=2)
        centering = centering_of(p, n_features=d)
        R = p.clip if p.clip is not None else subgaussian_clip(p.sigma, n, d, p.beta)
        mean_share, share = centering.split(p.epsilon, p.delta, COMPOSITION)
        mean_mech = mean_mechanism(centering, mean_share, n, d, R) if centering.private else None
        cal = wang_xu_calibration(share.epsilon, share.delta, n, d, R)
        if p.threshold is not None:
            lam = p.threshold
        else:
            lam = wang_xu_noise_threshold(cal["gaussian_sigma"], d, p.beta)
            if p.sigma is not None:
                lam += bickel_levina_threshold(p.sigma, n, d, p.beta)
        return p.replace(n_samples=n, n_features=d, centering=centering, mean_mech=mean_mech, mean_share=mean_share,
                         share=share, resolved={"epsilon": p.epsilon, "delta": p.delta, "clip": R, "threshold": lam,
                                                **cal})

    def plan(self, n_samples: int, n_features: int) -> GaussianCovariancePlan:
        """Clip, Gaussian noise scale, threshold and the entrywise error bound for a data
        size (:class:`GaussianCovariancePlan`); reads no data."""
        return self._plan_validated(self._validated_at(n_samples, n_features))

    @reports_empirical("wang_xu")
    def _plan_validated(self, v: Params) -> GaussianCovariancePlan:
        n, d, p, beta, centering, mean_mech = v.n_samples, v.n_features, v.resolved, v.beta, v.centering, v.mean_mech
        sigma = v.sigma if v.sigma is not None else p["clip"]
        noise = wang_xu_noise_threshold(p["gaussian_sigma"], d, beta)
        samp = bickel_levina_threshold(sigma, n, d, beta)
        lam_c = centring_error(centering, mean_mech, sigma, n, d, beta)
        return GaussianCovariancePlan(
            n_samples=n,
            n_features=d,
            privacy=ApproxDP(p["epsilon"], p["delta"]),
            noise_scale=p["gaussian_sigma"],
            error_bound=p["threshold"] + samp + noise + lam_c,
            error_metric="||M - Sigma||_max (largest entry error), w.p. >= 1 - "
            + ("3 beta (with the private mean)" if mean_mech is not None else "2 beta"),
            error_scale=sigma * sigma,
            error_scale_rule="sigma**2" if v.sigma is not None else
            "clip**2: no sigma given, clipped entries are clip-sub-Gaussian",
            sigma=v.sigma,
            beta=beta,
            sampling_threshold=samp,
            noise_threshold=noise,
            centering=centering.mode,
            mean_noise_scale=None if mean_mech is None else mean_mech.noise_scales()["gaussian"],
            lambda_center=lam_c,
            **p,
        )

    def _release_validated(self, X: Any, p: Params, plan: Any) -> Release:
        return warn_if_unsafe(self._compute(X, p))

    def _fitted_attributes(self, rel: Release) -> dict:
        return {
            "covariance_": rel.values["covariance"],
            "location_": _location(rel),
            "noise_scale_": rel.noise_scales["gaussian"],
            "clip_": rel.parameters["clip"],
            "threshold_": rel.parameters["threshold"],
            "privacy_": rel.privacy,
            "release_": rel,
        }

    def _compute(self, X: Any, v: Params) -> Release:
        """The release from the opened input and validated values; checks nothing again."""
        tile, scheduler, on_nonfinite = v.tile_size, v.scheduler, v.on_nonfinite
        n, d, p, centering, mean_mech, mean_share, share = (v.n_samples, v.n_features, v.resolved, v.centering,
                                                              v.mean_mech, v.mean_share, v.share)
        seed = resolve_random_state(v.random_state)
        mech = wang_xu_mechanism(p, d)
        privacy = stage_guarantee(ApproxDP(p["epsilon"], p["delta"]), [mech.event()], share, mean_mech, mean_share,
                                   COMPOSITION)
        Xg, finite = nonfinite_guard(X, on_nonfinite)
        Xc, mu = centre_data(Xg, finite, centering, mean_mech, seed, scheduler=scheduler)
        S = clipped_second_moment(Xc, p["clip"], tile=tile)
        results = compute(*threshold_triples(S, p["threshold"], guard=finite, release=mech.release(seed)),
                          scheduler=scheduler)
        M = triples_to_csr(list(results), d)
        notes = [residual_note(d * (d + 1) // 2, mech.noise), f"Gaussian scale rule: {p['rule']}",
                 nonfinite_note(on_nonfinite), *chunk_reading_notes(X)]
        events, mechanisms = [("gaussian", mech.event())], [mech.describe()]
        noise_scales, values = {"gaussian": p["gaussian_sigma"]}, {"covariance": M}
        if mu is not None:
            values["mean"] = mu
        if mean_mech is not None:
            events.insert(0, ("mean", mean_mech.event()))  # in the order they ran
            mechanisms.append(mean_mech.describe())
            noise_scales["mean_gaussian"] = mean_mech.noise_scales()["gaussian"]
            notes.extend(mean_notes(mean_mech))
        return Release(
            mechanism=MECHANISM,
            privacy=privacy,
            # sigma as given (the release has always recorded the argument itself)
            parameters={"n_samples": n, "n_features": d, "sigma": self.sigma, "on_nonfinite": on_nonfinite, **p,
                        "centering": centering.record(mean_mech, centering.composition(p["epsilon"], p["delta"],
                                                                                       COMPOSITION))},
            noise_scales=noise_scales,
            values=values,
            seeding=seed.describe(),
            notes=tuple(notes),
            events=tuple(events),
            mechanisms=tuple(mechanisms),
        )


def _location(rel: Release):
    """The mean a release centred at (zeros when the data were taken as centred)."""
    import numpy as np

    mu = rel.values.get("mean")
    d = rel.parameters["n_features"]
    return np.zeros(d) if mu is None else np.asarray(mu, dtype=np.float64)
