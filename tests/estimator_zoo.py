"""Every public estimator and baseline on tiny data, one entry each (shared by the issue-9 tests:
tests/privacy/test_release_schema.py, tests/privacy/test_budget_and_seeding.py,
tests/algorithms/test_hostile_neighbours.py)."""

from __future__ import annotations

import math

import numpy as np

import dpdist
from dpdist.algorithms.second_moment import one_shot_second_moment
from dpdist.baselines import (
    AnalyzeGauss,
    GaussianCovariance,
    GaussianPCA,
    SubsampleAggregateSecondMoment,
    ThresholdedCovariance,
    ThresholdedPCA,
)
from dpdist.testing.estimator_audits import spike_rows


def gauss(n: int = 300, d: int = 6, seed: int = 0, scales=None) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal((n, d))
    return X * (np.asarray(scales) if scales is not None else 1.0)


def spike(n: int = 3000) -> np.ndarray:
    """Spike rows, every odd row the negation of the one before: their mean is exactly zero and
    so is every batch's, so the default centring leaves FriendlyCore's batches good."""
    X = spike_rows(n, noise=0.01)
    X[1::2] = -X[0::2]
    return X


#: name -> (fit(X, random_state, scheduler) -> fitted estimator or Release, data())
FITS = {
    "SparseCovariance": (lambda X, rs, s: dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, random_state=rs,
                                                                  scheduler=s, progress=False).fit(X), gauss),
    "SparseCovariancePCA": (lambda X, rs, s: dpdist.SparseCovariancePCA(2, 1.0, 1e-5, clip=2.0, random_state=rs,
                                                                        scheduler=s, progress=False).fit(X), gauss),
    "GaussianCovariance": (lambda X, rs, s: GaussianCovariance(1.0, 1e-5, sigma=1.0, random_state=rs, scheduler=s).fit(X),
                           gauss),
    "GaussianPCA": (lambda X, rs, s: GaussianPCA(1.0, 1e-5, sigma=1.0, random_state=rs, scheduler=s).fit(X), gauss),
    "AnalyzeGauss": (lambda X, rs, s: AnalyzeGauss(1.0, 1e-5, row_norm=3.0, random_state=rs, scheduler=s).fit(X), gauss),
    "ExpMechSparsePCA": (lambda X, rs, s: dpdist.ExpMechSparsePCA(2, 1.0, 1e-5, sigma=1.0, random_state=rs,
                                                                  scheduler=s).fit(X), gauss),
    "SecondMoment": (lambda X, rs, s: dpdist.SecondMoment(1.0, m=1, radius=20.0, lambda_min=0.5, random_state=rs,
                                                          scheduler=s).fit(X), lambda: gauss(scales=[1, 2, 3, 5, 8, 13])),
    "SecondMoment-private-init": (lambda X, rs, s: dpdist.SecondMoment(4.0, m=60, random_state=rs, scheduler=s).fit(X),
                                  lambda: gauss(600)),
    "one_shot_second_moment": (lambda X, rs, s: one_shot_second_moment(X, 1.0, radius=4.0, random_state=rs, scheduler=s),
                               gauss),
    "SpectralNorm": (lambda X, rs, s: dpdist.SpectralNorm(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100,
                                                          tau=0.02, random_state=rs, scheduler=s).fit(X), spike),
    "SparsePCA": (lambda X, rs, s: dpdist.SparsePCA(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02,
                                                    random_state=rs, scheduler=s).fit(X), spike),
    "SparsePCA-lambda-hat": (lambda X, rs, s: dpdist.SparsePCA(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100,
                                                               tau=0.02, lambda_hat=5.0, random_state=rs,
                                                               scheduler=s).fit(X), spike),
    "SubsampleAggregateSecondMoment": (
        lambda X, rs, s: SubsampleAggregateSecondMoment(2.0, 1e-3, m=6, unsafe_no_privacy=True, random_state=rs,
                                                        scheduler=s).fit(X), gauss),
    "ThresholdedCovariance": (lambda X, rs, s: ThresholdedCovariance(threshold=0.1, scheduler=s).fit(X), gauss),
    "ThresholdedPCA": (lambda X, rs, s: ThresholdedPCA(threshold=0.1, scheduler=s).fit(X), gauss),
}
#: Entries whose every fit is NOT PRIVATE (subsample-and-aggregate runs with unsafe_no_privacy).
NOT_PRIVATE = {"SubsampleAggregateSecondMoment", "ThresholdedCovariance", "ThresholdedPCA"}


def release_of(out) -> dpdist.privacy.Release:
    """The Release of a fitted estimator (or the Release a function returned)."""
    return out if isinstance(out, dpdist.privacy.Release) else out.release_
