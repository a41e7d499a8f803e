"""Subsample-and-aggregate baseline for second moments (MS25 Appendix A, Algorithm 3).

Nissim-Raskhodnikova-Smith 2007 subsample-and-aggregate with the Ashtiani-Liaw 2022 convex
semimetric and masking output. (epsilon, delta)-DP, not zCDP. Proofs: docs/privacy/subsample_aggregate.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdist._validation import check_bool, check_int
from dpdist.algorithms._base import Estimator, check_nonfinite, nonfinite_note, refuse_nonfinite
from dpdist.algorithms.second_moment.selection import group_partition
from dpdist.data.validation import as_dask_array, chunk_reading_notes
from dpdist.engine import second_moment as engine
from dpdist.engine.runtime import DEFAULT_TIMEOUT, check_scheduler, check_timeout, compute, open_runtime
from dpdist.exceptions import NoPrivateResult, ValidationError
from dpdist.privacy.accounting import NonPrivateEvent
from dpdist.privacy.budget import check_delta, check_epsilon
from dpdist.privacy.masking import GRID_BITS, ExactGram
from dpdist.privacy.mechanisms.subsample import (
    PURPOSE_MASK,
    PURPOSE_TLAP,
    SubsampleAggregateMechanism,
    subsample_aggregate_mechanism,
)
from dpdist.privacy.noise import NoiseSeed, resolve_random_state
from dpdist.privacy.plan import Plan
from dpdist.privacy.release import Release, warn_if_unsafe
from dpdist.privacy.second_moment_calibration import (
    BASELINE_CN,
    baseline_guarantee,
    baseline_masking_scale,
    baseline_privacy_min_samples,
    baseline_threshold,
    baseline_utility_min_samples,
    check_alpha,
    check_m,
    check_xi,
    tlap_support,
)

__all__ = [
    "MECHANISM",
    "NOT_PRIVATE_LABEL",
    "PURPOSE_MASK",
    "PURPOSE_TLAP",
    "SubsampleAggregatePlan",
    "SubsampleAggregateSecondMoment",
    "agreement_scale",
    "agreement_weights",
    "certified_agreement",
    "exact_weighted_average",
    "group_agreement",
    "psd_distance_matrix",
    "subsample_aggregate_second_moment",
]

MECHANISM = "Subsample-and-aggregate second moment (MS25 Appendix A, Algorithm 3)"
NOT_PRIVATE_LABEL = "NOT PRIVATE"
PURPOSE_PARTITION = "second-moment-baseline/partition"


# ---------------------------------------------------------------------------------------
# exact aggregation kernels (NumPy; run on a worker)
# ---------------------------------------------------------------------------------------


def psd_distance_matrix(mats: np.ndarray) -> np.ndarray:
    """Pairwise dist(A, B) of Lemma A.2 (Ashtiani-Liaw): max_i max(|l_i - 1|, |1/l_i - 1|)
    over the generalised eigenvalues l_i of (B, A); +inf when either matrix is singular. A float
    estimate, for diagnostics: the algorithm counts :func:`certified_agreement` instead.

    A^{-1/2} is computed once per matrix and the pairs are batched: O(k^2 d^3).
    """
    mats = np.asarray(mats, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        mats = (mats + np.transpose(mats, (0, 2, 1))) / 2.0
    k, d, _ = mats.shape
    # a group matrix that overflowed (unclipped rows near 1e154 and above) counts as singular:
    # it agrees with no group (a per-group rule: one row changes one group, sensitivity kept)
    finite = np.isfinite(mats).all(axis=(1, 2))
    w, v = np.linalg.eigh(np.where(finite[:, None, None], mats, np.eye(d)))
    tol = d * np.finfo(np.float64).eps * np.maximum(np.abs(w).max(axis=1), np.finfo(np.float64).tiny)
    ok = finite & (w[:, 0] > tol)
    inv_sqrt = np.einsum("kij,kj,klj->kil", v, 1.0 / np.sqrt(np.where(ok[:, None], w, 1.0)), v)
    dist = np.full((k, k), np.inf)
    idx = np.flatnonzero(ok)
    for pos, t in enumerate(idx):
        others = idx[pos:]
        with np.errstate(over="ignore", invalid="ignore"):
            m = inv_sqrt[t] @ mats[others] @ inv_sqrt[t]
            m = (m + np.transpose(m, (0, 2, 1))) / 2.0
        fin = np.isfinite(m).all(axis=(1, 2))  # huge finite groups may overflow when whitened
        lam = np.linalg.eigvalsh(np.where(fin[:, None, None], m, np.eye(d)))
        with np.errstate(divide="ignore"):
            dd = np.maximum(np.abs(lam - 1.0), np.abs(1.0 / lam - 1.0)).max(axis=1)
        dd[(lam[:, 0] <= 0) | ~fin] = np.inf
        dist[t, others] = dd
        dist[others, t] = dd
    return dist


def agreement_scale(alpha: float) -> float:
    """c <= 1 + 2 alpha / (1 - alpha), a float: the agreement radius ``c - 1`` never exceeds
    Algorithm 3's (the float quotient is pulled down by 2**-50 relative, more than its rounding)."""
    return (1.0 + 2.0 * alpha / (1.0 - alpha)) * (1.0 - 2.0**-50)


