"""deploy/etl-job.sh as systemd runs it: an empty environment with PATH=/usr/bin:/bin."""

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


def test_runs_with_systemds_path_given_the_venv(job, tmp_path):
    venv = Path(sys.prefix)
    if not (venv / "bin" / "dpdist").exists():
        pytest.skip("dpdist is not installed as an executable in this Python's environment")
    proc = _run(dict(job, DPDIST_VENV=str(venv)))
    assert proc.returncode == 0, proc.stderr
    release = json.loads(proc.stdout)
    written = list((tmp_path / "out").iterdir())
    assert len(written) == 1 and written[0].name.startswith("covariance-") and release["output"] == str(written[0])
    assert release["privacy"] == {"type": "approx-dp", "epsilon": 1.0, "delta": 1e-6}
    assert dpdist.load_result(written[0]).covariance.shape == (5, 5)


def test_without_dpdist_it_says_how_to_configure(job, tmp_path):
    if any(os.path.exists(f"{d}/dpdist") for d in ("/usr/bin", "/bin")):  # pragma: no cover
        pytest.skip("a system-wide dpdist would be found on PATH")
    proc = _run(dict(job, DPDIST_VENV=str(tmp_path / "no-venv")))
    assert proc.returncode == 2
    assert "DPDIST_BIN" in proc.stderr and "DPDIST_VENV" in proc.stderr and "not found" in proc.stderr
    assert list((tmp_path / "out").iterdir()) == []
