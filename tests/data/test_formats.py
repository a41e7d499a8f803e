"""Parquet, CSV and .npy inputs, read in row chunks, and `convert` to a Zarr array.

Each format is checked end to end on data split into several chunks (the row-chunk target is
made tiny), through the Python API and the command line, against the same rows as a NumPy
array. Refusals are checked to come from what a file declares (schema, header), and values
that are not numbers to read as NaN rows, never as an error naming a row or a value.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow not installed (pip install 'dpdist[formats]')")
pq = pytest.importorskip("pyarrow.parquet")
pd = pytest.importorskip("pandas", reason="pandas not installed (pip install 'dpdist[formats]')")

import dpdist  # noqa: E402
import dpdist.data.formats as formats  # noqa: E402
from dpdist.cli.main import main  # noqa: E402
from dpdist.data import as_dask_array, convert  # noqa: E402
from dpdist.exceptions import DataConversionWarning, ValidationError  # noqa: E402

N, D = 1200, 4
NAMES = ["a", "b", "c", "d"]
#: Row-chunk target of these tests: 1,200 x 4 float64 rows split into 12 chunks or more.
CHUNK_BYTES = 3200


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(formats, "DEFAULT_ROW_CHUNK_BYTES", CHUNK_BYTES)


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(5).standard_normal((N, D))


def write(fmt: str, X: np.ndarray, directory) -> str:
    """``X`` as a ``fmt`` file (Parquet: two files of row groups of 150 rows) in ``directory``."""
    frame = pd.DataFrame(X, columns=NAMES[: X.shape[1]])
    if fmt == "npy":
        path = os.path.join(directory, "data.npy")
        np.save(path, X)
    elif fmt == "csv":
        path = os.path.join(directory, "data.csv")
        frame.to_csv(path, index=False)
    else:
        path = os.path.join(directory, "data.parquet")
        os.mkdir(path)
        half = len(frame) // 2
        frame.iloc[:half].to_parquet(os.path.join(path, "part.0.parquet"), row_group_size=150)
        frame.iloc[half:].to_parquet(os.path.join(path, "part.1.parquet"), row_group_size=150)
    return path


def privcov(**kw):
    return dpdist.SparseCovariance(2, 1.0, 1e-5, clip=3.0, random_state=11, scheduler="synchronous", **kw)


# ----------------------------------------------------------------------------- each format


@pytest.mark.parametrize("fmt", ["parquet", "csv", "npy"])
def test_each_format_reads_in_row_chunks_as_the_same_rows(tmp_path, X, small_chunks, fmt):
    path = write(fmt, X, tmp_path)
    arr = as_dask_array(path)
    assert arr.numblocks[0] > 1 and arr.numblocks[1] == 1  # streamed in whole-row chunks
    assert arr.dtype == np.float64
    np.testing.assert_array_equal(arr.compute(), X)


@pytest.mark.parametrize("fmt", ["parquet", "csv", "npy"])
def test_each_format_fits_end_to_end_from_python_and_the_cli(tmp_path, X, small_chunks, fmt):
    path = write(fmt, X, tmp_path)
    reference = privcov().fit(X).covariance_.toarray()  # the same rows as a NumPy array
    np.testing.assert_array_equal(privcov().fit(path).covariance_.toarray(), reference)
    out = tmp_path / "cov.zarr"
    assert main(["covariance", path, "--k", "2", "--epsilon", "1", "--delta", "1e-5", "--clip", "3",
                 "--random-state", "11", "--scheduler", "synchronous", "--output", str(out)]) == 0
    np.testing.assert_array_equal(dpdist.load_result(out).covariance.toarray(), reference)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_columns_select_named_columns_in_order(tmp_path, X, small_chunks, fmt, capsys):
    path = write(fmt, X, tmp_path)
    np.testing.assert_array_equal(as_dask_array(path, columns=["d", "a", "c"]).compute(), X[:, [3, 0, 2]])
    reference = privcov().fit(X[:, [3, 1]]).covariance_.toarray()
    out = tmp_path / "cov.zarr"
    assert main(["covariance", path, "--columns", "d,b", "--k", "2", "--epsilon", "1", "--delta", "1e-5",
                 "--clip", "3", "--random-state", "11", "--scheduler", "synchronous", "--output", str(out)]) == 0
    np.testing.assert_array_equal(dpdist.load_result(out).covariance.toarray(), reference)
    capsys.readouterr()
    assert main(["covariance", path, "--columns", "d,zz", "--k", "2", "--epsilon", "1", "--delta", "1e-5",
                 "--clip", "3", "--output", str(tmp_path / "no.zarr")]) == 2
    err = capsys.readouterr().err
    assert "no column 'zz'" in err and len(err.strip().splitlines()) == 1
    # a Parquet schema's names are listed; a CSV's first line is not (without a header line it is data)
    assert ("'a', 'b', 'c', 'd'" in err) is (fmt == "parquet")
    assert not os.path.exists(tmp_path / "no.zarr")


def test_plan_takes_the_shape_of_the_selected_columns(tmp_path, X, capsys):
    path = write("parquet", X, tmp_path)
    assert main(["covariance", path, "--columns", "a,b,c", "--k", "2", "--epsilon", "1", "--delta", "1e-5",
                 "--clip", "3", "--plan", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"n_samples": 1200' in out and '"n_features": 3' in out
    # without INPUT there is nothing to select columns of
    assert main(["covariance", "--columns", "a,b", "--n-samples", "100", "--n-features", "2", "--k", "2",
                 "--epsilon", "1", "--delta", "1e-5", "--clip", "3", "--plan"]) == 2
    assert "--columns is not used" in capsys.readouterr().err


@pytest.mark.parametrize("columns,match", [
    ("a", "non-empty list of column names"),
    ([], "non-empty list of column names"),
    (["a", 3], "column names"),
    (["a", "a"], "selected twice"),
])
def test_bad_columns_are_refused(tmp_path, X, columns, match):
    with pytest.raises(ValidationError, match=match):
        as_dask_array(write("csv", X, tmp_path), columns=columns)


@pytest.mark.parametrize("source", ["zarr", "numpy", "npy"])
def test_columns_are_refused_for_arrays(tmp_path, X, source):
    if source == "zarr":
        src = convert(X, tmp_path / "x.zarr")
    elif source == "npy":
        src = write("npy", X, tmp_path)
    else:
        src = X
    with pytest.raises(ValidationError, match="select the columns of|none"):
        as_dask_array(src, columns=["a"])


# ----------------------------------------------------------------------------- Parquet schema


def test_parquet_types_decide_dtype_warning_and_refusals(tmp_path, small_chunks):
    n = 600
    table = pa.table({
        "f32": pa.array(np.arange(n, dtype=np.float32)),
        "i64": pa.array(np.arange(n, dtype=np.int64)),
        "flag": pa.array(np.arange(n) % 2 == 0),
        "name": pa.array([f"p{i}" for i in range(n)]),
    })
    path = str(tmp_path / "t.parquet")
    pq.write_table(table, path, row_group_size=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert as_dask_array(path, columns=["f32"], min_cols=1).dtype == np.float32
    with pytest.warns(DataConversionWarning, match="'i64', 'flag'"):
        arr = as_dask_array(path, columns=["f32", "i64", "flag"])
    assert arr.dtype == np.float64 and arr.numblocks[0] > 1
    np.testing.assert_array_equal(arr.compute(), np.c_[np.arange(n), np.arange(n), np.arange(n) % 2 == 0])
    not_numeric = r"column 'name' has type (large_)?string .*not an integer, floating-point or boolean type"
    with pytest.raises(ValidationError, match=not_numeric) as err:
        as_dask_array(path)  # every column: the string one is refused by its declared type
    assert "\n" not in str(err.value)


def test_parquet_nulls_read_as_nan_rows_that_the_fit_zeroes(tmp_path, X, small_chunks):
    col = pa.array(X[:, 0], mask=np.isin(np.arange(N), [17, 700]))  # two missing values
    table = pa.table({"a": col, "b": X[:, 1], "c": X[:, 2], "d": X[:, 3]})
    path = str(tmp_path / "nulls.parquet")
    pq.write_table(table, path, row_group_size=100)
    got = as_dask_array(path).compute()
    assert np.isnan(got[[17, 700], 0]).all() and np.isfinite(np.delete(got, [17, 700], axis=0)).all()
    zeroed = X.copy()
    zeroed[[17, 700]] = 0.0  # the documented non-finite handling: such rows become zero rows
    np.testing.assert_array_equal(privcov().fit(path).covariance_.toarray(),
                                  privcov().fit(zeroed).covariance_.toarray())


def test_parquet_mixed_or_missing_column_across_files_is_refused(tmp_path):
    d = tmp_path / "ds.parquet"
    d.mkdir()
    pq.write_table(pa.table({"a": np.arange(10.0), "b": np.arange(10.0)}), d / "part.0.parquet")
    pq.write_table(pa.table({"a": np.arange(10), "b": np.arange(10.0)}), d / "part.1.parquet")
    with pytest.warns(DataConversionWarning, match="'a'"):  # numeric in every file: read as floats
        np.testing.assert_array_equal(as_dask_array(str(d)).compute()[:, 0], np.r_[np.arange(10), np.arange(10)])
    pq.write_table(pa.table({"a": [str(i) for i in range(10)], "b": np.arange(10.0)}), d / "part.2.parquet")
    with pytest.raises(ValidationError,
                       match=r"column 'a' has mixed types: double in .*part.0.parquet.*, (large_)?string in .*part.2"):
        as_dask_array(str(d))
    assert as_dask_array(str(d), columns=["b"], min_cols=1).shape == (30, 1)
    pq.write_table(pa.table({"a": np.arange(10.0)}), d / "part.3.parquet")
    with pytest.raises(ValidationError, match="column 'b' is missing from the Parquet file .*part.3.parquet"):
        as_dask_array(str(d), columns=["b"], min_cols=1)


# ----------------------------------------------------------------------------- CSV values


def test_csv_fields_that_are_not_numbers_are_nan_rows_never_an_error(tmp_path, X, small_chunks):
    path = write("csv", X, tmp_path)
    lines = open(path).read().splitlines()
    lines[1 + 17] = "oops," + lines[1 + 17].split(",", 1)[1]  # text in row 17
    lines[1 + 300] = ",".join(["1"] * (D + 2))  # more fields than the header: the extra ones ignored
    lines[1 + 900] = "NA,,inf," + lines[1 + 900].split(",")[-1]  # missing and infinite values
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    got = as_dask_array(path).compute()
    assert got.shape == (N, D)  # no row lost or added
    bad = [17, 900]
    expected = X.copy()
    expected[300] = 1.0
    np.testing.assert_array_equal(np.delete(got, bad, axis=0), np.delete(expected, bad, axis=0))
    assert not np.isfinite(got[bad]).all(axis=1).any()  # each has a non-finite value
    zeroed = expected.copy()
    zeroed[bad] = 0.0
    np.testing.assert_array_equal(privcov().fit(path).covariance_.toarray(),
                                  privcov().fit(zeroed).covariance_.toarray())
    # on_nonfinite="raise" refuses, as for any input, without naming a row or a value
    with pytest.raises(ValidationError) as err:
        privcov(on_nonfinite="raise").fit(path)
    message = str(err.value).replace(path, "")
    assert "NaN or infinite" in message and not any(ch.isdigit() for ch in message) and "oops" not in message


def test_a_text_column_of_a_csv_reads_as_nan_not_as_an_error(tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("name,age,height\n" + "".join(f"p{i},{20 + i},{150 + i}\n" for i in range(50)))
    arr = as_dask_array(str(path))
    assert np.isnan(arr.compute()[:, 0]).all()  # a header declares no type: nothing to refuse
    np.testing.assert_array_equal(as_dask_array(str(path), columns=["age", "height"]).compute(),
                                  np.c_[20 + np.arange(50), 150 + np.arange(50)])


# ----------------------------------------------------------------------------- .npy and others


def test_npy_of_another_dtype_follows_the_dtype_rules(tmp_path):
    np.save(tmp_path / "s.npy", np.array([["a", "b"], ["c", "d"]]))
    with pytest.raises(ValidationError, match="has dtype <U1, which dpdist does not read: use float64 or float32"):
        as_dask_array(str(tmp_path / "s.npy"))
    (tmp_path / "junk.npy").write_bytes(b"not a numpy file")
    with pytest.raises(ValidationError, match="cannot open .* as a .npy array"):
        as_dask_array(str(tmp_path / "junk.npy"))


def test_a_file_of_another_kind_is_refused_naming_what_is_read(tmp_path, capsys):
    path = tmp_path / "data.txt"
    path.write_text("1 2\n3 4\n")
    with pytest.raises(ValidationError, match=r"is a file, not a Zarr store; dpdist reads .*\.csv.*\.npy.*\.parquet"):
        as_dask_array(str(path))
    assert main(["covariance", str(path), "--k", "2", "--epsilon", "1", "--delta", "1e-5", "--clip", "3",
                 "--output", str(tmp_path / "o.zarr")]) == 2
    assert "GroupNotFoundError" not in capsys.readouterr().err


def test_missing_optional_dependencies_name_the_extra(tmp_path, X, monkeypatch):
    import sys

    path = write("parquet", X, tmp_path)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    with pytest.raises(ValidationError, match=r"pip install 'dpdist\[formats\]'"):
        as_dask_array(path)


def test_missing_chunks_flag_is_refused_for_files(tmp_path, X, capsys):
    path = write("csv", X, tmp_path)
    assert main(["covariance", path, "--missing-chunks", "fill", "--k", "2", "--epsilon", "1", "--delta", "1e-5",
                 "--clip", "3", "--output", str(tmp_path / "o.zarr")]) == 2
    assert "--missing-chunks is not used" in capsys.readouterr().err


# ----------------------------------------------------------------------------- convert


def test_convert_writes_float32_whole_row_chunks_every_chunk_present(tmp_path, X):
    Z = X.copy()
    Z[300:600] = 0.0  # a chunk equal to the fill value is still written
    path = write("parquet", Z, tmp_path)
    out = convert(path, tmp_path / "out.zarr", chunk_rows=300, columns=["d", "a", "b"])
    import zarr

    arr = zarr.open_array(out, mode="r")
    assert arr.dtype == np.float32 and arr.chunks == (300, 3) and arr.shape == (N, 3)
    assert arr.attrs["columns"] == ["d", "a", "b"] and not arr.compressors
    files = {p.relative_to(out).as_posix() for p in Path(out).rglob("*") if p.is_file() and p.name != "zarr.json"}
    assert files == {f"c/{i}/0" for i in range(4)}  # every chunk file, the all-zero one too
    np.testing.assert_array_equal(arr[...], Z[:, [3, 0, 1]].astype(np.float32))
    # the public chunk manifest is recorded, so a chunk file lost later is refused, not read as zeros
    from dpdist.data.validation import CHUNK_MANIFEST_ATTR

    assert arr.attrs[CHUNK_MANIFEST_ATTR]["n_chunks"] == 4
    os.remove(os.path.join(out, "c", "1", "0"))
    with pytest.raises(ValidationError):
        as_dask_array(out)


def test_convert_default_layout_and_overflow_without_a_warning(tmp_path, X):
    Y = X.copy()
    Y[5, 1] = 1e300  # beyond float32: becomes inf (the fit's non-finite handling applies)
    np.save(tmp_path / "y.npy", Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no data-dependent warning
        out = convert(str(tmp_path / "y.npy"), tmp_path / "y.zarr")
    import zarr

    arr = zarr.open_array(out, mode="r")
    assert arr.chunks == (N, D)  # small data: one chunk of whole rows
    assert np.isinf(arr[5, 1]) and "columns" not in arr.attrs


def test_convert_is_atomic(tmp_path, X, monkeypatch):
    import sys
    import types

    path = write("npy", X, tmp_path)
    old = convert(path, tmp_path / "out.zarr", dtype="float64")

    def fail(*args, **kwargs):
        raise RuntimeError("the write failed half way")

    monkeypatch.setattr(sys.modules["dpdist.data.convert"], "dask", types.SimpleNamespace(compute=fail))
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(RuntimeError):
        convert(path, tmp_path / "new.zarr")
    with pytest.raises(RuntimeError):
        convert(path, tmp_path / "out.zarr", overwrite=True)
    assert sorted(os.listdir(tmp_path)) == before  # no output, no temporary left
    np.testing.assert_array_equal(as_dask_array(old).compute(), X)  # the old output untouched


def test_convert_refuses_bad_parameters_before_writing(tmp_path, X):
    path = write("npy", X, tmp_path)
    for kwargs, match in [({"dtype": "int8"}, "dtype must be one of"), ({"chunk_rows": 0}, "chunk_rows"),
                          ({"chunk_rows": 2.5}, "chunk_rows")]:
        with pytest.raises(ValidationError, match=match):
            convert(path, tmp_path / "o.zarr", **kwargs)
    with pytest.raises(ValidationError, match="local Zarr array"):
        convert(path, "s3://bucket/o.zarr")
    assert sorted(os.listdir(tmp_path)) == ["data.npy"]


def test_convert_computes_on_any_scheduler_dask_compute_takes(tmp_path, X):
    """A scheduler function, as ``dask.compute(scheduler=...)`` takes it, and dask's configured
    scheduler when none is given."""
    import dask

    path = write("npy", X, tmp_path)
    calls = []

    def counting_get(dsk, keys, **kwargs):
        calls.append(keys)
        return dask.get(dsk, keys, **kwargs)

    out = convert(path, tmp_path / "a.zarr", scheduler=counting_get)
    assert len(calls) == 1
    np.testing.assert_array_equal(as_dask_array(out).compute(), X.astype(np.float32))
    with dask.config.set(scheduler=counting_get):
        convert(path, tmp_path / "b.zarr")
    assert len(calls) == 2


def test_convert_refuses_a_scheduler_dask_does_not_take_before_writing(tmp_path, X):
    path = write("npy", X, tmp_path)
    for bad in ("local-cluster", "tcp://127.0.0.1:1", "no-such-scheduler", 5):
        with pytest.raises(ValidationError, match="scheduler must be None, a dask scheduler name"):
            convert(path, tmp_path / "o.zarr", scheduler=bad)
    assert sorted(os.listdir(tmp_path)) == ["data.npy"]


def test_convert_cli_resolves_an_address_to_a_client_for_dask(tmp_path, X, local_cluster, monkeypatch):
    """``dpdist convert --scheduler tcp://...``: the command line connects, and the data layer
    gets a ``distributed.Client`` (what ``dask.compute`` takes), never the address."""
    import sys

    from distributed import Client

    module = sys.modules["dpdist.data.convert"]
    real, seen = module.convert, []

    def spy(*args, scheduler=None, **kwargs):
        seen.append(scheduler)
        return real(*args, scheduler=scheduler, **kwargs)

    monkeypatch.setattr(module, "convert", spy)
    path = write("npy", X, tmp_path)
    out = tmp_path / "c.zarr"
    assert main(["convert", path, str(out), "--scheduler", local_cluster.scheduler.address, "--no-progress"]) == 0
    assert len(seen) == 1 and isinstance(seen[0], Client)
    np.testing.assert_array_equal(as_dask_array(str(out)).compute(), X.astype(np.float32))


def test_convert_cli_round_trip_with_a_progress_line(tmp_path, X, small_chunks, capsys):
    path = write("csv", X, tmp_path)
    out = tmp_path / "data.zarr"
    assert main(["convert", path, str(out), "--columns", "a,b,c", "--chunk-rows", "500", "--progress",
                 "--scheduler", "synchronous"]) == 0
    captured = capsys.readouterr()
    # --progress: plain lines for logs, named by the stage, nothing redrawn
    assert "dpdist convert: converting to Zarr" in captured.err and "100%" in captured.err
    assert "\r" not in captured.err
    assert f"wrote 1200 x 3 float32 rows (500 rows a chunk) to {out}" in captured.out
    arr = as_dask_array(str(out))
    assert arr.chunks == ((500, 500, 200), (3,)) and arr.dtype == np.float32
    np.testing.assert_array_equal(arr.compute(), X[:, :3].astype(np.float32))
    assert main(["convert", path, str(out)]) == 2  # exists: refused, untouched
    assert "already exists" in capsys.readouterr().err



@pytest.mark.parametrize("fmt", ["parquet", "npy"])
def test_file_sources_are_picklable_and_small(tmp_path, X, small_chunks, fmt):
    """What a worker process receives: the file's location and row layout, not the data."""
    import pickle

    arr = as_dask_array(write(fmt, X, tmp_path))
    payload = pickle.dumps(arr)
    assert len(payload) < X.nbytes / 4
    np.testing.assert_array_equal(pickle.loads(payload).compute(scheduler="synchronous"), X)
