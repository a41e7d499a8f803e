"""PrivCov's L2 row clip (``row_clip``): the release's sensitivity, its calibration, the engine's
row scaling, and the estimator's defaults."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import dask.array as da
import numpy as np
import pytest

import dpdist
from dpdist.engine.gram import clipped_second_moment, row_norm_clip, zero_nonfinite_rows
from dpdist.exceptions import ValidationError
from dpdist.privacy.float_rounding import gram_rounding_factor
from dpdist.privacy.mechanisms.privcov.calibration import privcov_release_sensitivity
from dpdist.privacy.mechanisms.privcov.zcdp_calibration import (
    privcov_gumbel_calibration,
    privcov_zcdp_calibration,
)
from dpdist.algorithms.sparse_covariance.bounds import privcov_gumbel_error_bound
from dpdist.privacy.zcdp import cks20_rho


# ---------------------------------------------------------------- the L2 bound, brute force
def _worst_released_change(Y: np.ndarray, Yp: np.ndarray, k_released: int) -> np.ndarray:
    """For each pair (y, y'), the largest ``||(y' y'^T - y y^T)_P||_F`` over address sets P with
    the diagonal and at most ``k_released - 1`` other addresses a row (rows are independent, so
    the best P takes each row's largest off-diagonal changes)."""
    D = Yp[:, :, None] * Yp[:, None, :] - Y[:, :, None] * Y[:, None, :]
    d = D.shape[1]
    sq = D**2
    diag = np.einsum("pii->pi", sq)
    off = sq.copy()
    off[:, np.arange(d), np.arange(d)] = -1.0
    top = -np.sort(-off, axis=2)[:, :, : k_released - 1]
    return np.sqrt(diag.sum(axis=1) + top.sum(axis=(1, 2)))


def _scale_rows(Y: np.ndarray, C: float) -> np.ndarray:
    norms = np.linalg.norm(Y, axis=1)
    return Y * np.minimum(1.0, C / np.maximum(norms, 1e-300))[:, None] * (1 - 1e-12)


@pytest.mark.parametrize("C_over_R", [math.sqrt(8.0), 1.5])
def test_row_route_bound_holds_on_adversarial_pairs_and_is_nearly_reached(C_over_R):
    """d = 8, k' = 4, R = 1: every pair of sign patterns in {-R, R}^8 (all 2^16 pairs) and random
    rows, scaled to norm <= C. The released change never exceeds ``2 C min(R sqrt(k'), C)``; with
    C = R sqrt(d) (no scaling), y = R (1..1) and y' of alternating signs with P_i = {i} and the
    odd offsets reach ``sqrt((k' - 1) / k')`` of it."""
    d, kr, R = 8, 4, 1.0
    C = C_over_R * R
    bound = 2 * C * min(R * math.sqrt(kr), C)
    signs = np.array(list(itertools.product((-R, R), repeat=d)))
    signs = _scale_rows(signs, C)
    i, j = np.meshgrid(np.arange(len(signs)), np.arange(len(signs)), indexing="ij")
    worst = _worst_released_change(signs[i.ravel()], signs[j.ravel()], kr)
    rng = np.random.default_rng(0)
    Y = _scale_rows(rng.uniform(-R, R, size=(20_000, d)) * rng.choice([0.0, 1.0], size=(20_000, d), p=[0.3, 0.7]), C)
    Yp = _scale_rows(np.sign(rng.normal(size=(20_000, d))) * R, C)
    worst_random = _worst_released_change(Y, Yp, kr)
    assert worst.max() <= bound * (1 + 1e-12) and worst_random.max() <= bound * (1 + 1e-12)
    if C >= R * math.sqrt(d):  # rows unscaled: the alternating pair
        assert worst.max() >= math.sqrt((kr - 1) / kr) * bound * (1 - 1e-9)
    else:
        assert worst.max() >= 0.5 * bound
    # the library's row route is that bound over n, times the float factor
    n = 1000
    _, entry, row = privcov_release_sensitivity(n, d, kr, R, C)
    assert row == pytest.approx(gram_rounding_factor(n) * bound / n, rel=1e-15)
    assert entry == pytest.approx(math.sqrt(d * kr) * gram_rounding_factor(n) * 2 * R**2 / n, rel=1e-15)


def _rowwise_change(Y: np.ndarray, Yp: np.ndarray) -> np.ndarray:
    """For each pair (y, y'), ``sqrt(sum_i max_j |y'_i y'_j - y_i y_j|^2)``: the L2 norm over
    rows of the largest change of a row's scores (the norm of the selection's Lemma 4a)."""
    D = np.abs(Yp[:, :, None] * Yp[:, None, :] - Y[:, :, None] * Y[:, None, :])
    return np.sqrt((D.max(axis=2) ** 2).sum(axis=1))


@pytest.mark.parametrize("C_over_R", [math.sqrt(8.0), 2.0, 0.7])
def test_selection_row_route_bound_holds_on_adversarial_pairs_and_is_reached(C_over_R):
    """d = 8, R = 1: every pair of sign patterns in {-R, R}^8 and random rows, scaled to norm <=
    C. The rows' largest score changes have L2 norm at most ``2 C min(R, C)`` (the library's
    selection row route is that over n, divided by sqrt(d), times the float factor); y = R on
    m = (C/R)^2 coordinates and y' = y with one sign flipped reaches it."""
    d, R = 8, 1.0
    C = C_over_R * R
    bound = 2 * C * min(R, C)
    signs = _scale_rows(np.array(list(itertools.product((-R, R), repeat=d))), C)
    i, j = np.meshgrid(np.arange(len(signs)), np.arange(len(signs)), indexing="ij")
    worst = _rowwise_change(signs[i.ravel()], signs[j.ravel()])
    rng = np.random.default_rng(1)
    Y = _scale_rows(rng.uniform(-R, R, size=(20_000, d)) * rng.choice([0.0, 1.0], size=(20_000, d), p=[0.3, 0.7]), C)
    Yp = _scale_rows(np.sign(rng.normal(size=(20_000, d))) * R, C)
    assert worst.max() <= bound * (1 + 1e-12) and _rowwise_change(Y, Yp).max() <= bound * (1 + 1e-12)
    if C_over_R == 2.0:  # m = 4 coordinates at R, norm exactly C: the flipped pair reaches the bound
        y = np.zeros(d)
        y[:4] = R
        yp = y.copy()
        yp[0] = -R
        assert _rowwise_change(y[None], yp[None])[0] == pytest.approx(bound, rel=1e-12)
    n = 1000
    sel, entry, row = dpdist.privacy.mechanisms.privcov.calibration.privcov_selection_sensitivity(n, d, R, C)
    assert row == pytest.approx(gram_rounding_factor(n) * bound / n / math.sqrt(d), rel=1e-15)
    assert entry == pytest.approx(gram_rounding_factor(n) * 2 * R**2 / n, rel=1e-15)
    assert sel == min(entry, row)


def test_engine_rows_meet_the_selection_bound_on_hostile_neighbours():
    """The computed moments of neighbouring datasets (hostile rows: 1e300, inf, NaN, a fill value
    1e30, zeroed or clipped by the engine as in a fit) differ, row by row, by at most the
    calibration's selection sensitivity times sqrt(d) in the norm of Lemma 4a."""
    d, n, R, C = 6, 40, 1.0, 1.6
    rng = np.random.default_rng(5)
    base = rng.normal(size=(n, d))
    hostile = [np.full(d, 1e300), np.array([np.inf, 1, 1, 1, 1, 1.0]), np.array([np.nan] * d),
               np.full(d, 1e30), np.array([R, R, -R, 0, 0, 0]), np.array([1e300, -1e300, 0, 0, 0, 0])]
    sel, _, _ = dpdist.privacy.mechanisms.privcov.calibration.privcov_selection_sensitivity(n, d, R, C)
    worst = 0.0
    for a, b in itertools.product(hostile + [base[0]], repeat=2):
        X, Xp = base.copy(), base.copy()
        X[0], Xp[0] = a, b
        moments = []
        for Z in (X, Xp):
            Zg = zero_nonfinite_rows(da.from_array(Z, chunks=(7, d)))
            moments.append(np.asarray(clipped_second_moment(Zg, R, tile=4, row_clip=C)))
        change = np.sqrt((np.abs(moments[0] - moments[1]).max(axis=1) ** 2).sum())
        worst = max(worst, change)
        assert change <= math.sqrt(d) * sel, (a, b)
    assert worst > 0.5 * math.sqrt(d) * sel  # the pairs come near the bound


# ---------------------------------------------------------------- the calibration, recomputed
def _expected_gumbel(eps, delta, n, d, k, R, beta, C):
    """The calibration recomputed from the formulas (not from the code under test)."""
    kr = min(k + 1, d)
    kappa = gram_rounding_factor(n)
    entry_fl = kappa * 2 * R**2 / n
    rel_sens = min(math.sqrt(d * kr) * entry_fl, kappa * 2 * C * min(R * math.sqrt(kr), C) / n)
    # the selection's root-mean-square row sensitivity: sqrt(sum_i delta_i^2) / sqrt(d)
    sel_sens = min(entry_fl, kappa * 2 * C * min(R, C) / n / math.sqrt(d))
    rho = cks20_rho(eps, delta)
    t_up = math.log(12 * d * d / beta)
    T = t_up + math.log(t_up)
    c1 = 3 * k**1.5 * T * sel_sens / entry_fl
    c2 = math.sqrt((k + 2) * math.log(12 * d / beta)) * rel_sens / (math.sqrt(d) * entry_fl)
    f = (c1 / c2) ** (2 / 3) / (1 + (c1 / c2) ** (2 / 3))
    sigma = rel_sens / math.sqrt(2 * (1 - f) * rho)
    beta_g = sel_sens * math.sqrt(d * k / (2 * f * rho))
    return f, sigma, beta_g, rel_sens


def test_gumbel_calibration_with_a_row_clip_matches_the_formulas():
    eps, delta, n, d, k, R, beta, C = 1.0, 1e-6, 10**7, 1000, 20, 7.4, 0.1, 35.0
    cal = privcov_gumbel_calibration(eps, delta, n, d, k, R, beta, row_clip=C)
    f, sigma, beta_g, rel_sens = _expected_gumbel(eps, delta, n, d, k, R, beta, C)
    assert cal.selection_share == pytest.approx(f, rel=1e-12)
    assert cal.gaussian_sigma == pytest.approx(sigma, rel=1e-12)
    assert cal.gumbel_scale == pytest.approx(beta_g, rel=1e-12)
    assert cal.release_sensitivity == pytest.approx(rel_sens, rel=1e-14)
    assert cal.release_sensitivity_row < cal.release_sensitivity_entry
    # the release noise falls, by less than the row route's ratio C / (R sqrt(d)): the re-optimised
    # split moves budget to the selection
    # both stages' sensitivities fall by about C / (R sqrt(d)); so do both noise scales and both
    # error terms, by the same factor when the split is unchanged
    old = privcov_gumbel_calibration(eps, delta, n, d, k, R, beta)
    ratio = C / (R * math.sqrt(d))
    assert cal.selection_sensitivity == pytest.approx(ratio * old.selection_sensitivity, rel=1e-12)
    assert cal.gaussian_sigma < old.gaussian_sigma * ratio * 1.2 and cal.gumbel_scale < old.gumbel_scale * ratio * 1.2
    old_bound, new_bound = privcov_gumbel_error_bound(old, 1.0, beta), privcov_gumbel_error_bound(cal, 1.0, beta)
    assert new_bound["lambda_priv"] < old_bound["lambda_priv"] * ratio * 1.2


def test_zcdp_calibration_with_a_row_clip_uses_the_row_route():
    eps, delta, n, d, k, R, beta, C = 1.0, 1e-6, 10**7, 500, 10, 7.0, 0.1, 30.0
    cal = privcov_zcdp_calibration(eps, delta, n, d, k, R, beta, row_clip=C)
    kr = k + 1
    kappa = gram_rounding_factor(n)
    rel = kappa * 2 * C * min(R * math.sqrt(kr), C) / n
    entry_fl = kappa * 2 * R**2 / n
    c1 = 12 * k * k * math.log(6 * d * d / beta)
    c2 = math.sqrt((k + 2) * math.log(12 * d / beta)) * rel / (math.sqrt(d) * entry_fl)
    f = (c1 / c2) ** (2 / 3) / (1 + (c1 / c2) ** (2 / 3))
    assert cal.release_sensitivity == pytest.approx(rel, rel=1e-14)
    assert cal.selection_share == pytest.approx(f, rel=1e-12)
    assert cal.gaussian_sigma == pytest.approx(rel / math.sqrt(2 * (1 - f) * cks20_rho(eps, delta)), rel=1e-12)


def test_a_large_row_clip_keeps_the_entry_route_bit_for_bit():
    """C above R sqrt(d): the row route is no smaller, and the calibration is today's exactly."""
    a = privcov_gumbel_calibration(1.0, 1e-6, 10**6, 50, 5, 2.0)
    b = privcov_gumbel_calibration(1.0, 1e-6, 10**6, 50, 5, 2.0, row_clip=2.0 * math.sqrt(50) * 1.01)
    assert (a.gaussian_sigma, a.gumbel_scale, a.selection_share) == (b.gaussian_sigma, b.gumbel_scale,
                                                                      b.selection_share)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), "x", True])
