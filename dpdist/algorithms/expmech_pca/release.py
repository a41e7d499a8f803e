"""ExpMechPCA as a function: validate, calibrate, compute the clipped second moment, select a
support by the exponential mechanism and release the noised block on it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdist._validation import check_int, check_positive, check_probability
from dpdist.algorithms._base import check_nonfinite, nonfinite_note
from dpdist.data.validation import as_dask_array, chunk_reading_notes
from dpdist.engine.gram import clipped_second_moment, nonfinite_guard
from dpdist.engine.gumbel_max import exact_gumbel_max_subset
from dpdist.engine.runtime import check_scheduler, compute
from dpdist.engine.subsets import DEFAULT_CHUNK_SIZE, block_release
from dpdist.exceptions import ValidationError
from dpdist.algorithms._centering import (
    DEFAULT_MEAN_FRACTION,
    centre_data,
    check_centering,
    mean_mechanism,
    mean_notes,
    stage_guarantee,
)
from dpdist.privacy.accounting import gaussian_epsilon
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
from dpdist.privacy.mechanisms.expmech import ExpMechCalibration, expmech_calibration, expmech_clip
from dpdist.privacy.mechanisms.base import residual_note
from dpdist.privacy.mechanisms.expmech import ExpMechMechanism
from dpdist.privacy.noise.streams import resolve_random_state
from dpdist.privacy.release import Release, warn_if_unsafe


#: Default refusal limit on C(d, k): about a minute per core at k = 3 (15 M subsets/s/core
#: measured on the project's 2-core machine; benchmarks/bench_expmech.py).
DEFAULT_MAX_SUBSETS = 10**9
#: Default failure probability beta of Theorem 7 (clip level and plan()).
DEFAULT_BETA = 0.1

MECHANISM = "ExpMechPCA (COLT 2026, Algorithm 4)"


def leading_eigenvector(A, n_features: int | None = None) -> tuple[np.ndarray, float]:
    """Unit top eigenvector (largest algebraic eigenvalue) of a symmetric matrix, and its eigenvalue.

    Dense ``numpy.linalg.eigh`` up to 2,000 columns or for dense input, ``scipy.sparse.linalg.eigsh``
    for larger sparse input. Sign convention: the entry of largest magnitude is positive.
    """
    import scipy.sparse as sp

    if sp.issparse(A) and A.shape[0] > 2000:
        from scipy.sparse.linalg import eigsh

        A = sp.csr_array(A, dtype=np.float64)
        A = (A + A.T) * 0.5
        vals, vecs = eigsh(A, k=1, which="LA", v0=np.ones(A.shape[0]))
        lam, v = float(vals[0]), vecs[:, 0]
    else:
        A = A.toarray() if sp.issparse(A) else np.asarray(A, dtype=np.float64)
        A = 0.5 * (A + A.T)
        vals, vecs = np.linalg.eigh(A)
        lam, v = float(vals[-1]), vecs[:, -1]
    v = v / np.linalg.norm(v)
    i = int(np.argmax(np.abs(v)))
    if v[i] < 0:
        v = -v
    return v, lam


def _resolve_clip(sigma, clip, n: int, d: int, beta: float) -> tuple[float, str]:
    if clip is not None:
        return check_positive(clip, "clip"), "clip (user)"
    if sigma is None:
        raise ValidationError(
            "ExpMechSparsePCA needs a public bound: give sigma (sub-Gaussian scale; tau = 2 sigma "
            "sqrt(log(4 n d / beta)), Theorem 7) or clip (the entry truncation level tau)"
        )
    return expmech_clip(sigma, n, d, beta), "2 sigma sqrt(log(4 n d / beta)) (Theorem 7)"


def _check_params(k, epsilon, delta, sigma, clip, max_subsets, beta) -> None:
    check_int(k, "k")
    check_epsilon(epsilon)
    check_delta(delta)
    check_positive(sigma, "sigma", allow_none=True)
    check_positive(clip, "clip", allow_none=True)
    check_int(max_subsets, "max_subsets")
    check_probability(beta, "beta")


def _check_range(cal: ExpMechCalibration, max_subsets: int) -> None:
    if cal.n_subsets >= 1 << 62:
        raise ValidationError(
            f"C({cal.n_features}, {cal.k}) = {cal.n_subsets:.3e} supports exceed the 2**62 noise "
            "positions of one stream; ExpMechPCA cannot run at this size"
        )
    if cal.n_subsets > max_subsets:
        raise ValidationError(
            f"ExpMechPCA enumerates all C(d, k) = C({cal.n_features}, {cal.k}) = {cal.n_subsets:,} "
            f"supports, more than max_subsets = {max_subsets:,}; raise max_subsets if you mean it "
            "(there is no inexact fallback), or use SparsePCA (PrivPCA)"
        )


def _composition(cal: ExpMechCalibration) -> str:
    """How a private mean composes with the selection and the block (:func:`~dpdist.privacy.
    expmech_calibration.expmech_split`): ``"mixed"`` (the selection by basic composition, the
    mean and the block one Gaussian mechanism in GDP) or ``"zcdp"``; ``"basic"`` when the
    calibration did not include the mean (a budget too small for it, :func:`_calibrate`)."""
    if cal.mean_noise_multiplier is None:  # no mean, or the (epsilon, delta) split of a tiny budget
        return "basic"
    return "zcdp" if cal.composition == "zcdp" else "mixed"


def _calibrate(centering, epsilon, delta, n: int, d: int, k: int, tau: float, beta) -> tuple:
    """``(calibration, mean mechanism or None, the mean's share or None, the selection and
    block's share)``: one calibration of the whole budget, the private mean's Gaussian included
    (``mean_fraction``); the mean's share is its stand-alone (epsilon, delta)."""
    budget = ApproxDP(epsilon, delta)
    f = centering.mean_fraction if centering.private else 0.0
    cal = expmech_calibration(epsilon, delta, n, d, int(k), tau, beta=float(beta), mean_fraction=f)
    if not centering.private:
        return cal, None, None, budget
    # the mean's stand-alone guarantee at the full delta gives back its multiplier (analytic Gaussian)
    alone = gaussian_epsilon(1.0 / cal.mean_noise_multiplier, cal.delta)
    if not alone > 0.0:  # a mean (0, delta)-DP alone (epsilon of the order of delta): split (epsilon, delta)
        mean_share, share = centering.split(epsilon, delta, "basic")
        cal = expmech_calibration(share.epsilon, share.delta, n, d, int(k), tau, beta=float(beta))
        return cal, mean_mechanism(centering, mean_share, n, d, tau), mean_share, share
    mean_share = ApproxDP(alone, cal.delta)
    return cal, mean_mechanism(centering, mean_share, n, d, tau), mean_share, budget


def expmech_pca(
    X: Any,
    k: int,
    epsilon: float,
    delta: float,
    *,
    sigma: float | None = None,
    clip: float | None = None,
    max_subsets: int = DEFAULT_MAX_SUBSETS,
    beta: float = DEFAULT_BETA,
    random_state: Any = None,
    scheduler: Any = None,
    on_nonfinite: str = "zero",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    assume_centered: bool = False,
    mean: Any = None,
    mean_fraction: float = DEFAULT_MEAN_FRACTION,
    mean_clip: float | None = None,
) -> Release:
    """Private k-sparse leading eigenvector by the exhaustive exponential mechanism.

    Parameters
    ----------
    X : array-like, dask array, zarr.Array or str
        ``(n, d)`` data, rows are individuals. The scores and the block are those of the
        covariance around a private or public mean, or with ``assume_centered=True`` of the
        second moment.
    k : int
        Support size of the released vector.
    epsilon, delta : float
        Total budget; ``epsilon/2`` selects the support, ``(epsilon/2, delta)`` releases the
        block (Lemma 29).
    sigma : float, optional
        Public sub-Gaussian scale; sets ``tau = 2 sigma sqrt(log(4 n d / beta))`` when
        ``clip`` is not given.
    clip : float, optional
        Public entry truncation level tau (overrides ``sigma`` for the clip).
    max_subsets : int
        Refuse (``ValidationError``) when ``C(d, k)`` exceeds it, before reading data.
    beta : float
        Failure probability used for tau (and by ``plan``).
    random_state : None or int
        ``None``: OS entropy (the only mode for real releases); int: seeded, for tests.
    scheduler : optional
        See :func:`dpdist.engine.runtime.compute`.
    on_nonfinite : {"zero", "raise"}, default "zero"
        "zero": rows holding NaN or inf become zero rows before any statistic (uncounted).
        "raise": explicit validation mode, refuse before releasing (reveals one bit, recorded
        in the release's notes).
    chunk_size : int
        Subsets per task of the enumeration (does not change the output).
    assume_centered, mean, mean_fraction, mean_clip
        Centring, as :func:`~dpdist.algorithms.sparse_covariance.private_sparse_covariance`:
        by default a mean released with ``mean_fraction`` of the Gaussian part of the budget
        (rows scaled to L2 norm ``mean_clip``, default ``tau sqrt(d)``): with the selection
        by basic composition, the mean and the block form one Gaussian mechanism (GDP) and
        the mean takes ``mean_fraction`` of its ``mu^2``; in zCDP it takes ``mean_fraction``
        of rho (:func:`~dpdist.privacy.expmech_calibration.expmech_split`).

    Returns
    -------
    Release
        ``values``: ``components`` (1, d) unit vector supported on ``support``, ``support``
        (k,), ``noisy_block`` (the released ``Sigma_hat_S + G_S``, not symmetrised), and
        ``block_eigenvalue`` (top eigenvalue of the symmetrised noisy block).

    Notes
    -----
    Guarantee: ``(epsilon, delta)``-DP under replace-one neighbours (rows), for every input,
    by Lemma 29 of the COLT 2026 paper. Entries are truncated to ``[-tau, tau]`` with a
    public tau; the score ``lambda_1(Sigma_hat_S)`` of each support S has global sensitivity
    ``2 k tau^2 / n`` and the ``k x k`` block the same Frobenius sensitivity. The support is
    drawn by the exponential mechanism at ``epsilon_sel`` (Lemma 28; the paper's
    ``epsilon/2``), sampled exactly by Gumbel-max: ``argmax_S epsilon_sel n q(S) / (4 k tau^2)
    + Gumbel_S`` over all ``C(d, k)`` supports; the block is released with i.i.d. ``N(0,
    sigma^2)`` noise, sigma the exact requirement of its share (below the printed line 11's);
    ``epsilon_sel`` and the composition of the two (basic, or zCDP with the selection's
    bounded range) minimise the error bound
    (:func:`~dpdist.privacy.expmech_calibration.expmech_split`); symmetrising and the
    eigenvector are post-processing.

    Cost: ``C(d, k)`` score evaluations, and every enumeration task holds the dense
    ``d x d`` clipped second moment (``8 d^2`` bytes; ``plan()`` reports it).

    Float-safe: the selection is the exact exponential mechanism on lattice scores
    (exact Gumbel-max, certified comparisons; every support has positive probability under
    every dataset) and the block is released on a lattice with an exactly sampled rounded
    Gaussian; the argument and its residuals are written once in
    :mod:`dpdist.privacy.mechanisms.expmech`. Only the winning support and the noisy block
    leave the workers; the noisy maximum and the
    scores do not. ``on_nonfinite="raise"`` refuses data with NaN/inf: the check runs in the
    same pass and the release task outputs nothing when it fails (the refusal itself reveals
    one bit). Floating point: the Gumbel weight and the block noise use the sensitivities of
    the computed scores and block
    (:func:`~dpdist.privacy.expmech_calibration.expmech_calibration`).

    Centring: the private mean (:mod:`dpdist.privacy.mechanisms.mean`) is released first;
    ``x -> x - mu_hat`` is then a fixed per-row map before the truncation to tau, so the
    sensitivities above are unchanged (the mean is public by then); tau must cover the
    entries of ``x - mu_hat``. The mean joins the Gaussian part of the budget: with the
    selection by basic composition, the mean and the block are one Gaussian mechanism in GDP;
    in zCDP the mean takes ``mean_fraction`` of rho (:func:`_calibrate`). The accountant
    re-derives (epsilon, delta) from the three events together.
    """
    _check_params(k, epsilon, delta, sigma, clip, max_subsets, beta)
    check_nonfinite(on_nonfinite)
    check_int(chunk_size, "chunk_size")
    check_scheduler(scheduler)
    check_centering(assume_centered, mean, mean_fraction, mean_clip)
    Xd = as_dask_array(X, min_rows=1, min_cols=1)
    n, d = (int(s) for s in Xd.shape)
    k = int(k)
    if k > d:
        raise ValidationError(f"k must satisfy 1 <= k <= d = {d}, got k={k}")
    tau, clip_source = _resolve_clip(sigma, clip, n, d, beta)
    centering = check_centering(assume_centered, mean, mean_fraction, mean_clip, n_features=d)
    cal, mean_mech, mean_share, share = _calibrate(centering, epsilon, delta, n, d, k, tau, beta)
    _check_range(cal, int(max_subsets))
    seed = resolve_random_state(random_state)

    mech = ExpMechMechanism.from_calibration(cal)
    privacy = stage_guarantee(ApproxDP(epsilon, delta), [mech.event()], share, mean_mech, mean_share,
                              _composition(cal))

    Xg, all_finite = nonfinite_guard(Xd, on_nonfinite)
    Xc, mu = centre_data(Xg, all_finite, centering, mean_mech, seed, scheduler=scheduler)
    M = clipped_second_moment(Xc, tau)
    release_fn = mech.release(seed)
    rank = exact_gumbel_max_subset(M, k, mech.selection(seed), chunk_size=chunk_size)
    # as a Delayed on the unoptimised graph the finiteness check shares the data's keys with
    # the second moment (each chunk is read once); the release task checks it on the worker
    guard = None if all_finite is None else all_finite.to_delayed(optimize_graph=False).ravel()[0]
    subset_d, block_d = block_release(M, rank, k, release_fn, guard=guard)
    subset, noisy_block = compute(subset_d, block_d, scheduler=scheduler)
    if all_finite is not None and noisy_block is None:
        raise ValidationError(
            "X contains NaN or infinite values; nothing was released (pass on_nonfinite='zero' "
            "to replace such rows by zero rows)"
        )
    subset = np.asarray(subset, dtype=np.int64)
    if subset.shape != (k,) or noisy_block is None:
        raise ValidationError("no support was selected: the scores were not finite; nothing was released")
    noisy_block = np.asarray(noisy_block, dtype=np.float64)
    u, lam = leading_eigenvector(noisy_block)
    components = np.zeros((1, d))
    components[0, subset] = u
    parameters = {
        "n_samples": n,
        "n_features": d,
        "k": k,
        "clip": tau,
        "clip_source": clip_source,
        "sigma": None if sigma is None else float(sigma),
        "beta": float(beta),
        "max_subsets": int(max_subsets),
        "on_nonfinite": on_nonfinite,
        "budget_split": {
            "composition": cal.composition,
            "selection": {"epsilon": cal.selection_epsilon, "delta": 0.0},
            "block": {"epsilon": cal.release_epsilon, "delta": cal.release_delta},
        },
        "calibration": cal.to_dict(),
        "centering": centering.record(mean_mech, _composition(cal) if mean_mech is not None else None),
    }
    notes = (
        "support drawn by the exact exponential mechanism over all C(d, k) supports (Lemma 28 at the selection's "
        "epsilon): weighted scores on the lattice 2**-30, exact Gumbel-max with certified comparisons (the lattice "
        "and the product's rounding paid inside that epsilon); Gumbel noise of subset rank r is a function of "
        "(seed, r) only",
        residual_note(k * k, mech.block_noise),
        f"block noise scale: {cal.gaussian_rule}",
        "components are post-processing of the noisy block (symmetrised, top eigenvector)",
        nonfinite_note(on_nonfinite),
        *chunk_reading_notes(Xd),
    )
    events, mechanisms = [("ExpMechPCA selection and block", mech.event())], [mech.describe()]
    noise_scales = {"selection_gumbel_scale": mech.gumbel_scale, "block_gaussian_sigma": cal.gaussian_sigma}
    values = {"components": components, "support": subset, "noisy_block": noisy_block, "block_eigenvalue": lam}
    if mu is not None:
        values["mean"] = mu
    if mean_mech is not None:
        events.insert(0, ("mean", mean_mech.event()))  # in the order they ran
        mechanisms.append(mean_mech.describe())
        noise_scales["mean_gaussian"] = mean_mech.noise_scales()["gaussian"]
        notes = (*notes, *mean_notes(mean_mech))
    return warn_if_unsafe(Release(
        mechanism=MECHANISM,
        privacy=privacy,
        parameters=parameters,
        noise_scales=noise_scales,
        values=values,
        seeding=seed.describe(),
        notes=notes,
        events=tuple(events),
        mechanisms=tuple(mechanisms),
    ))
