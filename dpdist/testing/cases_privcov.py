"""Audit cases of PrivCov (Algorithm 1) under its three selections: paper, laplace, gumbel."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpdist.testing._case_helpers import (
    _exact_second_moment,
    _own,
    _scale_for,
    _seed,
    _seeded_fits_are_expected,
)
from dpdist.testing.cases import AuditCase


# ---------------------------------------------------------------------------------------
# PrivCov (Algorithm 1): per-row noisy top-k and Laplace value release
# ---------------------------------------------------------------------------------------

#: PrivCov audit instance: d = 4 features, clip R = 1, n = 40 rows, delta = 0.1.
PRIVCOV_D, PRIVCOV_N, PRIVCOV_CLIP, PRIVCOV_DELTA = 4, 40, 1.0, 0.1


def _privcov_cal(k: int, component_epsilon: float):
    """privcov_calibration at the epsilon that makes ``Delta / b`` equal ``component_epsilon``.

    All of b's dependence on epsilon is through eps_row, linear in epsilon, so one call at
    epsilon = 1 gives the scale factor.
    """
    from dpdist.privacy.mechanisms.privcov.calibration import privcov_calibration

    unit = privcov_calibration(1.0, PRIVCOV_DELTA, PRIVCOV_N, PRIVCOV_D, k, PRIVCOV_CLIP)
    eps = _scale_for(component_epsilon, unit.sensitivity / unit.laplace_scale)
    return privcov_calibration(eps, PRIVCOV_DELTA, PRIVCOV_N, PRIVCOV_D, k, PRIVCOV_CLIP)


def _privcov_mech(k: int, source=None):
    """(the mechanism at the audited point, the mechanism the trials run: ``source`` when
    given)."""
    from dpdist.privacy.mechanisms.privcov.mechanism import PrivCovMechanism

    mech = PrivCovMechanism.from_calibration(_privcov_cal(k, 1.0))
    return mech, _own(source, mech)


def _privcov_row0(S: np.ndarray, mech, n_trials: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_trials`` independent runs of row 0 of Algorithm 1 through the mechanism's own noise
    callables and the engine kernels PrivCov runs.

    The trials are the rows of one tile (each a copy of row 0 of the exact second moment): the
    mechanism's selection sampler and release field give row r its own streams, so trial t
    draws independent selection and release noise, exactly as row 0 of one run would. The
    tile's columns are split in two column tiles (per-row-block ``prepare_rows``, then
    :func:`chunk_row_topk` per tile) merged by :func:`combine_row_topk` (the engine's tree
    step) and released by :func:`finalize_row_topk`. Returns (selected columns (T, k),
    released values (T, k)).
    """
    from dpdist.engine.topk import chunk_row_topk, combine_row_topk, finalize_row_topk

    ns = _seed(seed)
    select, release = mech.selection(ns), mech.release(ns)
    d = S.shape[1]
    tile = np.ascontiguousarray(np.broadcast_to(S[0], (n_trials, d)))
    k = mech.calibration.k
    state = select.prepare_rows(np.arange(n_trials), k)
    h = d // 2
    parts = [chunk_row_topk(tile[:, :h], 0, 0, k, select, state), chunk_row_topk(tile[:, h:], 0, h, k, select, state)]
    rel = finalize_row_topk(combine_row_topk(parts, k, select), release)
    return rel.cols, rel.values


def _entry_epsilon(mech) -> float:
    """The pure epsilon of one released entry on the lattice: ``Delta_Z / s``."""
    return mech.sensitivity_units / mech.noise.scale


