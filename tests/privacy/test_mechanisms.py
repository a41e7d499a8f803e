"""The mechanism objects of dpdist.privacy.mechanisms: what they claim,
what they draw, and their twins. Expected values come from the calibrations and the lattice's
definitions, never from the mechanism under test."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

import dpdist
from dpdist.privacy.accounting import release_guarantee
from dpdist.privacy.events import ComposedEvent, GaussianEvent
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.mechanisms.privcov.calibration import privcov_calibration
from dpdist.privacy.mechanisms import (
    FriendlyTestMechanism,
    PrivCovMechanism,
    PrivNormMechanism,
    PrivPCAMechanism,
)
from dpdist.privacy.noise.streams import NoiseSeed
from dpdist.privacy.mechanisms.privpca.calibration import (
    friendly_test_calibration,
    privnorm_calibration,
    privpca_calibration,
)
from tests.audit_twins import scaled_twin


def _privcov(k=2, d=10):
    return PrivCovMechanism.from_calibration(privcov_calibration(1.0, 1e-5, 1000, d, k, 1.0))


def _tests(eps=1.0, delta=1e-6, m=100):
    return FriendlyTestMechanism.from_calibration(friendly_test_calibration(eps, delta, m), "norm")


def _norm(eps=1.0, delta=1e-6):
    return PrivNormMechanism.from_calibration(privnorm_calibration(eps, delta, 3, 0.1))


# ---------------------------------------------------------------- claims against calibrations
@pytest.mark.parametrize("eps", [0.1, 1.0, 30.0])
def test_friendly_tests_claim_at_most_a_third_of_the_stage_budget_each(eps):
    """Lemma 8: each test is (eps/3, delta/3)-DP; on the lattice the ratios are only better
    (module docstring of dpdist.privacy.mechanisms.privpca.mechanism)."""
    delta = 1e-6
    mech = _tests(eps, delta)
    count, weight = mech.event().events
    for ev in (count, weight):
        assert 0 < ev.epsilon <= eps / 3 and 0 < ev.delta <= delta / 3
    # the noise actually added is the calibration's scale, inflated by the lattice by at most
    # gamma per unit of sensitivity (Delta_Z gamma <= Delta + gamma), and the bound likewise
    cal = mech.calibration
    for role, scale, bound, sens in (("count", cal.count_scale, cal.count_bound, cal.count_sensitivity),
                                     ("weight", cal.weight_scale, cal.weight_bound, cal.weight_sensitivity)):
        law = mech.laws()[role]
        g = law.lattice.gamma
        assert scale <= mech.noise_scales()[role] <= scale * (1 + g / sens) * (1 + 1e-15)
        assert bound <= law.bound * g <= bound * (1 + g / sens) * (1 + 1e-15) + g
        # the residual the release notes state: the bounded sampler's exhaustion (q <= delta/12)
        assert law.exhaustion_delta() <= 2.0**-1000 + (delta / 4) ** 32


def test_a_passing_test_certifies_the_statistic_whatever_the_noise():
    """Lemma 9 needs stat >= 0.8 m from a pass: with the largest noise (K = A) a statistic
    just below 0.8 m still fails, and one far above passes with the smallest (K = -A)."""
    mech = _tests(m=100)
    for role in ("count", "weight"):
        noise = mech.laws()[role]
        lat = noise.lattice
        below = 80.0 - lat.gamma  # 0.8 m = 80
        assert not mech.passes(role, lat.from_units(lat.to_units(below) + noise.bound))
        above = 80.0 + 2 * noise.bound * lat.gamma + 2 * lat.gamma
        assert mech.passes(role, lat.from_units(lat.to_units(above) - noise.bound))
        # the test returns a bit, nothing else
        out = mech.test(role, 50.0, NoiseSeed(1, True))
        assert out is False and mech.test(role, 1e6, NoiseSeed(1, True)) is True


def test_privnorm_release_is_a_lattice_point_with_the_gaussian_event():
    mech = _norm()
    cal = mech.calibration
    g = mech.noise.lattice.gamma
    assert mech.sensitivity_units == math.floor(cal.sensitivity / g) + 1
    assert mech.event() == GaussianEvent(mech.noise.scale / mech.sensitivity_units)
    assert mech.event().noise_multiplier >= cal.sigma / cal.sensitivity
    out = [mech.release(2.5, NoiseSeed(s, True)) for s in range(50)]
    assert mech.noise.lattice.contains(np.array(out)).all()
    assert mech.release(2.5, NoiseSeed(7, True)) == mech.release(2.5, NoiseSeed(7, True))
    assert np.std(out) == pytest.approx(cal.sigma, rel=0.5)  # 50 draws: sd within ~4 standard errors


def test_a_stage_accounts_within_its_budget():
    """Tests + release of one stage compose (mixed rule: the Gaussian converted at the delta
    the tests leave) to at most the stage's (epsilon, delta)."""
    for eps, delta in [(0.3, 1e-6), (1.0, 1e-5), (12.0, 1e-3)]:
        tests, norm = _tests(eps, delta), _norm(eps, delta)
        got = release_guarantee([tests.event(), norm.event()], delta=delta)
        assert got.epsilon <= eps
        assert release_guarantee([tests.event(), norm.event()], budget=ApproxDP(eps, delta)) == ApproxDP(eps, delta)


def test_privcov_mechanism_claims_its_calibration():
    mech = _privcov()
    cal = mech.calibration
    assert mech.row_epsilon <= cal.epsilon_row
    assert release_guarantee([mech.event()], delta=cal.delta).epsilon <= cal.epsilon
    g = mech.noise.lattice.gamma
    sens = cal.sensitivity * cal.float_factor
    assert mech.sensitivity_units == math.floor(sens / g) + 1
    assert cal.laplace_scale <= mech.noise_scales()["release"] <= cal.laplace_scale * (1 + g / sens) * (1 + 1e-15)
    # the scores' public bound keeps every score an integer below 2**53
    assert mech.score_bound / g <= 2.0**51


