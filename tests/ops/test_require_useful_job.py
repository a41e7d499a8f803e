"""A job file's ``require_useful = true`` refuses (exit 2) a job whose plan predicts a useless
release, before any data is read, and the ledger is charged nothing."""

from __future__ import annotations

import json
import os
import textwrap

from dpdist.cli.main import main
from dpdist.ops.ledger import open_ledger
from dpdist.privacy.budget import ApproxDP
from tests.ops.conftest import job_toml


def _job(tmp_path, dataset, ledger, require_useful):
    est = textwrap.dedent(f"""\
        [estimator]
        name = "SpectralNorm"
        [estimator.params]
        k = 2
        epsilon = 20.0
        delta = 1e-6
        gap = 0.5
        sigma = 1.0
        require_useful = {str(require_useful).lower()}
        """)
    path = tmp_path / f"job-{require_useful}.toml"
    path.write_text(job_toml(dataset, str(tmp_path / "out-{run}.zarr"), ledger=ledger, estimator=est))
    return str(path)


def test_job_require_useful_refuses_and_spends_nothing(tmp_path, tiny_dataset, capsys):
    ledger = str(tmp_path / "ledger.sqlite")
    with open_ledger(ledger) as led:
        led.set_budget(tiny_dataset, ApproxDP(100.0, 1e-3))
    capsys.readouterr()
    assert main(["run", _job(tmp_path, tiny_dataset, ledger, True), "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert "require_useful = true" in doc["error"]["message"] and "predicted to pass" in doc["error"]["message"]
    with open_ledger(ledger) as led:
        assert float(led.remaining(tiny_dataset).remaining()["epsilon"]) == 100.0
        assert [e.state for e in led.history(tiny_dataset)] == ["budget-set"]  # not even a reservation
    assert not [p for p in os.listdir(tmp_path) if p.startswith("out-")]
    # without the field the same job runs, is rejected by its private tests, and spends
    assert main(["run", _job(tmp_path, tiny_dataset, ledger, False)]) == 4
    with open_ledger(ledger) as led:
        assert [e.state for e in led.history(tiny_dataset)][-1] == "committed"