def test_bad_row_clip_is_refused(bad):
    with pytest.raises(ValidationError, match="row_clip"):
        privcov_gumbel_calibration(1.0, 1e-6, 10**6, 50, 5, 2.0, row_clip=bad)
    with pytest.raises(ValidationError, match="row_clip"):
        dpdist.SparseCovariance(2, 1.0, 1e-6, sigma=1.0, row_clip=bad).plan(1000, 10)


def test_paper_refuses_a_row_clip_and_is_unchanged():
    with pytest.raises(ValidationError, match="row_clip"):
        dpdist.SparseCovariance(2, 1.0, 1e-6, sigma=1.0, selection="paper", row_clip=3.0).plan(1000, 10)
    X = np.random.default_rng(1).normal(size=(300, 8))
    rel = dpdist.SparseCovariance(2, 1.0, 1e-6, sigma=1.0, selection="paper", random_state=3,
                                  scheduler="synchronous").fit(X).release_
    assert "row_clip" not in rel.parameters
    assert rel.parameters["clip"] == pytest.approx(math.sqrt(2 * math.log(6 * 300 * 8 / 0.1)))


# ---------------------------------------------------------------- the engine's row scaling
def _exact_norm_sq(row) -> Fraction:
    return sum((Fraction(float(v)) ** 2 for v in row), Fraction(0))


