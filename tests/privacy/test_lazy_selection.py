"""The lazy selection sampler: exact against its fully evaluated noise tree, and equal in law
to the naive draw of d i.i.d. Laplace noises per row (two-sample tests with fixed seeds)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

from dpdist.privacy.lazy_selection import LaplaceMagnitude, LazySelectionNoise, privcov_score_bound
from dpdist.privacy.noise import NoiseField, NoiseSeed, chacha20_words
from tests.conftest import LONG

# Each statistical check is a test at level ALPHA = 1e-3 with a fixed seed, so the outcome is
# deterministic. Power: a sampler that ignored the signs, drew the wrong order statistic, or
# let a node's children exceed its maximum shifts the selection frequencies or the scores by
# many standard errors at these sample sizes (see the per-test comments).
ALPHA = 1e-3


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row, the k best columns by (score desc, column asc)."""
    cols = np.arange(scores.shape[1])
    return np.array([np.lexsort((cols, -row))[:k] for row in scores])


def lazy_select(lz: LazySelectionNoise, S: np.ndarray, k: int, bounds: list[int], row_start: int = 0):
    """Tile the rows of S at column ``bounds``, search each tile, merge (the engine's rule)."""
    rows = np.arange(row_start, row_start + S.shape[0])
    state = lz.prepare_rows(rows, k)
    edges = sorted(set([0, *bounds, S.shape[1]]))
    parts = [lz.tile_candidates(S[:, a:b], row_start, a, k, state) for a, b in zip(edges[:-1], edges[1:])]
    cols = np.hstack([p[0] for p in parts])
    scores = np.hstack([p[1] for p in parts])
    order = np.lexsort((np.where(cols < 0, 1 << 62, cols), -scores), axis=1)[:, :k]
    return np.take_along_axis(cols, order, 1), np.take_along_axis(scores, order, 1)


def test_vectorised_chacha_gives_the_words_of_noise_seed():
    seed = NoiseSeed(2**100 + 12345, True)
    key = seed.key("any purpose")
    rng = np.random.default_rng(0)
    index = rng.integers(0, 2**63, 64, dtype=np.uint64)
    position = rng.integers(0, 2**62, 64, dtype=np.uint64)
    index[:6] = [0, 1, 15, 16, 2**64 - 1, 2**36]  # carries between counter words
    position[:6] = [0, 7, 8, 2**35 + 5, 2**62 - 1, 12345]
    got = chacha20_words(seed, key, index, position)
    ref = np.array([seed.raw(key, int(i), int(p), 1)[0] for i, p in zip(index, position)], dtype=np.uint64)
    np.testing.assert_array_equal(got, ref)
    # a contiguous run equals one stream read
    np.testing.assert_array_equal(chacha20_words(seed, key, 5, np.arange(100, 140)), seed.raw(key, 5, 100, 40))


