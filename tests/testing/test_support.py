"""The support test: float-safe primitives pass it, today's inverse-CDF twins fail it."""

from __future__ import annotations

import numpy as np
import pytest

from dpdist.privacy.lattice import LatticeNoise
from dpdist.testing.support import InverseCdfSampler, LatticeSampler, support_test
from tests.conftest import LONG

N = 1_000_000 if LONG else 100_000
SCALE = 0.05
DELTA = 0.01  # the sensitivity: neighbouring values differ by it
BOUND = 0.5
# values where float64 inverse-CDF noise is known to leak (small, moderate, large vs the noise)
VALUES = (3e-5, 0.37212, 1000.37)


def _lattice(law: str) -> LatticeSampler:
    return LatticeSampler(LatticeNoise.for_scale(law, SCALE, bound=BOUND if law == "bounded-laplace" else None))


@pytest.mark.statistical
@pytest.mark.parametrize("law", ["laplace", "gaussian", "bounded-laplace"])
@pytest.mark.parametrize("value", VALUES)
def test_float_safe_primitives_produce_nothing_the_neighbour_cannot(law, value):
    sampler = _lattice(law)
    res = support_test(sampler, value, value + DELTA, N, random_state=11)
    assert res.n == N and res.outside_tail == 0
    if law != "bounded-laplace":
        assert res.impossible == 0  # no documented tail at all
    else:  # the truncated law's designed tail: outputs beyond m' + A, mass < exp(-(A - Delta)/b)
        assert res.impossible <= 10 + 3 * N * np.exp(-(BOUND - DELTA - sampler.noise.lattice.gamma) / SCALE)


@pytest.mark.statistical
@pytest.mark.parametrize("kind", ["laplace", "gaussian", "bounded-laplace"])
def test_inverse_cdf_twins_fail_the_support_test(kind):
    """Today's primitives: a large share of their outputs is impossible under the neighbour
    (the issue measured 0.86 for Laplace). Checked exactly over the 2**53 uniforms they use."""
    sampler = InverseCdfSampler(kind, SCALE, BOUND if kind == "bounded-laplace" else np.inf)
    fractions = [support_test(sampler, v, v + DELTA, N // 10, random_state=3).fraction for v in VALUES]
    assert max(fractions) > 0.5
    assert all(f > 0 for f in fractions[:2])


def test_support_harness_decides_attainability_exactly():
    """The twin's attainability check accepts every output drawn under the same value (no
    false 'impossible') and rejects a point between two consecutive outputs' floats."""
    sampler = InverseCdfSampler("laplace", SCALE)
    out = sampler.draw(0.37212, 2000, 5)
    assert sampler.attainable(out, 0.37212).all()
    lat = _lattice("laplace")
    assert lat.attainable(lat.draw(0.37212, 2000, 5), 0.5).all()
    off = lat.draw(0.37212, 10, 5) + lat.noise.lattice.gamma / 2
    assert not lat.attainable(off, 0.5).any()
    assert not lat.attainable(np.array([-0.0, np.nan, np.inf]), 0.5).any()
