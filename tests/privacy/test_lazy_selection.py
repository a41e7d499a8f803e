"""The lazy selection sampler: exact against its fully evaluated noise tree, equal in law to the
naive draw of d i.i.d. lattice Laplace noises per row (two-sample tests with fixed seeds), and
exact on the lattice (integer scores, magnitudes decided exactly)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpdist.privacy.noise.lattice import Lattice, LatticeField, LatticeNoise
from dpdist.privacy.noise.lazy_selection import LazySelectionNoise
from dpdist.privacy.mechanisms.privcov.calibration import privcov_score_bound
from dpdist.privacy.noise.streams import NoiseSeed, chacha20_words
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


def laplace(scale: float, exponent: int | None = None) -> LatticeNoise:
    """The rounded Laplace law of scale ``scale`` (data units) on its lattice, or on 2**exponent."""
    if exponent is None:
        return LatticeNoise.for_scale("laplace", scale)
    lat = Lattice(exponent)
    return LatticeNoise("laplace", lat, lat.units(scale))


@pytest.mark.parametrize(
    "d,fanout,scale,bound",
    [(37, 4, 2.0, 3.0), (300, 4, 2.0, 3.0), (1000, 64, 2.0, 3.0), (5, 64, 2.0, 3.0), (300, 4, 0.01, 3.0),
     (300, 4, 0.01, None), (2000, 8, 50.0, 3.0), (130, 2, 1.0, 3.0)],
)
def test_lazy_top_k_equals_the_fully_evaluated_tree_for_every_tiling(d, fanout, scale, bound):
    # noise-dominated (scale >> bound), data-dominated (scale << bound) and no public bound
    noise = laplace(scale)
    lz = LazySelectionNoise(NoiseSeed(7, True), "t", noise, d, score_bound=bound, fanout=fanout)
    rows = 24
    S = np.clip(np.random.default_rng(d).standard_normal((rows, d)) * 2, -3, 3)
    k = 3
    scores = np.abs(noise.lattice.to_units(S) + lz.full_noise(np.arange(rows)))
    assert np.array_equal(scores, np.rint(scores))  # integers: exact comparisons
    ref = top_k(scores, k)
    for bounds in ([], list(range(0, d, 7)), list(range(0, d, 64)), [1, d // 2], list(range(0, d, 1000))):
        cols, sc = lazy_select(lz, S, k, bounds)
        np.testing.assert_array_equal(cols, ref)
        np.testing.assert_array_equal(sc, np.take_along_axis(scores, ref, 1))  # bit for bit


def test_ties_follow_the_column_rule():
    """Lattice 1 and a scale of 1 unit on integer data: ties at the k-th score are common."""
    d, rows, k = 200, 40, 4
    noise = laplace(1.0, exponent=0)
    lz = LazySelectionNoise(NoiseSeed(3, True), "lattice", noise, d, score_bound=1.0, fanout=4)
    S = np.random.default_rng(1).integers(-1, 2, (rows, d)).astype(float)
    scores = np.abs(S + lz.full_noise(np.arange(rows)))
    ref = top_k(scores, k)
    assert np.mean(scores == np.take_along_axis(scores, ref[:, -1:], 1)) > 0.02  # ties at the k-th score
    for bounds in ([], list(range(0, d, 9)), list(range(0, d, 64))):
        cols, _ = lazy_select(lz, S, k, bounds)
        np.testing.assert_array_equal(cols, ref)


def test_undecided_magnitudes_are_decided_exactly():
    """Every magnitude the float intervals leave undecided is decided by the exact path, and
    the exact path agrees with every magnitude the fast path certified."""
    noise = laplace(1.0)  # 2**28 units: about 1e-4 of the leaves are undecided
    lz = LazySelectionNoise(NoiseSeed(5, True), "exact", noise, 3000, fanout=8)
    rows = np.arange(40)
    nodes = lz._root(rows)
    r, beta = rows, np.zeros(rows.size, dtype=np.int64)
    for level in range(lz._tree.height, 0, -1):
        par, beta, nodes = lz._children(r, level, beta, nodes)
        r = r[par]
    undecided = np.flatnonzero(nodes.M_lo != nodes.M_hi)
    assert undecided.size > 0 and undecided.size < 1e-3 * r.size
    exact = lz.exact_magnitudes(r[undecided], beta[undecided])
    assert np.all((nodes.M_lo[undecided] <= exact) & (exact <= nodes.M_hi[undecided]))
    sample = np.flatnonzero(nodes.M_lo == nodes.M_hi)[:: max(1, r.size // 150)]
    np.testing.assert_array_equal(lz.exact_magnitudes(r[sample], beta[sample]), nodes.M_lo[sample])
    full = lz.full_noise(rows)
    np.testing.assert_array_equal(np.abs(full[r[undecided], beta[undecided]]), exact)


def test_tree_noise_is_iid_rounded_laplace():
    d, fanout = 300, 4  # a 5-level tree
    reps = 400 if not LONG else 2000
    # small scale (1.7 units): the exact pmf of K, chi-square over its values
    small = laplace(1.7, exponent=0)
    W = LazySelectionNoise(NoiseSeed(11, True), "law", small, d, fanout=fanout).full_noise(np.arange(reps))
    vals = np.arange(-8, 9)
    obs = np.array([np.sum(W == v) for v in vals] + [np.sum(np.abs(W) > 8)])
    pmf = small.pmf(vals)
    exp = np.append(pmf, 1 - pmf.sum()) * W.size
    assert stats.chisquare(obs, exp).pvalue > ALPHA
    # large scale (2**20 units, ties negligible): the row maximum, the argmax, independence
    big = laplace(2.0**20, exponent=0)
    b = big.scale
    W = LazySelectionNoise(NoiseSeed(12, True), "law", big, d, fanout=fanout).full_noise(np.arange(reps))
    assert stats.kstest(W.ravel(), stats.laplace(scale=b).cdf).pvalue > ALPHA  # rounding: 1e-6 of b
    # the row maximum of |K| is the max of d i.i.d. rounded Exp(b): P(max <= x) = (1 - e^{-(x+1/2)/b})^d
    mx = np.abs(W).max(axis=1)
    assert stats.kstest(mx, lambda x: (-np.expm1(-(np.floor(x) + 0.5) / b)) ** d).pvalue > ALPHA
    arg = np.abs(W).argmax(axis=1)
    assert stats.kstest((arg + 0.5) / d, "uniform").pvalue > ALPHA
    rho = stats.spearmanr(np.abs(W[:, :-1]).ravel(), np.abs(W[:, 1:]).ravel()).statistic
    assert abs(rho) < 4 / math.sqrt(W[:, 1:].size)  # 4 standard errors
    assert stats.binomtest(int((W > 0).sum()), int((W != 0).sum())).pvalue > ALPHA
    assert stats.ks_2samp(np.abs(W[W > 0]), np.abs(W[W < 0])).pvalue > ALPHA


def naive_select(S_row: np.ndarray, k: int, b: float, n_trials: int, seed: int):
    """The naive mechanism: d i.i.d. lattice Laplace(b) per trial (LatticeField rows are independent)."""
    noise = laplace(b)
    field = LatticeField(NoiseSeed(seed, True), "naive", noise)
    d = S_row.size
    scores = np.abs(noise.lattice.to_units(S_row)[None, :] + field.units(np.arange(n_trials), np.arange(d)))
    cols = top_k(scores, k)
    return cols, np.take_along_axis(scores, cols, 1)


def lazy_trials(S_row: np.ndarray, k: int, b: float, n_trials: int, seed: int, bound, fanout, bounds):
    lz = LazySelectionNoise(NoiseSeed(seed, True), "lazy", laplace(b), S_row.size, score_bound=bound, fanout=fanout)
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
    lz = LazySelectionNoise(NoiseSeed(1, True), "t", laplace(1e3), 50, score_bound=1.0)
    S = np.zeros((3, 50))
    S[1, 7] = 2.0  # |S| > C: the floor would not be valid
    with pytest.raises(RuntimeError, match="exceeds the declared public bound"):
        lz.tile_candidates(S, 0, 0, 2, lz.prepare_rows(np.arange(3), 2))


def test_nan_entries_are_never_selected_and_do_not_break_the_search():
    lz = LazySelectionNoise(NoiseSeed(1, True), "t", laplace(0.1), 30, score_bound=1.0, fanout=4)
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
