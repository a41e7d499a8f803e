"""Exact Gumbel-max (the exponential mechanism): law, chunking invariance, exact comparisons."""

from __future__ import annotations

import functools
import math
import pickle

import numpy as np
import pytest
from scipy import stats

from dpdist.privacy.noise import gumbel as G
from dpdist.privacy.noise.gumbel import EMPTY, Candidate, GumbelMax
from dpdist.privacy.noise.streams import NoiseSeed
from tests.conftest import LONG

SEED = NoiseSeed(77, seeded=True)


@pytest.mark.statistical
def test_selection_law_is_the_softmax_of_the_lattice_scores():
    """Trial t uses candidates of ranks [t m, (t + 1) m) (independent Gumbels) with the same
    scores. Chi-square against exp(q) / sum exp(q); p > 1e-4 (fixed seed)."""
    scores = np.array([0.0, 1.0, 2.0, 0.5, -3.0])
    m, trials = scores.size, (40_000 if LONG else 8_000)
    g = GumbelMax(SEED, "law", 1.0)
    wins = np.zeros(m)
    for t in range(trials):
        wins[g.best(scores, t * m).rank - t * m] += 1
    p = np.exp(scores) / np.exp(scores).sum()
    assert stats.chisquare(wins, p * trials).pvalue > 1e-4


def test_chunked_max_reduction_equals_the_whole_arg_max():
    rng = np.random.default_rng(0)
    scores = rng.normal(scale=2.0, size=50_000)
    g = GumbelMax(SEED, "chunks", 0.7)
    whole = g.best(scores, 0)
    for size in (1, 7, 999, 4096):
        parts = [g.best(scores[s : s + size], s) for s in range(0, min(scores.size, 3000 * size), size)]
        if size == 1:  # a prefix only (tree of single candidates); compare with its own best
            assert functools.reduce(g.combine, parts, EMPTY).rank == g.best(scores[:3000], 0).rank
            continue
        assert functools.reduce(g.combine, parts, EMPTY).rank == whole.rank
        # merge order does not matter (a tree, reversed)
        assert functools.reduce(g.combine, parts[::-1], EMPTY).rank == whole.rank
    assert pickle.loads(pickle.dumps(g)).best(scores, 0) == whole


def test_key_bounds_contain_the_exact_gumbel():
    import mpmath

    ctx = mpmath.MPContext()
    ctx.prec = 150
    rng = np.random.default_rng(2)
    w = np.concatenate([
        rng.integers(0, 1 << 63, 2000, dtype=np.uint64) * np.uint64(2),
        np.array([0, 1, 2, 1 << 20, (1 << 20) - 1, (1 << 64) - 1, (1 << 64) - (1 << 20), (1 << 64) - (1 << 20) - 1], dtype=np.uint64),
    ])
    lo, hi = GumbelMax._gumbel(w)
    for W, a, b in zip(w.tolist(), lo.tolist(), hi.tolist()):
        for num in (W, W + 1):  # the cell's ends bound G (monotone)
            u = ctx.ldexp(ctx.mpf(num), -64)
            g = ctx.inf if num == 0 else (-ctx.inf if num == 1 << 64 else -ctx.log(-ctx.log1p(-u)))
            if ctx.isinf(g):
                assert (g > 0 and b == math.inf) or (g < 0)
                continue
            assert a <= float(g) <= b


def test_exact_comparison_decides_overlapping_keys(monkeypatch):
    """Candidate 'a' has W = 0 (Gumbel >= 44.4) and its refinement word 1 puts its uniform in
    [2**-128, 2**-127): Gumbel ~ 88.7, so it beats a score 45 higher; with refinement word
    2**63 its uniform is ~ 2**-65, Gumbel ~ 45.05, and it loses to a score 50 higher."""
    g = GumbelMax(SEED, "exact", 1.0)
    words = {0: 0, 1: 1 << 62}
    monkeypatch.setattr(GumbelMax, "_words", lambda self, start, count: np.array([words[int(start)]], dtype=np.uint64))
    a = Candidate(-math.inf, math.inf, 0, 0.0)
    b_lo, b_hi = G.GumbelMax._gumbel(np.array([words[1]], dtype=np.uint64))
    for refine, score_b, a_wins in ((1, 45.0, True), (1 << 63, 50.0, False), (1 << 63, 43.0, True)):
        monkeypatch.setattr(GumbelMax, "_fallback", lambda self, rank, used, r=refine: r if rank == 0 else 12345)
        b = Candidate(score_b + float(b_lo[0]), score_b + float(b_hi[0]), 1, score_b)
        assert g.beats(a, b) is a_wins
        assert g.combine(a, b).rank == (0 if a_wins else 1)


def test_forcing_exact_comparisons_changes_no_winner(monkeypatch):
    scores = np.random.default_rng(4).normal(size=300) * 0.01  # many near-ties
    g = GumbelMax(SEED, "force", 1.0)
    fast = [g.best(scores, s).rank for s in range(0, 3000, 300)]
    monkeypatch.setattr(G, "_REL", 0.05)  # wide bounds: many exact comparisons
    assert [g.best(scores, s).rank for s in range(0, 3000, 300)] == fast


def test_every_candidate_can_win_unlike_todays_bounded_gumbel():
    """Today's Gumbel from a 53-bit uniform below 1 never exceeds 36.8, so a candidate trailing
    by 41 can never win; the exact Gumbel's upper bound is unbounded (W = 0) and exceeds 44 for
    the smallest cells."""
    assert (2.0**53 - 1 + 0.5) * 2.0**-53 == 1.0  # today's top grid point rounds to 1 (key +inf)
    u_max = (2.0**53 - 2 + 0.5) * 2.0**-53
    assert -math.log(-math.log(u_max)) < 36.8
    lo, hi = GumbelMax._gumbel(np.array([0, 1, 1000], dtype=np.uint64))
    assert hi[0] == math.inf and lo[0] > 44 and hi[1] > 44 and hi[2] > 36.8


def test_lattice_scores_and_hostile_scores():
    g = GumbelMax(SEED, "q", 3.0)
    q = g.lattice_scores(np.array([0.1, -0.1, np.nan, np.inf, -np.inf, 1e308, 1e-300]))
    assert np.all(np.isfinite(q))
    assert np.all(np.ldexp(q, G.SCORE_BITS) == np.rint(np.ldexp(q, G.SCORE_BITS)))
    assert abs(q[0] - 0.3) <= 2.0**-31
    best = g.best(np.array([np.nan, 1.0, np.inf]), 0)
    assert best.rank == 2
    with pytest.raises(ValueError, match="weight"):
        GumbelMax(SEED, "q", 0.0)
    assert g.best(np.empty(0), 0) == EMPTY