@pytest.mark.parametrize("col_chunk", [7, 3])
def test_engine_scales_rows_to_norm_at_most_C_in_exact_arithmetic(col_chunk):
    rng = np.random.default_rng(2)
    d, R, C = 7, 2.0, 3.0
    X = rng.normal(scale=3.0, size=(40, d))
    X[0] = 1e300
    X[1] = np.inf
    X[2, 3] = np.nan
    X[3] = C / math.sqrt(d)  # on the sphere in floats
    X[4] = 0.0
    X[5] = 1e-200
    Xd = zero_nonfinite_rows(da.from_array(X, chunks=(9, col_chunk)))
    from dpdist.engine.gram import block_clip

    Y = row_norm_clip(Xd.map_blocks(block_clip, R, dtype=np.float64), C).compute(scheduler="synchronous")
    assert np.all(np.abs(Y) <= R)
    assert all(_exact_norm_sq(row) <= Fraction(C) ** 2 for row in Y)
    assert np.all(Y[1] == 0) and np.all(Y[2] == 0) and np.all(Y[4] == 0)
    assert np.linalg.norm(Y[0]) == pytest.approx(C, rel=1e-12)  # 1e300 -> R each -> scaled to C
    np.testing.assert_array_equal(Y[5], X[5])  # short rows untouched
    # the reference, written independently: clip, zero non-finite rows, scale long rows to C
    ref = np.where(np.isfinite(X).all(axis=1)[:, None], np.clip(X, -R, R), 0.0)
    norms = np.linalg.norm(ref, axis=1)
    ref = ref * np.minimum(1.0, C / np.where(norms > 0, norms, 1.0))[:, None]
    np.testing.assert_allclose(Y, ref, rtol=1e-12, atol=0)
    S = clipped_second_moment(Xd, R, tile=4, row_clip=C).compute(scheduler="synchronous")
    np.testing.assert_allclose(S, ref.T @ ref / 40, rtol=1e-12, atol=1e-300)


