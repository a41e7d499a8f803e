"""Zero-concentrated differential privacy (zCDP): the rho budget, composition, conversions.

A :class:`ZCDP` is a frozen value, like :class:`~dpdist.privacy.budget.ApproxDP`. Mechanisms
that spend zCDP (the recursive second-moment estimator and its private initialisation) state
what they spend as one of these; ``+`` composes (the rho's add) and keeps a labelled
breakdown so a release shows where each share of the budget went.

Facts used (all under replace-one neighbours):

- Gaussian mechanism (Bun & Steinke 2016, Prop. 1.6): a query of L2 sensitivity Delta plus
  N(0, sigma^2 I) is Delta^2 / (2 sigma^2)-zCDP.
- Composition (BS16, Lemma 2.3): adaptive composition adds the rho's.
- Pure DP to zCDP (BS16, Prop. 1.4): an epsilon-DP mechanism is epsilon^2/2-zCDP.
- zCDP to (epsilon, delta) (BS16, Prop. 1.3): rho-zCDP implies
  (rho + 2 sqrt(rho ln(1/delta)), delta)-DP for every delta > 0. *A typo in the paper*: MS25's
  Theorem 2.4 prints rho + sqrt(2 rho ln(1/delta)), which is smaller and not valid; dpdist
  never uses it.
- Tight conversion (Canonne, Kamath & Steinke 2020, Prop. 12; the one OpenDP uses):
  ``delta(eps) = inf_{a>1} exp((a-1)(a rho - eps)) (1 - 1/a)^a / (a - 1)``.

No accounting library is a dependency: the two conversions are closed-form or a 1-D convex
minimisation, checked in the tests against OpenDP's test vectors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeAlias

from scipy import optimize

from dpdist._validation import check_real
from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import MAX_EPSILON, ApproxDP, check_delta, check_epsilon

__all__ = [
    "CONVERSIONS",
    "Guarantee",
    "MAX_RHO",
    "ZCDP",
    "check_rho",
    "compose_zcdp",
    "cks20_delta",
    "cks20_epsilon",
    "cks20_rho",
    "bun_steinke_epsilon",
    "pure_dp_to_zcdp",
]

#: Names accepted by ``method=`` of :meth:`ZCDP.to_approx_dp`.
CONVERSIONS = ("bun-steinke", "cks20")


#: The largest rho a mechanism accepts: the zCDP of a MAX_EPSILON-DP mechanism (eps^2 / 2,
#: Bun & Steinke 2016, Proposition 1.4). Every rho estimator computes its release up to it;
#: above it the noise scales leave float64's range.
MAX_RHO = MAX_EPSILON**2 / 2.0


def check_rho(rho: float, name: str = "rho", *, allow_zero: bool = False, limit: bool = True) -> float:
    """Return ``rho`` as a float after checking it is a finite real number > 0 (or >= 0)
    (:mod:`dpdist._validation`: strings and bools are refused) and, with ``limit`` (a
    mechanism's parameter, not a composed guarantee), at most :data:`MAX_RHO`."""
    rho = check_real(rho, name, low=0.0, closed="left" if allow_zero else "neither")
    if limit and rho > MAX_RHO:
        raise ValidationError(
            f"{name}={rho:g} is larger than the largest rho dpdist supports, {MAX_RHO:g}: choose {name} <= "
            f"{MAX_RHO:g} (a rho that large already gives no meaningful privacy)"
        )
    return rho


def bun_steinke_epsilon(rho: float, delta: float) -> float:
    """epsilon = rho + 2 sqrt(rho ln(1/delta)) (Bun & Steinke 2016, Proposition 1.3)."""
    return _bun_steinke_epsilon(check_rho(rho, allow_zero=True, limit=False), check_delta(delta))


def _bun_steinke_epsilon(rho: float, delta: float) -> float:
    """:func:`bun_steinke_epsilon` of checked values."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def _cks20_log_delta(rho: float, epsilon: float) -> float:
    """log of CKS20's delta(eps) = inf_{a>1} exp((a-1)(a rho - eps)) (1-1/a)^a / (a-1).

    In log space the objective is h(a) = (a-1)(a rho - eps) + a log(1-1/a) - log(a-1), which is
    convex on a > 1 (h'' = 2 rho + 1/(a(a-1)) > 0) with h'(a) = (2a-1) rho - eps + log(1-1/a),
    increasing from -inf. The infimum is at the root of h', found by bracketing.
    """

    def slope(a: float) -> float:
        return (2.0 * a - 1.0) * rho - epsilon + math.log1p(-1.0 / a)

    hi = 2.0
    while slope(hi) < 0:
        hi *= 2.0
    lo = 1.0 + 1e-15
    a = optimize.brentq(slope, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500) if slope(lo) < 0 else lo
    return (a - 1.0) * (a * rho - epsilon) + a * math.log1p(-1.0 / a) - math.log(a - 1.0)


def cks20_delta(rho: float, epsilon: float) -> float:
    """Smallest delta of a rho-zCDP mechanism at ``epsilon`` (CKS20, Proposition 12)."""
    rho = check_rho(rho, allow_zero=True, limit=False)
    epsilon = check_real(epsilon, "epsilon", low=0.0, closed="left")
    if rho == 0:
        return 0.0
    return min(1.0, math.exp(_cks20_log_delta(rho, epsilon)))


def cks20_epsilon(rho: float, delta: float) -> float:
    """Smallest epsilon with ``cks20_delta(rho, epsilon) <= delta`` (numerical inversion).

    delta(eps) is decreasing in eps; the Bun-Steinke epsilon is a valid upper bracket (it is a
    looser conversion). The root is nudged up by one part in 1e12 so the returned epsilon is
    never below the exact one after rounding.
    """
    rho = check_rho(rho, allow_zero=True, limit=False)
    delta = check_delta(delta)
    if rho == 0:
        return 0.0
    log_delta = math.log(delta)
    if _cks20_log_delta(rho, 0.0) <= log_delta:
        return 0.0
    hi = _bun_steinke_epsilon(rho, delta)
    eps = optimize.brentq(
        lambda e: _cks20_log_delta(rho, e) - log_delta, 0.0, hi, xtol=1e-15, rtol=1e-15, maxiter=500
    )
    return min(hi, eps * (1 + 1e-12))


def pure_dp_to_zcdp(epsilon: float, label: str = "pure-dp") -> "ZCDP":
    """An epsilon-DP mechanism is (epsilon^2 / 2)-zCDP (Bun & Steinke 2016, Proposition 1.4)."""
    epsilon = check_epsilon(epsilon)
    return ZCDP(epsilon**2 / 2.0, breakdown=((label, epsilon**2 / 2.0),))


@dataclass(frozen=True)
class ZCDP:
    """A rho-zCDP guarantee under replace-one neighbours.

    Parameters
    ----------
    rho : float
        Finite and >= 0 (0 is the cost of a step that reads no private data, such as a public
        radius).
    breakdown : tuple of (str, float)
        Optional labelled shares; when given they must sum to ``rho`` (relative 1e-12). Kept
        by composition, so the total of a pipeline shows its parts.

    Examples
    --------
    >>> total = ZCDP(0.05, (("radius", 0.05),)) + ZCDP(0.95, (("main", 0.95),))
    >>> round(total.rho, 12)
    1.0
    >>> round(ZCDP(1 / 32).to_approx_dp(1e-3), 6)
    0.960481
    """

    rho: float
    breakdown: tuple = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_rho(self.rho, allow_zero=True, limit=False))
        parts = tuple((str(label), check_rho(r, f"rho of {label!r}", allow_zero=True, limit=False))
                      for label, r in self.breakdown)
        object.__setattr__(self, "breakdown", parts)
        if parts:
            total = math.fsum(r for _, r in parts)
            if abs(total - self.rho) > 1e-12 * max(1.0, self.rho):
                raise ValidationError(f"breakdown sums to {total!r}, not rho={self.rho!r}")

    def __add__(self, other: "ZCDP") -> "ZCDP":
        """Adaptive composition (BS16, Lemma 2.3): the rho's add."""
        if not isinstance(other, ZCDP):
            return NotImplemented
        mine = self.breakdown or ((("unlabelled", self.rho),) if self.rho else ())
        theirs = other.breakdown or ((("unlabelled", other.rho),) if other.rho else ())
        return ZCDP(math.fsum((self.rho, other.rho)), breakdown=mine + theirs)

    def to_approx_dp(self, delta: float, *, method: str = "bun-steinke") -> float:
        """The epsilon of the (epsilon, ``delta``)-DP guarantee implied by this rho.

        ``method="bun-steinke"`` (default): rho + 2 sqrt(rho ln(1/delta)) (BS16 Prop. 1.3).
        ``method="cks20"``: the tight conversion of Canonne-Kamath-Steinke 2020 (smaller).
        """
        if method == "bun-steinke":
            return bun_steinke_epsilon(self.rho, delta)
        if method == "cks20":
            return cks20_epsilon(self.rho, delta)
        raise ValidationError(f"method must be one of {CONVERSIONS}, got {method!r}")

    def approx_dp(self, delta: float, *, method: str = "bun-steinke") -> ApproxDP:
        """The implied guarantee as an :class:`ApproxDP` value (for basic composition with
        (epsilon, delta)-DP steps: rho-zCDP implies (epsilon, delta)-DP as above)."""
        return ApproxDP(self.to_approx_dp(delta, method=method), check_delta(delta))

    def to_dict(self) -> dict:
        d: dict = {"type": "zcdp", "rho": self.rho}
        if self.breakdown:
            d["breakdown"] = [{"step": label, "rho": r} for label, r in self.breakdown]
        return d

    def describe(self) -> str:
        """The guarantee in words for messages and plots, e.g. ``"rho=0.5 zCDP"``."""
        return f"rho={self.rho:g} zCDP"


#: A privacy guarantee: an (epsilon, delta)-DP pair or a zCDP rho. The one type of every
#: guarantee a release states, a ledger charges and a dataset's budget holds.
Guarantee: TypeAlias = ApproxDP | ZCDP


def compose_zcdp(*budgets: ZCDP) -> ZCDP:
    """Adaptive composition of several zCDP steps (the rho's add)."""
    total = ZCDP(0.0)
    for b in budgets:
        total = total + b
    return total


def cks20_rho(epsilon: float, delta: float) -> float:
    """Largest rho whose tight conversion (CKS20, Proposition 12) at ``delta`` is at most
    ``epsilon``: the zCDP budget that an (epsilon, delta) target allows.

    ``delta(rho)`` at fixed epsilon increases with rho (the infimum of increasing functions of
    rho), so the root of ``log delta(rho) = log delta`` is found by bracketing; it is nudged
    down by one part in 1e9 so that :func:`cks20_epsilon` of the result is at most
    ``epsilon`` after rounding (checked here).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    log_delta = math.log(delta)
    hi = epsilon
    while _cks20_log_delta(hi, epsilon) < log_delta:  # pragma: no cover - rho <= epsilon for delta < 1
        hi *= 2.0
    lo = hi
    while _cks20_log_delta(lo, epsilon) >= log_delta:
        lo /= 2.0
    rho = optimize.brentq(lambda r: _cks20_log_delta(r, epsilon) - log_delta, lo, hi, xtol=1e-300, rtol=1e-15,
                          maxiter=500)
    rho *= 1.0 - 1e-9
    if not cks20_epsilon(rho, delta) <= epsilon:  # pragma: no cover - the nudge covers the root's error
        raise ValidationError(f"internal error: rho={rho!r} converts to more than epsilon={epsilon!r}")
    return rho
