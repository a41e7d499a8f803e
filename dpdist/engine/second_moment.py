"""Exact chunked statistics for private second-moment estimation, wired into dask (no privacy
formulas here). The per-block NumPy kernels the graph runs, and the definition of a *step*,
are in :mod:`dpdist.engine.second_moment_kernels`.

How a level is computed. A clip multiplies a row by a scalar, and
scalars commute with the linear maps, so the level-k row is ``y = t_k M_k x`` with
``M_k = a_k ... a_0`` (public) and ``t_k = min(t_{k-1}, r_k / ||M_k x||)``. The estimator
keeps the per-row scales ``t_k`` between levels, where the data live, so level k is one pass
that reads the raw rows and applies one d x d map per row (:func:`level_step`), instead of
re-applying k maps (:func:`~dpdist.engine.second_moment_kernels.chunk_apply_steps`, kept as
the step-by-step definition and test oracle) or writing transformed rows to storage. The
scales are 8 bytes a row, so memory would
grow with n if they were held: with a local scheduler and the fit's
:class:`~dpdist.engine.runtime.Runtime` they are spilled block by block to the runtime's
private scratch directory (:func:`spill_stem`; raw float64 files, bit-exact, written by the
level's own task for its block; each file is deleted by the task that reads it, so at most
two levels' scales, 16 bytes a row, are on disk at once, and the directory is removed when
the fit ends, whatever the outcome); on a ``distributed``
cluster they are persisted futures in worker memory, which the workers' own memory manager
spills to their local disk past its ``target`` fraction. Either way the client holds only
one small value per row block, and memory is flat in n (``benchmarks/bench_scaling.py``).
Scales of at most ``dpdist.scales-in-memory-bytes`` (64 MiB) stay in memory instead, and data
of at most ``dpdist.rows-in-memory-bytes`` (256 MiB, with the scales) are read once, at the
first level, and kept with the scales (:func:`rows_in_memory`): a level then costs its kernel
alone, not a read. Both limits are constants, so memory stays flat in n.

Noise enters only through :func:`noised`, which applies a caller-supplied function to the
reduced statistic in the same graph, so only the noised value is returned to the client.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Callable, Sequence

import dask
import dask.array as da
import numpy as np

from dpdist.engine.second_moment_kernels import (
    Step,
    chunk_group_grams,
    chunk_level_gram,
    chunk_level_step,
    chunk_norm_counts,
)

__all__ = [
    "group_grams", "level_gram", "level_step", "noised", "norm_counts", "on_worker", "persist_and_release",
    "row_blocks", "rows_in_memory", "rows_in_memory_bytes", "scales_in_memory_bytes", "spill_stem", "tree_sum",
]


# ---------------------------------------------------------------------------------------
# dask wiring
# ---------------------------------------------------------------------------------------


def _row_blocks(X: da.Array) -> da.Array:
    return X if X.numblocks[1] == 1 else X.rechunk({1: -1})


def level_gram(X: da.Array, steps: Sequence[Step] = (), *, split_every: int | None = 8) -> da.Array:
    """Lazy sum over all rows of y y^T, y the transformed row: one pass, tree-reduced (d x d)."""
    X = _row_blocks(X)
    nb, d = X.numblocks[0], X.shape[1]
    per_block = da.map_blocks(
        chunk_level_gram,
        X,
        steps=tuple(steps),
        new_axis=[2],
        chunks=((1,) * nb, (d,), (d,)),
        dtype=np.float64,
        meta=np.empty((0, 0, 0), dtype=np.float64),
    )
    return per_block.sum(axis=0, split_every=split_every)


def norm_counts(X: da.Array, edges: np.ndarray, steps: Sequence[Step] = ()) -> da.Array:
    """Lazy histogram of transformed row norms over ``edges`` (K + 2 bins, see the kernel)."""
    X = _row_blocks(X)
    nb, nbins = X.numblocks[0], len(edges) + 1
    per_block = da.map_blocks(
        chunk_norm_counts,
        X,
        edges=np.asarray(edges, dtype=np.float64),
        steps=tuple(steps),
        chunks=((1,) * nb, (nbins,)),
        dtype=np.float64,
        meta=np.empty((0, 0), dtype=np.float64),
    )
    return per_block.sum(axis=0, split_every=8)


def _block_group_grams(x, gid=None, *, labels, n_groups, steps, block_info=None):
    if gid is None:  # labels computed here, on the worker, from the block's row range
        start, stop = block_info[0]["array-location"][0]
        gid = labels(int(start), int(stop))
    return chunk_group_grams(x, gid, n_groups, steps)


def group_grams(
    X: da.Array,
    labels: Callable[[int, int], np.ndarray] | np.ndarray,
    n_groups: int,
    steps: Sequence[Step] = (),
) -> da.Array:
    """Lazy per-group Gram sums (n_groups, d, d).

    ``labels`` gives each row's group (0..n_groups-1, or -1 for an unused row): either a
    picklable function ``labels(start, stop)`` returning the labels of rows
    ``start..stop-1``, evaluated per row block on the workers (nothing of size n is built
    here), or an array aligned with the rows of X (small inputs and tests).
    """
    X = _row_blocks(X)
    nb, d = X.numblocks[0], X.shape[1]
    kwargs = dict(
        labels=labels if callable(labels) else None,
        n_groups=int(n_groups),
        steps=tuple(steps),
        new_axis=[2, 3],
        chunks=((1,) * nb, (int(n_groups),), (d,), (d,)),
        dtype=np.float64,
        meta=np.empty((0, 0, 0, 0), dtype=np.float64),
    )
    if callable(labels):
        per_block = da.map_blocks(_block_group_grams, X, **kwargs)
    else:
        gids = da.asarray(np.asarray(labels)).reshape(-1, 1).rechunk((X.chunks[0], (1,)))
        per_block = da.map_blocks(_block_group_grams, X, gids, **kwargs)
    return per_block.sum(axis=0, split_every=4)


def _sum_arrays(*arrays: np.ndarray) -> np.ndarray:
    out = np.array(arrays[0], dtype=np.float64, copy=True)
    for a in arrays[1:]:
        out += a
    return out


def tree_sum(items: Sequence[Any], split_every: int = 8) -> Any:
    """Delayed tree sum of delayed arrays (fan-in ``split_every``)."""
    items = list(items)
    while len(items) > 1:
        items = [dask.delayed(_sum_arrays, pure=True)(*items[i : i + split_every]) for i in range(0, len(items), split_every)]
    return items[0]


def _level_block(
    x: np.ndarray | None,
    state: Any,
    *,
    M: np.ndarray,
    radius: float,
    keep_rows: bool = False,
    spill_path: str | None = None,
    keep_scales: bool = True,
) -> tuple:
    """:func:`chunk_level_step` on one row block. ``state`` is None at level 0, else the
    block's previous state ``(scales, Gram)`` or ``(scales, Gram, rows)``: the scales are an
    array, or the path of the file they were spilled to (raw float64, read and deleted here).
    ``x`` is the block as read, or None to use the rows the previous state kept. The returned
    state holds the new scales, or with ``spill_path`` the path they were written to (raw
    float64, bit-exact: this process then holds no per-row array between levels); with
    ``keep_rows`` it also holds the block's rows (the array read, not a copy), so that the
    next level does not read the data again; without ``keep_scales`` (the last level) it holds
    None instead of the scales."""
    prev = None if state is None else state[0]
    if isinstance(prev, str):
        path, prev = prev, np.fromfile(prev, dtype=np.float64)
        os.remove(path)
    if x is None:
        if state is None or len(state) < 3:
            raise ValueError("no rows kept by the previous level for this block")
        x = state[2]
    t, g = chunk_level_step(x, prev, M=M, radius=radius)
    if not keep_scales:
        t = None
    elif spill_path is not None:
        t.tofile(spill_path)
        t = spill_path
    return (t, g, x) if keep_rows else (t, g)


def _sum_level_grams(*states: tuple) -> np.ndarray:
    """Sum of the Grams of blocks' ``(t, Gram)`` states (first level of the tree)."""
    return _sum_arrays(*(s[1] for s in states))


