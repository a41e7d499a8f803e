"""Real processes for end-to-end tests: ``dask scheduler`` / ``dask worker`` on 127.0.0.1
(free ports), and plain Python subprocesses in a user's environment."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dask_cli() -> list[str]:
    exe = shutil.which("dask", path=os.path.dirname(sys.executable)) or shutil.which("dask")
    return [exe] if exe else [sys.executable, "-m", "dask"]


def user_env(**extra: str) -> dict:
    """The environment of a user's shell: dpdist importable, nothing else of pytest's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DASK_"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_python(args: list[str], *, cwd: Path, stdin: str | None = None, timeout: float = 300,
               env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env or user_env())


def last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def dask_cluster(n_workers: int, *, cwd: Path, log: Path) -> Iterator[tuple[str, list[subprocess.Popen]]]:
    """``dask scheduler`` and ``n_workers`` single-threaded ``dask worker`` processes on
    127.0.0.1 (free ports), workers started in ``cwd``, each in its own process group (so a
    test can kill a worker and its nanny). Yields (address, worker processes)."""
    from distributed import Client

    port = free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = user_env()
    out = open(log, "w")
    procs = [subprocess.Popen([*dask_cli(), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stdout=out, stderr=out, env=env, cwd=cwd,
                              start_new_session=True)]
    workers: list[subprocess.Popen] = []
    try:
        deadline = time.time() + 60
        client = None
        while client is None:
            try:
                client = Client(addr, timeout=2, set_as_default=False)
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        for _ in range(n_workers):
            workers.append(subprocess.Popen(
                [*dask_cli(), "worker", addr, "--nworkers", "1", "--nthreads", "1", "--no-dashboard",
                 "--local-directory", str(cwd / "dask-worker-space")],
                stdout=out, stderr=out, env=env, cwd=cwd, start_new_session=True))
        procs.extend(workers)
        client.wait_for_workers(n_workers, timeout=60)
        client.close()
        yield addr, workers
    finally:
        stop_process_groups(list(reversed(procs)))
        out.close()


def stop_process_groups(procs: list[subprocess.Popen]) -> None:
    """SIGTERM the process group of each of ``procs`` (each started with
    ``start_new_session=True``), in that order; SIGKILL those still there after 20 s."""
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=20)
