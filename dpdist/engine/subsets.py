"""Exhaustive k-subset scoring with a chunked Gumbel-max (engine of ExpMechPCA).

The exponential mechanism of Algorithm 4 (COLT 2026, Appendix F) scores every size-k subset
``S`` of ``[d]`` by ``lambda_1(M[S, S])`` for the clipped second moment ``M``. This module
holds the exact, epsilon-free parts:

- **enumeration by rank**: the subsets in lexicographic order, rank ``r`` in
  ``[0, C(d, k))``; :func:`subsets_in_range` materialises ranks ``[start, stop)`` directly
  (combinatorial number system: subsets sharing a prefix are contiguous, so a range expands
  into runs by ``np.repeat``), so chunk ``c`` of size ``B`` is exactly ranks
  ``[c B, (c + 1) B)`` whatever the other chunks are;
- **scoring kernels** (:func:`block_top_eigenvalue`): closed form for k = 2, a vectorised
  symmetric 3 x 3 solver (trigonometric form of Cardano, with a batched ``eigvalsh``
  fallback near a double top eigenvalue where the closed form loses accuracy) for k = 3,
  batched ``numpy.linalg.eigvalsh`` beyond;
- **Gumbel-max per chunk** (:func:`chunk_gumbel_max`) with a caller-supplied ``perturb``
  function that turns the scores of ranks ``start..`` into noisy keys (the engine never
  chooses a noise scale; the caller keys its noise by rank, so the arg max does not depend
  on the chunking), a max-combine (ties go to the smaller rank) and the dask wiring
  (:func:`gumbel_max_subset`): chunks of the enumeration as tasks, a tree max-reduction,
  and a last task that keeps only the winning rank, so the noisy maximum itself never
  leaves the workers;
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
    "Perturb",
    "as_single_block",
    "block_release",
    "block_top_eigenvalue",
    "chunk_gumbel_max",
    "combine_gumbel_max",
    "enumeration_chunks",
    "gumbel_max_subset",
    "n_subsets",
    "subset_rank",
    "subsets_in_range",
    "top_eigenvalue_2x2",
    "top_eigenvalue_3x3",
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

#: ``perturb(scores, start)`` returns the noisy keys of the subsets of ranks
#: ``start .. start + len(scores) - 1``.
Perturb = Callable[[np.ndarray, int], np.ndarray]


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


def chunk_gumbel_max(
    M: np.ndarray, k: int, start: int, stop: int, perturb: Perturb, *, batch: int = DEFAULT_BATCH
) -> tuple[float, int]:
    """Largest perturbed score over the subsets of ranks ``[start, stop)``.

    Returns ``(key, rank)``: the largest ``perturb(scores, s)`` value and its rank (the
    smallest rank among ties). An empty range returns ``(-inf, -1)``.
    """
    M = np.ascontiguousarray(M, dtype=np.float64)
    d = M.shape[0]
    best_key, best_rank = -math.inf, -1
    for s in range(int(start), int(stop), int(batch)):
        e = min(int(stop), s + int(batch))
        scores = block_top_eigenvalue(M, subsets_in_range(d, k, s, e))
        keys = np.asarray(perturb(scores, s), dtype=np.float64)
        i = int(np.argmax(keys))
        if keys[i] > best_key:
            best_key, best_rank = float(keys[i]), s + i
    return best_key, best_rank


def combine_gumbel_max(parts: Sequence[tuple[float, int]]) -> tuple[float, int]:
    """Max-combine of ``(key, rank)`` pairs; ties go to the smaller rank (chunking-invariant)."""
    best_key, best_rank = -math.inf, -1
    for key, rank in parts:
        if rank < 0:
            continue
        if key > best_key or (key == best_key and rank < best_rank):
            best_key, best_rank = key, rank
    return best_key, best_rank


def _winning_rank(part: tuple[float, int]) -> int:
    """Keep the rank, drop the noisy key (the key is a data-dependent value, not released)."""
    return int(part[1])


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


def gumbel_max_subset(
    M,
    k: int,
    perturb: Perturb,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    split_every: int = 8,
    batch: int = DEFAULT_BATCH,
):
    """Lazy arg max of ``perturb(scores)`` over all size-``k`` subsets (a ``dask.delayed`` int).

    Parameters
    ----------
    M : dask array or ndarray, shape (d, d)
        Symmetric matrix whose ``k x k`` principal blocks are scored. A dask array becomes
        one task by :func:`as_single_block` (deterministic keys: the same ``M`` passed to
        :func:`block_release` is computed once).
    k : int
        Subset size.
    perturb : callable
        ``perturb(scores, start)``: noisy keys of ranks ``start ..``; must be picklable for
        process-based schedulers.
    chunk_size : int
        Subsets per task.
    split_every : int
        Fan-in of the max-reduction tree.

    Returns
    -------
    dask.delayed.Delayed
        The lexicographic rank of the winning subset (the key itself is dropped inside the
        graph).
    """
    d = int(M.shape[0])
    Md = as_single_block(M)
    total = n_subsets(d, k)
    chunk_fn = dask.delayed(chunk_gumbel_max, pure=False)
    parts = [chunk_fn(Md, k, s, e, perturb, batch=batch) for s, e in enumeration_chunks(total, chunk_size)]
    combine = dask.delayed(combine_gumbel_max, pure=False)
    split_every = max(2, int(split_every))
    while len(parts) > 1:
        parts = [combine(parts[i : i + split_every]) for i in range(0, len(parts), split_every)]
    return dask.delayed(_winning_rank, pure=False)(parts[0])


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
