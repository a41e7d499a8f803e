"""Input validation: every accepted input type, and the errors for the rest."""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import pytest
import zarr

from dpdist.data.validation import as_dask_array
from dpdist.exceptions import DataConversionWarning, InfrastructureError, ValidationError


@pytest.fixture
def x(rng):
    return rng.standard_normal((120, 5))


def test_numpy_dask_zarr_and_path_give_the_same_array(tmp_path, x):
    z = zarr.create_array(str(tmp_path / "a.zarr"), shape=x.shape, chunks=(40, 5), dtype="f8")
    z[...] = x
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("X", shape=x.shape, chunks=(50, 5), dtype="f8")[...] = x
    for inp in (x, da.from_array(x, chunks=30), z, str(tmp_path / "a.zarr"), tmp_path / "a.zarr", str(tmp_path / "g.zarr")):
        arr = as_dask_array(inp)
        assert isinstance(arr, da.Array)
        np.testing.assert_array_equal(arr.compute(scheduler="sync"), x)


def test_zarr_chunks_are_kept(tmp_path, x):
    z = zarr.create_array(str(tmp_path / "a.zarr"), shape=x.shape, chunks=(40, 5), dtype="f4")
    z[...] = x
    arr = as_dask_array(z)
    assert arr.chunks[0] == (40, 40, 40) and arr.dtype == np.float32


def test_integers_converted_with_warning():
    with pytest.warns(DataConversionWarning):
        arr = as_dask_array(np.ones((3, 3), dtype=np.int32))
    assert arr.dtype == np.float64


