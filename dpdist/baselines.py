"""Comparison methods (non-private and prior private estimators), same API shape as the main ones.

Exactly the names of :mod:`dpdist.algorithms.baselines` (tests check the two agree).
"""

from dpdist.algorithms.baselines import (
    AnalyzeGauss,
    GaussianCovariance,
    GaussianPCA,
    SubsampleAggregateSecondMoment,
    ThresholdedCovariance,
    ThresholdedPCA,
)

__all__ = [
    "AnalyzeGauss",
    "GaussianCovariance",
    "GaussianPCA",
    "SubsampleAggregateSecondMoment",
    "ThresholdedCovariance",
    "ThresholdedPCA",
]
