"""Calibration of private second-moment estimation (MS25: Mahpud & Sheffet, NeurIPS 2025).

Pure functions of public values; nothing here sees data. Every decision where dpdist completes
or departs from the paper is stated where it is applied; docs/privacy/second_moment.md lists
them all with their reasons.

Recursive estimator (Algorithms 1-2, RecDPSME), all in *normalised units*: the data divided
by sqrt(lambda_hat), so that I <= Sigma and every row has norm <= ``radius``.

- Constants of Algorithm 1: eta = 1/2, psi = 1/(10m), c = 1/(80m), C = 640m.
- kappa_0 = R^2 / (1 - alpha); kappa_k = (3/7)^k kappa_0; R_k = sqrt(kappa_k).
- *Number of draws*: K* = min{k >= 0 : kappa_k <= C} and the recursion draws noise
  L = K* + 1 times; the budget is split over L, not the paper's real-valued T (which makes
  ceil(T) + 1 draws and would overspend), so the total is exactly rho.
- Per-level sigma_k = Delta_k sqrt(L) / sqrt(2 rho), with Delta_k = 4 R_k^2 / n (MS25,
  ``sensitivity="paper"``) or sqrt(2) R_k^2 / n (``sensitivity="tight"``, the exact
  L2 sensitivity of the released upper triangle). Each level is then rho/L-zCDP (BS16
  Prop. 1.6) and the L levels compose to rho (BS16 Lemma 2.3).
- *Floating point* (a deviation that only adds noise): every sigma is computed for
  ``kappa(n) * Delta`` (:func:`~dpdist.privacy.float_rounding.gram_rounding_factor`), the
  sensitivity of the level's Gram matrix *as computed*: the engine scales each row so that its
  norm as computed is at most R_k (terms ``y y^T`` of Frobenius norm ``<= R_k^2``), multiplies
  only after scaling, and sums in the bounded-depth order that the factor assumes.
- *Constants*: the paper's Omega(.) constants are not given; they are replaced by an explicit
  derivation (docs/privacy/second_moment.md, "The predicted gamma"), with g(d, p) a bound on
  ||N|| / sigma for N ~ GUE(sigma^2).

The subsample-and-aggregate baseline (Algorithm 3) is calibrated in
:mod:`dpdist.privacy.subsample_calibration`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from dpdist._validation import check_choice, check_int, check_positive, check_probability, check_real
from dpdist.exceptions import ValidationError
from dpdist.privacy.float_rounding import float_sensitivity, gram_rounding_factor
from dpdist.privacy.plan import Plan
from dpdist.privacy.zcdp import ZCDP, check_rho

__all__ = [
    "HISTOGRAM_SENSITIVITY",
    "ETA",
    "GROWTH",
    "SENSITIVITIES",
    "SHRINK",
    "LevelSchedule",
    "SecondMomentPlan",
    "check_alpha",
    "check_m",
    "check_xi",
    "gue_norm_bound",
    "histogram_sigma",
    "lemma_3_8_beta_bound",
    "level_schedule",
    "level_sigma",
    "matrix_bernstein_m",
    "min_samples",
    "n_levels",
    "one_shot_sigma",
    "plan_second_moment",
    "recursion_constants",
    "sensitivity_coefficient",
    "split_second_moment_rho",
]

#: eta of Algorithm 1: the factor that shrinks the large-eigenvalue subspace.
ETA = 0.5
#: kappa and R^2 shrink by this factor per level (Lemma 3.4 / Corollary 3.5).
SHRINK = 3.0 / 7.0
#: Rows are multiplied by sqrt(GROWTH) after the projection (Algorithm 2, line 7).
GROWTH = 8.0 / 7.0
#: Sensitivity options: "paper" 4 R^2 / n, "tight" sqrt(2) R^2 / n.
SENSITIVITIES = ("paper", "tight")


# ---------------------------------------------------------------------------------------
# parameter checks shared by the estimator, the baseline and the planner
# ---------------------------------------------------------------------------------------


def check_alpha(alpha: float) -> float:
    """alpha of (m, alpha, beta)-subsamplability; the analysis needs 0 < alpha <= 1/2 (MS25)."""
    return check_real(alpha, "alpha", low=0.0, high=0.5, closed="right")


def check_m(m: int) -> int:
    """m of (m, alpha, beta)-subsamplability (the subsamplability size): an integer >= 1."""
    return check_int(m, "m", low=1)


def check_xi(xi: float) -> float:
    """xi, the failure probability of the analysis: in (0, 1)."""
    return check_probability(xi, "xi")


def _check_positive(value: float, name: str) -> float:
    return check_positive(value, name)


def _check_sensitivity(sensitivity: str) -> str:
    return check_choice(sensitivity, "sensitivity", SENSITIVITIES)


# ---------------------------------------------------------------------------------------
# the recursion
# ---------------------------------------------------------------------------------------


def recursion_constants(m: int) -> dict:
    """Constants of Algorithm 1, line 1: eta = 1/2, psi = 1/(10m), c = 1/(80m), C = 640m."""
    m = check_m(m)
    return {"eta": ETA, "psi": 1.0 / (10 * m), "c": 1.0 / (80 * m), "stop": 640.0 * m}


def sensitivity_coefficient(sensitivity: str) -> float:
    """The a of Delta = a R^2 / n: 4 for MS25 ("paper"), sqrt(2) for the tight L2 bound."""
    return 4.0 if _check_sensitivity(sensitivity) == "paper" else math.sqrt(2.0)


def n_levels(radius: float, alpha: float, m: int) -> tuple[int, tuple[float, ...]]:
    """Number of noise draws L = K* + 1 and the kappa schedule (L, not the paper's real-valued T, draws).

    ``radius`` is the norm bound in normalised units (Sigma >= I). kappa_0 = R^2/(1-alpha),
    kappa_k = (3/7)^k kappa_0, and K* = min{k >= 0 : kappa_k <= 640 m}
    = max(0, ceil(log_{7/3}(kappa_0 / C))). Public values only: the schedule never depends on
    the data.
    """
    radius = _check_positive(radius, "radius")
    alpha = check_alpha(alpha)
    stop = recursion_constants(m)["stop"]
    kappa0 = radius**2 / (1.0 - alpha)
    kappas = [kappa0]
    while kappas[-1] > stop:
        if len(kappas) > 10_000:  # pragma: no cover - radius is finite
            raise ValidationError("radius is too large: the recursion would not terminate")
        kappas.append(kappa0 * SHRINK ** len(kappas))
    return len(kappas), tuple(kappas)


@dataclass(frozen=True)
class LevelSchedule:
    """Public schedule of one run of RecDPSME, level by level (k = 0 .. L-1).

    All values are in normalised units (rows of the data divided by sqrt(lambda_hat) and
    multiplied by sqrt(1/(1-alpha)) at level 0).

    Attributes
    ----------
    n_levels : int
        L = K* + 1 noise draws.
    kappas, radii : tuple of float
        kappa_k and R_k = sqrt(kappa_k).
    sensitivities : tuple of float
        Delta_k = a R_k^2 / n (a = 4 or sqrt(2)), in exact arithmetic.
    float_factor : float
        kappa(n): the computed level matrix moves by at most ``float_factor * Delta_k``.
    sigmas : tuple of float
        sigma_k = kappa Delta_k sqrt(L) / sqrt(2 rho): the GUE entry standard deviation at level k.
    rhos : tuple of float
        rho_k = (kappa Delta_k)^2 / (2 sigma_k^2) = rho / L.
    thresholds : tuple of float
        psi kappa_k: eigenvalues of the noisy level-k matrix at or above it span V.
    """

    n_samples: int
    n_features: int
    rho: float
    alpha: float
    m: int
    radius: float
    sensitivity: str
    n_levels: int
    kappas: tuple
    radii: tuple
    sensitivities: tuple
    float_factor: float
    sigmas: tuple
    rhos: tuple
    thresholds: tuple
    eta: float
    psi: float
    stop: float

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def privacy(self) -> ZCDP:
        """The main recursion's cost, one labelled share per level."""
        return ZCDP(self.rho, breakdown=tuple((f"level {k}", r) for k, r in enumerate(self.rhos)))


def level_sigma(radius_k: float, n_samples: int, n_levels: int, rho: float, sensitivity: str = "paper") -> float:
    """sigma_k = a R_k^2 sqrt(L) / (n sqrt(2 rho)) (Algorithm 2 line 1 with T -> L, the number of draws made).

    a = 4 (MS25, ``"paper"``) or sqrt(2) (``"tight"``). Example:
    R_k = 2, n = 1000, L = 5, rho = 0.5 gives 0.0357770876...
    """
    a = sensitivity_coefficient(sensitivity)
    return a * float(radius_k) ** 2 * math.sqrt(int(n_levels)) / (int(n_samples) * math.sqrt(2.0 * check_rho(rho)))


def level_schedule(
    n_samples: int,
    n_features: int,
    rho: float,
    *,
    m: int,
    alpha: float = 0.5,
    radius: float,
    sensitivity: str = "paper",
) -> LevelSchedule:
    """Per-level noise of RecDPSME (Algorithm 2, line 1, with T -> L and the sensitivity option).

    ``sigma_k = a R_k^2 sqrt(L) / (n sqrt(2 rho))`` with a = 4 (MS25) or sqrt(2) (tight).
    By the Gaussian mechanism in zCDP (BS16 Prop. 1.6) level k is
    ``Delta_k^2 / (2 sigma_k^2) = rho / L``-zCDP; levels compose to rho (BS16 Lemma 2.3).
    The upper triangle (diagonal included) of (1/n) sum x x^T has L2 sensitivity at most
    sqrt(2) R_k^2 / n <= 4 R_k^2 / n under replace-one when every row has norm <= R_k.
    """
    n = check_int(n_samples, "n_samples", low=2)
    d = check_int(n_features, "n_features", low=1)
    rho = check_rho(rho)
    alpha = check_alpha(alpha)
    m = check_m(m)
    radius = _check_positive(radius, "radius")
    a = sensitivity_coefficient(sensitivity)
    consts = recursion_constants(m)
    L, kappas = n_levels(radius, alpha, m)
    radii = tuple(math.sqrt(k) for k in kappas)
    sens = tuple(a * k / n for k in kappas)
    float_sensitivity(max(sens), n)  # range check of the largest
    _, kappa = float_sensitivity(min(sens), n)
    sigmas = tuple(kappa * level_sigma(r, n, L, rho, sensitivity) for r in radii)
    rhos = tuple((kappa * s) ** 2 / (2.0 * sg**2) for s, sg in zip(sens, sigmas))
    return LevelSchedule(
        n_samples=n,
        n_features=d,
        rho=rho,
        alpha=alpha,
        m=m,
        radius=radius,
        sensitivity=sensitivity,
        n_levels=L,
        kappas=kappas,
        radii=radii,
        sensitivities=sens,
        float_factor=kappa,
        sigmas=sigmas,
        rhos=rhos,
        thresholds=tuple(consts["psi"] * k for k in kappas),
        eta=consts["eta"],
        psi=consts["psi"],
        stop=consts["stop"],
    )


def one_shot_sigma(n_samples: int, rho: float, radius: float, sensitivity: str = "paper") -> float:
    """GUE entry scale of the one-shot Gaussian mechanism on (1/n) sum x x^T, ||x|| <= R:
    sigma = kappa(n) a R^2 / (n sqrt(2 rho)) (BS16 Prop. 1.6, with the float factor of
    :func:`~dpdist.privacy.float_rounding.gram_rounding_factor`); a one-level comparator."""
    rho = check_rho(rho)
    n = int(n_samples)
    sens, _ = float_sensitivity(sensitivity_coefficient(sensitivity) * _check_positive(radius, "radius") ** 2 / n, n)
    return sens / math.sqrt(2.0 * rho)


#: L2 sensitivity of a histogram under replace-one: one count goes down by 1, another up by 1.
HISTOGRAM_SENSITIVITY = math.sqrt(2.0)


def histogram_sigma(rho_step: float) -> float:
    """Noise scale of the Gaussian histograms of the private initialisation:
    sigma = Delta / sqrt(2 rho) with Delta = sqrt(2), i.e. sigma = 1 / sqrt(rho_step), added to
    *every* bin (BS16 Prop. 1.6: rho_step-zCDP)."""
    return HISTOGRAM_SENSITIVITY / math.sqrt(2.0 * check_rho(rho_step, "rho_step"))


def split_second_moment_rho(rho: float, init_fraction: float, *, private_radius: bool, private_lambda: bool) -> dict:
    """Budget split (the paper gives none): each private initialisation step gets rho *
    init_fraction / 2, the recursion the rest. Public radius / lambda_min cost 0 (and leave
    their share to the recursion). Default init_fraction = 0.1 gives 5% / 5% / 90%."""
    rho = check_rho(rho)
    f = check_probability(init_fraction, "init_fraction")
    share = rho * f / 2.0
    rho_r = share if private_radius else 0.0
    rho_l = share if private_lambda else 0.0
    return {"radius": rho_r, "lambda_min": rho_l, "main": rho - rho_r - rho_l}


def gue_norm_bound(n_features: int, p: float, *, method: str = "heuristic", n_draws: int | None = None) -> float:
    """g(d, p) with Pr[||N|| > sigma g] <= p for N ~ GUE(sigma^2) (the paper's constants are not given).

    ``"heuristic"``: g = 2 sqrt(d) + 2 sqrt(ln(1/p)) (E||N|| ~ 2 sigma sqrt(d) plus Gaussian
    concentration with Lipschitz constant sqrt(2)). ``"monte-carlo"``: the empirical
    (1 - p)-quantile of ||N|| / sigma over ``n_draws`` GUE(1) matrices from a fixed public
    seed (a planning constant, not privacy noise).
    """
    d = int(n_features)
    p = check_xi(p)
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

    A :class:`~dpdist.privacy.plan.Plan`: ``noise_scale`` is sigma of the last level
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
    g_final = gue_norm_bound(d, xi, method=g_method)
    g_mid = gue_norm_bound(d, xi / L, method=g_method)
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
    radius = _check_positive(radius, "radius")
    lambda_min = _check_positive(lambda_min, "lambda_min")
    xi = check_xi(xi)
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


# ---------------------------------------------------------------------------------------
# analysis helpers (MS25 Lemma 3.8, Claim 4.2): used by tests and benchmarks, never in noise scales
# ---------------------------------------------------------------------------------------


def lemma_3_8_beta_bound(radius: float, alpha: float, m: int) -> float:
    """beta <= alpha / (4 (1+alpha) log2(R^2 / ((1+alpha) m))) (Lemma 3.8; log base 2, which the proof's doubling buckets imply).

    ``radius`` in normalised units. Returns inf when the log is <= 0 (no constraint)."""
    alpha = check_alpha(alpha)
    arg = _check_positive(radius, "radius") ** 2 / ((1 + alpha) * check_m(m))
    if arg <= 1.0:
        return math.inf
    return alpha / (4.0 * (1.0 + alpha) * math.log2(arg))


def matrix_bernstein_m(m1: float, m2: float, alpha: float, beta: float, n_features: int) -> float:
    """Claim 4.2: m(alpha, beta) = max{2 M2 / alpha^2, 2 (1 + M1^2) / (3 alpha)} ln(4 d / beta)."""
    return max(2.0 * m2 / alpha**2, 2.0 * (1.0 + m1**2) / (3.0 * alpha)) * math.log(4.0 * n_features / beta)