def privcov_release_case(source: Any = None) -> AuditCase:
    """PrivCov's Laplace release of one entry, data-level.

    Pair: background rows (1, 1, 0, 0) x 10; the replaced row is (1, 1, 0, 0) in D and
    (1, -1, 0, 0) in D'. Sigma_hat_01 moves by exactly 2 R^2 / n = Delta; with k = d every
    entry of row 0 is released. Statistic: the released value of entry (0, 1). Claim: the
    lattice Laplace release of one entry is ``Delta_Z / s``-DP (the mechanism's
    :class:`~dpdist.privacy.mechanisms.privcov.mechanism.PrivCovMechanism`; the package's per-row claim
    is far above this).
    """
    k = PRIVCOV_D
    mech, run = _privcov_mech(k, source)
    base = np.zeros((PRIVCOV_N, PRIVCOV_D))
    base[1:11, :2] = 1.0
    D, Dp = base.copy(), base.copy()
    D[0, :2] = (1.0, 1.0)
    Dp[0, :2] = (1.0, -1.0)
    S = {0: _exact_second_moment(D, PRIVCOV_CLIP), 1: _exact_second_moment(Dp, PRIVCOV_CLIP)}

    def mech_fn(which: int, n: int, seed: int) -> np.ndarray:
        cols, vals = _privcov_row0(S[which], run, n, seed)
        hit = cols == 1
        return np.where(hit.any(axis=1), (vals * hit).sum(axis=1), -1e6)

    return AuditCase(
        name="privcov/value-release",
        family="privcov",
        component="lattice Laplace value release of one entry of row i (Algorithm 1 line 8): Delta_Z/s-DP "
        "(PrivCovMechanism)",
        notion="approx-dp",
        claimed_epsilon=_entry_epsilon(mech),
        claimed_delta=0.0,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech_fn,
        neighbours=(0, 1),
        default_trials=8_000,
        source=run,
        parameters={"calibration": mech.calibration.to_dict(), "k": k, "mechanism": mech.describe()},
    )


def _privcov_selection_moments(row_clip: float | None = None) -> dict:
    """The clipped second moments of the selection pair (see :func:`privcov_selection_case`),
    through the engine's row scaling when ``row_clip`` is given."""
    base = np.zeros((PRIVCOV_N, PRIVCOV_D))
    base[1:21, :2] = 1.0
    base[21:23, 0] = 1.0
    D, Dp = base.copy(), base.copy()
    D[0, :2] = (1.0, 1.0)
    Dp[0, :2] = (1.0, -1.0)
    return {0: _exact_second_moment(D, PRIVCOV_CLIP, row_clip), 1: _exact_second_moment(Dp, PRIVCOV_CLIP, row_clip)}


def _row0_selection_case(name: str, family: str, mech, run, claimed_epsilon: float, k: int,
                         component: str, row_clip: float | None = None) -> AuditCase:
    """A PrivCov selection audited on the pair of :func:`_privcov_selection_moments` (one score
    of row 0 moves by exactly Delta), through the engine kernels ``run``; statistic 1 if
    S_0 = {1}. The selections (paper, laplace, gumbel, gumbel with a row clip) differ only in
    their mechanism, claim and row clip."""
    S = _privcov_selection_moments(row_clip)

    def mech_fn(which: int, n: int, seed: int) -> np.ndarray:
        cols, _ = _privcov_row0(S[which], run, n, seed)
        return (cols[:, 0] == 1).astype(np.float64)

    return AuditCase(
        name=name,
        family=family,
        component=component,
        notion="approx-dp",
        claimed_epsilon=claimed_epsilon,
        claimed_delta=0.0,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech_fn,
        neighbours=(0, 1),
        default_trials=10_000,
        source=run,
        parameters={"calibration": mech.calibration.to_dict(), "k": k, "mechanism": mech.describe()},
    )


def privcov_selection_case(source: Any = None) -> AuditCase:
    """PrivCov's noisy top-k selection of one entry, data-level, drawn by the mechanism's lazy
    selection sampler (:mod:`dpdist.privacy.noise.lazy_selection`) through the engine kernels.

    Pair (k = 1, d = 4, R = 1): background rows (1, 1, 0, 0) x 20 and (1, 0, 0, 0) x 2; the
    replaced row is (1, 1, 0, 0) in D and (1, -1, 0, 0) in D'. In row 0 only entry (0, 1)
    moves: Sigma_hat_01 = 21/n in D and 19/n in D', so its score moves by exactly Delta = 2/n
    while staying far from 0 (a score near 0 would blunt the shift through the absolute
    value); the diagonal, 23/n in both, stays one Delta above it in D, so that choosing entry 1
    is a tail event of the noise, where the Laplace likelihood ratio is largest. Statistic: 1
    if S_0 = {1}. For a pair that moves a single score of row i, the selection S_i is
    ``Delta_Z / s``-DP (shifting that score's noise by Delta_Z maps one run to the other), the
    component claim audited here.
    """
    k = 1
    mech, run = _privcov_mech(k, source)
    return _row0_selection_case(
        "privcov/selection", "privcov", mech, run, _entry_epsilon(mech), k,
        "noisy top-k selection S_i (Algorithm 1 line 6, the lazy lattice sampler) under a pair moving "
        "one score of row i by Delta: Delta_Z/s-DP (PrivCovMechanism)")


