"""Input validation: every accepted input type, and the errors for the rest."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import zarr

from dpdist.data.validation import as_dask_array
from dpdist.exceptions import DataConversionWarning, ValidationError


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
    arr = as_dask_array(z)
    assert arr.chunks[0] == (40, 40, 40) and arr.dtype == np.float32


def test_integers_converted_with_warning():
    with pytest.warns(DataConversionWarning):
        arr = as_dask_array(np.ones((3, 3), dtype=np.int32))
    assert arr.dtype == np.float64


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
