"""The chunked enumeration of all k-subsets as a dask graph (engine of ExpMechPCA).

The exponential mechanism of Algorithm 4 (COLT 2026, Appendix F) scores every size-k subset
``S`` of ``[d]`` by ``lambda_1(M[S, S])`` for the clipped second moment ``M``. The exact,
epsilon-free parts live in four modules: the subsets by lexicographic rank
(:mod:`dpdist.engine.subset_ranks`), the scores of explicit subsets
(:mod:`dpdist.engine.subset_scores`), the scores of a rank range with the prefix kernel for
k >= 4 (:mod:`dpdist.engine.subset_prefix`), and, here, the graph:

- :func:`enumeration_max`: chunks of the enumeration as tasks running a caller-supplied chunk
  task (ExpMechPCA's exact Gumbel-max sampler of :mod:`dpdist.engine.gumbel_max`; the engine
  never chooses a noise scale), a tree reduction with a caller-supplied combine, and a last
  task that keeps only the winning rank, so the noisy maximum itself never leaves the
  workers;
- :func:`block_release`: gathers the chosen ``k x k`` block and hands it to a
  caller-supplied release function (which adds the noise) inside the graph.
"""

from __future__ import annotations

from typing import Callable

import dask
import dask.array as da
import numpy as np

from dpdist.engine.subset_ranks import n_subsets, unrank_subset
from dpdist.exceptions import ValidationError

__all__ = [
    "DEFAULT_BATCH", "DEFAULT_SUBSETS_PER_TASK", "as_single_block", "block_release", "enumeration_chunks",
    "enumeration_max",
]

#: Subsets scored together inside one task (bounds the kernel's working memory: about
#: 100 bytes a subset at k = 3).
DEFAULT_BATCH = 1 << 16

#: Subsets per task of the enumeration (about a second of work at k = 3).
DEFAULT_SUBSETS_PER_TASK = 1 << 22


def enumeration_chunks(total: int, subsets_per_task: int) -> list[tuple[int, int]]:
    """``[(c B, min((c + 1) B, total))]``: the rank ranges of the enumeration's chunks."""
    subsets_per_task = int(subsets_per_task)
    if subsets_per_task < 1:
        raise ValidationError(f"subsets_per_task must be >= 1, got {subsets_per_task}")
    return [(s, min(total, s + subsets_per_task)) for s in range(0, int(total), subsets_per_task)]


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
                    combine_args: tuple, winner: Callable, *, subsets_per_task: int, split_every: int, batch: int):
    """The graph of a max over all size-``k`` subsets: ``chunk_task(M, k, start, stop,
    *chunk_args, batch=batch)`` per chunk of the enumeration, a reduction tree of
    ``combine_task(parts, *combine_args)`` with fan-in ``split_every``, then ``winner(best)``
    (which keeps the rank and drops the data-dependent key inside the graph). ``M`` (a dask
    array or ndarray, shape (d, d)) becomes one task by :func:`as_single_block`; the tasks
    must be picklable for process-based schedulers."""
    Md = as_single_block(M)
    chunk_fn = dask.delayed(chunk_task, pure=False)
    parts = [chunk_fn(Md, k, s, e, *chunk_args, batch=batch)
             for s, e in enumeration_chunks(n_subsets(int(M.shape[0]), k), subsets_per_task)]
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
