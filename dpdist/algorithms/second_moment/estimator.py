"""The estimator :class:`SecondMoment` and its functional form :func:`second_moment`.

The estimator lists its parameters once (``_parameter_constraints``); ``fit`` validates them
once, checks the rules between them and the data's shape and splits the budget
(``_validate_together``), runs
:func:`~dpdist.algorithms.second_moment.release.run_second_moment` on those values, and plans
once, at the radius and lambda_min the release used (public, or privately released).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dpdist._validation import check_bool, check_real
from dpdist.algorithms._base import Estimator, FitResult
from dpdist.algorithms._constraints import Boolean, Custom, Real, functional_form
from dpdist.engine import second_moment as engine
from dpdist.exceptions import ValidationError
from dpdist.privacy.release import Release
from dpdist.privacy.mechanisms.second_moment import (
    _check_positive,
    _check_sensitivity,
    check_alpha,
    check_m,
    check_xi,
    split_second_moment_rho,
)
from dpdist.privacy.zcdp import ZCDP, check_rho
from dpdist.algorithms.second_moment.plan import SecondMomentPlan, levels_plan, min_samples
from dpdist.algorithms.second_moment.release import check_shape, run_second_moment

__all__ = ["SecondMoment", "second_moment"]


def _rho(value, name):
    return check_rho(value)


def _m(value, name):
    return check_m(value)


def _alpha(value, name):
    return check_alpha(value)


def _sensitivity(value, name):
    return _check_sensitivity(value)


def _xi(value, name):
    return check_xi(value)


def _radius_range(value, name):
    """A pair ``(lo, hi)`` of public bounds, ``0 < lo <= hi``."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValidationError(f"radius_range must be a pair (lo, hi) of public bounds, got {value!r}")
    lo = _check_positive(value[0], "radius_range[0]")
    return lo, check_real(value[1], "radius_range[1]", low=lo)


def _psd(value, name):
    return check_bool(value, "psd")


