"""A real cluster: a ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import dpdist
import dpdist.data.synthetic
from tests.clusters import dask_cluster

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster_address(tmp_path):
    with dask_cluster(2, cwd=tmp_path, log=tmp_path / "cluster.log") as (addr, _):
        yield addr


def test_cli_against_a_separate_scheduler_and_workers(cluster_address, tmp_path):
    data = str(tmp_path / "m1.zarr")
    dpdist.data.synthetic.make_model1(10, 3, random_state=0).write_zarr(data, 30_000, chunk_rows=7_000, scheduler="sync")
    out = tmp_path / "cov.zarr"
    cmd = [sys.executable, "-m", "dpdist.cli.main", "covariance", data, "--k", "3", "--epsilon", "1",
           "--delta", "1e-5", "--clip", "3", "--random-state", "11", "--scheduler", cluster_address,
           "--tile-size", "4", "--output", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    remote = dpdist.load_result(out)
    local = dpdist.SparseCovariance(3, 1.0, 1e-5, clip=3.0, random_state=11, scheduler="synchronous").fit(data)
    assert (remote.covariance != 0).toarray().tolist() == (local.covariance_ != 0).toarray().tolist()
    np.testing.assert_allclose(remote.covariance.toarray(), local.covariance_.toarray(), rtol=1e-10, atol=1e-13)
