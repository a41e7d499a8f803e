"""Calibration of RecDPSME and its baseline, checked against hand computations."""

from __future__ import annotations

import math

import pytest

from dpdist.exceptions import ValidationError
from tests.privacy.float_factor import kappa
from dpdist.algorithms.second_moment.plan import gue_norm_bound, min_samples, plan_second_moment
from dpdist.privacy.mechanisms.second_moment import (
    histogram_sigma,
    lemma_3_8_beta_bound,
    level_schedule,
    level_sigma,
    matrix_bernstein_m,
    n_levels,
    one_shot_sigma,
    recursion_constants,
    split_second_moment_rho,
)
from dpdist.privacy.mechanisms.subsample_aggregate import (
    baseline_guarantee,
    baseline_masking_scale,
    baseline_max_pass_probability,
    baseline_privacy_min_samples,
    baseline_threshold,
    equal_privacy_baseline_budget,
    tlap_support,
)
from dpdist.privacy.zcdp import bun_steinke_epsilon


def test_levels_hand_computation():
    # R^2 = 1e6, alpha = 0.5, m = 10: kappa_0 = 2e6, C = 6400, K* = 7, L = 8, kappa_last = 5311.198...
    assert recursion_constants(10) == {"eta": 0.5, "psi": 0.01, "c": 1 / 800, "stop": 6400.0}
    L, kappas = n_levels(1000.0, 0.5, 10)
    assert L == 8
    assert kappas[0] == pytest.approx(2e6, rel=1e-15)
    assert kappas[-1] == pytest.approx(5311.198079517, rel=1e-12)
    assert kappas[-2] > 6400 >= kappas[-1]
    # the paper's T = log_{7/3}(kappa_0 / C) = 6.78 < L: splitting rho over T would overspend
    T = math.log(2e6 / 6400) / math.log(7 / 3)
    assert T == pytest.approx(6.78, abs=0.01) and 8 * (1 / T) > 1.17


@pytest.mark.parametrize("r2", [10.0, 6400.0, 1e4, 3.7e5, 1e6, 1e9, 1e12])
@pytest.mark.parametrize("alpha,m", [(0.5, 10), (0.25, 3), (0.1, 1)])
def test_levels_match_closed_form(r2, alpha, m):
    L, kappas = n_levels(math.sqrt(r2), alpha, m)
    kappa0, C = r2 / (1 - alpha), 640 * m
    k_star = max(0, math.ceil(math.log(kappa0 / C) / math.log(7 / 3)))
    assert L == k_star + 1
    assert all(k == pytest.approx(kappa0 * (3 / 7) ** j, rel=1e-14) for j, k in enumerate(kappas))


def test_single_level_when_kappa0_below_stop():
    L, kappas = n_levels(10.0, 0.5, 10)  # kappa_0 = 200 <= 6400: T would be <= 0
    assert L == 1 and kappas == (200.0,)


def test_sigma_hand_value():
    # n = 1000, R_k = 2, L = 5, rho = 0.5: sigma = 4 * 4 * sqrt(5) / (1000 * 1) = 0.0357770876...
    assert level_sigma(2.0, 1000, 5, 0.5) == pytest.approx(0.0357770876399966, rel=1e-14)
    assert level_sigma(2.0, 1000, 5, 0.5, "tight") == pytest.approx(0.0357770876399966 * math.sqrt(2) / 4, rel=1e-14)


@pytest.mark.parametrize("sensitivity", ["paper", "tight"])
@pytest.mark.parametrize("radius,alpha,m,rho", [(1000.0, 0.5, 10, 1.0), (50.0, 0.3, 2, 0.01), (3.0, 0.5, 1, 7.0)])
def test_per_level_rho_is_rho_over_L_and_sums_to_rho(sensitivity, radius, alpha, m, rho):
    s = level_schedule(12345, 4, rho, m=m, alpha=alpha, radius=radius, sensitivity=sensitivity)
    a = 4.0 if sensitivity == "paper" else math.sqrt(2.0)
    for k in range(s.n_levels):
        r2 = (3 / 7) ** k * radius**2 / (1 - alpha)
        assert s.radii[k] ** 2 == pytest.approx(r2, rel=1e-13)
        assert s.sensitivities[k] == pytest.approx(a * r2 / 12345, rel=1e-13)
        # sigma for kappa(n) Delta, the sensitivity of the level matrix as computed
        assert s.float_factor == pytest.approx(kappa(12345), rel=1e-15)
        assert s.sigmas[k] == pytest.approx(
            kappa(12345) * a * r2 * math.sqrt(s.n_levels) / (12345 * math.sqrt(2 * rho)), rel=1e-13)
        rho_k = (kappa(12345) * a * r2 / 12345) ** 2 / (2 * s.sigmas[k] ** 2)
        assert rho_k == pytest.approx(rho / s.n_levels, rel=1e-12)
        assert s.thresholds[k] == pytest.approx(s.kappas[k] / (10 * m), rel=1e-15)
    assert abs(math.fsum(s.rhos) - rho) <= 1e-12 * max(rho, 1)
    assert s.privacy.rho == rho


