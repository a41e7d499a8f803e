"""PrivCov with Gumbel top-k selection (selection="gumbel", the default): the calibration, its
split and error bound, the bounded-range accounting, the law of the selection, its exactness
across tilings, and its support."""

from __future__ import annotations

import dataclasses
import itertools
import math

import mpmath
import numpy as np
import pytest
from scipy import stats

import dpdist
from dpdist.privacy.accounting import Accountant, pure_epsilon, release_guarantee, zcdp_rho
from dpdist.privacy.events import BoundedRangeEvent, ComposedEvent, GaussianEvent, SelfComposedEvent, event_from_dict
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.mechanisms.privcov.calibration import privcov_score_bound
from dpdist.privacy.mechanisms.privcov.zcdp_calibration import (
    privcov_gumbel_calibration,
    privcov_zcdp_calibration,
)
from dpdist.algorithms.sparse_covariance.bounds import privcov_gumbel_error_bound
from dpdist.privacy.noise.gumbel import GumbelTopK
from dpdist.privacy.mechanisms.privcov.mechanism import PrivCovGumbelMechanism
from dpdist.privacy.noise.streams import NoiseSeed
from dpdist.privacy.zcdp import cks20_epsilon, cks20_rho
from tests.audit_twins import scaled_twin


# ------------------------------------------------------------------------------ calibration
def test_gumbel_calibration_by_hand():
    eps, delta, n, d, k, R, beta = 1.0, 1e-6, 10**6, 1000, 20, 1.5, 0.1
    cal = privcov_gumbel_calibration(eps, delta, n, d, k, R, beta)
    sens = cal.sensitivity * cal.float_factor
    assert cal.sensitivity == 2 * R**2 / n and cal.k_released == 21 and cal.selection_steps == k
    rho = cks20_rho(eps, delta)
    t_up = math.log(12 * d * d / beta)
    c1 = 3 * k**1.5 * (t_up + math.log(t_up))
    c2 = math.sqrt(21 * (k + 2) * math.log(12 * d / beta))
    f = (c1 / c2) ** (2 / 3) / (1 + (c1 / c2) ** (2 / 3))
    assert cal.rho == rho and cal.selection_share == pytest.approx(f, rel=1e-12)
    # d k steps of an eps_step-bounded-range mechanism: d k eps_step^2 / 8 = rho_sel
    assert d * k * cal.selection_step_epsilon**2 / 8 == pytest.approx(f * rho, rel=1e-12)
    assert cal.gumbel_scale == pytest.approx(2 * sens / cal.selection_step_epsilon, rel=1e-12)
    assert cal.gumbel_scale == pytest.approx(sens * math.sqrt(d * k / (2 * f * rho)), rel=1e-12)
    assert cal.gaussian_sigma == pytest.approx(math.sqrt(d * 21) * sens / math.sqrt(2 * (1 - f) * rho), rel=1e-12)
    # the numbers of docs/privacy/privcov.md, in units of the entry sensitivity
    assert cal.gumbel_scale / sens == pytest.approx(658.0, rel=1e-3)
    assert cal.gaussian_sigma / sens == pytest.approx(2888, rel=1e-3)


@pytest.mark.parametrize("k", [1, 5, 20])
def test_at_the_same_selection_rho_the_gumbel_scale_is_the_laplace_scale_over_2_sqrt_k(k):
    """Laplace selection: d pure (2 k Delta / b)-DP rows, d (2 k Delta / b)^2 / 2; Gumbel: d k
    bounded-range steps of 2 Delta / beta, d k (2 Delta / beta)^2 / 8. Equal at beta = b / (2 sqrt(k))."""
    lap = privcov_zcdp_calibration(1.0, 1e-6, 10**6, 500, k, 1.0)
    gum = privcov_gumbel_calibration(1.0, 1e-6, 10**6, 500, k, 1.0)
    sens = lap.sensitivity * lap.float_factor
    d = 500
    rho_lap = d * (2 * k * sens / lap.laplace_scale) ** 2 / 2
    assert rho_lap == pytest.approx(lap.rho_selection, rel=1e-12)
    same_rho_scale = sens * math.sqrt(d * k / (2 * lap.rho_selection))  # a Gumbel scale spending rho_lap
    assert lap.laplace_scale / same_rho_scale == pytest.approx(2 * math.sqrt(k), rel=1e-12)
    assert d * k * (2 * sens / gum.gumbel_scale) ** 2 / 8 == pytest.approx(gum.rho_selection, rel=1e-12)


