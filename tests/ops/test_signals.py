"""``dpdist run`` stopped by SIGTERM (a service stop, an eviction, a preemption) before it read
any data: the reservation is refunded on the way out, and stderr and ``--json`` say so.

The test runs ``dpdist run JOB --json`` as a real subprocess whose scheduler is a socket that
accepts connections and never answers, so the job waits there once its reservation is in the
ledger, and signals it then (no guessed delay). The same signal in the noise stage, on a real
cluster, is in ``test_faults.py``.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time

import pytest

from dpdist.ops.ledger import open_ledger
from dpdist.privacy.budget import ApproxDP
from tests.ops.conftest import dpdist_cmd, job_toml


def _wait_for(predicate, proc: subprocess.Popen, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"dpdist run ended (exit {proc.returncode}) before {what}: {out[-1000:]} {err[-3000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _finish(proc: subprocess.Popen) -> tuple[int, dict, str]:
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, json.loads(out), err


def _open_reservations(ledger: str, dataset: str) -> list:
    with open_ledger(ledger) as led:
        return led.open_reservations(dataset)


def _charges(ledger: str, dataset: str) -> list:
    with open_ledger(ledger) as led:
        return [e for e in led.history(dataset) if e.state != "budget-set"]


@pytest.fixture
def ledger(tmp_path):
    return str(tmp_path / "ledger.sqlite")


def test_sigterm_before_the_running_stage_releases_the_reservation(tmp_path, tiny_dataset, ledger):
    with open_ledger(ledger) as led:
        led.set_budget(tiny_dataset, ApproxDP(1.0, 1e-6))
    silent = socket.socket()  # accepts TCP connections, never speaks: the job waits for its scheduler
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    job = tmp_path / "job.toml"
    job.write_text(job_toml(tiny_dataset, str(tmp_path / "never.zarr"), ledger=ledger,
                            scheduler=f"tcp://127.0.0.1:{silent.getsockname()[1]}", extra="timeout = 600\n"))
    proc = subprocess.Popen(dpdist_cmd("run", str(job), "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        [reserved] = _wait_for(lambda: _open_reservations(ledger, tiny_dataset), proc, "the reservation")
        assert reserved.stage == "reserved"
        proc.send_signal(signal.SIGTERM)
        code, doc, err = _finish(proc)
    finally:
        silent.close()
    assert code == 143, err
    [entry] = _charges(ledger, tiny_dataset)
    assert (entry.id, entry.state, entry.outcome) == (reserved.id, "refunded", "refunded-unspent")
    assert err.strip().splitlines() == [
        f"dpdist run: terminated (SIGTERM); no result was written; ledger entry {entry.id} refunded: nothing was spent"]
    assert (doc["status"], doc["exit_code"], doc["error"]["type"]) == ("terminated", 143, "Terminated")
    assert (doc["entry"], doc["spent"], doc["noise_drawn"]) == (entry.id, None, False)
    assert not (tmp_path / "never.zarr").exists()

