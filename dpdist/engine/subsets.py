"""Exhaustive k-subset scoring and its chunked enumeration (engine of ExpMechPCA).

The exponential mechanism of Algorithm 4 (COLT 2026, Appendix F) scores every size-k subset
``S`` of ``[d]`` by ``lambda_1(M[S, S])`` for the clipped second moment ``M``. This module
holds the exact, epsilon-free parts:

- **enumeration by rank**: the subsets in lexicographic order, rank ``r`` in
  ``[0, C(d, k))``; :func:`subsets_in_range` materialises ranks ``[start, stop)`` directly
  (combinatorial number system: subsets sharing a prefix are contiguous, so a range expands
  into runs by ``np.repeat``), so chunk ``c`` of size ``B`` is exactly ranks
  ``[c B, (c + 1) B)`` whatever the other chunks are;
- **scoring kernels** (:func:`block_top_eigenvalue` for explicit subsets,
  :func:`range_top_eigenvalue` for a rank range): closed form for k = 2, a vectorised
  symmetric 3 x 3 solver (trigonometric form of Cardano, with a batched ``eigvalsh``
  fallback near a double top eigenvalue where the closed form loses accuracy) for k = 3,
  and for k >= 4 over a rank range the *prefix kernel* :func:`top_eigenvalue_by_prefix`
  (one small ``eigh`` per (k-2)-prefix, shared by all the subsets that extend it, then a
  certified Newton iteration on a 2 x 2 Schur complement per subset, compiled by numba
  where the optional extra ``dpdist[fast]`` is installed (NumPy otherwise); batched
  ``eigvalsh`` for the few it does not certify);
- **the enumeration's graph** (:func:`enumeration_max`): chunks of the enumeration as tasks
  running a caller-supplied chunk task (ExpMechPCA's exact Gumbel-max sampler of
  :mod:`dpdist.engine.gumbel_max`; the engine never chooses a noise scale), a tree
  reduction with a caller-supplied combine, and a last task that keeps only the winning
  rank, so the noisy maximum itself never leaves the workers;
- :func:`block_release`: gathers the chosen ``k x k`` block and hands it to a
  caller-supplied release function (which adds the noise) inside the graph.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Sequence

import dask
import dask.array as da
import numpy as np

from dpdist.exceptions import ValidationError


__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_CHUNK_SIZE",
    "DEGENERATE_TOL",
    "as_single_block",
    "block_release",
    "block_top_eigenvalue",
    "enumeration_chunks",
    "enumeration_max",
    "n_subsets",
    "subset_rank",
    "subsets_in_range",
    "range_top_eigenvalue",
    "top_eigenvalue_2x2",
    "top_eigenvalue_3x3",
    "top_eigenvalue_by_prefix",
    "unrank_subset",
]

#: Subsets scored together inside one task (bounds the kernel's working memory: about
#: 100 bytes a subset at k = 3).
DEFAULT_BATCH = 1 << 16
#: Subsets per task of the enumeration (about a second of work at k = 3).
DEFAULT_CHUNK_SIZE = 1 << 22
#: The 3 x 3 closed form is replaced by ``eigvalsh`` where ``1 + r < DEGENERATE_TOL`` (the
#: top two eigenvalues nearly coincide and ``arccos`` amplifies rounding); with this
#: tolerance the closed form's error stays near 1e-14 of the block's scale.
DEGENERATE_TOL = 1e-4

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

def n_subsets(n_features: int, k: int) -> int:
    """Number of size-``k`` subsets of ``range(n_features)``: ``C(d, k)``."""
    return math.comb(int(n_features), int(k))


@functools.lru_cache(maxsize=64)
def _first_offsets(d: int, k: int) -> np.ndarray:
    """``off[a]`` = rank of the first subset whose smallest element is ``a`` (length d + 1)."""
    counts = [math.comb(d - 1 - a, k - 1) for a in range(d)]
    off = np.zeros(d + 1, dtype=np.int64)
    np.cumsum(np.asarray(counts, dtype=np.int64), out=off[1:])
    return off


def subset_rank(subset: Sequence[int], n_features: int) -> int:
    """Lexicographic rank of a sorted subset of ``range(n_features)`` (inverse of :func:`unrank_subset`)."""
    s = [int(i) for i in subset]
    d, k = int(n_features), len(s)
    rank, prev = 0, -1
    for pos, c in enumerate(s):
        for a in range(prev + 1, c):
            rank += math.comb(d - 1 - a, k - 1 - pos)
        prev = c
    return rank


def unrank_subset(rank: int, n_features: int, k: int) -> np.ndarray:
    """The subset of lexicographic rank ``rank`` (sorted, int64)."""
    d, k, rank = int(n_features), int(k), int(rank)
    if not 0 <= rank < n_subsets(d, k):
        raise ValueError(f"rank {rank} out of range for C({d}, {k})")
    out, a = [], 0
    for pos in range(k):
        while True:
            c = math.comb(d - 1 - a, k - 1 - pos)
            if rank < c:
                break
            rank -= c
            a += 1
        out.append(a)
        a += 1
    return np.asarray(out, dtype=np.int64)


def _pairs_in_range(m: int, start: int, stop: int) -> np.ndarray:
    """Pairs ``(j, l)``, ``j < l < m``, of lexicographic ranks ``[start, stop)``, shape (count, 2)."""
    js = np.arange(m, dtype=np.int64)
    off = js * (m - 1) - js * (js - 1) // 2  # rank of (j, j + 1)
    j0 = int(np.searchsorted(off, start, side="right")) - 1
    j1 = int(np.searchsorted(off, stop - 1, side="right")) - 1
    jv = js[j0 : j1 + 1]
    run_lo = np.maximum(off[jv], start)
    run_hi = np.minimum(off[jv] + (m - 1 - jv), stop)
    lengths = run_hi - run_lo
    ranks = np.arange(start, stop, dtype=np.int64)
    out = np.empty((stop - start, 2), dtype=np.int64)
    out[:, 0] = np.repeat(jv, lengths)
    out[:, 1] = np.repeat(jv + 1 - off[jv], lengths) + ranks
    return out


def subsets_in_range(n_features: int, k: int, start: int, stop: int) -> np.ndarray:
    """Subsets of lexicographic ranks ``[start, stop)`` as a ``(stop - start, k)`` int64 array.

    Row ``i`` is the sorted subset of rank ``start + i``; the result equals
    ``list(itertools.combinations(range(d), k))[start:stop]``.
    """
    d, k, start, stop = int(n_features), int(k), int(start), int(stop)
    total = n_subsets(d, k)
    if not (0 <= start <= stop <= total):
        raise ValueError(f"rank range [{start}, {stop}) outside [0, C({d}, {k}) = {total})")
    if k < 1:
        raise ValueError("k must be >= 1")
    if stop == start:
        return np.empty((0, k), dtype=np.int64)
    if k == 1:
        return np.arange(start, stop, dtype=np.int64)[:, None]
    if k == 2:
        return _pairs_in_range(d, start, stop)
    off = _first_offsets(d, k)
    a0 = int(np.searchsorted(off, start, side="right")) - 1
    a1 = int(np.searchsorted(off, stop - 1, side="right")) - 1
    out = np.empty((stop - start, k), dtype=np.int64)
    pos = 0
    for a in range(a0, a1 + 1):
        lo, hi = max(start, int(off[a])), min(stop, int(off[a + 1]))
        if hi <= lo:
            continue
        tail = subsets_in_range(d - 1 - a, k - 1, lo - int(off[a]), hi - int(off[a]))
        out[pos : pos + hi - lo, 0] = a
        out[pos : pos + hi - lo, 1:] = tail + (a + 1)
        pos += hi - lo
    return out


def top_eigenvalue_2x2(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Largest eigenvalue of ``[[a, b], [b, c]]``, elementwise: ``(a+c)/2 + hypot((a-c)/2, b)``."""
    return 0.5 * (a + c) + np.hypot(0.5 * (a - c), b)


