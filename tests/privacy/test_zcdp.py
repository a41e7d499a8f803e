"""zCDP budget type: composition and conversions (OpenDP's test vectors)."""

from __future__ import annotations

import math

import pytest

from dpdist.exceptions import ValidationError
from dpdist.privacy import ZCDP
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.zcdp import (
    bun_steinke_epsilon,
    cks20_delta,
    cks20_epsilon,
    compose_zcdp,
    pure_dp_to_zcdp,
)


def test_bun_steinke_matches_the_test_vector():
    # rho = 1/32, delta = 1e-3: rho + 2 sqrt(rho ln(1/delta)) = 0.9604805472...
    eps = ZCDP(1 / 32).to_approx_dp(1e-3)
    assert eps == pytest.approx(1 / 32 + 2 * math.sqrt(math.log(1e3) / 32), rel=1e-15)
    assert eps == pytest.approx(0.9604805472, abs=1e-10)


def test_cks20_matches_opendp_vectors():
    # OpenDP's tests: tight eps(rho=1/32, delta=1e-3) and delta(rho=1/32, eps=0)
    assert cks20_epsilon(1 / 32, 1e-3) == pytest.approx(0.6880024554878086, rel=1e-10)
    assert ZCDP(1 / 32).to_approx_dp(1e-3, method="cks20") == pytest.approx(0.6880024554878086, rel=1e-10)
    assert cks20_delta(1 / 32, 0.0) == pytest.approx(0.1508457845622862, rel=1e-10)


@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.5, 1.0, 8.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-3])
def test_cks20_is_tighter_than_bun_steinke_and_inverts(rho, delta):
    tight = cks20_epsilon(rho, delta)
    assert 0 <= tight <= bun_steinke_epsilon(rho, delta)
    # the returned epsilon achieves the requested delta (never below the exact epsilon)
    assert cks20_delta(rho, tight) <= delta * (1 + 1e-9)
    if tight > 0:
        assert cks20_delta(rho, tight * (1 - 1e-6)) > delta


def test_paper_typo_conversion_is_not_used():
    # MS25 Thm 2.4 prints rho + sqrt(2 rho ln(1/delta)), smaller than Bun-Steinke: not a valid conversion
    rho, delta = 0.5, 1e-6
    typo = rho + math.sqrt(2 * rho * math.log(1 / delta))
    assert ZCDP(rho).to_approx_dp(delta) > typo
    assert ZCDP(rho).to_approx_dp(delta) == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / delta)))


def test_pure_dp_to_zcdp_is_half_epsilon_squared():
    assert pure_dp_to_zcdp(0.3).rho == pytest.approx(0.045, rel=1e-15)
    assert pure_dp_to_zcdp(2.0).rho == 2.0


def test_composition_adds_rho_and_keeps_the_breakdown():
    a = ZCDP(0.05, (("radius", 0.05),))
    b = ZCDP(0.05, (("lambda", 0.05),))
    c = ZCDP(0.9, tuple((f"level {k}", 0.9 / 9) for k in range(9)))
    total = a + b + c
    assert total.rho == pytest.approx(1.0, abs=1e-12)
    assert [label for label, _ in total.breakdown][:3] == ["radius", "lambda", "level 0"]
    assert math.fsum(r for _, r in total.breakdown) == pytest.approx(1.0, abs=1e-12)
    assert compose_zcdp(a, b, c).rho == pytest.approx(total.rho, abs=1e-15)
    d = total.to_dict()
    assert d["type"] == "zcdp" and d["breakdown"][0] == {"step": "radius", "rho": 0.05}


def test_zero_cost_step_is_allowed_and_free():
    assert (ZCDP(0.0, (("radius (public)", 0.0),)) + ZCDP(1.0)).rho == 1.0
    assert ZCDP(0.0).to_approx_dp(1e-6) == 0.0


def test_mixed_pipeline_converts_then_composes_basically():
    step = ZCDP(0.5).approx_dp(1e-6)
    assert isinstance(step, ApproxDP) and step.delta == 1e-6
    total = step + ApproxDP(1.0, 1e-6)
    assert total.epsilon == pytest.approx(bun_steinke_epsilon(0.5, 1e-6) + 1.0)
    assert total.delta == pytest.approx(2e-6)


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan, "x", True])
def test_bad_rho_is_refused_with_the_parameter_name(bad):
    with pytest.raises(ValidationError, match="rho"):
        ZCDP(bad)


def test_breakdown_must_sum_to_rho_and_method_must_be_known():
    with pytest.raises(ValidationError, match="breakdown"):
        ZCDP(1.0, (("a", 0.4),))
    with pytest.raises(ValidationError, match="method"):
        ZCDP(1.0).to_approx_dp(1e-6, method="typo")
    with pytest.raises(ValidationError, match="delta"):
        ZCDP(1.0).to_approx_dp(1.5)


def test_guarantee_is_the_one_type_name_of_a_privacy_guarantee():
    """``Guarantee`` (an (epsilon, delta) pair or a zCDP rho) is what a release states, a ledger
    charges and a budget holds; the composition module has no second name for it."""
    import typing

    import dpdist.ops.composition as composition
    from dpdist.algorithms.plan import Plan
    from dpdist.privacy import ApproxDP, Guarantee, Release
    from dpdist.privacy import ZCDP as ZCDP_

    assert set(typing.get_args(Guarantee)) == {ApproxDP, ZCDP_}
    assert not hasattr(composition, "Cost")
    assert typing.get_type_hints(composition.spent)["total"] == Guarantee
    assert typing.get_type_hints(Release)["privacy"] == Guarantee | None
    assert typing.get_type_hints(Plan)["privacy"] == Guarantee | None
