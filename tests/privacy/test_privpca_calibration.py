"""Calibration of PrivNorm / PrivPCA checked against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpdist.exceptions import ValidationError
from dpdist.algorithms._utility import search_min_samples
from dpdist.algorithms.sparse_pca.plan import privpca_error_bound
from dpdist.privacy.mechanisms.gaussian import wang_xu_calibration
from dpdist.privacy.mechanisms.privpca.calibration import (
    MIN_BATCHES,
    TAU_CONSTANT,
    batch_sizes,
    bounded_laplace_test,
    check_n_batches,
    default_n_batches,
    friendly_tau,
    friendly_test_calibration,
    gaussian_release_sigma,
    privnorm_calibration,
    privpca_calibration,
    privpca_sensitivity,
    split_norm_and_pca_budget,
)
from tests.privacy.balle_wang import assert_smallest_sigma


def test_lemma8_test_noise_matches_the_paper():
    # Algorithm 2 Line 3: BoundedLap(3/eps, (3/eps) log(12/delta)); Line 12: 21/eps, 21/eps log(12/delta)
    cal = friendly_test_calibration(1.0, 1e-6, 100)
    assert cal.count_scale == pytest.approx(3.0, rel=1e-15)
    assert cal.count_bound == pytest.approx(3.0 * math.log(12e6), rel=1e-14)
    assert cal.weight_scale == pytest.approx(21.0, rel=1e-15)
    assert cal.weight_bound == pytest.approx(21.0 * math.log(12e6), rel=1e-14)
    # Lines 4 and 13: continue iff stat + noise - bound >= 0.8 m
    assert cal.count_threshold == pytest.approx(80.0 + 3.0 * math.log(12e6), rel=1e-14)
    assert cal.weight_threshold == pytest.approx(80.0 + 21.0 * math.log(12e6), rel=1e-14)


def test_bounded_laplace_bound_is_enlarged_only_for_large_epsilon():
    # eps = 1, delta = 1e-3: paper's bound log(4/delta) (e^1 + delta <= 4)
    s, b = bounded_laplace_test(1.0, 1.0, 1e-3)
    assert (s, b) == (1.0, pytest.approx(math.log(4000.0), rel=1e-15))
    # eps = 3: e^3 + delta > 4, bound = scale * log((e^3 + delta)/delta)
    s, b = bounded_laplace_test(2.0, 3.0, 1e-3)
    assert s == pytest.approx(2 / 3)
    assert b == pytest.approx((2 / 3) * math.log((math.exp(3.0) + 1e-3) / 1e-3), rel=1e-14)
    # the coupling bound e^eps q / (1 - q) <= delta holds in both regimes
    for eps in (0.1, 1.0, 1.386, 3.0, 20.0):
        s, b = bounded_laplace_test(1.0, eps, 1e-4)
        q = math.exp(-b / s)
        assert math.exp(eps) * q / (1 - q) <= 1e-4 * (1 + 1e-9)


def test_privnorm_sigma_matches_algorithm3_line17():
    cal = privnorm_calibration(1.0, 1e-6, 3, 0.01)
    assert cal.sensitivity == pytest.approx(20 * 3 * 0.01, rel=1e-15)
    # the analytic Gaussian mechanism at (eps/3, delta/3), below Line 17's printed
    # 0.6 * 6 * sqrt(log 6e6) = 14.2212 (Fact 2)
    assert_smallest_sigma(cal.sigma, 20 * 3 * 0.01, 1.0 / 3, 1e-6 / 3)
    assert cal.sigma < 20 * 3 * 0.01 * 6.0 * math.sqrt(math.log(6e6)) * 0.6


def test_privpca_sigma_is_line19_times_the_lemma10_gap_correction():
    k, tau, gap, lam, eps, delta = 3, 0.01, 0.5, 2.0, 1.0, 1e-6
    sens = 80 * math.sqrt(2) * k * tau / (gap * lam) / (1 - gap / 2)
    cal = privpca_calibration(eps, delta, k, tau, gap, lam)
    assert cal.sensitivity == pytest.approx(sens, rel=1e-14)
    # Line 19's Gaussian release at (eps/3, delta/3) with the exact (analytic) condition
    assert_smallest_sigma(cal.sigma, sens, eps / 3, delta / 3)
    assert cal.sigma < sens * (6 / eps) * math.sqrt(math.log(6 / delta))  # below Fact 2's
    assert privpca_sensitivity(k, tau, gap, lam) == pytest.approx(80 * math.sqrt(2) * 0.03 / (0.5 * 0.75 * 2.0))


@pytest.mark.parametrize("eps", [0.3, 3.0, 4.0, 30.0, 300.0])
def test_gaussian_release_is_the_analytic_mechanism_at_a_third_of_the_budget(eps):
    s, rule = gaussian_release_sigma(1.7, eps, 1e-5)
    assert_smallest_sigma(s, 1.7, eps / 3, 1e-5 / 3)
    assert rule.startswith("analytic")
    if eps / 3 <= 1:  # Fact 2's range: its printed sigma is larger
        assert s < 1.7 * (6 / eps) * math.sqrt(math.log(6e5))


def test_tau_is_eq11_with_the_documented_constant():
    tau = friendly_tau(2.0, 1000, 400, beta=0.05)
    assert tau == pytest.approx(TAU_CONSTANT * 4.0 * math.sqrt(math.log(1000 / 0.05) / 400), rel=1e-15)
    assert TAU_CONSTANT == 4.0
    assert friendly_tau(1.0, 10, 100, constant=1.0) == pytest.approx(math.sqrt(math.log(200) / 100))


def test_budget_split_adds_up():
    (en, dn), (ep, dp) = split_norm_and_pca_budget(1.0, 1e-6, 0.25)
    assert (en, dn) == (0.25, 0.25e-6)
    assert ep == 0.75 and dp == pytest.approx(0.75e-6)
    assert en + ep == 1.0
    with pytest.raises(ValidationError, match="norm_fraction"):
        split_norm_and_pca_budget(1.0, 1e-6, 1.0)


def test_default_batches_clear_the_weight_test():
    eps, delta = 0.5, 5e-7
    m = default_n_batches(eps, delta)
    cal = friendly_test_calibration(eps, delta, m)
    # 0.95 m - 0.8 m >= bound + scale log(2/beta), and m - 1 does not satisfy it
    assert 0.15 * m >= cal.weight_bound + cal.weight_scale * math.log(40)
    assert 0.15 * (m - 1) < cal.weight_bound + cal.weight_scale * math.log(40)
    assert m == 5792  # (42 log(2.4e7) + 42 log 40) / 0.15, rounded up
    # for huge epsilon the Z test's bound tends to its sensitivity 7 (the large-epsilon
    # bounded-Laplace bound is scale * (eps/3 + log(3/delta)) ~ 7): m = ceil(7.0... / 0.15) = 47
    assert default_n_batches(1e6, 0.5) == 47
    assert default_n_batches(1e6, 0.5) > MIN_BATCHES


def test_batches_partition_rows_and_m_is_at_least_20():
    assert batch_sizes(10, 3) == [4, 3, 3]
    assert sum(batch_sizes(1001, 20)) == 1001
    with pytest.raises(ValidationError, match="n_batches must be >= 20"):
        check_n_batches(19)
    with pytest.raises(ValidationError, match="n_samples // 2"):
        check_n_batches(30, 50)


def test_privpca_error_bound_formula():
    e = privpca_error_bound(0.001, 2, 0.01, 0.5, 4.0, 100, beta=0.05)
    bias = 20 * 2 * 0.01 / (0.5 * 4.0)
    noise = 2 * 0.001 * math.sqrt(math.log(400 / 0.05))
    assert e["projector_error_bound"] == pytest.approx(2 * math.sqrt(2) * 2 * (bias + noise))
    assert e["sin2_error_bound"] == pytest.approx(min(1.0, 4 * e["projector_error_bound"] ** 2))


def test_sigma_priv_does_not_depend_on_d_at_fixed_tau_unlike_wang_xu():
    # sigma_priv is a function of (k, tau, gap, lambda_hat, eps, delta) only
    s = privpca_calibration(1.0, 1e-6, 3, 0.01, 0.5, 1.0).sigma
    wx = [wang_xu_calibration(1.0, 1e-6, 10**6, d, 1.0)["gaussian_sigma"] for d in (100, 10_000)]
    assert wx[1] == pytest.approx(100 * wx[0])
    assert s == privpca_calibration(1.0, 1e-6, 3, 0.01, 0.5, 1.0).sigma


def test_search_min_samples_finds_the_threshold():
    n = search_min_samples(lambda n: 1000.0 / n, 0.5)
    assert 2000 <= n <= 2002
    with pytest.raises(ValidationError):
        search_min_samples(lambda n: 1.0, 0.5, limit=1 << 20)


@pytest.mark.parametrize("bad", [0, -1, 1.0, 1.5, np.nan])
def test_gap_must_be_in_open_unit_interval(bad):
    with pytest.raises(ValidationError, match="gap"):
        privpca_sensitivity(3, 0.1, bad, 1.0)
