"""The private mean and a Gaussian second stage compose exactly (Gaussian DP), not by splitting
(epsilon, delta): the two releases together spend the whole budget, and no more."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import optimize

import dpdist
from dpdist.algorithms._centering import Centering, compose_stages
from dpdist.exceptions import DpdistError
from dpdist.privacy.events import GaussianEvent
from dpdist.privacy.budget import ApproxDP
from tests.privacy.balle_wang import bw_delta

SYNC = "synchronous"
EPS, DELTA = 1.0, 1e-6


def _mu(eps, delta):
    """The largest mu with mu-GDP within (eps, delta): 1/sigma of Balle-Wang at sensitivity 1,
    solved here."""
    return 1.0 / optimize.brentq(lambda s: bw_delta(1.0, eps, s) - delta, 1e-3, 1e4, xtol=1e-15, rtol=1e-14)


def _data(n=300, d=3):
    return np.random.default_rng(11).standard_normal((n, d)) + 2.0


def _fit(cls, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded and vacuous at this size, on purpose
        return cls(EPS, DELTA, random_state=0, scheduler=SYNC, **kw).fit(_data())


def _multipliers(est):
    events = dict(est.release_.events)
    return events["mean"].noise_multiplier, events["gaussian"].noise_multiplier


def _estimators():
    from dpdist.baselines import AnalyzeGauss, GaussianCovariance

    return [(GaussianCovariance, dict(clip=3.0, mean_clip=6.0)), (AnalyzeGauss, dict(row_norm=5.0, mean_clip=6.0))]


@pytest.mark.parametrize("cls,kw", _estimators(), ids=["wang-xu", "analyze-gauss"])
def test_the_mean_and_the_release_spend_the_whole_budget_in_gdp(cls, kw):
    est = _fit(cls, mean_fraction=0.25, **kw)
    m_mean, m_rel = _multipliers(est)
    mu = math.hypot(1 / m_mean, 1 / m_rel)  # Gaussian mechanisms compose exactly (DRS19 Cor. 3.3)
    # the composition is mu-GDP with mu the largest within (1, 1e-6): all of the budget, no more
    assert bw_delta(1.0, EPS, 1 / mu) <= DELTA
    assert bw_delta(1.0, EPS, (1 / mu) * (1 - 1e-6)) > DELTA
    assert mu == pytest.approx(_mu(EPS, DELTA), rel=1e-8)
    # the mean has mean_fraction of mu^2
    assert (1 / m_mean) ** 2 / mu**2 == pytest.approx(0.25, rel=1e-8)
    rec = est.release_.parameters["centering"]
    assert rec["composition"] == "gdp"
    # the mean's recorded budget is its stand-alone guarantee at the full delta
    assert rec["mean_budget"]["delta"] == DELTA
    assert bw_delta(1.0, rec["mean_budget"]["epsilon"], m_mean) == pytest.approx(DELTA, rel=1e-6)
    assert est.privacy_ == ApproxDP(EPS, DELTA)


def test_gdp_shares_are_less_noise_than_splitting_epsilon_and_delta():
    gdp = Centering("private-mean", mean_fraction=0.1).split(EPS, DELTA, "gdp")
    basic = Centering("private-mean", mean_fraction=0.1).split(EPS, DELTA, "basic")
    assert basic == (ApproxDP(0.1, 1e-7), ApproxDP(0.9, 9e-7))
    # each share is a stand-alone (epsilon_i, delta): mu_i^2 add up to mu^2 with mu_1^2 = 0.1 mu^2
    mus = [_mu(share.epsilon, share.delta) for share in gdp]
    assert mus[0] ** 2 + mus[1] ** 2 == pytest.approx(_mu(EPS, DELTA) ** 2, rel=1e-7)
    assert mus[0] ** 2 == pytest.approx(0.1 * _mu(EPS, DELTA) ** 2, rel=1e-7)
    # both stages get more mu (less noise) than under the (epsilon, delta) split
    assert mus[0] > 3 * _mu(0.1, 1e-7) and mus[1] > 1.05 * _mu(0.9, 9e-7)


def test_gdp_stages_are_refused_when_together_they_exceed_the_budget():
    # each stage within its stand-alone (0.9, 1e-6), but together above (1, 1e-6)
    m = 1 / _mu(0.9, DELTA) * (1 + 1e-6)
    share = ApproxDP(0.9, DELTA)
    with pytest.raises(DpdistError, match="above the budget"):
        compose_stages(ApproxDP(EPS, DELTA), [([GaussianEvent(m)], share), ([GaussianEvent(m)], share)], "gdp")
    # the same two stages at half the budget's mu^2 each pass
    m = math.sqrt(2) / _mu(EPS, DELTA) * (1 + 1e-9)
    half = ApproxDP(0.7, DELTA)
    assert compose_stages(ApproxDP(EPS, DELTA), [([GaussianEvent(m)], half), ([GaussianEvent(m)], half)],
                          "gdp") == ApproxDP(EPS, DELTA)


def test_expmech_mean_joins_the_block_in_one_gaussian_mechanism():
    # the selection by basic composition; the mean and the block one GDP mechanism at the rest
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = dpdist.ExpMechSparsePCA(2, EPS, DELTA, sigma=1.0, mean_clip=6.0, mean_fraction=0.2, random_state=0,
                                      scheduler=SYNC).fit(_data(300, 5))
    events = dict(est.release_.events)
    m_mean = events["mean"].noise_multiplier
    selection, block = events["ExpMechPCA selection and block"].events
    eps_sel = selection.epsilon
    assert selection.delta == 0.0 and 0.1 < eps_sel < 0.9
    mu = math.hypot(1 / m_mean, 1 / block.noise_multiplier)
    assert bw_delta(1.0, EPS - eps_sel, 1 / mu) <= DELTA
    assert bw_delta(1.0, EPS - eps_sel, (1 / mu) * (1 - 1e-6)) > DELTA  # all of the rest, no more
    assert (1 / m_mean) ** 2 / mu**2 == pytest.approx(0.2, rel=1e-8)
    assert est.release_.parameters["centering"]["composition"] == "mixed"
    assert est.privacy_ == ApproxDP(EPS, DELTA)


@pytest.mark.parametrize("eps,delta", [(1e-6, 1e-6), (0.05, 0.1)])
def test_a_share_zero_dp_alone_falls_back_to_splitting_epsilon_and_delta(eps, delta):
    # the mean's GDP share would be (0, delta)-DP alone: no stand-alone epsilon calibrates it, so
    # the split is (f epsilon, f delta) / the rest, as basic composition, and every estimator fits
    from dpdist.baselines import AnalyzeGauss, GaussianCovariance

    centering = Centering("private-mean", mean_fraction=0.1)
    for kind in ("gdp", "zcdp"):
        assert centering.composition(eps, delta, kind) == "basic"
        assert centering.split(eps, delta, kind) == (ApproxDP(0.1 * eps, 0.1 * delta), ApproxDP(0.9 * eps, 0.9 * delta))
    X = _data(200, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for est in (GaussianCovariance(eps, delta, clip=3.0, random_state=0, scheduler=SYNC),
                    AnalyzeGauss(eps, delta, row_norm=5.0, random_state=0, scheduler=SYNC),
                    dpdist.SparseCovariance(2, eps, delta, clip=3.0, random_state=0, scheduler=SYNC),
                    dpdist.ExpMechSparsePCA(2, eps, delta, sigma=1.0, random_state=0, scheduler=SYNC)):
            rel = est.fit(X).release_
            assert rel.privacy == ApproxDP(eps, delta)
            assert rel.parameters["centering"]["composition"] == "basic"
            assert rel.parameters["centering"]["mean_budget"] == {"epsilon": 0.1 * eps, "delta": 0.1 * delta}