CONVERTED = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16"]
REFUSED = ["complex64", "complex128", "longdouble", "<U3", "object", "datetime64[s]", "timedelta64[s]"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float32_and_float64_are_used_as_they_are(dtype, recwarn):
    raw = np.arange(12, dtype=dtype).reshape(4, 3)
    arr = as_dask_array(raw)
    assert arr.dtype == np.dtype(dtype) and not recwarn.list


@pytest.mark.parametrize("dtype", CONVERTED)
def test_bool_integer_and_float16_are_converted_to_float64_with_one_warning(dtype):
    raw = (np.arange(12).reshape(4, 3) % 3).astype(dtype)
    with pytest.warns(DataConversionWarning) as caught:
        arr = as_dask_array(raw)
    message = str(caught[0].message)
    assert len(caught) == 1 and message.startswith(f"X has dtype {np.dtype(dtype)}; converted to float64")
    assert ("rounded" in message) == (dtype in ("int64", "uint64"))
    assert arr.dtype == np.float64
    np.testing.assert_array_equal(arr.compute(scheduler="sync"), raw.astype(np.float64))


@pytest.mark.parametrize("dtype", ["bool", "int16", "uint8"])
def test_zarr_stores_follow_the_same_rule(tmp_path, dtype):
    z = zarr.create_array(str(tmp_path / "a.zarr"), shape=(6, 3), chunks=(3, 3), dtype=dtype)
    z[...] = (np.arange(18).reshape(6, 3) % 2).astype(dtype)
    with pytest.warns(DataConversionWarning, match=f"dtype {dtype}; converted to float64"):
        arr = as_dask_array(str(tmp_path / "a.zarr"))
    assert arr.dtype == np.float64


@pytest.mark.parametrize("dtype", REFUSED)
def test_other_dtypes_are_refused_naming_them(dtype):
    if np.dtype(dtype) == np.float64:  # platforms where longdouble is float64
        pytest.skip("longdouble is float64 here")
    raw = np.zeros((4, 3), dtype=dtype)
    with pytest.raises(ValidationError, match="use float64 or float32") as info:
        as_dask_array(raw)
    assert f"X has dtype {np.dtype(dtype)}, which dpdist does not read" in str(info.value)


def test_group_without_x_and_missing_path(tmp_path):
    zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    with pytest.raises(ValidationError, match="group"):
        as_dask_array(str(tmp_path / "g.zarr"))
    with pytest.raises(ValidationError, match="does not exist"):
        as_dask_array(str(tmp_path / "missing.zarr"))


def test_pathological_row_chunks_are_rechunked():
    X = da.ones((100_000, 4), chunks=(10, 4))  # 10-row chunks: far too small
    assert len(as_dask_array(X).chunks[0]) < 100


def test_fsspec_urls_pass_through_to_zarr():
    x = np.arange(60.0).reshape(20, 3)
    z = zarr.create_array("memory://dpdist-test/x.zarr", shape=x.shape, chunks=(10, 3), dtype="f8")
    z[...] = x
    np.testing.assert_array_equal(as_dask_array("memory://dpdist-test/x.zarr").compute(scheduler="sync"), x)


# --------------------------------------------------------------------------------------
# Zarr stores as the workers see them: paths, missing chunks, storage errors
# --------------------------------------------------------------------------------------


def _store(path, x, chunks=(40, 5)):
    z = zarr.create_array(str(path), shape=x.shape, chunks=chunks, dtype="f8")
    z[...] = x
    return z


def test_a_relative_path_is_read_from_the_same_place_in_another_directory(tmp_path, monkeypatch, x):
    (tmp_path / "data").mkdir()
    (tmp_path / "elsewhere").mkdir()
    _store(tmp_path / "data" / "a.zarr", x)
    monkeypatch.chdir(tmp_path / "data")
    from_path = as_dask_array("a.zarr")
    from_array = as_dask_array(zarr.open_array("a.zarr", mode="r"))  # a relative LocalStore root
    monkeypatch.chdir(tmp_path / "elsewhere")  # where a remote worker would run
    np.testing.assert_array_equal(from_path.compute(scheduler="sync"), x)
    np.testing.assert_array_equal(from_array.compute(scheduler="sync"), x)


@pytest.mark.parametrize("as_path", [True, False])
def test_a_store_with_a_missing_chunk_is_refused_before_reading(tmp_path, x, as_path):
    z = _store(tmp_path / "a.zarr", x)
    os.remove(tmp_path / "a.zarr" / "c" / "1" / "0")
    with pytest.raises(ValidationError, match=r"missing 1 of 3 chunk files \(first: 'c/1/0'\).*missing_chunks='fill'"):
        as_dask_array(str(tmp_path / "a.zarr") if as_path else z)
    filled = as_dask_array(str(tmp_path / "a.zarr") if as_path else z, missing_chunks="fill").compute(scheduler="sync")
    np.testing.assert_array_equal(filled[40:80], 0.0)  # the fill value, as declared
    np.testing.assert_array_equal(filled[:40], x[:40])


def test_a_dataset_group_names_the_missing_chunk_of_x(tmp_path, x):
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("X", shape=x.shape, chunks=(50, 5), dtype="f8")[...] = x
    os.remove(tmp_path / "g.zarr" / "X" / "c" / "2" / "0")
    with pytest.raises(ValidationError, match=r"first: 'X/c/2/0'"):
        as_dask_array(str(tmp_path / "g.zarr"))


def test_bad_missing_chunks_value_refused(x):
    with pytest.raises(ValidationError, match="missing_chunks"):
        as_dask_array(x, missing_chunks="zero")


def test_validation_lists_keys_and_reads_no_chunk_data(tmp_path, x):
    _store(tmp_path / "a.zarr", x)
    for chunk in (tmp_path / "a.zarr" / "c").rglob("*"):
        if chunk.is_file():
            chunk.write_bytes(b"not a zstd frame")
    arr = as_dask_array(str(tmp_path / "a.zarr"))  # metadata and key listing only: no error yet
    with pytest.raises(InfrastructureError, match=r"reading the Zarr array at .*a\.zarr' failed \(.*Zstd"):
        arr.compute(scheduler="sync")


def test_a_chunk_that_vanishes_after_validation_is_not_read_as_zeros(tmp_path, x):
    _store(tmp_path / "a.zarr", x)
    arr = as_dask_array(str(tmp_path / "a.zarr"))
    os.remove(tmp_path / "a.zarr" / "c" / "2" / "0")  # as a worker on another filesystem would see it
    with pytest.raises(InfrastructureError, match=r"chunk 'c/2/0' .* is missing where the task ran"):
        arr.compute(scheduler="sync")


def test_truncated_metadata_is_a_one_line_validation_error(tmp_path, x):
    _store(tmp_path / "a.zarr", x)
    meta = tmp_path / "a.zarr" / "zarr.json"
    meta.write_text(meta.read_text()[:100])
    with pytest.raises(ValidationError, match="metadata is not valid") as info:
        as_dask_array(str(tmp_path / "a.zarr"))
    assert "\n" not in str(info.value)


def test_a_corrupt_chunk_fails_the_fit_without_values_and_without_spending(tmp_path):
    import dpdist

    x = np.full((120, 5), 123.456)
    _store(tmp_path / "a.zarr", x)
    (tmp_path / "a.zarr" / "c" / "1" / "0").write_bytes(b"\x28\xb5\x2f\xfd garbage")
    with pytest.raises(InfrastructureError) as info:
        est = dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, random_state=0, scheduler="threads")
        est.fit(str(tmp_path / "a.zarr"))
    msg = str(info.value)
    assert info.value.noise_drawn is False and "nothing was spent" in msg and "\n" not in msg
    assert "a.zarr" in msg and "123.4" not in msg
