"""Turn user input into a validated 2-D floating dask array.

Accepted inputs: a NumPy array, a dask array, a ``zarr.Array``, or a string path / URL of a
Zarr array (fsspec URLs such as ``s3://...`` or ``memory://...`` pass through to zarr).
Validation here reads metadata only: shape, dtype and chunking. Values (NaN/inf) are checked
inside the computation's single pass (see :mod:`dpdist.engine.nonfinite`).
"""

from __future__ import annotations

import os
import warnings

import dask.array as da
import numpy as np

from dpdist.exceptions import DataConversionWarning, ValidationError

__all__ = ["as_dask_array", "open_zarr_array", "DEFAULT_ROW_CHUNK_BYTES"]

#: Target bytes of one row chunk when dpdist has to choose the chunking (numpy input, or a
#: Zarr array whose chunks are far too small or too large).
DEFAULT_ROW_CHUNK_BYTES = 64 * 2**20


def open_zarr_array(path: str):
    """Open the Zarr array at ``path`` (local path or fsspec URL) read-only.

    Raises :class:`ValidationError` naming the path when nothing is there, or when it is a
    group rather than an array.
    """
    import zarr

    if "://" not in path and not os.path.exists(path):
        raise ValidationError(f"no Zarr array at {path!r}: the path does not exist")
    try:
        node = zarr.open(path, mode="r")
    except Exception as exc:  # zarr raises several types for a missing/invalid store
        raise ValidationError(f"cannot open a Zarr array at {path!r}: {exc}") from None
    if not isinstance(node, zarr.Array):
        # a dpdist dataset group stores its samples under "X"
        if isinstance(node, zarr.Group) and "X" in node:
            return node["X"]
        raise ValidationError(f"{path!r} is a Zarr group, not an array (and has no 'X' array)")
    return node


def _row_chunk(n_rows: int, n_cols: int, itemsize: int) -> int:
    return int(max(1, min(n_rows, DEFAULT_ROW_CHUNK_BYTES // max(1, n_cols * itemsize))))


def as_dask_array(X, *, name: str = "X", min_rows: int = 2, min_cols: int = 2) -> da.Array:
    """Return ``X`` as a validated 2-D float32/float64 dask array with known chunks.

    Parameters
    ----------
    X : array-like, dask array, zarr.Array or str
        The data, rows are individuals.
    name : str
        Name used in error messages.

    Raises
    ------
    ValidationError
        Not 2-D, fewer than ``min_rows`` rows or ``min_cols`` columns, unknown chunk sizes,
        non-numeric dtype, or a missing Zarr path.

    Warns
    -----
    DataConversionWarning
        Integer or boolean input converted to float64.
    """
    import zarr

    if isinstance(X, (str, os.PathLike)):
        X = open_zarr_array(os.fspath(X))
    if isinstance(X, zarr.Array):
        arr = da.from_zarr(X)
    elif isinstance(X, da.Array):
        arr = X
    else:
        np_arr = np.asarray(X)
        if np_arr.ndim == 2:
            arr = da.from_array(
                np_arr, chunks=(_row_chunk(np_arr.shape[0], np_arr.shape[1], np_arr.dtype.itemsize), -1)
            )
        else:
            arr = da.from_array(np_arr)
    if arr.ndim != 2:
        raise ValidationError(f"{name} must be 2-D (n_samples, n_features), got shape {arr.shape}")
    if any(np.isnan(c) for cs in arr.chunks for c in cs):
        raise ValidationError(
            f"{name} has unknown chunk sizes; call .compute_chunk_sizes() on it first"
        )
    n, d = arr.shape
    if n < min_rows:
        raise ValidationError(f"{name} needs at least {min_rows} rows (samples), got {n}")
    if d < min_cols:
        raise ValidationError(f"{name} needs at least {min_cols} columns (features), got {d}")
    kind = arr.dtype.kind
    if kind in "iub":
        warnings.warn(
            f"{name} has dtype {arr.dtype}; converted to float64", DataConversionWarning, stacklevel=3
        )
        arr = arr.astype(np.float64)
    elif kind != "f" or arr.dtype.itemsize not in (4, 8):
        raise ValidationError(f"{name} must have dtype float32 or float64 (or integer), got {arr.dtype}")
    # Rechunk rows only when the chunks are pathological (tiny or huge); columns stay as given.
    row_sizes = arr.chunks[0]
    target = _row_chunk(n, d, arr.dtype.itemsize)
    if len(row_sizes) > 1 and (max(row_sizes) > 4 * target or np.median(row_sizes) < target / 64):
        arr = arr.rechunk({0: target})
    return arr
