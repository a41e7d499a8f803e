"""Ctrl-C at a terminal while dask runs tasks: one line, exit 130, nothing written, no wait.

The child process is the ``dpdist`` entry point on a pseudo-terminal; the parent types ^C
into the terminal, which signals the child's whole process group (LocalCluster workers too)
exactly as a user's Ctrl-C does. The fit is replaced by tasks that sleep for ten minutes, so
the command is surely mid-computation, and a process that waited for its running tasks
could not end within the test's limit.
"""

from __future__ import annotations

import os
import select
import sys
import time

import numpy as np
import pytest
import zarr

from tests.cli._helpers import LOCAL_CLUSTER_ARGS

CHILD = """
import sys, time
import dask
import dpdist
from dpdist.cli.main import console_main

def fit(self, X, y=None):
    print("COMPUTING", file=sys.stderr, flush=True)
    dask.compute(*[dask.delayed(time.sleep, pure=False)(600) for _ in range(4)], scheduler=self.scheduler)

dpdist.SparseCovariance.fit = fit
sys.argv[0] = "dpdist"
console_main()
"""


@pytest.mark.parametrize("scheduler", [["--scheduler", "threads"], LOCAL_CLUSTER_ARGS], ids=["threads", "local-cluster"])
def test_ctrl_c_is_one_line_and_exit_130(tmp_path, scheduler):
    import pty

    x = np.random.default_rng(0).standard_normal((100, 3))
    zarr.create_array(str(tmp_path / "x.zarr"), shape=x.shape, dtype="f8")[...] = x
    out = tmp_path / "o.zarr"
    argv = [sys.executable, "-c", CHILD, "covariance", str(tmp_path / "x.zarr"), "--k", "1", "--epsilon", "1",
            "--delta", "1e-6", "--sigma", "1", *scheduler, "--no-progress", "--output", str(out)]
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execv(sys.executable, argv)
    text, sent, deadline = b"", None, time.monotonic() + 240
    while time.monotonic() < deadline:
        if sent is None and b"COMPUTING" in text:
            time.sleep(1.0)  # the tasks are running
            os.write(fd, b"\x03")
            sent = time.monotonic()
            deadline = min(deadline, sent + 60)  # the tasks sleep 600 s: no waiting for them
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            text += data
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    output = text.decode(errors="replace")
    assert sent is not None, output
    assert os.waitstatus_to_exitcode(status) == 130, output
    after = output.split("COMPUTING", 1)[1].replace("^C", "").strip().splitlines()
    assert after == ["dpdist covariance: interrupted; nothing was written"], output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.zarr"]
