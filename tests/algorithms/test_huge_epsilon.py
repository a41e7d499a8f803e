"""Huge privacy parameters: every estimator computes its release up to the largest epsilon
(rho) dpdist supports and refuses anything larger, from ``plan`` and from ``fit``, before
reading any data, with a ValidationError (exit code 2) naming that largest value."""

from __future__ import annotations

import math
import re

import dask
import dask.array as da
import numpy as np
import pytest

import dpdist
from dpdist.algorithms.second_moment.release import one_shot_second_moment
from dpdist.baselines import AnalyzeGauss, GaussianCovariance, GaussianPCA, SubsampleAggregateSecondMoment
from dpdist.privacy.budget import MAX_EPSILON
from dpdist.privacy.zcdp import MAX_RHO
from tests.estimator_zoo import FITS, NOT_PRIVATE, gauss, spike

SPIKE = dict(gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02, random_state=0, scheduler="synchronous")

#: name -> (make(budget) -> object with plan/fit, or None for a function, data(), the largest budget)
MAKE = {
    "SparseCovariance": (lambda e: dpdist.SparseCovariance(2, e, 1e-5, clip=2.0, random_state=0,
                                                           scheduler="synchronous"), gauss, MAX_EPSILON),
    "SparseCovariancePCA": (lambda e: dpdist.SparseCovariancePCA(2, e, 1e-5, clip=2.0, random_state=0,
                                                                 scheduler="synchronous"), gauss, MAX_EPSILON),
    "GaussianCovariance": (lambda e: GaussianCovariance(e, 1e-5, sigma=1.0, random_state=0), gauss, MAX_EPSILON),
    "GaussianPCA": (lambda e: GaussianPCA(e, 1e-5, sigma=1.0, random_state=0), gauss, MAX_EPSILON),
    "AnalyzeGauss": (lambda e: AnalyzeGauss(e, 1e-5, row_norm=3.0, random_state=0), gauss, MAX_EPSILON),
    "ExpMechSparsePCA": (lambda e: dpdist.ExpMechSparsePCA(2, e, 1e-5, sigma=1.0, random_state=0), gauss, MAX_EPSILON),
    "SecondMoment": (lambda r: dpdist.SecondMoment(r, m=1, radius=20.0, lambda_min=0.5, random_state=0),
                     lambda: gauss(scales=[1, 2, 3, 5, 8, 13]), MAX_RHO),
    "SecondMoment-private-init": (lambda r: dpdist.SecondMoment(r, m=60, random_state=0), lambda: gauss(600), MAX_RHO),
    "one_shot_second_moment": (None, gauss, MAX_RHO),
    "SpectralNorm": (lambda e: dpdist.SpectralNorm(2, e, 1e-3, **SPIKE), spike, MAX_EPSILON),
    "SparsePCA": (lambda e: dpdist.SparsePCA(2, e, 1e-3, **SPIKE), spike, MAX_EPSILON),
    "SparsePCA-lambda-hat": (lambda e: dpdist.SparsePCA(2, e, 1e-3, lambda_hat=5.0, **SPIKE), spike, MAX_EPSILON),
}


def test_every_private_estimator_of_the_zoo_is_covered():
    assert set(MAKE) == set(FITS) - NOT_PRIVATE


def _fit(name, budget, X):
    make, _, _ = MAKE[name]
    if make is None:
        return one_shot_second_moment(X, budget, radius=4.0, random_state=0, scheduler="synchronous")
    return make(budget).fit(X)


def _released(out) -> list[np.ndarray]:
    release = out if isinstance(out, dpdist.privacy.Release) else out.release_
    out, todo = [], list(release.values.values())
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            todo.extend(v.values())
        elif v is not None:
            out.append(np.asarray(v.toarray() if hasattr(v, "toarray") else v, dtype=float))
    return out


@pytest.mark.parametrize("name", sorted(MAKE))
@pytest.mark.parametrize("scale", [1e5, 1.0], ids=["1e5", "largest"])
def test_computes_up_to_the_largest_supported_budget(name, scale):
    make, data, largest = MAKE[name]
    budget = 1e5 if scale == 1e5 else largest
    X = data()
    out = _fit(name, budget, X)
    values = _released(out)
    assert values and all(np.isfinite(v).all() for v in values)
    if make is not None and name != "SecondMoment-private-init":  # that one needs a guess of the radius to plan
        assert make(budget).plan(*X.shape) is not None


def _unreadable(shape):
    """A dask array that records any read of its data (a fit that refuses first never reads)."""
    reads = []

    def load():
        reads.append(1)
        return np.zeros(shape)

    return da.from_delayed(dask.delayed(load)(), shape=shape, dtype=float), reads


@pytest.mark.parametrize("name", sorted(MAKE))
@pytest.mark.parametrize("budget", [1e100, 1e308])
def test_a_larger_budget_is_refused_before_reading_naming_the_largest(name, budget):
    make, data, largest = MAKE[name]
    X, reads = _unreadable(data().shape)
    word = "rho" if largest == MAX_RHO else "epsilon"
    match = re.escape(f"largest {word} dpdist supports, {largest:g}")
    with pytest.raises(dpdist.ValidationError, match=match) as info:
        _fit(name, budget, X)
    assert info.value.exit_code == 2 and reads == []
    if make is not None:
        est = make(budget)
        with pytest.raises(dpdist.ValidationError, match=match):
            est.plan(*X.shape)
        assert not hasattr(est, "release_")


def test_just_above_the_largest_is_refused():
    X = gauss()
    with pytest.raises(dpdist.ValidationError, match="largest epsilon"):
        GaussianCovariance(MAX_EPSILON * (1 + 1e-15), 1e-5, sigma=1.0).fit(X)
    with pytest.raises(dpdist.ValidationError, match="largest rho"):
        dpdist.SecondMoment(MAX_RHO * (1 + 1e-15), m=1, radius=20.0, lambda_min=0.5).plan(*X.shape)


@pytest.mark.parametrize("epsilon", [1e5, 1e100, 1e308])
def test_subsample_aggregate_names_the_largest_epsilon_its_guarantee_allows(epsilon):
    # its guarantee (2 eps, 4 e^eps delta) needs eps < ln(1/(4 delta)), far below MAX_EPSILON
    X, reads = _unreadable((300, 6))
    largest = math.log(1 / (4 * 1e-3))
    wanted = f"{largest:.6g}" if epsilon <= MAX_EPSILON else f"{MAX_EPSILON:g}"
    est = SubsampleAggregateSecondMoment(epsilon, 1e-3, m=6, random_state=0)
    for call in (lambda: est.plan(300, 6), lambda: est.fit(X)):
        with pytest.raises(dpdist.ValidationError, match=re.escape(wanted)):
            call()
    assert reads == []
    est = SubsampleAggregateSecondMoment(largest * 0.999, 1e-3, m=6, unsafe_no_privacy=True, random_state=0)
    assert est.plan(300, 6) is not None


def test_a_composed_guarantee_may_exceed_what_one_mechanism_accepts():
    from dpdist.privacy.budget import ApproxDP
    from dpdist.privacy.zcdp import ZCDP

    assert (ApproxDP(MAX_EPSILON, 1e-6) + ApproxDP(MAX_EPSILON, 1e-6)).epsilon == 2 * MAX_EPSILON
    assert ZCDP(2 * MAX_RHO).rho == 2 * MAX_RHO
