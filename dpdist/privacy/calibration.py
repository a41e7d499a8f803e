"""Calibration functions: noise scales from public parameters only.

Each function implements one formula of a paper and cites it. Nothing here sees data.
Constants in sensitivities and noise scales are the papers'; the only deviation from a
printed formula is marked *deviation* with its reason and always makes noise larger.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from scipy import optimize, special

from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import check_delta, check_epsilon

__all__ = [
    "PrivCovCalibration",
    "advanced_composition_epsilon",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "gaussian_sigma",
    "privcov_calibration",
    "privcov_error_bound",
    "privcov_min_samples",
    "search_min_samples",
    "subgaussian_clip",
    "wang_xu_calibration",
    "SAMPLING_CONSTANT",
]

#: Constant C of Fact 1 (Wainwright 2019, Lemma 6.26) used by the *utility* bounds of
#: ``plan()``. The paper leaves it unspecified; 4 is our documented choice (Bernstein's
#: inequality for products of two N(0, sigma^2) coordinates gives a constant below 4 with the
#: paper's log(6d/beta) union term for d >= 2). It never enters a noise scale.
SAMPLING_CONSTANT = 4.0


def advanced_composition_epsilon(epsilon_step: float, n_steps: int, delta_slack: float) -> float:
    """Total epsilon of ``n_steps`` adaptive (epsilon_step, .)-DP steps (DR14, Theorem 3.20).

    ``eps' = sqrt(2 k ln(1/delta')) eps + k eps (e^eps - 1)``, with total delta
    ``k * delta_step + delta'``. Exact formula, valid for every eps > 0.
    """
    k = int(n_steps)
    return math.sqrt(2 * k * math.log(1 / delta_slack)) * epsilon_step + k * epsilon_step * math.expm1(
        epsilon_step
    )


def subgaussian_clip(sigma: float, n_samples: int, n_features: int, beta: float) -> float:
    """Truncation level R = sigma * sqrt(2 log(6 n d / beta)) (proof of Theorem 1).

    With this R no entry of n samples from a sigma-sub-Gaussian distribution is clipped,
    except with probability beta/3. Utility only: privacy holds for any R.
    """
    return float(sigma) * math.sqrt(2.0 * math.log(6.0 * n_samples * n_features / beta))


@dataclass(frozen=True)
class PrivCovCalibration:
    """All constants of one run of Algorithm 1 (PrivCov), computed from public values.

    Attributes mirror the lines of Algorithm 1. ``k_released = k + 1`` is the per-row
    release size that calibrates ``laplace_scale`` (see :func:`privcov_calibration`).
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
    laplace_scale: float
    composed_epsilon: float
    composed_delta: float
    composition: str

    def to_dict(self) -> dict:
        return asdict(self)


