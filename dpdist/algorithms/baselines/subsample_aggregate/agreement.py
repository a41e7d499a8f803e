"""The exact aggregation kernels of subsample-and-aggregate (NumPy, run on a worker): the convex
semimetric between group moments, the certified pairwise agreement, the agreement weights and the
exactly weighted average.
"""

from __future__ import annotations

import numpy as np

from dpdist.privacy.noise.masking import ExactGram


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