# ---------------------------------------------------------------- the estimator
def test_default_row_clip_follows_sigma_and_is_recorded():
    X = np.random.default_rng(4).normal(size=(400, 10))
    est = dpdist.SparseCovariance(2, 1.0, 1e-6, sigma=1.0, random_state=0, scheduler="synchronous",
                                  assume_centered=True).fit(X)
    t = math.log(6 * 400 / 0.1)
    C = math.sqrt(10 + 2 * math.sqrt(10 * t) + 2 * t)
    assert est.release_.parameters["row_clip"] == pytest.approx(C)
    assert est.release_.parameters["calibration"]["row_clip"] == pytest.approx(C)
    plan = est.plan(400, 10)
    assert plan.row_clip == pytest.approx(C)
    assert plan.release_sensitivity == min(plan.release_sensitivity_entry, plan.release_sensitivity_row)
    # clip only: no row clip (today's behaviour); inf disables it
    only_clip = dpdist.SparseCovariance(2, 1.0, 1e-6, clip=3.0).plan(400, 10)
    assert only_clip.row_clip == math.inf and only_clip.release_sensitivity_row == math.inf
    off = dpdist.SparseCovariance(2, 1.0, 1e-6, sigma=1.0, row_clip=math.inf).plan(400, 10)
    assert off.row_clip == math.inf
    assert off.clip == pytest.approx(math.sqrt(2 * math.log(6 * 400 * 10 / 0.1)))