def top_eigenvalue_3x3(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray
) -> np.ndarray:
    """Largest eigenvalue of ``[[a, x, y], [x, b, z], [y, z, c]]``, elementwise.

    Trigonometric solution of the characteristic cubic (Smith 1961): with ``q = tr/3``,
    ``p = sqrt(||A - q I||_F^2 / 6)`` and ``r = det((A - q I)/p)/2``,
    ``lambda_1 = q + 2 p cos(arccos(r)/3)``. Where ``1 + r < DEGENERATE_TOL`` (top two
    eigenvalues nearly equal; ``arccos`` is ill-conditioned at -1) the value is recomputed
    by ``numpy.linalg.eigvalsh``.
    """
    q = (a + b + c) * (1.0 / 3.0)
    aa, bb, cc = a - q, b - q, c - q
    p1 = x * x + y * y + z * z
    p2 = aa * aa + bb * bb + cc * cc + 2.0 * p1
    p = np.sqrt(p2 * (1.0 / 6.0))
    det = aa * (bb * cc - z * z) - x * (x * cc - z * y) + y * (x * z - bb * y)
    p3 = p * p * p
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(p3 > 0, det / (2.0 * p3), 0.0)
    np.clip(r, -1.0, 1.0, out=r)
    lam = q + 2.0 * p * np.cos(np.arccos(r) * (1.0 / 3.0))
    bad = np.flatnonzero((r < -1.0 + DEGENERATE_TOL) & (p > 0))
    if bad.size:
        blocks = np.empty((bad.size, 3, 3))
        blocks[:, 0, 0], blocks[:, 1, 1], blocks[:, 2, 2] = a[bad], b[bad], c[bad]
        blocks[:, 0, 1] = blocks[:, 1, 0] = x[bad]
        blocks[:, 0, 2] = blocks[:, 2, 0] = y[bad]
        blocks[:, 1, 2] = blocks[:, 2, 1] = z[bad]
        lam[bad] = np.linalg.eigvalsh(blocks)[:, -1]
    return lam