def test_the_split_minimises_the_error_bound():
    cal = privcov_gumbel_calibration(1.0, 1e-6, 10**7, 500, 10, 3.0, beta=0.1)
    best = privcov_gumbel_error_bound(cal, 1.0, 0.1)["error_bound"]
    sens = cal.sensitivity * cal.float_factor
    for f in (cal.selection_share * 0.9, cal.selection_share + 0.5 * (1 - cal.selection_share), 0.5):
        g = sens * math.sqrt(cal.n_features * cal.k / (2 * f * cal.rho))
        s = math.sqrt(cal.release_coordinates) * sens / math.sqrt(2 * (1 - f) * cal.rho)
        other = dataclasses.replace(cal, selection_share=f, gumbel_scale=g, gaussian_sigma=s)
        assert privcov_gumbel_error_bound(other, 1.0, 0.1)["error_bound"] > best


def test_error_bound_by_hand():
    cal = privcov_gumbel_calibration(1.0, 1e-6, 10**8, 200, 5, 4.0, beta=0.05)
    got = privcov_gumbel_error_bound(cal, 1.3, 0.05)
    t = math.log(6 * 200 / 0.05)
    lam_samp = 4.0 * 1.3**2 * (math.sqrt(t / 1e8) + t / 1e8)
    # every Gumbel in [-t_low, t_up]: 200^2 e^-t_up = 0.05/12 and 200^2 exp(-e^t_low) = 0.05/12
    t_up = -math.log(0.05 / 12 / 200**2)
    t_low = math.log(-math.log(0.05 / 12 / 200**2))
    assert 200**2 * math.exp(-math.exp(t_low)) == pytest.approx(0.05 / 12, rel=1e-9)
    lam_priv = cal.gumbel_scale * (t_up + t_low) / 2
    lam_rel = cal.gaussian_sigma * math.sqrt(7 * math.log(12 * 200 / 0.05))
    assert got["lambda_priv"] == pytest.approx(lam_priv, rel=1e-12)
    assert got["error_bound"] == pytest.approx(30 * (lam_samp + lam_priv) + lam_rel, rel=1e-12)


def test_the_gumbel_tails_used_by_the_bound():
    """P(G > t) <= e^-t and P(G < -t) = exp(-e^t) for the standard Gumbel."""
    for t in (0.5, 3.0, 10.0, 20.0):
        assert stats.gumbel_r.sf(t) <= math.exp(-t)
        assert stats.gumbel_r.cdf(-t) == pytest.approx(math.exp(-math.exp(t)), rel=1e-9)


def test_k_equal_d_spends_nothing_on_the_selection():
    cal = privcov_gumbel_calibration(1.0, 1e-6, 1000, 6, 6, 1.0)
    assert cal.selection_share == 0 and cal.selection_steps == 0 and cal.rho_release == cal.rho
    mech = PrivCovGumbelMechanism.from_calibration(cal)
    assert [e.TYPE for e in mech.event().events] == ["gaussian"]


# ------------------------------------------------------------------------------- accounting
def test_bounded_range_event_accounts_epsilon_squared_over_8():
    e = BoundedRangeEvent(0.3)
    assert zcdp_rho(e) == pytest.approx(0.3**2 / 8, rel=1e-15)
    assert pure_epsilon(e) == 0.3
    ev = ComposedEvent((SelfComposedEvent(e, 40), GaussianEvent(5.0)))
    assert zcdp_rho(ev) == pytest.approx(40 * 0.09 / 8 + 1 / 50, rel=1e-12)
    assert event_from_dict(ev.to_json()) == ev
    acc = Accountant().compose(ev)
    assert acc.rho() == zcdp_rho(ev)
    got = acc.epsilons(1e-6, external=False)
    assert got["zcdp-cks20"] == pytest.approx(cks20_epsilon(zcdp_rho(ev), 1e-6), rel=1e-12)
    # the pure route (a bounded-range step is pure epsilon-DP) is the basic sum of epsilons
    assert pure_epsilon(ev) is None and pure_epsilon(SelfComposedEvent(e, 40)) == pytest.approx(12.0)


