"""Float-safe lattice noise: exact laws, exact fast path, stream layout, hostile values."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from scipy import special, stats

from dpdist.privacy.noise import lattice as L
from dpdist.privacy.noise.lattice import Lattice, LatticeField, LatticeNoise
from dpdist.privacy.noise.streams import NoiseSeed
from tests.conftest import LONG

SEED = NoiseSeed(2024, seeded=True)
BIG = 1.3 * 2.0**28  # a scale in lattice units as Lattice.for_scale produces


def _words(n: int, purpose: str = "w") -> np.ndarray:
    return SEED.raw(SEED.key(purpose), 0, 0, n)


# ------------------------------------------------------------------------------------ lattice


def test_lattice_for_scale_puts_the_scale_at_2_to_the_28_units():
    for scale in (1e-9, 0.37, 1.0, 3.0, 5e7):
        lat = Lattice.for_scale(scale)
        assert 2.0**28 <= lat.units(scale) < 2.0**29
        assert lat.gamma == 2.0**lat.exponent


def test_rounding_moves_neighbours_by_at_most_the_lattice_sensitivity(rng):
    lat = Lattice(-10)
    for delta in (0.0, 1e-4, 2.0**-10, 3 * 2.0**-10, 0.37):
        v = rng.normal(scale=5.0, size=200_000)
        w = v + rng.uniform(-delta, delta, size=v.size)
        w[::7] = v[::7] + delta  # the extreme
        diff = np.abs(lat.to_units(v) - lat.to_units(w))
        assert diff.max() <= lat.sensitivity_units(delta)
    # L1 / L2 over n coordinates that may all change
    v = rng.normal(size=(2000, 50))
    w = v + rng.uniform(-1e-3, 1e-3, size=v.shape)
    d = lat.to_units(v) - lat.to_units(w)
    d1, d2 = np.abs(v - w).sum(1).max(), np.sqrt(((v - w) ** 2).sum(1)).max()
    assert np.abs(d).sum(1).max() <= lat.sensitivity_units(d1, norm="l1", coordinates=50)
    assert np.sqrt((d**2).sum(1)).max() <= lat.sensitivity_units(d2, norm="l2", coordinates=50)
    with pytest.raises(ValueError, match="norm"):
        lat.sensitivity_units(1.0, norm="l3")


HOSTILE = np.array(
    [0.0, -0.0, 1e-310, -1e-310, 5e-324, 1e-154, 1e154, 1e300, -1e300, 1e37, np.finfo(np.float32).max,
     np.finfo(np.float64).max, -np.finfo(np.float64).max, np.inf, -np.inf, np.nan, -2.0**-11, 2.0**-11]
)


@pytest.mark.parametrize("law", ["laplace", "gaussian", "bounded-laplace"])
def test_releases_of_hostile_values_are_lattice_points_and_never_negative_zero(law):
    noise = LatticeNoise.for_scale(law, 1e-3, bound=1e-2 if law == "bounded-laplace" else None)
    lat = noise.lattice
    for seed in range(20):
        out = LatticeField(NoiseSeed(seed, True), "hostile", noise)(HOSTILE, (0,))
        finite = np.isfinite(out)
        assert lat.contains(out[finite]).all()
        assert not np.signbit(out[out == 0]).any()
        # NaN becomes 0 before noise, +-inf the clamp (2**1000 units): both finite here
        assert finite[np.isnan(HOSTILE) | np.isinf(HOSTILE)].all()


def test_release_of_a_tiny_negative_value_is_indistinguishable_by_the_sign_of_zero():
    noise = LatticeNoise("gaussian", Lattice(0), 1e-6)  # noise almost surely 0
    f = LatticeField(SEED, "zero", noise)
    a, b = f(np.full(1000, -0.25), (0,)), f(np.full(1000, 0.25), (0,))
    assert np.array_equal(a.view(np.int64), b.view(np.int64))  # bit-identical: +0.0 both


# ------------------------------------------------------------------- the fast path is exact


@pytest.mark.parametrize("law", ["laplace", "gaussian"])
@pytest.mark.parametrize("scale", [0.7, 3.0, BIG, 2.0**36])
def test_fast_path_agrees_with_exact_resolution(law, scale):
    """Wherever the fast path certifies a magnitude, the exact (mpmath) resolution of the same
    cell returns it; undecided cells are rare."""
    words = _words(200_000, f"agree-{law}-{scale}")
    mag, pending = L._fast_magnitudes(law, scale, words & L._MASK63)
    assert pending.mean() < max(1e-3, scale * 2.0**-40)
    bits = 64 if law == "gaussian" else 63
    idx = np.random.default_rng(1).choice(np.flatnonzero(~pending), 150, replace=False)
    for e in idx.tolist():
        z, used = L._resolve(law, scale, int(words[e] & L._MASK63), bits, iter(()), 0)
        assert (z, used) == (mag[e], 0)


@pytest.mark.parametrize("law", ["laplace", "gaussian", "bounded-laplace"])
def test_forcing_every_entry_onto_the_exact_path_changes_no_value(law, monkeypatch):
    noise = LatticeNoise(law, Lattice(-3), 2.5, 6.0 if law == "bounded-laplace" else math.inf)
    f = LatticeField(SEED, "force", noise)
    fast = f.vector_units(0, 3000)
    monkeypatch.setattr(L, "_REL", 0.5)  # every cell undecided: all entries resolved exactly
    exact = f.vector_units(0, 3000)
    np.testing.assert_array_equal(fast, exact)


def test_refinement_words_decide_cells_that_straddle_a_boundary():
    """A cell [W, W+1) 2**-63 straddling b(z) is decided by the next word, consistently with
    the float value at the refined point."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.prec = 200
    s = 2.0**36
    for z in (5, 12345, 10**9):
        W = int(ctx.floor(ctx.exp(-(ctx.mpf(z) + 0.5) / s) * 2**63))  # the cell holding b(z)
        for nxt in (0, 1 << 63, (1 << 64) - 1, 12345678901234567):
            mag, used = L._resolve("laplace", s, W, 63, iter([nxt]), 5)
            assert used == 1
            p = (W + nxt / 2.0**64) / 2.0**63
            assert abs(mag - math.floor(-s * math.log(p) + 0.5)) <= 1
        assert L._resolve("laplace", s, W, 63, iter([0]), 5)[0] == z + 1  # low end: larger mag
        assert L._resolve("laplace", s, W, 63, iter([(1 << 64) - 1]), 5)[0] == z


