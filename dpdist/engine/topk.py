"""Row-wise noisy top-k over a tiled matrix, merged across column tiles by a tree.

For each tile (row block I x column block J) of a lazy matrix ``S``, a caller-supplied
``select_noise(rows, cols)`` adds noise to the tile, and each row keeps its best ``k``
candidates ``(column, score, raw value)`` by ``score = |S_ij + noise_ij|``. Candidate lists
of one row block are merged across J by a tree reduction. Only at the root of a row block's
tree does a caller-supplied ``release(rows, cols, raw)`` turn raw values into released
values; the root returns the released values only. The engine decides no noise scale.

Ties in the score are broken by the smaller column index, so the selection is a function of
the scores alone, whatever the tiling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import dask
import numpy as np

from dpdist.engine.runtime import unoptimized_delayed

__all__ = [
    "Candidates",
    "RowRelease",
    "chunk_row_topk",
    "combine_row_topk",
    "finalize_row_topk",
    "row_topk_release",
]

NoiseFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
ReleaseFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass
class Candidates:
    """Per-row candidates of one row block (``rows`` x ``k``; column -1 marks an empty slot)."""

    row_start: int
    cols: np.ndarray  # (r, k) int64
    scores: np.ndarray  # (r, k) float64, -inf for empty slots
    raw: np.ndarray  # (r, k) float64, un-noised values: never leave the worker
    diag_raw: np.ndarray  # (r,) raw diagonal S_ii (NaN until the diagonal tile is seen)


@dataclass
class RowRelease:
    """What leaves the workers for one row block: selected columns and released values."""

    row_start: int
    cols: np.ndarray  # (r, k) int64
    values: np.ndarray  # (r, k) released values
    diag: np.ndarray  # (r,) released diagonal


def _select(cols: np.ndarray, scores: np.ndarray, raw: np.ndarray, k: int):
    """Keep the k best of each row by (score desc, column asc)."""
    if cols.shape[1] > k:
        # lexsort: last key is primary. Empty slots have score -inf and column -1 -> sort last
        order = np.lexsort((np.where(cols < 0, np.iinfo(np.int64).max, cols), -scores), axis=1)[:, :k]
        cols = np.take_along_axis(cols, order, axis=1)
        scores = np.take_along_axis(scores, order, axis=1)
        raw = np.take_along_axis(raw, order, axis=1)
    elif cols.shape[1] < k:
        pad = k - cols.shape[1]
        r = cols.shape[0]
        cols = np.hstack([cols, np.full((r, pad), -1, dtype=np.int64)])
        scores = np.hstack([scores, np.full((r, pad), -np.inf)])
        raw = np.hstack([raw, np.zeros((r, pad))])
    return cols, scores, raw


def chunk_row_topk(tile: np.ndarray, row_start: int, col_start: int, k: int, select_noise: NoiseFn) -> Candidates:
    """Candidates of one tile: the k best entries per row by ``|tile + noise|``."""
    tile = np.asarray(tile, dtype=np.float64)
    r, c = tile.shape
    rows = np.arange(row_start, row_start + r)
    cols_idx = np.arange(col_start, col_start + c)
    scores = np.abs(tile + select_noise(rows, cols_idx))
    kk = min(k, c)
    if c > kk:
        part = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
    else:
        part = np.broadcast_to(np.arange(c), (r, c))
    cols = np.asarray(part, dtype=np.int64) + col_start
    cand_scores = np.take_along_axis(scores, part, axis=1)
    raw = np.take_along_axis(tile, part, axis=1)
    # argpartition may split ties at the k-th score arbitrarily: re-rank with the tie rule,
    # after adding every column whose score equals the k-th score.
    if c > kk:
        kth = cand_scores.min(axis=1, keepdims=True)
        ties = (scores == kth).sum(axis=1) > (cand_scores == kth).sum(axis=1)
        for i in np.nonzero(ties)[0]:
            idx = np.lexsort((cols_idx, -scores[i]))[:kk]
            cols[i], cand_scores[i], raw[i] = cols_idx[idx], scores[i, idx], tile[i, idx]
    cols, cand_scores, raw = _select(cols, cand_scores, raw, k)
    diag = np.full(r, np.nan)
    lo, hi = max(row_start, col_start), min(row_start + r, col_start + c)
    if lo < hi:
        idx = np.arange(lo, hi)
        diag[idx - row_start] = tile[idx - row_start, idx - col_start]
    return Candidates(row_start, cols, cand_scores, raw, diag)


def combine_row_topk(parts: list[Candidates], k: int) -> Candidates:
    """Merge candidate lists of the same row block (any number of column tiles)."""
    first = parts[0]
    cols = np.hstack([p.cols for p in parts])
    scores = np.hstack([p.scores for p in parts])
    raw = np.hstack([p.raw for p in parts])
    cols, scores, raw = _select(cols, scores, raw, k)
    diag = first.diag_raw.copy()
    for p in parts[1:]:
        seen = ~np.isnan(p.diag_raw)
        diag[seen] = p.diag_raw[seen]
    return Candidates(first.row_start, cols, scores, raw, diag)


def finalize_row_topk(cand: Candidates, release: ReleaseFn, guard=None) -> RowRelease | None:
    """Root of a row block's tree: turn raw values into released values.

    ``guard`` (any value) is only a dependency: pass a lazily computed check (for example
    "all inputs were finite") so that it is evaluated before anything is released; when it
    is falsy nothing is released and the root returns None.
    """
    if guard is not None and not bool(guard):
        return None
    rows = np.arange(cand.row_start, cand.row_start + cand.cols.shape[0])
    values = release(rows[:, None], cand.cols, cand.raw)
    diag = release(rows[:, None], rows[:, None], cand.diag_raw[:, None])[:, 0]
    return RowRelease(cand.row_start, cand.cols, values, diag)


def row_topk_release(
    S,
    k: int,
    select_noise: NoiseFn,
    release: ReleaseFn,
    *,
    split_every: int = 8,
    guard=None,
) -> list:
    """Build (lazily) the per-row-block releases of a tiled dask matrix ``S``.

    Returns one ``dask.delayed`` :class:`RowRelease` per row block of ``S``.
    """
    # optimize_graph=False keeps the data-loading keys shared with ``guard``: one read
    tiles = S.to_delayed(optimize_graph=False)
    guard = unoptimized_delayed(guard)
    row_starts = np.concatenate([[0], np.cumsum(S.chunks[0])[:-1]])
    col_starts = np.concatenate([[0], np.cumsum(S.chunks[1])[:-1]])
    chunk = dask.delayed(chunk_row_topk)
    combine = dask.delayed(combine_row_topk)
    finalize = dask.delayed(finalize_row_topk)
    out = []
    for bi, r0 in enumerate(row_starts):
        level = [
            chunk(tiles[bi, bj], int(r0), int(c0), k, select_noise)
            for bj, c0 in enumerate(col_starts)
        ]
        while len(level) > 1:
            level = [combine(level[i : i + split_every], k) for i in range(0, len(level), split_every)]
        out.append(finalize(level[0], release, guard))
    return out
