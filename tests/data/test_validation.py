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


def _neighbours(tmp_path, chunks=(40, 5)):
    """Two stores written with zarr's default config (write_empty_chunks=False): in the first,
    row 50 is the only non-zero entry of chunk 1, so that chunk is stored; in its neighbour
    the row is zeroed, and zarr leaves the chunk out."""
    x = np.zeros((120, 5))
    x[:40] = 1.0
    x[80:] = 2.0
    y = x.copy()
    x[50, 2] = 3.0
    _store(tmp_path / "x.zarr", x, chunks)
    _store(tmp_path / "y.zarr", y, chunks)
    assert (tmp_path / "x.zarr" / "c" / "1" / "0").exists()
    assert not (tmp_path / "y.zarr" / "c" / "1" / "0").exists()
    return x, y


@pytest.mark.parametrize("as_path", [True, False])
def test_neighbouring_default_config_stores_are_read_alike(tmp_path, as_path):
    """Whether zarr stored a chunk depends on one row: neither store is refused, both read
    per the Zarr specification, and the release notes say so in the same words."""
    from dpdist.data.validation import READING_NOTES, chunk_reading_notes

    x, y = _neighbours(tmp_path)
    arrays = []
    for name in ("x.zarr", "y.zarr"):
        path = str(tmp_path / name)
        arrays.append(as_dask_array(path if as_path else zarr.open_array(path, mode="r")))
    np.testing.assert_array_equal(arrays[0].compute(scheduler="sync"), x)
    np.testing.assert_array_equal(arrays[1].compute(scheduler="sync"), y)  # the absent chunk is the fill value
    assert chunk_reading_notes(arrays[0]) == chunk_reading_notes(arrays[1]) == (READING_NOTES["fill"],)
    assert chunk_reading_notes(arrays[0] * 2.0) == (READING_NOTES["fill"],)  # found through derived graphs too
    assert chunk_reading_notes(da.from_array(x)) == ()


def test_write_chunk_manifest_stores_every_chunk_and_records_it(tmp_path):
    from dpdist.data.validation import CHUNK_MANIFEST_ATTR, READING_NOTES, chunk_reading_notes, write_chunk_manifest

    _, y = _neighbours(tmp_path)
    z = zarr.open_array(str(tmp_path / "y.zarr"), mode="r+")
    manifest = write_chunk_manifest(z)
    assert manifest["n_chunks"] == 3 and manifest["shape"] == [120, 5] and manifest["storage_block"] == [40, 5]
    assert (tmp_path / "y.zarr" / "c" / "1" / "0").exists()
    assert zarr.open_array(str(tmp_path / "y.zarr"), mode="r").attrs[CHUNK_MANIFEST_ATTR] == manifest
    arr = as_dask_array(str(tmp_path / "y.zarr"))
    np.testing.assert_array_equal(arr.compute(scheduler="sync"), y)
    assert chunk_reading_notes(arr) == (READING_NOTES["manifest"],)


def test_write_chunk_manifest_completes_a_sharded_array(tmp_path):
    from dpdist.data.validation import write_chunk_manifest

    x = np.zeros((120, 5))
    x[:10] = 1.0
    z = zarr.create_array(str(tmp_path / "s.zarr"), shape=x.shape, chunks=(20, 5), shards=(40, 5), dtype="f8")
    z[...] = x
    assert sorted(os.listdir(tmp_path / "s.zarr" / "c")) == ["0"]
    assert write_chunk_manifest(z)["n_chunks"] == 3
    assert sorted(os.listdir(tmp_path / "s.zarr" / "c")) == ["0", "1", "2"]
    np.testing.assert_array_equal(as_dask_array(str(tmp_path / "s.zarr"), missing_chunks="raise").compute(), x)


@pytest.mark.parametrize("as_path", [True, False])
def test_a_store_that_lost_a_chunk_its_manifest_records_is_refused_before_reading(tmp_path, x, as_path):
    from dpdist.data.validation import write_chunk_manifest

    z = _store(tmp_path / "a.zarr", x)
    write_chunk_manifest(z)
    os.remove(tmp_path / "a.zarr" / "c" / "1" / "0")
    source = str(tmp_path / "a.zarr") if as_path else zarr.open_array(str(tmp_path / "a.zarr"), mode="r")
    for mode in ("auto", "raise"):
        with pytest.raises(ValidationError, match=r"a\.zarr' has lost chunk files: its chunk manifest") as info:
            as_dask_array(source, missing_chunks=mode)
        assert "c/1" not in str(info.value) and "1 of" not in str(info.value)  # no chunk named or counted
    filled = as_dask_array(source, missing_chunks="fill").compute(scheduler="sync")
    np.testing.assert_array_equal(filled[40:80], 0.0)  # the fill value, as declared
    np.testing.assert_array_equal(filled[:40], x[:40])


def test_raise_refuses_a_store_without_a_manifest_whatever_its_chunks(tmp_path):
    _neighbours(tmp_path)
    messages = []
    for name in ("x.zarr", "y.zarr"):  # one has every chunk, one does not: the same refusal
        with pytest.raises(ValidationError, match="carries no chunk manifest") as info:
            as_dask_array(str(tmp_path / name), missing_chunks="raise")
        messages.append(str(info.value).replace(name, "STORE"))
    assert messages[0] == messages[1]


def test_a_manifest_that_does_not_describe_the_array_is_refused(tmp_path, x):
    from dpdist.data.validation import CHUNK_MANIFEST_ATTR, write_chunk_manifest

    z = _store(tmp_path / "a.zarr", x)
    manifest = write_chunk_manifest(z)
    z.attrs[CHUNK_MANIFEST_ATTR] = {**manifest, "shape": [80, 5]}
    with pytest.raises(ValidationError, match="does not describe the array"):
        as_dask_array(str(tmp_path / "a.zarr"))


def test_a_dataset_group_with_a_manifest_refuses_a_lost_chunk_of_x(tmp_path, x):
    from dpdist.data.validation import write_chunk_manifest

    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("X", shape=x.shape, chunks=(50, 5), dtype="f8")[...] = x
    write_chunk_manifest(g["X"])
    os.remove(tmp_path / "g.zarr" / "X" / "c" / "2" / "0")
    with pytest.raises(ValidationError, match=r"g\.zarr' has lost chunk files") as info:
        as_dask_array(str(tmp_path / "g.zarr"))
    assert "c/2" not in str(info.value)


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
    from dpdist.data.validation import write_chunk_manifest

    write_chunk_manifest(_store(tmp_path / "a.zarr", x))
    arr = as_dask_array(str(tmp_path / "a.zarr"))
    os.remove(tmp_path / "a.zarr" / "c" / "2" / "0")  # as a worker on another filesystem would see it
    with pytest.raises(InfrastructureError, match=r"a chunk file that the chunk manifest .* is missing where the task ran"):
        arr.compute(scheduler="sync")


def test_a_store_without_manifest_that_a_worker_cannot_see_is_not_read_as_zeros(tmp_path, x):
    import shutil

    _store(tmp_path / "a.zarr", x)
    arr = as_dask_array(str(tmp_path / "a.zarr"))
    shutil.rmtree(tmp_path / "a.zarr")  # a worker on another filesystem sees nothing there
    with pytest.raises(InfrastructureError, match=r"a\.zarr' is not there where the task ran"):
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