def test_budget_split_ledger():
    full = split_second_moment_rho(1.0, 0.1, private_radius=True, private_lambda=True)
    assert full == pytest.approx({"radius": 0.05, "lambda_min": 0.05, "main": 0.9})
    assert math.fsum(full.values()) == pytest.approx(1.0, abs=1e-12)
    public = split_second_moment_rho(2.0, 0.1, private_radius=False, private_lambda=False)
    assert public == {"radius": 0.0, "lambda_min": 0.0, "main": 2.0}
    one = split_second_moment_rho(1.0, 0.2, private_radius=False, private_lambda=True)
    assert one == pytest.approx({"radius": 0.0, "lambda_min": 0.1, "main": 0.9})
    with pytest.raises(ValidationError, match="init_fraction"):
        split_second_moment_rho(1.0, 1.0, private_radius=True, private_lambda=True)


def test_histogram_sigma_gives_rho_step_for_sensitivity_sqrt2():
    for rho in (0.05, 0.5, 2.0):
        sigma = histogram_sigma(rho)
        assert sigma == pytest.approx(1 / math.sqrt(rho), rel=1e-15)
        assert 2.0 / (2 * sigma**2) == pytest.approx(rho, rel=1e-14)  # Delta^2 / (2 sigma^2), Delta = sqrt(2)


def test_gue_norm_bound_heuristic_and_monte_carlo():
    assert gue_norm_bound(4, 0.1) == pytest.approx(2 * 2 + 2 * math.sqrt(math.log(10)))
    for d in (2, 4, 8):
        mc = gue_norm_bound(d, 0.05, method="monte-carlo", n_draws=4000)
        # the heuristic is a conservative bound; the MC quantile is at least E||N|| ~ sqrt(d) scale
        assert math.sqrt(d) < mc <= gue_norm_bound(d, 0.05)


def test_plan_predicted_gamma_is_last_sigma_times_g():
    p = plan_second_moment(400_000, 4, 1.0, m=5, radius=2500.0, lambda_min=1.0, sensitivity="tight")
    assert p.predicted_gamma == pytest.approx(p.noise_scales[-1] * gue_norm_bound(4, 0.1), rel=1e-14)
    L = p.n_levels
    g_mid = gue_norm_bound(4, 0.1 / L)
    assert p.event_e_min_samples == math.ceil(80 * math.sqrt(2) * 5 * math.sqrt(L) * g_mid / math.sqrt(2.0))
    assert p.event_e_holds
    paper = plan_second_moment(400_000, 4, 1.0, m=5, radius=2500.0, lambda_min=1.0)
    assert paper.event_e_min_samples == math.ceil(320 * 5 * math.sqrt(L) * g_mid / math.sqrt(2.0))


def test_min_samples_is_the_least_n():
    kw = dict(m=5, radius=2500.0, lambda_min=1.0, xi=0.1)
    n = min_samples(0.2, 4, 1.0, **kw)
    at = plan_second_moment(n, 4, 1.0, **kw)
    below = plan_second_moment(n - 1, 4, 1.0, **kw)
    assert at.predicted_gamma <= 0.2 and at.event_e_holds
    assert below.predicted_gamma > 0.2 or not below.event_e_holds


def test_plan_refuses_inconsistent_public_values():
    with pytest.raises(ValidationError, match="lambda_min"):
        plan_second_moment(1000, 4, 1.0, m=5, radius=1.0, lambda_min=1.0)  # lambda_min > R^2 / d


@pytest.mark.parametrize(
    "kwargs,name",
    [(dict(alpha=0.6), "alpha"), (dict(alpha=0.0), "alpha"), (dict(m=0), "m"), (dict(m=2.5), "m"),
     (dict(rho=0.0), "rho"), (dict(sensitivity="loose"), "sensitivity"), (dict(radius=-1.0), "radius")],
)
def test_schedule_validation_names_the_parameter(kwargs, name):
    base = dict(n_samples=100, n_features=3, rho=1.0, m=2, alpha=0.5, radius=10.0, sensitivity="paper")
    base.update(kwargs)
    with pytest.raises(ValidationError, match=name):
        level_schedule(**base)


