"""Shared fixtures. Tests run with warnings as errors (pyproject.toml)."""

from __future__ import annotations

import os

import numpy as np
import pytest

#: Long form of statistical tests (more trials), by hand: DPDIST_LONG=1 pytest -m statistical
LONG = os.environ.get("DPDIST_LONG", "") not in ("", "0")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def local_cluster():
    """A real 2-worker distributed LocalCluster (separate processes), shared by the session."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster, set_as_default=False) as client:
            yield client
