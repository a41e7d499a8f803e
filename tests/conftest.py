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


@pytest.fixture(scope="session", autouse=True)
def _no_users_ledger(tmp_path_factory):
    """The direct commands charge the ledger named by $DPDIST_LEDGER and look for budgets in the
    default ledger ($XDG_DATA_HOME/dpdist/ledger.sqlite): no test sees the user's. Tests that
    need a ledger name their own."""
    saved = {k: os.environ.get(k) for k in ("DPDIST_LEDGER", "XDG_DATA_HOME")}
    os.environ.pop("DPDIST_LEDGER", None)
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
