"""Calibration formulas of Algorithm 1 and the Gaussian baselines, checked exactly."""

from __future__ import annotations

import math

import pytest
from scipy import special

from dpdist.exceptions import ValidationError
from dpdist.privacy import accounting
from dpdist.privacy.mechanisms import gaussian
from dpdist.algorithms.sparse_covariance import bounds
from dpdist.privacy.mechanisms.privcov import calibration as cal
from tests.privacy.balle_wang import assert_smallest_sigma
from tests.privacy.float_factor import kappa


def paper_b(eps, delta, n, d, k, R):
    """Algorithm 1, lines 3-4, typed from the paper (with k as given)."""
    delta_row = delta / (2 * d)
    eps_row = eps / 4 * (2 * d * math.log(2 / delta)) ** -0.5
    Delta = 2 * R**2 / n
    return 2 * Delta / eps_row * math.sqrt(k * math.log(d / delta_row))


def test_privcov_calibration_matches_hand_computation():
    c = cal.privcov_calibration(0.5, 1e-6, 10**6, 1000, 3, 4.0)
    # by hand: delta_row = 1e-6 / 2000; log(2e6) = 14.50866; sqrt(2000 * 14.50866) = 170.3447
    assert c.delta_row == pytest.approx(5e-10, rel=1e-12)
    assert c.epsilon_row == pytest.approx(0.125 / 170.3447, rel=1e-6)
    assert c.sensitivity == pytest.approx(3.2e-5, rel=1e-12)
    # b = 2 * 3.2e-5 / eps_row * sqrt(4 * log(2e12)) = 0.087216 * 10.64409 = 0.92834 (times
    # kappa(1e6) = 1 + 9.5e-7); the pure term 10 * 3.2e-5 / eps_row = 0.43608 is smaller
    assert c.laplace_scale == pytest.approx(0.92834, rel=1e-4)
    assert c.laplace_scale_pure == pytest.approx(0.43608, rel=1e-4)
    assert c.laplace_rule.startswith("paper")
    assert c.k_released == 4


def test_privcov_laplace_scale_is_max_of_paper_and_pure_coupling_terms():
    """b = max(b_paper with k+1, (3k+1) Delta / eps_row), both times the float factor kappa(n)."""
    # k = 20, d = 1000, eps = 1, delta = 1e-6, n = 1e6, R = 4: Delta = 3.2e-5,
    # eps_row = 0.25 / sqrt(2000 log(2e6)) = 0.25 / 170.3447 = 1.467612e-3,
    # b_paper = 2 Delta / eps_row * sqrt(21 log(2e12)) = 0.0436082 * 24.38867 = 1.06355,
    # b_pure = 61 Delta / eps_row = 1.33005: the coupling term is active
    c = cal.privcov_calibration(1.0, 1e-6, 10**6, 1000, 20, 4.0)
    assert c.float_factor == pytest.approx(kappa(10**6), rel=1e-15)
    assert c.laplace_scale_paper == pytest.approx(1.06355 * kappa(10**6), rel=1e-5)
    assert c.laplace_scale_pure == pytest.approx(1.33005 * kappa(10**6), rel=1e-5)
    assert c.laplace_scale == c.laplace_scale_pure and "coupling" in c.laplace_rule and "61" in c.laplace_rule
    eps_row = 0.25 / math.sqrt(2000 * math.log(2e6))
    assert c.laplace_scale == pytest.approx(61 * 3.2e-5 * kappa(10**6) / eps_row, rel=1e-13)
    # k = 10 at the same point: 31 vs 2 sqrt(11 log(2e12)) = 35.30, the paper's term is active
    c10 = cal.privcov_calibration(1.0, 1e-6, 10**6, 1000, 10, 4.0)
    assert c10.laplace_scale == c10.laplace_scale_paper > c10.laplace_scale_pure
    assert c10.laplace_scale_pure == pytest.approx(31 * 3.2e-5 * kappa(10**6) / eps_row, rel=1e-13)
    # k = d: every column is selected, the selection costs nothing: c = k' = d
    cd = cal.privcov_calibration(1.0, 0.1, 40, 4, 4, 1.0)
    eps_row_d = 0.25 / math.sqrt(8 * math.log(20))
    assert cd.laplace_scale_pure == pytest.approx(4 * (2 / 40) * kappa(40) / eps_row_d, rel=1e-13)