def test_one_shot_sigma():
    assert one_shot_sigma(1000, 0.5, 2.0) == pytest.approx(0.016 * kappa(1000), rel=1e-14)


def test_lemma_3_8_uses_log2_and_claim_4_2():
    assert lemma_3_8_beta_bound(100.0, 0.5, 10) == pytest.approx(0.5 / (4 * 1.5 * math.log2(1e4 / 15)))
    assert lemma_3_8_beta_bound(1.0, 0.5, 10) == math.inf
    assert matrix_bernstein_m(2.0, 8.0, 0.5, 0.1, 4) == pytest.approx(max(64.0, 10 / 1.5) * math.log(160))


def test_baseline_constants_match_the_spec_example():
    # d = 4, alpha = 1/2, xi = 0.1, eps = 1, delta = 1e-5, C_N = 2: eta_b ~ 1.3e-3, n >~ 5e7 m
    eta_b = baseline_masking_scale(0.5, 4, 0.1)
    assert eta_b == pytest.approx(0.5 / (96 * (2 + math.sqrt(math.log(40)))), rel=1e-14)
    assert eta_b == pytest.approx(1.328e-3, rel=1e-3)
    n = baseline_privacy_min_samples(1, 4, 1.0, 1e-5, eta_b)
    assert n == pytest.approx(800 * 12 * math.sqrt(4 * math.log(2e5)) / eta_b, rel=1e-12)
    assert 4.9e7 < n < 5.2e7
    assert baseline_privacy_min_samples(7, 4, 1.0, 1e-5, eta_b) == pytest.approx(7 * n)


def test_baseline_threshold_and_tlap_support():
    A = tlap_support(2 / 100, 1.0, 1e-6)
    assert A == pytest.approx(0.02 * math.log(1 + (math.e - 1) / 2e-6), rel=1e-14)
    assert baseline_threshold(100, 1.0, 1e-6) == pytest.approx(0.8 + A)
    # eps = 1, delta = 1e-6 needs k >= 137 for the threshold to drop below 1
    assert baseline_threshold(136, 1.0, 1e-6) >= 1.0 > baseline_threshold(137, 1.0, 1e-6)


def test_baseline_pass_probability_and_the_threshold_erratum():
    # Q = 1 passes iff Z >= A - 0.2 with Z ~ TLap(2/k, eps, delta)
    k, eps, delta = 136, 1.0, 1e-6
    A, r = tlap_support(2 / k, eps, delta), eps * k / 2
    expected = (math.exp(-(A - 0.2) * r) - math.exp(-A * r)) / (2 * (1 - math.exp(-A * r)))
    assert baseline_max_pass_probability(k, eps, delta) == pytest.approx(expected, rel=1e-12)
    assert 0.4 < expected < 0.5  # the spec's "always bottom below k = 137" is wrong near the boundary
    assert baseline_max_pass_probability(40, eps, delta) < 4e-5
    assert baseline_max_pass_probability(1000, eps, delta, agreement=1.0) == 1.0  # Q - 0.8 >= A
    assert baseline_max_pass_probability(1000, eps, delta, agreement=0.5) == 0.0


def test_baseline_guarantee_and_equal_privacy_recipe():
    g = baseline_guarantee(0.5, 1e-7)
    assert g.epsilon == 1.0 and g.delta == pytest.approx(4 * math.exp(0.5) * 1e-7)
    eps, delta = equal_privacy_baseline_budget(0.5, 1e-6)
    star = bun_steinke_epsilon(0.5, 1e-6)
    back = baseline_guarantee(eps, delta)
    assert back.epsilon == pytest.approx(star) and back.delta == pytest.approx(1e-6)
    with pytest.raises(ValidationError, match="delta"):
        baseline_guarantee(1.0, 0.2)


def test_tlap_support_is_continuous_where_its_log_form_takes_over():
    from dpdist.privacy.mechanisms.subsample_aggregate import tlap_support

    # the direct form overflows where (e^eps - 1) / (2 delta) passes the float maximum
    edge = math.log(2e-6 * 1.7976931348623157e308)
    below, above = tlap_support(1.0, edge * (1 - 1e-12), 1e-6), tlap_support(1.0, edge * (1 + 1e-12), 1e-6)
    assert math.isfinite(below) and above == pytest.approx(below, rel=1e-9)
    # (1/eps) ln(1 + (e^eps - 1) / (2 delta)) -> 1 + ln(1/(2 delta)) / eps for large eps
    assert tlap_support(1.0, 1e6, 1e-6) == pytest.approx(1 + math.log(1 / 2e-6) / 1e6, rel=1e-12)
