"""A command's runtime: --timeout sets dask's configuration key ``dpdist.timeout`` around the fit
(the library's bars are off while the command draws its own line), and a command charged to a
ledger fits the estimator against the reservation, as Python and ``dpdist run`` do."""

from __future__ import annotations

import math
import os

import dask
import numpy as np
import pytest
import zarr

import dpdist
from dpdist.algorithms._base import Estimator
from dpdist.cli.main import main
from dpdist.ops.ledger import SQLiteLedger
from dpdist.privacy.budget import ApproxDP


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "small.zarr"
    zarr.create_array(str(path), shape=(400, 5), chunks=(100, 5), dtype="f8")[...] = (
        np.random.default_rng(0).standard_normal((400, 5)))
    return str(path)


@pytest.fixture(autouse=True)
def _no_default_ledger(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("DPDIST_LEDGER", raising=False)


BASE = ["--k", "2", "--epsilon", "1", "--delta", "1e-5", "--clip", "3", "--scheduler", "synchronous"]


def test_timeout_flag_sets_the_dask_config_around_the_fit(dataset, tmp_path, monkeypatch):
    seen = []
    real = dpdist.SparseCovariance._fit_release

    def spy(self, X):
        seen.append((dask.config.get("dpdist.timeout"), dask.config.get("dpdist.progress")))
        return real(self, X)

    monkeypatch.setattr(dpdist.SparseCovariance, "_fit_release", spy)
    argv = ["covariance", dataset, *BASE, "--no-progress"]
    assert main([*argv, "--timeout", "37", "--output", str(tmp_path / "a.zarr")]) == 0
    assert main([*argv, "--timeout", "none", "--output", str(tmp_path / "b.zarr")]) == 0
    assert main([*argv, "--output", str(tmp_path / "c.zarr")]) == 0
    assert seen == [(37.0, False), (math.inf, False), (86400.0, False)]
    assert dask.config.get("dpdist.timeout") == 86400.0  # the command's setting ends with it


def test_a_tiny_timeout_flag_fails_the_command_with_exit_5_and_writes_nothing(dataset, tmp_path, capsys):
    out = tmp_path / "never.zarr"
    assert main(["covariance", dataset, *BASE, "--timeout", "1e-9", "--output", str(out)]) == 5
    assert "did not finish within --timeout 1e-09 s" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_a_command_with_a_ledger_fits_against_the_reservation(dataset, tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.sqlite"
    with SQLiteLedger(ledger) as led:
        led.set_budget(dataset, ApproxDP(2.0, 1e-4))
    reservations = []
    real = Estimator.fit

    def spy(self, X, y=None, *, reservation=None):
        reservations.append(reservation)
        return real(self, X, y, reservation=reservation)

    monkeypatch.setattr(Estimator, "fit", spy)
    assert main(["covariance", dataset, *BASE, "--ledger", str(ledger), "--output", str(tmp_path / "c.zarr")]) == 0
    (reservation,) = reservations
    assert reservation is not None and reservation.cost == ApproxDP(1.0, 1e-5)
    with SQLiteLedger(ledger) as led:
        entries = [e for e in led.history(dataset) if e.state != "budget-set"]
    assert [(e.id, e.state, e.job) for e in entries] == [(reservation.id, "committed", "dpdist covariance")]