@pytest.mark.parametrize("eps, delta, n, d, k", [(1.0, 1e-6, 10**6, 1000, 20), (0.3, 1e-8, 5000, 40, 3),
                                                   (8.0, 1e-3, 300, 10, 9), (1.0, 1e-5, 400, 6, 6)])
def test_the_mechanism_event_accounts_to_at_most_the_budget(eps, delta, n, d, k):
    mech = PrivCovGumbelMechanism.from_calibration(privcov_gumbel_calibration(eps, delta, n, d, k, 2.0))
    got = release_guarantee([mech.event()], delta=delta)
    assert got.epsilon <= eps
    assert release_guarantee([mech.event()], budget=ApproxDP(eps, delta)) == ApproxDP(eps, delta)
    if d >= 1000:
        assert got.epsilon > 0.99 * eps
    cal = mech.calibration
    if cal.selection_steps:  # the lattice and the float product are paid for by the weight
        assert mech.step_epsilon <= cal.selection_step_epsilon * (1 + 1e-12)
        assert mech.gumbel_scale >= cal.gumbel_scale
    assert mech.release_multiplier >= cal.gaussian_sigma / cal.release_sensitivity
    assert mech.noise_scales()["release"] >= cal.gaussian_sigma


def test_the_twin_keeps_the_claim_with_half_the_noise():
    mech = PrivCovGumbelMechanism.from_calibration(privcov_gumbel_calibration(1.0, 1e-6, 10**4, 50, 4, 1.0))
    twin = scaled_twin(mech, 0.5)
    assert twin.event() == mech.event()
    for role, scale in mech.noise_scales().items():
        assert twin.noise_scales()[role] == pytest.approx(scale / 2)


def test_neighbouring_lattice_scores_move_by_at_most_half_the_step():
    """|q - q'| <= u = step_epsilon / 2 for scores within Delta_fl of each other anywhere in
    [-C, C] (the float product and the lattice paid for by the weight)."""
    cal = privcov_gumbel_calibration(1.0, 1e-6, 1000, 50, 3, 1.0)
    mech = PrivCovGumbelMechanism.from_calibration(cal)
    sel = mech.selection(NoiseSeed(0, seeded=True))
    sens = cal.sensitivity * cal.float_factor
    rng = np.random.default_rng(0)
    s = rng.uniform(-mech.score_bound, mech.score_bound, 200_000)
    s[:3] = (0.0, mech.score_bound, sens / 2)
    sp = np.clip(s + sens * rng.choice([-1.0, 1.0], s.size), -mech.score_bound, mech.score_bound)
    assert np.abs(sel.lattice_scores(s) - sel.lattice_scores(sp)).max() <= mech.step_epsilon / 2 * (1 + 1e-12)


# ------------------------------------------------------------------------------ the sampler
def _plackett_luce(q: np.ndarray, k: int) -> dict:
    """P(set) of k peeling steps of the exponential mechanism with weights exp(q)."""
    w = np.exp(q)
    out: dict = {}
    for seq in itertools.permutations(range(q.size), k):
        p, left = 1.0, w.sum()
        for j in seq:
            p *= w[j] / left
            left -= w[j]
        key = tuple(sorted(seq))
        out[key] = out.get(key, 0.0) + p
    return out


