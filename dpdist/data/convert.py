"""Write any input dpdist reads as a Zarr array in the layout that reads fastest.

The layout: float32 (or float64 on request), whole rows in each chunk (one chunk spans every
column), up to :data:`MAX_CHUNK_ROWS` rows and about ``DEFAULT_ROW_CHUNK_BYTES`` a chunk, no
compression, every chunk file written (``write_empty_chunks``), so readers that refuse
missing chunks accept the store. Values are copied as they are: NaN stays NaN (the estimators'
non-finite handling applies when the store is read), a float64 value beyond float32's range
becomes inf.

Conversion is not a release: the output holds the data themselves. The write is atomic: the
array is written into a hidden temporary directory beside the output and renamed into place
when complete, so a failure leaves nothing at the output (and an existing output, with
``overwrite``, untouched).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Sequence

import dask
import dask.array as da
import numpy as np

from dpdist.exceptions import ValidationError

__all__ = ["MAX_CHUNK_ROWS", "OUTPUT_DTYPES", "convert", "default_chunk_rows"]

#: Most rows of a chunk :func:`convert` chooses (the read rates measured for the README's
#: Performance section fall beyond about 262k rows a chunk).
MAX_CHUNK_ROWS = 262_144
#: Dtypes :func:`convert` writes.
OUTPUT_DTYPES = ("float32", "float64")


def default_chunk_rows(n_rows: int, n_cols: int, itemsize: int) -> int:
    """Rows of a chunk: about ``DEFAULT_ROW_CHUNK_BYTES`` of whole rows, at most
    :data:`MAX_CHUNK_ROWS` and at most ``n_rows``."""
    from dpdist.data.formats import DEFAULT_ROW_CHUNK_BYTES

    return int(max(1, min(n_rows, MAX_CHUNK_ROWS, DEFAULT_ROW_CHUNK_BYTES // max(1, n_cols * itemsize))))


def _cast(block: np.ndarray, dtype: np.dtype) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):  # no data-dependent warning: inf stays inf
        return block.astype(dtype, copy=False)


def _check_scheduler(scheduler: Any) -> None:
    """Refuse a ``scheduler`` that ``dask.compute`` would not take, before anything is written."""
    from dask.base import get_scheduler

    try:
        get_scheduler(scheduler=scheduler)
    except ValueError as exc:
        raise ValidationError(
            f"scheduler must be None, a dask scheduler name or a distributed.Client, got {scheduler!r} "
            f"({exc}); an address or 'local-cluster' is for the command line's --scheduler"
        ) from None


def convert(
    source: Any,
    output: str | os.PathLike,
    *,
    columns: Sequence[str] | None = None,
    dtype: str = "float32",
    chunk_rows: int | None = None,
    overwrite: bool = False,
    missing_chunks: str = "auto",
    scheduler: Any = None,
) -> str:
    """Write ``source`` as a Zarr array at ``output`` (a local path); returns its absolute path.

    Parameters
    ----------
    source : str, array-like, dask array or zarr.Array
        Anything :func:`dpdist.data.validation.as_dask_array` reads: a Parquet, CSV or
        ``.npy`` file, a Zarr store, an array.
    output : str or PathLike
        The Zarr array to create. Its directory must exist and be writable.
    columns : list of str, optional
        The columns of a Parquet or CSV source to keep, in this order (default: all). Their
        names are kept in the output's ``attrs["columns"]``.
    dtype : {"float32", "float64"}, default "float32"
    chunk_rows : int, optional
        Rows per chunk (default :func:`default_chunk_rows`).
    overwrite : bool, default False
        Replace an existing ``output`` (only once the new array is complete).
    missing_chunks : {"auto", "fill", "raise"}, default "auto"
        For a Zarr source (see :func:`~dpdist.data.validation.as_dask_array`).
    scheduler : optional
        Where to run, as ``dask.compute`` takes it: None (dask's configured scheduler, or the
        default ``distributed`` client), a local scheduler's name (``"threads"``,
        ``"synchronous"``, ``"processes"``) or a ``distributed.Client``. The command line
        resolves its ``--scheduler`` flag (``local-cluster``, a ``tcp://`` address) to one of
        these.

    Raises
    ------
    ValidationError
        A bad parameter, an unreadable source, or an output location that is not free or
        not writable; nothing is written.

    An error while the array is written (a chunk that cannot be read) is raised as dask
    raises it, and nothing is left at ``output``.
    """
    import zarr

    from dpdist._validation import check_bool, check_int
    from dpdist.data.publish import is_remote
    from dpdist.data.results import check_output_path, swap_into_place
    from dpdist.data.formats import column_names, input_format
    from dpdist.data.validation import _resolve_path, as_dask_array, write_chunk_manifest

    if dtype not in OUTPUT_DTYPES:
        raise ValidationError(f"dtype must be one of {OUTPUT_DTYPES}, got {dtype!r}")
    if chunk_rows is not None:
        check_int(chunk_rows, "chunk_rows", low=1)
    check_bool(overwrite, "overwrite")
    _check_scheduler(scheduler)
    if is_remote(os.fspath(output)):
        raise ValidationError(f"convert writes a local Zarr array; got {os.fspath(output)!r}")
    path = check_output_path(output, overwrite=overwrite)
    X = as_dask_array(source, min_rows=1, min_cols=1, missing_chunks=missing_chunks, columns=columns)
    names = None
    if isinstance(source, (str, os.PathLike)) and input_format(source) in ("parquet", "csv"):
        names = column_names(_resolve_path(os.fspath(source)), columns)  # the schema or header
    out_dtype = np.dtype(dtype)
    n, d = (int(s) for s in X.shape)
    rows = int(chunk_rows) if chunk_rows is not None else default_chunk_rows(n, d, out_dtype.itemsize)
    rows = min(rows, n)
    X = X.map_blocks(_cast, out_dtype, dtype=out_dtype).rechunk((rows, d))
    parent = os.path.dirname(path)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
    try:
        attributes: dict[str, Any] = {}
        if names is not None:
            attributes["columns"] = names
        arr = zarr.create_array(tmp, shape=(n, d), chunks=(rows, d), dtype=out_dtype, compressors=None,
                                fill_value=0.0, attributes=attributes,
                                config={"write_empty_chunks": True})  # every chunk file present
        dask.compute(da.store(X, arr, lock=False, compute=False), scheduler=scheduler)
        write_chunk_manifest(arr)  # the public record of every chunk written, for later readers
        swap_into_place(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path
