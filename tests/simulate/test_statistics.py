"""The exact pieces of the simulation have the laws they claim."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpdist.data.block_models import open_uniforms, wishart_blocks
from dpdist.simulate.statistics import (
    normal_gumbel_conditional_abs,
    normal_gumbel_isf,
    normal_laplace_abs_isf,
    normal_laplace_abs_sf,
    top_survival,
)


@pytest.mark.parametrize("s,b", [(1.0, 0.1), (0.1, 1.0), (1.0, 1.0), (0.0, 1.0), (5.0, 0.01)])
def test_normal_laplace_survival_matches_monte_carlo(s, b):
    rng = np.random.default_rng(1)
    n = 400_000
    z = np.abs(s * rng.standard_normal(n) + rng.laplace(0.0, b, n))
    for x in (0.3 * (s + b), 2.0 * (s + b), 4.0 * (s + b)):
        p = float(normal_laplace_abs_sf(np.array([x]), s, b)[0])
        emp = float((z > x).mean())
        # binomial standard error; 5 sd
        assert abs(emp - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-6


@pytest.mark.parametrize("s,b", [(1.0, 0.1), (0.1, 1.0), (0.0, 1.0), (3.0, 0.3), (1e-4, 1.0)])
def test_normal_laplace_isf_inverts_the_survival(s, b):
    q = np.array([0.5, 1e-2, 1e-6, 1e-14, 1e-200])
    x = normal_laplace_abs_isf(q, s, b)
    assert np.all(np.diff(x) > 0)
    np.testing.assert_allclose(normal_laplace_abs_sf(x, s, b), q, rtol=1e-6)


@pytest.mark.parametrize("a", [0.0, 4e-4, 0.05, 0.8, 1.7, 30.0])
def test_normal_gumbel_isf_inverts_the_survival(a):
    """P(a |Z| + G > x) at the returned x, by an independent quadrature (scipy's quad over G),
    is q to 2e-3 relative, over q from 1/2 to 1e-9."""
    from scipy import integrate

    def sf(x):
        def f(t):  # Gumbel density times P(a |Z| > x - t)
            tail = 1.0 if x <= t else (math.erfc((x - t) / (a * math.sqrt(2))) if a > 0 else 0.0)
            return math.exp(-t - math.exp(-t)) * tail

        return integrate.quad(f, -10, 60, points=[x], limit=200, epsabs=0, epsrel=1e-9)[0]

    q = np.array([0.5, 1e-2, 1e-5, 1e-9])
    x = normal_gumbel_isf(q, a)
    assert np.all(np.diff(x) > 0)
    np.testing.assert_allclose([sf(v) for v in x], q, rtol=2e-3)


@pytest.mark.parametrize("x, a", [(3.0, 0.0), (3.0, 0.5), (9.0, 2.0), (18.0, 8.0)])
def test_normal_gumbel_conditional_draws_have_the_conditional_mean(x, a):
    """|Z| given a |Z| + G = x: the mean of 40,000 draws is E[|Z| | key] computed by quadrature
    of phi(z) g(x - a z) (independently of the sampler's grid), within 5 standard errors."""
    from scipy import integrate

    def dens(z):
        t = x - a * z
        return math.exp(-0.5 * z * z - t - math.exp(-t))

    mass = integrate.quad(dens, 0, 12, limit=200)[0]
    mean = integrate.quad(lambda z: z * dens(z), 0, 12, limit=200)[0] / mass
    sd = math.sqrt(integrate.quad(lambda z: z * z * dens(z), 0, 12, limit=200)[0] / mass - mean**2)
    z = normal_gumbel_conditional_abs(np.full(40_000, x), a, np.random.default_rng(3).random(40_000))
    assert abs(z.mean() - mean) < 5 * sd / math.sqrt(40_000) + 0.01 * sd  # grid of 256 points


def test_wishart_blocks_have_the_wishart_mean_and_variance():
    rng = np.random.default_rng(2)
    S = np.array([[2.0, 0.5], [0.5, 1.0]])
    n = 30
    W = wishart_blocks(np.repeat(S[None], 40_000, axis=0), n, rng)
    np.testing.assert_array_equal(W, np.transpose(W, (0, 2, 1)))
    # E[W/n] = S; Var(W_ij / n) = (S_ij^2 + S_ii S_jj) / n (Wishart); 6 standard errors
    var = (S**2 + np.outer(np.diag(S), np.diag(S))) / n
    assert (np.abs(W.mean(axis=0) - S) <= 6 * np.sqrt(var / 40_000)).all()
    np.testing.assert_allclose(W.var(axis=0), var, rtol=0.05)


def test_top_survival_is_the_law_of_the_top_order_statistics():
    # the largest of N uniforms has P(U_max <= x) = x^N: its survival q1 = 1 - U_max has
    # P(q1 >= t) = (1 - t)^N; and q2 - q1 given q1 ~ ... check the first two by KS against
    # direct simulation at N = 50
    rng = np.random.default_rng(3)
    q = top_survival(rng, 50, 2, shape=(20_000,))
    assert (q[:, 0] < q[:, 1]).all()
    direct = np.sort(rng.random((20_000, 50)), axis=1)[:, ::-1]
    assert stats.ks_2samp(q[:, 0], 1 - direct[:, 0]).pvalue > 1e-3
    assert stats.ks_2samp(q[:, 1], 1 - direct[:, 1]).pvalue > 1e-3
    # astronomically many cells: still in (0, 1) and of the right order of magnitude (1/N)
    big = top_survival(rng, 1e30, 3, shape=(1000,))
    assert (big > 0).all() and 0.3e-30 < np.median(big[:, 0]) < 3e-30


def test_open_uniforms_are_in_the_open_interval():
    u = open_uniforms(np.random.default_rng(4), 100_000)
    assert u.min() > 0 and u.max() < 1


def test_conditional_draw_in_blocks_is_the_same_draw(monkeypatch):
    """The conditional draw works a block of elements at a time (its work arrays are elements x
    grid points, 24 GB at d = 1e5 in one piece); any block size gives the same values."""
    import dpdist.simulate.statistics as st

    rng = np.random.default_rng(0)
    x, a, u = rng.normal(3, 2, (300, 7)), np.abs(rng.normal(0, 1, (300, 1))), rng.random((300, 7))
    whole = st.normal_gumbel_conditional_abs(x, a, u)
    monkeypatch.setattr(st, "_CONDITIONAL_BLOCK", 64)
    assert np.array_equal(st.normal_gumbel_conditional_abs(x, a, u), whole) and whole.shape == x.shape
