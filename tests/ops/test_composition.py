"""The ledger's composition rule as a function: charges without events get exactly the verdict
and amount of the rule that counts stated costs (a copy of it here is the oracle); events can
only lower what a set needs, also against a rho total; the check is monotone."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest

from dpdist.exceptions import ValidationError
from dpdist.ops.composition import Charge, spent
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.events import BoundedRangeEvent, GaussianEvent, LaplaceEvent, NonPrivateEvent
from dpdist.privacy.zcdp import ZCDP, cks20_epsilon


def stated_rule(total, costs):
    """The rule that counts every charge by its stated cost: (epsilon, delta) costs add, zCDP
    costs add and are converted once (CKS20, rounded up) at the delta left; against a rho
    total an (epsilon, 0) cost counts epsilon^2 / 2. Returns (fits, epsilon or rho)."""
    d = lambda x: Decimal(repr(float(x)))  # noqa: E731 - the decimal the user wrote
    if isinstance(total, ZCDP):
        rho = sum((d(c.rho) if isinstance(c, ZCDP) else d(c.epsilon) ** 2 / 2 for c in costs), Decimal(0))
        return rho <= d(total.rho), rho
    eps = sum((d(c.epsilon) for c in costs if isinstance(c, ApproxDP)), Decimal(0))
    dlt = sum((d(c.delta) for c in costs if isinstance(c, ApproxDP)), Decimal(0))
    rho = sum((d(c.rho) for c in costs if isinstance(c, ZCDP)), Decimal(0))
    if dlt > d(total.delta):
        return False, eps
    if rho > 0:
        left = d(total.delta) - dlt
        if left <= 0:
            return False, eps
        # the conversion is given rho rounded up and the delta left rounded down, so that the
        # float it computes is never below the exact decimals' (then rounded up once more)
        rho_up = float(rho) if Decimal(float(rho)) >= rho else math.nextafter(float(rho), math.inf)
        left_down = float(left) if Decimal(float(left)) <= left else math.nextafter(float(left), -math.inf)
        eps += Decimal(repr(math.nextafter(cks20_epsilon(rho_up, left_down), math.inf)))
    return eps <= d(total.epsilon), eps


def _random_costs(rng, n):
    out = []
    for _ in range(n):
        if rng.random() < 0.3:
            out.append(ZCDP(float(rng.choice([0.005, 0.01, 0.02, 0.05]))))
        else:
            out.append(ApproxDP(float(rng.choice([0.05, 0.1, 0.2, 0.25, 0.3])),
                                float(rng.choice([0.0, 1e-8, 1e-7, 3e-7]))))
    return out


TOTALS = [ApproxDP(0.3, 1e-6), ApproxDP(0.5, 3e-7), ApproxDP(1.0, 1e-6), ApproxDP(0.7, 0.0)]


@pytest.mark.parametrize("total", TOTALS, ids=str)
def test_charges_without_events_get_the_stated_rule_exactly(total):
    rng = np.random.default_rng(7)
    verdicts = set()
    for _ in range(40):
        costs = _random_costs(rng, int(rng.integers(1, 6)))
        fits, amount = stated_rule(total, costs)
        for charges in (costs, [Charge(c) for c in costs],
                        # events no rule covers leave the stated bound alone
                        [Charge(c, (("baseline", NonPrivateEvent()),)) for c in costs]):
            got = spent(total, charges)
            assert (got.fits, got.epsilon, got.accounted_by) == (fits, amount, "")
        verdicts.add(fits)
    assert verdicts == {True, False}  # both verdicts were exercised


def test_three_tenths_fit_three_tenths_and_a_rho_total_counts_pure_charges_as_eps_squared_over_2():
    assert spent(ApproxDP(0.3, 1e-6), [ApproxDP(0.1, 0.0)] * 3).fits
    got = spent(ZCDP(0.5), [ZCDP(0.3), Charge(ApproxDP(0.6, 0.0))])
    assert (got.fits, got.rho) == stated_rule(ZCDP(0.5), [ZCDP(0.3), ApproxDP(0.6, 0.0)]) == (True, Decimal("0.48"))
    with pytest.raises(ValidationError, match="cannot be charged against a zCDP"):
        spent(ZCDP(0.5), [Charge(ApproxDP(0.1, 1e-9), (("g", GaussianEvent(3.0)),))])


def test_bounded_range_events_on_a_rho_total_count_eps_squared_over_8():
    """Two exponential-mechanism releases stated as 1.0-DP (1/2-zCDP each by their cost) ran
    1.0-bounded-range steps: 1/8-zCDP each (Cesar & Rogers 2021), 1/4 in all, within 0.3."""
    charge = Charge(ApproxDP(1.0, 0.0), (("select", BoundedRangeEvent(1.0)),))
    assert not spent(ZCDP(0.3), [ApproxDP(1.0, 0.0)] * 2).fits  # 1.0 by the stated costs
    got = spent(ZCDP(0.3), [charge, charge])
    assert got.fits and got.accounted_by == "zcdp"
    assert Decimal("0.25") < got.rho <= Decimal("0.25") * (1 + Decimal("1e-15"))  # rounded up
    assert spent(ZCDP(0.3), [charge, charge, ZCDP(0.05)]).rho == got.rho + Decimal("0.05")
    assert not spent(ZCDP(0.3), [charge, charge, ZCDP(0.06)]).fits


def test_a_set_fits_when_either_bound_does_and_reports_the_smaller():
    """Ten Gaussian releases stated (0.1, 1e-8) each: by their costs exactly 1.0; by their events
    one Gaussian of mu = sqrt(10) / 40 (GDP), far less. A set that fits by neither reports the
    smaller bound too, unless the stated one failed on its delta (then its epsilon leaves out
    a part and is not comparable)."""
    charge = Charge(ApproxDP(0.1, 1e-8), (("cov", GaussianEvent(40.0)),))
    got = spent(ApproxDP(1.0, 1e-6), [charge] * 10)
    assert got.fits and got.accounted_by == "gdp" and got.epsilon < Decimal("0.5")
    assert got.delta == 0 and got.delta_for_events == Decimal("0.000001")
    tight = spent(ApproxDP(0.05, 1e-6), [charge] * 10)
    assert not tight.fits and tight.epsilon == got.epsilon and tight.reason.startswith(f"epsilon {got.epsilon} >")
    no_delta = spent(ApproxDP(0.05, 5e-8), [charge] * 10)  # stated deltas 1e-7 > 5e-8
    assert not no_delta.fits and no_delta.reason.startswith("delta 1.0E-7 > budget delta")


def test_adding_a_charge_never_lowers_what_the_set_needs():
    rng = np.random.default_rng(11)
    total = ApproxDP(2.0, 1e-6)
    kinds = [lambda: Charge(ApproxDP(0.2, 1e-8), (("g", GaussianEvent(float(rng.uniform(10, 40)))),)),
             lambda: Charge(ApproxDP(0.3, 0.0), (("l", LaplaceEvent(float(rng.uniform(4, 10)))),)),
             lambda: Charge(ApproxDP(0.1, 0.0), (("e", BoundedRangeEvent(0.1)),)),
             lambda: Charge(ApproxDP(0.1, 1e-7)),
             lambda: Charge(ZCDP(0.002))]
    for _ in range(25):
        charges = [kinds[int(rng.integers(len(kinds)))]() for _ in range(int(rng.integers(0, 6)))]
        before = spent(total, charges)
        after = spent(total, charges + [kinds[int(rng.integers(len(kinds)))]()])
        assert after.epsilon >= before.epsilon
        assert before.fits or not after.fits


def test_the_budget_plot_follows_the_ledger_rule(tmp_path):
    """The plotted share of a budget is the ledger's: ten (0.1, 1e-8) releases whose events are
    one Gaussian each spend far less than the whole of (1, 1e-6)."""
    from dpdist.ops.ledger import open_ledger
    from dpdist.report.budget import spending_series

    with open_ledger(str(tmp_path / "ledger.sqlite")) as led:
        led.set_budget("/d/a.zarr", ApproxDP(1.0, 1e-6))
        for _ in range(10):
            led.reserve("/d/a.zarr", ApproxDP(0.1, 1e-8)).commit(events=(("cov", GaussianEvent(40.0)),))
        series = spending_series(led, "/d/a.zarr", spent)
        assert series["points"][-1][1] == pytest.approx(float(led.remaining("/d/a.zarr").epsilon), rel=1e-12)
    assert series["points"][-1][1] < 0.5
