"""Progress at a terminal. CI never runs on one, so standard error is a pseudo-terminal here:
in-process (``os.openpty``) for every long command, and one ``dpdist demo`` run as a separate
process on a pty (``pty.fork``), the README's first command as a user types it."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import numpy as np
import pytest
import zarr

from dpdist.cli.main import main
from tests.cli._helpers import run_on_a_pty


@contextlib.contextmanager
def terminal_stderr():
    """sys.stderr on the slave side of a new pty; yields a list that receives what was written."""
    master, slave = os.openpty()
    stream = os.fdopen(slave, "w", buffering=1)
    out: list[bytes] = []

    def drain():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the slave side was closed
                return
            if not data:
                return
            out.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    saved, sys.stderr = sys.stderr, stream
    text: list[str] = []
    try:
        yield text
    finally:
        sys.stderr = saved
        stream.close()
        reader.join(timeout=10)
        os.close(master)
        text.append(b"".join(out).decode(errors="replace"))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("progress")
    x = np.random.default_rng(0).standard_normal((3_000, 6))
    z = zarr.create_array(str(root / "x.zarr"), shape=x.shape, chunks=(1_000, 6), dtype="f8")
    z[...] = x
    return str(root / "x.zarr")


def _argv(command: str, data: str, out: str) -> list[str]:
    sync = ["--scheduler", "synchronous"]
    priv = ["--epsilon", "1", "--delta", "1e-6"]
    return {
        "generate": ["generate", out, "--n-samples", "3000", "--n-features", "4", "--chunk-rows", "1000", *sync],
        "covariance": ["covariance", data, "--k", "2", *priv, "--sigma", "1", *sync, "--output", out],
        "pca": ["pca", data, "--method", "expmech", "--k", "2", *priv, "--sigma", "1", *sync, "--output", out],
        "norm": ["norm", data, "--k", "2", *priv, "--gap", "0.5", "--sigma", "1", "--n-batches", "40", *sync,
                 "--output", out],
        "second-moment": ["second-moment", data, "--rho", "1", "--m", "20", "--radius", "50", "--lambda-min", "0.5",
                          *sync, "--output", out],
        "demo": ["demo", "--n-samples", "3000", "--n-features", "6", *sync],
    }[command]


def _line(command: str) -> str:
    return f"dpdist {command}: ["


@pytest.mark.parametrize("command", ["generate", "covariance", "pca", "norm", "second-moment", "demo"])
def test_progress_line_at_a_terminal_and_flags(data, tmp_path, capsys, command):
    """Shown at a terminal, and with --progress anywhere; --no-progress silences it everywhere
    (the library's own bars too). norm rejects at this size (exit 4) after its passes ran."""
    ok = (0, 4) if command == "norm" else (0,)
    with terminal_stderr() as seen:
        assert main(_argv(command, data, str(tmp_path / "a"))) in ok
    assert _line(command) in seen[0] and "100%" in seen[0], seen[0]
    with terminal_stderr() as seen:
        assert main([*_argv(command, data, str(tmp_path / "b")), "--no-progress"]) in ok
    assert "%" not in seen[0] and "[#" not in seen[0]
    capsys.readouterr()
    assert main(_argv(command, data, str(tmp_path / "c"))) in ok  # not a terminal
    assert _line(command) not in capsys.readouterr().err
    assert main([*_argv(command, data, str(tmp_path / "d")), "--progress"]) in ok
    assert _line(command) in capsys.readouterr().err


def test_progress_line_on_a_distributed_cluster(data, tmp_path, capsys, local_cluster):
    address = local_cluster.scheduler.address
    assert main(["covariance", data, "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1",
                 "--scheduler", address, "--progress", "--output", str(tmp_path / "o.zarr")]) == 0
    err = capsys.readouterr().err
    assert "dpdist covariance: [" in err and "100%" in err


def test_demo_at_a_terminal(tmp_path):
    """`dpdist demo`, the README's first command, on a terminal crashed with "No clients found"
    (distributed.progress on a client that is not the default). As typed, on a pty, in its own
    process (on its default scheduler: a LocalCluster before the runtime branch, threads after)."""
    rc, out, _ = run_on_a_pty([sys.executable, "-m", "dpdist.cli.main", "demo", "--n-samples", "20000",
                               "--n-features", "8"], timeout=240)
    assert rc == 0, out
    assert "Traceback" not in out and "No clients found" not in out
    assert "dpdist demo: [" in out and "for the whole demo (basic composition)" in out
