"""The second-moment estimator's plan: predicted gamma, event E and the least n, from public values.

Utility only: nothing here enters a noise scale. The levels and their noise come from
:mod:`dpdist.privacy.mechanisms.second_moment`; this module predicts what they are worth
(the explicit derivation of docs/privacy/second_moment.md, "The predicted gamma", with g(d, p)
a bound on ||N|| / sigma for N ~ GUE(sigma^2)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdist.exceptions import ValidationError
from dpdist.privacy.float_rounding import gram_rounding_factor
from dpdist.algorithms.plan import Plan
from dpdist.privacy.mechanisms.second_moment import (
    LevelSchedule,
    _check_positive,
    check_xi,
    level_schedule,
    sensitivity_coefficient,
)
from dpdist.privacy.zcdp import ZCDP

__all__ = ["GAMMA_METRIC", "GAMMA_SCALE_RULE", "SecondMomentPlan", "gue_norm_bound", "levels_plan", "min_samples",
           "plan_second_moment"]


def gue_norm_bound(n_features: int, p: float, *, method: str = "heuristic", n_draws: int | None = None) -> float:
    """g(d, p) with Pr[||N|| > sigma g] <= p for N ~ GUE(sigma^2) (the paper's constants are not given).

    ``"heuristic"``: g = 2 sqrt(d) + 2 sqrt(ln(1/p)) (E||N|| ~ 2 sigma sqrt(d) plus Gaussian
    concentration with Lipschitz constant sqrt(2)). ``"monte-carlo"``: the empirical
    (1 - p)-quantile of ||N|| / sigma over ``n_draws`` GUE(1) matrices from a fixed public
    seed (a planning constant, not privacy noise).
    """
    return _gue_norm_bound(n_features, check_xi(p), method=method, n_draws=n_draws)


def _gue_norm_bound(n_features: int, p: float, *, method: str = "heuristic", n_draws: int | None = None) -> float:
    """:func:`gue_norm_bound` for a checked ``p``."""
    d = int(n_features)
    if method == "heuristic":
        return 2.0 * math.sqrt(d) + 2.0 * math.sqrt(math.log(1.0 / p))
    if method != "monte-carlo":
        raise ValidationError(f"method must be 'heuristic' or 'monte-carlo', got {method!r}")
    draws = int(n_draws) if n_draws is not None else int(min(200_000, max(2_000, math.ceil(50 / p))))
    rng = np.random.default_rng(20250514)
    norms = np.empty(draws)
    done = 0
    while done < draws:
        b = min(20_000, draws - done)
        g = rng.standard_normal((b, d, d))
        g = np.triu(g) + np.transpose(np.triu(g, 1), (0, 2, 1))
        ev = np.linalg.eigvalsh(g)
        norms[done : done + b] = np.max(np.abs(ev), axis=1)
        done += b
    return float(np.quantile(norms, 1.0 - p, method="higher"))


#: What SecondMomentPlan.error_bound measures, and its scale (see :class:`SecondMomentPlan`).
GAMMA_METRIC = "gamma: (1 - gamma) Sigma_eff <= M <= (1 + gamma) Sigma w.p. >= 1 - 2 xi (MS25 Thm 3.3)"
GAMMA_SCALE_RULE = "1: at gamma >= 1 the lower band (1 - gamma) Sigma_eff is void (an error as large as Sigma itself)"


@dataclass(frozen=True, kw_only=True)
class SecondMomentPlan(Plan):
    """What :func:`plan_second_moment` predicts for one run, without reading data.

    A :class:`~dpdist.algorithms.plan.Plan`: ``noise_scale`` is sigma of the last level
    (normalised units), ``error_bound`` the predicted gamma (a relative error, so its scale is
    1), and event E's sample-size condition is listed in ``unmet_conditions`` when n is below it.

    Attributes
    ----------
    schedule : LevelSchedule
        L, kappa_k, R_k, sigma_k and rho_k (normalised units).
    n_levels : int
    noise_scales : tuple of float
        sigma_k, one per level (normalised units; multiply by lambda_hat (1 - alpha) for data
        units at level 0).
    predicted_gamma : float
        gamma with (1-gamma) Sigma_eff <= Sigma_tilde <= (1+gamma) Sigma w.p. >= 1 - 2 xi
        when ``event_e_holds`` (gamma = sigma_{L-1} g(d, xi)).
    event_e_min_samples : int
        n >= 80 a m sqrt(L) g(d, xi/L) / sqrt(2 rho) makes ||N_k|| <= kappa_k / (80 m) at every
        intermediate level w.p. >= 1 - xi (1 when L = 1: there is no intermediate level).
    event_e_holds : bool
    rho_main : float
        The recursion's share of the budget.
    """

    schedule: LevelSchedule
    n_levels: int
    noise_scales: tuple
    predicted_gamma: float
    event_e_min_samples: int
    event_e_holds: bool
    g_final: float
    g_intermediate: float
    rho_main: float
    radius: float
    lambda_min: float
    xi: float


def _gammas(schedule: LevelSchedule, xi: float, g_method: str) -> tuple[float, float, float, int]:
    d, L = schedule.n_features, schedule.n_levels
    a = sensitivity_coefficient(schedule.sensitivity)
    g_final = _gue_norm_bound(d, xi, method=g_method)
    g_mid = _gue_norm_bound(d, xi / L, method=g_method)
    gamma = schedule.sigmas[-1] * g_final
    if L == 1:
        n_e = 1
    else:
        n_e = math.ceil(schedule.float_factor * 80.0 * a * schedule.m * math.sqrt(L) * g_mid
                        / math.sqrt(2.0 * schedule.rho))
    return gamma, g_final, g_mid, n_e


def plan_second_moment(
    n_samples: int,
    n_features: int,
    rho: float,
    *,
    m: int,
    alpha: float = 0.5,
    radius: float,
    lambda_min: float,
    sensitivity: str = "paper",
    xi: float = 0.1,
    g_method: str = "heuristic",
) -> SecondMomentPlan:
    """Levels, per-level noise and predicted gamma from public values (docs/privacy/second_moment.md).

    ``rho`` is the recursion's share (the main budget); ``radius`` and ``lambda_min`` are in
    data units (the public values or the guesses the private initialisation would find).
    """
    return levels_plan(n_samples, n_features, rho, m=m, alpha=alpha, radius=_check_positive(radius, "radius"),
                       lambda_min=_check_positive(lambda_min, "lambda_min"), sensitivity=sensitivity, xi=check_xi(xi),
                       g_method=g_method)


def levels_plan(n_samples: int, n_features: int, rho: float, *, m: int, alpha: float, radius: float,
                lambda_min: float, sensitivity: str, xi: float, g_method: str = "heuristic") -> SecondMomentPlan:
    """:func:`plan_second_moment` for checked ``radius``, ``lambda_min`` and ``xi`` (the
    estimator's validated values); the rule between them and the width is checked here."""
    d = int(n_features)
    if lambda_min > radius**2 / d * (1 + 1e-12):
        raise ValidationError(
            f"lambda_min must be <= radius**2 / n_features = {radius**2 / d!r} (the least "
            f"eigenvalue of a second moment of rows of norm <= radius), got {lambda_min!r}"
        )
    sched = level_schedule(
        n_samples, n_features, rho, m=m, alpha=alpha, radius=radius / math.sqrt(lambda_min), sensitivity=sensitivity
    )
    gamma, g_final, g_mid, n_e = _gammas(sched, xi, g_method)
    holds = int(n_samples) >= n_e
    return SecondMomentPlan(
        n_samples=int(n_samples),
        n_features=d,
        privacy=ZCDP(sched.rho),
        noise_scale=sched.sigmas[-1],
        error_bound=gamma,
        error_metric=GAMMA_METRIC,
        error_scale=1.0,
        error_scale_rule=GAMMA_SCALE_RULE,
        unmet_conditions=() if holds else (
            f"n = {int(n_samples)} is below event E's condition n >= {n_e}, so gamma is not "
            "guaranteed",),
        schedule=sched,
        n_levels=sched.n_levels,
        noise_scales=sched.sigmas,
        predicted_gamma=gamma,
        event_e_min_samples=n_e,
        event_e_holds=holds,
        g_final=g_final,
        g_intermediate=g_mid,
        rho_main=sched.rho,
        radius=radius,
        lambda_min=lambda_min,
        xi=xi,
    )


def min_samples(
    gamma: float,
    n_features: int,
    rho: float,
    *,
    m: int,
    alpha: float = 0.5,
    radius: float,
    lambda_min: float,
    sensitivity: str = "paper",
    xi: float = 0.1,
    g_method: str = "heuristic",
) -> int:
    """Least n for which the explicit derivation gives predicted gamma <= ``gamma`` and
    event E's condition holds. Closed form up to the float factor, because L depends on
    (R, lambda, alpha, m) only: n >= kappa(n) max(80 a m sqrt(L) g(d, xi/L) / sqrt(2 rho),
    a kappa_last sqrt(L) g(d, xi) / (gamma sqrt(2 rho))), solved by fixed-point iteration on
    the slowly growing kappa(n) (:func:`~dpdist.privacy.float_rounding.gram_rounding_factor`)."""
    gamma = _check_positive(gamma, "gamma")
    p = plan_second_moment(
        2, n_features, rho, m=m, alpha=alpha, radius=radius, lambda_min=lambda_min,
        sensitivity=sensitivity, xi=xi, g_method=g_method,
    )
    s = p.schedule
    a = sensitivity_coefficient(sensitivity)
    base = max(a * s.kappas[-1] * math.sqrt(s.n_levels) * p.g_final / (gamma * math.sqrt(2.0 * s.rho)),
               p.event_e_min_samples / s.float_factor)  # exact-arithmetic requirements
    n = max(2, math.ceil(base))
    for _ in range(100):
        need = max(2, math.ceil(base * gram_rounding_factor(n)))
        if need <= n:
            return int(n)
        n = need
    raise ValidationError(f"target gamma {gamma} is not reachable: the float error grows with n")
