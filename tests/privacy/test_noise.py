"""Keyed noise streams and samplers: positions, keys, seeding and distributions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpdist.exceptions import ValidationError
from dpdist.privacy.noise.streams import (
    GENERATOR_NAME,
    NoiseSeed,
    bounded_laplace_from_uniform,
    gaussian_from_uniform,
    laplace_from_uniform,
    resolve_random_state,
)


def test_positioned_draws_equal_slices_of_the_whole_stream():
    s = NoiseSeed(7, seeded=True)
    full = s.uniforms("p", 3, 0, 5000)
    for start, count in [(0, 1), (1, 7), (999, 1001), (4321, 679)]:
        np.testing.assert_array_equal(s.uniforms("p", 3, start, count), full[start : start + count])
    np.testing.assert_array_equal(s.uniforms_at("p", 3, [17, 4000, 2]), full[[17, 4000, 2]])


def test_streams_differ_by_purpose_index_and_root():
    a = NoiseSeed(7, True).uniforms("p", 0, 0, 64)
    for other in (
        NoiseSeed(7, True).uniforms("q", 0, 0, 64),
        NoiseSeed(7, True).uniforms("p", 1, 0, 64),
        NoiseSeed(8, True).uniforms("p", 0, 0, 64),
    ):
        assert not np.intersect1d(a, other).size


def test_uniforms_lie_in_open_unit_interval():
    u = NoiseSeed(1, True).uniforms("p", 0, 0, 200_000)
    assert u.min() > 0 and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > 1e-3


def test_resolve_random_state():
    a, b = resolve_random_state(None), resolve_random_state(None)
    assert not a.seeded and a.entropy != b.entropy  # fresh OS entropy each time
    assert "random_state" not in a.describe()  # never record OS entropy (it would de-noise)
    s = resolve_random_state(42)
    assert s.seeded and s.describe() == {"mode": "seeded", "generator": GENERATOR_NAME, "random_state": 42}
    for bad in (-1, 1.5, "3", True, np.random.default_rng(0)):
        with pytest.raises(ValidationError, match="random_state"):
            resolve_random_state(bad)


def test_laplace_sampler_has_the_claimed_scale():
    b = 0.37
    x = laplace_from_uniform(NoiseSeed(11, True).uniforms("p", 0, 0, 40_000), b)
    assert stats.kstest(x, stats.laplace(scale=b).cdf).pvalue > 1e-3
    # E|X| = b; sd(|X|) = b: 5 standard errors of the mean
    assert abs(np.abs(x).mean() - b) < 5 * b / math.sqrt(len(x))


def test_gaussian_sampler_has_the_claimed_scale():
    s = 2.5
    x = gaussian_from_uniform(NoiseSeed(12, True).uniforms("p", 0, 0, 40_000), s)
    assert stats.kstest(x, stats.norm(scale=s).cdf).pvalue > 1e-3
    # var(X^2) = 2 s^4: 5 standard errors
    assert abs((x**2).mean() - s**2) < 5 * math.sqrt(2) * s**2 / math.sqrt(len(x))


def test_bounded_laplace_is_laplace_conditioned_on_the_bound():
    b, tau = 1.0, 1.5
    x = bounded_laplace_from_uniform(NoiseSeed(13, True).uniforms("p", 0, 0, 40_000), b, tau)
    assert np.abs(x).max() <= tau
    mass = stats.laplace(scale=b).cdf(tau) - stats.laplace(scale=b).cdf(-tau)

    def cdf(t):
        return (stats.laplace(scale=b).cdf(np.clip(t, -tau, tau)) - stats.laplace(scale=b).cdf(-tau)) / mass

    assert stats.kstest(x, cdf).pvalue > 1e-3
