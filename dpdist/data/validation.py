"""Turn user input into a validated 2-D floating dask array.

Accepted inputs: a NumPy array, a dask array, a ``zarr.Array``, or a string path / URL of a
Zarr array (fsspec URLs such as ``s3://...`` or ``memory://...`` pass through to zarr), a
Parquet, CSV or ``.npy`` file (by suffix; :mod:`dpdist.data.formats`).
Validation here reads metadata only: shape, dtype, chunking, and the list of the store's
chunk keys (a CSV's rows are counted: it declares no row count). Values (NaN/inf) are
checked inside the computation's single pass.

Zarr inputs, as the workers see them
------------------------------------
* **Paths.** A local path is made absolute here, on the client, before anything is put in
  the graph: workers of a remote cluster run in other directories, and a relative path
  would make them open an empty store there.
* **Missing chunks.** Under the Zarr specification a chunk whose file is absent *is* the
  array's fill value, and zarr's writers skip chunks equal to the fill value unless asked not
  to (``write_empty_chunks=True``, a runtime setting zarr does not record in the store). So
  whether a chunk file exists can depend on the values: a store where one row is the only
  non-zero entry of its chunk has that chunk, and its neighbour with the row zeroed does not.
  A decision taken on the listing alone (refuse, name the chunk) would reveal that bit with
  no noise. The reading is therefore decided from public information only:

  - A store that dpdist wrote carries a **chunk manifest** in the array's attributes
    (:data:`CHUNK_MANIFEST_ATTR`, written by :func:`write_chunk_manifest`): every chunk (or
    shard) of its grid was stored, fill-valued ones too. Its listing is checked against the
    manifest before anything is read, and a store that lost a chunk file since is refused
    with :class:`ValidationError`; the message names the store, never a chunk. Each read on a
    worker checks again that its chunk files exist (a worker that sees another filesystem
    raises :class:`InfrastructureError` instead of reading fill values).
  - A store without a manifest is read per the specification: missing chunks are the fill
    value. Each read on a worker checks that the array's metadata document is there (a
    worker that sees another filesystem raises :class:`InfrastructureError`).

  ``missing_chunks`` (:data:`MISSING_CHUNKS`) chooses: ``"auto"`` (the default) as above;
  ``"fill"`` reads missing chunks as the fill value even when a manifest records them;
  ``"raise"`` also refuses a store that carries no manifest (decided from its metadata, not
  its listing). Releases record which reading was used in their notes
  (:func:`chunk_reading_notes`), never how many chunks were absent.
  Sharded arrays are checked shard by shard.
* **Storage errors.** A chunk that cannot be read or decoded (a corrupt file, a codec
  error, an unreachable object store) raises :class:`InfrastructureError` from the task that
  read it; unreadable or invalid metadata (a truncated ``zarr.json``) raises
  :class:`ValidationError` here, before anything is read. Messages name the store, never
  data values, and never a chunk whose presence could depend on the data.

Data types
----------
One rule for every input (NumPy, dask, Zarr), applied by :func:`as_float_dtype` from the
dtype alone: float64 and float32 are used as they are; booleans, signed and unsigned
integers and float16 are converted to float64 (exact, except integers beyond 2**53 in
magnitude, which are rounded), with one :class:`DataConversionWarning` naming the dtype;
every other dtype (complex, extended precision, strings, objects, dates) is refused.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import warnings
from typing import Any

import dask.array as da
import numpy as np
import scipy.sparse

from dpdist.data.formats import FORMATS, input_format, one_line, open_file, row_chunk
from dpdist.exceptions import DataConversionWarning, InfrastructureError, ValidationError

__all__ = [
    "CHUNK_MANIFEST_ATTR",
    "MISSING_CHUNKS",
    "as_dask_array",
    "as_float_dtype",
    "canonical_location",
    "check_chunks_present",
    "chunk_reading",
    "chunk_reading_notes",
    "open_zarr_array",
    "write_chunk_manifest",
]

#: Values of ``missing_chunks`` (see the module docstring); "auto" is the default.
MISSING_CHUNKS = ("auto", "fill", "raise")
#: The array attribute holding the chunk manifest of :func:`write_chunk_manifest`.
CHUNK_MANIFEST_ATTR = "dpdist_chunk_manifest"
#: The two readings of a Zarr input, as releases record them (:func:`chunk_reading_notes`).
READING_NOTES = {
    "manifest": (
        "input chunks: the store's chunk manifest records every chunk as written, and the listing "
        "matched it before anything was read"
    ),
    "fill": (
        "input chunks: read per the Zarr specification, a chunk file absent from the store is the "
        "array's fill value (the store carries no chunk manifest, or missing_chunks='fill')"
    ),
}
#: What a path may be, for messages.
_READABLE = ("dpdist reads Zarr stores and, by their suffix, " + ", ".join(sorted(FORMATS)) + " files")


def _check_missing_chunks(missing_chunks: Any) -> str:
    if missing_chunks not in MISSING_CHUNKS:
        raise ValidationError(f"missing_chunks must be one of {MISSING_CHUNKS}, got {missing_chunks!r}")
    return missing_chunks


def _resolve_path(path: str) -> str:
    """An absolute local path (``~`` expanded), or the URL unchanged."""
    if "://" in path:
        return path
    return os.path.abspath(os.path.expanduser(path))


def canonical_location(url: str) -> str:
    """A dataset's stable identifier: its URL, with local paths made absolute and real (the
    scheme of a URL lower-cased, a trailing ``/`` and a ``file://`` prefix dropped). Two
    spellings of one store give one identifier; the privacy ledger keeps budgets under it."""
    url = str(url).strip()
    if not url:
        raise ValidationError("a dataset needs a URL or path")
    if url.startswith("file://"):
        url = url[len("file://"):]
    if "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme.lower()}://{rest.rstrip('/')}"
    return os.path.realpath(os.path.expanduser(url))


def open_zarr_array(path: str | os.PathLike, *, missing_chunks: str = "auto"):
    """Open the Zarr array at ``path`` (local path or fsspec URL) read-only.

    A local path is made absolute first (see the module docstring). A dpdist dataset group
    opens as its ``"X"`` array. The chunk reading is decided by :func:`chunk_reading` (for a
    store with a chunk manifest its keys are listed; no chunk data is read).

    Raises
    ------
    ValidationError
        Nothing at ``path``; a group without an ``"X"`` array; unreadable or invalid
        metadata; a chunk file its manifest records is missing; no manifest with
        ``missing_chunks="raise"``.
    InfrastructureError
        The storage could not be reached (nothing was read or spent).
    """
    import zarr

    missing_chunks = _check_missing_chunks(missing_chunks)
    path = _resolve_path(os.fspath(path))
    if "://" not in path and not os.path.exists(path):
        raise ValidationError(f"no Zarr array at {path!r}: the path does not exist")
    if "://" not in path and os.path.isfile(path):
        raise ValidationError(f"{path!r} is a file, not a Zarr store; {_READABLE}")
    try:
        node = zarr.open(path, mode="r")
    except (FileNotFoundError, KeyError) as exc:
        raise ValidationError(f"no Zarr array or group at {path!r} ({one_line(exc)}); {_READABLE}") from None
    except (ValueError, TypeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValidationError(
            f"cannot open the Zarr array at {path!r}: its metadata is not valid ({one_line(exc)})"
        ) from None
    except (OSError, TimeoutError, asyncio.TimeoutError) as exc:
        raise InfrastructureError(
            f"cannot read the Zarr store at {path!r} ({one_line(exc)}); no noise was drawn: nothing was spent"
        ) from None
    except Exception as exc:  # zarr raises several other types for an invalid store
        raise ValidationError(f"cannot open a Zarr array at {path!r} ({one_line(exc)})") from None
    if not isinstance(node, zarr.Array):
        # a dpdist dataset group stores its samples under "X"
        if isinstance(node, zarr.Group) and "X" in node:
            node = node["X"]
        else:
            raise ValidationError(f"{path!r} is a Zarr group, not an array (and has no 'X' array)")
    chunk_reading(node, missing_chunks, path)
    return node


# --------------------------------------------------------------------------------------
# chunk keys
# --------------------------------------------------------------------------------------


def _sync(coro):
    """Run a zarr store coroutine on zarr's own event loop (its stores are bound to it)."""
    from zarr.core.sync import sync  # zarr's synchronous bridge (used by zarr.Array itself)

    return sync(coro)


