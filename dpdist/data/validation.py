"""Turn user input into a validated 2-D floating dask array.

Accepted inputs: a NumPy array, a dask array, a ``zarr.Array``, or a string path / URL of a
Zarr array (fsspec URLs such as ``s3://...`` or ``memory://...`` pass through to zarr).
Validation here reads metadata only: shape, dtype, chunking, and the list of the store's
chunk keys. Values (NaN/inf) are checked inside the computation's single pass.

Zarr inputs, as the workers see them
------------------------------------
* **Paths.** A local path is made absolute here, on the client, before anything is put in
  the graph: workers of a remote cluster run in other directories, and a relative path
  would make them open an empty store there.
* **Missing chunks.** Zarr reads a chunk whose file is absent as its fill value, and writers
  omit chunks equal to the fill value unless asked not to (``write_empty_chunks=True``). A
  deleted or never-written chunk would silently become rows of zeros. With
  ``missing_chunks="raise"`` (the default) a store whose chunk files are not all present is
  refused with :class:`ValidationError` before any data is read (the listing reads keys, not
  chunk data), and each read on a worker checks again that its chunk files exist (a worker
  that sees another filesystem raises :class:`InfrastructureError` instead of reading
  zeros). ``missing_chunks="fill"`` declares that missing chunks mean the fill value.
  Sharded arrays are checked shard by shard.
* **Storage errors.** A chunk that cannot be read or decoded (a corrupt file, a codec
  error, an unreachable object store) raises :class:`InfrastructureError` from the task that
  read it; unreadable or invalid metadata (a truncated ``zarr.json``) raises
  :class:`ValidationError` here, before anything is read. Messages name the store and the
  chunk key, never data values.
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

from dpdist.exceptions import DataConversionWarning, InfrastructureError, ValidationError

__all__ = [
    "DEFAULT_ROW_CHUNK_BYTES",
    "MISSING_CHUNKS",
    "as_dask_array",
    "canonical_location",
    "check_chunks_present",
    "open_zarr_array",
]

#: Target bytes of one row chunk when dpdist has to choose the chunking (numpy input, or a
#: Zarr array whose chunks are far too small or too large).
DEFAULT_ROW_CHUNK_BYTES = 64 * 2**20
#: Values of ``missing_chunks``.
MISSING_CHUNKS = ("raise", "fill")


def _check_missing_chunks(missing_chunks: Any) -> str:
    if missing_chunks not in MISSING_CHUNKS:
        raise ValidationError(f"missing_chunks must be one of {MISSING_CHUNKS}, got {missing_chunks!r}")
    return missing_chunks


def _one_line(exc: BaseException, limit: int = 160) -> str:
    lines = str(exc).strip().splitlines()
    line = lines[0] if lines else ""
    return f"{type(exc).__name__}: " + ((line[:limit] + "...") if len(line) > limit else line)


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


def open_zarr_array(path: str | os.PathLike, *, missing_chunks: str = "raise"):
    """Open the Zarr array at ``path`` (local path or fsspec URL) read-only.

    A local path is made absolute first (see the module docstring). A dpdist dataset group
    opens as its ``"X"`` array. With ``missing_chunks="raise"`` the store's chunk keys are
    listed (no chunk data is read) and a store with a missing chunk is refused.

    Raises
    ------
    ValidationError
        Nothing at ``path``; a group without an ``"X"`` array; unreadable or invalid
        metadata; a missing chunk (``missing_chunks="raise"``).
    InfrastructureError
        The storage could not be reached (nothing was read or spent).
    """
    import zarr

    missing_chunks = _check_missing_chunks(missing_chunks)
    path = _resolve_path(os.fspath(path))
    if "://" not in path and not os.path.exists(path):
        raise ValidationError(f"no Zarr array at {path!r}: the path does not exist")
    try:
        node = zarr.open(path, mode="r")
    except (FileNotFoundError, KeyError) as exc:
        raise ValidationError(f"no Zarr array or group at {path!r} ({_one_line(exc)})") from None
    except (ValueError, TypeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValidationError(
            f"cannot open the Zarr array at {path!r}: its metadata is not valid ({_one_line(exc)})"
        ) from None
    except (OSError, TimeoutError, asyncio.TimeoutError) as exc:
        raise InfrastructureError(
            f"cannot read the Zarr store at {path!r} ({_one_line(exc)}); no noise was drawn: nothing was spent"
        ) from None
    except Exception as exc:  # zarr raises several other types for an invalid store
        raise ValidationError(f"cannot open a Zarr array at {path!r} ({_one_line(exc)})") from None
    if not isinstance(node, zarr.Array):
        # a dpdist dataset group stores its samples under "X"
        if isinstance(node, zarr.Group) and "X" in node:
            node = node["X"]
        else:
            raise ValidationError(f"{path!r} is a Zarr group, not an array (and has no 'X' array)")
    if missing_chunks == "raise":
        check_chunks_present(node, path)
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


def check_chunks_present(arr, where: str | None = None) -> None:
    """Refuse (:class:`ValidationError`) a Zarr array whose chunk (or shard) files are not all
    present, naming the store and the first missing key in C order.

    Lists the store's keys under the array (never reads chunk data).
    """
    where = where or _describe(arr)
    prefix = _key_prefix(arr)

    async def _list() -> set[str]:
        return {k async for k in arr.store_path.store.list_prefix(prefix)}

    try:
        present = _sync(_list())
    except Exception as exc:
        raise InfrastructureError(
            f"cannot list the chunks of the Zarr array at {where!r} ({_one_line(exc)}); "
            "no noise was drawn: nothing was spent"
        ) from None
    present = {k[len(prefix):] for k in present if k.startswith(prefix)}
    expected = _expected_keys(arr)
    missing = [k for k in expected if k not in present]
    if missing:
        raise ValidationError(
            f"the Zarr array at {where!r} is missing {len(missing)} of {len(expected)} chunk files "
            f"(first: {prefix + missing[0]!r}); nothing was read or spent. Zarr reads a missing chunk as "
            f"the fill value ({arr.metadata.fill_value}), and writers omit chunks equal to it unless "
            "write_empty_chunks=True. If missing chunks mean the fill value here, pass "
            "missing_chunks='fill' (CLI: --missing-chunks fill)"
        )


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
    turns what can go wrong while reading a chunk into :class:`InfrastructureError` naming
    the store and the chunk: a missing chunk file (``missing_chunks="raise"``: the worker
    does not see the client's store), or an unreadable or undecodable chunk. Picklable.
    """

    def __init__(self, array, where: str, missing_chunks: str):
        self.array = array
        self.where = where
        self.missing_chunks = missing_chunks
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
        keys = self._keys(key)
        store = self.array.store_path.store

        async def _exists() -> list[bool]:
            return list(await asyncio.gather(*(store.exists(prefix + k) for k in keys)))

        for k, ok in zip(keys, _sync(_exists())):
            if not ok:
                raise InfrastructureError(
                    f"chunk {prefix + k!r} of the Zarr array at {self.where!r} is missing where the task ran "
                    "(do the workers see the same store as this process?)"
                )

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        try:
            if self.missing_chunks == "raise" and all(isinstance(k, slice) for k in key):
                self._require_present(key)
            return self.array[key]
        except InfrastructureError:
            raise
        except Exception as exc:
            raise InfrastructureError(f"reading the Zarr array at {self.where!r} failed ({_one_line(exc)})") from None


