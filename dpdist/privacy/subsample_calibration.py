"""Calibration of the subsample-and-aggregate baseline of private second-moment estimation
(MS25: Mahpud & Sheffet, NeurIPS 2025, Algorithm 3 and Appendix A): masking scale,
truncated-Laplace support, rejection threshold, the sample-size precondition of Lemma A.4, the
baseline's guarantee and the budget at which it matches the recursive estimator's.

Pure functions of public values; nothing here sees data.
"""

from __future__ import annotations

import math

import numpy as np

from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
from dpdist.privacy.second_moment_calibration import check_alpha, check_m, check_xi
from dpdist.privacy.zcdp import bun_steinke_epsilon, cks20_epsilon

__all__ = [
    "BASELINE_CN",
    "baseline_guarantee",
    "baseline_masking_scale",
    "baseline_max_pass_probability",
    "baseline_privacy_min_samples",
    "baseline_threshold",
    "equal_privacy_baseline_budget",
    "tlap_support",
]


#: Constant C_N of the baseline's masking scale (unspecified in the paper): ||N|| <= 2(sqrt(d) + sqrt(ln(4/xi)))
#: with probability >= 1 - xi/2 for a d x d standard Gaussian matrix (Davidson-Szarek).
BASELINE_CN = 2.0


def tlap_support(sensitivity: float, epsilon: float, delta: float) -> float:
    """Support bound A = (Delta/eps) ln(1 + (e^eps - 1) / (2 delta)) of TLap(Delta, eps, delta)
    (Geng-Ding-Guo-Kumar 2020; MS25 writes only TLap(2/T, eps, delta), and this support
    matches its threshold term)."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    ratio = math.expm1(epsilon) / (2.0 * delta) if epsilon <= 700.0 else math.inf
    if math.isinf(ratio):  # beyond float64: the same logarithm, with ln(e^eps - 1) = eps + ln(1 - e^-eps)
        return float(sensitivity) / epsilon * float(np.logaddexp(0.0, epsilon + math.log1p(-math.exp(-epsilon))
                                                                 - math.log(2.0 * delta)))
    return float(sensitivity) / epsilon * math.log1p(ratio)


def baseline_threshold(n_groups: int, epsilon: float, delta: float) -> float:
    """Algorithm 3 line 6: reject when Q_tilde < 0.8 + (2 / (k eps)) ln(1 + (e^eps-1)/(2 delta))."""
    return 0.8 + tlap_support(2.0 / int(n_groups), epsilon, delta)


def baseline_max_pass_probability(n_groups: int, epsilon: float, delta: float, agreement: float = 1.0) -> float:
    """Pr[Q + Z >= threshold] for Z ~ TLap(2/k, eps, delta) when the exact agreement is Q.

    With Delta = 2/k, A the support and t = 0.8 + A - Q: for 0 < t <= A,
    Pr[Z >= t] = (e^{-t eps/Delta} - e^{-A eps/Delta}) / (2 (1 - e^{-A eps/Delta})).
    Note: a threshold >= 1 does *not* make bottom certain: Q = 1 passes when
    Z >= A - 0.2, which has probability ~ delta e^{0.1 k eps} / (e^eps - 1) (about 0.47 at
    k = 136, eps = 1, delta = 1e-6); bottom is near-certain only for k well below
    (10/eps) ln(1 + (e^eps - 1)/(2 delta)).
    """
    k = int(n_groups)
    sens = 2.0 / k
    A = tlap_support(sens, epsilon, delta)
    t = 0.8 + A - float(agreement)
    if t <= 0:
        return 1.0 if -t >= A else 0.5 + 0.5 * (1 - math.exp(t * epsilon / sens)) / (1 - math.exp(-A * epsilon / sens))
    if t > A:
        return 0.0
    r = epsilon / sens
    return (math.exp(-t * r) - math.exp(-A * r)) / (2.0 * -math.expm1(-A * r))


def baseline_masking_scale(alpha: float, n_features: int, xi: float) -> float:
    """eta_b = alpha / (48 C_N (sqrt(d) + sqrt(ln(4/xi)))) (Algorithm 3 line 19; C_N
    is unspecified in the paper, 2 here, and the tail term is ln(4/xi), the masking event's
    probability, not the printed ln(4/beta))."""
    alpha = check_alpha(alpha)
    xi = check_xi(xi)
    return alpha / (48.0 * BASELINE_CN * (math.sqrt(int(n_features)) + math.sqrt(math.log(4.0 / xi))))


def baseline_privacy_min_samples(m: int, n_features: int, epsilon: float, delta: float, eta_b: float) -> float:
    """MS25's n-condition for the baseline's (2 eps, 4 e^eps delta)-DP (Lemma A.4 / Thm A.6):
    n >= 800 m max{sqrt(2d(d + 1/eta_b^2)/eps), 8d sqrt(ln(2/delta))/eps, 8 ln(2/delta)/eps,
    12 sqrt(d ln(2/delta)) / (eps eta_b)}."""
    m = check_m(m)
    d = int(n_features)
    eps = check_epsilon(epsilon)
    delta = check_delta(delta)
    l2 = math.log(2.0 / delta)
    terms = (
        math.sqrt(2.0 * d * (d + 1.0 / eta_b**2) / eps),
        8.0 * d * math.sqrt(l2) / eps,
        8.0 * l2 / eps,
        12.0 * math.sqrt(d * l2) / (eps * eta_b),
    )
    return 800.0 * m * max(terms)


def baseline_guarantee(epsilon: float, delta: float) -> ApproxDP:
    """Algorithm 3 run with (eps, delta) is (2 eps, 4 e^eps delta)-DP (Lemma A.4)."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    largest = -math.log(4.0 * delta)  # 4 e^eps delta < 1  <=>  eps < ln(1 / (4 delta))
    if not epsilon < largest:
        raise ValidationError(
            f"epsilon={epsilon:g} is too large for delta={delta!r}: the baseline's guarantee 4 e^epsilon delta "
            f"must be < 1, so epsilon must be < ln(1/(4 delta)) = {largest:.6g} (or choose a smaller delta)"
        )
    total_delta = 4.0 * math.exp(epsilon) * delta
    return ApproxDP(2.0 * epsilon, total_delta)


def equal_privacy_baseline_budget(rho: float, delta_star: float, *, method: str = "bun-steinke") -> tuple[float, float]:
    """Equal-privacy comparison: convert rho-zCDP to (eps*, delta*), then run the baseline with
    eps = eps*/2 and delta = delta*/(4 e^{eps*/2}) so its guarantee is (eps*, delta*)."""
    if method == "bun-steinke":
        eps_star = bun_steinke_epsilon(rho, delta_star)
    elif method == "cks20":
        eps_star = cks20_epsilon(rho, delta_star)
    else:
        raise ValidationError(f"method must be 'bun-steinke' or 'cks20', got {method!r}")
    return eps_star / 2.0, float(delta_star) / (4.0 * math.exp(eps_star / 2.0))
