"""Parquet, CSV and NumPy ``.npy`` files as validated inputs: row-chunked dask arrays.

:func:`dpdist.data.validation.as_dask_array` reads a path by its suffix: ``.parquet`` / ``.pq``
(a file, a directory of them or a glob, local or any fsspec URL such as ``s3://``), ``.csv``
(a file or a glob, local or fsspec), ``.npy`` (a local file, memory-mapped). Any other path is
a Zarr store. Each input is read in row chunks by the workers, like a Zarr array; nothing is
loaded on the client.

What decides an error, and why it matters
-----------------------------------------
Everything the data decide is an output, refusals included. So the errors here are decided
by what a file *declares*, never by the values it holds:

* **Parquet** files declare a type per column (their schema, in the footer). A column whose
  type is not numeric (string, date, ...) in some file (its message says "mixed types" when
  other files declare a numeric type), or a selected column a file lacks, is refused before
  anything is read, with a one-line error naming the column. Numeric types may differ between
  files (int64 in one, double in another: every value is read as a float). Missing values
  (nulls) are read as NaN.
* **CSV** files declare only column names (the header: the first line). Every selected
  column is read as numbers; a field that is not a number (empty, ``NA``, text) is read as
  NaN, as is a line the parser cannot split; the fields of a line beyond the header's are
  ignored. Rows holding NaN follow the estimators' documented non-finite handling (zeroed by
  default, ``on_nonfinite="raise"`` refuses them), whatever made them NaN: no error ever
  names a row or a value. A text column therefore reads as all NaN: select the numeric
  columns with ``columns=`` (CLI ``--columns``). An unknown column name is refused without
  listing the header's names (a file without a header line would have its first row taken
  for them). A CSV has no row count in its metadata, so opening one counts its rows (a pass
  over the file); ``dpdist convert`` turns it into a Zarr store once. Quoted fields must not
  hold line breaks (the file is split into blocks at line ends).
* **.npy** files declare a dtype and a shape in their header; the usual dtype rules apply.

Integer and boolean columns of a table are converted to float64 with a
:class:`~dpdist.exceptions.DataConversionWarning` naming them; a table whose selected columns
are all float32 (or float16) reads as float32, any other as float64.

Reading Parquet and CSV needs the optional dependencies of ``pip install 'dpdist[formats]'``
(pyarrow; dask's dataframe support and pandas); without them these inputs are refused with an
error naming that extra.
"""

from __future__ import annotations

import bisect
import os
import warnings
from typing import Any, Sequence

import dask.array as da
import numpy as np

from dpdist.exceptions import DataConversionWarning, InfrastructureError, ValidationError

__all__ = ["DEFAULT_ROW_CHUNK_BYTES", "FORMATS", "column_names", "input_format", "one_line", "open_file", "row_chunk"]

#: Target bytes of one row chunk when dpdist has to choose the chunking (numpy input, or a
#: Zarr array whose chunks are far too small or too large).
DEFAULT_ROW_CHUNK_BYTES = 64 * 2**20


def one_line(exc: BaseException, limit: int = 160) -> str:
    """An exception as one line of at most ``limit`` characters of its message, for errors that
    name the input that failed."""
    lines = str(exc).strip().splitlines()
    line = lines[0] if lines else ""
    return f"{type(exc).__name__}: " + ((line[:limit] + "...") if len(line) > limit else line)


