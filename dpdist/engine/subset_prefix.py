"""Scores of every k-subset of a rank range (:func:`range_top_eigenvalue`): the explicit-subset
kernels of :mod:`dpdist.engine.subset_scores` for k <= 3, and for k >= 4 the prefix kernel
:func:`top_eigenvalue_by_prefix`: one small ``eigh`` per (k-2)-prefix, shared by all the
subsets that extend it, then a certified Newton iteration on a 2 x 2 Schur complement per
subset, compiled by numba where the optional extra ``dpdist[fast]`` is installed (NumPy
otherwise); batched ``eigvalsh`` for the few it does not certify.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import numpy as np

from dpdist.engine.subset_ranks import n_subsets, subset_rank, subsets_in_range, unrank_subset
from dpdist.engine.subset_scores import block_top_eigenvalue, top_eigenvalue_3x3

__all__ = ["range_top_eigenvalue", "top_eigenvalue_by_prefix"]

#: The prefix kernel accepts a score when its certificate ``|g(x)| <= PREFIX_TOL * scale``
#: holds (error <= that plus a few roundings; see :func:`top_eigenvalue_by_prefix`).
PREFIX_TOL = 2.0**-45

#: Newton iterations of the prefix kernel before the remaining subsets go to ``eigvalsh``.
PREFIX_MAX_ITER = 40

#: Iterations run on every subset before the certificate is checked (fewer than 1 in 4
#: subsets of a random Wishart block are certified before that).
PREFIX_SURE_ITER = 4

#: Subsets iterated side by side in the compiled prefix kernel (:func:`_newton_runs_py`).
NEWTON_LANES = 8

_Q_LO, _Q_HI = 2.0**-960, 2.0**960


@functools.lru_cache(maxsize=16)
def _pair_table(d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All pairs ``(a, b)``, ``a < b < d``, in lexicographic order, and ``off[a]`` = rank of
    the first pair with first element a (length d + 1)."""
    a, b = np.triu_indices(d, 1)
    off = np.zeros(d + 1, dtype=np.int64)
    off[1:] = np.cumsum(d - 1 - np.arange(d))
    return a.astype(np.int64), b.astype(np.int64), off