def row_blocks(X: da.Array) -> list:
    """The row blocks of ``X`` (each holding whole rows) as a list of ``Delayed``, with
    the data-loading graph optimised once. A fit that passes ``X`` many times (one pass per
    level) makes them once and gives them to :func:`level_step` at every level."""
    return list(_row_blocks(X).to_delayed().ravel())


def level_step(
    X: da.Array | Sequence[Any],
    prev: Sequence[Any] | None,
    M: np.ndarray,
    radius: float,
    *,
    keep_rows: bool = False,
    rows_in_prev: bool = False,
    spill_to: str | None = None,
    keep_scales: bool = True,
) -> tuple[list, Any]:
    """Lazy (per-block states, Gram (d, d)) of one level from the previous level's states.

    One task per row block computes the block's scales t_k and its Gram together
    (:func:`chunk_level_step`), so the block is read once; its result ``(t_k, Gram)`` is the
    block's state, which the next level takes as ``prev`` (the Gram, d x d, rides along: no
    separate task splits the pair), and the Grams are tree-reduced. ``X`` is the data, or
    its :func:`row_blocks`. ``prev`` is the list of per-block states returned by
    :func:`persist_and_release` for the previous level (None at level 0), aligned with the
    row blocks of ``X``; spilled scales are consumed: each file is deleted once read. With
    ``spill_to`` (a path stem, see :func:`spill_stem`) each task writes its block's new
    scales to a file ``{spill_to}-{block}.f64`` and its state holds the path instead; with
    ``keep_scales=False`` (a fit's last level) the states hold no scales at all. With
    ``keep_rows`` each state also holds its block's rows (the array read, not a copy),
    and a level given ``rows_in_prev`` takes the rows from ``prev`` (states kept with
    ``keep_rows``) instead of reading ``X``: a fit whose data are small
    (:func:`rows_in_memory`) reads them once, at its first level.
    The graph needs no further optimisation (:func:`persist_and_release` skips it).
    """
    M = np.asarray(M, dtype=np.float64)
    blocks = row_blocks(X) if isinstance(X, da.Array) else list(X)
    prevs = [None] * len(blocks) if prev is None else list(prev)
    if len(prevs) != len(blocks):
        raise ValueError("previous scales do not match the row blocks of X")
    if (keep_rows or rows_in_prev) and spill_to is not None:
        raise ValueError("rows are kept only with the scales held in memory (no spill_to)")
    if rows_in_prev:
        if prev is None:
            raise ValueError("rows_in_prev needs the previous level's states")
        blocks = [None] * len(blocks)  # the rows are in the previous states
    paths = [None] * len(blocks) if spill_to is None else [f"{spill_to}-{i}.f64" for i in range(len(blocks))]
    # pure=False: the previous scales (local arrays of one float per row) are not hashed for
    # keys at every level
    step = dask.delayed(_level_block, pure=False)
    parts = [step(b, p, M=M, radius=float(radius), keep_rows=bool(keep_rows), spill_path=path,
                  keep_scales=bool(keep_scales)) for b, p, path in zip(blocks, prevs, paths)]
    grams = [dask.delayed(_sum_level_grams, pure=True)(*parts[i : i + 8]) for i in range(0, len(parts), 8)]
    return parts, tree_sum(grams)