def _storage_block(arr) -> tuple[int, ...]:
    """Shape of the unit stored under one key: the shard when sharded, else the chunk."""
    shards = getattr(arr, "shards", None)
    return tuple(shards) if shards is not None else tuple(arr.chunks)


def _key_prefix(arr) -> str:
    path = arr.store_path.path
    return f"{path}/" if path else ""


def _expected_keys(arr, lo: tuple[int, ...] | None = None, hi: tuple[int, ...] | None = None) -> list[str]:
    """Storage keys (relative to the array) of the grid cells ``lo <= c < hi``, in C order."""
    block = _storage_block(arr)
    grid = tuple(-(-s // b) for s, b in zip(arr.shape, block))
    lo = lo or (0,) * len(grid)
    hi = hi or grid
    cells = itertools.product(*(range(a, b) for a, b in zip(lo, hi)))
    return [arr.metadata.encode_chunk_key(c) for c in cells]


def _manifest_of(arr) -> dict:
    """What a chunk manifest must hold for ``arr`` (from its metadata alone)."""
    block = _storage_block(arr)
    grid = [-(-n // b) for n, b in zip(arr.shape, block)]
    return {
        "version": 1,
        "shape": [int(n) for n in arr.shape],
        "storage_block": [int(b) for b in block],
        "n_chunks": int(np.prod(grid, dtype=np.int64)),
        "write_empty_chunks": True,
    }


def _list_keys(arr, where: str) -> set[str]:
    """The store's keys under ``arr``, relative to it (a listing; no chunk data is read)."""
    prefix = _key_prefix(arr)

    async def _list() -> set[str]:
        return {k async for k in arr.store_path.store.list_prefix(prefix)}

    try:
        present = _sync(_list())
    except Exception as exc:
        raise InfrastructureError(
            f"cannot list the chunks of the Zarr array at {where!r} ({one_line(exc)}); "
            "no noise was drawn: nothing was spent"
        ) from None
    return {k[len(prefix):] for k in present if k.startswith(prefix)}


def write_chunk_manifest(arr) -> dict:
    """Make every chunk of ``arr`` a stored file and record that in its attributes.

    For writers of input stores: call it once on the written array (opened writable), after
    every value is written. Chunks the writer skipped because they equal the fill value
    (zarr's default ``write_empty_chunks=False``) are written now as stored fill-value
    chunks, so the store is complete, then the manifest is set as the array attribute
    :data:`CHUNK_MANIFEST_ATTR`: the shape, the storage block (shard or chunk) and the number
    of chunk files, all public (they follow from the metadata). Readers compare the store's
    listing with it (:func:`chunk_reading`): a chunk file lost afterwards is refused, and no
    decision ever depends on which chunks the values left empty. Writing to the array
    afterwards with ``write_empty_chunks=False`` may drop chunks again: call it again then.

    Returns the manifest.
    """
    where = _describe(arr)
    present = _list_keys(arr, where)
    block = _storage_block(arr)
    grid = tuple(-(-n // b) for n, b in zip(arr.shape, block))
    full = arr.with_config({"write_empty_chunks": True})
    for cell in itertools.product(*(range(g) for g in grid)):
        if arr.metadata.encode_chunk_key(cell) not in present:
            region = tuple(slice(c * b, min((c + 1) * b, n)) for c, b, n in zip(cell, block, arr.shape))
            full[region] = full[region]  # the fill value, now stored
    manifest = _manifest_of(arr)
    arr.attrs[CHUNK_MANIFEST_ATTR] = manifest
    return manifest


def chunk_reading(arr, missing_chunks: str = "auto", where: str | None = None) -> str:
    """Decide how ``arr``'s chunks are read, from public information only; returns
    ``"manifest"`` or ``"fill"`` (see the module docstring).

    ``"manifest"``: ``arr`` carries a chunk manifest (:func:`write_chunk_manifest`) and its
    listing holds every chunk the manifest records. ``"fill"``: missing chunks are the fill
    value (no manifest, or ``missing_chunks="fill"``). Lists the store's keys only for a
    store with a manifest; never reads chunk data.

    Raises
    ------
    ValidationError
        The manifest does not describe this array (resized or rechunked since), chunk files
        it records are missing (the message names the store, never a chunk), or
        ``missing_chunks="raise"`` and there is no manifest.
    """
    missing_chunks = _check_missing_chunks(missing_chunks)
    if missing_chunks == "fill":
        return "fill"
    where = where or _describe(arr)
    manifest = arr.attrs.get(CHUNK_MANIFEST_ATTR)
    if manifest is None:
        if missing_chunks == "raise":
            raise ValidationError(
                f"the Zarr array at {where!r} carries no chunk manifest (attribute {CHUNK_MANIFEST_ATTR!r}), "
                "so lost chunk files cannot be told from chunks left out because they equal the fill value; "
                "nothing was read or spent. Record one after writing with "
                "dpdist.data.validation.write_chunk_manifest, or pass missing_chunks='auto' to read missing "
                "chunks as the fill value, as the Zarr specification does (CLI: --missing-chunks auto)"
            )
        return "fill"
    expected = _manifest_of(arr)
    if not isinstance(manifest, dict) or any(manifest.get(k) != v for k, v in expected.items()):
        raise ValidationError(
            f"the chunk manifest of the Zarr array at {where!r} does not describe the array (was it resized "
            "or rechunked after writing?); nothing was read or spent. Record it again with "
            "dpdist.data.validation.write_chunk_manifest, or pass missing_chunks='fill' "
            "(CLI: --missing-chunks fill)"
        )
    present = _list_keys(arr, where)
    if not all(k in present for k in _expected_keys(arr)):
        raise ValidationError(
            f"the Zarr array at {where!r} has lost chunk files: its chunk manifest records every chunk as "
            "written and the store no longer holds them all; nothing was read or spent. Restore the store, "
            "or pass missing_chunks='fill' to read the missing chunks as the fill value (CLI: --missing-chunks fill)"
        )
    return "manifest"


def check_chunks_present(arr, where: str | None = None) -> None:
    """Refuse (:class:`ValidationError`) ``arr`` unless it carries a chunk manifest whose
    chunks are all present: :func:`chunk_reading` with ``missing_chunks="raise"``."""
    chunk_reading(arr, "raise", where)


def chunk_reading_notes(X) -> tuple[str, ...]:
    """The release notes saying how the Zarr inputs of dask array ``X`` were read (one per
    distinct reading; empty for an input not read from Zarr by :func:`as_dask_array`)."""
    graph = getattr(X, "dask", None)
    layers = getattr(graph, "layers", {}) if graph is not None else {}
    readings: list[str] = []
    for name, layer in layers.items():
        if not str(name).startswith("original-zarr-"):
            continue
        for value in layer.values():
            reading = getattr(value, "reading", None)
            if isinstance(value, ZarrSource) and reading not in readings:
                readings.append(reading)
    return tuple(READING_NOTES[r] for r in readings)


def _describe(arr) -> str:
    store = arr.store_path.store
    root = getattr(store, "root", None)
    base = str(root) if root is not None else type(store).__name__
    return f"{base}/{arr.store_path.path}" if arr.store_path.path else base


def _absolute_local_array(arr):
    """``arr`` re-opened with an absolute root when its store is a relative LocalStore."""
    import zarr
    from zarr.storage import LocalStore

    store = arr.store_path.store
    if isinstance(store, LocalStore) and not os.path.isabs(str(store.root)):
        root = os.path.abspath(str(store.root))
        return zarr.open_array(LocalStore(root, read_only=True), path=arr.store_path.path, mode="r")
    return arr


class ZarrSource:
    """A read-only Zarr array as dask reads it, on any worker.

    Holds the opened array (its store has an absolute root, see the module docstring) and
    its chunk reading (:func:`chunk_reading`), and turns what can go wrong while reading a
    chunk into :class:`InfrastructureError` naming the store: the array's metadata not found
    where the task runs (the worker does not see the client's store), with a manifest a
    chunk file missing there, or an unreadable or undecodable chunk. Picklable.
    """

    def __init__(self, array, where: str, reading: str):
        self.array = array
        self.where = where
        self.reading = reading
        self.shape = tuple(array.shape)
        self.dtype = np.dtype(array.dtype)
        self.ndim = len(self.shape)

    def _keys(self, key: tuple) -> list[str]:
        block = _storage_block(self.array)
        lo, hi = [], []
        for sl, size, b in zip(key, self.shape, block):
            start, stop, _ = sl.indices(size)
            if stop <= start:
                return []
            lo.append(start // b)
            hi.append((stop - 1) // b + 1)
        return _expected_keys(self.array, tuple(lo), tuple(hi))

    def _require_present(self, key: tuple) -> None:
        prefix = _key_prefix(self.array)
        meta = "zarr.json" if self.array.metadata.zarr_format == 3 else ".zarray"
        keys = [meta]
        if self.reading == "manifest" and all(isinstance(k, slice) for k in key):
            keys += self._keys(key)
        store = self.array.store_path.store

        async def _exists() -> list[bool]:
            return list(await asyncio.gather(*(store.exists(prefix + k) for k in keys)))

        found = _sync(_exists())
        if not found[0]:
            raise InfrastructureError(
                f"the Zarr array at {self.where!r} is not there where the task ran "
                "(do the workers see the same store as this process?)"
            )
        if not all(found):
            raise InfrastructureError(
                f"a chunk file that the chunk manifest of the Zarr array at {self.where!r} records is missing "
                "where the task ran (do the workers see the same store as this process?)"
            )

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        try:
            self._require_present(key)
            return self.array[key]
        except InfrastructureError:
            raise
        except Exception as exc:
            raise InfrastructureError(f"reading the Zarr array at {self.where!r} failed ({one_line(exc)})") from None


def _zarr_to_dask(arr, where: str, reading: str) -> da.Array:
    from dask.base import tokenize

    arr = _absolute_local_array(arr)
    meta_json = json.dumps(arr.metadata.to_dict(), sort_keys=True, default=str)
    name = "zarr-" + tokenize(_describe(arr), arr.store_path.path, meta_json, reading)
    source = ZarrSource(arr, where, reading)
    return da.from_array(
        source, chunks=arr.chunks, name=name, meta=np.empty((0,) * arr.ndim, dtype=arr.dtype),
        asarray=True, fancy=False, inline_array=False,
    )


def as_float_dtype(arr, name: str = "X", *, stacklevel: int = 2):
    """``arr`` (a NumPy or dask array) with a float32 or float64 dtype, by the rule of this
    module's docstring: float32/float64 unchanged; bool, integer and float16 converted to
    float64 with one :class:`DataConversionWarning`; any other dtype refused with a
    :class:`ValidationError`. Decided from the dtype alone (metadata, never values)."""
    dtype = np.dtype(arr.dtype)
    if dtype in (np.float32, np.float64):
        return arr
    if dtype.kind in "biu" or dtype == np.float16:
        wide = dtype.kind in "iu" and dtype.itemsize > 4
        rounded = "; integers beyond 2**53 in magnitude are rounded" if wide else ""
        warnings.warn(f"{name} has dtype {dtype}; converted to float64{rounded}", DataConversionWarning,
                      stacklevel=stacklevel)
        return arr.astype(np.float64)
    raise ValidationError(
        f"{name} has dtype {dtype}, which dpdist does not read: use float64 or float32 (bool, integer and "
        "float16 are converted to float64)"
    )


def as_dask_array(
    X, *, name: str = "X", min_rows: int = 2, min_cols: int = 2, missing_chunks: str = "auto",
    columns: list[str] | None = None,
) -> da.Array:
    """Return ``X`` as a validated 2-D float32/float64 dask array with known chunks.

    Parameters
    ----------
    X : array-like, dask array, zarr.Array or str
        The data, rows are individuals. A path or URL ending in ``.parquet``/``.pq``,
        ``.csv`` or ``.npy`` is read as that format (:mod:`dpdist.data.formats`); any other
        path is a Zarr store.
    name : str
        Name used in error messages.
    missing_chunks : {"auto", "fill", "raise"}, default "auto"
        For a Zarr input, how chunk files absent from the store are read (decided from public
        information only; see the module docstring): "auto" checks a store that carries a
        chunk manifest against it (refusing one that lost chunk files) and reads a store
        without one per the Zarr specification (missing chunks are the fill value); "fill"
        always reads missing chunks as the fill value; "raise" also refuses a store without
        a manifest. To choose for an estimator, pass it the array returned here:
        ``est.fit(as_dask_array("data.zarr", missing_chunks="raise"))``.
    columns : list of str, optional
        For a Parquet or CSV input: the names of the columns to read, in this order
        (default: all of them). Refused for any other input.

    Raises
    ------
    ValidationError
        Not 2-D, fewer than ``min_rows`` rows or ``min_cols`` columns, unknown chunk sizes,
        non-numeric dtype, a missing Zarr path, invalid metadata, or a store refused by
        :func:`chunk_reading`; for a
        file: see :func:`dpdist.data.formats.open_file`.

    Warns
    -----
    DataConversionWarning
        Boolean, integer or float16 input converted to float64 (:func:`as_float_dtype`).
    """
    import zarr

    missing_chunks = _check_missing_chunks(missing_chunks)
    fmt = input_format(X) if isinstance(X, (str, os.PathLike)) else None
    if columns is not None and fmt in (None, "zarr"):
        raise ValidationError("columns= selects named columns of a Parquet or CSV file; select the columns of "
                              "an array by slicing it (X[:, [0, 2]])")
    if fmt not in (None, "zarr"):
        arr = open_file(_resolve_path(os.fspath(X)), fmt, columns=columns)
    elif isinstance(X, (str, os.PathLike)):
        where = _resolve_path(os.fspath(X))
        X = open_zarr_array(where, missing_chunks="fill")
        arr = _zarr_to_dask(X, where, chunk_reading(X, missing_chunks, where))
    elif isinstance(X, zarr.Array):
        where = _describe(_absolute_local_array(X))
        arr = _zarr_to_dask(X, where, chunk_reading(X, missing_chunks, where))
    elif isinstance(X, da.Array):
        arr = X
    elif scipy.sparse.issparse(X):
        raise ValidationError(
            f"{name} is a scipy sparse {X.format} {'matrix' if scipy.sparse.isspmatrix(X) else 'array'}: sparse "
            "input is not supported; pass a dense array (X.toarray()), a dask array or a Zarr store"
        )
    else:
        np_arr = np.asarray(X)
        if np_arr.ndim == 2:
            arr = da.from_array(
                np_arr, chunks=(row_chunk(np_arr.shape[0], np_arr.shape[1], np_arr.dtype.itemsize), -1)
            )
        else:
            arr = da.from_array(np_arr)
    if arr.ndim != 2:
        hint = (". Reshape your data: X.reshape(-1, 1) for one feature, X.reshape(1, -1) for one sample"
                if arr.ndim == 1 else "")
        raise ValidationError(f"{name} must be 2-D (n_samples, n_features), got shape {arr.shape}{hint}")
    if arr.dtype.kind == "c":
        raise ValidationError(f"Complex data not supported: {name} has dtype {arr.dtype}, which dpdist does not read: "
                              "use float64 or float32 (bool, integer and float16 data are converted)")
    if any(np.isnan(c) for cs in arr.chunks for c in cs):
        raise ValidationError(
            f"{name} has unknown chunk sizes; call .compute_chunk_sizes() on it first"
        )
    n, d = arr.shape
    if n < min_rows:
        raise ValidationError(f"{name} has {n} sample(s) (shape={tuple(arr.shape)}) while a minimum of {min_rows} "
                              f"is required: it needs at least {min_rows} rows (samples)")
    if d < min_cols:
        raise ValidationError(f"{name} has {d} feature(s) (shape={tuple(arr.shape)}) while a minimum of {min_cols} "
                              f"is required: it needs at least {min_cols} columns (features)")
    arr = as_float_dtype(arr, name, stacklevel=4)
    # Rechunk rows only when the chunks are pathological (tiny or huge); columns stay as given.
    row_sizes = arr.chunks[0]
    target = row_chunk(n, d, arr.dtype.itemsize)
    if len(row_sizes) > 1 and (max(row_sizes) > 4 * target or np.median(row_sizes) < target / 64):
        arr = arr.rechunk({0: target})
    return arr
