"""Subsample-and-aggregate baseline for second moments (MS25 Appendix A, Algorithm 3).

Nissim-Raskhodnikova-Smith 2007 subsample-and-aggregate with the Ashtiani-Liaw 2022 convex
semimetric and masking output. (epsilon, delta)-DP, not zCDP. Proofs: docs/privacy/subsample_aggregate.md.
"""

from dpdist.algorithms.baselines.subsample_aggregate.agreement import (
    agreement_scale,
    agreement_weights,
    certified_agreement,
    exact_weighted_average,
    group_agreement,
    psd_distance_matrix,
)
from dpdist.algorithms.baselines.subsample_aggregate.estimator import (
    SubsampleAggregateSecondMoment,
    subsample_aggregate_second_moment,
)
from dpdist.algorithms.baselines.subsample_aggregate.plan import SubsampleAggregatePlan
from dpdist.algorithms.baselines.subsample_aggregate.release import MECHANISM, NOT_PRIVATE_LABEL
from dpdist.privacy.mechanisms.subsample_aggregate import PURPOSE_MASK, PURPOSE_TLAP

__all__ = [
    "MECHANISM",
    "NOT_PRIVATE_LABEL",
    "PURPOSE_MASK",
    "PURPOSE_TLAP",
    "SubsampleAggregatePlan",
    "SubsampleAggregateSecondMoment",
    "agreement_scale",
    "agreement_weights",
    "certified_agreement",
    "exact_weighted_average",
    "group_agreement",
    "psd_distance_matrix",
    "subsample_aggregate_second_moment",
]