#: Per-row scales of at most this many bytes in all (8 per row) stay in memory between levels
#: on a local scheduler; larger ones are spilled to the fit's scratch directory (dask config
#: ``dpdist.scales-in-memory-bytes``). A constant, so memory stays flat in n.
SCALES_IN_MEMORY_BYTES = 64 << 20

#: Data of at most this many bytes (as stored, with the scales) are read once and kept in
#: memory between levels (dask config ``dpdist.rows-in-memory-bytes``; 0 streams every
#: level). A constant, so memory stays flat in n.
ROWS_IN_MEMORY_BYTES = 256 << 20


def _config_bytes(key: str, default: int) -> int:
    from dpdist.exceptions import ValidationError

    value = dask.config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValidationError(f"dask config {key} must be a number of bytes >= 0, got {value!r}")
    return int(value)


def scales_in_memory_bytes() -> int:
    """The dask config ``dpdist.scales-in-memory-bytes`` (default :data:`SCALES_IN_MEMORY_BYTES`),
    checked (a fit checks it before reading data)."""
    return _config_bytes("dpdist.scales-in-memory-bytes", SCALES_IN_MEMORY_BYTES)


def rows_in_memory_bytes() -> int:
    """The dask config ``dpdist.rows-in-memory-bytes`` (default :data:`ROWS_IN_MEMORY_BYTES`),
    checked (a fit checks it before reading data)."""
    return _config_bytes("dpdist.rows-in-memory-bytes", ROWS_IN_MEMORY_BYTES)


