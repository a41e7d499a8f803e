"""Privacy events and the accountant: JSON round trips, our rules, dp_accounting's."""

from __future__ import annotations

import math

import pytest

from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import (
    Accountant,
    UnsupportedEventError,
    advanced_composition,
    basic_composition,
    gaussian_epsilon,
    pure_epsilon,
    release_guarantee,
    zcdp_rho,
)
from dpdist.privacy.events import (
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    NonPrivateEvent,
    SelfComposedEvent,
    ZCDPEvent,
    event_from_dict,
)
from dpdist.privacy.mechanisms.gaussian import analytic_gaussian_sigma
from dpdist.privacy.mechanisms.privcov.calibration import privcov_calibration
from dpdist.privacy.mechanisms.second_moment import level_schedule
from dpdist.privacy.zcdp import ZCDP, cks20_epsilon

ALL = ComposedEvent(
    (
        NoOpEvent(),
        LaplaceEvent(2.0),
        GaussianEvent(3.0),
        DiscreteLaplaceEvent(10.0, 2),
        DiscreteGaussianEvent(4.0, 1.5),
        ZCDPEvent(0.1),
        EpsilonDeltaEvent(0.5, 1e-9),
        SelfComposedEvent(ComposedEvent((LaplaceEvent(5.0), NonPrivateEvent())), 7),
    )
)


def test_events_round_trip_through_json():
    assert event_from_dict(ALL.to_dict()) == ALL
    assert event_from_dict(ALL.to_json()) == ALL
    assert hash(ALL) == hash(event_from_dict(ALL.to_json()))
    with pytest.raises(ValidationError, match="not a privacy event"):
        event_from_dict({"type": "mystery"})


def test_bad_event_parameters_are_refused():
    for bad in (lambda: LaplaceEvent(0), lambda: GaussianEvent(-1.0), lambda: GaussianEvent(True),
                lambda: DiscreteLaplaceEvent(1.0, 1.5), lambda: EpsilonDeltaEvent(1.0, 1.0),
                lambda: SelfComposedEvent(LaplaceEvent(1.0), -1), lambda: ComposedEvent((1.0,)),
                lambda: ZCDPEvent(float("nan"))):
        with pytest.raises(ValidationError):
            bad()


def test_our_rules():
    assert pure_epsilon(SelfComposedEvent(LaplaceEvent(4.0), 8)) == 2.0
    assert pure_epsilon(DiscreteLaplaceEvent(10.0, 3)) == 0.3
    assert pure_epsilon(GaussianEvent(1.0)) is None
    # Gaussian 1/(2 m^2); discrete Gaussian Delta^2/(2 sigma^2); pure eps -> eps^2/2 (BS16 1.4)
    ev = ComposedEvent((GaussianEvent(2.0), DiscreteGaussianEvent(3.0, 1.5), LaplaceEvent(2.0), ZCDPEvent(0.01)))
    assert zcdp_rho(ev) == pytest.approx(1 / 8 + 1.5**2 / 18 + 0.25 / 2 + 0.01, rel=1e-15)
    assert zcdp_rho(EpsilonDeltaEvent(1.0, 1e-6)) is None
    b = basic_composition(ComposedEvent((EpsilonDeltaEvent(0.5, 1e-6), LaplaceEvent(4.0), SelfComposedEvent(EpsilonDeltaEvent(0.1, 1e-7), 3))))
    assert (b.epsilon, b.delta) == pytest.approx((0.5 + 0.25 + 0.3, 1e-6 + 3e-7), rel=1e-15)
    with pytest.raises(UnsupportedEventError):
        basic_composition(GaussianEvent(1.0))


@pytest.mark.parametrize("epsilon,delta,d", [(1.0, 1e-6, 50), (0.5, 1e-5, 400), (3.0, 1e-6, 2000)])
def test_privcov_calibration_is_reproduced_by_the_accountant(epsilon, delta, d):
    """PrivCov: d per-row (eps_row, delta_row) releases, advanced composition with slack delta/2
    (or basic when smaller): the accountant gives the calibration's numbers."""
    cal = privcov_calibration(epsilon, delta, 10_000, d, 5, 1.0)
    row = EpsilonDeltaEvent(cal.epsilon_row, cal.delta_row)
    ev = SelfComposedEvent(row, d)
    adv, basic = advanced_composition(ev, delta / 2), basic_composition(ev)
    got = adv if adv.epsilon <= basic.epsilon else basic
    assert got.epsilon == pytest.approx(cal.composed_epsilon, rel=1e-12)
    assert got.delta == pytest.approx(cal.composed_delta, rel=1e-12)
    assert got.epsilon <= epsilon * (1 + 1e-12) and got.delta <= delta * (1 + 1e-12)


def test_second_moment_levels_compose_to_rho():
    sched = level_schedule(5000, 20, 0.5, m=3, radius=2.0)
    # each level's noise is calibrated for its sensitivity times the float factor kappa(n)
    events = ComposedEvent(tuple(GaussianEvent(s / (d * sched.float_factor))
                                 for s, d in zip(sched.sigmas, sched.sensitivities)))
    assert zcdp_rho(events) == pytest.approx(sched.rho, rel=1e-12)
    acc = Accountant().compose(events)
    assert acc.rho() == pytest.approx(sched.privacy.rho, rel=1e-12)
    for method in ("bun-steinke", "cks20"):
        assert acc.get_epsilon(1e-6, method=f"zcdp-{method}") == pytest.approx(
            ZCDP(sched.rho).to_approx_dp(1e-6, method=method), rel=1e-9
        )


