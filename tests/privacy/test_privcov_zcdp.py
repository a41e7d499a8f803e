"""PrivCov with the zCDP analysis (selection="laplace"): the calibration, its split, its event."""

from __future__ import annotations

import math

import pytest

from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import release_guarantee
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.mechanisms.privcov.calibration import privcov_calibration
from dpdist.privacy.mechanisms.privcov.zcdp_calibration import privcov_zcdp_calibration
from dpdist.algorithms.sparse_covariance.bounds import privcov_zcdp_error_bound
from dpdist.privacy.mechanisms.privcov.mechanism import PrivCovZCDPMechanism
from dpdist.privacy.zcdp import bun_steinke_epsilon, cks20_delta, cks20_epsilon, cks20_rho
from tests.audit_twins import scaled_twin


@pytest.mark.parametrize("eps, delta", [(1.0, 1e-6), (0.1, 1e-9), (5.0, 1e-3), (0.5, 0.2)])
def test_cks20_rho_is_the_largest_rho_converting_to_epsilon(eps, delta):
    rho = cks20_rho(eps, delta)
    assert cks20_epsilon(rho, delta) <= eps
    # 1e-6 relative more rho converts above epsilon: the inversion is tight
    assert cks20_delta(rho * (1 + 1e-6), eps) > delta
    # and it beats the Bun-Steinke inversion (rho + 2 sqrt(rho log(1/delta)) = eps)
    rho_bs = (math.sqrt(math.log(1 / delta) + eps) - math.sqrt(math.log(1 / delta))) ** 2
    assert bun_steinke_epsilon(rho_bs, delta) == pytest.approx(eps)
    assert rho > rho_bs


def test_laplace_calibration_by_hand():
    eps, delta, n, d, k, R = 1.0, 1e-6, 10**6, 1000, 20, 1.5
    cal = privcov_zcdp_calibration(eps, delta, n, d, k, R, beta=0.1)
    sens = cal.sensitivity * cal.float_factor
    assert cal.sensitivity == 2 * R**2 / n and cal.k_released == 21
    l1, l2 = math.log(6 * d * d / 0.1), math.log(12 * d / 0.1)
    ratio = (12 * k * k * l1 / math.sqrt(21 * (k + 2) * l2)) ** (2 / 3)
    assert cal.selection_share == pytest.approx(ratio / (1 + ratio), rel=1e-12)
    rho_sel = cal.selection_share * cal.rho
    assert cal.laplace_scale == pytest.approx(2 * k * sens / math.sqrt(2 * rho_sel / d), rel=1e-12)
    assert cal.gaussian_sigma == pytest.approx(math.sqrt(d * 21) * sens / math.sqrt(2 * (cal.rho - rho_sel)), rel=1e-12)
    # the numbers of docs/privacy/privcov.md, in units of the entry sensitivity
    paper = privcov_calibration(eps, delta, n, d, k, R)
    assert paper.laplace_scale / sens == pytest.approx(41564, rel=1e-4)
    assert cal.laplace_scale / sens == pytest.approx(5757, rel=1e-3)
    assert cal.gaussian_sigma / sens == pytest.approx(6949, rel=1e-3)


def test_the_split_minimises_the_error_bound():
    """Moving the share of rho either way raises the bound of privcov_zcdp_error_bound."""
    import dataclasses

    cal = privcov_zcdp_calibration(1.0, 1e-6, 10**7, 500, 10, 3.0, beta=0.1)
    best = privcov_zcdp_error_bound(cal, 1.0, 0.1)["error_bound"]
    sens = cal.sensitivity * cal.float_factor
    for f in (cal.selection_share * 0.9, cal.selection_share + 0.5 * (1 - cal.selection_share), 0.5):
        b = 2 * cal.k * sens / math.sqrt(2 * f * cal.rho / cal.n_features)
        s = math.sqrt(cal.release_coordinates) * sens / math.sqrt(2 * (1 - f) * cal.rho)
        other = dataclasses.replace(cal, selection_share=f, laplace_scale=b, gaussian_sigma=s)
        assert privcov_zcdp_error_bound(other, 1.0, 0.1)["error_bound"] > best


