"""ExpMechPCA (Algorithm 4) and Analyze Gauss calibration, checked against hand computation."""

from __future__ import annotations

import math

import pytest

from scipy import optimize

from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import release_guarantee
from dpdist.algorithms._utility import SAMPLING_CONSTANT
from dpdist.privacy.mechanisms.gaussian import analyze_gauss_calibration
from dpdist.privacy.mechanisms.expmech import expmech_calibration, expmech_clip
from dpdist.algorithms.expmech_pca.plan import expmech_error_bound, expmech_min_samples
from dpdist.privacy.mechanisms.expmech import ExpMechMechanism
from tests.privacy.balle_wang import assert_smallest_sigma, bw_delta
from tests.privacy.float_factor import kappa


def _bw_sigma(eps, delta):
    """The analytic Gaussian sigma at sensitivity 1, solved here from Balle-Wang's condition."""
    return optimize.brentq(lambda s: bw_delta(1.0, eps, s) - delta, 1e-3, 1e4, xtol=1e-14, rtol=1e-13)


def _deficit_weights(d, k, beta=0.1):
    """The split-dependent part of Theorem 7's deficit per unit sensitivity, A / eps_sel + B m."""
    log_range = math.log(math.comb(d, k))
    return 2 * (log_range + math.log(4 / beta)), 2 * (2 * math.sqrt(k) + math.sqrt(2 * math.log(4 / beta)))


def test_expmech_calibration_matches_hand_computation():
    # eps = 0.5, delta = 1e-5, n = 1000, d = 50, k = 3, tau = 2
    cal = expmech_calibration(0.5, 1e-5, 1000, 50, 3, 2.0)
    assert cal.n_subsets == 19600
    assert cal.score_sensitivity == pytest.approx(0.024, rel=1e-15)  # 2 k tau^2 / n
    assert cal.block_sensitivity == pytest.approx(0.024, rel=1e-15)
    # in floats: the score sensitivity as computed is kappa(n) 0.024 plus twice the eigenvalue
    # kernel's error 64 k u k tau^2 (1 + 1e-6); the block's is kappa(n) 0.024
    score_fl = kappa(1000) * 0.024 + 2 * 64 * 3 * 2.0**-53 * 3 * 4.0 * (1 + 1e-6)
    assert cal.score_sensitivity_fl == pytest.approx(score_fl, rel=1e-15)
    assert cal.gumbel_weight == pytest.approx(cal.selection_epsilon / (2 * score_fl), rel=1e-15)
    assert cal.gumbel_scale == pytest.approx(1 / cal.gumbel_weight, rel=1e-15)
    assert cal.paper_sigma == pytest.approx(kappa(1000) * 0.192 * math.sqrt(math.log(400000.0)), rel=1e-15)
    # basic composition: the selection at eps_sel, the block by the analytic Gaussian mechanism
    # at (0.5 - eps_sel, delta) for kappa(n) 0.024
    assert cal.composition == "basic" and cal.rho is None
    assert cal.selection_epsilon + cal.release_epsilon == pytest.approx(0.5, rel=1e-14)
    assert cal.release_delta == 1e-5
    assert_smallest_sigma(cal.gaussian_sigma, kappa(1000) * 0.024, cal.release_epsilon, 1e-5)
    assert cal.mechanism_sigma == cal.gaussian_sigma < cal.paper_sigma
    # the split minimises A / eps_sel + B m(0.5 - eps_sel): below the paper's halves and both neighbours
    a, b = _deficit_weights(50, 3)

    def cost(e):
        return a / e + b * _bw_sigma(0.5 - e, 1e-5)

    best = cost(cal.selection_epsilon)
    assert best < cost(0.25)
    assert best <= min(cost(cal.selection_epsilon * 0.99), cost(cal.selection_epsilon * 1.01))


def test_gumbel_weight_is_lemma_28_at_the_selection_epsilon():
    # exp(eps' q / (2 Delta_q)) at eps' = selection_epsilon (line 9 has eps' = eps/2)
    for eps, n, k, tau in [(0.1, 10, 1, 0.5), (1.0, 12345, 4, 3.0), (7.0, 99, 2, 1.0)]:
        cal = expmech_calibration(eps, 1e-6, n, 10, k, tau)
        # the float terms lower the weight by kappa(n) - 1 (1.1e-8 at n = 12345) at most
        es = cal.selection_epsilon
        assert cal.gumbel_weight == pytest.approx(es / (2 * cal.score_sensitivity_fl), rel=1e-14)
        assert cal.gumbel_weight <= es * n / (4 * k * tau**2)
        assert cal.gumbel_weight == pytest.approx(es * n / (4 * k * tau**2), rel=2e-8)


@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 1.9, 2.0, 5.0, 20.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 1e-3])
def test_the_events_spend_exactly_the_budget(eps, delta):
    cal = expmech_calibration(eps, delta, 500, 20, 2, 1.5)
    sens = cal.block_sensitivity * cal.float_factor
    if cal.composition == "basic":
        assert cal.selection_epsilon + cal.release_epsilon == pytest.approx(eps, rel=1e-12)
        assert_smallest_sigma(cal.gaussian_sigma, sens, cal.release_epsilon, delta)
    else:  # the selection's bounded-range rho plus the release's Gaussian rho is the budget's rho
        assert cal.selection_epsilon**2 / 8 + sens**2 / (2 * cal.gaussian_sigma**2) == pytest.approx(cal.rho, rel=1e-9)
    # the accountant re-derives (eps, delta) from the events: within the budget, and all of it
    got = release_guarantee([ExpMechMechanism.from_calibration(cal).event()], delta=delta).epsilon
    assert eps * (1 - 1e-6) <= got <= eps * (1 + 1e-12)


