"""The support test on the released quantities of the second-moment, Gaussian
baseline, subsample-and-aggregate, ExpMech, PrivPCA-projector and private-mean mechanisms: draws go
through each mechanism's own release callable (the object the algorithm calls inside the graph), with statistics of
neighbouring inputs that differ by the mechanism's sensitivity, and every output drawn under D
is checked exactly for attainability under D'. Outside a law's designed tail the count must be
0. The old inverse-CDF path at the same scales fails the same test.

Short form: 1e5 outputs per released quantity; ``DPDIST_LONG=1``: 1e6.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpdist.privacy.mechanisms.gaussian import wang_xu_calibration
from dpdist.privacy.mechanisms.gaussian import analyze_gauss_calibration
from dpdist.privacy.mechanisms.expmech import expmech_calibration
from dpdist.privacy.noise.gumbel import GumbelMax
from dpdist.privacy.mechanisms.expmech import ExpMechMechanism
from dpdist.privacy.mechanisms.privpca.mechanism import PrivPCAMechanism
from dpdist.privacy.mechanisms.gaussian import analyze_gauss_mechanism, wang_xu_mechanism
from dpdist.privacy.mechanisms.mean import ClippedMeanMechanism
from dpdist.privacy.mechanisms.second_moment import histogram_mechanism, level_mechanisms, moment_release
from dpdist.privacy.mechanisms.subsample_aggregate import (
    agreement_sensitivity,
    subsample_aggregate_mechanism,
)
from dpdist.privacy.noise.streams import NoiseSeed
from dpdist.privacy.mechanisms.privpca.calibration import privpca_calibration
from dpdist.privacy.mechanisms.second_moment import level_schedule
from dpdist.privacy.mechanisms.subsample_aggregate import tlap_support
from dpdist.testing.support import LatticeSampler, support_test
from tests.audit_twins import InverseCdfSampler
from tests.conftest import LONG

N = 1_000_000 if LONG else 100_000
#: A square matrix of side D_SIDE has D_SIDE (D_SIDE + 1) / 2 >= N / 2 free coordinates.
D_SIDE = int(math.ceil(math.sqrt(2 * N)))


class _Draws:
    """The support harness's sampler interface around a mechanism's own release (``draw``) and
    the exact lattice decision of its law (``attainable``, ``tail``: :class:`LatticeSampler`)."""

    def __init__(self, draw, noise):
        self._draw, self._lattice = draw, LatticeSampler(noise)

    def draw(self, value, n, random_state):
        return np.asarray(self._draw(value, n, NoiseSeed(random_state, seeded=True)), dtype=np.float64).ravel()[:n]

    def attainable(self, outputs, value):
        return self._lattice.attainable(outputs, value)

    def tail(self, outputs, value):
        return self._lattice.tail(outputs, value)


def _level():
    """Level 0 of a 3-level schedule (n = 1000, d = D_SIDE, normalised radius 100)."""
    sched = level_schedule(1000, D_SIDE, 1.0, m=1, radius=100.0)
    return sched, level_mechanisms(sched)[0]


def _level_draws():
    sched, mech = _level()
    n = sched.n_samples

    def draw(value, count, seed):  # every upper-triangle entry of the level matrix equals value
        gram = np.full((D_SIDE, D_SIDE), value * n)
        out = moment_release(mech, seed, n)(gram)
        return out[np.triu_indices(D_SIDE)]

    return _Draws(draw, mech.noise), mech.sensitivity, mech


def _histogram_draws():
    mech = histogram_mechanism("radius", 0.05)
    return _Draws(lambda v, count, seed: mech.release(seed)(np.full(count, v)), mech.noise), math.sqrt(2.0), mech


def _gaussian_baseline_draws(which):
    if which == "wang-xu":
        mech = wang_xu_mechanism(wang_xu_calibration(1.0, 1e-6, 10_000, D_SIDE, 2.0), D_SIDE)
    else:
        mech = analyze_gauss_mechanism(analyze_gauss_calibration(1.0, 1e-6, 10_000, 3.0), D_SIDE)

    def draw(value, count, seed):
        out = mech.release(seed)(np.full((D_SIDE, D_SIDE), value), (0, 0))
        return out[np.triu_indices(D_SIDE)]

    return _Draws(draw, mech.noise), mech.sensitivity, mech


def _agreement_draws():
    k, eps, delta = 200, 1.0, 1e-6
    mech = subsample_aggregate_mechanism(eps, delta, k, tlap_support(2.0 / k, eps, delta), eta_b=0.004)
    # n independent tests: the test's own field at positions 0 .. n-1
    return (_Draws(lambda v, count, seed: mech.test(seed).field(np.full(count, v), 0), mech.tlap),
            agreement_sensitivity(k), mech)


def _block_draws():
    cal = expmech_calibration(1.0, 1e-6, 1000, 2000, 3, 1.0)
    mech = ExpMechMechanism.from_calibration(cal)

    def draw(value, count, seed):  # entries (i, j) of a k x k block at distinct global addresses
        i = np.arange(count)
        return mech.release(seed).field.at(i // 1000, i % 1000 + 1000, np.full(count, value))

    return _Draws(draw, mech.block_noise), cal.block_sensitivity * cal.float_factor, mech


def _projector_draws():
    """PrivPCA's projector release (lattice_top_k2 through PrivPCAMechanism.projector): a
    side x side signal block with k = side, so every one of its cells is released."""
    cal = privpca_calibration(1.0, 1e-6, 2, 0.05, 0.25, 3.0)
    side = int(math.ceil(math.sqrt(N)))
    mech = PrivPCAMechanism.from_calibration(cal, side)

    def draw(value, count, seed):
        u = np.full(side, math.sqrt(value))  # u_a u_b = value (to one rounding)
        return mech.projector(np.arange(side), u, side, side, seed)[2]

    return _Draws(draw, mech.noise), cal.sensitivity, mech


def _mean_draws():
    """The private mean's release (ClippedMeanMechanism.release) with n = 1, so the released
    value is the noised integer row sum times gamma: ``count`` coordinates whose sums all equal
    ``rint(value / gamma)``; neighbours' sums differ by the claimed 2C."""
    mech = ClippedMeanMechanism.calibrate(1.0, 1e-6, 1, N, 1.0)

    def draw(value, count, seed):
        units = mech.noise.lattice.to_units(np.full(count, value)).astype(np.int64)
        return mech.release(seed)(units)

    return _Draws(draw, mech.noise), mech.sensitivity, mech


