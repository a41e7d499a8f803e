"""Calibration of PrivCov accounted in zCDP: Laplace selection (``selection="laplace"``) and
Gumbel top-k selection (``selection="gumbel"``), each followed by a Gaussian release. Their
operator-norm error bounds are utility and live in
:mod:`dpdist.algorithms.sparse_covariance.bounds`.

Each function implements one formula of a paper and cites it. Nothing here sees data.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from dpdist._validation import check_probability
from dpdist.privacy.float_rounding import float_sensitivity
from dpdist.privacy.mechanisms.privcov.calibration import (
    _check_privcov_inputs,
    check_row_clip,
    privcov_release_sensitivity,
    privcov_selection_sensitivity,
)
from dpdist.privacy.zcdp import cks20_rho

__all__ = [
    "PrivCovGumbelCalibration",
    "PrivCovZCDPCalibration",
    "privcov_gumbel_calibration",
    "privcov_zcdp_calibration",
]


@dataclass(frozen=True)
class PrivCovZCDPCalibration:
    """All constants of one run of PrivCov with the zCDP analysis (``selection="laplace"``),
    computed from public values (:func:`privcov_zcdp_calibration`).

    ``sensitivity`` and ``float_factor`` are as in :class:`PrivCovCalibration` (Delta =
    2 R^2 / n and kappa(n)). ``laplace_scale`` is the selection's Laplace scale b,
    ``gaussian_sigma`` the release's Gaussian sigma; ``rho = rho_selection + rho_release``
    is the zCDP budget whose tight conversion is the requested (epsilon, delta).
    """

    epsilon: float
    delta: float
    n_samples: int
    n_features: int
    k: int
    clip: float
    beta: float
    k_released: int
    rho: float
    selection_share: float
    rho_selection: float
    rho_release: float
    sensitivity: float
    float_factor: float
    selection_coefficient: int
    selection_row_epsilon: float
    laplace_scale: float
    release_coordinates: int
    release_sensitivity: float
    gaussian_sigma: float
    row_clip: float
    release_sensitivity_entry: float
    release_sensitivity_row: float

    def to_dict(self) -> dict:
        return asdict(self)


def _privcov_zcdp_logs(n_features: int, beta: float) -> tuple[float, float]:
    """``(log(6 d^2 / beta), log(12 d / beta))``: the union-bound logarithms of
    :func:`~dpdist.algorithms.sparse_covariance.bounds.privcov_zcdp_error_bound` (selection
    noise, release noise)."""
    d = int(n_features)
    return math.log(6.0 * d * d / beta), math.log(12.0 * d / beta)


def _privcov_release(rho: float, c1: float, k: int, k_released: int, log_rel: float, release_sens: float,
                     entry_route: float):
    """The split of rho between a zCDP PrivCov's selection and its Gaussian release, and the
    release's sigma: ``f / (1 - f) = (C_1 / C_2)^(2/3)`` with the selection's constant ``c1``
    (0 when the selection is free: f = 0) and the release's ``C_2 = sqrt(k' (k + 2) L_2)`` on the
    entry route, proportional to the release's L2 sensitivity ``release_sens`` (one Gaussian
    mechanism). Returns ``(f, rho_sel, rho_rel, sigma)``."""
    c2 = math.sqrt(k_released * (k + 2) * log_rel) * (release_sens / entry_route)
    if c1:
        ratio = (c1 / c2) ** (2.0 / 3.0)
        share = ratio / (1.0 + ratio)
    else:
        share = 0.0
    rho_rel = (1.0 - share) * rho
    return share, share * rho, rho_rel, release_sens / math.sqrt(2.0 * rho_rel)


def privcov_zcdp_calibration(
    epsilon: float, delta: float, n_samples: int, n_features: int, k: int, clip: float, beta: float = 0.1,
    *, row_clip: float = math.inf,
) -> PrivCovZCDPCalibration:
    """Calibrate PrivCov's selection and release by zCDP (``selection="laplace"``).

    The guarantee, proved in docs/privacy/privcov.md and
    :mod:`dpdist.privacy.mechanisms.privcov.mechanism`: each row's selection (noisy top-k by
    magnitude, Laplace(b) noise) is pure ``2 k Delta_fl / b``-DP, hence ``(2 k Delta_fl /
    b)^2 / 2``-zCDP (Bun-Steinke 2016, Prop. 1.4); all released values together (d k'
    coordinates, ``k' = min(k + 1, d)``) are one Gaussian mechanism of L2 sensitivity
    ``sqrt(d k') Delta_fl``, hence ``d k' Delta_fl^2 / (2 sigma^2)``-zCDP (Prop. 1.6); zCDP
    composes by adding (Lemma 2.3), and rho-zCDP is (epsilon, delta)-DP by the tight
    conversion of Canonne, Kamath and Steinke 2020 (Prop. 12). So::

        rho        = the largest rho that converts to (epsilon, delta)   (cks20_rho)
        rho_sel    = f rho,  rho_rel = (1 - f) rho
        eps_sel    = sqrt(2 rho_sel / d)                  (pure epsilon of one row's selection)
        b          = 2 k Delta_fl / eps_sel
        sigma      = sqrt(d k') Delta_fl / sqrt(2 rho_rel)

    When ``k = d`` every column is selected whatever the noise: the selection costs nothing,
    ``f = 0`` (b is then irrelevant; it is set to sigma).

    The split f minimises the error bound of
    :func:`~dpdist.algorithms.sparse_covariance.bounds.privcov_zcdp_error_bound`,
    ``6 k b L_1 + sigma sqrt((k + 2) L_2)`` (its only terms that depend on f), which is
    ``C_1 / sqrt(f) + C_2 / sqrt(1 - f)`` times ``Delta_fl sqrt(d / (2 rho))`` with ``C_1 = 12
    k^2 L_1`` and ``C_2 = sqrt(k' (k + 2) L_2)``; its minimum is at ``f / (1 - f) = (C_1 /
    C_2)^(2/3)``. beta (public) enters only through the logarithms ``L_1, L_2``.

    With ``row_clip`` C finite (rows scaled to L2 norm at most C after the entry clip), the
    release's L2 sensitivity is :func:`privcov_release_sensitivity`'s ``min(sqrt(d k')
    Delta_fl, kappa(n) 2 C min(R sqrt(k'), C) / n)`` (docs/privacy/privcov.md, Lemma 3a), sigma
    is that over ``sqrt(2 rho_rel)``, and ``C_2`` is multiplied by its ratio to ``sqrt(d k')
    Delta_fl`` (``C_2 = sqrt((k + 2) L_2) Delta_rel / (sqrt(d) Delta_fl)``): the split moves
    towards the selection. ``release_sensitivity_entry`` and ``release_sensitivity_row`` record
    both routes. The selection's entry sensitivity ``Delta_fl`` is unchanged (scaling only
    shrinks entries).
    """
    epsilon, delta, n, d, k, clip = _check_privcov_inputs(epsilon, delta, n_samples, n_features, k, clip)
    beta = check_probability(beta, "beta")
    row_clip = check_row_clip(row_clip, allow_none=False)
    k_released = min(k + 1, d)
    sensitivity = 2 * clip**2 / n
    sens_fl, kappa = float_sensitivity(sensitivity, n)
    release_sens, entry_route, row_route = privcov_release_sensitivity(n, d, k_released, clip, row_clip)
    rho = cks20_rho(epsilon, delta)
    coefficient = 2 * k if k < d else 0
    log_sel, log_rel = _privcov_zcdp_logs(d, beta)
    coordinates = d * k_released
    share, rho_sel, rho_rel, sigma = _privcov_release(
        rho, 12.0 * k * k * log_sel if coefficient else 0.0, k, k_released, log_rel, release_sens, entry_route)
    if coefficient:
        eps_sel = math.sqrt(2.0 * rho_sel / d)
        b = coefficient * sens_fl / eps_sel
    else:
        eps_sel, b = 0.0, sigma
    return PrivCovZCDPCalibration(
        epsilon=epsilon,
        delta=delta,
        n_samples=n,
        n_features=d,
        k=k,
        clip=clip,
        beta=beta,
        k_released=k_released,
        rho=rho,
        selection_share=share,
        rho_selection=rho_sel,
        rho_release=rho_rel,
        sensitivity=sensitivity,
        float_factor=kappa,
        selection_coefficient=coefficient,
        selection_row_epsilon=eps_sel,
        laplace_scale=b,
        release_coordinates=coordinates,
        release_sensitivity=release_sens,
        gaussian_sigma=sigma,
        row_clip=row_clip,
        release_sensitivity_entry=entry_route,
        release_sensitivity_row=row_route,
    )


@dataclass(frozen=True)
class PrivCovGumbelCalibration:
    """All constants of one run of PrivCov with Gumbel top-k selection (``selection="gumbel"``),
    computed from public values (:func:`privcov_gumbel_calibration`).

    ``sensitivity`` and ``float_factor`` are as in :class:`PrivCovCalibration`. ``gumbel_scale``
    is the selection's Gumbel scale beta in data units (the keys are ``|S_ij| / beta + G_ij``),
    ``selection_steps`` the number of exponential-mechanism steps of one row (k, or 0 when
    ``k = d``: the selection is then a constant), ``selection_step_epsilon`` the bounded-range
    parameter ``2 Delta_fl / beta`` of one step, ``gaussian_sigma`` the release's Gaussian sigma;
    ``rho = rho_selection + rho_release`` is the zCDP budget whose tight conversion is the
    requested (epsilon, delta).
    """

    epsilon: float
    delta: float
    n_samples: int
    n_features: int
    k: int
    clip: float
    beta: float
    k_released: int
    rho: float
    selection_share: float
    rho_selection: float
    rho_release: float
    sensitivity: float
    float_factor: float
    selection_steps: int
    selection_step_epsilon: float
    gumbel_scale: float
    release_coordinates: int
    release_sensitivity: float
    gaussian_sigma: float
    row_clip: float
    release_sensitivity_entry: float
    release_sensitivity_row: float
    selection_sensitivity: float
    selection_sensitivity_row: float

    def to_dict(self) -> dict:
        return asdict(self)


def _privcov_gumbel_logs(n_features: int, beta: float) -> tuple[float, float]:
    """``(T, log(12 d / beta))`` of
    :func:`~dpdist.algorithms.sparse_covariance.bounds.privcov_gumbel_error_bound`: ``T = t_up +
    t_low`` with ``t_up = log(12 d^2 / beta)`` (``d^2 P(G > t_up) <= d^2 e^-t_up = beta/12``) and ``t_low =
    log(log(12 d^2 / beta))`` (``d^2 P(G < -t_low) = d^2 exp(-e^t_low) = beta/12``), G standard
    Gumbel; the second is the release noise's union-bound logarithm."""
    d = int(n_features)
    t_up = math.log(12.0 * d * d / beta)
    return t_up + math.log(t_up), math.log(12.0 * d / beta)


def privcov_gumbel_calibration(
    epsilon: float, delta: float, n_samples: int, n_features: int, k: int, clip: float, beta: float = 0.1,
    *, row_clip: float = math.inf,
) -> PrivCovGumbelCalibration:
    """Calibrate PrivCov with Gumbel top-k selection and a Gaussian release (``selection="gumbel"``).

    The guarantee, proved in docs/privacy/privcov.md and
    :mod:`dpdist.privacy.mechanisms.privcov.mechanism`: row i's selection, the k largest keys
    ``|S_ij| / beta + G_ij`` (G i.i.d. standard Gumbel), has the law of k peeling steps of the
    exponential mechanism with utility ``|S_ij|`` (Durfee and Rogers 2019); a step whose
    utilities move by at most ``Delta_fl`` between neighbours is ``(2 Delta_fl / beta)``-bounded
    range, hence ``(2 Delta_fl / beta)^2 / 8``-zCDP (Cesar and Rogers 2021); the ``d k`` steps
    and the Gaussian release of the ``d k'`` selected values and diagonal entries (L2
    sensitivity ``sqrt(d k') Delta_fl``) compose in zCDP, converted by CKS20 (Prop. 12)::

        rho        = the largest rho that converts to (epsilon, delta)   (cks20_rho)
        rho_sel    = f rho,  rho_rel = (1 - f) rho
        eps_step   = sqrt(8 rho_sel / (d k))       (bounded range of one step)
        beta_g     = 2 Delta_fl / eps_step = Delta_fl sqrt(d k / (2 rho_sel))
        sigma      = sqrt(d k') Delta_fl / sqrt(2 rho_rel)

    At the same rho_sel the Laplace selection of :func:`privcov_zcdp_calibration` needs ``b =
    2 k Delta_fl sqrt(d / (2 rho_sel))``: ``b / beta_g = 2 sqrt(k)``.

    When ``k = d`` every column is selected whatever the noise: the selection costs nothing,
    ``f = 0`` (beta_g is then irrelevant; it is set to sigma).

    The split f minimises
    :func:`~dpdist.algorithms.sparse_covariance.bounds.privcov_gumbel_error_bound`'s terms that
    depend on it, ``3 k T beta_g + sigma sqrt((k + 2) L_2)`` = ``Delta_fl sqrt(d / (2 rho)) (C_1 / sqrt(f) +
    C_2 / sqrt(1 - f))`` with ``C_1 = 3 k^1.5 T`` and ``C_2 = sqrt(k' (k + 2) L_2)``; convex in
    f, least at ``f / (1 - f) = (C_1 / C_2)^(2/3)``. beta (public) enters only through T, L_2.

    With ``row_clip`` C finite (rows scaled to L2 norm at most C after the entry clip), the
    release and ``C_2`` are those of :func:`privcov_zcdp_calibration` with a row clip (Lemma 3a).
    The selection's steps are calibrated to the rows' root-mean-square score
    sensitivity ``Delta_sel`` of :func:`privcov_selection_sensitivity` (``min(Delta_fl, kappa(n)
    2 C min(R, C) / (n sqrt(d)))``, Lemma 4a) in place of ``Delta_fl``: ``beta_g = 2 Delta_sel /
    eps_step``, and ``C_1`` is multiplied by ``Delta_sel / Delta_fl``.
    """
    epsilon, delta, n, d, k, clip = _check_privcov_inputs(epsilon, delta, n_samples, n_features, k, clip)
    beta = check_probability(beta, "beta")
    row_clip = check_row_clip(row_clip, allow_none=False)
    k_released = min(k + 1, d)
    sensitivity = 2 * clip**2 / n
    sens_fl, kappa = float_sensitivity(sensitivity, n)
    release_sens, entry_route, row_route = privcov_release_sensitivity(n, d, k_released, clip, row_clip)
    sel_sens, _, sel_row_route = privcov_selection_sensitivity(n, d, clip, row_clip)
    rho = cks20_rho(epsilon, delta)
    steps = k if k < d else 0
    t_sel, log_rel = _privcov_gumbel_logs(d, beta)
    coordinates = d * k_released
    # C_1 = 3 k^1.5 T on the entry route, proportional to the selection's root-mean-square row sensitivity
    c1 = 3.0 * k * math.sqrt(k) * t_sel * (sel_sens / sens_fl) if steps else 0.0
    share, rho_sel, rho_rel, sigma = _privcov_release(rho, c1, k, k_released, log_rel, release_sens, entry_route)
    if steps:
        eps_step = math.sqrt(8.0 * rho_sel / (d * steps))
        scale = 2.0 * sel_sens / eps_step
    else:
        eps_step, scale = 0.0, sigma
    return PrivCovGumbelCalibration(
        epsilon=epsilon,
        delta=delta,
        n_samples=n,
        n_features=d,
        k=k,
        clip=clip,
        beta=beta,
        k_released=k_released,
        rho=rho,
        selection_share=share,
        rho_selection=rho_sel,
        rho_release=rho_rel,
        sensitivity=sensitivity,
        float_factor=kappa,
        selection_steps=steps,
        selection_step_epsilon=eps_step,
        gumbel_scale=scale,
        release_coordinates=coordinates,
        release_sensitivity=release_sens,
        gaussian_sigma=sigma,
        row_clip=row_clip,
        release_sensitivity_entry=entry_route,
        release_sensitivity_row=row_route,
        selection_sensitivity=sel_sens,
        selection_sensitivity_row=sel_row_route,
    )

