"""Tile-wise (release, then) hard thresholding of a tiled matrix, returning sparse triples.

Each tile of a lazy matrix ``S`` is optionally replaced on the worker by a caller's released
values ``release(tile, offset)`` (a float-safe mechanism's), is hard-thresholded (entries with
``|v| < threshold`` set to zero; the diagonal is always kept), and only the surviving
``(row, col, value)`` triples leave the worker.
"""

from __future__ import annotations

from typing import Callable

import dask
import numpy as np

from dpdist.engine.runtime import unoptimized_delayed

__all__ = ["chunk_threshold", "threshold_triples"]


def chunk_threshold(tile, row_start: int, col_start: int, threshold: float, guard=None, release=None):
    """Threshold one tile; returns ``(rows, cols, values)`` of the kept entries, or None
    when ``guard`` is given and falsy (nothing is released).

    ``release(tile, (row_start, col_start))``, when given, replaces the tile by its released
    values (a caller's float-safe mechanism) before thresholding."""
    if guard is not None and not bool(guard):
        return None
    tile = np.asarray(tile, dtype=np.float64)
    r, c = tile.shape
    rows = np.arange(row_start, row_start + r)
    cols = np.arange(col_start, col_start + c)
    if release is not None:
        tile = np.asarray(release(tile, (row_start, col_start)), dtype=np.float64)
    keep = np.abs(tile) >= threshold
    keep |= rows[:, None] == cols[None, :]
    ii, jj = np.nonzero(keep)
    return rows[ii], cols[jj], tile[ii, jj]


def threshold_triples(S, threshold: float, guard=None, release: Callable | None = None) -> list:
    """One ``dask.delayed`` triple per tile of the tiled dask matrix ``S`` (``release`` as in
    :func:`chunk_threshold`)."""
    # optimize_graph=False keeps the data-loading keys shared with ``guard``: one read
    tiles = S.to_delayed(optimize_graph=False)
    guard = unoptimized_delayed(guard)
    row_starts = np.concatenate([[0], np.cumsum(S.chunks[0])[:-1]])
    col_starts = np.concatenate([[0], np.cumsum(S.chunks[1])[:-1]])
    task = dask.delayed(chunk_threshold)
    return [
        task(tiles[bi, bj], int(r0), int(c0), float(threshold), guard, release)
        for bi, r0 in enumerate(row_starts)
        for bj, c0 in enumerate(col_starts)
    ]