CASES = {
    "mean": _mean_draws,
    "privpca/projector": _projector_draws,
    "second-moment/level": _level_draws,
    "second-moment/init-histogram": _histogram_draws,
    "wang-xu": lambda: _gaussian_baseline_draws("wang-xu"),
    "analyze-gauss": lambda: _gaussian_baseline_draws("analyze-gauss"),
    "subsample-aggregate/agreement": _agreement_draws,
    "expmech/block": _block_draws,
}
#: Statistic values on D: small, moderate and large against the noise (where float noise leaks).
VALUES = (3e-5, 0.37212, 1000.37)


@pytest.mark.statistical
@pytest.mark.parametrize("name", sorted(CASES))
def test_released_values_are_attainable_under_the_neighbour(name):
    sampler, sens, mech = CASES[name]()
    for value in VALUES:
        res = support_test(sampler, value, value + sens, N, random_state=17)
        assert res.n == N and res.outside_tail == 0, (name, value, res)
        law = next(iter(mech.laws().values())) if name != "subsample-aggregate/agreement" else mech.tlap
        if law.law != "bounded-laplace":
            assert res.impossible == 0, (name, value, res)
        else:  # the truncated law's designed tail (its delta): P(K > A_Z - Delta_Z) per draw
            tail_p = math.exp(-(law.bound - mech.sensitivity_units) / law.scale)
            assert res.impossible <= 10 + 3 * N * tail_p, (name, value, res)


