"""The k-subsets of ``[d]`` in lexicographic order, by rank ``r`` in ``[0, C(d, k))``.

Combinatorial number system: subsets sharing a prefix are contiguous, so :func:`subsets_in_range`
expands ranks ``[start, stop)`` into runs by ``np.repeat``, and chunk ``c`` of size ``B`` of an
enumeration is exactly ranks ``[c B, (c + 1) B)`` whatever the other chunks are.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np

__all__ = ["n_subsets", "subset_rank", "subsets_in_range", "unrank_subset"]


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