def _products(x: np.ndarray, s: np.ndarray):
    """``fl(X^T S X)`` and a bound on the row sums of its entrywise distance to the exact product.

    Entrywise, for any summation order (Higham eq. 3.5), the error is at most
    ``gamma_d (|X|^T |S| |X| + |fl(X^T S)| |X|) <= (2 + gamma_d) gamma_d |X|^T |S| |X|``, plus
    ``4 d 2**-1074`` for underflow; its row sums are ``|X|^T (|S| (|X| 1))``: matrix-vector
    products, O(d^2)."""
    d = x.shape[-1]
    gam = d * 2.0**-53 / (1.0 - d * 2.0**-53)
    xt = np.swapaxes(x, -1, -2)
    y = (xt @ s) @ x
    ax = np.abs(x)
    row = (np.abs(xt) @ (np.abs(s) @ ax.sum(axis=-1)[..., None]))[..., 0]
    return y, (2.0 + gam) * gam * row + 4 * d * d * 2.0**-1074


def _gershgorin_pd(m: np.ndarray, row_r: np.ndarray) -> np.ndarray:
    """True where every exact symmetric matrix within ``r`` of ``m`` (entrywise), with the row
    sums of ``r`` at most ``row_r``, is certainly positive definite: each Gershgorin disc of
    ``m``, widened by its row of ``r``, lies right of 0. The 1.01 factor covers the rounding of
    the float sums that compute the discs."""
    d = m.shape[-1]
    diag = np.diagonal(m, axis1=-2, axis2=-1)
    off = (np.abs(m) * (1.0 - np.eye(d))).sum(axis=-1)  # a sum of non-negative terms only
    ok = np.isfinite(m).all(axis=(-2, -1)) & np.isfinite(row_r).all(axis=-1)
    with np.errstate(invalid="ignore", over="ignore"):
        return ok & (diag > 1.01 * (row_r + off) + d * 2.0**-1070).all(axis=-1)


def _scaled_difference_pd(a: np.ndarray, ra: np.ndarray, b: np.ndarray, rb: np.ndarray, c: float) -> np.ndarray:
    """``c A - B`` certainly positive definite, for exact A, B within the row bounds ``ra``,
    ``rb`` of the floats ``a``, ``b`` (:func:`_gershgorin_pd`; ``fl(c a - b)`` errs by at most
    ``2u (|c a| + |b|)`` entrywise, plus underflow; the bound is doubled for its own rounding)."""
    d = a.shape[-1]
    ca = c * a
    rr = 2.0 * (c * ra + rb + 2.0**-52 * (np.abs(ca) + np.abs(b)).sum(axis=-1) + d * 2.0**-1070)
    return _gershgorin_pd(ca - b, rr)


