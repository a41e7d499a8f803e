"""A real cluster: a ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import dpdist
import dpdist.data.synthetic

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dask_cli() -> list[str]:
    exe = shutil.which("dask", path=os.path.dirname(sys.executable)) or shutil.which("dask")
    return [exe] if exe else [sys.executable, "-m", "dask"]


@pytest.fixture
def cluster_address(tmp_path):
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    log = open(tmp_path / "cluster.log", "w")
    procs = [subprocess.Popen([*_dask_cli(), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stdout=log, stderr=log, env=env)]
    try:
        from distributed import Client

        deadline = time.time() + 60
        client = None
        while client is None:
            try:
                client = Client(addr, timeout=2, set_as_default=False)
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        for _ in range(2):
            procs.append(subprocess.Popen([*_dask_cli(), "worker", addr, "--nworkers", "1", "--nthreads", "1",
                                           "--no-dashboard", "--local-directory", str(tmp_path / "w")],
                                          stdout=log, stderr=log, env=env))
        client.wait_for_workers(2, timeout=60)
        client.close()
        yield addr
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()


def test_cli_against_a_separate_scheduler_and_workers(cluster_address, tmp_path):
    data = str(tmp_path / "m1.zarr")
    dpdist.data.synthetic.make_model1(10, 3, random_state=0).write_zarr(data, 30_000, chunk_rows=7_000, scheduler="sync")
    out = tmp_path / "cov.zarr"
    cmd = [sys.executable, "-m", "dpdist.cli.main", "covariance", data, "--k", "3", "--epsilon", "1",
           "--delta", "1e-5", "--clip", "3", "--random-state", "11", "--scheduler", cluster_address,
           "--tile-size", "4", "--output", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    remote = dpdist.load_result(out)
    local = dpdist.SparseCovariance(3, 1.0, 1e-5, clip=3.0, random_state=11, scheduler="synchronous").fit(data)
    assert (remote.covariance != 0).toarray().tolist() == (local.covariance_ != 0).toarray().tolist()
    np.testing.assert_allclose(remote.covariance.toarray(), local.covariance_.toarray(), rtol=1e-10, atol=1e-13)