def rows_in_memory(X: da.Array) -> bool:
    """Whether a fit of several passes keeps the rows of ``X`` in memory between levels
    (``keep_rows`` of :func:`level_step`): when the data as stored plus the scales (8 bytes a
    row) take at most ``dpdist.rows-in-memory-bytes`` and the scales are held in memory
    (:func:`scales_in_memory_bytes`). Larger data are read again at every level, so memory
    stays flat in n either way. On a cluster the rows stay in the workers' memory (their
    memory manager spills them to disk under pressure), never in this process."""
    n = int(X.shape[0])
    held = int(X.nbytes) + 8 * n
    return 8 * n <= scales_in_memory_bytes() and held <= rows_in_memory_bytes()


def spill_stem(scheduler: Any, n_rows: int | None = None) -> str | None:
    """Where a level's per-row scales go between levels (``spill_to`` of :func:`level_step`).

    With a local scheduler and the fit's :class:`~dpdist.engine.runtime.Runtime` as
    ``scheduler``: a fresh path stem in the runtime's private scratch directory (removed with
    everything in it when the fit ends, whatever the outcome), so that this process holds no
    per-row array between levels and, while a level runs, only the blocks in flight; unless
    ``n_rows`` is given and its scales (8 bytes a row) take at most
    ``dpdist.scales-in-memory-bytes`` (default :data:`SCALES_IN_MEMORY_BYTES`): then None,
    the scales are held in memory (writing and reading the files costs several percent of a
    level). None as well on a distributed cluster (the scales stay in the workers' memory as
    futures; their memory manager spills them to disk under pressure) and for a local
    scheduler named by value (no runtime that outlives the level to own the files).
    """
    from dpdist.engine.runtime import Runtime

    small = n_rows is not None and 8 * int(n_rows) <= scales_in_memory_bytes()
    if small or not isinstance(scheduler, Runtime) or scheduler.client is not None:
        return None
    return os.path.join(scheduler.scratch_dir(), f"scales-{uuid.uuid4().hex}")


def persist_and_release(keep: list, release: Any, scheduler: Any) -> tuple[list, Any]:
    """Compute ``release`` (a noised statistic) and keep ``keep`` (delayed per-block state) in
    one pass over the data.

    On a distributed cluster ``keep`` is persisted as futures on the workers (it never
    reaches this process); with a local scheduler the kept states are returned (small: the
    per-row scales are in them only when :func:`spill_stem` chose to hold them), to be
    given to the next level. ``release`` is computed exactly once and its value returned.
    ``scheduler`` is any value accepted by :func:`dpdist.engine.runtime.open_runtime`; pass
    the fit's runtime so that every level shares its deadline and its scratch directory.
    """
    from dpdist.engine.runtime import open_runtime

    with open_runtime(scheduler) as rt:
        # the level graph is built from optimised row blocks (level_step): no optimisation
        # pass at every level
        parts = rt.persist([*keep, release], noised=True, optimize_graph=False)
        return list(parts[:-1]), rt.result(parts[-1])


def on_worker(fn: Callable[..., Any], *stats: Any) -> Any:
    """Apply a deterministic ``fn`` to reduced statistics inside the graph (a delayed task)."""
    return dask.delayed(fn, pure=True)(*stats)


def noised(stat: Any, noise: Callable[[np.ndarray], Any]) -> Any:
    """The reduced exact ``stat`` passed through the caller's ``noise`` function in the graph.

    Computing the returned delayed object returns only ``noise(stat)``: the exact statistic
    stays on the worker that reduced it.
    """
    return dask.delayed(noise, pure=True)(stat)