def certified_agreement(mats: np.ndarray, alpha: float) -> np.ndarray:
    """``agree[t, t']``: True only when ``dist(Sigma_t, Sigma_t') <= 2 alpha / (1 - alpha)`` is
    *certified* for the exact matrices given (floats taken as reals), so that the agreement
    Algorithm 3 counts implies the distance its privacy argument uses, whatever the rounding.

    dist <= c - 1 (:func:`agreement_scale`) holds when ``c S - S'`` and ``c S' - S`` are both
    positive definite (then every generalised eigenvalue lies in [1/c, c]). Each is certified by
    congruence with a float matrix X, a rigorous bound on the float error of ``X^T S X`` and
    ``X^T S' X`` (:func:`_products`), and Gershgorin's discs (:func:`_scaled_difference_pd`):
    ``X^T A X`` positive definite implies X invertible and A positive definite, whatever X is.
    First each claim with its own whitening (X = W, the computed ``S^{-1/2}``, for ``c S - S'``;
    X = W' for ``c S' - S``), enough when the whitened matrices are close to diagonal; for the
    pairs left, X = W V for both, with V the computed eigenvectors of ``W S' W``, unless a
    diagonal entry of ``W S' W`` (a Rayleigh quotient, so between its extreme eigenvalues) or
    its estimated eigenvalues already put the pair clearly outside (1e-6 relative). Singular
    or non-finite groups, and pairs too close to the radius for the float bounds, are not
    certified: the count only loses agreements. ``t' = t`` is certified when Sigma_t is
    positive definite; a certified pair implies both matrices positive definite. The matrices
    must be exactly symmetric (Gershgorin's discs bound a symmetric matrix's eigenvalues).
    """
    mats = np.asarray(mats, dtype=np.float64)
    if mats.ndim != 3 or mats.shape[1] != mats.shape[2] or not np.array_equal(
            mats, np.transpose(mats, (0, 2, 1)), equal_nan=True):
        raise ValueError("certified_agreement needs a stack of exactly symmetric square matrices")
    c = agreement_scale(alpha)
    k, d, _ = mats.shape
    finite = np.isfinite(mats).all(axis=(1, 2))
    w, v = np.linalg.eigh(np.where(finite[:, None, None], mats, np.eye(d)))
    ok = finite & (w[:, 0] > 0)
    agree = np.zeros((k, k), dtype=bool)
    idx = np.flatnonzero(ok)
    if not idx.size:
        return agree
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        inv_sqrt = np.einsum("kij,kj,klj->kil", v[idx], 1.0 / np.sqrt(w[idx]), v[idx])
        own, r_own = _products(inv_sqrt, mats[idx])  # W S W ~ I, once per group
    for pos, t in enumerate(idx):
        sl = slice(pos, None)
        others = idx[sl]
        wt = inv_sqrt[pos]
        with np.errstate(over="ignore", invalid="ignore"):
            b1, rb1 = _products(wt, mats[others])  # W_t S' W_t
            b2, rb2 = _products(inv_sqrt[sl], mats[t])  # W' S_t W'
            cert = (_scaled_difference_pd(own[pos], r_own[pos], b1, rb1, c)
                    & _scaled_difference_pd(own[sl], r_own[sl], b2, rb2, c))
            diag = np.diagonal(b1, axis1=-2, axis2=-1)
            near = np.isfinite(b1).all(axis=(1, 2)) & (diag <= c * 1.01).all(axis=-1) & (diag >= 0.99 / c).all(axis=-1)
            rest = np.flatnonzero(~cert & near)
            if rest.size:  # keep the pairs whose estimated eigenvalues are not clearly outside
                sym = (b1[rest] + np.transpose(b1[rest], (0, 2, 1))) / 2.0
                lam = np.linalg.eigvalsh(sym)
                inside = (lam[:, 0] >= (1 - 1e-6) / c) & (lam[:, -1] <= c * (1 + 1e-6))
                rest, sym = rest[inside], sym[inside]
            if rest.size:
                x = wt @ np.linalg.eigh(sym)[1]
                ya, rya = _products(x, mats[t])
                yb, ryb = _products(x, mats[others[rest]])
                cert[rest] = _scaled_difference_pd(ya, rya, yb, ryb, c) & _scaled_difference_pd(yb, ryb, ya, rya, c)
        agree[t, others] = cert
        agree[others, t] = cert
    return agree


