"""The sum of norm-clipped rows, rounded per row to integers: exact in any order.

A private mean is a noised sum of rows whose norms are bounded. Summing floats leaves a
rounding error that depends on every other row; here each row is clipped to L2 norm
``clip``, rounded to integer multiples of a public ``unit`` (``rint(y / unit)``), its squared
integer norm checked exactly against a public ``bound_sq`` (a row above it, which only float
error in the clip could produce, becomes a zero row), and the integer vectors are summed in
int64. Integer addition is exact and associative, so the sum is the same for every chunking,
scheduler and summation order, and one row's contribution is exactly its own integer vector.

:func:`block_clipped_row_sum` is the NumPy kernel; :func:`clipped_row_sum` the dask wiring.
The caller (the privacy layer) chooses ``unit`` and ``bound_sq`` and checks that no sum can
overflow; nothing here decides a noise scale.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

__all__ = ["block_clipped_row_sum", "block_norm_clip_units", "clipped_row_sum"]


def block_norm_clip_units(x: np.ndarray, clip: float, unit: float, bound_sq: int) -> np.ndarray:
    """Each row scaled to L2 norm at most ``clip``, rounded to integer multiples of ``unit``
    (an int64 array of the block's shape); rows whose squared integer norm exceeds
    ``bound_sq``, and rows holding NaN or infinity, are zero rows.

    The squared norm is an exact int64 sum (the caller keeps ``d * (clip / unit + 1)**2``
    below 2**62), so ``||m||_2 <= sqrt(bound_sq)`` holds for every returned row exactly.
    """
    y = np.array(x, dtype=np.float64, copy=True)
    finite = np.isfinite(y).all(axis=1)
    y[~finite] = 0.0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", y, y))
        scale = np.where(norms > clip, clip / norms, 1.0)
    scale[~np.isfinite(scale)] = 0.0  # a norm that overflowed: the row is dropped
    y *= scale[:, None]
    m = np.rint(y / unit).astype(np.int64)
    sq = np.einsum("ij,ij->i", m, m)
    m[sq > int(bound_sq)] = 0
    return m


def block_clipped_row_sum(x: np.ndarray, clip: float, unit: float, bound_sq: int) -> np.ndarray:
    """``sum_i m_i`` over the rows of a block (:func:`block_norm_clip_units`), int64, shape (1, d)."""
    return block_norm_clip_units(x, clip, unit, bound_sq).sum(axis=0, dtype=np.int64)[None, :]


def clipped_row_sum(X: da.Array, clip: float, unit: float, bound_sq: int, *, split_every: int = 8) -> da.Array:
    """Lazy int64 vector (d,): the sum over all rows of ``X`` of their clipped integer vectors.

    Columns are gathered into one chunk (the clip needs whole rows); row chunks are summed in
    a tree of fan-in ``split_every``. Integer sums: the result does not depend on the chunks.
    """
    d = X.shape[1]
    Xr = X.rechunk({1: -1}) if X.numblocks[1] > 1 else X
    parts = Xr.map_blocks(block_clipped_row_sum, float(clip), float(unit), int(bound_sq), dtype=np.int64,
                          chunks=((1,) * Xr.numblocks[0], (d,)), meta=np.empty((0, 0), dtype=np.int64))
    return parts.sum(axis=0, dtype=np.int64, split_every=split_every)
