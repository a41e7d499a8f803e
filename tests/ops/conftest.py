"""Fixtures of the operations tests: a real PostgreSQL server, tiny datasets, job files."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import uuid

import numpy as np
import pytest

PG_ENV = "DPDIST_TEST_POSTGRES_URL"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin() -> str | None:
    found = shutil.which("pg_ctl")
    if found:
        return os.path.dirname(os.path.realpath(found))
    cands = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return os.path.dirname(cands[-1]) if cands else None


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL server for the test run: $DPDIST_TEST_POSTGRES_URL if set, else one started
    here from the distribution's binaries (as user postgres when we are root), on 127.0.0.1 and
    a free port, in a temporary directory; stopped at the end of the session."""
    pytest.importorskip("psycopg", reason="psycopg not installed (pip install 'dpdist[postgres]')")
    if os.environ.get(PG_ENV):
        yield os.environ[PG_ENV]
        return
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: install the distribution's "
                    "postgresql package (.ci/run does) or set " + PG_ENV)
    user = None
    if os.geteuid() == 0:  # postgres refuses to run as root
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server as")
    tmp = tempfile.mkdtemp(prefix="dpdist-ledger-pg-")
    kw = {}
    if user is not None:
        os.chown(tmp, user.pw_uid, user.pw_gid)
        kw = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    data = os.path.join(tmp, "data")
    port = free_port()
    subprocess.run([os.path.join(bindir, "initdb"), "-D", data, "-A", "trust", "-U", "dpdist", "--no-sync",
                    "-E", "UTF8"], check=True, capture_output=True, **kw)
    opts = f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100"
    pg_ctl = os.path.join(bindir, "pg_ctl")
    subprocess.run([pg_ctl, "-D", data, "-o", opts, "-w", "-t", "60", "-l", os.path.join(tmp, "log"), "start"],
                   check=True, capture_output=True, **kw)
    try:
        yield f"postgresql://dpdist@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], capture_output=True, **kw)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def pg_ledger_url(postgres_url):
    """A fresh, empty schema on the test server, selected through libpq's ``options``."""
    import psycopg

    schema = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in postgres_url else "?"
    yield f"{postgres_url}{sep}options=-csearch_path%3D{schema}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def write_dataset(path: str, n: int = 2000, d: int = 6, seed: int = 0, chunk_rows: int = 500) -> str:
    """A small Zarr array of Gaussian rows (public synthetic data)."""
    import zarr

    X = np.random.default_rng(seed).standard_normal((n, d))
    arr = zarr.create_array(path, shape=X.shape, chunks=(chunk_rows, d), dtype="f8")
    arr[...] = X
    return path


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory) -> str:
    return write_dataset(str(tmp_path_factory.mktemp("data") / "tiny.zarr"))


def job_toml(dataset: str, output: str, *, name: str = "tiny-job", epsilon: float = 0.1, delta: float = 1e-8,
             scheduler: str = "synchronous", extra: str = "", ledger: str | None = None,
             estimator: str | None = None) -> str:
    """A job file text for PrivCov on ``dataset``."""
    ledger_table = f'[ledger]\nurl = "{ledger}"\n' if ledger else ""
    est = estimator or textwrap.dedent(f"""\
        [estimator]
        name = "SparseCovariance"
        [estimator.params]
        k = 2
        epsilon = {epsilon!r}
        delta = {delta!r}
        sigma = 1.0
        """)
    return (f'name = "{name}"\n[dataset]\nurl = "{dataset}"\nname = "tiny"\n{ledger_table}{est}'
            f'[output]\nurl = "{output}"\n[scheduler]\naddress = "{scheduler}"\n{extra}')


def dpdist_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "dpdist.cli.main", *args]


def run_dpdist(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``dpdist ARGS`` in a subprocess (the path schedulers use)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(dpdist_cmd(*args), capture_output=True, text=True, env=full_env, timeout=timeout)


@pytest.fixture(autouse=True)
def _no_default_ledger(monkeypatch, tmp_path):
    """No test touches the user's default ledger: $XDG_DATA_HOME points into the test's
    directory and $DPDIST_LEDGER is unset."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("DPDIST_LEDGER", raising=False)