def group_agreement(group_moments: np.ndarray, alpha: float) -> np.ndarray:
    """q_t = (1/k) |{t' : dist(Sigma_t, Sigma_t') <= 2 alpha / (1 - alpha)}| (Algorithm 3 line 3;
    t' = t counts when Sigma_t has full rank), each agreement certified (:func:`certified_agreement`)."""
    return certified_agreement(_symmetric(group_moments), alpha).sum(axis=1) / len(group_moments)


def _symmetric(mats: np.ndarray) -> np.ndarray:
    """The group statistics as the algorithm uses them: ``fl((S + S^T) / 2)``, exactly symmetric."""
    mats = np.asarray(mats, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return (mats + np.transpose(mats, (0, 2, 1))) / 2.0


def agreement_weights(counts: np.ndarray, n_groups: int) -> np.ndarray:
    """Integer weights ``k w_t = min(k, max(0, 10 c_t - 6 k))`` of line 7 (``w_t = min(1,
    10 max(0, q_t - 0.6))`` with ``q_t = c_t / k``), exactly."""
    k = int(n_groups)
    return np.minimum(k, np.maximum(0, 10 * np.asarray(counts, dtype=np.int64) - 6 * k))


def exact_weighted_average(mats: np.ndarray, weights: np.ndarray) -> ExactGram:
    """``Sigma_hat = sum_t w_t Sigma_t / sum_t w_t`` (line 8) exactly, for finite float matrices
    and non-negative integer weights: integer numerators over a common power of two."""
    weights = np.asarray(weights, dtype=np.int64)
    use = weights > 0
    if not use.any():
        raise ValueError("the weighted average needs a positive weight")
    frac, expo = np.frexp(mats[use])
    mant = np.ldexp(frac, 53).astype(np.int64).astype(object)  # exact: 53-bit integers
    expo = expo.astype(np.int64) - 53
    e0 = int(expo[mant != 0].min()) if (mant != 0).any() else 0
    shifted = mant * np.vectorize(lambda e: 1 << (int(e) - e0), otypes=[object])(expo)
    numer = (weights[use].astype(object)[:, None, None] * shifted).sum(axis=0)
    return ExactGram(numer.tolist(), e0, int(weights[use].sum()))


@dataclass(frozen=True)
class _Aggregate:
    """Lines 3-11 of Algorithm 3 on the k group Gram sums, inside the graph (on a worker).

    Returns ``{"q_tilde": Q + TLap, "second_moment": masked estimate or None (bottom)}``;
    the exact q_t, Q and group moments never leave the task.
    """

    seed: NoiseSeed
    mechanism: SubsampleAggregateMechanism
    alpha: float
    group_size: int
    threshold: float

    def __call__(self, grams: np.ndarray) -> dict:
        mats = _symmetric(np.asarray(grams, dtype=np.float64) / self.group_size)
        counts = certified_agreement(mats, self.alpha).sum(axis=1)
        k = len(counts)
        # Q exactly as an integer count divided once by k^2 (the mechanism's sensitivity covers it)
        q_tilde = self.mechanism.test(self.seed)(float(int(counts.sum())) / float(k * k))
        if q_tilde < self.threshold:
            return {"q_tilde": q_tilde, "second_moment": None}
        # weights and Sigma_hat exactly (rationals): the masked output is the mechanism on Sigma_hat itself
        sigma_hat = exact_weighted_average(mats, agreement_weights(counts, k))
        return {"q_tilde": q_tilde, "second_moment": self.mechanism.masked_output(self.seed, sigma_hat)}


# ---------------------------------------------------------------------------------------
# the mechanism
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sizes:
    """What the data's shape decides, from public values only (checked before any data is read)."""

    n_groups: int
    eta_b: float
    privacy_min_samples: float
    private: bool


def _check_sizes(n: int, d: int, m: int, epsilon: float, delta: float, alpha: float, xi: float,
                 unsafe_no_privacy: bool) -> _Sizes:
    if m < d:
        raise ValidationError(f"m must be >= n_features (groups of m < d rows are singular), got m={m}, d={d}")
    k = n // m
    if k < 1:
        raise ValidationError(f"need n >= m for at least one group, got n={n}, m={m}")
    eta_b = baseline_masking_scale(alpha, d, xi)
    n_private = baseline_privacy_min_samples(m, d, epsilon, delta, eta_b)
    private = n >= n_private
    if not private and not unsafe_no_privacy:
        raise ValidationError(
            f"n={n} is below MS25's sample-size condition for the baseline's privacy "
            f"(n >= {n_private:.4g} at m={m}, d={d}, epsilon={epsilon}, delta={delta}); "
            f"pass unsafe_no_privacy=True for a NOT PRIVATE experimental run"
        )
    return _Sizes(k, eta_b, n_private, private)


def subsample_aggregate_second_moment(
    X,
    epsilon: float,
    delta: float,
    *,
    m: int,
    alpha: float = 0.5,
    xi: float = 0.1,
    unsafe_no_privacy: bool = False,
    random_state: int | None = None,
    scheduler: Any = None,
    on_nonfinite: str = "zero",
    timeout: float | None = DEFAULT_TIMEOUT,
) -> Release:
    """Algorithm 3 of MS25: subsample-and-aggregate with a masked output.

    Parameters
    ----------
    X : array-like, dask array, zarr.Array or str
        n rows in R^d.
    epsilon, delta : float
        The per-step parameters of Algorithm 3. The *reported* guarantee is
        (2 epsilon, 4 e^epsilon delta) (Lemma A.4). For equal privacy with a rho-zCDP run use
        :func:`~dpdist.privacy.second_moment_calibration.equal_privacy_baseline_budget`.
    m : int
        Group size (the subsamplability size); needs m >= d.
    alpha : float, default 0.5
        Subsamplability accuracy; the agreement radius is 2 alpha / (1 - alpha).
    xi : float, default 0.1
        Failure probability; sets the masking scale eta_b.
    unsafe_no_privacy : bool, default False
        Run even when MS25's n-condition for privacy fails. The result is then labelled
        NOT PRIVATE (``Release.private = False``, ``privacy = None``). Experiments only;
        every fit with it emits one :class:`~dpdist.exceptions.PrivacyWarning`.
    random_state, scheduler, on_nonfinite, timeout
        As for :func:`dpdist.algorithms.second_moment.second_moment` (rows holding NaN or inf
        become zero rows by default).

    Returns
    -------
    Release
        ``values["second_moment"]`` and ``parameters["q_tilde"]`` (the noisy agreement).

    Raises
    ------
    ValidationError
        The n-condition fails and ``unsafe_no_privacy`` is False (checked before reading data).
    NoPrivateResult
        The noisy agreement Q_tilde fell below the threshold: Algorithm 3 returned bottom
        (the budget counts as spent; ``exc.release`` has status "rejected").

    Notes
    -----
    **Guarantee.** (2 epsilon, 4 e^epsilon delta)-DP under replace-one neighbours, n public
    (MS25 Lemma A.4: TLap on Q, whose sensitivity is 2/k because one replaced row changes one
    group, composed with Ashtiani-Liaw's Lemma 3.6 for the masked output), **provided**
    n >= 800 m max{sqrt(2d(d + 1/eta_b^2)/eps), 8d sqrt(ln(2/delta))/eps,
    8 ln(2/delta)/eps, 12 sqrt(d ln(2/delta))/(eps eta_b)}, which is checked. Sensitivity
    comes from k = floor(n/m) only; no clipping is needed. Not zCDP: compose with zCDP steps in
    (epsilon, delta) (rho-zCDP implies (rho + 2 sqrt(rho ln(1/delta)), delta)-DP). Caveats: the
    internal conditions of Ashtiani-Liaw Lemma 3.6 could not be checked; only MS25's explicit
    n-condition is enforced. The
    condition is enormous (n >~ 5e7 m at d = 4), so experiments use ``unsafe_no_privacy``.
    Float-safe release: Q~ is a lattice value and every entry of the masked output is rounded
    exactly (:mod:`dpdist.privacy.mechanisms.subsample` states what the proof does not cover).

    **Decisions.** The groups are a keyed pseudorandom partition (without replacement, as Algorithm 3 uses;
    :mod:`dpdist.privacy.partition` states its distribution), labelled per row block on the workers.
    C_N = 2 (the paper leaves it unspecified) and ln(4/xi), the masking event's, in eta_b = alpha / (48 C_N (sqrt(d) + sqrt(ln(4/xi)))).
    TLap(Delta, eps, delta), which MS25 does not define, is Laplace(Delta/eps) conditioned on
    |z| <= A = (Delta/eps) ln(1 + (e^eps - 1)/(2 delta)). Pairwise distances cost O(k^2 d^3)
    in one task: feasible for k up to a few thousand groups.

    **Floats.** Line 3 counts a pair only when its distance is certified within the radius for
    the computed group matrices (:func:`certified_agreement`; a pair the floats cannot decide
    counts as disagreeing). Lines 7-8 are exact rationals (:func:`agreement_weights`,
    :func:`exact_weighted_average`), and line 11 applies the Cholesky factor of that exact
    Sigma_hat (same law as the symmetric root) to a real Gaussian N, each entry rounded exactly
    to 30 significant bits (:mod:`dpdist.privacy.masking`).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    m = check_m(m)
    alpha = check_alpha(alpha)
    xi = check_xi(xi)
    unsafe_no_privacy = check_bool(unsafe_no_privacy, "unsafe_no_privacy")
    scheduler = check_scheduler(scheduler)
    timeout = check_timeout(timeout)
    check_nonfinite(on_nonfinite)
    guarantee = baseline_guarantee(epsilon, delta)
    seed = resolve_random_state(random_state)
    X = as_dask_array(X)
    n, d = (int(s) for s in X.shape)
    sizes = _check_sizes(n, d, m, epsilon, delta, alpha, xi, unsafe_no_privacy)
    k, eta_b, n_private, private = sizes.n_groups, sizes.eta_b, sizes.privacy_min_samples, sizes.private
    threshold = baseline_threshold(k, epsilon, delta)
    support = tlap_support(2.0 / k, epsilon, delta)
    partition = group_partition(seed, n, m, purpose=PURPOSE_PARTITION)  # labels per row block, on the workers
    mech = subsample_aggregate_mechanism(epsilon, delta, k, support, eta_b=eta_b)
    agg = _Aggregate(seed, mech, alpha, m, threshold)
    with open_runtime(scheduler, timeout=timeout) as rt:
        if on_nonfinite == "raise":
            refuse_nonfinite(X, rt)
        out = compute(engine.noised(engine.group_grams(X, partition, k), agg), scheduler=rt, progress=False)[0]
    params = {
        "n_samples": n, "n_features": d, "epsilon": epsilon, "delta": delta, "m": m, "alpha": alpha, "xi": xi,
        "n_groups": k, "eta_b": eta_b, "C_N": BASELINE_CN, "threshold": threshold, "q_tilde": out["q_tilde"],
        "privacy_min_samples": n_private, "utility_min_samples": baseline_utility_min_samples(m, epsilon, delta),
        "privacy_precondition_holds": private, "unsafe_no_privacy": bool(unsafe_no_privacy),
        "on_nonfinite": on_nonfinite,
    }
    notes = [
        "privacy: (2 epsilon, 4 e^epsilon delta)-DP (Lemma A.4) when privacy_precondition_holds",
        "keyed pseudorandom partition into groups (sampling without replacement; "
        "data-independent, not exactly uniform: dpdist.privacy.partition)",
        "C_N = 2, masking scale uses ln(4/xi); Ashtiani-Liaw Lemma 3.6 conditions not checked",
        "TLap = Laplace conditioned on |z| <= A (Geng et al. 2020)",
        "float-safe agreement test: q_tilde is a lattice point with an exact bounded rounded Laplace "
        f"(lattice 2**{mech.tlap.lattice.exponent})",
        "float-safe masked output: agreements certified for the exact group matrices, weights and "
        "Sigma_hat exact rationals, N a real Gaussian matrix and every entry rounded exactly to "
        f"{GRID_BITS} significant bits (dpdist.privacy.masking; residuals in dpdist.privacy.mechanisms.subsample)",
        nonfinite_note(on_nonfinite),
        *chunk_reading_notes(X),
    ]
    reasons: tuple = ()
    if not private:
        reasons = (f"{NOT_PRIVATE_LABEL}: n is below MS25's sample-size condition; run with unsafe_no_privacy=True",)
        notes.insert(0, reasons[0])
    unsafe = ("unsafe_no_privacy=True (the n-condition was not enforced)",) if unsafe_no_privacy else ()
    status = "released" if out["second_moment"] is not None else "rejected"
    release = Release(
        mechanism=MECHANISM,
        privacy=guarantee if private else None,
        parameters=params,
        noise_scales={"tlap_scale": 2.0 / (k * epsilon), "tlap_support": support, "masking_eta_b": eta_b},
        events=(("subsample-and-aggregate", mech.event() if private else NonPrivateEvent()),),
        mechanisms=(mech.describe(),),
        values={} if out["second_moment"] is None else {"second_moment": out["second_moment"]},
        seeding=seed.describe(),
        notes=tuple(notes),
        status=status,
        private=private,
        not_private_reasons=reasons,
    )
    warn_if_unsafe(release, extra=unsafe)
    if out["second_moment"] is None:
        raise NoPrivateResult(
            f"subsample-and-aggregate returned bottom: noisy agreement {out['q_tilde']:.4f} < threshold "
            f"{threshold:.4f} (k={k} groups)" + ("" if private else f" [{NOT_PRIVATE_LABEL}]"),
            stage="aggregate",
            release=release,
        )
    return release


class SubsampleAggregateSecondMoment(Estimator):
    """Subsample-and-aggregate second moment (MS25 Algorithm 3), (2 eps, 4 e^eps delta)-DP.

    Parameters
    ----------
    epsilon, delta, m, alpha, xi, unsafe_no_privacy, random_state, scheduler, on_nonfinite, timeout
        See :func:`subsample_aggregate_second_moment`.
    ledger, dataset
        A privacy-budget ledger charged ``(2 epsilon, 4 e^epsilon delta)`` by ``fit`` (refused
        with ``unsafe_no_privacy=True``), and the dataset's identifier (see
        :class:`~dpdist.SparseCovariance`). A rejection (bottom) commits the whole cost.
        Without ``ledger``, ``fit`` is recorded in no ledger.

    Attributes
    ----------
    second_moment_ : ndarray (d, d)
    privacy_ : ApproxDP or None
        (2 epsilon, 4 e^epsilon delta); None for a NOT PRIVATE (unsafe) run.
    q_tilde_ : float
        The noisy agreement score (released by the TLap step).
    release_ : Release

    Notes
    -----
    **Guarantee.** (2 epsilon, 4 e^epsilon delta)-DP under replace-one neighbours provided
    MS25's n-condition holds (checked in :meth:`fit` before data are read, from the shape);
    see :func:`subsample_aggregate_second_moment`. When it fails, :meth:`fit` raises unless
    ``unsafe_no_privacy=True``, and the result is labelled NOT PRIVATE. A failed fit changes
    nothing (:mod:`dpdist.algorithms._base`).
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        *,
        m: int,
        alpha: float = 0.5,
        xi: float = 0.1,
        unsafe_no_privacy: bool = False,
        random_state: int | None = None,
        scheduler: Any = None,
        on_nonfinite: str = "zero",
        timeout: float | None = DEFAULT_TIMEOUT,
        ledger: Any = None,
        dataset: str | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.m = m
        self.alpha = alpha
        self.xi = xi
        self.unsafe_no_privacy = unsafe_no_privacy
        self.random_state = random_state
        self.scheduler = scheduler
        self.on_nonfinite = on_nonfinite
        self.timeout = timeout
        self.ledger = ledger
        self.dataset = dataset

    def _fit_release(self, X) -> Release:
        """Run Algorithm 3; raises :class:`NoPrivateResult` when it returns bottom."""
        kwargs = {k: v for k, v in self.get_params().items() if k not in ("ledger", "dataset")}
        return subsample_aggregate_second_moment(X, **kwargs)

    def _fitted_attributes(self, release: Release) -> dict:
        return {
            "release_": release,
            "second_moment_": release.values["second_moment"],
            "privacy_": release.privacy,
            "q_tilde_": float(release.parameters["q_tilde"]),
        }

    def privacy_cost(self):
        """``(2 epsilon, 4 e^epsilon delta)`` (MS25 Lemma A.4); None with ``unsafe_no_privacy=True``
        (the guarantee is then not claimed)."""
        if check_bool(self.unsafe_no_privacy, "unsafe_no_privacy"):
            return None
        return baseline_guarantee(self.epsilon, self.delta)

    def plan(self, n_samples: int, n_features: int) -> "SubsampleAggregatePlan":
        """Groups, noise scales, MS25's sample-size conditions and the predicted error for a
        data size; reads no data (:class:`SubsampleAggregatePlan`). Unlike :meth:`fit`, a size
        below the privacy condition is reported (``privacy_precondition_holds``), not refused."""
        epsilon, delta = check_epsilon(self.epsilon), check_delta(self.delta)
        m, alpha, xi = check_m(self.m), check_alpha(self.alpha), check_xi(self.xi)
        unsafe = check_bool(self.unsafe_no_privacy, "unsafe_no_privacy")
        n = check_int(n_samples, "n_samples", low=2)
        d = check_int(n_features, "n_features", low=2)
        baseline_guarantee(epsilon, delta)  # the fit's refusal of an (epsilon, delta) with no guarantee
        sizes = _check_sizes(n, d, m, epsilon, delta, alpha, xi, True)
        k = sizes.n_groups
        utility_n = baseline_utility_min_samples(m, epsilon, delta)
        threshold = baseline_threshold(k, epsilon, delta)
        unmet = []
        if n < utility_n:
            unmet.append(f"n = {n} is below Lemma A.5's utility condition n >= {utility_n:.4g}")
        if threshold >= 1.0:
            unmet.append(f"the agreement threshold {threshold:.3g} >= 1 (k = {k} groups): Algorithm 3 returns "
                         "bottom unless the TLap noise lands near its support bound")
        return SubsampleAggregatePlan(
            n_samples=n,
            n_features=d,
            privacy=baseline_guarantee(epsilon, delta) if sizes.private else None,
            noise_scale=sizes.eta_b,
            error_bound=2.0 * alpha,
            error_metric="||Sigma^-1/2 M Sigma^-1/2 - I||_op <= 2 alpha, w.p. >= 1 - xi (MS25 Lemma A.5)",
            error_scale=1.0,
            error_scale_rule="1: a relative error of 1 allows M = 0",
            unmet_conditions=tuple(unmet),
            m=m,
            alpha=alpha,
            xi=xi,
            n_groups=k,
            eta_b=sizes.eta_b,
            threshold=threshold,
            tlap_scale=2.0 / (k * epsilon),
            tlap_support=tlap_support(2.0 / k, epsilon, delta),
            privacy_min_samples=sizes.privacy_min_samples,
            utility_min_samples=utility_n,
            privacy_precondition_holds=sizes.private,
            unsafe_no_privacy=unsafe,
        )

    def _check_fit(self, n_samples: int, n_features: int) -> None:
        super()._check_fit(n_samples, n_features)
        _check_sizes(n_samples, n_features, check_m(self.m), check_epsilon(self.epsilon), check_delta(self.delta),
                     check_alpha(self.alpha), check_xi(self.xi), check_bool(self.unsafe_no_privacy, "unsafe_no_privacy"))


@dataclass(frozen=True, kw_only=True)
class SubsampleAggregatePlan(Plan):
    """:meth:`SubsampleAggregateSecondMoment.plan`: a :class:`~dpdist.privacy.plan.Plan` whose
    ``noise_scale`` is the masking scale eta_b and whose ``error_bound`` is MS25 Lemma A.5's
    relative error 2 alpha (the guarantee ``dist(Sigma, M) <= 2 alpha``). **Scale** (vacuity):
    1, a relative error of 1 allows an output of 0. Unmet conditions: n below Lemma A.5's
    utility condition, and an agreement threshold >= 1 (bottom near-certain). ``privacy`` is
    None below MS25's privacy condition (a fit then needs ``unsafe_no_privacy=True`` and is
    NOT PRIVATE).
    """

    m: int
    alpha: float
    xi: float
    n_groups: int
    eta_b: float
    threshold: float
    tlap_scale: float
    tlap_support: float
    privacy_min_samples: float
    utility_min_samples: float
    privacy_precondition_holds: bool
    unsafe_no_privacy: bool