def test_the_selected_set_has_the_law_of_the_peeling_exponential_mechanism():
    """Rows of identical scores (each row its own keys): the frequencies of the selected sets
    match the Plackett-Luce probabilities (chi-square), not those of other noise."""
    sampler = GumbelTopK(NoiseSeed(11, seeded=True), "test/gumbel-topk", 1.0)
    values = np.array([0.0, -0.6, 1.1, 1.5, 0.3])  # weight 1: q = |value|
    k, trials = 2, 30_000
    tile = np.broadcast_to(values, (trials, values.size)).copy()
    cols, *_ = sampler.tile_candidates(tile, 0, 0, k)
    expected = _plackett_luce(np.abs(values), k)
    sets = list(expected)
    counts = np.zeros(len(sets))
    index = {s: i for i, s in enumerate(sets)}
    for row in cols:
        counts[index[tuple(sorted(row.tolist()))]] += 1
    probs = np.array([expected[s] for s in sets])
    assert stats.chisquare(counts, trials * probs).pvalue > 1e-3
    # the set is not the noiseless top k, and a Laplace-noise top k has another law
    assert counts[index[(2, 3)]] < 0.5 * trials
    lap = np.abs(values + np.random.default_rng(0).laplace(size=(trials, values.size)))
    lap_sets = np.sort(np.argsort(-lap, axis=1)[:, :k], axis=1)
    lap_counts = np.array([np.sum(np.all(lap_sets == s, axis=1)) for s in sets])
    assert stats.chisquare(lap_counts, trials * probs).pvalue < 1e-6


def _exact_keys(sampler: GumbelTopK, tile: np.ndarray, row_start: int) -> list:
    """Each row's keys q + G computed independently: q = rint(w |S| 2^30) 2^-30 in numpy, G from
    the main word in 60-digit arithmetic (no fallback word is needed to separate them here)."""
    q = np.ldexp(np.rint(np.ldexp(np.abs(tile) * sampler.weight, 30)), -30)
    words = sampler.words(row_start, 0, *tile.shape)
    mpmath.mp.dps = 60
    keys = []
    for a in range(tile.shape[0]):
        row = []
        for j in range(tile.shape[1]):
            u = (mpmath.mpf(int(words[a, j])) + mpmath.mpf(0.5)) / mpmath.mpf(2) ** 64
            row.append(mpmath.mpf(float(q[a, j])) - mpmath.log(-mpmath.log(1 - u)))
        keys.append(row)
    return keys


def test_the_fit_selects_the_exact_top_k_whatever_the_tiling():
    """Same seed, tiles of 3, 5 and 12 columns: the same sets and covariance bit for bit, and the
    sets are the top k of independently computed keys of the computed second moment."""
    X = np.random.default_rng(4).standard_normal((300, 12))
    fits = [dpdist.SparseCovariance(3, 2.0, 1e-5, clip=2.0, random_state=21, scheduler="synchronous",
                                    assume_centered=True, tile_size=t).fit(X) for t in (3, 5, 12)]
    for est in fits[1:]:
        np.testing.assert_array_equal(est.selected_, fits[0].selected_)
        np.testing.assert_array_equal(est.covariance_.toarray(), fits[0].covariance_.toarray())
    rel = fits[0].release_
    mech = PrivCovGumbelMechanism.from_calibration(
        privcov_gumbel_calibration(**{f: rel.parameters["calibration"][f] for f in
                                      ("epsilon", "delta", "n_samples", "n_features", "k", "clip", "beta")}))
    from dpdist.engine.gram import clipped_second_moment
    from dpdist.privacy.noise.streams import resolve_random_state

    S = np.asarray(clipped_second_moment(dpdist.data.validation.as_dask_array(X), 2.0, tile=12).compute())
    keys = _exact_keys(mech.selection(resolve_random_state(21)), S, 0)
    for i, row in enumerate(keys):
        top = sorted(range(12), key=lambda j: row[j], reverse=True)[:3]
        assert sorted(top) == fits[0].selected_[i].tolist()


def test_overlapping_intervals_are_decided_exactly():
    """Widen every certified interval so that no float comparison decides anything: the exact
    comparisons (mpmath on refined cells) select the same sets as the float intervals did."""
    sampler = GumbelTopK(NoiseSeed(5, seeded=True), "test/gumbel-exact", 1.0)
    tile = np.random.default_rng(1).normal(size=(30, 9))
    cols, lo, raw, aux = sampler.tile_candidates(tile, 0, 0, 9)  # every candidate, with its bounds
    wide = aux.copy()
    wide[..., 0] += 50.0
    got = sampler.exact_select(0, cols, lo - 50.0, raw, wide, 3)[0]
    want = sampler.tile_candidates(tile, 0, 0, 3)[0]
    np.testing.assert_array_equal(got, want)
    # and a near-tie of lattice scores that the float keys cannot separate is still decided
    a = (0, 0.25, 0.0, 1.0)
    b = (1, 0.25, 0.0, 1.0)
    assert sampler.greater(0, a, b) != sampler.greater(0, b, a)