@pytest.mark.statistical
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_old_inverse_cdf_path_at_the_same_scale_fails(name):
    """The twins (``value + inverse-CDF noise`` in float64, as the releases drew it before:
    :class:`~tests.audit_twins.InverseCdfSampler` at each mechanism's law and scale): a
    share of their outputs is impossible under the neighbour."""
    _, sens, mech = CASES[name]()
    law = mech.tlap if name == "subsample-aggregate/agreement" else next(iter(mech.laws().values()))
    scale = law.scale * law.lattice.gamma
    if law.law == "bounded-laplace":
        twin = InverseCdfSampler("bounded-laplace", scale, law.bound * law.lattice.gamma)
    else:
        twin = InverseCdfSampler(law.law, scale)
    fractions = [support_test(twin, v, v + sens, 2_000, random_state=3).fraction for v in VALUES]
    assert max(fractions) > 0.5, (name, fractions)


def test_every_support_keeps_positive_probability_under_the_exact_selection():
    """ExpMech's selection. The old float Gumbel keys (``-log(-log(u))`` of the
    53-bit grid ``u = (g + 1/2) 2**-53``) are finite only within [-3.62, 36.04] (the top grid
    point rounds to 1: key +inf), so a support trailing the best weighted score by more than
    39.7 can never win: impossible under D yet possible under a neighbour whose scores moved.
    The exact sampler's Gumbel is unbounded: a candidate trailing by 43 wins when its uniform is
    small enough. Shown with chosen main words (the sampler's exact decision from those words)."""
    grid = (np.array([0.0, 2.0**53 - 2]) + 0.5) * 2.0**-53  # the smallest and the largest u below 1
    keys = -np.log(-np.log(grid))
    old_range = float(keys[1] - keys[0])
    assert 39.6 < old_range < 39.7 and (2.0**53 - 0.5) * 2.0**-53 == 1.0  # the top point's key is +inf

    class _Chosen(GumbelMax):  # the same exact comparisons, main words chosen by the test
        def _words(self, start, count):
            words = np.full(count, np.uint64(1) << np.uint64(63), dtype=np.uint64)  # U = 1/2: G = 0.37
            words[np.arange(start, start + count) == 1] = np.uint64(1)  # U < 2**-63: G in [43.6, 44.4]
            return words

    sampler = _Chosen(NoiseSeed(0, seeded=True), "test/selection", 1.0)
    scores = np.array([45.0, 2.0, 0.0])  # candidate 1 trails the best by 43 > the old range
    assert sampler.best(scores, 0).rank == 1
    # and with the best's lead above the largest Gumbel its words allow, the best wins
    assert sampler.best(np.array([100.0, 2.0, 0.0]), 0).rank == 0


def test_exact_selection_scores_move_by_at_most_half_epsilon_on_the_lattice():
    """The weight pays for the score lattice and the rounding of weight * score: lattice scores
    of neighbours (scores within the calibration's sensitivity, at the public bound S_max) differ
    by at most epsilon_sel / 2."""
    cal = expmech_calibration(1.0, 1e-6, 1000, 50, 3, 1.0)
    mech = ExpMechMechanism.from_calibration(cal)
    sel = mech.selection(NoiseSeed(0, seeded=True))
    rng = np.random.default_rng(0)
    s = rng.uniform(0, mech.score_bound, 200_000)
    s[:3] = (0.0, mech.score_bound, mech.score_bound - cal.score_sensitivity_fl)
    sp = np.clip(s + cal.score_sensitivity_fl * rng.choice([-1.0, 1.0], s.size), 0.0, mech.score_bound)
    gap = np.abs(sel.lattice_scores(s) - sel.lattice_scores(sp)).max()
    assert gap <= cal.selection_epsilon / 2 * (1 + 1e-12)
    assert mech.selection_epsilon <= cal.selection_epsilon * (1 + 1e-12)