def test_float_functions_are_within_the_assumed_accuracy():
    """numpy.log and scipy.special.ndtri against mpmath: the fast path assumes 2**-46 relative
    error; measured errors must stay 8x below it."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.prec = 120
    rng = np.random.default_rng(5)
    m = 4 if LONG else 1
    w = np.concatenate([rng.integers(1 << 40, 1 << 63, 600 * m, dtype=np.uint64),
                        np.uint64(1) << rng.integers(40, 63, 200 * m).astype(np.uint64)])
    u = (w.astype(np.float64) + 0.5) * 2.0**-63
    worst = 0.0
    for x, y in zip(u.tolist(), np.log(u).tolist()):
        exact = ctx.log(ctx.mpf(x))
        worst = max(worst, float(abs((ctx.mpf(y) - exact) / exact)))
    p = u / 2
    for x, y in zip(p.tolist(), special.ndtri(p).tolist()):
        exact = -ctx.sqrt(2) * ctx.erfinv(1 - 2 * ctx.mpf(x))
        worst = max(worst, float(abs((ctx.mpf(y) - exact) / exact)))
    assert worst < L._REL / 8


# -------------------------------------------------------------------------- the exact laws


def _chi2_pvalue(samples: np.ndarray, noise: LatticeNoise, edges: np.ndarray) -> float:
    """Chi-square of counts in integer bins (edges[i], edges[i+1]] against the exact CDF."""
    counts = np.histogram(samples, bins=np.concatenate([[-np.inf], edges[1:-1] + 0.5, [np.inf]]))[0]
    cdf = np.concatenate([[0.0], noise.cdf(edges[1:-1]), [1.0]])
    expected = np.diff(cdf) * samples.size
    keep = expected > 0
    return stats.chisquare(counts[keep], expected[keep] * counts[keep].sum() / expected[keep].sum()).pvalue


LAWS = [
    LatticeNoise("laplace", Lattice(0), 3.0),
    LatticeNoise("gaussian", Lattice(0), 2.5),
    LatticeNoise("bounded-laplace", Lattice(0), 3.0, 5.0),
    LatticeNoise("laplace", Lattice(0), BIG),
    LatticeNoise("gaussian", Lattice(0), BIG),
]


@pytest.mark.statistical
@pytest.mark.parametrize("noise", LAWS, ids=lambda n: f"{n.law}-{n.scale:.3g}")
def test_sampled_law_matches_the_exact_pmf(noise):
    """Chi-square against the exact law (fixed seed). Small scales: one bin per integer in
    [-25, 25] plus two tail bins; large scales: 40 bins at the law's quantiles. Under the null
    the p-value is uniform; failing at p < 1e-4 has probability 1e-4 (fixed seed: reproducible)."""
    n = 2_000_000 if LONG else 200_000
    k = LatticeField(SEED, f"law-{noise.law}-{noise.scale}", noise).vector_units(0, n)
    assert np.all(k == np.rint(k))
    if noise.scale < 100:
        edges = np.arange(-26, 26, dtype=float)
    else:
        q = stats.norm.ppf if noise.law == "gaussian" else stats.laplace.ppf
        edges = np.unique(np.floor(q(np.linspace(0, 1, 41)[1:-1]) * noise.scale * (1.0 if noise.law == "gaussian" else 1.0)))
        edges = np.concatenate([[-np.inf], edges, [np.inf]])
    assert _chi2_pvalue(k, noise, edges) > 1e-4
    if noise.law == "bounded-laplace":
        assert np.abs(k).max() <= noise.bound
    # zero is symmetric: P(K = 0) is the pmf at 0, not doubled by the sign bit
    p0 = float(noise.pmf(0))
    assert abs((k == 0).mean() - p0) < 5 * math.sqrt(p0 * (1 - p0) / n) + 1e-12


def test_pmf_sums_to_one_and_cdf_agrees_with_it():
    for noise in LAWS[:3]:
        ks = np.arange(-200, 201)
        p = noise.pmf(ks)
        assert abs(p.sum() - 1) < 1e-12
        np.testing.assert_allclose(np.cumsum(p)[:-1], noise.cdf(ks[:-1]), atol=1e-12)


@pytest.mark.statistical
def test_privacy_loss_at_lattice_points_is_at_most_epsilon():
    """Empirical log(P_D(o) / P_D'(o)) at lattice points for neighbours one lattice unit apart:
    within epsilon = 1/s plus 4.5 standard errors (Poisson counts; one-sided, a point fails by
    chance with probability ~3e-6, and ~40 points are tested)."""
    from dpdist.testing.support import LatticeSampler, log_ratios_at_points

    n = 4_000_000 if LONG else 400_000
    noise = LatticeNoise("laplace", Lattice(0), 4.0)
    sampler = LatticeSampler(noise)
    a, b = sampler.draw(0.0, n, 1), sampler.draw(1.0, n, 2)
    points, lr, se = log_ratios_at_points(a, b, 200)
    assert points.size > 20
    eps = noise.epsilon(1.0)
    assert np.all(np.abs(lr) <= eps + 4.5 * se)
    # the loss reaches epsilon where the law says it does (away from the two centres)
    far = np.abs(points) >= 3
    assert np.all(np.abs(np.abs(lr[far]) - eps) <= 4.5 * se[far])


# ------------------------------------------------------------------ stream layout and API


def test_tiles_scattered_entries_and_pickles_agree():
    noise = LatticeNoise.for_scale("laplace", 0.3)
    vals = np.random.default_rng(3).normal(size=(37, 29))
    for symmetric in (False, True):
        f = LatticeField(SEED, "tiles", noise, symmetric=symmetric)
        whole = f(vals, (0, 0))
        tiled = np.block([[f(vals[r : r + 10, c : c + 7], (r, c)) for c in range(0, 29, 7)] for r in range(0, 37, 10)])
        np.testing.assert_array_equal(whole, tiled)
        rr, cc = np.nonzero(np.ones_like(vals))
        np.testing.assert_array_equal(f.at(rr, cc, vals[rr, cc]).reshape(vals.shape), whole)
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(f))(vals, (0, 0)), whole)
        if symmetric:
            sym = f(np.zeros((29, 29)), (0, 0))
            np.testing.assert_array_equal(sym, sym.T)


def test_vector_tiles_agree_with_the_whole_vector_and_streams_differ():
    noise = LatticeNoise.for_scale("gaussian", 2.0)
    f = LatticeField(SEED, "vec", noise, stream=4)
    v = np.linspace(-1, 1, 1000)
    whole = f(v, 0)
    np.testing.assert_array_equal(np.concatenate([f(v[s : s + 300], (s,)) for s in range(0, 1000, 300)]), whole)
    assert float(f(np.float64(v[0]), ())) == whole[0]  # a scalar is position 0
    other = LatticeField(SEED, "vec", noise, stream=5)(v, 0)
    assert np.mean(other == whole) < 0.01


def test_fallback_words_are_the_entrys_own():
    """Entry (i, j) reads fallback positions j * FALLBACK_WORDS ..: the block of another entry
    never overlaps, so resolving one entry cannot change another's value."""
    words = list(L._fallback_words(SEED, 99, 3, 7))
    assert len(words) == L.FALLBACK_WORDS
    np.testing.assert_array_equal(np.array(words, dtype=np.uint64), SEED.raw(99, 3, 7 * L.FALLBACK_WORDS, L.FALLBACK_WORDS))


def test_bounded_law_exhaustion_stays_within_the_bound():
    word = (1 << 63) | 5  # negative sign, a far-tail cell: magnitude > bound
    value = L._exact_entry("laplace", 63, 3.0, 2.0, word, iter([(1 << 63) | 5] * L.FALLBACK_WORDS))
    assert value == -2.0
    # each redraw is rejected with probability q = P(|L| >= A + 1/2); 32 redraws at least
    noise = LatticeNoise("bounded-laplace", Lattice(0), 3.0, 2.0)
    assert noise.exhaustion_delta() == pytest.approx(math.exp(-2.5 / 3.0) ** 32, rel=1e-12)
    assert LatticeNoise("bounded-laplace", Lattice(0), 3.0, 60.0).exhaustion_delta() < 1e-100


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="law"):
        LatticeNoise("cauchy", Lattice(0), 1.0)
    with pytest.raises(ValueError, match="scale"):
        LatticeNoise("laplace", Lattice(0), 2.0**41)
    with pytest.raises(ValueError, match="integer bound"):
        LatticeNoise("bounded-laplace", Lattice(0), 1.0, 2.5)
    with pytest.raises(ValueError, match="bound applies"):
        LatticeNoise("laplace", Lattice(0), 1.0, 3.0)
    with pytest.raises(ValueError, match="exponent"):
        Lattice(2000)
    with pytest.raises(ValueError, match="scale"):
        Lattice.for_scale(float("nan"))


def test_privacy_statements():
    lap = LatticeNoise("laplace", Lattice(0), 4.0)
    assert lap.epsilon(2.0) == 0.5
    gau = LatticeNoise("gaussian", Lattice(0), 4.0)
    assert gau.rho(2.0) == 2.0**2 / (2 * 16.0)
    with pytest.raises(ValueError):
        gau.epsilon(1.0)
    assert LatticeNoise.for_scale("bounded-laplace", 1.0, bound=3.0).bound == math.ceil(3.0 * 2.0**28)
