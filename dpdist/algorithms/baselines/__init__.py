"""Comparison methods of the papers, with the same API shape as the main estimators.

The same names as :mod:`dpdist.baselines` (the public path). The Wang-Xu baseline
(``--method wang-xu`` on the command line) is :class:`GaussianCovariance` and, for its top
eigenvector, :class:`GaussianPCA`.
"""

from dpdist.algorithms.baselines.analyze_gauss import AnalyzeGauss
from dpdist.algorithms.baselines.gaussian import GaussianCovariance
from dpdist.algorithms.baselines.pca import GaussianPCA, ThresholdedPCA
from dpdist.algorithms.baselines.subsample_aggregate import SubsampleAggregateSecondMoment
from dpdist.algorithms.baselines.thresholded import ThresholdedCovariance

__all__ = [
    "AnalyzeGauss",
    "GaussianCovariance",
    "GaussianPCA",
    "SubsampleAggregateSecondMoment",
    "ThresholdedCovariance",
    "ThresholdedPCA",
]