def privcov_row_case(source: Any = None) -> AuditCase:
    """PrivCov's whole row i (selection and release), held to the per-row pure epsilon.

    Pair (k = d = 4): background rows (1, 1, 1, 1) x 10; the replaced row is (1, 1, 1, 1) in
    D and (1, -1, -1, -1) in D': all d - 1 off-diagonal entries of row 0 move by Delta.
    Statistic: the sum of the released off-diagonal values of row 0 (the Laplace likelihood
    ratio is monotone in each). The per-row claim is the mechanism's pure ``c Delta_Z / s``
    (:attr:`~dpdist.privacy.mechanisms.privcov.mechanism.PrivCovMechanism.row_epsilon`; b is the
    paper's term here), which carries a factor of about ``2 sqrt(k' log(d/delta_row)) / (d -
    1)`` over the ``(d - 1) Delta / b`` any row change can reach: noise of half the scale still
    meets it.
    """
    k = PRIVCOV_D
    mech, run = _privcov_mech(k, source)
    base = np.zeros((PRIVCOV_N, PRIVCOV_D))
    base[1:11, :] = 1.0
    D, Dp = base.copy(), base.copy()
    D[0] = 1.0
    Dp[0] = (1.0, -1.0, -1.0, -1.0)
    S = {0: _exact_second_moment(D, PRIVCOV_CLIP), 1: _exact_second_moment(Dp, PRIVCOV_CLIP)}

    def mech_fn(which: int, n: int, seed: int) -> np.ndarray:
        cols, vals = _privcov_row0(S[which], run, n, seed)
        return np.where(cols > 0, vals, 0.0).sum(axis=1)

    return AuditCase(
        name="privcov/row",
        family="privcov",
        component="one row of Algorithm 1 (top-k selection and k+1 value releases): "
        "pure c Delta_Z / s-DP (PrivCovMechanism.row_epsilon)",
        notion="approx-dp",
        claimed_epsilon=mech.row_epsilon,
        claimed_delta=0.0,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech_fn,
        neighbours=(0, 1),
        default_trials=4_000,
        source=run,
        notes="per-row claim has slack about 2 sqrt(k' log(d/delta_row)) / (d - 1) >= 2 over the best row change",
        parameters={"calibration": mech.calibration.to_dict(), "k": k, "mechanism": mech.describe()},
    )


def privcov_estimator_case(source: Any = None) -> AuditCase:
    """The full estimator :func:`~dpdist.algorithms.sparse_covariance.private_sparse_covariance`
    with ``selection="paper"`` run once per trial (dask, synchronous scheduler, 2 x 2 tiles of the second moment) on the
    pair of :func:`privcov_release_case`; statistic: the released value of entry (0, 1).

    ``source`` is the builder ``calibration -> mechanism`` the estimator calls (default
    ``PrivCovMechanism.from_calibration``): the name ``PrivCovMechanism`` inside
    :mod:`dpdist.algorithms.sparse_covariance.release` is replaced, for the duration of the trials, by
    a stand-in whose ``from_calibration`` is ``source``; the estimator itself is not edited.
    """
    from unittest import mock

    import dpdist.algorithms.sparse_covariance.release as module
    from dpdist.algorithms.sparse_covariance import private_sparse_covariance
    from dpdist.privacy.mechanisms.privcov.mechanism import PrivCovMechanism

    k = PRIVCOV_D
    mech, _ = _privcov_mech(k)
    cal = mech.calibration
    base = np.zeros((PRIVCOV_N, PRIVCOV_D))
    base[1:11, :2] = 1.0
    D, Dp = base.copy(), base.copy()
    D[0, :2] = (1.0, 1.0)
    Dp[0, :2] = (1.0, -1.0)
    data = {0: D, 1: Dp}

    run = _own(source, PrivCovMechanism.from_calibration)

    class _StandIn:
        @staticmethod
        def from_calibration(c):
            return run(c)

    def mech_fn(which: int, n: int, seed: int) -> np.ndarray:
        out = np.empty(n)
        with mock.patch.object(module, "PrivCovMechanism", _StandIn), _seeded_fits_are_expected():
            for t in range(n):
                rel = private_sparse_covariance(
                    data[which], k, cal.epsilon, cal.delta, clip=PRIVCOV_CLIP, random_state=int(seed) * 1_000_003 + t,
                    scheduler="synchronous", tile_size=2, assume_centered=True, selection="paper",
                )
                cols, vals = rel.values["selected"][0], rel.values["selected_values"][0]
                out[t] = vals[cols == 1][0] if np.any(cols == 1) else -1e6
        return out

    return AuditCase(
        name="privcov/estimator",
        family="privcov",
        component="private_sparse_covariance end to end, released entry (0, 1): Delta_Z/s-DP (PrivCovMechanism)",
        notion="approx-dp",
        claimed_epsilon=_entry_epsilon(mech),
        claimed_delta=0.0,
        claimed_mu=None,
        claimed_rho=None,
        mechanism=mech_fn,
        neighbours=(0, 1),
        default_trials=1_500,
        source=run,
        slow=True,
        parameters={"calibration": cal.to_dict(), "k": k, "mechanism": mech.describe()},
    )


