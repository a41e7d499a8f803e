"""Clipped second moments in tiles, streaming over row chunks.

Per-block kernels are plain NumPy (``block_*``); :func:`clipped_second_moment` is the thin
dask wiring. The result is a lazy ``d x d`` dask array whose chunks are ``tile x tile``
tiles: no task ever holds more than one tile of the second moment, so memory scales with
the tile size, not with d^2. Each tile is a tree-reduced sum over row chunks of
``Y[rows, I].T @ Y[rows, J]``.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from dpdist.exceptions import ValidationError

__all__ = [
    "DEFAULT_TILE",
    "block_clip",
    "block_zero_nonfinite",
    "clipped_second_moment",
    "nonfinite_guard",
    "with_column_tiles",
]

#: Default tile width (columns) of the second moment: 2048 x 2048 float64 = 32 MiB a tile.
DEFAULT_TILE = 2048
NONFINITE_POLICIES = ("raise", "zero")


def block_clip(x: np.ndarray, clip: float) -> np.ndarray:
    """Entrywise truncation ``sign(x) * min(|x|, clip)`` (Algorithm 1, line 1), as float64."""
    return np.clip(np.asarray(x, dtype=np.float64), -clip, clip)


def block_zero_nonfinite(x: np.ndarray) -> np.ndarray:
    """Replace NaN and +/-inf by 0 (``on_nonfinite="zero"``)."""
    return np.where(np.isfinite(x), x, 0).astype(x.dtype, copy=False)


def nonfinite_guard(X: da.Array, on_nonfinite: str) -> tuple[da.Array, da.Array | None]:
    """Apply the non-finite policy lazily.

    Returns ``(X, all_finite)``: for ``"zero"`` the imputed array and ``None``; for
    ``"raise"`` the array unchanged and a lazy boolean to be computed *in the same pass* as
    the statistics (so the data are read once); the caller raises before releasing anything
    when it is False.
    """
    if on_nonfinite not in NONFINITE_POLICIES:
        raise ValidationError(f"on_nonfinite must be one of {NONFINITE_POLICIES}, got {on_nonfinite!r}")
    if on_nonfinite == "zero":
        return X.map_blocks(block_zero_nonfinite, dtype=X.dtype), None
    return X, da.isfinite(X).all()


def with_column_tiles(X: da.Array, tile: int) -> da.Array:
    """Rechunk columns to width ``tile`` (rows untouched: no extra read, slices only)."""
    d = X.shape[1]
    tile = int(min(max(1, tile), d))
    if all(c == tile for c in X.chunks[1][:-1]) and X.chunks[1][-1] <= tile:
        return X
    return X.rechunk({1: tile})


def clipped_second_moment(X: da.Array, clip: float, *, tile: int = DEFAULT_TILE, split_every: int = 8) -> da.Array:
    """Lazy ``(1/n) Y^T Y`` with ``Y = clip(X)``, tiled ``tile x tile``.

    Parameters
    ----------
    X : dask array (n, d)
    clip : float
        Entrywise truncation level R.
    tile : int
        Tile width; tiles are the chunks of the returned array.
    split_every : int
        Fan-in of the tree reduction over row chunks.
    """
    n = X.shape[0]
    Y = with_column_tiles(X, tile).map_blocks(block_clip, clip, dtype=np.float64)
    G = da.matmul(Y.T, Y) if split_every is None else _tree_gram(Y, split_every)
    return G / n


def _tree_gram(Y: da.Array, split_every: int) -> da.Array:
    # Y.T @ Y as blockwise partial products per row chunk, then a tree sum over row chunks.
    partial = da.blockwise(
        _block_gram, "rij", Y, "ri", Y, "rj", dtype=np.float64, concatenate=False,
        adjust_chunks={"r": 1},
    )
    return partial.sum(axis=0, split_every=split_every)


def _block_gram(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # a, b: one row chunk restricted to column tiles I and J. ``a.T @ a`` hits BLAS syrk.
    out = a.T @ a if a is b else a.T @ b
    return out[None, :, :]
