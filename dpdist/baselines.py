"""Comparison methods (non-private and prior private estimators), same API shape as the main ones."""

from dpdist.algorithms.baselines import GaussianCovariance, ThresholdedCovariance
from dpdist.algorithms.baselines.analyze_gauss import AnalyzeGauss
from dpdist.algorithms.baselines.pca import GaussianPCA, ThresholdedPCA
from dpdist.algorithms.baselines.subsample_aggregate import SubsampleAggregateSecondMoment

__all__: list[str] = [
    "AnalyzeGauss",
    "GaussianCovariance",
    "GaussianPCA",
    "SubsampleAggregateSecondMoment",
    "ThresholdedCovariance",
    "ThresholdedPCA",
]
