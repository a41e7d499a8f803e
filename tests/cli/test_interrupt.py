"""Ctrl-C at a terminal while dask runs tasks: one line, exit 130, nothing written, no wait.

The child process is the ``dpdist`` entry point on a pseudo-terminal; the parent types ^C
into the terminal, which signals the child's whole process group (LocalCluster workers too)
exactly as a user's Ctrl-C does. The fit is replaced by tasks that sleep for ten minutes, so
the command is surely mid-computation, and a process that waited for its running tasks
could not end within the test's limit.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest
import zarr

from tests.cli._helpers import LOCAL_CLUSTER_ARGS, run_on_a_pty

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
    x = np.random.default_rng(0).standard_normal((100, 3))
    zarr.create_array(str(tmp_path / "x.zarr"), shape=x.shape, dtype="f8")[...] = x
    out = tmp_path / "o.zarr"
    argv = [sys.executable, "-c", CHILD, "covariance", str(tmp_path / "x.zarr"), "--k", "1", "--epsilon", "1",
            "--delta", "1e-6", "--sigma", "1", *scheduler, "--no-progress", "--output", str(out)]

    def interrupt_when_computing(text: bytes, fd: int) -> bool:
        if b"COMPUTING" not in text:
            return False
        time.sleep(1.0)  # the tasks are running
        os.write(fd, b"\x03")
        return True

    # the tasks sleep 600 s: the process must end well before them
    rc, output, sent = run_on_a_pty(argv, timeout=240, react=interrupt_when_computing, after=60)
    assert sent, output
    assert rc == 130, output
    after = output.split("COMPUTING", 1)[1].replace("^C", "").strip().splitlines()
    assert after == ["dpdist covariance: interrupted; nothing was written"], output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.zarr"]
