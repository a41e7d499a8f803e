"""Fits that cannot finish: a cluster that loses its last worker, a fit past its timeout.
Each must raise InfrastructureError saying whether noise was drawn, instead of hanging."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time

import dask
import dask.array as da
import numpy as np
import pytest

import dpdist
from tests.clusters import dask_cluster, user_env

pytestmark = pytest.mark.slow

SLOW_FIT = """\
import json, math, sys, time
import dask, dask.array as da, numpy as np, dpdist

def rows(block_id=None):  # 2,000 rows a task, a quarter of a second each: the job takes ~10 s
    time.sleep(0.25)
    return np.random.default_rng(block_id[0]).standard_normal((2000, 5))

X = da.map_blocks(rows, chunks=((2000,) * 40, (5,)), dtype=float)
# rows taken as mean-zero: FriendlyCore's first pass is the first step, and it draws no noise
est = dpdist.SpectralNorm(2, 200.0, 1e-6, gap=0.5, sigma=math.sqrt(5), n_batches=40, tau=0.6,
                          random_state=0, scheduler=sys.argv[1], assume_centered=True)
try:
    with dask.config.set({"dpdist.timeout": 120}):
        est.fit(X)
    print(json.dumps({"error": None}))
except dpdist.InfrastructureError as exc:
    print(json.dumps({"error": type(exc).__name__, "noise_drawn": exc.noise_drawn, "message": str(exc)}))
"""


def test_a_fit_that_loses_its_last_worker_fails_and_spends_nothing(tmp_path):
    from distributed import Client

    (tmp_path / "w").mkdir()
    (tmp_path / "slow_fit.py").write_text(SLOW_FIT)
    with dask_cluster(1, cwd=tmp_path / "w", log=tmp_path / "cluster.log") as (addr, workers):
        proc = subprocess.Popen([sys.executable, "slow_fit.py", addr], cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=user_env(DASK_DPDIST__NO_WORKERS_TIMEOUT="2"))
        try:
            with Client(addr, set_as_default=False) as watcher:
                deadline = time.time() + 120
                while not any(watcher.processing().values()):  # the fit's first pass has started
                    assert time.time() < deadline and proc.poll() is None, proc.communicate()
                    time.sleep(0.1)
                os.killpg(workers[0].pid, signal.SIGKILL)  # the worker and its nanny
                killed = time.monotonic()
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    elapsed = time.monotonic() - killed
    result = json.loads(out.strip().splitlines()[-1])
    assert result["error"] == "InfrastructureError", err[-2000:]
    assert "no workers for 2 s" in result["message"] and "\n" not in result["message"]
    # pass 1 of FriendlyCore draws no noise: nothing was spent
    assert result["noise_drawn"] is False and "nothing was spent" in result["message"]
    assert elapsed < 60  # 2 s of grace, not forever


def _slow_after(n_fast: int, seconds: float):
    """Row blocks that come fast for the first ``n_fast`` reads, then slowly (one process)."""
    calls = {"n": 0}
    lock = threading.Lock()

    def rows(block_id=None):
        with lock:
            calls["n"] += 1
            slow = calls["n"] > n_fast
        if slow:
            time.sleep(seconds)
        return np.random.default_rng(block_id[0]).standard_normal((1000, 3))

    return da.map_blocks(rows, chunks=((1000,) * 20, (3,)), dtype=float)


def test_a_fit_past_its_timeout_fails_without_spending():
    X = _slow_after(0, 0.2)  # 20 x 0.2 s on two threads: 2 s, past the 0.5 s limit
    est = dpdist.SpectralNorm(2, 200.0, 1e-6, gap=0.5, sigma=math.sqrt(5), n_batches=20, tau=0.6, random_state=0,
                              scheduler="threads", assume_centered=True)  # no private mean first
    t0 = time.monotonic()
    with dask.config.set({"dpdist.timeout": 0.5}), pytest.raises(dpdist.InfrastructureError,
                                                                  match=r"timeout=0\.5 s") as info:
        est.fit(X)
    assert time.monotonic() - t0 < 5 and info.value.noise_drawn is False and not hasattr(est, "norm_")


def test_a_timeout_after_the_private_mean_says_the_budget_is_spent():
    """SpectralNorm centres by default: its private mean (one fast pass) is released first, so a
    timeout in FriendlyCore's first pass counts the budget as spent."""
    X = _slow_after(20, 0.5)  # FriendlyCore's first pass: 20 x 0.5 s on two threads, past the 3 s limit
    est = dpdist.SpectralNorm(2, 200.0, 1e-6, gap=0.5, sigma=math.sqrt(5), n_batches=20, tau=0.6, random_state=0,
                              scheduler="threads")
    with dask.config.set({"dpdist.timeout": 3.0}), pytest.raises(dpdist.InfrastructureError,
                                                                  match="earlier step") as info:
        est.fit(X)
    assert info.value.noise_drawn is True and "counts as spent" in str(info.value)


def test_a_timeout_after_a_released_step_says_the_budget_is_spent():
    # the radius histogram (one pass, fast) is released; the next pass is slow and times out
    X = _slow_after(20, 0.5)  # second pass: 20 x 0.5 s on two threads, past the 3 s limit
    est = dpdist.SecondMoment(1.0, m=5, lambda_min=0.5, random_state=0, scheduler="threads")
    with dask.config.set({"dpdist.timeout": 3.0}), pytest.raises(dpdist.InfrastructureError,
                                                                  match="earlier step") as info:
        est.fit(X)
    assert info.value.noise_drawn is True and "counts as spent" in str(info.value)
