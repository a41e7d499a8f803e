"""Exact chunked Gumbel-max over all k-subsets: the enumeration of :mod:`dpdist.engine.subsets`
with a caller-supplied *exact* sampler.

Float keys compared by ``argmax`` would decide near-ties by rounding and give the noise a
bounded range. This wiring lets the sampler decide every comparison itself:

- ``sampler.best(scores, start)`` returns the exact best candidate of ranks ``start ..``
  (an object with a ``rank`` attribute; a negative rank means none);
- ``sampler.combine(a, b)`` returns the exact larger of two candidates.

Chunks of the enumeration are tasks (each returns its best candidate), a tree of ``combine``
merges them, and a last task keeps only the winning rank: the noisy keys never leave the
workers. The result is the same for any chunking when ``best`` and ``combine`` are exact (the
caller keys its noise by rank). The engine chooses no noise scale (the sampler holds it).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dpdist.engine.subset_prefix import range_top_eigenvalue
from dpdist.engine.subsets import DEFAULT_BATCH, DEFAULT_SUBSETS_PER_TASK, enumeration_max

__all__ = ["chunk_exact_gumbel_max", "combine_exact_gumbel_max", "exact_gumbel_max_subset"]


def _better(sampler: Any, a: Any, b: Any) -> Any:
    if a is None or a.rank < 0:
        return b
    if b is None or b.rank < 0:
        return a
    return sampler.combine(a, b)


def chunk_exact_gumbel_max(
    M: np.ndarray, k: int, start: int, stop: int, sampler: Any, *, batch: int = DEFAULT_BATCH
) -> Any:
    """The exact best candidate over the subsets of ranks ``[start, stop)`` (None when empty)."""
    M = np.ascontiguousarray(M, dtype=np.float64)
    best = None
    for s in range(int(start), int(stop), int(batch)):
        e = min(int(stop), s + int(batch))
        best = _better(sampler, best, sampler.best(range_top_eigenvalue(M, k, s, e), s))
    return best


def combine_exact_gumbel_max(parts: Sequence[Any], sampler: Any) -> Any:
    """The exact best of the chunks' candidates (the merge of the reduction tree)."""
    best = None
    for part in parts:
        best = _better(sampler, best, part)
    return best


def _winning_rank(best: Any) -> int:
    """Keep the rank, drop the candidate's key bounds (data-dependent, not released)."""
    return -1 if best is None else int(best.rank)


def exact_gumbel_max_subset(
    M,
    k: int,
    sampler: Any,
    *,
    subsets_per_task: int = DEFAULT_SUBSETS_PER_TASK,
    split_every: int = 8,
    batch: int = DEFAULT_BATCH,
):
    """Lazy exact arg max over all size-``k`` subsets of ``sampler``'s keys (a delayed int).

    ``M`` as in :func:`~dpdist.engine.subsets.enumeration_max`; ``sampler`` must be
    picklable (it travels to the workers)."""
    return enumeration_max(M, k, chunk_exact_gumbel_max, (sampler,), combine_exact_gumbel_max, (sampler,),
                           _winning_rank, subsets_per_task=subsets_per_task, split_every=split_every, batch=batch)
