"""Comparison methods of the papers, with the same API shape as the main estimators.

The same names as :mod:`dpdist.baselines` (the public path). ``WangXuCovariance`` and
``WangXuPCA`` are the Wang-Xu baseline's canonical names (``--method wang-xu``), the same
classes as ``GaussianCovariance`` and ``GaussianPCA`` (fixed public API).
"""

from dpdist.algorithms.baselines.analyze_gauss import AnalyzeGauss
from dpdist.algorithms.baselines.gaussian import GaussianCovariance, WangXuCovariance
from dpdist.algorithms.baselines.pca import GaussianPCA, ThresholdedPCA, WangXuPCA
from dpdist.algorithms.baselines.subsample_aggregate.estimator import SubsampleAggregateSecondMoment
from dpdist.algorithms.baselines.thresholded import ThresholdedCovariance

__all__ = [
    "AnalyzeGauss",
    "GaussianCovariance",
    "GaussianPCA",
    "SubsampleAggregateSecondMoment",
    "ThresholdedCovariance",
    "ThresholdedPCA",
    "WangXuCovariance",
    "WangXuPCA",
]
