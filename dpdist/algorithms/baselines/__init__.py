"""Comparison methods of the papers, with the same API shape as the main estimators."""

from dpdist.algorithms.baselines.gaussian import GaussianCovariance
from dpdist.algorithms.baselines.thresholded import ThresholdedCovariance

__all__ = ["GaussianCovariance", "ThresholdedCovariance"]
