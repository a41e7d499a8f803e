"""FriendlyCore's two passes as dask graphs: batches, column tiles and their groups, and the
tasks that run the kernels of :mod:`dpdist.engine.privpca.kernels` on the row chunks of X."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import dask
import numpy as np

from dpdist.engine.privpca.kernels import (
    FriendlyStats,
    chunk_group_moments,
    chunk_weighted_moment,
    combine_batch_moments,
    combine_pass1,
    merge_batch_pieces,
    normalise_batch_moments,
    tile_pass1,
    tile_threshold,
    tile_weighted_moment,
)

if TYPE_CHECKING:
    from dpdist.engine.session import Session

__all__ = [
    "DEFAULT_GROUP_BYTES",
    "DEFAULT_TILE_BYTES",
    "batch_labels",
    "column_tiles",
    "combine_pass1_groups",
    "consecutive_labels",
    "friendly_pass1",
    "friendly_pass1_groups",
    "friendly_pass2",
    "pass1_tile_groups",
    "persist_pass1",
    "persist_pass2",
]

#: Default bytes of the m batch tiles of one column tile (m * t * t * 8).
DEFAULT_TILE_BYTES = 256 * 2**20
#: Memory budget of one group of pass-1 tiles (see :func:`friendly_pass1_groups`).
DEFAULT_GROUP_BYTES = 2 * 2**30


def batch_labels(n_samples: int, sizes: Sequence[int], permutation: np.ndarray | None = None) -> np.ndarray:
    """Batch index of every row: consecutive row ranges of the given ``sizes``, or, with a
    (public) ``permutation``, batch i holds rows ``permutation[start_i:end_i]``."""
    pos_labels = np.repeat(np.arange(len(sizes), dtype=np.int64), np.asarray(sizes, dtype=np.int64))
    if pos_labels.size != n_samples:
        raise ValueError("batch sizes must add up to n_samples")
    if permutation is None:
        return pos_labels
    labels = np.empty(n_samples, dtype=np.int64)
    labels[np.asarray(permutation)] = pos_labels
    return labels


def column_tiles(n_features: int, n_batches: int, tile_bytes: int = DEFAULT_TILE_BYTES) -> list[tuple[int, int]]:
    """Column ranges of the tiles: width t with ``m t^2 8 <= tile_bytes`` (at least 16)."""
    t = int(math.sqrt(tile_bytes / (8.0 * max(1, n_batches))))
    t = max(16, min(n_features, t))
    return [(a, min(a + t, n_features)) for a in range(0, n_features, t)]


def _sum_arrays(*parts):
    out = parts[0].copy()
    for p in parts[1:]:
        out += p
    return out


def _concat_entries(*parts):
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def _tree(fn, items: list, fan_in: int = 4):
    """Reduce delayed ``items`` with ``fn(*group)`` in a tree of fan-in ``fan_in``, so that
    partial results are merged (and freed) as they arrive instead of all held at once."""
    while len(items) > 1:
        items = [
            dask.delayed(fn, pure=True)(*items[i : i + fan_in]) if len(items[i : i + fan_in]) > 1 else items[i]
            for i in range(0, len(items), fan_in)
        ]
    return items[0]


# --------------------------------------------------------------------------------------
# dask wiring
# --------------------------------------------------------------------------------------


def consecutive_labels(start: int, stop: int, bounds: np.ndarray) -> np.ndarray:
    """Batch indices of rows ``start .. stop-1`` for consecutive batches with boundaries
    ``bounds`` (``bounds[i]`` is the first row of batch i; ``bounds[m] = n``)."""
    return np.searchsorted(bounds, np.arange(start, stop), side="right") - 1


def _label_parts(labels, sizes, ranges) -> tuple[list, bool]:
    """Per-chunk batch labels: for consecutive batches (``labels is None``) a tiny task per
    chunk computes them from the m + 1 batch boundaries (nothing of size n on the client);
    otherwise slices of the given ``labels`` array (a public permutation)."""
    if labels is None:
        bounds = dask.delayed(np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))]))
        return [dask.delayed(consecutive_labels, pure=True)(a, b, bounds) for a, b in ranges], True
    labels = np.asarray(labels)
    return [labels[a:b] for a, b in ranges], bool(np.all(np.diff(labels) >= 0))


def _row_chunks(X):
    """Row-chunk delayed blocks of X with all columns in one chunk, and their row ranges."""
    X = X.rechunk({1: -1}) if len(X.chunks[1]) > 1 else X
    blocks = X.to_delayed().ravel().tolist()
    bounds = np.concatenate([[0], np.cumsum(X.chunks[0])])
    return blocks, [(int(bounds[i]), int(bounds[i + 1])) for i in range(len(blocks))]


def pass1_tile_groups(
    n_features: int, n_batches: int, tile_bytes: int = DEFAULT_TILE_BYTES, group_bytes: int = DEFAULT_GROUP_BYTES
) -> list[list[tuple[tuple[int, int], tuple[int, int]]]]:
    """The tiles ``(cols_i, cols_j)`` (I <= J) of pass 1 in groups whose m batch tiles together
    take at most ``group_bytes`` (at least one tile a group), in row-major order."""
    cols = column_tiles(int(n_features), int(n_batches), tile_bytes)
    tiles = [(ci, cj) for a, ci in enumerate(cols) for cj in cols[a:]]
    return _pack(tiles, group_bytes, 8 * int(n_batches))


def _pack(tiles: list, budget: int, bytes_per_value: int) -> list[list]:
    """Consecutive runs of ``tiles`` whose ``|I| |J| bytes_per_value`` bytes together fit in
    ``budget`` (at least one tile a run)."""
    out, current, used = [], [], 0
    for ci, cj in tiles:
        size = bytes_per_value * (ci[1] - ci[0]) * (cj[1] - cj[0])
        if current and used + size > budget:
            out.append(current)
            current, used = [], 0
        current.append((ci, cj))
        used += size
    out.append(current)
    return out


def _chunk_batch_counts(labels, sizes, ranges) -> list[int]:
    """Upper bounds on the number of batches each row chunk holds (public: from the batch
    sizes and the chunk boundaries, or from the public labels)."""
    m = len(sizes)
    if labels is None:
        bounds = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))])
        return [
            int(np.searchsorted(bounds, b - 1, side="right") - np.searchsorted(bounds, a, side="right")) + 1
            if b > a else 0
            for a, b in ranges
        ]
    labels = np.asarray(labels)
    if labels.size and np.all(np.diff(labels) >= 0):
        return [int(labels[b - 1] - labels[a]) + 1 if b > a else 0 for a, b in ranges]
    return [m] * len(ranges)


def _pass1_graph(X, *, labels, sizes, tau, k, tile_bytes, group_bytes, clip) -> list[tuple[Any, list]]:
    """Pass 1 as a list of groups ``(delayed list of TileStats, [(cols_i, cols_j, delayed
    batch tiles), ...])`` (see :func:`friendly_pass1_groups`)."""
    n, d = X.shape
    m = len(sizes)
    sizes = np.asarray(sizes, dtype=np.int64)
    blocks, ranges = _row_chunks(X)
    label_parts, consecutive = _label_parts(labels, sizes, ranges)
    counts = _chunk_batch_counts(labels, sizes, ranges)
    out = []
    for group in pass1_tile_groups(d, m, tile_bytes, group_bytes):
        pieces: dict[tuple, list] = {tile: [] for tile in group}
        for blk, lab, present in zip(blocks, label_parts, counts):
            # one task per row chunk and bundle of tiles: the chunk is checked and clipped once;
            # with consecutive batches, the batches it holds whole are finished there
            # a task's pieces (the batches it holds times its tiles) take at most tile_bytes;
            # with shuffled batches every chunk holds all m, and each tile is a task of its own
            for bundle in _pack(group, tile_bytes, 8 * max(1, present)):
                part = dask.delayed(chunk_group_moments, pure=True)(blk, lab, bundle, float(clip),
                                                                   sizes if consecutive else None)
                for t, tile in enumerate(bundle):
                    pieces[tile].append(part[t])
        stats, kept = [], []
        for ci, cj in group:
            if consecutive:
                # chunks hold disjoint runs of batches: those held whole are kept as they are,
                # the few cut by a chunk boundary are summed
                bt = dask.delayed(combine_batch_moments, pure=True)(pieces[(ci, cj)], sizes)
            else:
                # shuffled batches: every piece spans all m batches, so merge them in a tree
                bt = dask.delayed(normalise_batch_moments, pure=True)(_tree(merge_batch_pieces, pieces[(ci, cj)]), sizes)
            stats.append(dask.delayed(tile_pass1, pure=True)(bt, ci, cj, float(tau), int(k)))
            kept.append((ci, cj, bt))
        out.append((dask.delayed(list, pure=True)(stats), kept))
    return out


def friendly_pass1_groups(
    X,
    *,
    labels: np.ndarray | None,
    sizes: Sequence[int],
    tau: float,
    k: int,
    tile_bytes: int = DEFAULT_TILE_BYTES,
    group_bytes: int = DEFAULT_GROUP_BYTES,
    clip: float = math.inf,
) -> list:
    """Pass 1 as groups of tiles, each a delayed list of :class:`TileStats`.

    ``labels`` is the batch index of every row, or None for consecutive batches of ``sizes``
    (computed per chunk on the workers). ``clip`` is the public entry clip (:func:`chunk_rows`).

    A group holds tiles whose m batch tiles together take at most ``group_bytes`` (at least
    one tile, :func:`pass1_tile_groups`). Computing the groups one after the other bounds
    memory by about ``group_bytes`` plus the row chunks in flight, at the price of reading X
    once per group; with the defaults a d = 1,000, m = 200 problem is a single group (one
    read). Within a group, one task per row chunk computes the pieces of as many of the
    group's tiles as fit in ``tile_bytes`` (:func:`chunk_group_moments`: the chunk is checked
    and clipped once, not once per tile).
    """
    return [g for g, _ in _pass1_graph(X, labels=labels, sizes=sizes, tau=tau, k=k, tile_bytes=tile_bytes,
                                       group_bytes=group_bytes, clip=clip)]


def persist_pass1(
    session: "Session",
    X,
    *,
    labels: np.ndarray | None,
    sizes: Sequence[int],
    tau: float,
    k: int,
    tile_bytes: int = DEFAULT_TILE_BYTES,
    group_bytes: int = DEFAULT_GROUP_BYTES,
    clip: float = math.inf,
) -> tuple[list, list | None]:
    """Run pass 1 on ``session``: returns the handles of the groups' :class:`TileStats` lists
    (for :func:`combine_pass1_groups`) and the kept batch tiles, or None.

    When the whole pass is one group (``m`` times the upper-triangle tiles take at most
    ``group_bytes``: d = 1,000 and m = 200 with the defaults), the group's normalised batch
    tiles are kept where they were computed, as ``[(cols_i, cols_j, Handle)]``, and
    :func:`persist_pass2` forms ``Sigma_bar`` from them instead of reading X a second time
    (reading X is the cost that dominates on large data); they hold at most ``group_bytes``,
    the memory pass 1 already needs, until pass 2 has run. Otherwise the groups are computed
    one after the other and nothing is kept.
    """
    graph = _pass1_graph(X, labels=labels, sizes=sizes, tau=tau, k=k, tile_bytes=tile_bytes,
                         group_bytes=group_bytes, clip=clip)
    if len(graph) == 1:
        stats, kept = graph[0]
        handles = session.persist_all([stats] + [bt for _, _, bt in kept])
        return handles[:1], [(ci, cj, h) for (ci, cj, _), h in zip(kept, handles[1:])]
    return session.persist_each([g for g, _ in graph]), None


def _kept_tile_threshold(batch_tiles, stats, cols_i, cols_j, threshold):
    return tile_threshold(tile_weighted_moment(batch_tiles, stats), cols_i, cols_j, threshold)


def persist_pass2(
    session: "Session",
    X,
    stats,
    kept: list | None,
    *,
    labels: np.ndarray | None,
    threshold: float,
    sizes: Sequence[int] | None = None,
    tile_bytes: int = DEFAULT_TILE_BYTES,
    clip: float = math.inf,
):
    """Handle of ``(rows, cols, vals)`` (row <= col) of ``T_threshold(Sigma_bar)``, computed on
    ``session``: from the batch tiles that :func:`persist_pass1` kept
    (:func:`tile_weighted_moment`, where they live; X is not read), or, when none were kept,
    by :func:`friendly_pass2` (one more pass over X). ``stats`` is the handle of the pass-1
    :class:`FriendlyStats`; the other arguments as in :func:`friendly_pass2`.
    """
    if kept is None:
        return session.persist(friendly_pass2(X, stats.graph_input, labels=labels, threshold=threshold, sizes=sizes,
                                              tile_bytes=tile_bytes, clip=clip))
    # pure=False: a local value of the kept tiles is never hashed for a key
    parts = [
        dask.delayed(_kept_tile_threshold, pure=False)(h.graph_input, stats.graph_input, ci, cj, float(threshold))
        for ci, cj, h in kept
    ]
    return session.persist(dask.delayed(_concat_entries, pure=True)(*parts))


def combine_pass1_groups(*groups: list, n_features: int, k: int, sizes) -> FriendlyStats:
    """:func:`combine_pass1` over the tiles of all groups."""
    return combine_pass1([t for g in groups for t in g], n_features, k, sizes)


def friendly_pass1(
    X,
    *,
    labels: np.ndarray | None,
    sizes: Sequence[int],
    tau: float,
    k: int,
    tile_bytes: int = DEFAULT_TILE_BYTES,
    clip: float = math.inf,
):
    """Delayed :class:`FriendlyStats` of X (n x d dask array) split into batches by ``labels``
    (all tiles in one graph; the estimators use :func:`friendly_pass1_groups`)."""
    groups = friendly_pass1_groups(
        X, labels=labels, sizes=sizes, tau=tau, k=k, tile_bytes=tile_bytes, group_bytes=1 << 62, clip=clip
    )
    return dask.delayed(combine_pass1_groups, pure=True)(
        *groups, n_features=int(X.shape[1]), k=int(k), sizes=np.asarray(sizes, dtype=np.int64)
    )


def friendly_pass2(
    X,
    stats,
    *,
    labels: np.ndarray | None,
    threshold: float,
    sizes: Sequence[int] | None = None,
    tile_bytes: int = DEFAULT_TILE_BYTES,
    clip: float = math.inf,
):
    """Delayed ``(rows, cols, vals)`` (row <= col) of ``T_threshold(Sigma_bar)``.

    ``clip`` is the public entry clip of pass 1 (:func:`chunk_rows`); ``threshold`` the hard
    threshold (named so, not ``rho``: in dpdist ``rho`` is a zCDP budget).

    ``labels`` as in :func:`friendly_pass1_groups` (None: consecutive batches of ``sizes``).

    ``stats`` is the pass-1 result: a :class:`FriendlyStats`, a delayed one, or a
    ``distributed`` future of one (so the weights stay on the cluster).
    """
    n, d = X.shape
    blocks, ranges = _row_chunks(X)
    tiles = column_tiles(d, 1, tile_bytes)
    label_parts, _ = _label_parts(labels, sizes, ranges)
    parts = []
    for ti, ci in enumerate(tiles):
        for cj in tiles[ti:]:
            pieces = [
                dask.delayed(chunk_weighted_moment, pure=True)(blk, lab, ci, cj, stats, float(clip))
                for blk, lab in zip(blocks, label_parts)
            ]
            tile = _tree(_sum_arrays, pieces)
            parts.append(dask.delayed(tile_threshold, pure=True)(tile, ci, cj, float(threshold)))
    return dask.delayed(_concat_entries, pure=True)(*parts)