@pytest.mark.parametrize("k,d,expected", [(1, 5, 4), (3, 16, 10), (20, 1000, 61), (4, 5, 13), (5, 5, 5)])
def test_privcov_pure_coefficient_is_3k_plus_1_below_d(k, d, expected):
    assert cal.privcov_pure_coefficient(k, d) == expected


@pytest.mark.parametrize("eps,delta,n,d,k,R", [(1.0, 1e-5, 5000, 20, 2, 3.0), (0.1, 1e-9, 10**7, 30000, 5, 7.5)])
def test_privcov_scale_is_paper_formula_with_k_plus_one(eps, delta, n, d, k, R):
    c = cal.privcov_calibration(eps, delta, n, d, k, R)
    # small k: the paper's term (times kappa(n)) is the larger one
    assert c.laplace_scale == pytest.approx(kappa(n) * paper_b(eps, delta, n, d, k + 1, R), rel=1e-13)
    # the k+1 deviation enlarges the paper's b by exactly sqrt((k+1)/k): never smaller
    assert c.laplace_scale / (kappa(n) * paper_b(eps, delta, n, d, k, R)) == pytest.approx(
        math.sqrt((k + 1) / k), rel=1e-13)


def test_advanced_composition_is_dr14_theorem_3_20():
    e, k, dp = 0.01, 500, 1e-6
    expected = math.sqrt(2 * k * math.log(1 / dp)) * e + k * e * (math.exp(e) - 1)
    assert accounting.advanced_composition_epsilon(e, k, dp) == pytest.approx(expected, rel=1e-14)


@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 2.0, 5.0, 20.0])
@pytest.mark.parametrize("d", [2, 50, 30000])
def test_composed_epsilon_never_exceeds_requested(eps, d):
    try:
        c = cal.privcov_calibration(eps, 1e-6, 10**6, d, 1, 1.0)
    except ValidationError:
        return  # refused: fine, the requested epsilon cannot be met by this split
    total = min(
        accounting.advanced_composition_epsilon(c.epsilon_row, d, 1e-6 / 2),
        d * c.epsilon_row,
    )
    assert total <= eps
    assert c.composed_epsilon == pytest.approx(total, rel=1e-12)
    assert c.composed_delta <= 1e-6 * (1 + 1e-12)


def test_epsilon_above_one_accepted_when_composition_bounds_it():
    c = cal.privcov_calibration(5.0, 1e-6, 10**6, 1000, 3, 4.0)
    assert c.composed_epsilon <= 5.0


def test_epsilon_too_large_for_the_split_is_refused():
    # d = 500, eps = 1000: basic composition gives d eps_row ~ 1470 and advanced composition's
    # d eps_row (e^eps_row - 1) term is larger still: neither bounds the total by 1000
    with pytest.raises(ValidationError, match="too large"):
        cal.privcov_calibration(1000.0, 1e-6, 100, 500, 1, 1.0)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "x"])
def test_bad_epsilon_refused(bad):
    with pytest.raises(ValidationError, match="epsilon"):
        cal.privcov_calibration(bad, 1e-6, 100, 5, 1, 1.0)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 2.0])
def test_bad_delta_refused(bad):
    with pytest.raises(ValidationError, match="delta"):
        cal.privcov_calibration(1.0, bad, 100, 5, 1, 1.0)


def test_k_above_d_refused():
    with pytest.raises(ValidationError, match="k"):
        cal.privcov_calibration(1.0, 1e-6, 100, 5, 6, 1.0)


def test_subgaussian_clip_formula():
    assert cal.subgaussian_clip(2.0, 1000, 10, 0.1) == pytest.approx(2.0 * math.sqrt(2 * math.log(600000)), rel=1e-14)


def test_error_bound_is_theorem_1():
    c = cal.privcov_calibration(1.0, 1e-6, 10**7, 100, 3, 5.0)
    out = bounds.privcov_error_bound(c, sigma=1.5, beta=0.1)
    t = math.log(6 * 100 / 0.1)
    lam_samp = bounds.SAMPLING_CONSTANT * 2.25 * (math.sqrt(t / 1e7) + t / 1e7)
    lam_priv = c.laplace_scale * math.log(12 * 100**2 / 0.1)
    assert out["lambda_samp"] == pytest.approx(lam_samp, rel=1e-13)
    assert out["lambda_priv"] == pytest.approx(lam_priv, rel=1e-13)
    assert out["error_bound"] == pytest.approx(6 * 3 * (lam_samp + lam_priv), rel=1e-13)


