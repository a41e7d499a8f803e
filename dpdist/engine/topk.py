"""Row-wise noisy top-k over a tiled matrix, merged across column tiles by a tree.

For each tile (row block I x column block J) of a lazy matrix ``S``, each row keeps its best
``k`` candidates ``(column, score, raw value)`` by ``score = |S_ij + noise_ij|``. Candidate
lists of one row block are merged across J by a tree reduction. Only at the root of a row
block's tree does a caller-supplied ``release(rows, cols, raw)`` turn raw values into
released values; the root returns the released values only. The engine decides no noise
scale. The caller supplies the selection noise in one of two forms:

- a *dense* noise function ``select_noise(rows, cols)`` returning the noise of a whole tile
  (d^2 draws over the matrix);
- a *lazy* selection sampler (:class:`LazyNoise`, e.g.
  :class:`dpdist.privacy.noise.lazy_selection.LazySelectionNoise`): once per row block
  ``prepare_rows(rows, k)`` computes data-free per-row state (the top of each row's noise
  tree and a floor below which no entry can be selected), and per tile
  ``tile_candidates(tile, row_start, col_start, k, state)`` returns the tile's exact top-k
  candidates, drawing only the noise that can matter. Each row's noise is a function of
  (seed, purpose, row) only, and the tile candidates merged by :func:`combine_row_topk` are
  the row's exact top k, so the merge and its result do not depend on the tiling.

A lazy sampler may also decide the merge itself (:class:`ExactMerge`): when its float scores
cannot order every pair of candidates exactly (certified intervals refined on demand, as for
exact Gumbel keys), it returns with each tile's candidates an ``aux`` array (per candidate,
whatever it needs to compare them) and the engine merges candidate lists by calling
``sampler.exact_select(row_start, cols, scores, raw, aux, k)`` instead of sorting the float
scores. The engine still chooses no noise and compares nothing itself.

Ties in the score are broken by the smaller column index, so the selection is a function of
the scores alone, whatever the tiling.

With ``symmetric=True`` (a symmetric ``S`` such as a Gram matrix) only the tiles I <= J are
read: one task per tile produces the candidates of row block I (from the tile) and of row
block J (from its transpose), so every tile is computed once and dropped at once (memory
O(tile) per task, never a d x d array), and lower tiles are never built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

import dask
import numpy as np

from dpdist.engine.runtime import unoptimized_delayed

__all__ = [
    "Candidates",
    "ExactMerge",
    "LazyNoise",
    "RowRelease",
    "chunk_row_topk",
    "chunk_symmetric_topk",
    "combine_row_topk",
    "finalize_row_topk",
    "row_topk_release",
]

NoiseFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
ReleaseFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@runtime_checkable
class LazyNoise(Protocol):
    """A lazy selection sampler (see the module docstring)."""

    def prepare_rows(self, rows: np.ndarray, k: int) -> Any: ...

    def tile_candidates(
        self, tile: np.ndarray, row_start: int, col_start: int, k: int, state: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


@runtime_checkable
class ExactMerge(Protocol):
    """A lazy sampler that merges candidate lists itself (see the module docstring): its
    ``tile_candidates`` returns ``(cols, scores, raw, aux)``, already its exact top k."""

    def exact_select(
        self, row_start: int, cols: np.ndarray, scores: np.ndarray, raw: np.ndarray, aux: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...


@dataclass
class Candidates:
    """Per-row candidates of one row block (``rows`` x ``k``; column -1 marks an empty slot)."""

    row_start: int
    cols: np.ndarray  # (r, k) int64
    scores: np.ndarray  # (r, k) float64, -inf for empty slots
    raw: np.ndarray  # (r, k) float64, un-noised values: never leave the worker
    diag_raw: np.ndarray  # (r,) raw diagonal S_ii (NaN until the diagonal tile is seen)
    aux: np.ndarray | None = None  # (r, k, ...) an ExactMerge sampler's comparison data; never leaves


@dataclass
class RowRelease:
    """What leaves the workers for one row block: selected columns and released values."""

    row_start: int
    cols: np.ndarray  # (r, k) int64
    values: np.ndarray  # (r, k) released values
    diag: np.ndarray  # (r,) released diagonal


def _select(cols: np.ndarray, scores: np.ndarray, raw: np.ndarray, k: int):
    """Keep the k best of each row by (score desc, column asc), in that order (a canonical
    order: with lattice noise, ties in the score have positive probability)."""
    if cols.shape[1] >= k:
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


def _diag_of(tile: np.ndarray, row_start: int, col_start: int) -> np.ndarray:
    r, c = tile.shape
    diag = np.full(r, np.nan)
    lo, hi = max(row_start, col_start), min(row_start + r, col_start + c)
    if lo < hi:
        idx = np.arange(lo, hi)
        diag[idx - row_start] = tile[idx - row_start, idx - col_start]
    return diag


def chunk_row_topk(
    tile: np.ndarray, row_start: int, col_start: int, k: int, select_noise: NoiseFn | LazyNoise, state: Any = None
) -> Candidates:
    """Candidates of one tile: the k best entries per row by ``|tile + noise|``.

    ``select_noise`` is a dense noise function or a :class:`LazyNoise` (then ``state`` is its
    ``prepare_rows`` output for a row range containing the tile's rows, or None).
    """
    tile = np.asarray(tile, dtype=np.float64)
    if isinstance(select_noise, ExactMerge):
        cols, cand_scores, raw, aux = select_noise.tile_candidates(tile, int(row_start), int(col_start), k, state)
        return Candidates(row_start, cols, cand_scores, raw, _diag_of(tile, row_start, col_start), aux)
    if isinstance(select_noise, LazyNoise):
        cols, cand_scores, raw = select_noise.tile_candidates(tile, int(row_start), int(col_start), k, state)
        cols, cand_scores, raw = _select(cols, cand_scores, raw, k)
        return Candidates(row_start, cols, cand_scores, raw, _diag_of(tile, row_start, col_start))
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
    return Candidates(row_start, cols, cand_scores, raw, _diag_of(tile, row_start, col_start))


def chunk_symmetric_topk(
    tile: np.ndarray,
    row_start: int,
    col_start: int,
    k: int,
    select_noise: NoiseFn | LazyNoise,
    state_rows: Any = None,
    state_cols: Any = None,
) -> tuple[Candidates, Candidates | None]:
    """Both uses of an upper tile (I, J) of a symmetric matrix: the candidates of row block I
    (from the tile) and, off the diagonal, of row block J (from its transpose)."""
    tile = np.asarray(tile, dtype=np.float64)
    first = chunk_row_topk(tile, row_start, col_start, k, select_noise, state_rows)
    if row_start == col_start:
        return first, None
    return first, chunk_row_topk(tile.T, col_start, row_start, k, select_noise, state_cols)


def _prepare_all(select_noise: LazyNoise, row_starts: list[int], sizes: list[int], k: int) -> list:
    """The data-free per-row-block states, all in one task: every tile task depends on it, so
    the scheduler runs it first and no Gram tile waits in memory for its row block's state."""
    return [select_noise.prepare_rows(np.arange(r0, r0 + n), k) for r0, n in zip(row_starts, sizes)]


def _symmetric_task(tile, row_start, col_start, k, select_noise, states, bi: int, bj: int):
    si, sj = (None, None) if states is None else (states[bi], states[bj])
    return chunk_symmetric_topk(tile, row_start, col_start, k, select_noise, si, sj)


def _row_task(tile, row_start, col_start, k, select_noise, states, bi: int):
    return chunk_row_topk(tile, row_start, col_start, k, select_noise, None if states is None else states[bi])


def combine_row_topk(parts: list[Candidates], k: int, select_noise: Any = None) -> Candidates:
    """Merge candidate lists of the same row block (any number of column tiles); by the
    sampler's :meth:`ExactMerge.exact_select` when ``select_noise`` has one."""
    first = parts[0]
    cols = np.hstack([p.cols for p in parts])
    scores = np.hstack([p.scores for p in parts])
    raw = np.hstack([p.raw for p in parts])
    aux = None
    if isinstance(select_noise, ExactMerge):
        aux = np.concatenate([p.aux for p in parts], axis=1)
        cols, scores, raw, aux = select_noise.exact_select(first.row_start, cols, scores, raw, aux, k)
    else:
        cols, scores, raw = _select(cols, scores, raw, k)
    diag = first.diag_raw.copy()
    for p in parts[1:]:
        seen = ~np.isnan(p.diag_raw)
        diag[seen] = p.diag_raw[seen]
    return Candidates(first.row_start, cols, scores, raw, diag, aux)


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
    select_noise: NoiseFn | LazyNoise,
    release: ReleaseFn,
    *,
    split_every: int = 8,
    guard=None,
    symmetric: bool = False,
) -> list:
    """Build (lazily) the per-row-block releases of a tiled dask matrix ``S``.

    Parameters
    ----------
    S : dask array (d, d)
        The scored matrix, tiled.
    k : int
    select_noise : dense noise function or :class:`LazyNoise`
    release : callable
        ``release(rows, cols, raw)``: released values (the caller adds the release noise).
    split_every : int
        Fan-in of the merge tree.
    guard : optional
        A lazy boolean checked before anything is released (see :func:`finalize_row_topk`).
    symmetric : bool
        ``S`` is symmetric with square tiles: read the tiles I <= J only, each once, for
        both row blocks (module docstring).

    Returns one ``dask.delayed`` :class:`RowRelease` per row block of ``S``.
    """
    # optimize_graph=False keeps the data-loading keys shared with ``guard``: one read
    tiles = S.to_delayed(optimize_graph=False)
    guard = unoptimized_delayed(guard)
    row_starts = np.concatenate([[0], np.cumsum(S.chunks[0])[:-1]])
    col_starts = np.concatenate([[0], np.cumsum(S.chunks[1])[:-1]])
    if symmetric and tuple(S.chunks[0]) != tuple(S.chunks[1]):
        raise ValueError("symmetric=True needs square tiles (equal row and column chunks)")
    states = None
    if isinstance(select_noise, LazyNoise):
        states = dask.delayed(_prepare_all, pure=True)(
            select_noise, [int(r) for r in row_starts], [int(n) for n in S.chunks[0]], k
        )
    parts: list[list] = [[] for _ in row_starts]
    if symmetric:
        fused = dask.delayed(_symmetric_task, nout=2)
        for bi, r0 in enumerate(row_starts):
            for bj in range(bi, len(col_starts)):
                a, b = fused(tiles[bi, bj], int(r0), int(col_starts[bj]), k, select_noise, states, bi, bj)
                parts[bi].append(a)
                if bj != bi:
                    parts[bj].append(b)
    else:
        chunk = dask.delayed(_row_task)
        for bi, r0 in enumerate(row_starts):
            parts[bi] = [chunk(tiles[bi, bj], int(r0), int(c0), k, select_noise, states, bi)
                         for bj, c0 in enumerate(col_starts)]
    combine = dask.delayed(combine_row_topk)
    merge = select_noise if isinstance(select_noise, ExactMerge) else None
    finalize = dask.delayed(finalize_row_topk)
    out = []
    for bi in range(len(row_starts)):
        level = parts[bi]
        while len(level) > 1:
            level = [combine(level[i : i + split_every], k, merge) for i in range(0, len(level), split_every)]
        out.append(finalize(level[0], release, guard))
    return out
