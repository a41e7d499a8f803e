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
    """Entrywise truncation ``sign(x) * min(|x|, clip)`` (Algorithm 1, line 1), as float64.

    ``maximum`` then ``minimum`` in place on one float64 copy: the same values as
    ``np.clip`` (NaN stays NaN, +-inf become +-clip, -0.0 stays -0.0) at about half its cost,
    which matters when the Gram is cheap (d ~ 100, streaming).
    """
    y = np.array(x, dtype=np.float64, copy=True)
    np.maximum(y, -clip, out=y)
    np.minimum(y, clip, out=y)
    return y


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

    Only the upper-triangle tiles (I <= J) are computed: diagonal tiles with ``Y_I^T Y_I``
    (BLAS syrk, half the flops of a general product), off-diagonal ones with
    ``Y_I^T Y_J``; each tile is a tree sum over row chunks with fan-in ``split_every``.
    Tiles below the diagonal are transposed views of their mirror.

    Parameters
    ----------
    X : dask array (n, d)
    clip : float
        Entrywise truncation level R (``math.inf`` for no truncation).
    tile : int
        Tile width; tiles are the chunks of the returned array.
    split_every : int
        Fan-in of the tree reduction over row chunks.
    """
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    n = X.shape[0]
    Y = with_column_tiles(X, tile).map_blocks(block_clip, clip, dtype=np.float64)
    n_row, n_col = len(Y.chunks[0]), len(Y.chunks[1])
    token = tokenize(Y, n, split_every)
    part, tree, name = f"gram-part-{token}", f"gram-tree-{token}", f"clipped-second-moment-{token}"
    dsk: dict = {}
    for i in range(n_col):
        for j in range(i, n_col):
            level = []
            for r in range(n_row):
                dsk[(part, r, i, j)] = (_block_gram, (Y.name, r, i), (Y.name, r, j), i == j)
                level.append((part, r, i, j))
            depth = 0
            while len(level) > 1:
                nxt = []
                for g in range(0, len(level), split_every):
                    key = (tree, depth, g // split_every, i, j)
                    dsk[key] = (_sum_tiles, level[g : g + split_every])
                    nxt.append(key)
                level, depth = nxt, depth + 1
            dsk[(name, i, j)] = (_scale, level[0], 1.0 / n)
            if i != j:
                dsk[(name, j, i)] = (np.transpose, (name, i, j))
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[Y])
    return da.Array(graph, name, chunks=(Y.chunks[1], Y.chunks[1]), dtype=np.float64)


def _block_gram(a: np.ndarray, b: np.ndarray, diagonal: bool) -> np.ndarray:
    """One row chunk's contribution to tile (I, J); ``a.T @ a`` is BLAS syrk."""
    return a.T @ a if diagonal else a.T @ b


def _sum_tiles(parts: list) -> np.ndarray:
    out = np.array(parts[0], dtype=np.float64, copy=True)
    for p in parts[1:]:
        out += p
    return out


def _scale(tile: np.ndarray, factor: float) -> np.ndarray:
    return tile * factor
