"""The estimator :class:`SecondMoment`: it validates, calls
:func:`~dpdist.algorithms.second_moment.release.second_moment` and copies the release to ``*_``
attributes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dpdist.algorithms._base import Estimator
from dpdist.exceptions import ValidationError
from dpdist.privacy.release import Release
from dpdist.privacy.mechanisms.second_moment import _check_positive, check_m, split_second_moment_rho
from dpdist.privacy.zcdp import ZCDP, check_rho
from dpdist.algorithms.second_moment.plan import SecondMomentPlan, min_samples, plan_second_moment
from dpdist.algorithms.second_moment.release import _Config, _check_shape, _validate, second_moment


# ---------------------------------------------------------------------------------------
# the estimator
# ---------------------------------------------------------------------------------------


class SecondMoment(Estimator):
    """Private second-moment matrix of a subsamplable input (RecDPSME, MS25), rho-zCDP.

    It estimates the second moment ``E[x x^T]`` (``(1/n) sum x x^T`` of the rows), not a
    covariance: the data are never centred, whatever their mean, and it takes no
    ``assume_centered``. For a covariance, centre the data first or use a covariance estimator
    (``SparseCovariance``, the ``baselines``), which centre by default.

    Parameters
    ----------
    rho : float
        Total zCDP budget.
    m, alpha, radius, lambda_min, init_fraction, sensitivity, xi, random_state, scheduler
        See :func:`second_moment`.
    radius_range, lambda_floor, psd, on_nonfinite
        See :func:`second_moment`.

    Attributes
    ----------
    second_moment_ : ndarray (d, d)
        The private estimate of (1/n) sum x x^T.
    n_levels_ : int
        L, the number of noise draws (= data passes of the recursion).
    noise_scales_ : ndarray (L,)
        sigma_k of each level's GUE noise (normalised units, see the release).
    radius_, lambda_min_ : float
        The radius and least-eigenvalue bound used (public, or privately released).
    privacy_ : ZCDP
        The guarantee; ``privacy_.rho`` and ``privacy_.to_approx_dp(delta)``.
    release_ : Release

    Notes
    -----
    **Guarantee.** rho-zCDP under replace-one neighbours (see :func:`second_moment` for the
    sensitivity, lemma and caveats). Parameters are validated in :meth:`fit` before any data
    is read; the attributes are set only after the release succeeded, and a failed fit
    changes nothing (:mod:`dpdist.algorithms._base`). The release records whether it is
    vacuous (``parameters["utility"]``: predicted gamma >= 1, or event E's sample size unmet),
    planned at the radius and lambda_min it used (public, or privately released).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(20000, 3)) * [1.0, 3.0, 10.0]
    >>> est = SecondMoment(1.0, m=20, radius=60.0, lambda_min=0.5, random_state=0,
    ...                    scheduler="synchronous").fit(X)
    >>> est.second_moment_.shape
    (3, 3)
    """

    def __init__(
        self,
        rho: float,
        *,
        m: int,
        alpha: float = 0.5,
        radius: float | None = None,
        lambda_min: float | None = None,
        init_fraction: float = 0.1,
        sensitivity: str = "paper",
        xi: float = 0.1,
        random_state: int | None = None,
        scheduler: Any = None,
        radius_range: tuple[float, float] = (1e-8, 1e8),
        lambda_floor: float = 1e-12,
        psd: bool = False,
        on_nonfinite: str = "zero",
    ) -> None:
        self.rho = rho
        self.m = m
        self.alpha = alpha
        self.radius = radius
        self.lambda_min = lambda_min
        self.init_fraction = init_fraction
        self.sensitivity = sensitivity
        self.xi = xi
        self.random_state = random_state
        self.scheduler = scheduler
        self.radius_range = radius_range
        self.lambda_floor = lambda_floor
        self.psd = psd
        self.on_nonfinite = on_nonfinite

    def _kwargs(self) -> dict:
        return self.get_params()

    def _fit_release(self, X) -> Release:
        return second_moment(X, **self._kwargs())

    def _fitted_attributes(self, release: Release) -> dict:
        return {
            "release_": release,
            "second_moment_": release.values["second_moment"],
            "n_levels_": int(release.parameters["n_levels"]),
            "noise_scales_": np.asarray(release.noise_scales["level_sigmas"]),
            "radius_": float(release.parameters["radius"]),
            "lambda_min_": float(release.parameters["lambda_min"]),
            "privacy_": release.privacy,
        }

    def _config(self) -> _Config:
        kw = self._kwargs()
        kw.pop("random_state")
        return _validate(**kw)

    def _check_fit(self, n_samples: int, n_features: int) -> None:
        _check_shape(self._config(), n_samples, n_features)
        self._check_runtime()

    def _utility_plan(self, release: Release):
        p = release.parameters
        return self.plan(p["n_samples"], p["n_features"], radius=p["radius"], lambda_min=p["lambda_min"])

    def _planning_values(self, radius, lambda_min) -> tuple[float, float, float]:
        radius = self.radius if radius is None else radius
        lambda_min = self.lambda_min if lambda_min is None else lambda_min
        if radius is None or lambda_min is None:
            raise ValidationError(
                "plan needs radius and lambda_min: set them on the estimator or pass guesses "
                "(radius=..., lambda_min=...) to plan/min_samples"
            )
        split = split_second_moment_rho(check_rho(self.rho), self.init_fraction,
                                        private_radius=self.radius is None, private_lambda=self.lambda_min is None)
        return _check_positive(radius, "radius"), _check_positive(lambda_min, "lambda_min"), split["main"]

    def plan(
        self, n_samples: int, n_features: int, *, radius: float | None = None, lambda_min: float | None = None,
        g_method: str = "heuristic",
    ) -> SecondMomentPlan:
        """L, per-level noise scales and predicted gamma (docs/privacy/second_moment.md) without reading data.

        When the estimator's ``radius``/``lambda_min`` are None (private initialisation),
        pass guesses of them here; the recursion's share of rho is used for the noise, and
        the plan's ``privacy`` is the whole ``ZCDP(rho)`` a fit spends.
        """
        self._config()  # every parameter, with the rule the fit uses
        r, lam, rho_main = self._planning_values(radius, lambda_min)
        plan = plan_second_moment(n_samples, n_features, rho_main, m=check_m(self.m), alpha=self.alpha, radius=r,
                                  lambda_min=lam, sensitivity=self.sensitivity, xi=self.xi, g_method=g_method)
        return dataclasses.replace(plan, privacy=ZCDP(check_rho(self.rho)))

    def min_samples(
        self, gamma: float, n_features: int, *, radius: float | None = None, lambda_min: float | None = None,
        g_method: str = "heuristic",
    ) -> int:
        """Least n whose :meth:`plan` predicts gamma <= ``gamma`` with event E's condition met."""
        r, lam, rho_main = self._planning_values(radius, lambda_min)
        return min_samples(gamma, n_features, rho_main, m=check_m(self.m), alpha=self.alpha, radius=r,
                           lambda_min=lam, sensitivity=self.sensitivity, xi=self.xi, g_method=g_method)
