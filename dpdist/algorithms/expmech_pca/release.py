"""ExpMechPCA's release: from the validated parameters, compute the clipped second moment,
select a support by the exponential mechanism and release the noised block on it.

:func:`resolve_clip` and :func:`calibrate` fix the clip level and the calibration from checked
values (the estimator's ``_validate_together`` calls them once per fit or plan);
:func:`run_expmech` makes the release and checks nothing again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdist.algorithms._base import nonfinite_note
from dpdist.data.validation import chunk_reading_notes
from dpdist.engine.gram import clipped_second_moment, nonfinite_guard
from dpdist.engine.gumbel_max import exact_gumbel_max_subset
from dpdist.engine.runtime import compute
from dpdist.engine.subsets import block_release
from dpdist.exceptions import ValidationError
from dpdist.algorithms._centering import centre_data, mean_mechanism, mean_notes, stage_guarantee
from dpdist.privacy.accounting import gaussian_epsilon
from dpdist.privacy.budget import ApproxDP
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


def resolve_clip(sigma: float | None, clip: float | None, n: int, d: int, beta: float) -> tuple[float, str]:
    """The entry truncation level tau and its source, from checked values (``clip``, else from
    ``sigma``; one of them is required)."""
    if clip is not None:
        return clip, "clip (user)"
    if sigma is None:
        raise ValidationError(
            "ExpMechSparsePCA needs a public bound: give sigma (sub-Gaussian scale; tau = 2 sigma "
            "sqrt(log(4 n d / beta)), Theorem 7) or clip (the entry truncation level tau)"
        )
    return expmech_clip(sigma, n, d, beta), "2 sigma sqrt(log(4 n d / beta)) (Theorem 7)"


def check_range(cal: ExpMechCalibration, max_subsets: int) -> None:
    """Refuse a fit whose enumeration of ``C(d, k)`` supports exceeds ``max_subsets`` (or one noise
    stream), before any data is read."""
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
    calibration did not include the mean (a budget too small for it, :func:`calibrate`)."""
    if cal.mean_noise_multiplier is None:  # no mean, or the (epsilon, delta) split of a tiny budget
        return "basic"
    return "zcdp" if cal.composition == "zcdp" else "mixed"


def calibrate(centering, epsilon, delta, n: int, d: int, k: int, tau: float, beta) -> tuple:
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


def run_expmech(Xd: Any, p) -> Release:
    """ExpMechPCA's release from the opened input and the validated parameters ``p`` of
    :class:`~dpdist.algorithms.expmech_pca.estimator.ExpMechSparsePCA` (with what its
    ``_validate_together`` derived: ``clip`` (tau) and ``clip_source``, ``centering``, the
    calibration ``calibration``, the private mean's ``mean_mechanism`` and ``mean_share`` (or
    None) and ``share``, the selection and block's); checks nothing again but the enumeration's
    size (:func:`check_range`)."""
    n, d, k, tau, clip_source = p.n_samples, p.n_features, p.k, p.clip, p.clip_source
    centering, cal, mean_mech, mean_share, share = p.centering, p.calibration, p.mean_mechanism, p.mean_share, p.share
    sigma, beta, max_subsets, on_nonfinite = p.sigma, p.beta, p.max_subsets, p.on_nonfinite
    scheduler, subsets_per_task = p.scheduler, p.subsets_per_task
    check_range(cal, max_subsets)
    seed = resolve_random_state(p.random_state)

    mech = ExpMechMechanism.from_calibration(cal)
    privacy = stage_guarantee(ApproxDP(p.epsilon, p.delta), [mech.event()], share, mean_mech, mean_share,
                              _composition(cal))

    Xg, all_finite = nonfinite_guard(Xd, on_nonfinite)
    Xc, mu = centre_data(Xg, all_finite, centering, mean_mech, seed, scheduler=scheduler)
    M = clipped_second_moment(Xc, tau)
    release_fn = mech.release(seed)
    rank = exact_gumbel_max_subset(M, k, mech.selection(seed), subsets_per_task=subsets_per_task)
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