def test_dp_accounting_reference_values():
    """dp_accounting's RDP conversion of rho-zCDP agrees with our CKS20 conversion; its PLD of
    the Gaussian at the analytic sigma (Balle-Wang 2018, exact) returns that epsilon; its PLD
    of a Laplace mechanism is the pure epsilon."""
    pytest.importorskip("dp_accounting")
    acc = Accountant().compose(ZCDPEvent(0.5))
    assert acc.get_epsilon(1e-6, method="rdp") == pytest.approx(cks20_epsilon(0.5, 1e-6), rel=1e-4)
    sigma = analytic_gaussian_sigma(1.0, 1.0, 1e-5)
    pld = Accountant().compose(GaussianEvent(sigma)).get_epsilon(1e-5, method="pld")
    assert 1.0 - 1e-3 <= pld <= 1.0 + 1e-2  # PLD is pessimistic, within its discretisation
    lap = Accountant().compose(LaplaceEvent(2.0)).get_epsilon(1e-9, method="pld")
    assert 0.49 <= lap <= 0.5 + 1e-3


def test_accountant_picks_the_tightest_valid_rule_and_refuses_what_no_rule_covers():
    acc = Accountant().compose(GaussianEvent(2.0), count=10)
    found = acc.epsilons(1e-6)
    assert set(found) >= {"zcdp-cks20", "zcdp-bun-steinke", "pld", "rdp"}
    assert acc.get_epsilon(1e-6) == min(found.values())
    assert found["zcdp-cks20"] < found["zcdp-bun-steinke"]
    assert Accountant().compose(NonPrivateEvent()).get_epsilon(1e-6) == math.inf
    # a Gaussian and an (epsilon, delta) part: mixed composition (basic over the two groups,
    # the Gaussian converted at the delta left); an (epsilon, delta) part whose delta exceeds
    # the target is covered by no rule
    mixed = Accountant().compose(GaussianEvent(1.0)).compose(EpsilonDeltaEvent(0.1, 1e-7))
    assert mixed.get_epsilon(1e-6, external=False) == pytest.approx(0.1 + gaussian_epsilon(1.0, 1e-6 - 1e-7), rel=1e-12)
    with pytest.raises(UnsupportedEventError):
        Accountant().compose(GaussianEvent(1.0)).compose(EpsilonDeltaEvent(0.1, 1e-5)).get_epsilon(1e-6)
    with pytest.raises(ValidationError, match="method"):
        acc.get_epsilon(1e-6, method="magic")
    pure = Accountant().compose(LaplaceEvent(4.0)).compose(EpsilonDeltaEvent(0.25))
    assert pure.approx_dp(1e-6).epsilon == 0.5


def test_release_guarantee_states_the_charged_budget_only_when_the_events_fit_in_it():
    """A release states the budget charged before the data were read; the accountant must
    certify its events within it (Laplace(4) + (0.25, 0): pure 0.5)."""
    from dpdist.exceptions import DpdistError
    from dpdist.privacy.budget import ApproxDP

    events = [LaplaceEvent(4.0), EpsilonDeltaEvent(0.25)]
    assert release_guarantee(events, delta=1e-6).epsilon == 0.5
    assert release_guarantee(events, budget=ApproxDP(0.5, 1e-6)) == ApproxDP(0.5, 1e-6)
    with pytest.raises(DpdistError, match="above the budget"):
        release_guarantee(events, budget=ApproxDP(0.49, 1e-6))
    assert release_guarantee([GaussianEvent(1.0)], budget=ZCDP(0.5)) == ZCDP(0.5)
    with pytest.raises(DpdistError, match="above the budget"):
        release_guarantee([GaussianEvent(1.0)], budget=ZCDP(0.49))


@pytest.mark.parametrize("eps,delta", [(3e-8, 1e-12), (1e-6, 1e-7), (0.01, 1e-10)])
def test_gaussian_epsilon_is_accurate_at_tiny_epsilon(eps, delta):
    # the exact profile of mu-GDP at a tiny mu, against 60-digit arithmetic: the accountant's
    # epsilon is at least the exact one and within a part in 1e8 of it
    import mpmath

    from dpdist.privacy.accounting import gaussian_epsilon
    from dpdist.privacy.mechanisms.gaussian import analytic_gaussian_sigma

    mpmath.mp.dps = 60

    def exact_delta(mu, e):
        mu, e = mpmath.mpf(mu), mpmath.mpf(e)
        return mpmath.ncdf(-e / mu + mu / 2) - mpmath.e**e * mpmath.ncdf(-e / mu - mu / 2)

    mu = 1.0 / analytic_gaussian_sigma(1.0, eps, delta)  # a mu whose epsilon is near eps
    lo, hi = mpmath.mpf(0), mpmath.mpf(10 * eps)  # the exact epsilon at delta, by bisection
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if exact_delta(mu, mid) <= delta else (mid, hi)
    got = gaussian_epsilon(mu, delta)
    assert got >= hi
    assert got == pytest.approx(float(hi), rel=1e-8)