@pytest.mark.parametrize(
    "d,fanout,scale,bound",
    [(37, 4, 2.0, 3.0), (300, 4, 2.0, 3.0), (1000, 64, 2.0, 3.0), (5, 64, 2.0, 3.0), (300, 4, 0.01, 3.0),
     (300, 4, 0.01, None), (2000, 8, 50.0, 3.0), (130, 2, 1.0, 3.0)],
)
def test_lazy_top_k_equals_the_fully_evaluated_tree_for_every_tiling(d, fanout, scale, bound):
    # noise-dominated (scale >> bound), data-dominated (scale << bound) and no public bound
    lz = LazySelectionNoise(NoiseSeed(7, True), "t", LaplaceMagnitude(scale), d, score_bound=bound, fanout=fanout)
    rows = 24
    S = np.clip(np.random.default_rng(d).standard_normal((rows, d)) * 2, -3, 3)
    k = 3
    scores = np.abs(S + lz.full_noise(np.arange(rows)))
    ref = top_k(scores, k)
    for bounds in ([], list(range(0, d, 7)), list(range(0, d, 64)), [1, d // 2], list(range(0, d, 1000))):
        cols, sc = lazy_select(lz, S, k, bounds)
        np.testing.assert_array_equal(cols, ref)
        np.testing.assert_array_equal(sc, np.take_along_axis(scores, ref, 1))  # bit for bit


@dataclass(frozen=True)
class LatticeMagnitude:
    """A discrete magnitude law (|w| on the lattice 0, 1, 2, ...; geometric): ties are common."""

    scale: float = 1.0

    def isf(self, q):  # smallest x on the lattice with P(|w| > x) = exp(-(x + 1)) <= q
        return np.maximum(np.ceil(-np.log(q) - 1.0), 0.0)

    def sf(self, x):
        return np.exp(-(np.floor(x) + 1.0))


def test_a_discrete_law_plugs_in_and_ties_follow_the_column_rule():
    d, rows, k = 200, 40, 4
    lz = LazySelectionNoise(NoiseSeed(3, True), "lattice", LatticeMagnitude(), d, score_bound=1.0, fanout=4)
    S = np.random.default_rng(1).integers(-1, 2, (rows, d)).astype(float)  # integer data: many ties
    scores = np.abs(S + lz.full_noise(np.arange(rows)))
    ref = top_k(scores, k)
    assert np.mean(scores == np.take_along_axis(scores, ref[:, -1:], 1)) > 0.02  # ties at the k-th score
    for bounds in ([], list(range(0, d, 9)), list(range(0, d, 64))):
        cols, _ = lazy_select(lz, S, k, bounds)
        np.testing.assert_array_equal(cols, ref)


def test_tree_noise_is_iid_laplace():
    b, d, fanout = 1.7, 300, 4  # a 5-level tree
    lz = LazySelectionNoise(NoiseSeed(11, True), "law", LaplaceMagnitude(b), d, fanout=fanout)
    reps = 400 if not LONG else 2000
    W = lz.full_noise(np.arange(reps))
    # marginal law: Laplace(0, b) (KS over all values; rows are independent streams)
    assert stats.kstest(W.ravel(), stats.laplace(scale=b).cdf).pvalue > ALPHA
    # the row maximum of |w| is the max of d i.i.d. Exp(b): P(max <= x) = (1 - e^{-x/b})^d
    mx = np.abs(W).max(axis=1)
    assert stats.kstest(mx, lambda x: (-np.expm1(-x / b)) ** d).pvalue > ALPHA
    # the argmax position is uniform over the d positions, and sits in each half equally
    arg = np.abs(W).argmax(axis=1)
    assert stats.kstest((arg + 0.5) / d, "uniform").pvalue > ALPHA
    # no dependence between neighbours inside a node: rank correlation of adjacent |w| ~ 0
    rho = stats.spearmanr(np.abs(W[:, :-1]).ravel(), np.abs(W[:, 1:]).ravel()).statistic
    assert abs(rho) < 4 / math.sqrt(W[:, 1:].size)  # 4 standard errors
    # signs: fair and independent of magnitudes
    assert stats.binomtest(int((W > 0).sum()), W.size).pvalue > ALPHA
    assert stats.ks_2samp(np.abs(W[W > 0]), np.abs(W[W < 0])).pvalue > ALPHA


def naive_select(S_row: np.ndarray, k: int, b: float, n_trials: int, seed: int):
    """The naive mechanism: d i.i.d. Laplace(b) per trial (NoiseField rows are independent)."""
    noise = NoiseField(NoiseSeed(seed, True), "naive", "laplace", b)
    d = S_row.size
    scores = np.abs(S_row[None, :] + noise(np.arange(n_trials), np.arange(d)))
    cols = top_k(scores, k)
    return cols, np.take_along_axis(scores, cols, 1)


def lazy_trials(S_row: np.ndarray, k: int, b: float, n_trials: int, seed: int, bound, fanout, bounds):
    lz = LazySelectionNoise(NoiseSeed(seed, True), "lazy", LaplaceMagnitude(b), S_row.size, score_bound=bound,
                            fanout=fanout)
    S = np.broadcast_to(S_row, (n_trials, S_row.size))  # trial t is row t: its own stream
    return lazy_select(lz, np.ascontiguousarray(S), k, bounds)


@pytest.mark.statistical
@pytest.mark.parametrize(
    "case",
    ["mixed-signs", "noise-dominated"],
)
def test_lazy_selection_matches_the_naive_draw_in_distribution(case):
    rng = np.random.default_rng(5)
    if case == "mixed-signs":
        # d = 40: large entries of both signs, a block of zeros and small entries; b comparable
        # to their spread, so signs and magnitudes both matter for which entries win
        d, k, b, bound, fanout = 40, 3, 1.0, 3.0, 4
        S_row = np.concatenate([[2.5, -2.5, 2.0, -1.5, 1.0], np.zeros(15), rng.uniform(-0.5, 0.5, 20)])
        bounds = [0, 13, 27]
    else:
        # d = 500, b >> the bound: the data-free floor prunes most tiles (PrivCov at small n)
        d, k, b, bound, fanout = 500, 5, 50.0, 3.0, 8
        S_row = np.clip(rng.standard_normal(d), -3, 3)
        bounds = list(range(0, d, 64))
    n = 20_000 if LONG else 6_000
    lc, ls = lazy_trials(S_row, k, b, n, 1, bound, fanout, bounds)
    nc, ns = naive_select(S_row, k, b, n, 2)
    # selected sets: how often each column is selected (chi-square on the 2 x d table of counts;
    # ignoring signs would move the frequency of -2.5 vs 2.5 by ~10 standard errors)
    table = np.array([np.bincount(lc.ravel(), minlength=d), np.bincount(nc.ravel(), minlength=d)])
    table = table[:, table.sum(axis=0) > 0]
    assert stats.chi2_contingency(table).pvalue > ALPHA
    # the winner (top-1 column)
    t1 = np.array([np.bincount(lc[:, 0], minlength=d), np.bincount(nc[:, 0], minlength=d)])
    t1 = t1[:, t1.sum(axis=0) >= 5]
    assert stats.chi2_contingency(t1).pvalue > ALPHA
    # the selected noisy values: the largest, the k-th largest and their sum
    for j, name in ((0, "max"), (k - 1, "k-th")):
        assert stats.ks_2samp(ls[:, j], ns[:, j]).pvalue > ALPHA, name
    assert stats.ks_2samp(ls.sum(axis=1), ns.sum(axis=1)).pvalue > ALPHA
    # the statistic is not degenerate
    assert 1 < len(np.unique(lc[:, 0])) and len(np.unique(lc)) > k


def test_a_bound_that_does_not_hold_is_an_internal_error():
    lz = LazySelectionNoise(NoiseSeed(1, True), "t", LaplaceMagnitude(1e3), 50, score_bound=1.0)
    S = np.zeros((3, 50))
    S[1, 7] = 2.0  # |S| > C: the floor would not be valid
    with pytest.raises(RuntimeError, match="exceeds the declared public bound"):
        lz.tile_candidates(S, 0, 0, 2, lz.prepare_rows(np.arange(3), 2))


def test_nan_entries_are_never_selected_and_do_not_break_the_search():
    lz = LazySelectionNoise(NoiseSeed(1, True), "t", LaplaceMagnitude(0.1), 30, score_bound=1.0, fanout=4)
    S = np.full((2, 30), 0.5)
    S[0, 3] = np.nan
    cols, scores = lazy_select(lz, S, 4, [10])
    assert 3 not in cols[0] and np.all(np.isfinite(scores))


def test_privcov_score_bound_dominates_the_computed_second_moment():
    # worst case: every clipped entry is +-R, so each Gram entry is a sum of n products R^2
    R, n = 1.3, 1000
    Y = np.full((n, 3), R)
    S = (Y.T @ Y) * (1.0 / n)
    C = privcov_score_bound(R, n)
    assert np.all(np.abs(S) <= C) and C <= R * R * (1 + 1e-12)
