"""Simulated runs: labelled, calibrated from the estimators, and (short form of the by-hand
validation) distributed like the real pipeline's errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpdist import SparseCovariance
from dpdist.baselines import GaussianCovariance
from dpdist.data.hard_instances.theorem2 import construction1
from dpdist.simulate import (
    SIMULATED,
    clip_probability,
    from_construction1,
    model2_block_model,
    simulate_privcov,
    simulate_privpca,
    simulate_thresholded,
    simulate_wang_xu,
)


@pytest.fixture(scope="module")
def c1():
    return from_construction1(construction1(48, 12, random_state=0))


def test_results_are_labelled_and_use_the_estimators_calibration(c1):
    rng = np.random.default_rng(0)
    sigma = math.sqrt(c1.sigma2)
    r = simulate_privcov(c1, 1e6, 1.0, 1e-6, rng)
    assert r.info["label"] == SIMULATED and r.info["approximations"]
    plan = SparseCovariance(12, 1.0, 1e-6, sigma=sigma, assume_centered=True).plan(10**6, 48)  # mean-zero model
    assert r.info["gumbel_scale"] == plan.noise_scale and r.info["clip"] == plan.clip
    w = simulate_wang_xu(c1, 1e6, 1.0, 1e-6, rng)
    wp = GaussianCovariance(1.0, 1e-6, sigma=sigma, assume_centered=True).plan(10**6, 48)
    assert w.info["noise_sd"] == wp.gaussian_sigma and w.info["threshold"] == wp.threshold
    assert w.info["label"] == SIMULATED and simulate_thresholded(c1, 1e4, rng).info["label"] == SIMULATED


def test_errors_shrink_with_n_and_the_simulation_reaches_huge_n(c1):
    rng = np.random.default_rng(1)
    for fn in (lambda n: simulate_thresholded(c1, n, rng), lambda n: simulate_wang_xu(c1, n, 1.0, 1e-6, rng),
               lambda n: simulate_privcov(c1, n, 1.0, 1e-6, rng)):
        small, huge = fn(1e4).error, fn(1e15).error
        # at n = 1e15 the errors are at the sampling level ~ sigma^2 sqrt(k / n) (times logs)
        assert huge < 1e-4 * c1.sigma2 < small


def test_clip_probability_matches_the_gaussian_tail(c1):
    # P(some |x_tj| > R) = 1 - prod_j (1 - 2 Phi(-R / sqrt(Sigma_jj)))^n for Gaussian rows
    from scipy.special import ndtr

    R, n = 3.0, 10
    expect = 1 - np.prod((1 - 2 * ndtr(-R / np.sqrt(c1.diagonal()))) ** n)
    assert clip_probability(c1, n, R) == pytest.approx(expect, rel=1e-10)
    assert clip_probability(c1, 1e6, 1e3) == 0.0


def test_privpca_simulation_rejects_at_small_n_and_recovers_at_large_n():
    m = model2_block_model(60, 3)
    rng = np.random.default_rng(2)
    small = simulate_privpca(m, 1e6, 1.0, 1e-6, rng)
    assert not small.released and small.error == 1.0 and small.info["label"] == SIMULATED
    big = simulate_privpca(m, 1e19, 1.0, 1e-6, rng)
    assert big.released and big.error < 0.05
    assert big.info["approx_event_probability"] < 1e-6  # the ignored events are negligible here


def test_privcov_power_simulation_matches_the_real_estimator_where_both_run():
    """The sin^2 of SparseCovariancePCA's component, simulated and real, on the same Model-2
    spike: both lost at a small budget, both recovered at a large one (a few seeds each)."""
    import warnings

    from dpdist import SparseCovariancePCA
    from dpdist.data.model2 import make_model2

    bm = model2_block_model(20, 3, gap=0.5, lambda1=2.0)
    with pytest.raises(Exception, match="error must be"):
        simulate_privcov(bm, 2e4, 1.0, 1e-6, np.random.default_rng(0), error="frobenius")
    for epsilon, lost in ((0.1, True), (200.0, False)):
        sim = [simulate_privcov(bm, 2e4, epsilon, 1e-6, np.random.default_rng(r), error="sin2") for r in range(3)]
        assert all(s.info["method"] == "privcov_power" and s.info["label"] == SIMULATED for s in sim)
        real = []
        for r in range(3):
            m = make_model2(20_000, 20, 3, gap=0.5, lambda1=2.0, random_state=r)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = SparseCovariancePCA(3, epsilon, 1e-6, sigma=m.sigma, random_state=r, scheduler="synchronous").fit(m.X)
            real.append(1.0 - float(est.components_[0] @ m.v1) ** 2)
        for errs in ([s.error for s in sim], real):
            assert (min(errs) > 0.5) if lost else (max(errs) < 0.05), (epsilon, errs)


def test_simulated_privcov_reports_the_row_clip_and_a_valid_bound_on_its_probability(c1):
    """The simulation reads the row clip from plan() and reports an upper bound on P(some row is
    scaled), checked against the exact law of ||x||^2 (a weighted chi-square, by simulation of
    many rows here: the bound must not be below the empirical frequency per row)."""
    from dpdist.simulate.result import row_clip_probability

    sigma = math.sqrt(c1.sigma2)
    r = simulate_privcov(c1, 1e6, 1.0, 1e-6, np.random.default_rng(1))
    plan = SparseCovariance(12, 1.0, 1e-6, sigma=sigma, assume_centered=True).plan(10**6, 48)
    assert r.info["row_clip"] == plan.row_clip < math.inf
    assert 0 <= r.info["p_row_clip_bound"] <= 0.1 / 6 * (1 + 1e-9)  # the default C's share of beta
    assert row_clip_probability(c1, 1e6, math.inf) == 0.0
    # a C near the typical norm: the per-row bound covers the empirical exceedance frequency
    cov = np.zeros((48, 48))
    s = c1.block_size
    for b in range(c1.n_blocks):
        cov[b * s:(b + 1) * s, b * s:(b + 1) * s] = c1.blocks[b]
    X = np.random.default_rng(2).multivariate_normal(np.zeros(48), cov, size=200_000)
    C = float(np.quantile(np.linalg.norm(X, axis=1), 0.99))
    freq = float(np.mean(np.linalg.norm(X, axis=1) > C))
    assert row_clip_probability(c1, 1, C) >= freq


@pytest.mark.parametrize("error", ["operator", "sin2"])
def test_sparse_pieces_give_the_dense_answer(monkeypatch, error):
    """Large connected pieces of the error matrix are kept sparse and their extreme eigenpair
    found by Lanczos; forcing every piece down that path gives the dense path's operator norm
    and sin^2 to 1e-8, on a matrix whose off-block entries link several blocks and bulk
    coordinates into pieces."""
    import dpdist.simulate.errors as sm

    m = model2_block_model(60, 3, gap=0.5, lambda1=2.0, random_state=0)
    B, s, nb = m.n_blocks, m.block_size, m.n_blocks * m.block_size
    rows, cols, vals = [], [], []
    for b in range(B):
        i, j = np.triu_indices(s)
        rows.append(b * s + i), cols.append(b * s + j), vals.append(m.blocks[b][i, j] + 0.05)
    rows.append(nb + np.arange(m.n_bulk)), cols.append(nb + np.arange(m.n_bulk)), vals.append(np.broadcast_to(m.bulk_variance, m.n_bulk) + 0.1)
    rng = np.random.default_rng(3)
    r = rng.integers(0, 60, 40)
    c = rng.integers(0, 60, 40)
    keep = r < c
    rows.append(r[keep]), cols.append(c[keep]), vals.append(rng.normal(0, 0.4, keep.sum()))
    key = np.concatenate(rows) * 60 + np.concatenate(cols)
    _, first = np.unique(key, return_index=True)  # no duplicate addresses
    triples = tuple(np.concatenate(a)[first] for a in (rows, cols, vals))
    measure = sm._op_error if error == "operator" else sm._sin2
    dense = measure(m, triples)
    monkeypatch.setattr(sm, "_DENSE_MAX", 0)
    blocks, bulk, extras = sm._split_units(m, triples)
    pieces = sm._touched(m, blocks, bulk, extras)
    assert pieces and not any(isinstance(M, np.ndarray) for M, _ in pieces)
    assert measure(m, triples) == pytest.approx(dense, rel=1e-8, abs=1e-12)