def test_k_equal_d_spends_nothing_on_the_selection():
    cal = privcov_zcdp_calibration(1.0, 1e-6, 1000, 6, 6, 1.0)
    assert cal.selection_share == 0 and cal.selection_coefficient == 0 and cal.rho_release == cal.rho
    mech = PrivCovZCDPMechanism.from_calibration(cal)
    assert [e.TYPE for e in mech.event().events] == ["gaussian"]


@pytest.mark.parametrize("eps, delta, n, d, k", [(1.0, 1e-6, 10**6, 1000, 20), (0.3, 1e-8, 5000, 40, 3),
                                                   (8.0, 1e-3, 300, 10, 9), (1.0, 1e-5, 400, 6, 6)])
def test_the_mechanism_event_accounts_to_at_most_the_budget(eps, delta, n, d, k):
    """The event of what runs on the lattices (per-row pure 2k Delta_Z/s, one Gaussian of
    multiplier s_r/Delta_Z2) converts to at most (eps, delta), and to more than 0.99 eps at
    large d (the calibration does not waste the budget)."""
    mech = PrivCovZCDPMechanism.from_calibration(privcov_zcdp_calibration(eps, delta, n, d, k, 2.0))
    got = release_guarantee([mech.event()], delta=delta)
    assert got.epsilon <= eps
    assert release_guarantee([mech.event()], budget=ApproxDP(eps, delta)) == ApproxDP(eps, delta)
    if d >= 1000:
        assert got.epsilon > 0.99 * eps
    # the lattice versions are never below the calibration's noise
    cal = mech.calibration
    assert mech.row_epsilon <= cal.selection_row_epsilon * (1 + 1e-12)
    assert mech.release_multiplier >= cal.gaussian_sigma / cal.release_sensitivity
    assert mech.noise_scales()["select"] >= cal.laplace_scale
    assert mech.noise_scales()["release"] >= cal.gaussian_sigma


def test_the_twin_keeps_the_claim_with_half_the_noise():
    mech = PrivCovZCDPMechanism.from_calibration(privcov_zcdp_calibration(1.0, 1e-6, 10**4, 50, 4, 1.0))
    twin = scaled_twin(mech, 0.5)
    assert twin.event() == mech.event()
    for role, scale in mech.noise_scales().items():
        assert twin.noise_scales()[role] == pytest.approx(scale / 2)


def test_error_bound_by_hand():
    cal = privcov_zcdp_calibration(1.0, 1e-6, 10**8, 200, 5, 4.0, beta=0.05)
    got = privcov_zcdp_error_bound(cal, 1.3, 0.05)
    t = math.log(6 * 200 / 0.05)
    lam_samp = 4.0 * 1.3**2 * (math.sqrt(t / 1e8) + t / 1e8)
    lam_priv = cal.laplace_scale * math.log(6 * 200**2 / 0.05)
    lam_rel = cal.gaussian_sigma * math.sqrt(7 * math.log(12 * 200 / 0.05))
    assert got["error_bound"] == pytest.approx(30 * (lam_samp + lam_priv) + lam_rel, rel=1e-12)
    assert got["relative_error_bound"] == pytest.approx(got["error_bound"] / 1.69, rel=1e-12)


def test_bad_parameters_are_refused():
    with pytest.raises(ValidationError, match="k must satisfy"):
        privcov_zcdp_calibration(1.0, 1e-6, 100, 5, 6, 1.0)
    with pytest.raises(ValidationError, match="beta"):
        privcov_zcdp_calibration(1.0, 1e-6, 100, 5, 2, 1.0, beta=1.5)
    with pytest.raises(ValidationError, match="epsilon"):
        privcov_zcdp_calibration(0.0, 1e-6, 100, 5, 2, 1.0)