def test_min_samples_is_the_least_n_meeting_the_target():
    kw = dict(sigma=1.0, beta=0.1)
    n = bounds.privcov_min_samples(0.5, 1.0, 1e-6, 64, 3, **kw)

    def bound(m):
        c = cal.privcov_calibration(1.0, 1e-6, m, 64, 3, cal.subgaussian_clip(1.0, m, 64, 0.1))
        return bounds.privcov_error_bound(c, 1.0, 0.1)["error_bound"]

    assert bound(n) <= 0.5
    assert bound(int(n * 0.99)) > 0.5  # least up to the search's 0.1% resolution


def test_classic_gaussian_formula():
    assert gaussian.classic_gaussian_sigma(2.0, 0.5, 1e-5) == pytest.approx(2.0 * math.sqrt(2 * math.log(1.25e5)) / 0.5)
    with pytest.raises(ValidationError):
        gaussian.classic_gaussian_sigma(1.0, 1.0, 1e-5)


@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0])
def test_analytic_gaussian_meets_delta_exactly(eps):
    D, delta = 1.7, 1e-6
    s = gaussian.analytic_gaussian_sigma(D, eps, delta)

    def dlt(s):  # Balle-Wang 2018 Theorem 8
        return special.ndtr(D / (2 * s) - eps * s / D) - math.exp(eps) * special.ndtr(-D / (2 * s) - eps * s / D)

    assert dlt(s) <= delta
    assert dlt(s * (1 - 1e-6)) > delta  # and it is (nearly) the smallest such sigma
    if eps < 1:
        assert s <= gaussian.classic_gaussian_sigma(D, eps, delta)


def test_wang_xu_sensitivity_is_frobenius_bound():
    out = gaussian.wang_xu_calibration(0.5, 1e-6, 1000, 50, 3.0)
    assert out["sensitivity"] == pytest.approx(2 * 9 * 50 / 1000)
    # the analytic Gaussian mechanism for kappa(n) times that sensitivity, also below epsilon = 1
    assert_smallest_sigma(out["gaussian_sigma"], out["sensitivity"] * kappa(1000), 0.5, 1e-6)


@pytest.mark.parametrize("eps", [0.05, 0.5, 0.99, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-2])
def test_gaussian_sigma_is_the_smallest_sigma_at_every_epsilon(eps, delta):
    # one Gaussian mechanism: the exact (Balle-Wang) condition, never the classic formula
    s, rule = gaussian.gaussian_sigma(2.5, eps, delta)
    assert_smallest_sigma(s, 2.5, eps, delta)
    assert rule.startswith("analytic")
    if eps < 1:
        assert s < 2.5 * math.sqrt(2 * math.log(1.25 / delta)) / eps  # the classic formula, typed here


def test_advanced_composition_is_infinite_past_the_float_range():
    # e^eps overflows float64 beyond eps ~ 709: the bound is larger than any float, and PrivCov
    # falls back on basic composition instead of an OverflowError
    assert accounting.advanced_composition_epsilon(800.0, 3, 1e-6) == math.inf
    assert math.isfinite(accounting.advanced_composition_epsilon(700.0, 3, 1e-6))
    c = cal.privcov_calibration(1e5, 1e-6, 100, 6, 2, 1.0)
    assert c.composed_epsilon <= 1e5


@pytest.mark.parametrize("eps,delta", [(3e-8, 1e-12), (1e-6, 1e-7), (1e-4, 1e-15), (0.01, 1e-10), (1e-10, 1e-3)])
def test_analytic_gaussian_meets_delta_at_tiny_epsilon_in_exact_arithmetic(eps, delta):
    # a small mu and epsilon: both terms of Balle-Wang's delta are near Phi(-eps/mu), far above
    # delta; the returned sigma must still meet delta, checked here in 60-digit arithmetic
    import mpmath

    mpmath.mp.dps = 60
    for sens in (1.0, 0.033):
        s = gaussian.analytic_gaussian_sigma(sens, eps, delta)
        mu, e = mpmath.mpf(sens) / mpmath.mpf(s), mpmath.mpf(eps)
        exact = mpmath.ncdf(-e / mu + mu / 2) - mpmath.e**e * mpmath.ncdf(-e / mu - mu / 2)
        assert exact <= delta
        assert exact >= delta * (1 - 1e-6)  # and not far more noise than needed