def row_chunk(n_rows: int, n_cols: int, itemsize: int) -> int:
    """Rows of a chunk of about :data:`DEFAULT_ROW_CHUNK_BYTES` (at least 1, at most n_rows)."""
    return int(max(1, min(n_rows, DEFAULT_ROW_CHUNK_BYTES // max(1, n_cols * itemsize))))


#: File suffixes (lower case) read by this module, and their format.
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".npy": "npy"}
#: The optional dependencies of Parquet and CSV input.
EXTRA = "formats"


def input_format(path: str | os.PathLike) -> str:
    """``"parquet"``, ``"csv"`` or ``"npy"`` by the path's suffix (case-insensitive; a trailing
    ``/`` ignored), else ``"zarr"``."""
    text = os.fspath(path).rstrip("/").lower()
    for suffix, fmt in FORMATS.items():
        if text.endswith(suffix):
            return fmt
    return "zarr"


def _require(fmt: str) -> None:
    """Refuse, naming the extra, when the libraries a format needs are not installed."""
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401

        if fmt == "csv":
            import dask.dataframe  # noqa: F401
            import pandas  # noqa: F401
    except ImportError as exc:
        raise ValidationError(
            f"reading {fmt.upper() if fmt == 'csv' else fmt.capitalize()} files needs the optional dependencies "
            f"of dpdist[{EXTRA}] ({exc.name} is not installed): pip install 'dpdist[{EXTRA}]'"
        ) from None


def _check_columns(columns: Any) -> list[str] | None:
    if columns is None:
        return None
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
        raise ValidationError(f"columns must be a non-empty list of column names, got {columns!r}")
    bad = [c for c in columns if not isinstance(c, str) or not c]
    if bad:
        raise ValidationError(f"columns must be column names (non-empty strings), got {bad[0]!r}")
    seen: set[str] = set()
    dup = [c for c in columns if c in seen or seen.add(c)]
    if dup:
        raise ValidationError(f"column {dup[0]!r} is selected twice in columns")
    return list(columns)


def _select(available: Sequence[str], columns: list[str] | None, where: str, *, list_names: bool = True) -> list[str]:
    """The selected names (all by default); an unknown one is refused, listing the available
    names when ``list_names`` (not for a CSV: a file without a header line would have its
    first row of data taken for the names)."""
    if columns is None:
        return list(available)
    unknown = [c for c in columns if c not in available]
    if unknown:
        listed = ", ".join(repr(c) for c in available[:20]) + (", ..." if len(available) > 20 else "")
        raise ValidationError(f"{where!r} has no column {unknown[0]!r}"
                              + (f" (its columns: {listed})" if list_names else " in its header line"))
    return columns


def _warn_converted(names: list[str], where: str) -> None:
    if names:
        shown = ", ".join(repr(c) for c in names[:10]) + (", ..." if len(names) > 10 else "")
        warnings.warn(f"{where!r}: integer or boolean column(s) {shown} converted to float64",
                      DataConversionWarning, stacklevel=4)


def open_file(path: str, fmt: str, *, columns: Sequence[str] | None = None) -> da.Array:
    """The file (or files) at ``path`` as a row-chunked dask array (no data read, except a
    CSV's row count). ``path`` is absolute or an fsspec URL; ``fmt`` from
    :func:`input_format`; ``columns`` selects named columns of a Parquet or CSV input.

    Raises
    ------
    ValidationError
        Nothing at ``path``; a missing optional dependency; an unknown, duplicated,
        non-numeric or mixed-type column (Parquet: from the files' schemas); ``columns`` for
        a ``.npy`` file; an unreadable ``.npy`` header.
    """
    columns = _check_columns(columns)
    if fmt == "npy":
        if columns is not None:
            raise ValidationError("columns= selects named columns of a Parquet or CSV file; a .npy array has "
                                  "none (select its columns by slicing: X[:, [0, 2]])")
        return _open_npy(path)
    _require(fmt)
    if fmt == "parquet":
        return _open_parquet(path, columns)
    if fmt == "csv":
        return _open_csv(path, columns)
    raise ValidationError(f"unknown input format {fmt!r} (known: {sorted(set(FORMATS.values()))})")


def column_names(path: str, columns: Sequence[str] | None = None) -> list[str]:
    """The names of the columns :func:`open_file` reads from a Parquet or CSV input (from its
    schema or header, after the same checks; no data read)."""
    columns = _check_columns(columns)
    fmt = input_format(path)
    _require(fmt)
    if fmt == "parquet":
        return _parquet_layout(path, columns)[3]
    if fmt == "csv":
        return _csv_frame(path, columns)[1]
    raise ValidationError(f"{path!r} is not a Parquet or CSV file: its columns have no names")


# --------------------------------------------------------------------------------------
# .npy, memory-mapped
# --------------------------------------------------------------------------------------


class NpySource:
    """A ``.npy`` file as dask reads it: each read memory-maps the file by its (absolute)
    path and copies the rows asked for, so only the path travels to the workers. A file
    missing or unreadable where the task runs raises :class:`InfrastructureError`."""

    def __init__(self, path: str, shape: tuple[int, ...], dtype: np.dtype):
        self.path = path
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)

    def __getitem__(self, key):
        try:
            return np.array(np.load(self.path, mmap_mode="r")[key])
        except Exception as exc:

            raise InfrastructureError(f"reading the .npy file {self.path!r} failed ({one_line(exc)})") from None


def _open_npy(path: str) -> da.Array:
    from dask.base import tokenize


    if "://" in path:
        raise ValidationError(f"{path!r}: a .npy file is memory-mapped, so it must be a local path")
    if not os.path.isfile(path):
        raise ValidationError(f"no .npy file at {path!r}: " + ("it is a directory" if os.path.isdir(path)
                                                                  else "the path does not exist"))
    try:
        mm = np.load(path, mmap_mode="r")  # reads the header; maps, reads no data
    except Exception as exc:
        raise ValidationError(f"cannot open {path!r} as a .npy array ({one_line(exc)})") from None
    if not isinstance(mm, np.ndarray):
        raise ValidationError(f"{path!r} is not a .npy array")
    source = NpySource(path, mm.shape, mm.dtype)
    stat = os.stat(path)
    name = "npy-" + tokenize(path, stat.st_size, stat.st_mtime_ns, mm.shape, str(mm.dtype))
    if mm.ndim == 2:
        chunks: Any = (row_chunk(mm.shape[0], mm.shape[1], mm.dtype.itemsize), -1)
    else:
        chunks = "auto"
    return da.from_array(source, chunks=chunks, name=name, meta=np.empty((0,) * mm.ndim, dtype=mm.dtype),
                         asarray=True, fancy=False, inline_array=False)


# --------------------------------------------------------------------------------------
# Parquet
# --------------------------------------------------------------------------------------


def _fs(url: str):
    from fsspec.core import url_to_fs

    try:
        return url_to_fs(url)
    except ImportError as exc:
        raise ValidationError(f"no filesystem for {url!r}: {exc} (for s3:// install 'dpdist[s3]')") from None


def _parquet_files(fs, root: str, url: str) -> list[str]:
    from dask.utils import natural_sort_key

    if any(ch in root for ch in "*?["):
        files = [f for f in fs.glob(root) if not fs.isdir(f)]
    elif fs.isdir(root):
        files = [f for f in fs.find(root)
                 if input_format(f) == "parquet" and not any(p.startswith(("_", ".")) for p in
                                                               f[len(root):].split("/") if p)]
    elif fs.exists(root):
        files = [root]
    else:
        raise ValidationError(f"no Parquet file at {url!r}: the path does not exist")
    if not files:
        raise ValidationError(f"no Parquet file at {url!r}")
    return sorted(files, key=natural_sort_key)


def _parquet_columns(schema, index_names: set[str]) -> list[str]:
    return [n for n in schema.names if n not in index_names]


def _pandas_index_names(schema) -> set[str]:
    """Index columns pandas stored in the file (not data columns)."""
    import json

    meta = (schema.metadata or {}).get(b"pandas")
    if not meta:
        return set()
    try:
        return {c for c in json.loads(meta).get("index_columns", []) if isinstance(c, str)}
    except (ValueError, AttributeError):
        return set()


def _is_numeric(t) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


class ParquetSource:
    """Parquet files as dask reads them: piece ``i`` is a run of consecutive row groups of one
    file, read with pyarrow and turned into a float array (nulls as NaN). Picklable: the
    filesystem, the file names and the pieces' row groups travel; each read opens the file."""

    def __init__(self, fs, files: list[str], pieces: list[tuple[int, list[int], int]], columns: list[str],
                 dtype: np.dtype, where: str):
        self.fs = fs
        self.files = files
        self.pieces = pieces
        self.columns = columns
        self.dtype = np.dtype(dtype)
        self.where = where
        self.offsets = np.concatenate([[0], np.cumsum([p[2] for p in pieces])]).tolist()
        self.shape = (int(self.offsets[-1]), len(columns))
        self.ndim = 2

    def chunks(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return tuple(int(p[2]) for p in self.pieces), (len(self.columns),)

    def _read_piece(self, i: int) -> np.ndarray:
        import pyarrow as pa
        import pyarrow.parquet as pq

        f, groups, rows = self.pieces[i]
        with self.fs.open(self.files[f], "rb") as fh:
            table = pq.ParquetFile(fh).read_row_groups(groups, columns=self.columns)
        columns = np.empty((len(self.columns), rows), dtype=self.dtype)  # contiguous writes, then one transpose
        target = pa.float32() if self.dtype == np.float32 else pa.float64()
        for j, name in enumerate(self.columns):
            columns[j] = table.column(name).cast(target).to_numpy()  # nulls -> NaN
        return np.ascontiguousarray(columns.T)

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        rows = key[0] if key else slice(None)
        start, stop, _ = rows.indices(self.shape[0])
        try:
            first = bisect.bisect_right(self.offsets, start) - 1
            parts, at = [], first
            while at < len(self.pieces) and self.offsets[at] < stop:
                lo, hi = self.offsets[at], self.offsets[at + 1]
                parts.append(self._read_piece(at)[max(start, lo) - lo: min(stop, hi) - lo])
                at += 1
        except Exception as exc:

            raise InfrastructureError(
                f"reading the Parquet data at {self.where!r} failed ({one_line(exc)})") from None
        block = np.concatenate(parts) if parts else np.empty((0, self.shape[1]), self.dtype)
        return block[(slice(None), *key[1:])]


def _parquet_layout(url: str, columns: list[str] | None):
    """(fs, files, footers, selected names, {name: (type, first file)}) from the files'
    footers; refuses unknown, non-numeric and mixed-type columns. Reads no data."""
    import pyarrow.parquet as pq


    fs, root = _fs(url)
    try:
        files = _parquet_files(fs, root.rstrip("/"), url)
        metas = []
        for f in files:
            with fs.open(f, "rb") as fh:
                metas.append(pq.ParquetFile(fh).metadata)  # the footer: schema and row groups
    except ValidationError:
        raise
    except (OSError, TimeoutError) as exc:
        raise InfrastructureError(f"cannot read the Parquet data at {url!r} ({one_line(exc)}); nothing was "
                                  "spent") from None
    except Exception as exc:  # pyarrow's ArrowInvalid etc.: not a Parquet file
        raise ValidationError(f"cannot open the Parquet data at {url!r} ({one_line(exc)})") from None
    first = metas[0].schema.to_arrow_schema()
    names = _select(_parquet_columns(first, _pandas_index_names(first)), columns, url)
    types: dict[str, list[tuple[Any, str]]] = {name: [] for name in names}  # (type, file) of each file
    for f, meta in zip(files, metas):
        schema = meta.schema.to_arrow_schema()
        for name in names:
            if name not in schema.names:
                raise ValidationError(f"column {name!r} is missing from the Parquet file {f!r}")
            types[name].append((schema.field(name).type, f))
    for name, found in types.items():
        bad = [(t, f) for t, f in found if not _is_numeric(t)]
        if bad and len(bad) < len(found):
            (t_ok, f_ok), (t_bad, f_bad) = next((t, f) for t, f in found if _is_numeric(t)), bad[0]
            raise ValidationError(f"column {name!r} has mixed types: {t_ok} in {f_ok!r}, {t_bad} in {f_bad!r}")
        if bad:
            raise ValidationError(f"column {name!r} has type {bad[0][0]} in {bad[0][1]!r}, not an integer, "
                                  "floating-point or boolean type (select numeric columns with columns= / --columns)")
    return fs, files, metas, names, types


def _open_parquet(url: str, columns: list[str] | None) -> da.Array:
    from dask.base import tokenize


    fs, files, metas, names, types = _parquet_layout(url, columns)
    import pyarrow as pa

    # numeric types may differ between files: every value is read as a float
    all_float32 = all(pa.types.is_floating(t) and t.bit_width <= 32 for found in types.values() for t, _ in found)
    dtype = np.dtype(np.float32 if all_float32 else np.float64)
    _warn_converted([n for n in names if not all(pa.types.is_floating(t) for t, _ in types[n])], url)
    # pieces: consecutive row groups of one file, up to the target bytes of a row chunk
    target_rows = max(1, DEFAULT_ROW_CHUNK_BYTES // (len(names) * dtype.itemsize))
    pieces: list[tuple[int, list[int], int]] = []
    for fi, meta in enumerate(metas):
        groups, rows = [], 0
        for g in range(meta.num_row_groups):
            r = meta.row_group(g).num_rows
            if r == 0:
                continue
            if groups and rows + r > target_rows:
                pieces.append((fi, groups, rows))
                groups, rows = [], 0
            groups.append(g)
            rows += r
        if groups:
            pieces.append((fi, groups, rows))
    if not pieces:
        raise ValidationError(f"the Parquet data at {url!r} hold no rows")
    source = ParquetSource(fs, files, pieces, names, dtype, url)
    name = "parquet-" + tokenize(url, files, [m.serialized_size for m in metas], pieces, names, str(dtype))
    return da.from_array(source, chunks=source.chunks(), name=name, meta=np.empty((0, 0), dtype=dtype),
                         asarray=True, fancy=False, inline_array=False)


# --------------------------------------------------------------------------------------
# CSV, through dask.dataframe
# --------------------------------------------------------------------------------------


def read_numeric_csv(buffer, **kwargs):
    """pandas' ``read_csv`` with every column read as float64, never raising on a value.

    The fast parse comes first. A field that is not a number, or a line the parser cannot
    split, sends the block to the slow parse: fields read as text and converted with
    ``pd.to_numeric(errors="coerce")`` (a field that is not a number becomes NaN), lines it
    cannot split read as rows of NaN. Which rows became NaN is not reported (it depends on
    the data).
    """
    import pandas as pd

    kwargs.pop("dtype", None)
    start = buffer.tell()
    try:
        return pd.read_csv(buffer, dtype=np.float64, **kwargs)
    except pd.errors.ParserError:
        buffer.seek(start)
        frame = pd.read_csv(buffer, dtype=str, engine="python", on_bad_lines=lambda line: [],
                            **{k: v for k, v in kwargs.items() if k not in ("low_memory",)})
    except (ValueError, TypeError, OverflowError):
        buffer.seek(start)
        frame = pd.read_csv(buffer, dtype=str, **kwargs)
    return frame.apply(pd.to_numeric, errors="coerce").astype(np.float64)


def _csv_frame(url: str, columns: list[str] | None):
    """(the dask DataFrame of the selected columns, all header names); reads the header only."""
    import pandas as pd
    from dask.dataframe.io.csv import make_reader


    if "://" not in url and not any(ch in url for ch in "*?[") and not os.path.isfile(url):
        raise ValidationError(f"no CSV file at {url!r}: " + ("it is a directory" if os.path.isdir(url)
                                                                  else "the path does not exist"))
    read = make_reader(read_numeric_csv, "read_csv", "CSV")
    options = dict(blocksize=max(1, DEFAULT_ROW_CHUNK_BYTES), index_col=False, encoding_errors="replace")
    try:
        header = read(url, **options).columns.tolist()
        names = _select(header, columns, url, list_names=False)
        return read(url, usecols=names, **options)[names], names
    except ValidationError:
        raise
    except FileNotFoundError:
        raise ValidationError(f"no CSV file at {url!r}: the path does not exist") from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise ValidationError(f"cannot read the header of the CSV file {url!r} ({type(exc).__name__})") from None
    except (OSError, TimeoutError) as exc:
        raise InfrastructureError(f"cannot read the CSV file {url!r} ({one_line(exc)}); nothing was spent") from None


def _open_csv(url: str, columns: list[str] | None) -> da.Array:

    frame, _ = _csv_frame(url, columns)
    frame = frame.optimize()
    try:  # a pass over the file: a CSV declares no row count
        lengths = tuple(int(n) for n in frame.map_partitions(len).compute())
    except (OSError, TimeoutError) as exc:
        raise InfrastructureError(f"cannot read the CSV file {url!r} ({one_line(exc)}); nothing was spent") from None
    return frame.to_dask_array(lengths=lengths)