def test_small_epsilon_composes_in_zcdp_with_the_bounded_range_selection():
    # at (0.1, 1e-3) and 190 supports zCDP beats basic composition: the split's objective says so
    cal = expmech_calibration(0.1, 1e-3, 500, 20, 2, 1.5)
    assert cal.composition == "zcdp"
    a, b = _deficit_weights(20, 2)
    sens = cal.block_sensitivity * cal.float_factor
    zcdp = a / cal.selection_epsilon + b * cal.gaussian_sigma / sens
    basic = min(a / e + b * _bw_sigma(0.1 - e, 1e-3) for e in [0.1 * i / 200 for i in range(1, 200)])
    assert zcdp < basic


def test_expmech_clip_is_theorem_7():
    assert expmech_clip(1.5, 1000, 50, 0.1) == pytest.approx(3.0 * math.sqrt(math.log(2e6)), rel=1e-15)
    with pytest.raises(ValidationError, match="sigma"):
        expmech_clip(0.0, 10, 10, 0.1)
    with pytest.raises(ValidationError, match="beta"):
        expmech_clip(1.0, 10, 10, 1.0)


def test_error_bound_pieces_match_hand_computation():
    cal = expmech_calibration(1.0, 1e-6, 10_000, 20, 2, 4.0)
    b = expmech_error_bound(cal, sigma=1.0, beta=0.1, eigengap=1.0)
    t = 2 * math.log(20) + math.log(40)
    assert b["eta_samp"] == pytest.approx(SAMPLING_CONSTANT * (math.sqrt(t / 1e4) + t / 1e4), rel=1e-14)
    sens = 2 * 2 * 16 / 1e4
    assert b["eta_select"] == pytest.approx(2 * sens / cal.selection_epsilon * (math.log(190) + math.log(40)),
                                            rel=1e-12)
    assert b["eta_noise"] == pytest.approx(cal.gaussian_sigma * (2 * math.sqrt(2) + math.sqrt(2 * math.log(40))), rel=1e-14)
    deficit = 2 * b["eta_samp"] + b["eta_select"] + 2 * b["eta_noise"]
    assert b["rayleigh_deficit_bound"] == pytest.approx(deficit, rel=1e-14)
    assert b["sin2_bound"] == pytest.approx(min(1.0, deficit), rel=1e-14)
    assert b["clipping_ok"] == (4.0 >= expmech_clip(1.0, 10_000, 20, 0.1))


def test_error_bound_falls_with_n_and_min_samples_is_tight():
    kw = dict(sigma=1.0, eigengap=0.5, beta=0.1)
    n_star = expmech_min_samples(0.3, 1.0, 1e-6, 30, 2, **kw)

    def sin2(n):
        cal = expmech_calibration(1.0, 1e-6, n, 30, 2, expmech_clip(1.0, n, 30, 0.1))
        return expmech_error_bound(cal, 1.0, 0.1, 0.5)["sin2_bound"]

    assert sin2(n_star) <= 0.3 < sin2(int(n_star * 0.99))
    assert sin2(10 * n_star) < sin2(n_star)
    with pytest.raises(ValidationError):
        expmech_min_samples(1.5, 1.0, 1e-6, 30, 2, **kw)


def test_analyze_gauss_calibration_matches_hand_computation():
    c = analyze_gauss_calibration(0.5, 1e-5, 1000, 2.0)
    assert c["sensitivity"] == pytest.approx(0.008, rel=1e-15)  # 2 L^2 / n
    assert c["float_factor"] == pytest.approx(kappa(1000), rel=1e-15)
    # the analytic Gaussian mechanism also below epsilon = 1 (below the classic formula)
    assert_smallest_sigma(c["gaussian_sigma"], kappa(1000) * 0.008, 0.5, 1e-5)
    assert c["gaussian_sigma"] < kappa(1000) * 0.008 * math.sqrt(2 * math.log(1.25e5)) / 0.5
    assert c["rule"].startswith("analytic")


@pytest.mark.parametrize(
    "args,match",
    [
        ((0.0, 1e-6, 100, 10, 2, 1.0), "epsilon"),
        ((1.0, 0.0, 100, 10, 2, 1.0), "delta"),
        ((1.0, 1e-6, 100, 10, 11, 1.0), "k"),
        ((1.0, 1e-6, 100, 10, 0, 1.0), "k"),
        ((1.0, 1e-6, 100, 10, 2, -1.0), "clip"),
        ((1.0, 1e-6, 100, 10, 2, math.inf), "clip"),
    ],
)
def test_bad_parameters_are_refused(args, match):
    with pytest.raises(ValidationError, match=match):
        expmech_calibration(*args)
    with pytest.raises(ValidationError, match="row_norm"):
        analyze_gauss_calibration(1.0, 1e-6, 10, 0.0)