class SecondMoment(Estimator):
    """Private second-moment matrix of a subsamplable input (RecDPSME, MS25), rho-zCDP.

    It estimates the second moment ``E[x x^T]`` (``(1/n) sum x x^T`` of the rows), not a
    covariance: the data are never centred, whatever their mean, and it takes no
    ``assume_centered``. For a covariance, centre the data first or use a covariance estimator
    (``SparseCovariance``, the ``baselines``), which centre by default.

    Parameters
    ----------
    rho : float
        Total zCDP budget (initialisation + recursion).
    m : int
        Subsamplability size of Definition 1.1 (a public assumption about the data; it sets
        psi = 1/(10m), the stopping value C = 640m, hence the number of levels).
    alpha : float, default 0.5
        Subsamplability accuracy, in (0, 1/2].
    radius : float, optional
        Public bound R on the row norms (data units). Rows above it are clipped. When None, a
        private norm quantile is spent on it.
    lambda_min : float, optional
        Public lower bound on lambda_min(Sigma) (data units). When None, a private Gaussian
        bucket histogram over group eigenvalues is spent on it (needs m >= d).
    init_fraction : float, default 0.1
        Each private initialisation step gets rho * init_fraction / 2; the recursion gets the
        rest (the paper gives no split; public values cost 0 and leave their share to the recursion).
    sensitivity : {"paper", "tight"}
        "paper": Delta_k = 4 R_k^2 / n (MS25). "tight": sqrt(2) R_k^2 / n, the exact L2
        sensitivity of the released upper triangle (a deviation; MS25's value is valid but loose).
    xi : float, default 0.1
        The failure probability of this estimator's accuracy guarantee (MS25's name for it,
        where the other estimators say ``beta``): it sets the tail threshold of the radius
        step and the plan, and no noise scale.
    random_state : None or int
        None: OS entropy (the only mode fit for release). An int seeds the noise for tests;
        the release records it as seeded.
    scheduler : optional
        See :func:`dpdist.engine.runtime.compute`.
    radius_range : (float, float), default (1e-8, 1e8)
        Public bounds of the radius grid (private radius only).
    lambda_floor : float, default 1e-12
        The lambda histogram covers [lambda_floor R_hat^2, R_hat^2] (private lambda only).
    psd : bool, default False
        Post-process the output by clipping its eigenvalues at 0 (not in MS25).
    on_nonfinite : {"zero", "raise"}, default "zero"
        "zero": rows holding NaN or inf become zero rows before any statistic (a per-row
        map; nothing counts them). "raise": explicit validation mode: one extra pass checks
        the data first and raises ValidationError before anything is computed; the error (or
        its absence) reveals one bit, which the release records.

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
        ``values["second_moment"]`` (d x d), ``values["projections"]`` (the L-1 public
        maps Pi_k, post-processing of released noise) and ``values["level_matrices"]`` (the
        L noisy level matrices, normalised units: each is that level's rho/L-zCDP release, so
        publishing them costs nothing more); ``privacy`` is a :class:`ZCDP` whose breakdown
        lists every step. A fit whose private lambda_min histogram's largest bin is the underflow bin raises
        ``NoPrivateResult``; ``exc.release`` records the rho already spent (radius and
        lambda_min steps).

    Notes
    -----
    **Guarantee.** rho-zCDP under replace-one neighbours (same n, one row replaced; n is
    public), for any input. The argument (level sensitivities ``kappa(n) a R_k^2 / n`` from
    public radii, the per-level share rho_main / L, post-processing of the projections, the
    initialisation histograms with sensitivity sqrt(2), the float factor, the lattice) is
    written once in docs/privacy/second_moment.md. The release records one
    event per step (``events``; public steps as no-ops) and ``privacy`` is their zCDP
    composition (BS16 Lemma 2.3), at most rho. The number of levels L = K* + 1 depends on
    (R_hat / sqrt(lambda_hat), alpha, m) only.

    **Floating point** (a deviation that only adds noise). The kernel scales every
    row to R_k *before* forming its outer product (never "plain Gram minus the shrunk rows'
    excess", which let one fill value cancel the rest of its batch), with overflow- and
    underflow-free norms and a radius margin, so each row's term is bounded by R_k^2 as
    computed; sums have bounded rounding depth, and each sigma_k is calibrated for
    ``kappa(n) Delta_k`` (:func:`~dpdist.privacy.float_rounding.gram_rounding_factor`), the
    sensitivity of the computed level matrix. The histograms' counts are exact per row.

    **Float-safe noise.** Every released level matrix and histogram lies on a public
    power-of-two lattice, with an exactly sampled rounded Gaussian: no output is
    impossible under a neighbour. The utility
    guarantee (Theorem 3.3: (1-gamma) Sigma_eff <= output <= (1+gamma) Sigma w.p. >= 1-2 xi)
    needs (m, alpha, beta)-subsamplability and enough samples, see :meth:`plan`;
    privacy does not.

    **Decisions** (each with its reason in docs/privacy/second_moment.md). L = K*+1, the
    number of draws made, replaces the paper's real-valued T in sigma. S(y) = y min(1,
    sqrt(3/7) R / ||y||) (the printed shrink is dimensionally wrong). Rows are clipped to R_hat
    at level 0. The ``sensitivity`` option. A zCDP initialisation (norm quantile with threshold
    tau_J = sigma sqrt(K+1-J) sqrt(2 ln(2K/xi)), sized for the K+1-J noisy bins
    summed above edge J; bucket argmax with lambda_hat = l / (1 + alpha); the split
    of ``init_fraction``). Groups are a keyed pseudorandom partition (without
    replacement), computed per row block on the workers
    (:func:`~dpdist.algorithms.second_moment.selection.group_partition`).
    Uncentred second moment. The ``psd`` option. Rows with NaN/inf become zero rows.

    **Computation.** One pass over X per private initialisation step and one per level. Each
    level's Gram is reduced and noised inside the graph (only the noised matrix reaches this
    process); the per-row clip scales t_k (exact per-row state, like the data themselves) stay
    where the data live between levels and are never returned (see
    :mod:`dpdist.engine.second_moment`). The eigendecomposition, the projections and the
    unwinding run here, on released values only.

    **The fit.** Parameters are validated in :meth:`fit` before any data is read; the
    attributes are set only after the release succeeded, and a failed fit changes nothing
    (:mod:`dpdist.algorithms._base`). The release records whether it is vacuous
    (``parameters["utility"]``: predicted gamma >= 1, or event E's sample size unmet), planned
    at the radius and lambda_min it used (public, or privately released).

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

    _parameter_constraints = {
        "rho": Custom(_rho),
        "m": Custom(_m),
        "alpha": Custom(_alpha),
        "radius": Real(low=0.0, allow_none=True),
        "lambda_min": Real(low=0.0, allow_none=True),
        "init_fraction": Real(low=0.0, high=1.0),
        "sensitivity": Custom(_sensitivity),
        "xi": Custom(_xi),
        "radius_range": Custom(_radius_range),
        "lambda_floor": Real(low=0.0, high=1.0),
        "psd": Boolean(),
    }

    def _validate_together(self, params, n_samples, n_features):
        """The rules between the parameters and the data's shape, the dask configuration a fit
        reads between levels, and the budget's split over the private initialisation steps."""
        check_shape(params, n_samples, n_features)
        engine.scales_in_memory_bytes()
        engine.rows_in_memory_bytes()
        return params.replace(split=split_second_moment_rho(
            params.rho, params.init_fraction, private_radius=params.radius is None,
            private_lambda=params.lambda_min is None))

    def _release_of(self, X: Any, *, assess: bool = True, before_release: Any = None) -> FitResult:
        """Validate once, open ``X`` (metadata), check the shape's rules, call
        ``before_release()`` (a ledger reservation marked running), release, then plan once at
        the radius and lambda_min the release used (public, or privately released: a plan
        before the release could not know them). ``assess=False`` (the functional form, whose
        release records no utility verdict) computes no plan."""
        params = self._validate_params()
        Xd = self._open(X)
        params = self._validate_together(params, *Xd.shape)
        if before_release is not None:
            before_release()
        release = run_second_moment(Xd, params)
        if not assess:
            return FitResult(release, None)
        p = release.parameters
        try:
            plan = self._plan_validated(params, p["n_samples"], p["n_features"], radius=p["radius"],
                                        lambda_min=p["lambda_min"])
        except ValidationError as exc:
            plan = exc
        return FitResult(release, plan)

    def _check_fit(self, n_samples: int, n_features: int) -> None:
        self._validate_together(self._validate_params(), n_samples, n_features)

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

    def _planning_values(self, params, radius, lambda_min) -> tuple[float, float, float]:
        radius = params.radius if radius is None else radius
        lambda_min = params.lambda_min if lambda_min is None else lambda_min
        if radius is None or lambda_min is None:
            raise ValidationError(
                "plan needs radius and lambda_min: set them on the estimator or pass guesses "
                "(radius=..., lambda_min=...) to plan/min_samples"
            )
        split = split_second_moment_rho(params.rho, params.init_fraction, private_radius=params.radius is None,
                                        private_lambda=params.lambda_min is None)
        return radius, lambda_min, split["main"]

    def _plan_validated(self, params, n_samples, n_features, *, radius=None, lambda_min=None,
                        g_method: str = "heuristic") -> SecondMomentPlan:
        r, lam, rho_main = self._planning_values(params, radius, lambda_min)
        plan = levels_plan(n_samples, n_features, rho_main, m=params.m, alpha=params.alpha, radius=r,
                           lambda_min=lam, sensitivity=params.sensitivity, xi=params.xi, g_method=g_method)
        return dataclasses.replace(plan, privacy=ZCDP(params.rho))

    def plan(
        self, n_samples: int, n_features: int, *, radius: float | None = None, lambda_min: float | None = None,
        g_method: str = "heuristic",
    ) -> SecondMomentPlan:
        """L, per-level noise scales and predicted gamma (docs/privacy/second_moment.md) without reading data.

        When the estimator's ``radius``/``lambda_min`` are None (private initialisation),
        pass guesses of them here; the recursion's share of rho is used for the noise, and
        the plan's ``privacy`` is the whole ``ZCDP(rho)`` a fit spends. The guesses are taken
        as given: the rules a fit checks between the parameters and the data's shape are not
        applied to them.
        """
        params = self._validate_params(fit=False)
        radius = None if radius is None else _check_positive(radius, "radius")
        lambda_min = None if lambda_min is None else _check_positive(lambda_min, "lambda_min")
        return self._plan_validated(params, n_samples, n_features, radius=radius, lambda_min=lambda_min,
                                    g_method=g_method)

    def min_samples(
        self, gamma: float, n_features: int, *, radius: float | None = None, lambda_min: float | None = None,
        g_method: str = "heuristic",
    ) -> int:
        """Least n whose :meth:`plan` predicts gamma <= ``gamma`` with event E's condition met."""
        p = self._validate_params(fit=False)
        r, lam, rho_main = self._planning_values(p, radius, lambda_min)
        return min_samples(gamma, n_features, rho_main, m=p.m, alpha=p.alpha, radius=r, lambda_min=lam,
                           sensitivity=p.sensitivity, xi=p.xi, g_method=g_method)


second_moment = functional_form(
    SecondMoment, name="second_moment", positional=("rho",),
    summary="rho-zCDP estimate of the second moment (1/n) sum x x^T by RecDPSME (MS25, Alg. 1-2).",
    returns="""
    Release
        ``values["second_moment"]`` (d x d), ``values["projections"]`` (the L-1 public maps Pi_k,
        post-processing of released noise) and ``values["level_matrices"]`` (the L noisy level
        matrices, normalised units); ``privacy`` is a :class:`~dpdist.privacy.zcdp.ZCDP` whose
        breakdown lists every step. A rejection at the private lambda_min step raises
        ``NoPrivateResult``; ``exc.release`` records the rho already spent.""",
)