def privcov_calibration(
    epsilon: float, delta: float, n_samples: int, n_features: int, k: int, clip: float
) -> PrivCovCalibration:
    """Calibrate Algorithm 1 (PrivCov) of the COLT 2026 paper, Section 3.1.

    Lines 3-4 of Algorithm 1::

        delta_row = delta / (2 d)
        eps_row   = (eps / 4) * (2 d log(2 / delta))^(-1/2)
        Delta     = 2 R^2 / n                       (entry sensitivity of the clipped moment)
        b         = (2 Delta / eps_row) * sqrt(k' log(d / delta_row))

    *Deviation* (ALGORITHMS.md section 1): line 11 releases the diagonal entry of every row
    even when i is not in S_i, so the per-row release is S_i plus {i}: k' = k + 1 entries.
    We calibrate with k' = k + 1, which enlarges b by sqrt((k+1)/k).

    Privacy: each row's noisy top-k' selection and value release is (eps_row, delta_row)-DP
    by Theorem 2.2 of Qiao-Su-Zhang 2021 (one-shot Laplace top-k); the d rows compose by
    advanced composition (DR14 Theorem 3.20, delta' = delta / 2) to (eps*, d delta_row +
    delta/2 = delta). The paper bounds eps* <= eps using e^x - 1 <= 2x, valid for x <= 1.
    For eps > 1 that shortcut may not hold, so this function evaluates the exact
    composition bound (and basic composition, d * eps_row, whichever is smaller) and refuses
    a calibration whose composed total exceeds the requested epsilon.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    n, d, k = int(n_samples), int(n_features), int(k)
    if n < 2 or d < 2:
        raise ValidationError(f"PrivCov needs n >= 2 and d >= 2, got n={n}, d={d}")
    if not (1 <= k <= d):
        raise ValidationError(f"k must satisfy 1 <= k <= d = {d}, got k={k}")
    clip = float(clip)
    if not (math.isfinite(clip) and clip > 0):
        raise ValidationError(f"clip must be finite and > 0, got {clip!r}")
    k_released = min(k + 1, d)
    delta_row = delta / (2 * d)
    eps_row = (epsilon / 4) / math.sqrt(2 * d * math.log(2 / delta))
    sensitivity = 2 * clip**2 / n
    b = (2 * sensitivity / eps_row) * math.sqrt(k_released * math.log(d / delta_row))
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
        laplace_scale=b,
        composed_epsilon=composed,
        composed_delta=composed_delta,
        composition=how,
    )


def privcov_error_bound(cal: PrivCovCalibration, sigma: float, beta: float) -> dict:
    """Theorem 1's operator-norm error bound for a calibration, with its pieces.

    From the proof of Theorem 1, equation (4): with probability >= 1 - beta (when no entry is
    clipped), ``||M - Sigma||_op <= 6 k lambda`` with ``lambda = lambda_samp + lambda_priv``,
    ``lambda_samp = C sigma^2 (sqrt(log(6d/beta)/n) + log(6d/beta)/n)`` (C =
    :data:`SAMPLING_CONSTANT`) and ``lambda_priv = b log(12 d^2 / beta)``.
    """
    n, d, k = cal.n_samples, cal.n_features, cal.k
    t = math.log(6 * d / beta)
    lam_samp = SAMPLING_CONSTANT * sigma**2 * (math.sqrt(t / n) + t / n)
    lam_priv = cal.laplace_scale * math.log(12 * d**2 / beta)
    lam = lam_samp + lam_priv
    return {
        "lambda_samp": lam_samp,
        "lambda_priv": lam_priv,
        "lambda": lam,
        "error_bound": 6 * k * lam,
        "relative_error_bound": 6 * k * lam / sigma**2,
    }


def privcov_min_samples(
    target_error: float,
    epsilon: float,
    delta: float,
    n_features: int,
    k: int,
    *,
    sigma: float,
    beta: float,
    clip: float | None = None,
) -> int:
    """Least n for which :func:`privcov_error_bound` is <= ``target_error`` (an absolute
    operator-norm error; divide by sigma^2 for Problem 1's alpha). The clip level follows
    :func:`subgaussian_clip` at each n unless ``clip`` is fixed."""
    target_error = float(target_error)
    if not target_error > 0:
        raise ValidationError(f"target_error must be > 0, got {target_error!r}")

    def bound(n: int) -> float:
        r = clip if clip is not None else subgaussian_clip(sigma, n, n_features, beta)
        cal = privcov_calibration(epsilon, delta, n, n_features, k, r)
        return privcov_error_bound(cal, sigma, beta)["error_bound"]

    return search_min_samples(bound, target_error, start=4, limit=1 << 62)


def search_min_samples(error_at, target: float, *, start: int = 40, limit: int = 10**40) -> int:
    """Least n with ``error_at(n) <= target`` for a non-increasing ``error_at`` (doubling,
    then bisection to 0.1% relative precision). Raises ValidationError when unreachable."""
    target = float(target)
    if not (math.isfinite(target) and target > 0):
        raise ValidationError(f"target error must be finite and > 0, got {target!r}")
    lo, hi = start // 2, start
    while error_at(hi) > target:
        lo, hi = hi, hi * 2
        if hi > limit:
            raise ValidationError(f"target error {target} is not reachable at any sample size")
    while hi - lo > max(1, lo // 1000):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if error_at(mid) <= target else (mid, hi)
    return int(hi)


def classic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Classic Gaussian mechanism (DR14 Theorem A.1): sigma = Delta sqrt(2 ln(1.25/delta)) / eps.

    Valid for eps < 1 only.
    """
    if not epsilon < 1:
        raise ValidationError("the classic Gaussian mechanism needs epsilon < 1")
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest sigma of the analytic Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    ``delta(sigma) = Phi(D/(2 s) - eps s / D) - e^eps Phi(-D/(2 s) - eps s / D)`` is
    decreasing in s; we return the s where it equals ``delta`` (found by bracketing root
    search, then nudged up by one part in 1e9 so the inequality holds after rounding).
    Exact (necessary and sufficient) for every eps > 0.
    """

    def excess(s: float) -> float:
        a = sensitivity / (2 * s)
        b = epsilon * s / sensitivity
        return special.ndtr(a - b) - math.exp(epsilon + special.log_ndtr(-a - b)) - delta

    lo, hi = 1e-12 * sensitivity, sensitivity
    while excess(hi) > 0:
        hi *= 2
    s = optimize.brentq(excess, lo, hi, xtol=1e-15 * sensitivity, rtol=1e-14)
    return s * (1 + 1e-9)


def gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> tuple[float, str]:
    """Gaussian noise scale for an L2 ``sensitivity`` at (eps, delta): the classic formula
    (the one ALGORITHMS.md's comparisons use) for eps < 1, the analytic Gaussian mechanism
    for eps >= 1 where the classic one does not apply. Returns (sigma, rule)."""
    if epsilon < 1:
        return classic_gaussian_sigma(sensitivity, epsilon, delta), "classic (DR14 Thm A.1)"
    return analytic_gaussian_sigma(sensitivity, epsilon, delta), "analytic (Balle-Wang 2018)"


def wang_xu_calibration(
    epsilon: float, delta: float, n_samples: int, n_features: int, clip: float
) -> dict:
    """Wang-Xu 2021 style release of the whole entry-clipped second moment.

    Rows y with entries in [-R, R] have ``||y y^T||_F <= R^2 d``; replacing one row moves
    (1/n) sum y y^T by at most ``2 R^2 d / n`` in Frobenius norm, which bounds the L2
    sensitivity of the released upper triangle (diagonal included). Symmetric Gaussian noise
    of scale :func:`gaussian_sigma` on that triangle is (eps, delta)-DP.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    sens = 2 * float(clip) ** 2 * int(n_features) / int(n_samples)
    sigma, rule = gaussian_sigma(sens, epsilon, delta)
    return {"sensitivity": sens, "gaussian_sigma": sigma, "rule": rule}
