"""The plan of :class:`~dpdist.algorithms.baselines.subsample_aggregate.estimator.SubsampleAggregateSecondMoment`."""

from __future__ import annotations

from dataclasses import dataclass

from dpdist.algorithms.plan import Plan
from dpdist.privacy.mechanisms.second_moment import check_m
from dpdist.privacy.mechanisms.subsample_aggregate import tlap_support


@dataclass(frozen=True, kw_only=True)
class SubsampleAggregatePlan(Plan):
    """:meth:`SubsampleAggregateSecondMoment.plan`: a :class:`~dpdist.algorithms.plan.Plan` whose
    ``noise_scale`` is the masking scale eta_b and whose ``error_bound`` is MS25 Lemma A.5's
    relative error 2 alpha (the guarantee ``dist(Sigma, M) <= 2 alpha``). **Scale** (vacuity):
    1, a relative error of 1 allows an output of 0. Unmet conditions: n below Lemma A.5's
    utility condition, and an agreement threshold >= 1 (bottom near-certain). ``privacy`` is
    None below MS25's privacy condition (a fit then needs ``unsafe_no_privacy=True`` and is
    NOT PRIVATE).
    """

    m: int
    alpha: float
    xi: float
    n_groups: int
    eta_b: float
    threshold: float
    tlap_scale: float
    tlap_support: float
    privacy_min_samples: float
    utility_min_samples: float
    privacy_precondition_holds: bool
    unsafe_no_privacy: bool


def baseline_utility_min_samples(m: int, epsilon: float, delta: float) -> float:
    """Lemma A.5's n >= (10 m / eps) ln(1 + (e^eps - 1)/(2 delta)) (utility, not privacy)."""
    return utility_min_samples(check_m(m), epsilon, delta)


def utility_min_samples(m: int, epsilon: float, delta: float) -> float:
    """:func:`baseline_utility_min_samples` for a checked ``m``."""
    return 10.0 * m * tlap_support(1.0, epsilon, delta)
