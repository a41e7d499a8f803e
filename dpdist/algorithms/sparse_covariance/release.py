"""PrivCov as a function: validate, calibrate the chosen selection, compute the clipped second
moment, select and release each row's top k, assemble the symmetric estimate.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpdist._validation import check_int, check_positive, check_probability
from dpdist.algorithms._base import check_nonfinite, nonfinite_note
from dpdist.algorithms._centering import (
    DEFAULT_MEAN_FRACTION,
    centre,
    check_centering,
    compose_stages,
    mean_mechanism,
    mean_notes,
    release_mean,
)
from dpdist.algorithms.sparse_covariance.bounds import (
    privcov_error_bound,
    privcov_gumbel_error_bound,
    privcov_zcdp_error_bound,
)
from dpdist.data.validation import as_dask_array, chunk_reading_notes
from dpdist.engine.gram import DEFAULT_TILE, clipped_second_moment, nonfinite_guard
from dpdist.engine.runtime import check_scheduler, compute
from dpdist.engine.topk import row_topk_release
from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
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


def _check_selection(selection) -> str:
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


def _check_params(k, epsilon, delta, sigma, clip, beta) -> tuple:
    """PrivCov's parameters, validated (:mod:`dpdist._validation`); one of sigma / clip is required."""
    k = check_int(k, "k")
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    beta = check_probability(beta, "beta")
    sigma = check_positive(sigma, "sigma", allow_none=True)
    clip = check_positive(clip, "clip", allow_none=True)
    if sigma is None and clip is None:
        raise ValidationError("give either sigma (the sub-Gaussian scale) or clip (the truncation level R)")
    return k, epsilon, delta, sigma, clip, beta


def _resolve_clip(clip, sigma, n: int, d: int, beta: float) -> tuple[float, str]:
    if clip is not None:
        return float(clip), "given"
    if sigma is None:
        raise ValidationError("give either sigma (the sub-Gaussian scale) or clip (the truncation level R)")
    return subgaussian_clip(sigma, n, d, beta), "R = sigma * sqrt(2 log(6 n d / beta)) (proof of Theorem 1)"


def _check_row_clip(row_clip, selection: str):
    """``row_clip`` validated: None, a positive float or inf; ``"paper"`` takes none."""
    row_clip = check_row_clip(row_clip)
    if selection == "paper" and row_clip is not None:
        raise ValidationError("row_clip applies to selection='gumbel' and 'laplace' only; selection='paper' is "
                              "Algorithm 1 as printed (entry clip only)")
    return row_clip


def _resolve_clips(clip, sigma, row_clip, selection: str, n: int, d: int, beta: float) -> tuple:
    """``(R, R's rule, C, C's rule)``: the entry clip and the row-norm level (``math.inf``: none).

    The row clip is on for ``"gumbel"`` and ``"laplace"`` when ``row_clip`` is given (finite), or
    when it is None and sigma is known: then ``C = sigma sqrt(d + 2 sqrt(d t) + 2 t)``, ``t =
    log(6 n / beta)`` (no row of n Gaussian rows is scaled down but with probability beta/6) and,
    when R follows sigma too, ``R = sigma sqrt(2 log(12 n d / beta))`` (no entry clipped but with
    probability beta/6): the error bound's "no clipping" event keeps its beta/3.
    """
    row_clip = _check_row_clip(row_clip, selection)
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
    if sigma is None:
        raise ValidationError("give either sigma (the sub-Gaussian scale) or clip (the truncation level R)")
    return (subgaussian_clip(sigma, n, d, beta / 2), "R = sigma * sqrt(2 log(12 n d / beta)) (proof of Theorem 1, "
            "beta/6 to the entry clip and beta/6 to the row clip)", C, c_rule)


