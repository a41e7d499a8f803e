"""The exact masked Gram release (dpdist.privacy.noise.masking; subsample-and-aggregate's output).

What is checked:
- ``grid_round`` against an independent rational reference, its monotonicity and its grid;
- ``masked_gram`` against an independent 600-bit mpmath evaluation from the same keyed words;
- the float path, the interval path and forced refinements give the same bits;
- the law: entries against a float simulation of the continuous mechanism, and the law depends on
  the factor only through A A^T;
- the support test: outputs under C are attainable under a neighbour C' (a real N' reaching each
  output is constructed), while the old countable-N mechanism's outputs are not.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpdist.privacy.noise.lattice import FALLBACK_SUFFIX
from dpdist.privacy.noise.masking import GRID_BITS, GRID_MIN_EXPONENT, ExactGram, grid_round, masked_gram
from dpdist.privacy.noise.streams import NoiseSeed

PURPOSE = "test/mask"


def _ref_round(x) -> Fraction:
    """grid_round from its definition, in rationals (independent of the module's integer code)."""
    x = Fraction(x)
    if x == 0:
        return Fraction(0)
    e = math.floor(math.log2(abs(x)))
    while Fraction(2) ** e > abs(x):  # log2 of a rational may be off by one near powers of two
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(x):
        e += 1
    ulp = Fraction(2) ** (max(e, GRID_MIN_EXPONENT) - GRID_BITS + 1)
    return ulp * math.floor(x / ulp + Fraction(1, 2))


# ------------------------------------------------------------------------------- the grid
def test_grid_round_matches_the_rational_definition():
    rng = np.random.default_rng(0)
    xs = np.concatenate([
        rng.standard_normal(2000) * np.exp(rng.uniform(-700, 700, 2000)),
        [1.0, -1.0, 2.0**-1000, 3 * 2.0**-1030, -(2.0**-1074), 1.5, 2.0**30 + 0.5, 2.0**29 + 0.5],
    ])
    # exact halves between grid points round up (towards +inf), on both signs
    half = (1 + 2.0**-30) * 2.0**5
    xs = np.append(xs, [half, -half])
    got = grid_round(xs)
    for x, g in zip(xs, got):
        assert Fraction(float(g)) == _ref_round(float(x)), x
    assert grid_round([half])[0] == 2.0**5 + 2.0**-24 and grid_round([-half])[0] == -(2.0**5)


def test_grid_round_is_monotone_idempotent_and_overflows_to_inf():
    rng = np.random.default_rng(1)
    xs = np.sort(np.concatenate([rng.standard_normal(5000) * np.exp(rng.uniform(-50, 50, 5000)),
                                 np.nextafter(2.0 ** np.arange(-8, 8), 0), 2.0 ** np.arange(-8, 8)]))
    g = grid_round(xs)
    assert np.all(np.diff(g) >= 0)
    assert np.array_equal(grid_round(g), g)
    m, _ = np.frexp(g[g != 0])  # at most GRID_BITS significant bits
    assert np.all(np.ldexp(m, GRID_BITS) == np.round(np.ldexp(m, GRID_BITS)))
    big = np.finfo(np.float64).max
    assert grid_round([big, -big]).tolist() == [math.inf, -math.inf]


# --------------------------------------------------------------- against a reference
def _fraction(x) -> Fraction:
    """An mpmath mpf as an exact rational (its raw (sign, man, exp, bc) tuple)."""
    sign, man, exp, _ = x._mpf_
    return (-1 if sign else 1) * Fraction(man) * Fraction(2) ** exp


def _uniform_prefix(seed: NoiseSeed, p: int, c: int, bits: int) -> int:
    key = seed.key(PURPOSE)
    w = seed.raw(key, c, 2 * p, 2)
    num = (int(w[0]) << 64) | int(w[1])
    fkey, k = seed.key(PURPOSE + FALLBACK_SUFFIX), 0
    have = 128
    while have < bits:
        num = (num << 64) | int(seed.raw(fkey, c, p * 64 + k, 1)[0])
        have, k = have + 64, k + 1
    return num >> (have - bits)


def _reference(a: np.ndarray, eta: float, seed: NoiseSeed, bits: int = 512) -> np.ndarray:
    """Plain mpmath at 600 bits from the uniforms' first ``bits`` bits (within 2**-500 of the reals)."""
    ctx = mpmath.MPContext()
    ctx.prec = 600
    d = a.shape[0]
    z = []
    for p in range((d * d + 1) // 2):
        v1 = ctx.ldexp(ctx.mpf(_uniform_prefix(seed, p, 0, bits)), -bits)
        u2 = ctx.ldexp(ctx.mpf(_uniform_prefix(seed, p, 1, bits)), -bits)
        r = ctx.sqrt(-2 * ctx.log(1 - v1))
        z += [r * ctx.cos(2 * ctx.pi * u2), r * ctx.sin(2 * ctx.pi * u2)]
    n = ctx.matrix(d, d)
    for i in range(d):
        for j in range(d):
            n[i, j] = z[i * d + j]
    am = ctx.matrix([[ctx.mpf(float(x)) for x in row] for row in a])
    g = am * (ctx.eye(d) + ctx.mpf(eta) * n)
    s = g * g.T
    out = np.empty((d, d))
    for i in range(d):
        for j in range(d):
            out[i, j] = float(_ref_round(_fraction(ctx.mpf(s[i, j]))))
    return out


def _factors():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((40, 3))
    c = x.T @ x / 40
    ill = np.diag([1.0, 1e-6, 1e6]) + 1e-3
    return {
        "d1": np.array([[1.7]]),
        "chol3": np.linalg.cholesky(c),
        "root3": (lambda w, v: (v * np.sqrt(w)) @ v.T)(*np.linalg.eigh(c)),
        "ill-conditioned": np.linalg.cholesky(ill @ ill.T),
        "huge-and-tiny": np.diag([1e150, 1e-150, 3.0]),
        "zero-row": np.array([[1.0, 0.0], [0.0, 0.0]]),
        "d6": np.linalg.cholesky(np.eye(6) + 0.5),
    }


@pytest.mark.parametrize("name", sorted(_factors()))
def test_matches_an_independent_high_precision_evaluation(name):
    a = _factors()[name]
    for s in (3, 11):
        seed = NoiseSeed(s, seeded=True)
        out = masked_gram(a, 0.01, seed, PURPOSE)
        assert np.array_equal(out, _reference(a, 0.01, seed)), (name, s)
        assert np.array_equal(out, out.T)


def test_refuses_bad_arguments():
    seed = NoiseSeed(0, seeded=True)
    with pytest.raises(ValueError, match="square"):
        masked_gram(np.ones((2, 3)), 0.1, seed, PURPOSE)
    with pytest.raises(ValueError, match="finite"):
        masked_gram(np.array([[np.inf]]), 0.1, seed, PURPOSE)
    with pytest.raises(ValueError, match="eta"):
        masked_gram(np.eye(2), -0.1, seed, PURPOSE)
    with pytest.raises(ValueError, match="first_bits"):
        masked_gram(np.eye(2), 0.1, seed, PURPOSE, first_bits=0)


# -------------------------------------------------------------------------------- the law
def _sample(a: np.ndarray, eta: float, n: int, start: int) -> np.ndarray:
    return np.stack([masked_gram(a, eta, NoiseSeed(start + i, seeded=True), PURPOSE) for i in range(n)])


@pytest.mark.statistical
def test_entries_follow_the_continuous_mechanism():
    """KS of each distinct entry against 20,000 float draws of A (I + eta N)(I + eta N)^T A^T
    (the 2**-30 rounding is far below the KS resolution). Fixed seeds; the alpha of 1e-3 is per
    entry, three entries."""
    a = np.linalg.cholesky(np.array([[2.0, 0.6], [0.6, 1.0]]))
    eta = 0.3
    got = _sample(a, eta, 1500, 10_000)
    rng = np.random.default_rng(5)
    b = np.eye(2) + eta * rng.standard_normal((20_000, 2, 2))
    ref = a @ b @ np.transpose(b, (0, 2, 1)) @ a.T
    for i, j in ((0, 0), (0, 1), (1, 1)):
        assert stats.ks_2samp(got[:, i, j], ref[:, i, j]).pvalue > 1e-3, (i, j)


@pytest.mark.statistical
def test_the_law_depends_on_the_factor_only_through_its_gram():
    """Cholesky factor and symmetric root of one matrix: same law (N is rotation invariant);
    a different Gram is told apart by the same test (it can fail)."""
    c = np.array([[2.0, 0.6], [0.6, 1.0]])
    chol = np.linalg.cholesky(c)
    w, v = np.linalg.eigh(c)
    root = (v * np.sqrt(w)) @ v.T
    other = np.linalg.cholesky(np.array([[2.0, 0.9], [0.9, 1.0]]))
    x, y, z = (_sample(f, 0.3, 1200, s)[:, 0, 1] for f, s in ((chol, 0), (root, 50_000), (other, 90_000)))
    assert stats.ks_2samp(x, y).pvalue > 1e-3
    assert stats.ks_2samp(x, z).pvalue < 1e-6


# ------------------------------------------------------------------------- the support test
def _old_release(r: float, eta: float, n: np.ndarray) -> np.ndarray:
    """The previous masked output at d = 1 (the twin): N on the lattice 2**-28, float products
    root @ b @ b.T @ root evaluated left to right, symmetrised."""
    b = 1.0 + eta * n
    return ((r * b) * b) * r


def test_outputs_are_attainable_under_the_neighbour_and_the_old_outputs_are_not():
    """d = 1, C = r^2 and a neighbour C' = r'^2. New path: for each output y a real n' with
    grid_round(r'^2 (1 + eta n')^2) = y is constructed (at 300 bits) and checked with the
    rational rounding: 0 impossible. Old path (countable N, float products): an output is
    attainable under r' only if some lattice n' near (sqrt(y)/r' - 1)/eta reproduces y exactly:
    almost none do."""
    eta, r, r2 = 0.01, 1.3, 1.3 * (1 + 1e-3)
    ctx = mpmath.MPContext()
    ctx.prec = 300
    outputs = [masked_gram(np.array([[r]]), eta, NoiseSeed(s, seeded=True), PURPOSE)[0, 0] for s in range(400)]
    impossible = 0
    for y in outputs:
        assert grid_round([y])[0] == y and y > 0
        n2 = (ctx.sqrt(ctx.mpf(y)) / ctx.mpf(r2) - 1) / ctx.mpf(eta)  # a real preimage under r'
        val = (ctx.mpf(r2) * (1 + ctx.mpf(eta) * n2)) ** 2
        impossible += _ref_round(_fraction(val)) != Fraction(y)
    assert impossible == 0

    rng = np.random.default_rng(2)
    n_old = np.round(rng.standard_normal(400) * 2.0**28) * 2.0**-28
    old = _old_release(r, eta, n_old)
    unit = 2.0**-28

    def attainable(y: float, root: float) -> bool:
        centre = np.round(((math.sqrt(y) / root - 1.0) / eta) / unit)
        return bool(np.any(_old_release(root, eta, (centre + np.arange(-64, 65)) * unit) == y))

    assert all(attainable(y, r) for y in old)  # the search finds every output's own preimage
    hit = sum(attainable(y, r2) for y in old)
    assert hit / len(old) < 0.05, hit


# ------------------------------------------------------------------ an exactly given Gram
def _exact_gram_cases():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((30, 3))
    num = np.round(x.T @ x * 2.0**20).astype(np.int64)
    return {
        "moderate": ExactGram(num.tolist(), -20, 7),
        "ill-conditioned": ExactGram([[10**40, 10**20], [10**20, 2]], -3, 3),
        "huge-exponent": ExactGram([[3, 1], [1, 5]], -1060, 1),
        "d1": ExactGram([[5]], 700, 9),
    }


@pytest.mark.parametrize("name", sorted(_exact_gram_cases()))
def test_an_exact_gram_with_no_mask_is_released_as_its_exact_rounding(name):
    """eta = 0: the release is grid_round(C) of the exact rational C, which checks the enclosed
    Cholesky factor and the float path's factor radius against an independent rational value."""
    g = _exact_gram_cases()[name]
    scale = Fraction(2) ** g.exponent / g.denominator
    want = np.array([[float(_ref_round(x * scale)) for x in row] for row in g.numerators])
    seed = NoiseSeed(0, seeded=True)
    assert np.array_equal(masked_gram(g, 0.0, seed, PURPOSE), want)
    assert np.array_equal(masked_gram(g, 0.0, seed, PURPOSE, fast=False), want)


def _every_input():
    return {**{f"float/{k}": v for k, v in _factors().items()},
            **{f"exact/{k}": v for k, v in _exact_gram_cases().items()}}


@pytest.mark.parametrize("name", sorted(_every_input()))
def test_float_path_interval_path_and_refinements_agree_bit_for_bit(name):
    a = _every_input()[name]
    for s in range(4):
        seed = NoiseSeed(100 + s, seeded=True)
        fast = masked_gram(a, 0.05, seed, PURPOSE)
        assert np.array_equal(fast, masked_gram(a, 0.05, seed, PURPOSE, fast=False))
        # 3 bits a uniform at first: every entry goes through several refinement levels
        assert np.array_equal(fast, masked_gram(a, 0.05, seed, PURPOSE, first_bits=3))


@pytest.mark.statistical
def test_an_exact_gram_has_the_law_of_any_factor_of_it():
    """ExactGram(C) and a float factor of the same C (C chosen with an exact float Cholesky
    factor): same law (KS, fixed seeds)."""
    low = np.array([[2.0, 0.0], [0.5, 1.25]])
    c = low @ low.T  # exact in floats: 4, 1, 1, 1.8125
    g = ExactGram((c * 16).astype(np.int64).tolist(), -4, 1)
    x = np.stack([masked_gram(g, 0.3, NoiseSeed(s, seeded=True), PURPOSE) for s in range(1200)])[:, 0, 1]
    y = _sample(low, 0.3, 1200, 70_000)[:, 0, 1]
    assert stats.ks_2samp(x, y).pvalue > 1e-3


def test_an_exact_gram_is_validated():
    with pytest.raises(ValueError, match="symmetric"):
        ExactGram([[1, 2], [3, 4]], 0, 1)
    with pytest.raises(ValueError, match="positive denominator"):
        ExactGram([[1]], 0, 0)
    with pytest.raises(ValueError, match="positive definite"):
        masked_gram(ExactGram([[1, 1], [1, 1]], 0, 1), 0.1, NoiseSeed(0, seeded=True), PURPOSE)