def block_top_eigenvalue(M: np.ndarray, subsets: np.ndarray) -> np.ndarray:
    """``lambda_1(M[S, S])`` for every row ``S`` of ``subsets`` (shape (B, k)).

    ``M`` is a symmetric ``d x d`` float64 array (only its entries on the blocks are read).
    """
    M = np.ascontiguousarray(M, dtype=np.float64)
    d = M.shape[0]
    k = subsets.shape[1]
    flat = M.ravel()
    diag = np.ascontiguousarray(np.diagonal(M))
    if k == 1:
        return diag[subsets[:, 0]]
    if k == 2:
        i, j = subsets[:, 0], subsets[:, 1]
        return top_eigenvalue_2x2(diag[i], flat[i * d + j], diag[j])
    if k == 3:
        i, j, l = subsets[:, 0], subsets[:, 1], subsets[:, 2]
        return top_eigenvalue_3x3(diag[i], diag[j], diag[l], flat[i * d + j], flat[i * d + l], flat[j * d + l])
    blocks = M[subsets[:, :, None], subsets[:, None, :]]
    return np.linalg.eigvalsh(blocks)[:, -1]


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


def enumeration_chunks(total: int, chunk_size: int) -> list[tuple[int, int]]:
    """``[(c B, min((c + 1) B, total))]``: the rank ranges of the enumeration's chunks."""
    chunk_size = int(chunk_size)
    if chunk_size < 1:
        raise ValidationError(f"chunk_size must be >= 1, got {chunk_size}")
    return [(s, min(total, s + chunk_size)) for s in range(0, int(total), chunk_size)]


def as_single_block(M) -> object:
    """A Delayed (or the array itself) holding the whole ``d x d`` matrix as one NumPy array.

    The graph is not optimised here, so the keys of ``M``'s inputs stay shared with any other
    collection computed in the same call (the data are read once).
    """
    if isinstance(M, da.Array):
        d0, d1 = M.shape
        return M.rechunk((d0, d1)).to_delayed(optimize_graph=False).ravel()[0]
    return M


def enumeration_max(M, k: int, chunk_task: Callable, chunk_args: tuple, combine_task: Callable,
                    combine_args: tuple, winner: Callable, *, chunk_size: int, split_every: int, batch: int):
    """The graph of a max over all size-``k`` subsets: ``chunk_task(M, k, start, stop,
    *chunk_args, batch=batch)`` per chunk of the enumeration, a reduction tree of
    ``combine_task(parts, *combine_args)`` with fan-in ``split_every``, then ``winner(best)``
    (which keeps the rank and drops the data-dependent key inside the graph). ``M`` (a dask
    array or ndarray, shape (d, d)) becomes one task by :func:`as_single_block`; the tasks
    must be picklable for process-based schedulers."""
    Md = as_single_block(M)
    chunk_fn = dask.delayed(chunk_task, pure=False)
    parts = [chunk_fn(Md, k, s, e, *chunk_args, batch=batch)
             for s, e in enumeration_chunks(n_subsets(int(M.shape[0]), k), chunk_size)]
    combine = dask.delayed(combine_task, pure=False)
    split_every = max(2, int(split_every))
    while len(parts) > 1:
        parts = [combine(parts[i : i + split_every], *combine_args) for i in range(0, len(parts), split_every)]
    return dask.delayed(winner, pure=False)(parts[0])


def _block_release_task(M: np.ndarray, rank: int, k: int, release: Callable, guard=None) -> tuple[np.ndarray, object]:
    if guard is not None and not bool(guard):  # the input check failed: release nothing
        return np.empty(0, dtype=np.int64), None
    d = M.shape[0]
    if rank < 0:  # no finite key (non-finite input): nothing to release
        return np.empty(0, dtype=np.int64), None
    subset = unrank_subset(rank, d, k)
    block = np.array(np.asarray(M, dtype=np.float64)[np.ix_(subset, subset)])
    return subset, release(subset, block)


def block_release(M, rank, k: int, release: Callable[[np.ndarray, np.ndarray], object], guard=None):
    """Lazy ``(subset, release(subset, M[subset, subset]))`` for the subset of rank ``rank``.

    ``release`` (caller-supplied) adds the noise inside the graph; only its output and the
    subset leave the workers. A negative ``rank`` (no finite key), or a ``guard`` (a lazy
    boolean computed in the same pass) that is False, gives ``(empty, None)``: nothing leaves.
    """
    Md = as_single_block(M)
    return dask.delayed(_block_release_task, pure=False, nout=2)(Md, rank, k, release, guard)
