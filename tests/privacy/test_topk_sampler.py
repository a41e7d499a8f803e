"""The exact top-k^2 sampler against the naive d x d draw (two-sample tests over many seeds)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from scipy import stats

from dpdist.privacy.noise import NoiseSeed, resolve_random_state
from dpdist.privacy.topk_sampler import (
    noise_top_magnitudes,
    sample_distinct_cells,
    top_k2_of_noisy_projector,
)

LONG = os.environ.get("DPDIST_LONG") == "1"
# Two-sample KS tests at level 1e-3 per statistic: with the fixed seeds below the outcome is
# deterministic; a wrong sampler (say, magnitudes of the wrong order statistic, or cells that
# may fall in the signal block) shifts these statistics by many standard errors at this size.
ALPHA = 1e-3


def naive_top_k2(u, k, sigma, rng):
    d = u.size
    m = np.outer(u, u) + sigma * rng.standard_normal((d, d))
    flat = np.argsort(-np.abs(m), axis=None)[: k * k]
    r, c = np.unravel_index(flat, (d, d))
    return r, c, m[r, c]


def summary(r, c, v, support):
    mags = np.sort(np.abs(v))[::-1]
    ins = np.isin(r, support) & np.isin(c, support)
    return mags[-1], mags[0], ins.sum(), v[ins].sum()


@pytest.mark.statistical
@pytest.mark.parametrize(
    "d,support,weights",
    [(16, [2, 7, 11], [0.8, 0.5, -0.33]), (7, [0, 2, 3, 5, 6], [0.6, -0.4, 0.4, 0.3, 0.2])],
)
def test_sampler_matches_naive_draw_in_distribution(d, support, weights):
    k, sigma = 2, 0.35
    u = np.zeros(d)
    support = np.array(support)
    u[support] = weights
    u /= np.linalg.norm(u)
    reps = 6000 if LONG else 1500
    rng = np.random.default_rng(2024)
    naive = np.array([summary(*naive_top_k2(u, k, sigma, rng), support) for _ in range(reps)])
    fast = np.array(
        [
            summary(*top_k2_of_noisy_projector(support, u[support], d, k, sigma, NoiseSeed(s, True), "t"), support)
            for s in range(reps)
        ]
    )
    for j, name in enumerate(["k2-th magnitude", "max magnitude", "count in S x S", "sum in S x S"]):
        p = stats.ks_2samp(naive[:, j], fast[:, j]).pvalue
        assert p > ALPHA, (name, p)
    # the statistics are not degenerate: signal and noise both get selected
    assert 0 < fast[:, 2].mean() < k * k


def test_noise_order_statistics_match_sorted_half_normals():
    n_cells, count, sigma, reps = 50, 3, 1.3, 3000
    rng = np.random.default_rng(7)
    ref = -np.sort(-np.abs(sigma * rng.standard_normal((reps, n_cells))), axis=1)[:, :count]
    seed = NoiseSeed(99, True)
    got = np.array([noise_top_magnitudes(n_cells, count, sigma, seed.uniforms("o", i, 0, count)) for i in range(reps)])
    assert np.all(np.diff(got, axis=1) <= 0)  # descending
    for j in range(count):
        assert stats.ks_2samp(ref[:, j], got[:, j]).pvalue > ALPHA


def test_cells_are_distinct_outside_the_signal_block_and_uniform():
    d, support = 6, np.array([0, 1, 2])
    seed = NoiseSeed(3, True)
    key = seed.key("cells")
    counts = np.zeros(d * d)
    for i in range(1500):
        cells = sample_distinct_cells(seed, key, i, 9, d, support)
        assert np.unique(cells).size == 9
        r, c = np.divmod(cells, d)
        assert not np.any(np.isin(r, support) & np.isin(c, support))
        counts[cells] += 1
    allowed = np.ones((d, d), bool)
    allowed[np.ix_(support, support)] = False
    assert np.all(counts[~allowed.ravel()] == 0)
    # 1500 * 9 draws over 27 cells: chi-square uniformity
    assert stats.chisquare(counts[allowed.ravel()]).pvalue > ALPHA


def test_sampler_is_a_pure_function_of_the_seed():
    a = top_k2_of_noisy_projector(np.array([1, 4]), np.array([0.6, 0.8]), 50, 3, 0.1, NoiseSeed(5, True), "p")
    b = top_k2_of_noisy_projector(np.array([1, 4]), np.array([0.6, 0.8]), 50, 3, 0.1, NoiseSeed(5, True), "p")
    c = top_k2_of_noisy_projector(np.array([1, 4]), np.array([0.6, 0.8]), 50, 3, 0.1, NoiseSeed(6, True), "p")
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[2], c[2])
    assert a[2].size == 9


def test_small_noise_recovers_the_signal_block():
    u = np.array([0.6, 0.8])
    r, c, v = top_k2_of_noisy_projector(np.array([3, 9]), u, 1000, 2, 1e-4, NoiseSeed(1, True), "s")
    got = {(int(a), int(b)): x for a, b, x in zip(r, c, v)}
    assert set(got) == {(3, 3), (3, 9), (9, 3), (9, 9)}
    assert got[(3, 9)] == pytest.approx(0.48, abs=1e-3)


def test_top_k2_at_one_million_features_is_fast():
    d, k = 1_000_000, 3
    seed = resolve_random_state(0)
    u = np.full(k, 1 / np.sqrt(k))
    t = time.perf_counter()
    r, c, v = top_k2_of_noisy_projector(np.arange(k), u, d, k, 0.05, seed, "big")
    elapsed = time.perf_counter() - t
    assert v.size == k * k
    # the bound of ALGORITHMS.md is 1 s; allow 3x on this shared 2-core machine
    assert elapsed < 3.0, elapsed