def _prefix_runs(d: int, k: int, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The (k-2)-prefixes of the k-subsets of ranks ``[start, stop)``, how many subsets of
    the range extend each (in rank order), and how many of the first run precede ``start``.

    In lexicographic order the k-subsets come in runs sharing a (k-2)-prefix P (a
    (k-2)-subset of ``range(d - 2)``, the prefixes themselves in lexicographic order); the run
    of P lists the pairs ``(a, b)``, ``P[-1] < a < b < d``, in lexicographic order: a suffix
    of the list of all pairs of ``range(d)``.
    """
    m = k - 2
    first = unrank_subset(start, d, k)
    p0 = [int(v) for v in first[:m]]
    run0 = subset_rank(p0 + [p0[-1] + 1, p0[-1] + 2], d)  # rank of the first subset of P0's run
    rho = subset_rank(p0, d - 2)
    total = n_subsets(d - 2, m)
    need = stop - run0
    prefixes, lengths, got, width = [], [], 0, 64
    while got < need:
        hi = min(total, rho + width)
        P = subsets_in_range(d - 2, m, rho, hi)
        last = P[:, -1]
        L = (d - 1 - last) * (d - 2 - last) // 2
        prefixes.append(P)
        lengths.append(L)
        got += int(L.sum())
        rho, width = hi, 2 * width
    P = np.vstack(prefixes)
    L = np.concatenate(lengths)
    n_used = int(np.searchsorted(np.cumsum(L), need, side="left")) + 1
    P, counts = P[:n_used], L[:n_used].copy()
    counts[0] -= start - run0
    counts[-1] -= int(counts.sum()) - (stop - start)
    return P, counts, start - run0


def top_eigenvalue_by_prefix(M: np.ndarray, k: int, start: int, stop: int, *, compiled: bool = True) -> np.ndarray:
    """``lambda_1(M[S, S])`` for the k-subsets S of ranks ``[start, stop)``, k >= 3.

    Each S is a (k-2)-prefix P (shared by a run of consecutive ranks) plus a pair (a, b).
    Per prefix, ``M[P, P] = Q diag(lam) Q^T`` (LAPACK ``eigh``) and ``W = Q^T M[P, :]``; per
    subset, in the basis ``diag(Q, I)`` the block is ``[[diag(lam), Z], [Z^T, C]]`` with
    ``Z = W[:, (a, b)]`` and ``C = M[(a, b), (a, b)]``. For ``x > lam_max``, ``x I - block``
    is positive definite iff the 2 x 2 Schur complement
    ``S(x) = x I - C - sum_i z_i z_i^T / (x - lam_i)`` is, so ``lambda_1`` is the root of
    ``g(x) = lambda_min(S(x))`` on ``(lam_max, inf)`` (or ``lam_max`` when g has none).
    g is increasing with ``g' >= 1`` (``S'(x) = I + sum z z^T / (x - lam)^2``) and concave
    (S is matrix-concave), so Newton's iteration from the lower bound ``x0 = lambda_1`` of
    the 3 x 3 principal block ``[[lam_max, z_max^T], [z_max, C]]`` rises monotonically to the
    root, never past it.

    **Certificate.** Since ``g' >= 1``, ``|x - lambda_1| <= |g(x)|`` for any x in the domain
    (and x = lam_max is exact when ``g(lam_max) >= 0``). A score is accepted when the
    computed ``|g(x)| <= PREFIX_TOL * scale`` with ``scale = max(|x|, |lam|, |C_aa|, |C_bb|)``;
    the error is then at most that plus the rounding of g's evaluation and of the prefix's
    ``eigh`` (a few units of 2^-53 times the block's norm), about 1e-13 of the scale. Subsets
    not certified after :data:`PREFIX_MAX_ITER` iterations (near-degenerate blocks) are
    scored by batched ``numpy.linalg.eigvalsh``. Measured against ``eigvalsh``: within
    3.5e-14 of the largest absolute entry of the block on random, degenerate, rank-deficient,
    indefinite and extreme-scale blocks; the tests require 1e-12 (tests/engine/test_subsets.py).

    **Compiled form.** With ``compiled=True`` (default) and numba installed, the iteration
    runs subset by subset in compiled code (:func:`_newton_runs_py`, GIL released: one task
    per core on dask's threads): the same iteration and the same certificate, started from
    the 2 x 2 principal blocks' bound instead of the 3 x 3 one (a lower bound too, so the
    iterates still rise monotonically to the root); about 4 to 6 evaluations of g per subset
    at k = 4, 5, and no array temporaries. ``compiled=False`` forces the NumPy form.

    **What a score error does to the exponential mechanism.** ``eigvalsh`` is not exact
    either (a few units of 2^-53 times the block's norm). If every computed score is within
    e of the exact one, the computed scores of neighbouring datasets differ by at most
    ``Delta + 2 e``, so the selection sampled with weight ``epsilon_sel / (2 Delta)`` is
    ``epsilon_sel (1 + 2 e / Delta)``-DP (probabilities move by at most a factor
    ``exp(epsilon_sel (1 + 2 e / Delta))``). For ExpMechPCA, ``Delta = 2 k tau^2 / n`` and the
    block scale is at most ``k tau^2``, so ``2 e / Delta <= 3.5e-14 n``: below 4e-5 relative
    for n up to 1e9 (and of the same order for ``eigvalsh``).
    """
    M = np.ascontiguousarray(M, dtype=np.float64)
    d, k, start, stop = M.shape[0], int(k), int(start), int(stop)
    if k < 3:
        raise ValueError("the prefix kernel needs k >= 3")
    if stop <= start:
        return np.empty(0)
    m = k - 2
    pa, pb, off = _pair_table(d)
    P, counts, skip = _prefix_runs(d, k, start, stop)
    lam, Q = np.linalg.eigh(M[P[:, :, None], P[:, None, :]])  # ascending eigenvalues
    W3 = np.einsum("pij,pik->pjk", Q, M[P])  # (prefixes, m, d): Q^T M[P, :]
    # global pair rank of each subset: its run starts at the pair (P[-1]+1, P[-1]+2)
    run_start = off[P[:, -1] + 1]
    run_start[0] += skip
    newton_runs = compiled_newton_runs() if compiled else None
    if newton_runs is not None:
        diag = np.ascontiguousarray(np.diagonal(M))
        out = np.empty(stop - start)
        newton_runs(M, diag, np.ascontiguousarray(lam), np.ascontiguousarray(W3), pa[run_start], pb[run_start],
                     counts, PREFIX_TOL, PREFIX_MAX_ITER, out)
        todo = np.flatnonzero(np.isnan(out))
        if todo.size:  # not certified: LAPACK on the explicit blocks
            pidx = np.repeat(np.arange(len(P)), counts)[todo]
            ends = np.cumsum(counts)
            gp = (np.repeat(run_start - (ends - counts), counts) + np.arange(stop - start))[todo]
            sub = np.hstack([P[pidx], pa[gp][:, None], pb[gp][:, None]])
            out[todo] = np.linalg.eigvalsh(M[sub[:, :, None], sub[:, None, :]])[:, -1]
        return out
    W = W3.reshape(-1)
    ends = np.cumsum(counts)
    pidx = np.repeat(np.arange(len(P)), counts)
    gp = np.repeat(run_start - (ends - counts), counts) + np.arange(stop - start)
    a, b = pa[gp], pb[gp]
    diag = np.ascontiguousarray(np.diagonal(M))
    c11, c22, c12 = diag[a], diag[b], M.ravel()[a * d + b]
    base = pidx * (m * d)
    z1 = [W[base + i * d + a] for i in range(m)]
    z2 = [W[base + i * d + b] for i in range(m)]
    lm = [lam[pidx, i] for i in range(m)]
    x = top_eigenvalue_3x3(lm[-1], c11, c22, z1[-1], z2[-1], c12)
    scale = np.maximum.reduce([np.abs(x), np.abs(lm[0]), np.abs(lm[-1]), np.abs(c11), np.abs(c22)])
    out = np.empty(stop - start)
    todo = np.arange(stop - start)
    todo_fallback: list[np.ndarray] = []
    fb_pidx: list[np.ndarray] = []
    fb_gp: list[np.ndarray] = []
    A = [(u * u, v * v, u * v) for u, v in zip(z1, z2)]
    for it in range(PREFIX_MAX_ITER):
        g, slope = _schur_newton_terms(x, c11, c22, c12, lm, A)
        if it < PREFIX_SURE_ITER:  # nearly no subset is certified this early: no bookkeeping
            with np.errstate(all="ignore"):
                x = np.maximum(x - g / slope, lm[-1])
            continue
        done = np.abs(g) <= PREFIX_TOL * scale
        out[todo[done]] = x[done]
        with np.errstate(all="ignore"):
            x_new = np.maximum(x - g / slope, lm[-1])
        # Newton rises monotonically: a step that does not rise (rounding) or is not finite
        # stops the iteration; those subsets go to eigvalsh
        live = np.flatnonzero(~done & (x_new > x))
        stuck = ~done & ~(x_new > x)
        if stuck.any():
            todo_fallback.append(todo[stuck])
            fb_pidx.append(pidx[stuck])
            fb_gp.append(gp[stuck])
        if live.size == 0:
            todo, pidx, gp = todo[:0], pidx[:0], gp[:0]
            break
        todo, x, pidx, gp = todo[live], x_new[live], pidx[live], gp[live]
        c11, c22, c12, scale = c11[live], c22[live], c12[live], scale[live]
        lm = [v[live] for v in lm]
        A = [(a11[live], a22[live], a12[live]) for a11, a22, a12 in A]
    todo_fallback.append(todo)
    fb_pidx.append(pidx)
    fb_gp.append(gp)
    todo = np.concatenate(todo_fallback)
    pidx = np.concatenate(fb_pidx)
    gp = np.concatenate(fb_gp)
    if todo.size:  # not certified: LAPACK on the explicit blocks
        sub = np.hstack([P[pidx], pa[gp][:, None], pb[gp][:, None]])
        out[todo] = np.linalg.eigvalsh(M[sub[:, :, None], sub[:, None, :]])[:, -1]
    return out


def _newton_runs_py(M, diag, lam, W, run_a, run_b, counts, tol, max_iter, out):  # pragma: no cover - compiled
    """The prefix kernel's per-subset Newton iteration (compiled by numba: no array
    temporaries; the GIL is released), :data:`NEWTON_LANES` subsets of a run in lockstep: each
    subset's iteration is a chain of dependent divisions, so independent subsets side by side
    keep the core busy (about 1.8x one at a time).

    Subsets come in runs: run ``p`` extends prefix ``p`` by ``counts[p]`` consecutive pairs
    ``(a, b)`` in lexicographic order from ``(run_a[p], run_b[p])``. For each, with
    ``z_i = (W[p, i, a], W[p, i, b])`` and ``C = M[(a, b), (a, b)]``, Newton's iteration on
    ``g(x) = lambda_min(S(x))`` (see :func:`top_eigenvalue_by_prefix`) starts from
    ``x0 = max(lam_max, lambda_1`` of the three 2 x 2 principal blocks
    ``[[lam_max, z_max,1], [., C_aa]]``, ``[[lam_max, z_max,2], [., C_bb]]`` and ``C)``, each a
    principal submatrix of the block in the basis ``diag(Q, I)``, hence a lower bound of
    lambda_1 by interlacing. g is increasing and concave on ``(lam_max, inf)``, so the
    iterates rise monotonically to the root, never past it. A score is written when the
    certificate ``|g(x)| <= tol * max(|x|, |lam_min|, |lam_max|, |C_aa|, |C_bb|)`` holds, or
    ``x = lam_max`` when ``g(lam_max) >= 0`` is finite there (the prefix's top eigenvector
    decouples: lambda_1 = lam_max). Terms with ``z_i = 0`` are exactly zero and skipped. A
    step from the right of the root (g > 0: only by rounding of the start) must fall, one from
    the left must rise; ``|S_11 - S_22|/2`` and ``S_12`` are combined by ``sqrt`` where their
    squares neither overflow nor underflow, by ``hypot`` otherwise. Otherwise (no rise, no
    certificate after ``max_iter`` steps, non-finite values) the score is NaN and the caller
    scores that subset by ``eigvalsh``.
    """
    d = M.shape[0]
    m = lam.shape[1]
    L = NEWTON_LANES
    x = np.empty(L)
    c11 = np.empty(L)
    c22 = np.empty(L)
    c12 = np.empty(L)
    sc = np.empty(L)
    res = np.empty(L)
    live = np.zeros(L, dtype=np.bool_)
    U = np.empty((m, L))
    V = np.empty((m, L))
    s11 = np.empty(L)
    s22 = np.empty(L)
    s12 = np.empty(L)
    t11 = np.empty(L)
    t22 = np.empty(L)
    t12 = np.empty(L)
    pos = 0
    for p in range(counts.shape[0]):
        a = run_a[p]
        b = run_b[p]
        lmax = lam[p, m - 1]
        lmin = lam[p, 0]
        left = counts[p]
        while left > 0:
            nl = min(L, left)
            for j in range(L):
                if j < nl:
                    aj = a
                    bj = b
                    b += 1
                    if b == d:
                        a += 1
                        b = a + 1
                c11[j] = diag[aj]
                c22[j] = diag[bj]
                c12[j] = M[aj, bj]
                for i in range(m):
                    U[i, j] = W[p, i, aj]
                    V[i, j] = W[p, i, bj]
                u = U[m - 1, j]
                v = V[m - 1, j]
                xj = lmax
                h = 0.5 * (c11[j] + c22[j]) + math.hypot(0.5 * (c11[j] - c22[j]), c12[j])
                if h > xj:
                    xj = h
                h = 0.5 * (lmax + c11[j]) + math.hypot(0.5 * (lmax - c11[j]), u)
                if h > xj:
                    xj = h
                h = 0.5 * (lmax + c22[j]) + math.hypot(0.5 * (lmax - c22[j]), v)
                if h > xj:
                    xj = h
                x[j] = xj
                sc[j] = max(abs(lmin), abs(lmax), abs(c11[j]), abs(c22[j]))
                res[j] = np.nan
                live[j] = j < nl
            for _it in range(max_iter):
                for j in range(L):
                    s11[j] = x[j] - c11[j]
                    s22[j] = x[j] - c22[j]
                    s12[j] = -c12[j]
                    t11[j] = 1.0
                    t22[j] = 1.0
                    t12[j] = 0.0
                for i in range(m):
                    li = lam[p, i]
                    for j in range(L):
                        u = U[i, j]
                        v = V[i, j]
                        r = 1.0 / (x[j] - li)
                        if u == 0.0 and v == 0.0:
                            r = 0.0
                        uu = u * u
                        vv = v * v
                        uv = u * v
                        s11[j] -= uu * r
                        s22[j] -= vv * r
                        s12[j] -= uv * r
                        r2 = r * r
                        t11[j] += uu * r2
                        t22[j] += vv * r2
                        t12[j] += uv * r2
                any_live = False
                for j in range(nl):
                    if not live[j]:
                        continue
                    hd = 0.5 * (s11[j] - s22[j])
                    q = hd * hd + s12[j] * s12[j]
                    if q >= _Q_LO and q <= _Q_HI:
                        h = math.sqrt(q)
                    else:
                        h = math.hypot(hd, s12[j])
                    gj = 0.5 * (s11[j] + s22[j]) - h
                    xj = x[j]
                    if abs(gj) <= tol * max(sc[j], abs(xj)):
                        res[j] = xj
                        live[j] = False
                        continue
                    if xj == lmax and gj >= 0.0 and gj < np.inf:
                        res[j] = xj
                        live[j] = False
                        continue
                    if h > 0.0:
                        sl = 0.5 * (t11[j] + t22[j]) - (hd * 0.5 * (t11[j] - t22[j]) + s12[j] * t12[j]) / h
                    else:
                        sl = 0.5 * (t11[j] + t22[j]) - math.hypot(0.5 * (t11[j] - t22[j]), t12[j])
                    xn = xj - gj / sl
                    if xn < lmax:
                        xn = lmax
                    if gj > 0.0:
                        ok = xn < xj
                    else:
                        ok = xn > xj
                    if not ok:
                        live[j] = False
                        continue
                    x[j] = xn
                    any_live = True
                if not any_live:
                    break
            for j in range(nl):
                out[pos + j] = res[j]
            pos += nl
            left -= nl


@functools.lru_cache(maxsize=1)
def compiled_newton_runs() -> Callable | None:
    """:func:`_newton_runs_py` compiled by numba (``cache=True``: compiled once per
    installation, a few seconds, then loaded from ``__pycache__``), or None where numba is not
    installed (the optional extra ``dpdist[fast]``); imported on first use, so that importing
    dpdist does not import numba."""
    try:
        import numba
    except ImportError:  # pragma: no cover - exercised where numba is not installed
        return None
    return numba.njit(cache=True, nogil=True, error_model="numpy")(_newton_runs_py)


def _schur_newton_terms(x, c11, c22, c12, lam, A) -> tuple[np.ndarray, np.ndarray]:
    """``g(x) = lambda_min(S(x))`` and a supergradient ``u^T S'(x) u`` (``u`` the eigenvector
    of lambda_min) for the 2 x 2 Schur complement of :func:`top_eigenvalue_by_prefix`."""
    s11, s22, s12 = x - c11, x - c22, -c12
    t11, t22, t12 = np.ones_like(x), np.ones_like(x), np.zeros_like(x)
    r = np.empty_like(x)
    tmp = np.empty_like(x)
    with np.errstate(all="ignore"):  # poles, overflow: non-finite g is sent to eigvalsh
        for li, (a11, a22, a12) in zip(lam, A):
            np.subtract(x, li, out=r)  # x >= lam_max; a zero gap only where z = 0 (NaN: eigvalsh)
            np.divide(1.0, r, out=r)
            s11 -= np.multiply(a11, r, out=tmp)
            s22 -= np.multiply(a22, r, out=tmp)
            s12 -= np.multiply(a12, r, out=tmp)
            r *= r
            t11 += np.multiply(a11, r, out=tmp)
            t22 += np.multiply(a22, r, out=tmp)
            t12 += np.multiply(a12, r, out=tmp)
        hd = 0.5 * (s11 - s22)
        h = np.hypot(hd, s12)
        g = 0.5 * (s11 + s22) - h
        slope = 0.5 * (t11 + t22) - np.where(
            h > 0, (hd * 0.5 * (t11 - t22) + s12 * t12) / h, np.hypot(0.5 * (t11 - t22), t12)
        )
    return g, slope


def range_top_eigenvalue(M: np.ndarray, k: int, start: int, stop: int) -> np.ndarray:
    """``lambda_1(M[S, S])`` for the k-subsets S of lexicographic ranks ``[start, stop)``."""
    if int(k) >= 4:
        return top_eigenvalue_by_prefix(M, k, start, stop)
    return block_top_eigenvalue(M, subsets_in_range(M.shape[0], k, start, stop))
