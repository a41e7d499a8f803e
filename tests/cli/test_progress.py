"""Progress at a terminal. CI never runs on one, so standard error is a pseudo-terminal here:
in-process (``os.openpty``) for every long command, and one ``dpdist demo`` run as a separate
process on a pty (``pty.fork``), the README's first command as a user types it."""

from __future__ import annotations

import contextlib
import os
import re
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
    assert "%" not in capsys.readouterr().err
    assert main([*_argv(command, data, str(tmp_path / "d")), "--progress"]) in ok
    _check_plain_lines(capsys.readouterr().err, command)


PLAIN = re.compile(r"dpdist (?P<cmd>[\w-]+): (?P<what>[^:]+): "
                   r"(?:(?P<pct>\d+)% \| (?P<t>\d+\.\d)s|done in (?P<done>\d+\.\d)s)")


def _check_plain_lines(err: str, command: str) -> list[re.Match]:
    """Progress for logs: nothing redrawn, one line per stage or pass start, per 10% and per
    stage end, percentages rising by tens within each stage or pass, ending at 100%."""
    assert "\r" not in err and "[#" not in err
    found = [m for line in err.splitlines() if (m := PLAIN.fullmatch(line)) and m["cmd"] == command]
    assert found, err
    last: dict = {}
    for m in found:
        if m["pct"] is not None:
            pct = int(m["pct"])
            assert pct % 10 == 0 and pct > last.get(m["what"], -1), err
            last[m["what"]] = pct
    assert last and all(p == 100 for p in last.values()), err
    assert len(found) <= 12 * len(last) + 8
    return found


def test_plain_progress_names_the_stages_and_shares_the_summary_clock(capsys):
    assert main(["demo", "--n-samples", "3000", "--n-features", "6", "--scheduler", "synchronous", "--progress"]) == 0
    out, err = capsys.readouterr()
    found = _check_plain_lines(err, "demo")
    stages = [m["what"] for m in found if m["done"] is not None]
    assert stages == ["writing the data", "PrivCov", "Wang-Xu Gaussian", "thresholded"]
    done = {m["what"]: m["done"] for m in found if m["done"] is not None}
    assert f"written in {done['writing the data']}s" in out
    assert f"in {done['PrivCov']}s" in out.split("released  :")[1].splitlines()[0]


def test_progress_flag_at_a_terminal_writes_plain_lines(data, tmp_path):
    with terminal_stderr() as seen:
        assert main([*_argv("generate", data, str(tmp_path / "g")), "--progress"]) == 0
    text = seen[0].replace("\r\n", "\n")
    _check_plain_lines(text, "generate")
    assert "dpdist generate: writing the samples: done in " in text


def test_progress_line_on_a_distributed_cluster(data, tmp_path, capsys, local_cluster):
    address = local_cluster.scheduler.address
    assert main(["covariance", data, "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1",
                 "--scheduler", address, "--progress", "--output", str(tmp_path / "o.zarr")]) == 0
    _check_plain_lines(capsys.readouterr().err, "covariance")


def test_demo_at_a_terminal(tmp_path):
    """`dpdist demo`, the README's first command, on a terminal crashed with "No clients found"
    (distributed.progress on a client that is not the default). As typed, on a pty, in its own
    process (on its default scheduler: a LocalCluster before the runtime branch, threads after)."""
    rc, out, _ = run_on_a_pty([sys.executable, "-m", "dpdist.cli.main", "demo", "--n-samples", "20000",
                               "--n-features", "8"], timeout=240)
    assert rc == 0, out
    assert "Traceback" not in out and "No clients found" not in out
    assert "dpdist demo: [" in out and "for the whole demo (basic composition)" in out


def test_a_plain_progress_line_never_goes_back_within_a_pass():
    """On a cluster the share of finished tasks can fall within a pass (finished tasks are
    forgotten) or across a pass boundary the poll missed: the log keeps rising, then ends at
    100%."""
    import io

    from dpdist.cli._progress import _Line

    out = io.StringIO()
    line = _Line(out, "dpdist covariance", plain=True)
    line.begin_stage("PrivCov", 0.0)
    line.passes = 1
    for done in (0, 7, 2, 0, 8, 10):
        line.draw(done, 10)
    pcts = [int(x.split(": ")[2].split("%")[0]) for x in out.getvalue().splitlines()]
    assert pcts == [0, 70, 80, 100]