# ---------------------------------------------------------------------------------------
# PrivCov with the zCDP analysis (selection="laplace"): Laplace selection, Gaussian release
# ---------------------------------------------------------------------------------------


def _privcov_laplace_mech(k: int, claim, source=None):
    """(the :class:`~dpdist.privacy.mechanisms.privcov.mechanism.PrivCovZCDPMechanism` at the epsilon
    that makes ``claim(mechanism)`` equal 1, the mechanism the trials run). The calibration
    is not linear in epsilon (the CKS20 inversion), so the epsilon is found by a root search
    on the package's own mechanism."""
    from scipy import optimize

    from dpdist.privacy.mechanisms.privcov.mechanism import privcov_zcdp_mechanism

    def build(eps: float):
        return privcov_zcdp_mechanism(eps, PRIVCOV_DELTA, PRIVCOV_N, PRIVCOV_D, k, PRIVCOV_CLIP)

    eps = optimize.brentq(lambda e: claim(build(e)) - 1.0, 0.05, 500.0, xtol=1e-6)
    mech = build(eps)
    return mech, _own(source, mech)


def _selection_claim(mech) -> float:
    """Pure epsilon of a selection under a pair moving one score by Delta: ``Delta_Z / s``."""
    return mech.sensitivity_units / mech.noise.scale


def _release_entry_mu(mech) -> float:
    """GDP mu of one released coordinate moved by ``Delta_fl``: ``Delta_Z1 / s_r``, with
    ``Delta_Z1`` the per-coordinate sensitivity on the release's lattice."""
    cal = mech.calibration
    units = mech.release_noise.lattice.sensitivity_units(cal.sensitivity * cal.float_factor)
    return units / mech.release_noise.scale


def privcov_laplace_selection_case(source: Any = None) -> AuditCase:
    """``selection="laplace"``: the per-row noisy top-k selection (lattice Laplace, the lazy
    sampler through the engine kernels) on the pair of :func:`privcov_selection_case` (k = 1,
    one score of row 0 moves by exactly Delta). Claim: ``Delta_Z / s``-DP for a pair moving one
    score (shift that score's noise by Delta_Z), with s the zCDP calibration's selection scale
    (:class:`~dpdist.privacy.mechanisms.privcov.mechanism.PrivCovZCDPMechanism`). Statistic: 1 if S_0 = {1}."""
    k = 1
    mech, run = _privcov_laplace_mech(k, _selection_claim, source)
    return _row0_selection_case(
        "privcov-laplace/selection", "privcov-laplace", mech, run, _selection_claim(mech), k,
        "noisy top-k selection S_i of selection='laplace' (lazy lattice Laplace sampler, zCDP calibration) "
        "under a pair moving one score of row i by Delta: Delta_Z/s-DP (PrivCovZCDPMechanism)")


#: Row-norm level of the row-clipped release audit: ``C = sqrt(2) R``, so ``C min(R sqrt(k'), C)
#: = 2 R^2`` and the release's L2 sensitivity is ``2 Delta`` (against ``sqrt(d k') Delta = 4 Delta``
#: without the row clip, at d = k' = 4).
PRIVCOV_ROW_CLIP = math.sqrt(2.0) * PRIVCOV_CLIP


def _gumbel_entry_u(mech) -> float:
    """Most a single score moves in Gumbel units when one entry of the moment moves by
    ``Delta_fl``: ``w (Delta_fl + 2**-52 C) + 2**-30`` (``step_epsilon / 2`` without a row clip;
    with one, step_epsilon is the rows' root-mean-square range and this is larger)."""
    from dpdist.privacy.noise.gumbel import SCORE_BITS

    cal = mech.calibration
    return mech.weight * (cal.sensitivity * cal.float_factor + 2.0**-52 * mech.score_bound) + 2.0**-SCORE_BITS