def _zarr_to_dask(arr, where: str, missing_chunks: str) -> da.Array:
    from dask.base import tokenize

    arr = _absolute_local_array(arr)
    meta_json = json.dumps(arr.metadata.to_dict(), sort_keys=True, default=str)
    name = "zarr-" + tokenize(_describe(arr), arr.store_path.path, meta_json, missing_chunks)
    source = ZarrSource(arr, where, missing_chunks)
    return da.from_array(
        source, chunks=arr.chunks, name=name, meta=np.empty((0,) * arr.ndim, dtype=arr.dtype),
        asarray=True, fancy=False, inline_array=False,
    )


def _row_chunk(n_rows: int, n_cols: int, itemsize: int) -> int:
    return int(max(1, min(n_rows, DEFAULT_ROW_CHUNK_BYTES // max(1, n_cols * itemsize))))


def as_dask_array(
    X, *, name: str = "X", min_rows: int = 2, min_cols: int = 2, missing_chunks: str = "raise"
) -> da.Array:
    """Return ``X`` as a validated 2-D float32/float64 dask array with known chunks.

    Parameters
    ----------
    X : array-like, dask array, zarr.Array or str
        The data, rows are individuals.
    name : str
        Name used in error messages.
    missing_chunks : {"raise", "fill"}, default "raise"
        For a Zarr input: refuse a store whose chunk files are not all present ("raise"), or
        read missing chunks as the fill value ("fill"). See the module docstring. To declare
        "fill" for an estimator, pass it the array returned here:
        ``est.fit(as_dask_array("data.zarr", missing_chunks="fill"))``.

    Raises
    ------
    ValidationError
        Not 2-D, fewer than ``min_rows`` rows or ``min_cols`` columns, unknown chunk sizes,
        non-numeric dtype, a missing Zarr path, invalid metadata, or a missing chunk.

    Warns
    -----
    DataConversionWarning
        Integer or boolean input converted to float64.
    """
    import zarr

    missing_chunks = _check_missing_chunks(missing_chunks)
    if isinstance(X, (str, os.PathLike)):
        where = _resolve_path(os.fspath(X))
        X = open_zarr_array(where, missing_chunks=missing_chunks)
        arr = _zarr_to_dask(X, where, missing_chunks)
    elif isinstance(X, zarr.Array):
        if missing_chunks == "raise":
            check_chunks_present(X)
        arr = _zarr_to_dask(X, _describe(_absolute_local_array(X)), missing_chunks)
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
                np_arr, chunks=(_row_chunk(np_arr.shape[0], np_arr.shape[1], np_arr.dtype.itemsize), -1)
            )
        else:
            arr = da.from_array(np_arr)
    if arr.ndim != 2:
        hint = (". Reshape your data: X.reshape(-1, 1) for one feature, X.reshape(1, -1) for one sample"
                if arr.ndim == 1 else "")
        raise ValidationError(f"{name} must be 2-D (n_samples, n_features), got shape {arr.shape}{hint}")
    if arr.dtype.kind == "c":
        raise ValidationError(f"Complex data not supported: {name} has dtype {arr.dtype} (float32, float64 or "
                              "integer data only)")
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