def private_sparse_covariance(
    X: Any,
    k: int,
    epsilon: float,
    delta: float,
    *,
    sigma: float | None = None,
    clip: float | None = None,
    beta: float = 0.1,
    random_state: int | None = None,
    scheduler: Any = None,
    on_nonfinite: str = "zero",
    tile_size: int = DEFAULT_TILE,
    assume_centered: bool = False,
    mean: Any = None,
    mean_fraction: float = DEFAULT_MEAN_FRACTION,
    mean_clip: float | None = None,
    selection: str = "gumbel",
    row_clip: float | None = None,
) -> Release:
    """Release an (epsilon, delta)-DP sparse estimate of the covariance of ``X``.

    Parameters
    ----------
    X : array-like, dask array, zarr.Array or str
        ``n x d`` data, one row per individual. The estimate is the covariance ``(1/n)
        sum (x - mean)(x - mean)^T`` around a private or public mean, or with
        ``assume_centered=True`` the second moment ``(1/n) sum x x^T``.
    k : int
        Row sparsity: S_i keeps the k largest noisy entries of row i.
    epsilon, delta : float
        The privacy budget; epsilon > 0, delta in (0, 1).
    sigma : float, optional
        Public sub-Gaussian scale; sets ``clip`` by the paper's rule when ``clip`` is None.
    clip : float, optional
        Entrywise truncation level R (overrides the rule).
    beta : float
        Failure probability used by the clip rule and the error bound.
    random_state : None or int
        None: OS entropy (use this to release). An int seeds the noise (tests only).
    scheduler : see :mod:`dpdist.engine.runtime`.
    on_nonfinite : {"zero", "raise"}, default "zero"
        "zero": every row holding a NaN or inf is replaced by a zero row before any
        statistic (a per-row map inside the neighbour relation; nothing counts or reports
        the rows). "raise": explicit validation mode: such data raise ValidationError after
        the pass, before anything is released; the error (or its absence) reveals one bit
        about the data, which the release records in its notes.
    tile_size : int
        Tile width of the second moment (memory per task ~ 8 * tile_size**2 bytes).
    assume_centered : bool, default False
        True: the data are taken as mean-zero and the whole budget estimates the second
        moment (scikit-learn's ``assume_centered``). False: the data are centred first.
    mean : array-like (d,), optional
        A public mean to centre at (recorded in the release as public; costs no budget).
        Without it (and ``assume_centered=False``) the mean is released privately.
    mean_fraction : float in (0, 1), default 0.1
        Share of the budget spent on the private mean: of rho for the zCDP selections
        (``"gumbel"``, ``"laplace"``: the two stages compose in zCDP), of (epsilon, delta) for
        ``selection="paper"``.
    mean_clip : float, optional
        L2 radius the rows are scaled to for the private mean: it must cover the norms
        ``||x||`` of the raw rows. Default ``clip * sqrt(d)`` (rows in the box
        ``[-R, R]^d``).
    row_clip : float, optional
        L2 bound C the entry-clipped rows are scaled to; see :class:`SparseCovariance`.
    selection : {"gumbel", "laplace", "paper"}, default "gumbel"
        "gumbel": each row's k columns of largest keys ``|S_ij| / beta_g + G_ij`` (exact
        Gumbel noise G on a public score lattice), the peeling exponential mechanism, and the
        selected values and the diagonal released by one Gaussian mechanism, all accounted in
        zCDP (:class:`~dpdist.privacy.mechanisms.privcov.PrivCovGumbelMechanism`; proof in
        docs/privacy/privcov.md): at d = 1,000, k = 20, epsilon 1, delta 1e-6 a selection
        noise 63x and a release noise 20x smaller than "paper"'s. "laplace": the same release
        after a per-row top-k selection with Laplace noise, calibrated by zCDP
        (:class:`~dpdist.privacy.mechanisms.privcov.PrivCovZCDPMechanism`). "paper":
        Algorithm 1 as the paper writes it (per-row Laplace for selection and values,
        advanced composition; the noise is described below).

    Returns
    -------
    Release
        ``values["covariance"]`` (scipy.sparse CSR, d x d, symmetric), ``values["selected"]``
        (d x k, the sets S_i), ``values["selected_values"]``, ``values["diagonal"]`` and, when
        centred, ``values["mean"]``; ``parameters["centering"]`` records how.

    Notes
    -----
    **Guarantee.** (epsilon, delta)-DP for replace-one neighbours (same n, one row
    replaced), for any input. The release records its event (``release.events``: d k
    bounded-range selection steps and one Gaussian release for ``"gumbel"``, d pure per-row
    selections and one Gaussian for ``"laplace"``, d pure per-row steps for ``"paper"``); its
    ``privacy`` is the charged (epsilon, delta), which the accountant certifies the event to
    fit in (:func:`~dpdist.privacy.accounting.release_guarantee`; the event may account to
    less: ``release.accountant()``). The arguments (sensitivity ``2 R^2 / n`` of the clipped
    second moment, the float factor, the lattices, the selection's analysis) are written once
    in :mod:`dpdist.privacy.mechanisms.privcov` and docs/privacy/privcov.md; the constants are
    :func:`~dpdist.privacy.privcov_zcdp_calibration.privcov_gumbel_calibration`'s,
    ``privcov_zcdp_calibration``'s and ``privcov_calibration``'s (with the k+1 deviation).

    **Float-safe noise.** Selected values and the diagonal are released on a public
    power-of-two lattice with an exactly sampled discrete law; the selection compares exact
    Gumbel keys of lattice scores (``"gumbel"``: certified float intervals, exact comparisons
    where they overlap) or integer scores with lattice Laplace noise. ``on_nonfinite="raise"``:
    the refusal reveals that the data contain a non-finite value (one bit), before anything is
    released. The output is post-processing of the per-row releases (the symmetric AND rule of
    lines 13-17), computed on the client.

    **Selection noise.** ``"gumbel"``: :class:`~dpdist.privacy.gumbel.GumbelTopK` draws every
    key of a row (one 64-bit word an entry, d^2 in all) and keeps each tile's exact top k; the
    engine merges the tiles' lists by the sampler's exact comparisons, so S_i is the same for
    every tiling. ``"laplace"`` and ``"paper"``:
    :class:`~dpdist.privacy.lazy_selection.LazySelectionNoise`: each row's d noises are
    defined by a tree of keyed draws and only the draws that can change the top k are made
    (O(d k) a row instead of d); the selected sets and scores are exactly those of the fully
    drawn i.i.d. noise (proof in that module). Only the upper-triangle tiles of Sigma_hat are
    computed, each once, and each serves both its row blocks: memory is O(tile + d k), never
    a d x d array.

    **Centring.** With ``assume_centered=False`` and no public ``mean``, the mean is released
    first by :class:`~dpdist.privacy.mechanisms.mean.ClippedMeanMechanism` with the share
    ``mean_fraction`` of the budget and PrivCov runs with the rest on the rows ``x -
    mu_hat``. PrivCov's sensitivity ``2 R^2 / n`` is unchanged: ``mu_hat`` is public once
    released, ``x -> x - mu_hat`` is a fixed per-row map applied before the clip, so neighbours
    stay neighbours and every row's clipped term is bounded as before. The clip R (or sigma)
    must now cover the entries of ``x - mu_hat``, ``mean_clip`` the norms of the raw rows.
    The two stages compose in zCDP (the mean ``mean_fraction`` of rho, PrivCov the rest, one
    CKS20 conversion), or by basic composition for ``selection="paper"``
    (:mod:`dpdist.algorithms._centering`).

    **What leaves the workers.** Only, per row block, S_i and the noised values of S_i and
    of the diagonal, and the noised mean. Raw and clipped rows, tiles of Sigma_hat and
    candidate lists stay in the task graph.
    """
    k, epsilon, delta, sigma, clip, beta = _check_params(k, epsilon, delta, sigma, clip, beta)
    selection = _check_selection(selection)
    _check_row_clip(row_clip, selection)
    check_nonfinite(on_nonfinite)
    tile_size = check_int(tile_size, "tile_size", low=1)
    check_scheduler(scheduler)
    centering = check_centering(assume_centered, mean, mean_fraction, mean_clip)
    seed = resolve_random_state(random_state)
    X = as_dask_array(X)  # metadata only
    n, d = X.shape
    if k > d:
        raise ValidationError(f"k must satisfy k <= d = {d} (the number of features), got k={k}")
    centering = check_centering(assume_centered, mean, mean_fraction, mean_clip, n_features=d)
    R, clip_rule, C, row_clip_rule = _resolve_clips(clip, sigma, row_clip, selection, n, d, beta)
    composition = _stage_composition(selection)
    mean_share, cov_share = centering.split(epsilon, delta, composition)
    cal = _calibrate(selection, cov_share.epsilon, cov_share.delta, n, d, k, R, beta, C)
    mech = _mechanism_class(selection).from_calibration(cal)
    mean_mech = mean_mechanism(centering, mean_share, n, d, R) if centering.private else None
    # the stated guarantee is the charged budget, certified by the accountant from the events
    if mean_mech is None:
        privacy = release_guarantee([mech.event()], budget=ApproxDP(epsilon, delta))
    else:
        privacy = compose_stages(ApproxDP(epsilon, delta), [([mean_mech.event()], mean_share),
                                                            ([mech.event()], cov_share)], composition)

    Xg, all_finite = nonfinite_guard(X, on_nonfinite)
    mu = centering.mean
    if mean_mech is not None:
        mu = release_mean(Xg, all_finite, mean_mech, seed, scheduler=scheduler)
    S = clipped_second_moment(centre(Xg, mu), R, tile=tile_size, row_clip=None if C == math.inf else C)
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
            "sigma": sigma,
            "clip": R,
            "clip_rule": clip_rule,
            "beta": beta,
            "on_nonfinite": on_nonfinite,
            "tile_size": tile_size,
            "selection": selection,
            "calibration": cal.to_dict(),
            "centering": centering.record(mean_mech, centering.composition(epsilon, delta, composition)),
            **({} if selection == "paper" else {"row_clip": C, "row_clip_rule": row_clip_rule}),
        },
        noise_scales=scales,
        values=values,
        seeding=seed.describe(),
        notes=tuple(notes),
        events=tuple(events),
        mechanisms=tuple(mechanisms),
    ))