def _privcov_gumbel_mech(k: int, source=None, row_clip: float = math.inf):
    """(the :class:`~dpdist.privacy.mechanisms.privcov.mechanism.PrivCovGumbelMechanism` at the epsilon
    whose selection moves a single score by exactly one Gumbel unit when one entry moves by
    Delta, ``u = 1``, the mechanism the trials run), by a root search on the package's own
    mechanism (the calibration is not linear in epsilon)."""
    from scipy import optimize

    from dpdist.privacy.mechanisms.privcov.mechanism import privcov_gumbel_mechanism

    def build(eps: float):
        return privcov_gumbel_mechanism(eps, PRIVCOV_DELTA, PRIVCOV_N, PRIVCOV_D, k, PRIVCOV_CLIP, row_clip=row_clip)

    eps = optimize.brentq(lambda e: _gumbel_entry_u(build(e)) - 1.0, 0.05, 500.0, xtol=1e-6)
    mech = build(eps)
    return mech, _own(source, mech)


def privcov_gumbel_selection_case(source: Any = None) -> AuditCase:
    """``selection="gumbel"``: the per-row exact Gumbel top-k selection (the sampler through the
    engine kernels, two column tiles merged exactly) on the pair of
    :func:`privcov_selection_case` (k = 1, one score of row 0 moves by exactly Delta). Claim:
    ``u``-DP with ``u = step_epsilon / 2`` the most a score moves in Gumbel units: one
    exponential-mechanism step whose scores move by at most u is 2u-bounded range, and when a
    single score moves (by a) every output's probability changes by a factor within
    ``[e^-|a|, e^|a|]`` (the chosen one by ``e^a Z'/Z``, the others by ``Z'/Z``). Statistic: 1 if
    S_0 = {1}."""
    k = 1
    mech, run = _privcov_gumbel_mech(k, source)
    return _row0_selection_case(
        "privcov-gumbel/selection", "privcov-gumbel", mech, run, _gumbel_entry_u(mech), k,
        "exact Gumbel top-k selection S_i of selection='gumbel' (peeling exponential mechanism, zCDP "
        "calibration) under a pair moving one score of row i by Delta: u-DP, u = step_epsilon/2 "
        "(PrivCovGumbelMechanism)")


def privcov_gumbel_rowclip_selection_case(source: Any = None) -> AuditCase:
    """``selection="gumbel"`` with the L2 row clip (``C = sqrt(2) R``): the selection's weight is
    calibrated for the rows' root-mean-square sensitivity (``2 C min(R, C) / (n sqrt(d))``, here
    ``Delta / sqrt(2)``), so a pair that moves one score of one row by the full Delta moves it by
    ``u = w (Delta_fl + 2**-52 C) + 2**-30``, more than ``step_epsilon / 2``; such a pair moves
    no other row (its changed row is ``(1, +-1, 0, 0)``, of norm C). Data-level, through the
    engine's row scaling; the pair of :func:`privcov_selection_case`. Claim: u-DP for row 0's
    selection (the whole release is zCDP by Lemma 4a, which this pair does not exhaust).
    Statistic: 1 if S_0 = {1}."""
    k = 1
    mech, run = _privcov_gumbel_mech(k, source, row_clip=PRIVCOV_ROW_CLIP)
    return _row0_selection_case(
        "privcov-gumbel/row-clip-selection", "privcov-gumbel", mech, run, _gumbel_entry_u(mech), k,
        "exact Gumbel top-k selection S_i of selection='gumbel' with the L2 row clip (weight from the rows' "
        "root-mean-square sensitivity) under a pair moving one score of row i by Delta: u-DP, u = w (Delta_fl + "
        "2**-52 C) + 2**-30 (PrivCovGumbelMechanism)", row_clip=PRIVCOV_ROW_CLIP)


