"""Helpers of the user-path tests: plain scripts in subprocesses, real dask clusters."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from tests.clusters import dask_cluster


def spiked_rows(n: int, d: int, seed: int = 1) -> np.ndarray:
    """Gaussian rows whose first two coordinates have covariance [[3, 2], [2, 3]] (a 2-sparse
    spike: the private tests of PrivNorm/PrivPCA pass at small sizes)."""
    x = np.random.default_rng(seed).standard_normal((n, d))
    x[:, :2] = x[:, :2] @ np.linalg.cholesky([[3.0, 2.0], [2.0, 3.0]]).T
    return x


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> Path:
    """A user's directory holding ``data.zarr`` (30,000 x 6, chunks of 5,000 rows), and a
    sibling ``elsewhere/`` where the cluster's processes run."""
    import zarr

    root = tmp_path_factory.mktemp("user")
    (root / "elsewhere").mkdir()
    x = spiked_rows(30_000, 6)
    z = zarr.create_array(str(root / "data.zarr"), shape=x.shape, chunks=(5_000, 6), dtype="f8")
    z[...] = x
    return root


@pytest.fixture(scope="session")
def real_cluster(workdir) -> Iterator[str]:
    """One real cluster for these tests: a scheduler and two workers, in ``elsewhere/``."""
    with dask_cluster(2, cwd=workdir / "elsewhere", log=workdir / "cluster.log") as (addr, _):
        yield addr
