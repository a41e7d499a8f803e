"""Comparison methods (non-private and prior private estimators), same API shape as the main ones."""

from dpdist.algorithms.baselines import GaussianCovariance, ThresholdedCovariance

__all__: list[str] = ["GaussianCovariance", "ThresholdedCovariance"]