def privcov_laplace_release_case(source: Any = None) -> AuditCase:
    """``selection="laplace"``: the Gaussian release of the selected values, data-level, on the
    pair of :func:`privcov_release_case` (k = d, so every entry of row 0 is released; only
    Sigma_hat_01 moves, by exactly Delta). Statistic: the released value of entry (0, 1).
    Claim: that coordinate of the lattice Gaussian release is ``Delta_Z1 / s_r``-GDP (the
    release of :class:`~dpdist.privacy.mechanisms.privcov.mechanism.PrivCovZCDPMechanism`, whose whole
    release is the Gaussian mechanism at L2 sensitivity ``sqrt(d k') Delta``); the claimed
    (epsilon, delta) is that mu's exact profile at delta = 0.1."""
    k = PRIVCOV_D
    mech, run = _privcov_laplace_mech(k, _release_entry_mu, source)
    return _entry01_release_case(
        "privcov-laplace/value-release", "privcov-laplace", mech, run, k,
        "lattice Gaussian value release of one entry of row i, selection='laplace': Delta_Z1/s_r-GDP "
        "(PrivCovZCDPMechanism)")


def _entry01_release_case(name: str, family: str, mech, run, k: int, component: str,
                          row_clip: float | None = None) -> AuditCase:
    """A PrivCov value release audited on the pair of :func:`privcov_laplace_release_case`
    (rows ``(1, 1, 0, 0)`` and ``(1, -1, 0, 0)``: only Sigma_hat_01 moves, by exactly Delta),
    through the engine's row scaling when ``row_clip`` is given; statistic: the released value
    of entry (0, 1); claim ``Delta_Z1 / s_r``-GDP. The zCDP mechanisms differ only in their
    mechanism and row clip."""
    from dpdist.privacy.accounting import gaussian_epsilon

    base = np.zeros((PRIVCOV_N, PRIVCOV_D))
    base[1:11, :2] = 1.0
    D, Dp = base.copy(), base.copy()
    D[0, :2] = (1.0, 1.0)
    Dp[0, :2] = (1.0, -1.0)
    S = {0: _exact_second_moment(D, PRIVCOV_CLIP, row_clip), 1: _exact_second_moment(Dp, PRIVCOV_CLIP, row_clip)}

    def mech_fn(which: int, n: int, seed: int) -> np.ndarray:
        cols, vals = _privcov_row0(S[which], run, n, seed)
        hit = cols == 1
        return np.where(hit.any(axis=1), (vals * hit).sum(axis=1), -1e6)

    mu = _release_entry_mu(mech)
    return AuditCase(
        name=name,
        family=family,
        component=component,
        notion="gdp",
        claimed_epsilon=gaussian_epsilon(mu, PRIVCOV_DELTA),
        claimed_delta=PRIVCOV_DELTA,
        claimed_mu=mu,
        claimed_rho=None,
        mechanism=mech_fn,
        neighbours=(0, 1),
        default_trials=10_000,
        source=run,
        parameters={"calibration": mech.calibration.to_dict(), "k": k, "mechanism": mech.describe()},
    )


def privcov_gumbel_release_case(source: Any = None) -> AuditCase:
    """``selection="gumbel"`` with the L2 row clip: the Gaussian release of the selected values,
    data-level, through the engine's row scaling (rows clipped to ``C = sqrt(2) R``). The pair
    of :func:`privcov_laplace_release_case` (rows ``(1, 1, 0, 0)`` and ``(1, -1, 0, 0)``, both of
    norm C: only Sigma_hat_01 moves, by exactly Delta); k = d. The release's sigma is calibrated
    for the row route's L2 sensitivity (half the entry route's here). Claim: the released value
    of entry (0, 1) is ``Delta_Z1 / s_r``-GDP (one coordinate moving by at most Delta_fl);
    statistic: that value."""
    from scipy import optimize

    from dpdist.privacy.mechanisms.privcov.mechanism import privcov_gumbel_mechanism

    k = PRIVCOV_D

    def build(eps: float):
        return privcov_gumbel_mechanism(eps, PRIVCOV_DELTA, PRIVCOV_N, PRIVCOV_D, k, PRIVCOV_CLIP,
                                        row_clip=PRIVCOV_ROW_CLIP)

    eps = optimize.brentq(lambda e: _release_entry_mu(build(e)) - 1.0, 0.05, 500.0, xtol=1e-6)
    mech = build(eps)
    return _entry01_release_case(
        "privcov-gumbel/value-release", "privcov-gumbel", mech, _own(source, mech), k,
        "lattice Gaussian value release of one entry of row i, selection='gumbel' with the L2 row clip: "
        "Delta_Z1/s_r-GDP (PrivCovGumbelMechanism, release sensitivity 2 C min(R sqrt(k'), C) / n)",
        row_clip=PRIVCOV_ROW_CLIP)
