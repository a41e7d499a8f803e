"""deploy/etl-job.sh as systemd runs it: an empty environment with PATH=/usr/bin:/bin. It runs
`dpdist run`, so every release it publishes is charged to the ledger."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

import dpdist
from dpdist.ops.ledger import open_ledger
from dpdist.privacy.budget import ApproxDP

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "etl-job.sh"
BASE_ENV = {"PATH": "/usr/bin:/bin", "DPDIST_K": "2", "DPDIST_EPSILON": "1", "DPDIST_DELTA": "1e-6",
            "DPDIST_SIGMA": "1", "DPDIST_SCHEDULER": "synchronous"}


@pytest.fixture
def job(tmp_path):
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    x = np.random.default_rng(0).standard_normal((1_000, 5))
    zarr.create_array(str(tmp_path / "x.zarr"), shape=x.shape, chunks=(500, 5), dtype="f8")[...] = x
    (tmp_path / "out").mkdir()
    return dict(BASE_ENV, DPDIST_INPUT=str(tmp_path / "x.zarr"), DPDIST_OUTPUT_DIR=str(tmp_path / "out"))


def _run(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), "bash", str(SCRIPT)],
                          capture_output=True, text=True, timeout=300)


def _venv() -> Path:
    venv = Path(sys.prefix)
    if not (venv / "bin" / "dpdist").exists():
        pytest.skip("dpdist is not installed as an executable in this Python's environment")
    return venv


def test_runs_with_systemds_path_and_charges_the_ledger(job, tmp_path):
    ledger = str(tmp_path / "ledger.sqlite")
    with open_ledger(ledger) as led:
        led.set_budget(job["DPDIST_INPUT"], ApproxDP(1.5, 1e-6))
    env = dict(job, DPDIST_VENV=str(_venv()), DPDIST_LEDGER=ledger)
    proc = _run(env)
    assert proc.returncode == 0, proc.stderr
    release = json.loads(proc.stdout)
    written = list((tmp_path / "out").iterdir())
    assert len(written) == 1 and written[0].name.startswith("covariance-") and release["output"] == str(written[0])
    cost = release["cost"]
    assert release["status"] == "released" and (cost["type"], float(cost["epsilon"]), float(cost["delta"])) == (
        "approx-dp", 1.0, 1e-6)
    result = dpdist.load_result(written[0])
    assert result.covariance.shape == (5, 5) and result.metadata["private"] is True
    with open_ledger(ledger) as led:
        [entry] = [e for e in led.history(job["DPDIST_INPUT"]) if e.state == "committed"]
    assert (entry.output, entry.checksum) == (release["output"], release["checksum"])
    proc = _run(env)  # (1, 1e-6) twice exceeds (1.5, 1e-6): refused before reading, nothing written
    assert proc.returncode == 3, proc.stderr
    assert json.loads(proc.stdout)["status"] == "refused" and len(list((tmp_path / "out").iterdir())) == 1


def test_without_a_budget_in_the_default_ledger_it_is_refused(job, tmp_path):
    """No DPDIST_LEDGER: the default ledger of the service's user is charged; a dataset without a
    budget there is refused (exit 3), where the script used to publish an uncounted release."""
    proc = _run(dict(job, DPDIST_VENV=str(_venv()), HOME=str(tmp_path / "home")))
    assert proc.returncode == 3, proc.stderr
    assert "no privacy budget" in json.loads(proc.stdout)["error"]["message"]
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("var,value", [("DPDIST_EPSILON", "1, sigma = 9"), ("DPDIST_K", "two")])
def test_a_parameter_that_is_not_a_number_is_refused(job, tmp_path, var, value):
    proc = _run(dict(job, DPDIST_VENV=str(_venv()), **{var: value}))
    assert proc.returncode == 2 and f"{var} must be a number" in proc.stderr
    assert list((tmp_path / "out").iterdir()) == []


def test_without_dpdist_it_says_how_to_configure(job, tmp_path):
    if any(os.path.exists(f"{d}/dpdist") for d in ("/usr/bin", "/bin")):  # pragma: no cover
        pytest.skip("a system-wide dpdist would be found on PATH")
    proc = _run(dict(job, DPDIST_VENV=str(tmp_path / "no-venv")))
    assert proc.returncode == 2
    assert "DPDIST_BIN" in proc.stderr and "DPDIST_VENV" in proc.stderr and "not found" in proc.stderr
    assert list((tmp_path / "out").iterdir()) == []
