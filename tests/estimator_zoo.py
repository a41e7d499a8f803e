"""Every public estimator, baseline and functional form on tiny data, one entry each (shared by
the release contract tests: tests/privacy/test_release_schema.py,
tests/privacy/test_budget_and_seeding.py, tests/algorithms/test_hostile_neighbours.py, and the
pinned seeded releases of tests/test_seeded_releases.py)."""

from __future__ import annotations

import math

import numpy as np

import dpdist
from dpdist.algorithms.baselines.subsample_aggregate import subsample_aggregate_second_moment
from dpdist.algorithms.expmech_pca import expmech_pca
from dpdist.algorithms.second_moment import one_shot_second_moment, second_moment
from dpdist.algorithms.sparse_covariance import private_sparse_covariance
from dpdist.algorithms.sparse_covariance_pca import sparse_covariance_pca
from dpdist.algorithms.sparse_pca import private_norm, sparse_pca
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
                                                                  scheduler=s).fit(X), gauss),
    "SparseCovariancePCA": (lambda X, rs, s: dpdist.SparseCovariancePCA(2, 1.0, 1e-5, clip=2.0, random_state=rs,
                                                                        scheduler=s).fit(X), gauss),
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


def groups_agree() -> np.ndarray:
    """Rows on which subsample-and-aggregate's 100 groups of 30 agree, so it releases a value."""
    return gauss(3000, 3, seed=5)


#: The functional forms (same shape as FITS: fit(X, random_state, scheduler) -> Release, data()).
#: Kept out of FITS, whose entries other tests hold to per-estimator allow-lists.
FUNCTIONAL_FORMS = {
    "private_sparse_covariance": (
        lambda X, rs, s: private_sparse_covariance(X, 2, 1.0, 1e-5, clip=2.0, random_state=rs, scheduler=s), gauss),
    "sparse_covariance_pca": (lambda X, rs, s: sparse_covariance_pca(X, 2, 1.0, 1e-5, clip=2.0, random_state=rs,
                                                                     scheduler=s), gauss),
    "expmech_pca": (lambda X, rs, s: expmech_pca(X, 2, 1.0, 1e-5, sigma=1.0, random_state=rs, scheduler=s), gauss),
    "second_moment": (lambda X, rs, s: second_moment(X, 1.0, m=1, radius=20.0, lambda_min=0.5, random_state=rs,
                                                     scheduler=s), lambda: gauss(scales=[1, 2, 3, 5, 8, 13])),
    "private_norm": (lambda X, rs, s: private_norm(X, 2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100,
                                                   tau=0.02, random_state=rs, scheduler=s), spike),
    "sparse_pca": (lambda X, rs, s: sparse_pca(X, 2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02,
                                               random_state=rs, scheduler=s), spike),
    "subsample_aggregate_second_moment": (
        lambda X, rs, s: subsample_aggregate_second_moment(X, 2.0, 1e-3, m=30, unsafe_no_privacy=True,
                                                           random_state=rs, scheduler=s), groups_agree),
}

#: Options that take another code path of an estimator (selection rules, row clipping, given
#: centring, the tight sensitivity, shuffled batches, a released subsample-and-aggregate).
VARIANTS = {
    "SparseCovariance-laplace": (lambda X, rs, s: dpdist.SparseCovariance(
        2, 1.0, 1e-5, clip=2.0, selection="laplace", random_state=rs, scheduler=s).fit(X), gauss),
    "SparseCovariance-paper": (lambda X, rs, s: dpdist.SparseCovariance(
        2, 1.0, 1e-5, clip=2.0, selection="paper", random_state=rs, scheduler=s).fit(X), gauss),
    "SparseCovariance-row-clip": (lambda X, rs, s: dpdist.SparseCovariance(
        2, 1.0, 1e-5, clip=2.0, row_clip=3.0, random_state=rs, scheduler=s).fit(X), gauss),
    "SparseCovariance-assume-centered": (lambda X, rs, s: dpdist.SparseCovariance(
        2, 1.0, 1e-5, clip=2.0, assume_centered=True, random_state=rs, scheduler=s).fit(X), gauss),
    "GaussianCovariance-assume-centered": (lambda X, rs, s: GaussianCovariance(
        1.0, 1e-5, sigma=1.0, assume_centered=True, random_state=rs, scheduler=s).fit(X), gauss),
    "ExpMechSparsePCA-assume-centered": (lambda X, rs, s: dpdist.ExpMechSparsePCA(
        2, 1.0, 1e-5, sigma=1.0, assume_centered=True, random_state=rs, scheduler=s).fit(X), gauss),
    "SecondMoment-tight-psd": (lambda X, rs, s: dpdist.SecondMoment(
        1.0, m=1, radius=20.0, lambda_min=0.5, sensitivity="tight", psd=True, random_state=rs, scheduler=s).fit(X),
                               lambda: gauss(scales=[1, 2, 3, 5, 8, 13])),
    "SparsePCA-shuffled": (lambda X, rs, s: dpdist.SparsePCA(
        2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02, shuffle_batches=True, random_state=rs,
        scheduler=s).fit(X), spike),
    "SubsampleAggregateSecondMoment-released": (lambda X, rs, s: SubsampleAggregateSecondMoment(
        2.0, 1e-3, m=30, unsafe_no_privacy=True, random_state=rs, scheduler=s).fit(X), groups_agree),
}