def test_a_candidate_far_behind_can_still_be_selected():
    """Support: the exact Gumbel is unbounded, so a candidate trailing the others by more than
    any float Gumbel of a 53-bit uniform (39.7) is selected when its uniform is small enough
    (words chosen by the test), and never once the others lead by more than its Gumbel."""

    class _Chosen(GumbelTopK):
        def words(self, row_start, col_start, n_rows, n_cols):
            w = np.full((n_rows, n_cols), np.uint64(1) << np.uint64(63), dtype=np.uint64)  # G = 0.37
            cols = np.arange(col_start, col_start + n_cols)
            w[:, cols == 2] = np.uint64(1)  # U < 2**-63: G in [43.6, 44.4]
            return w

    sampler = _Chosen(NoiseSeed(0, seeded=True), "test/support", 1.0)
    tile = np.array([[45.0, 44.0, 1.0, 0.0]])  # candidate 2 trails the top two by 43-44
    assert 2 in sampler.tile_candidates(tile, 0, 0, 2)[0][0]
    assert 2 not in sampler.tile_candidates(np.array([[100.0, 99.0, 1.0, 0.0]]), 0, 0, 2)[0][0]


def test_plan_reports_the_gumbel_calibration_and_its_bound():
    """The default plan carries the Gumbel scale (the mechanism's, at least the calibrated one),
    the rho split, the release sigma, and the Gumbel error bound; min_samples inverts that bound
    and is below the Laplace selection's."""
    est = dpdist.SparseCovariance(20, 1.0, 1e-6, sigma=1.0, assume_centered=True)
    plan = est.plan(10**9, 1000)
    cal = privcov_gumbel_calibration(1.0, 1e-6, 10**9, 1000, 20, plan.clip, 0.1, row_clip=plan.row_clip)
    assert plan.selection == "gumbel" and plan.calibration == cal
    assert plan.selection_share == cal.selection_share and plan.release_sigma == cal.gaussian_sigma
    # 1/w = 2 (Delta_sel + 2**-52 C) / (eps_step - 2**-29) against the calibrated 2 Delta_sel / eps_step
    slack = (1 + 2.0**-52 * privcov_score_bound(plan.clip, 10**9) / cal.selection_sensitivity) / (
        1 - 2.0**-29 / cal.selection_step_epsilon)
    assert plan.calibrated_noise_scale == cal.gumbel_scale <= plan.noise_scale <= cal.gumbel_scale * slack * (1 + 1e-12)
    assert slack < 1 + 1e-5
    assert plan.error_bound == privcov_gumbel_error_bound(cal, 1.0, 0.1)["error_bound"]
    n = est.min_samples(0.25, 1000)
    assert est.plan(n, 1000).error_bound <= 0.25 < est.plan(int(n * 0.99), 1000).error_bound
    laplace = dpdist.SparseCovariance(20, 1.0, 1e-6, sigma=1.0, assume_centered=True, selection="laplace")
    assert n < laplace.min_samples(0.25, 1000) / 10


def test_the_engine_merge_tree_is_exact_for_any_fan_in():
    """row_topk_release with the sampler: tiles of 2 merged two at a time (three levels) give the
    same sets as one tile, bit for bit."""
    import dask
    import dask.array as da

    from dpdist.engine.topk import row_topk_release

    A = np.random.default_rng(8).normal(size=(16, 16))
    S = (A + A.T) / 2
    sampler = GumbelTopK(NoiseSeed(3, seeded=True), "test/gumbel-tree", 2.0)
    got = []
    for chunk, fan_in in ((16, 8), (2, 2), (4, 3)):
        parts = row_topk_release(da.from_array(S, chunks=chunk), 4, sampler, lambda r, c, raw: raw,
                                 split_every=fan_in, symmetric=True)
        out = sorted(dask.compute(*parts, scheduler="synchronous"), key=lambda p: p.row_start)
        got.append(np.vstack([p.cols for p in out]))
    for cols in got[1:]:
        np.testing.assert_array_equal(cols, got[0])
