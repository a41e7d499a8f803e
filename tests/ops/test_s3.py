"""Input and output Zarr stores on s3:// against a real S3 API: moto's server mode on 127.0.0.1.

Credentials come only from the standard environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_ENDPOINT_URL); the tests search every written object, the ledger and the job's output
for them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

pytest.importorskip("s3fs", reason="s3fs not installed (pip install 'dpdist[s3]')")
pytest.importorskip("moto.server", reason="moto[server] not installed (the test extra)")
boto3 = pytest.importorskip("boto3")

from dpdist.data.publish import result_checksum, stage_result, target_exists  # noqa: E402
from dpdist.data.results import load_result  # noqa: E402
from dpdist.exceptions import InfrastructureError, ValidationError  # noqa: E402
from dpdist.ops.job import load_job  # noqa: E402
from dpdist.ops.ledger import SQLiteLedger, open_ledger  # noqa: E402
from dpdist.ops.runner import run_job  # noqa: E402
from dpdist.privacy.budget import ApproxDP  # noqa: E402
from tests.ops.conftest import dpdist_cmd, free_port, job_toml  # noqa: E402

KEY_ID = "AKIADPDISTTEST" + uuid.uuid4().hex[:6].upper()
SECRET = "dpdist-secret-" + uuid.uuid4().hex
BUCKET = "warehouse"


@pytest.fixture(scope="module")
def s3_env():
    """moto's S3 server in its own process on 127.0.0.1 (free port); the AWS environment."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() - t0 > 60:
                    raise RuntimeError("moto server did not start")
                time.sleep(0.1)
        env = {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        import fsspec

        fsspec.filesystem("s3").clear_instance_cache()  # no client made before the env was set
        try:
            yield env
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def s3_dataset(s3_env):
    import zarr

    url = f"s3://{BUCKET}/data/tiny.zarr"
    X = np.random.default_rng(1).standard_normal((2000, 6))
    arr = zarr.create_array(url, shape=X.shape, chunks=(500, 6), dtype="f8")
    arr[...] = X
    return url


def _all_objects(prefix: str = "") -> dict[str, bytes]:
    s3 = boto3.client("s3")
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for obj in page.get("Contents", []):
            out[obj["Key"]] = s3.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read()
    return out


def _file_bytes(path: str) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            with open(path + suffix, "rb") as f:
                data += f.read()
    return data


def test_job_reads_and_writes_s3_with_credentials_from_the_environment(s3_env, s3_dataset, tmp_path):
    ledger_path = str(tmp_path / "ledger.sqlite")
    with open_ledger(ledger_path) as led:
        led.set_budget(s3_dataset, ApproxDP(1.0, 1e-6))
    job = tmp_path / "job.toml"
    job.write_text(job_toml(s3_dataset, f"s3://{BUCKET}/releases/cov-{{run}}.zarr", epsilon=0.5,
                            ledger=ledger_path, scheduler="threads"))
    proc = subprocess.run(dpdist_cmd("run", str(job), "--json"), capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DPDIST_LOG_LEVEL": "DEBUG"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    assert res["output"].startswith(f"s3://{BUCKET}/releases/cov-")
    # the released result reads back from S3, and the ledger's checksum is the stored objects'
    loaded = load_result(res["output"])
    assert loaded.covariance.shape == (6, 6) and loaded.metadata["job"]["reservation"] == res["reservation"]
    with open_ledger(ledger_path) as led:
        [entry] = [e for e in led.history(s3_dataset) if e.state == "committed"]
    assert entry.checksum == res["checksum"] == result_checksum(res["output"])
    # credentials appear nowhere: result objects, ledger, command output
    written = _all_objects("releases/")
    assert written and any(k.endswith("zarr.json") for k in written)
    for secret in (SECRET, KEY_ID):
        assert all(secret.encode() not in body for body in written.values())
        assert secret.encode() not in _file_bytes(ledger_path)
        assert secret not in proc.stdout and secret not in proc.stderr


def test_unpublished_objects_are_not_a_result(s3_env):
    target = f"s3://{BUCKET}/staging-check/r.zarr"
    staged = stage_result(target, {"mechanism": "m", "privacy": None}, {"a": np.arange(4.0)})
    staged.prepare()
    keys = _all_objects("staging-check/")
    assert keys and "staging-check/r.zarr/zarr.json" not in keys  # everything but the marker
    assert not target_exists(target)
    with pytest.raises(ValidationError):
        load_result(target)
    staged.publish()
    assert target_exists(target)
    assert result_checksum(target) == staged.checksum
    np.testing.assert_array_equal(load_result(target).a, np.arange(4.0))
    with pytest.raises(ValidationError, match="already exists"):
        stage_result(target, {"mechanism": "m"}, {"a": np.zeros(1)})


def test_leftovers_of_a_killed_attempt_are_replaced(s3_env):
    target = f"s3://{BUCKET}/leftover/r.zarr"
    s3 = boto3.client("s3")
    s3.put_object(Bucket=BUCKET, Key="leftover/r.zarr/old/c/0", Body=b"half-written")
    staged = stage_result(target, {"mechanism": "m"}, {"a": np.ones(3)})
    staged.prepare()
    staged.publish()
    assert "leftover/r.zarr/old/c/0" not in _all_objects("leftover/")
    assert result_checksum(target) == staged.checksum


class FailingCommitLedger(SQLiteLedger):
    """A ledger whose database goes away at commit time."""

    def commit(self, entry_id, **kw):
        raise InfrastructureError("ledger unreachable at commit", noise_drawn=True)


def test_failed_commit_publishes_nothing(s3_env, s3_dataset, tmp_path):
    path = str(tmp_path / "ledger.sqlite")
    led = FailingCommitLedger(path)
    led.set_budget(s3_dataset, ApproxDP(1.0, 1e-6))
    job = tmp_path / "job.toml"
    job.write_text(job_toml(s3_dataset, f"s3://{BUCKET}/failed/cov.zarr", scheduler="threads"))
    with pytest.raises(InfrastructureError, match="unreachable at commit"):
        run_job(load_job(job), ledger=led)
    assert _all_objects("failed/") == {}  # prepared objects removed, nothing published
    [entry] = [e for e in led.history(s3_dataset) if e.state != "budget-set"]
    assert entry.state == "reserved" and entry.stage == "running"  # recovery will count it as spent
