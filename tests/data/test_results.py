"""Results on disk: round trip, atomic writes, refusal to clobber."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp

import dpdist
from dpdist.data.results import write_result
from dpdist.exceptions import ValidationError


def test_round_trip_dense_sparse_and_metadata(tmp_path):
    M = sp.csr_array(np.array([[1.0, 0, 2], [0, 3, 0], [2, 0, 4]]))
    meta = {"mechanism": "x", "privacy": {"type": "approx-dp", "epsilon": 1.0, "delta": 1e-6}}
    out = write_result(tmp_path / "r.zarr", meta, {"covariance": M, "diag": np.arange(3.0), "n": 7})
    res = dpdist.load_result(out)
    assert res.metadata == meta and res.privacy["epsilon"] == 1.0
    np.testing.assert_array_equal(res.covariance.toarray(), M.toarray())
    np.testing.assert_array_equal(res["diag"], np.arange(3.0))
    assert res.n == 7


def test_existing_output_is_refused_unless_overwrite(tmp_path):
    write_result(tmp_path / "r.zarr", {"a": 1}, {"v": np.ones(2)})
    with pytest.raises(ValidationError, match="already exists"):
        write_result(tmp_path / "r.zarr", {"a": 2}, {"v": np.zeros(2)})
    write_result(tmp_path / "r.zarr", {"a": 2}, {"v": np.zeros(2)}, overwrite=True)
    assert dpdist.load_result(tmp_path / "r.zarr").metadata == {"a": 2}


def test_failed_write_leaves_nothing(tmp_path):
    class Bad:
        def __array__(self, *a, **k):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_result(tmp_path / "r.zarr", {"a": 1}, {"ok": np.ones(3), "bad": Bad()})
    assert os.listdir(tmp_path) == []


def test_missing_parent_and_non_result(tmp_path):
    with pytest.raises(ValidationError, match="does not exist"):
        write_result(tmp_path / "no" / "r.zarr", {}, {})
    with pytest.raises(ValidationError, match="does not exist"):
        dpdist.load_result(tmp_path / "nothing")
    import zarr

    zarr.open_group(str(tmp_path / "plain.zarr"), mode="w")
    with pytest.raises(ValidationError, match="not a dpdist result"):
        dpdist.load_result(tmp_path / "plain.zarr")