def test_same_seed_hostile_neighbours_differ_only_as_the_noise_allows():
    """Neighbours differing in one row (a hostile 1e300 row against a zero row): with the same
    seed the selected sets agree when k = d and every released value moves by at most the
    row-clipped moment's change, whose L2 norm is within the release's sensitivity."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 6))
    Xp = X.copy()
    Xp[17] = 1e300
    kw = dict(sigma=1.0, random_state=11, scheduler="synchronous", assume_centered=True, row_clip=2.5)
    a = dpdist.SparseCovariance(6, 1.0, 1e-6, **kw).fit(X).release_
    b = dpdist.SparseCovariance(6, 1.0, 1e-6, **kw).fit(Xp).release_
    np.testing.assert_array_equal(a.values["selected"], b.values["selected"])
    change = np.concatenate([(a.values["selected_values"] - b.values["selected_values"]).ravel()])
    sens = a.parameters["calibration"]["release_sensitivity"]
    gamma = 2.0 ** -20  # far coarser than the release lattice's rounding at this scale
    assert np.linalg.norm(change) <= sens * (1 + 1e-9) + gamma
    assert a.parameters["calibration"]["release_sensitivity_row"] < a.parameters["calibration"][
        "release_sensitivity_entry"]


def test_selection_row_route_times_sqrt_d_covers_the_bound_in_exact_arithmetic():
    """The float quotient ``bound / sqrt(d)`` rounds twice; the library's row route is raised so
    that ``row_route^2 d >= bound^2`` holds exactly (rationals of the floats) for many sizes."""
    rng = np.random.default_rng(11)
    for _ in range(2000):
        n = int(rng.integers(10, 10**12))
        d = int(rng.integers(2, 10**6))
        R = float(rng.uniform(0.1, 50.0))
        C = float(rng.uniform(0.1, 5.0) * R * math.sqrt(d) / 3)
        _, _, row = dpdist.privacy.mechanisms.privcov.calibration.privcov_selection_sensitivity(n, d, R, C)
        bound = dpdist.privacy.float_rounding.float_sensitivity(2.0 * C * min(R, C) / n, n)[0]
        assert Fraction(row) ** 2 * d >= Fraction(bound) ** 2, (n, d, R, C)