# ---------------------------------------------------------------- twins, pickling, descriptions
@pytest.mark.parametrize("make", [_privcov, _tests, _norm])
def test_twins_halve_every_law_and_keep_the_claim(make):
    mech = make()
    twin = scaled_twin(mech, 0.5)
    assert twin.event() == mech.event()
    for role, law in mech.laws().items():
        assert twin.laws()[role].scale == 0.5 * law.scale and twin.laws()[role].lattice == law.lattice
        if law.law == "bounded-laplace":
            assert twin.laws()[role].bound == math.ceil(0.5 * law.bound)
    back = pickle.loads(pickle.dumps(twin))
    assert back.event() == mech.event() and back.laws() == twin.laws()
    assert pickle.loads(pickle.dumps(mech)) == mech
    desc = mech.describe()
    assert desc["purposes"] == mech.purposes() and set(desc["noise"]) == set(mech.laws())


def test_privpca_mechanism_is_on_a_lattice_that_pays_the_rounding_of_d_squared_entries():
    cal = privpca_calibration(1.0, 1e-6, 2, 0.05, 0.25, 3.0)
    d = 4
    mech = PrivPCAMechanism.from_calibration(cal, d)
    noise, gamma = mech.noise, mech.noise.lattice.gamma
    # Delta_Z = (Delta + 2**-51) / gamma + sqrt(d^2), rounded up by at most two ulps
    want = (cal.sensitivity + 2.0**-51) / gamma + d
    assert want <= mech.sensitivity_units <= want * (1 + 1e-15)
    # the calibration's noise multiplier is kept, so the event is the calibration's
    assert mech.event().noise_multiplier == pytest.approx(cal.sigma / cal.sensitivity, rel=1e-15)
    assert mech.event().noise_multiplier >= cal.sigma / cal.sensitivity
    assert noise.law == "gaussian" and 2.0**28 <= noise.scale <= 2.0**40
    twin = scaled_twin(mech, 0.5)
    assert twin.noise.scale == 0.5 * noise.scale and twin.event() == mech.event()
    r, c, v = mech.projector(np.array([0]), np.array([1.0]), d, 2, NoiseSeed(3, True))
    assert len(v) == 4 and np.all(noise.lattice.contains(v))
    with pytest.raises(ValueError, match="calibrated for d = 4"):
        mech.projector(np.array([0]), np.array([1.0]), 5, 2, NoiseSeed(3, True))


def test_privpca_lattice_gets_finer_with_d_so_rounding_stays_below_its_share():
    cal = privpca_calibration(1.0, 1e-6, 2, 0.05, 0.25, 3.0)
    for d in (10, 10_000, 1_000_000):
        mech = PrivPCAMechanism.from_calibration(cal, d)
        gamma = mech.noise.lattice.gamma
        # the rounding term d gamma costs at most 2**-10 of the sensitivity, or s hits 2**39
        assert d * gamma <= 2.0**-10 * cal.sensitivity or mech.noise.scale >= 2.0**38
        assert mech.noise.scale <= 2.0**40


def test_purposes_are_distinct_across_mechanisms():
    keys = [p for m in (_privcov(), _tests(), _norm()) for p in m.purposes().values()]
    keys += list(PrivPCAMechanism.from_calibration(privpca_calibration(1.0, 1e-6, 2, 0.05, 0.25, 3.0), 8).purposes().values())
    keys += [p for p in FriendlyTestMechanism.from_calibration(friendly_test_calibration(1.0, 1e-6, 100), "pca")
             .purposes().values()]
    # PrivCov's release and selection share one law but not one purpose; 2 + 2 + 1 + 1 + 2 roles
    assert len(keys) == len(set(keys)) == 8


# ---------------------------------------------------------------- the releases users get
def test_spectral_norm_release_is_on_its_mechanisms_lattice_and_records_its_events():
    from tests.estimator_zoo import spike

    est = dpdist.SpectralNorm(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02, random_state=4,
                              scheduler="synchronous")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpdist.PrivacyWarning)
        est.fit(spike())
    rel = est.release_
    labels = [label for label, _ in rel.events]
    assert labels == ["mean", "norm/tests", "norm/release"]  # the private mean first (centring)
    assert isinstance(rel.events[1][1], ComposedEvent)
    gamma = rel.mechanisms[2]["noise"]["release"]["lattice"]["gamma"]
    lam = rel.values["norm"]
    assert lam / gamma == math.floor(lam / gamma)  # a lattice point
    assert rel.privacy == ApproxDP(50.0, 1e-3)
    assert rel.accountant().approx_dp(1e-3, external=False).epsilon <= 50.0
    assert set(rel.values["tests"]["norm"]) == {"count_passed", "count_threshold", "weight_passed", "weight_threshold"}


def test_sparse_covariance_release_is_on_its_mechanisms_lattice():
    X = np.random.default_rng(1).standard_normal((400, 8))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpdist.PrivacyWarning)
        rel = dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, random_state=2, scheduler="synchronous").fit(X).release_
    gamma = rel.mechanisms[0]["noise"]["release"]["lattice"]["gamma"]
    vals = np.concatenate([rel.values["diagonal"], rel.values["selected_values"].ravel()])
    vals = vals[np.isfinite(vals)]
    assert vals.size >= 8 and np.all(np.floor(vals / gamma) == vals / gamma)
