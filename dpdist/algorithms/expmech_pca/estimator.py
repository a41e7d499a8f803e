"""The estimator :class:`ExpMechSparsePCA`: it validates, calls
:func:`~dpdist.algorithms.expmech_pca.release.expmech_pca` and copies the release into ``*_``
attributes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdist._validation import check_int, check_positive
from dpdist.algorithms._base import Estimator, reports_empirical
from dpdist.algorithms._projection import Projection
from dpdist.engine.subsets import DEFAULT_CHUNK_SIZE
from dpdist.exceptions import ValidationError
from dpdist.algorithms._centering import DEFAULT_MEAN_FRACTION, centring_error, check_centering
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.mechanisms.expmech import ExpMechCalibration
from dpdist.privacy.release import Release
from dpdist.algorithms.expmech_pca.plan import ExpMechPlan, expmech_error_bound, expmech_min_samples
from dpdist.algorithms.expmech_pca.release import (
    DEFAULT_BETA,
    DEFAULT_MAX_SUBSETS,
    MECHANISM,
    _calibrate,
    _check_params,
    _check_range,
    _resolve_clip,
    expmech_pca,
)


class ExpMechSparsePCA(Projection, Estimator):
    """Private leading k-sparse principal component by the exponential mechanism (Algorithm 4).

    Parameters
    ----------
    k : int
        Support size.
    epsilon, delta : float
        Privacy budget (replace-one neighbours).
    sigma : float, optional
        Public sub-Gaussian scale (sets the clip level, and is needed by :meth:`plan`).
    clip : float, optional
        Public entry truncation level tau.
    max_subsets : int
        Refusal limit on ``C(d, k)`` (default :data:`DEFAULT_MAX_SUBSETS`).
    beta : float
        Failure probability for the clip level and :meth:`plan`.
    random_state : None or int
        ``None`` for OS entropy; an int seeds the noise (tests and reproduction only).
    scheduler : optional
        Where the graph runs (:func:`dpdist.engine.runtime.compute`).
    on_nonfinite : {"zero", "raise"}, default "zero"
        See :func:`expmech_pca`.
    chunk_size : int
        Subsets per task.

    Attributes
    ----------
    components_ : ndarray of shape (1, n_features)
        Unit vector supported on ``support_``.
    support_ : ndarray of shape (k,)
    noise_scale_ : float
        Gaussian scale of the block release (sigma_priv).
    selection_scale_ : float
        Gumbel scale of the selection, in score units (``8 k tau^2 / (epsilon n)``).
    clip_ : float
    privacy_ : ApproxDP
    release_ : Release

    Notes
    -----
    Guarantee: ``(epsilon, delta)``-DP under replace-one neighbours, Lemma 29 of the COLT
    2026 paper; see :func:`expmech_pca` for sensitivities, the budget split and caveats.
    The cost is ``C(d, k)`` score evaluations (exact enumeration; refused above
    ``max_subsets``). Parameters are validated in :meth:`fit`; a failed fit changes nothing
    (:mod:`dpdist.algorithms._base`).

    Examples
    --------
    >>> from dpdist.data.model2 import make_model2
    >>> m = make_model2(20_000, 20, 2, gap=0.5, lambda1=2.0, random_state=0)
    >>> est = ExpMechSparsePCA(2, 1.0, 1e-6, sigma=m.sigma, random_state=0, scheduler="synchronous")
    >>> est.fit(m.X).components_.shape
    (1, 20)
    """

    def __init__(
        self,
        k: int,
        epsilon: float,
        delta: float,
        *,
        sigma: float | None = None,
        clip: float | None = None,
        max_subsets: int = DEFAULT_MAX_SUBSETS,
        beta: float = DEFAULT_BETA,
        random_state: Any = None,
        scheduler: Any = None,
        on_nonfinite: str = "zero",
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        assume_centered: bool = False,
        mean: Any = None,
        mean_fraction: float = DEFAULT_MEAN_FRACTION,
        mean_clip: float | None = None,
    ) -> None:
        self.k = k
        self.epsilon = epsilon
        self.delta = delta
        self.sigma = sigma
        self.clip = clip
        self.max_subsets = max_subsets
        self.beta = beta
        self.random_state = random_state
        self.scheduler = scheduler
        self.on_nonfinite = on_nonfinite
        self.chunk_size = chunk_size
        self.assume_centered = assume_centered
        self.mean = mean
        self.mean_fraction = mean_fraction
        self.mean_clip = mean_clip

    #: ExpMechPCA accepts one row and one column.
    _min_shape = (1, 1)

    def _fit_release(self, X: Any) -> Release:
        return expmech_pca(
            X,
            self.k,
            self.epsilon,
            self.delta,
            sigma=self.sigma,
            clip=self.clip,
            max_subsets=self.max_subsets,
            beta=self.beta,
            random_state=self.random_state,
            scheduler=self.scheduler,
            on_nonfinite=self.on_nonfinite,
            chunk_size=self.chunk_size,
            assume_centered=self.assume_centered,
            mean=self.mean,
            mean_fraction=self.mean_fraction,
            mean_clip=self.mean_clip,
        )

    def _fitted_attributes(self, rel: Release) -> dict:
        mu = rel.values.get("mean")
        return {
            "release_": rel,
            "components_": rel.values["components"],
            "location_": np.zeros(rel.parameters["n_features"]) if mu is None else np.asarray(mu, dtype=np.float64),
            "support_": rel.values["support"],
            "noise_scale_": rel.noise_scales["block_gaussian_sigma"],
            "selection_scale_": rel.noise_scales["selection_gumbel_scale"],
            "clip_": rel.parameters["clip"],
            "privacy_": rel.privacy,
        }

    def _calibration(self, n_samples: int, n_features: int) -> ExpMechCalibration:
        _check_params(self.k, self.epsilon, self.delta, self.sigma, self.clip, self.max_subsets, self.beta)
        n = check_int(n_samples, "n_samples", low=1)
        d = check_int(n_features, "n_features", low=1)
        tau, _ = _resolve_clip(self.sigma, self.clip, n, d, self.beta)
        return self._centering(n, d, tau)[2]

    def _centering(self, n: int, d: int, tau: float) -> tuple:
        """(centering, mean mechanism or None, the calibration of the selection and block)."""
        centering = check_centering(self.assume_centered, self.mean, self.mean_fraction, self.mean_clip,
                                    n_features=d)
        cal, mech, _, _ = _calibrate(centering, self.epsilon, self.delta, n, d, self.k, tau, self.beta)
        return centering, mech, cal

    def _check_fit(self, n_samples: int, n_features: int) -> None:
        super()._check_fit(n_samples, n_features)
        _check_range(self._calibration(n_samples, n_features), self.max_subsets)

    @reports_empirical("expmech")
    def plan(self, n_samples: int, n_features: int, *, eigengap: float | None = None) -> "ExpMechPlan":
        """Noise scales and the predicted error at this size, without reading data.

        Parameters
        ----------
        n_samples, n_features : int
        eigengap : float, optional
            Absolute eigengap ``lambda_1 - lambda_2`` of the population covariance (a model
            assumption); with it the plan's error is the ``sin^2`` bound of Theorem 7's proof.

        Returns
        -------
        ExpMechPlan
            ``n_subsets``, ``feasible`` (``n_subsets <= max_subsets``), ``clip``,
            ``noise_scales``, the calibration, and ``error``: the pieces of
            :func:`~dpdist.algorithms.expmech_pca.plan.expmech_error_bound`, holding with
            probability >= 1 - beta (with ``clip`` only, computed at ``sigma = clip``).
        """
        cal = self._calibration(n_samples, n_features)
        sigma = float(self.sigma) if self.sigma is not None else cal.clip
        error = expmech_error_bound(cal, sigma, float(self.beta), eigengap)
        centering, mean_mech, _ = self._centering(cal.n_samples, cal.n_features, cal.clip)
        # centring at the released mean moves every k x k block by at most k lambda_center in
        # operator norm: the sampling term's role in the deficit (twice)
        error["eta_center"] = cal.k * centring_error(centering, mean_mech, sigma, cal.n_samples, cal.n_features,
                                                     float(self.beta))
        error["rayleigh_deficit_bound"] += 2.0 * error["eta_center"]
        if eigengap is not None:
            error["sin2_bound"] = min(1.0, error["rayleigh_deficit_bound"] / error["eigengap"])
        prob = "1 - 2 beta (Theorem 7, plus centring at the private mean)" if mean_mech else "1 - beta (Theorem 7)"
        feasible = cal.n_subsets <= self.max_subsets and cal.n_subsets < 1 << 62
        if eigengap is not None:
            bound, metric, scale, rule = (error["sin2_bound"], f"sin^2(v_hat, v_1), w.p. >= {prob}",
                                          1.0, "1: sin^2 <= 1 always")
        else:
            bound, metric, scale = (error["rayleigh_deficit_bound"],
                                    f"lambda_1 - v_hat^T Sigma v_hat, w.p. >= {prob}", sigma * sigma)
            rule = "sigma**2 (lambda_1 <= sigma^2)" if self.sigma is not None else \
                "clip**2: no sigma given, clipped entries are clip-sub-Gaussian"
        return ExpMechPlan(
            n_samples=cal.n_samples,
            n_features=cal.n_features,
            privacy=ApproxDP(self.epsilon, self.delta),
            noise_scale=cal.gaussian_sigma,
            error_bound=bound,
            error_metric=metric,
            error_scale=scale,
            error_scale_rule=rule,
            unmet_conditions=() if feasible else (
                f"C(d, k) = {cal.n_subsets:.3g} supports exceed max_subsets = {self.max_subsets}: the fit is refused",),
            mechanism=MECHANISM,
            k=cal.k,
            n_subsets=int(cal.n_subsets),
            max_subsets=int(self.max_subsets),
            feasible=feasible,
            dense_second_moment_bytes=8 * cal.n_features**2,  # held densely by the enumeration's tasks
            clip=cal.clip,
            noise_scales={"selection_gumbel_scale": cal.gumbel_scale, "block_gaussian_sigma": cal.gaussian_sigma},
            calibration=cal,
            error=error,
            centering=centering.mode,
            mean_noise_scale=None if mean_mech is None else mean_mech.noise_scales()["gaussian"],
        )

    def min_samples(self, target_sin2: float, n_features: int, *, eigengap: float) -> int:
        """Least n for which :meth:`plan` predicts ``sin^2 <= target_sin2`` (needs ``sigma``)."""
        _check_params(self.k, self.epsilon, self.delta, self.sigma, self.clip, self.max_subsets, self.beta)
        if self.sigma is None:
            raise ValidationError("min_samples needs sigma (the sub-Gaussian scale of the model)")
        d = check_int(n_features, "n_features")
        if check_centering(self.assume_centered, self.mean, self.mean_fraction, self.mean_clip, n_features=d).private:
            # the plan's bound, with the private mean's share and error
            from dpdist.algorithms._utility import search_min_samples

            target = check_positive(target_sin2, "target_sin2")
            return search_min_samples(lambda n: self.plan(n, d, eigengap=eigengap).error_bound, target, start=4,
                                      limit=1 << 62)
        return expmech_min_samples(
            target_sin2,
            self.epsilon,
            self.delta,
            check_int(n_features, "n_features"),
            self.k,
            sigma=float(self.sigma),
            eigengap=eigengap,
            beta=float(self.beta),
            clip=None if self.clip is None else float(self.clip),
        )
