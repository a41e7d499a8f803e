"""PrivCov's release from validated values (:func:`release_privcov`): compute the clipped second
moment, select and release each row's top k, assemble the symmetric estimate; and the helpers
the estimator validates and calibrates with (selection, clips, calibration, error bound).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpdist.algorithms._base import nonfinite_note
from dpdist.algorithms._centering import centre, compose_stages, mean_notes, release_mean
from dpdist.algorithms.sparse_covariance.bounds import (
    privcov_error_bound,
    privcov_gumbel_error_bound,
    privcov_zcdp_error_bound,
)
from dpdist.data.validation import chunk_reading_notes
from dpdist.engine.gram import clipped_second_moment, nonfinite_guard
from dpdist.engine.runtime import compute
from dpdist.engine.topk import row_topk_release
from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.mechanisms.privcov.calibration import (
    PrivCovCalibration,
    privcov_calibration,
    check_row_clip,
    gaussian_row_norm_bound,
    subgaussian_clip,
)
from dpdist.privacy.mechanisms.privcov.zcdp_calibration import (
    PrivCovZCDPCalibration,
    privcov_gumbel_calibration,
    privcov_zcdp_calibration,
)
from dpdist.privacy.accounting import release_guarantee
from dpdist.privacy.mechanisms.base import residual_note
from dpdist.privacy.mechanisms.privcov.mechanism import (
    PrivCovGumbelMechanism,
    PrivCovMechanism,
    PrivCovZCDPMechanism,
)
from dpdist.privacy.noise.streams import resolve_random_state
from dpdist.privacy.release import Release, warn_if_unsafe


MECHANISM = "PrivCov (COLT 2026, Algorithm 1)"
MECHANISM_ZCDP = "PrivCov (COLT 2026, Algorithm 1) with zCDP accounting: Laplace selection, Gaussian release"
MECHANISM_GUMBEL = ("PrivCov (COLT 2026, Algorithm 1) with zCDP accounting: Gumbel top-k selection (peeling "
                    "exponential mechanism), Gaussian release")
#: ``selection=`` values: "gumbel" (default) and "laplace", the zCDP analyses of
#: docs/privacy/privcov.md (the selection by Gumbel keys or by Laplace noise, then one Gaussian
#: release); "paper", Algorithm 1 as the paper writes it (per-row Laplace, advanced composition).
SELECTIONS = ("gumbel", "laplace", "paper")
ZCDP_NOTE = (
    "zCDP analysis: each row's selection is pure 2k Delta/b-DP, the released values one Gaussian mechanism of "
    "L2 sensitivity sqrt(d k') Delta (k' = k+1 released values a row, S_i plus the diagonal); zCDP "
    "composition, converted by Canonne-Kamath-Steinke 2020"
)
GUMBEL_NOTE = (
    "zCDP analysis: each row's selection is k steps of the exponential mechanism (Gumbel top-k), each "
    "2 Delta/beta-bounded range, hence (2 Delta/beta)^2/8-zCDP; the released values one Gaussian mechanism of "
    "L2 sensitivity sqrt(d k') Delta (k' = k+1 released values a row, S_i plus the diagonal); zCDP "
    "composition, converted by Canonne-Kamath-Steinke 2020"
)
K_PLUS_ONE_NOTE = (
    "Laplace scale calibrated with k+1 released entries per row (S_i plus the diagonal, "
    "which line 11 releases even when i is not in S_i); the paper's formula uses k"
)


def assemble_privcov(cols: np.ndarray, values: np.ndarray, diag: np.ndarray) -> sp.csr_array:
    """Lines 9-17 of Algorithm 1: the symmetric AND rule, as post-processing.

    Parameters
    ----------
    cols : (d, k) int array
        ``cols[i]`` is the released set S_i.
    values : (d, k) float array
        The released values Sigma~_{i, S_i}.
    diag : (d,) float array
        The released diagonal Sigma~_ii.

    Returns
    -------
    scipy.sparse.csr_array
        M: ``M_ii = Sigma~_ii``; for i != j, ``M_ij = (Sigma~_ij + Sigma~_ji) / 2`` when
        ``j in S_i`` and ``i in S_j``, else 0. Exactly symmetric, (k+1)-RCS.
    """
    d = diag.shape[0]
    rows = np.repeat(np.arange(d, dtype=np.int64), cols.shape[1])
    c = cols.ravel().astype(np.int64)
    v = values.ravel()
    off = (c >= 0) & (c != rows)
    rows, c, v = rows[off], c[off], v[off]
    keys = rows * d + c
    order = np.argsort(keys)
    keys, rows, c, v = keys[order], rows[order], c[order], v[order]
    rev = c * d + rows
    pos = np.searchsorted(keys, rev)
    pos_clipped = np.minimum(pos, max(len(keys) - 1, 0))
    mutual = (pos < len(keys)) & (keys[pos_clipped] == rev) if len(keys) else np.zeros(0, bool)
    sym = (v[mutual] + v[pos_clipped[mutual]]) / 2
    all_rows = np.concatenate([rows[mutual], np.arange(d)])
    all_cols = np.concatenate([c[mutual], np.arange(d)])
    all_vals = np.concatenate([sym, diag])
    return sp.csr_array((all_vals, (all_rows, all_cols)), shape=(d, d))


_MECHANISM_NAMES = {"paper": "PrivCovMechanism", "laplace": "PrivCovZCDPMechanism", "gumbel": "PrivCovGumbelMechanism"}


def _mechanism_class(selection: str):
    """The mechanism class of ``selection``, looked up by its name in this module at call time
    (an audit may stand a twin in for the class)."""
    return globals()[_MECHANISM_NAMES[selection]]


def _check_selection(selection, name: str = "selection") -> str:
    if not isinstance(selection, str) or selection not in SELECTIONS:
        raise ValidationError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    return selection


def _stage_composition(selection: str) -> str:
    """How the private mean composes with the covariance stage: in zCDP (the mean's Gaussian
    ``f rho``, the zCDP analyses' ``(1 - f) rho``) for every selection accounted in zCDP, by
    basic composition for Algorithm 1 (``"paper"``, reproduced as printed)
    (:mod:`dpdist.algorithms._centering`)."""
    return "basic" if selection == "paper" else "zcdp"


def _calibrate(selection: str, epsilon, delta, n: int, d: int, k: int, R: float, beta: float,
               C: float = math.inf):
    """The calibration of ``selection`` (all are functions of public values only); C is the
    row-norm level (``math.inf``: no row clip; always so for ``"paper"``)."""
    if selection == "paper":
        return privcov_calibration(epsilon, delta, n, d, k, R)
    if selection == "laplace":
        return privcov_zcdp_calibration(epsilon, delta, n, d, k, R, beta, row_clip=C)
    return privcov_gumbel_calibration(epsilon, delta, n, d, k, R, beta, row_clip=C)


def _selection_of(cal) -> str:
    """The ``selection`` a calibration belongs to."""
    if isinstance(cal, PrivCovCalibration):
        return "paper"
    return "laplace" if isinstance(cal, PrivCovZCDPCalibration) else "gumbel"


def _error_bound(cal, sigma: float, beta: float) -> dict:
    """The error bound of a calibration's selection."""
    selection = _selection_of(cal)
    if selection == "paper":
        return privcov_error_bound(cal, sigma, beta)
    if selection == "laplace":
        return privcov_zcdp_error_bound(cal, sigma, beta)
    return privcov_gumbel_error_bound(cal, sigma, beta)


def _resolve_clip(clip, sigma, n: int, d: int, beta: float) -> tuple[float, str]:
    if clip is not None:
        return float(clip), "given"
    return subgaussian_clip(sigma, n, d, beta), "R = sigma * sqrt(2 log(6 n d / beta)) (proof of Theorem 1)"


def _check_row_clip(row_clip, name: str = "row_clip"):
    """``row_clip`` validated: None, a positive float or inf."""
    return check_row_clip(row_clip)


def _resolve_clips(clip, sigma, row_clip, selection: str, n: int, d: int, beta: float) -> tuple:
    """``(R, R's rule, C, C's rule)``: the entry clip and the row-norm level (``math.inf``: none).

    The row clip is on for ``"gumbel"`` and ``"laplace"`` when ``row_clip`` is given (finite), or
    when it is None and sigma is known: then ``C = sigma sqrt(d + 2 sqrt(d t) + 2 t)``, ``t =
    log(6 n / beta)`` (no row of n Gaussian rows is scaled down but with probability beta/6) and,
    when R follows sigma too, ``R = sigma sqrt(2 log(12 n d / beta))`` (no entry clipped but with
    probability beta/6): the error bound's "no clipping" event keeps its beta/3. The values are
    validated (one of clip / sigma given; no ``row_clip`` with ``"paper"``).
    """
    if selection == "paper" or row_clip == math.inf or (row_clip is None and sigma is None):
        R, rule = _resolve_clip(clip, sigma, n, d, beta)
        return R, rule, math.inf, "none" if selection == "paper" or row_clip is None else "given (inf: none)"
    if row_clip is None:
        C, c_rule = (gaussian_row_norm_bound(sigma, n, d, beta / 6),
                     "C = sigma * sqrt(d + 2 sqrt(d t) + 2 t), t = log(6 n / beta) (Laurent-Massart)")
    else:
        C, c_rule = row_clip, "given"
    if clip is not None:
        return float(clip), "given", C, c_rule
    return (subgaussian_clip(sigma, n, d, beta / 2), "R = sigma * sqrt(2 log(12 n d / beta)) (proof of Theorem 1, "
            "beta/6 to the entry clip and beta/6 to the row clip)", C, c_rule)


def release_privcov(X: Any, p: Any) -> Release:
    """PrivCov's release of the opened input ``X`` from validated values ``p`` (a
    :class:`~dpdist.algorithms._constraints.Params` of :class:`SparseCovariance`'s table and its
    shape rules: ``n_samples``, ``n_features``, the clips, the centring, the budget's shares,
    the calibration ``cal`` and the mean's mechanism); checks nothing again.

    The guarantee, the noise and what leaves the workers are described in
    :func:`~dpdist.algorithms.sparse_covariance.private_sparse_covariance`.
    """
    k, epsilon, delta, selection, on_nonfinite = p.k, p.epsilon, p.delta, p.selection, p.on_nonfinite
    n, d, R, C, cal, centering, mean_mech = p.n_samples, p.n_features, p.clip_level, p.row_clip_level, p.cal, \
        p.centering, p.mean_mech
    scheduler = p.scheduler
    seed = resolve_random_state(p.random_state)
    composition = _stage_composition(selection)
    mech = _mechanism_class(selection).from_calibration(cal)
    # the stated guarantee is the charged budget, certified by the accountant from the events
    if mean_mech is None:
        privacy = release_guarantee([mech.event()], budget=ApproxDP(epsilon, delta))
    else:
        privacy = compose_stages(ApproxDP(epsilon, delta), [([mean_mech.event()], p.mean_share),
                                                            ([mech.event()], p.cov_share)], composition)

    Xg, all_finite = nonfinite_guard(X, on_nonfinite)
    mu = centering.mean
    if mean_mech is not None:
        mu = release_mean(Xg, all_finite, mean_mech, seed, scheduler=scheduler)
    S = clipped_second_moment(centre(Xg, mu), R, tile=p.tile_size, row_clip=None if C == math.inf else C)
    # selection noise: Laplace drawn lazily (exactly the law of d i.i.d. lattice Laplace per row, O(d k)
    # draws), or exact Gumbel keys of every entry (merged exactly across tiles by the sampler)
    parts = row_topk_release(S, k, mech.selection(seed), mech.release(seed), guard=all_finite, symmetric=True)
    results = compute(*parts, scheduler=scheduler)
    if any(r is None for r in results):
        raise ValidationError(
            "X contains NaN or infinite values; nothing was released. Clean the data or pass "
            "on_nonfinite='zero' to replace such rows by zero rows"
        )
    results = sorted(results, key=lambda r: r.row_start)
    cols = np.vstack([r.cols for r in results])
    values = np.vstack([r.values for r in results])
    # S_i is released as a set, its columns in increasing order: the engine ranks them by noisy
    # score, an order the selection's guarantee does not cover (it is a function of the set
    # under neither neighbour's coupling)
    order = np.argsort(np.where(cols < 0, np.iinfo(np.int64).max, cols), axis=1, kind="stable")
    cols = np.take_along_axis(cols, order, axis=1)
    values = np.take_along_axis(values, order, axis=1)
    diag = np.concatenate([r.diag for r in results])
    M = assemble_privcov(cols, values, diag)

    if selection == "paper":
        notes = [K_PLUS_ONE_NOTE, f"Laplace scale: {cal.laplace_rule}", residual_note(d * (2 * k + 1), mech.noise)]
        scales = {f"laplace_{role}": scale for role, scale in mech.noise_scales().items()}
    elif selection == "laplace":
        notes = [ZCDP_NOTE, residual_note(d * k, mech.noise), residual_note(d * (k + 1), mech.release_noise)]
        scales = {"laplace_select": mech.noise_scales()["select"], "gaussian_release": mech.noise_scales()["release"]}
    else:
        notes = [GUMBEL_NOTE, mech.selection_residual_note(), residual_note(d * (k + 1), mech.release_noise)]
        scales = {"gumbel_select": mech.noise_scales()["select"], "gaussian_release": mech.noise_scales()["release"]}
    if C != math.inf:
        clip_note = (f"row clip: entry-clipped rows scaled to L2 norm at most C = {C:.6g}; the release's L2 "
                     f"sensitivity is min(sqrt(d k') Delta, 2 C min(R sqrt(k'), C) / n) (float factor included) = "
                     f"{cal.release_sensitivity:.6g}")
        if selection == "gumbel":
            clip_note += (f"; the selection's steps are calibrated to the rows' root-mean-square score sensitivity "
                          f"min(Delta, 2 C min(R, C) / (n sqrt(d))) = {cal.selection_sensitivity:.6g} in place of "
                          "Delta (the rows' largest score changes have L2 norm at most 2 C min(R, C) / n)")
        notes.append(clip_note)
    notes += [nonfinite_note(on_nonfinite), *chunk_reading_notes(X)]
    events = [("PrivCov rows", mech.event())]
    mechanisms = [mech.describe()]
    values = {"covariance": M, "selected": cols, "selected_values": values, "diagonal": diag}
    if mu is not None:
        values["mean"] = mu
    if mean_mech is not None:
        events.insert(0, ("mean", mean_mech.event()))  # in the order they ran
        mechanisms.append(mean_mech.describe())
        notes.extend(mean_notes(mean_mech))
        scales["mean_gaussian"] = mean_mech.noise_scales()["gaussian"]
    return warn_if_unsafe(Release(
        mechanism={"paper": MECHANISM, "laplace": MECHANISM_ZCDP, "gumbel": MECHANISM_GUMBEL}[selection],
        privacy=privacy,
        parameters={
            "n_samples": n,
            "n_features": d,
            "k": k,
            "sigma": p.sigma,
            "clip": R,
            "clip_rule": p.clip_rule,
            "beta": p.beta,
            "on_nonfinite": on_nonfinite,
            "tile_size": p.tile_size,
            "selection": selection,
            "calibration": cal.to_dict(),
            "centering": centering.record(mean_mech, centering.composition(epsilon, delta, composition)),
            **({} if selection == "paper" else {"row_clip": C, "row_clip_rule": p.row_clip_rule}),
        },
        noise_scales=scales,
        values=values,
        seeding=seed.describe(),
        notes=tuple(notes),
        events=tuple(events),
        mechanisms=tuple(mechanisms),
    ))
