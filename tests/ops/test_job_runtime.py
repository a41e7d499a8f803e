"""A job's runtime: ``[scheduler].timeout`` reaches the fit as dask's ``dpdist.timeout``, and the
job's estimator fits against the job's reservation (the one charging API)."""

from __future__ import annotations

import dask
import pytest

from dpdist.algorithms._base import Estimator
from dpdist.exceptions import InfrastructureError
from dpdist.ops.job import load_job
from dpdist.ops.ledger import SQLiteLedger
from dpdist.ops.runner import run_job
from dpdist.privacy.budget import ApproxDP
from tests.ops.conftest import job_toml


def _job(tmp_path, dataset, extra=""):
    path = tmp_path / "job.toml"
    path.write_text(job_toml(dataset, str(tmp_path / "out-{run}.zarr"), extra=extra))
    return load_job(path)


def test_the_job_runtime_config_holds_its_timeout_and_no_library_bar(tmp_path, tiny_dataset):
    assert _job(tmp_path, tiny_dataset).runtime_config() == {"dpdist.progress": False}
    assert _job(tmp_path, tiny_dataset, "timeout = 30\n").runtime_config() == {"dpdist.progress": False,
                                                                                 "dpdist.timeout": 30.0}


def test_a_job_fits_against_its_reservation_under_its_timeout(tmp_path, tiny_dataset, monkeypatch):
    seen = []
    real = Estimator.fit

    def spy(self, X, y=None, *, reservation=None):
        seen.append((reservation, dask.config.get("dpdist.timeout"), dask.config.get("dpdist.progress")))
        return real(self, X, y, reservation=reservation)

    monkeypatch.setattr(Estimator, "fit", spy)
    with SQLiteLedger(tmp_path / "ledger.sqlite") as led:
        led.set_budget(tiny_dataset, ApproxDP(1.0, 1e-6))
        done = run_job(_job(tmp_path, tiny_dataset, "timeout = 30\n"), ledger=led)
        ((reservation, timeout, progress),) = seen
        assert reservation.id == done["reservation"] and (timeout, progress) == (30.0, False)
        assert [e.state for e in led.history(tiny_dataset) if e.state != "budget-set"] == ["committed"]
    assert dask.config.get("dpdist.timeout") == 86400.0  # the job's setting ends with it


def test_a_job_past_its_timeout_fails_with_the_timeout_message(tmp_path, tiny_dataset):
    with SQLiteLedger(tmp_path / "ledger.sqlite") as led:
        led.set_budget(tiny_dataset, ApproxDP(1.0, 1e-6))
        with pytest.raises(InfrastructureError, match=r"did not finish within timeout=1e-09 s"):
            run_job(_job(tmp_path, tiny_dataset, "timeout = 1e-9\n"), ledger=led)
        (entry,) = [e for e in led.history(tiny_dataset) if e.state != "budget-set"]
        # the first step releases the private mean: a step that may have drawn noise counts as spent
        assert (entry.stage, entry.state, entry.outcome) == ("running", "committed", "failed-counted-as-spent")
