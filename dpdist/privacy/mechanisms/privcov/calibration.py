"""Calibration of PrivCov (Algorithm 1 of the COLT 2026 paper, Section 3.1) by (epsilon, delta)
composition: clip levels, the sensitivities of its selection and release, the noise scales.
Theorem 1's error bound and the least sample size that meets a target are utility, not
privacy: they live in :mod:`dpdist.algorithms.sparse_covariance.bounds`.

Each function implements one formula of the paper and cites it. Nothing here sees data.
Constants in sensitivities and noise scales are the paper's; the only deviation from a printed
formula is marked *deviation* with its reason and always makes noise larger.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from dpdist._validation import check_int, check_positive, check_probability
from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import advanced_composition_epsilon
from dpdist.privacy.budget import check_delta, check_epsilon
from dpdist.privacy.float_rounding import float_sensitivity

__all__ = [
    "PrivCovCalibration",
    "check_row_clip",
    "gaussian_row_norm_bound",
    "privcov_calibration",
    "privcov_pure_coefficient",
    "privcov_release_sensitivity",
    "privcov_score_bound",
    "privcov_selection_sensitivity",
    "subgaussian_clip",
]


def subgaussian_clip(sigma: float, n_samples: int, n_features: int, beta: float) -> float:
    """Truncation level R = sigma * sqrt(2 log(6 n d / beta)) (proof of Theorem 1).

    With this R no entry of n samples from a sigma-sub-Gaussian distribution is clipped,
    except with probability beta/3. Utility only: privacy holds for any R.
    """
    sigma = check_positive(sigma, "sigma")
    beta = check_probability(beta, "beta")
    n = check_int(n_samples, "n_samples", low=1)
    d = check_int(n_features, "n_features", low=1)
    return sigma * math.sqrt(2.0 * math.log(6.0 * n * d / beta))


def gaussian_row_norm_bound(sigma: float, n_samples: int, n_features: int, beta: float) -> float:
    """Row-norm level ``C = sigma sqrt(d + 2 sqrt(d t) + 2 t)`` with ``t = log(n / beta)``.

    For a Gaussian row ``x ~ N(0, Sigma)`` with ``||Sigma||_op <= sigma^2``, ``||x||^2 = sum_i
    lambda_i g_i^2`` (lambda the eigenvalues of Sigma, g i.i.d. standard normal), and Laurent and
    Massart 2000 (Lemma 1) give ``P(||x||^2 >= sum lambda_i + 2 sqrt(t sum lambda_i^2) + 2 t max
    lambda_i) <= e^-t``; with ``sum lambda_i <= d sigma^2``, ``sum lambda_i^2 <= d sigma^4`` and
    ``max lambda_i <= sigma^2`` that is ``P(||x|| > C) <= e^-t = beta / n``: no row of n is
    scaled down, but with probability beta. Utility only: privacy holds for any C.
    """
    sigma = check_positive(sigma, "sigma")
    beta = check_probability(beta, "beta")
    n = check_int(n_samples, "n_samples", low=1)
    d = check_int(n_features, "n_features", low=1)
    t = math.log(n / beta)
    return sigma * math.sqrt(d + 2.0 * math.sqrt(d * t) + 2.0 * t)


def check_row_clip(row_clip, *, allow_none: bool = True):
    """A row-norm level: None (not given), a positive finite float, or ``math.inf`` (no row clip)."""
    if row_clip is None and allow_none:
        return None
    try:
        value = float(row_clip)
    except (TypeError, ValueError):
        raise ValidationError(f"row_clip must be a positive number or inf, got {row_clip!r}") from None
    if isinstance(row_clip, bool) or math.isnan(value) or not value > 0:
        raise ValidationError(f"row_clip must be a positive number or inf, got {row_clip!r}")
    return value


def privcov_release_sensitivity(n_samples: int, n_features: int, k_released: int, clip: float,
                                row_clip: float = math.inf) -> tuple[float, float, float]:
    """L2 sensitivity of PrivCov's released values, float error included:
    ``(release, entry_route, row_route)`` with ``release = min(entry_route, row_route)``.

    The released addresses P hold at most ``k'`` addresses a row (``k' = k_released``, the
    diagonal included), so ``|P| <= d k'``.

    * Entry route: every computed entry moves by at most ``Delta_fl = kappa(n) 2 R^2 / n``, so
      the vector at P by at most ``sqrt(d k') Delta_fl``.
    * Row route (rows entry-clipped to R, then scaled to L2 norm at most ``C = row_clip``): for
      such a row y, ``||(y y^T)_P||_F^2 = sum_i y_i^2 sum_{j in P_i} y_j^2 <= ||y||^2 min(k'
      R^2, ||y||^2) <= C^2 min(k' R^2, C^2)``, so one replaced row moves the exact moment at P
      by at most ``Delta_2 = 2 C min(R sqrt(k'), C) / n``. The same bound ``B = C min(R
      sqrt(k'), C)`` holds for ``|y| |y|^T`` (same entries in magnitude), so the computed
      moment moves by at most ``kappa(n) Delta_2`` in this norm
      (:func:`gram_rounding_factor`'s claim with N the Frobenius norm at P). ``inf`` when C
      is inf.
    """
    n, d, kr = int(n_samples), int(n_features), int(k_released)
    entry_fl, kappa = float_sensitivity(2 * clip**2 / n, n)
    entry_route = math.sqrt(d * kr) * entry_fl
    if not math.isfinite(row_clip):
        return entry_route, entry_route, math.inf
    row_route = float_sensitivity(2.0 * row_clip * min(clip * math.sqrt(kr), row_clip) / n, n)[0]
    return min(entry_route, row_route), entry_route, row_route


def privcov_selection_sensitivity(n_samples: int, n_features: int, clip: float,
                                  row_clip: float = math.inf) -> tuple[float, float, float]:
    """Root-mean-square over the d rows of the most one row's computed scores move, float error
    included: ``(selection, entry_route, row_route)`` with ``selection = min(entry_route,
    row_route)``. For neighbours, with ``delta_i = max_j |S_ij - S'_ij|`` (S the computed
    clipped moment), ``sqrt(sum_i delta_i^2) <= sqrt(d) selection``.

    * Entry route: every computed entry moves by at most ``Delta_fl = kappa(n) 2 R^2 / n``, so
      ``delta_i <= Delta_fl`` for every row.
    * Row route (rows entry-clipped to R, then scaled to L2 norm at most ``C = row_clip``): in
      the norm ``N(M) = sqrt(sum_i max_j M_ij^2)`` (absolute, hence monotone) one row's term has
      ``N(|y| |y|^T) = ||y||_2 ||y||_inf <= C min(R, C)``, so one replaced row moves the exact
      moment by at most ``2 C min(R, C) / n`` in N, and the computed one by ``kappa(n)`` times
      that (:func:`gram_rounding_factor`'s claim with this N); divided by ``sqrt(d)``, and
      raised by a factor ``1 + 2**-50`` so that the float quotient times ``sqrt(d)`` is not
      below the bound (the square root and the division round twice). ``inf`` when C is inf.
    """
    n, d = int(n_samples), int(n_features)
    entry_route = float_sensitivity(2 * clip**2 / n, n)[0]
    if not math.isfinite(row_clip):
        return entry_route, entry_route, math.inf
    row_route = float_sensitivity(2.0 * row_clip * min(clip, row_clip) / n, n)[0] / math.sqrt(d) * (1.0 + 2.0**-50)
    return min(entry_route, row_route), entry_route, row_route


@dataclass(frozen=True)
class PrivCovCalibration:
    """All constants of one run of Algorithm 1 (PrivCov), computed from public values.

    Attributes mirror the lines of Algorithm 1. ``k_released = min(k + 1, d)`` is the
    per-row release size. ``sensitivity`` is Delta = 2 R^2 / n in exact arithmetic and
    ``float_factor`` the factor kappa(n) that makes it bound the computed second moment
    (:func:`gram_rounding_factor`). ``laplace_scale = max(laplace_scale_paper,
    laplace_scale_pure)``; ``laplace_rule`` names the active term (see
    :func:`privcov_calibration`).
    """

    epsilon: float
    delta: float
    n_samples: int
    n_features: int
    k: int
    clip: float
    k_released: int
    delta_row: float
    epsilon_row: float
    sensitivity: float
    float_factor: float
    laplace_scale_paper: float
    laplace_scale_pure: float
    laplace_rule: str
    laplace_scale: float
    composed_epsilon: float
    composed_delta: float
    composition: str

    def to_dict(self) -> dict:
        return asdict(self)


def privcov_pure_coefficient(k: int, n_features: int) -> int:
    """``c(k, d)`` of the pure-DP coupling bound: one row of Algorithm 1 is ``c Delta / b``-DP.

    ``c = 2k + k'`` with ``k' = min(k + 1, d)`` released values, except that the selection
    costs nothing when ``k = d`` (every column is selected): ``c = k'`` then. For k < d this
    is ``3k + 1``: k shifted selection scores on each side of the coupling, k + 1 released values.
    """
    k, d = int(k), int(n_features)
    k_released = min(k + 1, d)
    return (2 * k if k < d else 0) + k_released


def _check_privcov_inputs(epsilon, delta, n_samples, n_features, k, clip) -> tuple:
    """The public inputs of either PrivCov calibration, validated: (epsilon, delta, n, d, k, clip)."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    n = check_int(n_samples, "n_samples", low=2)
    d = check_int(n_features, "n_features", low=2)
    k = check_int(k, "k", low=1)
    if k > d:
        raise ValidationError(f"k must satisfy 1 <= k <= d = {d}, got k={k}")
    return epsilon, delta, n, d, k, check_positive(clip, "clip")


def privcov_calibration(
    epsilon: float, delta: float, n_samples: int, n_features: int, k: int, clip: float
) -> PrivCovCalibration:
    """Calibrate Algorithm 1 (PrivCov) of the COLT 2026 paper, Section 3.1.

    Lines 3-4 of Algorithm 1, with the two deviations below::

        delta_row = delta / (2 d)
        eps_row   = (eps / 4) * (2 d log(2 / delta))^(-1/2)
        Delta     = 2 R^2 / n                       (entry sensitivity of the clipped moment)
        Delta_fl  = kappa(n) Delta                  (float error, gram_rounding_factor)
        b_paper   = (2 Delta_fl / eps_row) * sqrt(k' log(d / delta_row)),  k' = k + 1
        b_pure    = c(k, d) Delta_fl / eps_row,    c = 3k + 1 (k < d), k' (k = d)
        b         = max(b_paper, b_pure)

    *Deviation 1* (the diagonal): line 11 releases the diagonal entry of every row
    even when i is not in S_i, so the per-row release is S_i plus {i}: k' = k + 1 values.
    The paper's term is evaluated with k' (b grows by sqrt((k+1)/k)).

    *Deviation 2* (the selection's proof): the paper's b cites Theorem 2.2 of Qiao-Su-Zhang 2021, which
    needs 8 Delta (with eps <= 0.2, delta <= 0.05), covers the selected index set only and
    signed top-k only, while line 6 selects by magnitude and lines 8 and 11 also release
    values. We rely instead on the pure-DP coupling below, and take ``b = max(b_paper,
    b_pure)``: never less noise than the paper. ``b_pure`` is the active term when
    ``c(k, d) > 2 sqrt(k' log(d / delta_row))`` (``laplace_rule`` says which); for
    delta = 1e-6 that is k above about 10.

    **Claim (one row is ``c Delta / b``-DP, pure).** Fix row i and neighbours D, D' (one row
    of X replaced). Every entry of row i of the clipped second moment moves by
    ``a_j = Sigma'_ij - Sigma_ij``, ``|a_j| <= Delta`` (rows clipped entrywise to [-R, R]:
    each product moves by at most 2 R^2, divided by n). The row's output is ``(S, v)``:
    ``y_j = Sigma_ij + w_j``, S = the k indices of largest ``|y_j|`` (line 6), and
    ``v_j = Sigma_ij + z_j`` for j in ``S u {i}`` (lines 8 and 11), with w, z i.i.d.
    Laplace(b). Fix an output set S and let ``E_S = {w : S(w) = S}`` under D. Define
    ``phi(w, z) = (w', z')`` by

    * ``w'_j = w_j + 2 Delta sign(y_j)`` for j in S, ``w'_j = w_j`` otherwise;
    * ``z'_j = z_j - a_j`` for j in ``S u {i}``, ``z'_j = z_j`` otherwise.

    Under D' with noise ``(w', z')``: for j in S, ``y'_j = y_j + a_j + 2 Delta sign(y_j)``
    has the sign of y_j and ``|y'_j| >= |y_j| + Delta``; for l not in S, ``|y'_l| = |y_l +
    a_l| <= |y_l| + Delta``. As ``|y_l| <= |y_j|`` (ties have probability 0), every
    unselected score stays below every selected one: S is selected again, and ``v' = v``.
    phi is a translation on each of the finitely many regions of constant ``sign(y_j)``
    (j in S), and it is injective on ``E_S x R^d``: ``sign(y'_j) = sign(y_j)`` is read off
    ``w'``, which recovers w. The Laplace density ratio is at most
    ``exp(sum |shift| / b) <= exp((2 Delta |S| + Delta |S u {i}|) / b)``, and ``|S| = k``,
    ``|S u {i}| <= k'``. So for every event A of outputs with set S,
    ``P_D[A] <= e^{(2k + k') Delta / b} P_D'[A]``, and summing over S gives pure
    ``(2k + k') Delta / b``-DP. When ``k = d``, S is all of [d] whatever the noise: no shift of
    w is needed and the row is ``k' Delta / b``-DP. Hence ``b >= c(k, d) Delta / eps_row``
    makes every row (eps_row, 0)-DP (a fortiori (eps_row, delta_row)-DP). The same holds for
    the computed second moment with ``Delta_fl`` (its entries move by at most ``Delta_fl``,
    :func:`gram_rounding_factor`), and for continuous noise; the noise actually drawn is
    the lattice version of :class:`dpdist.privacy.mechanisms.PrivCovMechanism`, whose
    sensitivity in lattice units covers the rounding (floating-point sampling would be outside
    the proof: Mironov 2012). We know no tighter valid
    bound for the magnitude selection with released values: the 2 Delta shift is needed
    because the unselected scores may each rise by Delta while a selected one falls by Delta.

    Composition: the d rows compose by advanced composition (DR14 Theorem 3.20, delta' =
    delta / 2) to (eps*, d delta_row + delta/2 = delta) (the d delta_row term is kept, though
    the coupling gives delta_row = 0). The paper bounds eps* <= eps using e^x - 1 <= 2x,
    valid for x <= 1. For eps > 1 that shortcut may not hold, so this function evaluates the
    exact composition bound (and basic composition, d * eps_row, whichever is smaller) and
    refuses a calibration whose composed total exceeds the requested epsilon.
    """
    epsilon, delta, n, d, k, clip = _check_privcov_inputs(epsilon, delta, n_samples, n_features, k, clip)
    k_released = min(k + 1, d)
    delta_row = delta / (2 * d)
    eps_row = (epsilon / 4) / math.sqrt(2 * d * math.log(2 / delta))
    sensitivity = 2 * clip**2 / n
    sens_fl, kappa = float_sensitivity(sensitivity, n)
    b_paper = (2 * sens_fl / eps_row) * math.sqrt(k_released * math.log(d / delta_row))
    b_pure = privcov_pure_coefficient(k, d) * sens_fl / eps_row
    if b_pure > b_paper:
        b, rule = b_pure, f"pure-DP coupling: c Delta / eps_row, c = {privcov_pure_coefficient(k, d)}"
    else:
        b, rule = b_paper, "paper (Algorithm 1 line 4, with k+1)"
    advanced = advanced_composition_epsilon(eps_row, d, delta / 2)
    basic = d * eps_row
    if advanced <= basic:
        composed, composed_delta, how = advanced, d * delta_row + delta / 2, "advanced (DR14 Thm 3.20)"
    else:
        composed, composed_delta, how = basic, d * delta_row, "basic (DR14 Thm 3.16)"
    if composed > epsilon * (1 + 1e-12):
        raise ValidationError(
            f"epsilon={epsilon} is too large for the per-row split of Algorithm 1 at d={d}: "
            f"the composed total would be {composed:.4g} > epsilon; use a smaller epsilon"
        )
    return PrivCovCalibration(
        epsilon=epsilon,
        delta=delta,
        n_samples=n,
        n_features=d,
        k=k,
        clip=clip,
        k_released=k_released,
        delta_row=delta_row,
        epsilon_row=eps_row,
        sensitivity=sensitivity,
        float_factor=kappa,
        laplace_scale_paper=b_paper,
        laplace_scale_pure=b_pure,
        laplace_rule=rule,
        laplace_scale=b,
        composed_epsilon=composed,
        composed_delta=composed_delta,
        composition=how,
    )


def privcov_score_bound(clip: float, n_samples: int) -> float:
    """A public bound C >= |S_ij| for the *computed* clipped second moment ``(1/n) Y^T Y``.

    Entries of Y are in [-R, R] exactly (``np.clip``); every computed product has magnitude
    <= fl(R^2); a float sum of n such terms in any order (BLAS, tree over chunks) is <=
    n fl(R^2) (1 + gamma_n) with gamma_n = n u / (1 - n u), u = 2^-53; scaling by fl(1/n)
    adds two roundings. So ``|S_ij| <= R^2 (1 + (n + 4) u / (1 - (n + 4) u))(1 + u)^2``; we
    return ``R^2 (1 + 4 (n + 8) u)``, rounded up, which exceeds it for n < 2^50.
    """
    r2 = float(clip) * float(clip)
    u = 2.0**-53
    return math.nextafter(r2 * (1.0 + 4.0 * (int(n_samples) + 8) * u), math.inf)
