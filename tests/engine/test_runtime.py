"""Where graphs run: scheduler choice, the current client, progress output."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import dpdist
from dpdist.engine.runtime import check_scheduler, compute
from dpdist.exceptions import ValidationError


def test_local_schedulers_compute_once_together():
    x = da.arange(10, chunks=3)
    a, b = compute(x.sum(), (x * 2).sum(), scheduler="synchronous")
    assert (a, b) == (45, 90)


def test_bad_scheduler_refused():
    for bad in ("bogus", 3, object()):
        with pytest.raises(ValidationError, match="scheduler"):
            check_scheduler(bad)


def test_progress_is_silent_off_a_terminal_and_shown_when_asked(capsys):
    x = da.ones(100, chunks=10).sum()
    compute(x, scheduler="synchronous")  # pytest's stderr is not a terminal
    assert capsys.readouterr().err == ""
    compute(x, scheduler="synchronous", progress=True)
    assert "100%" in capsys.readouterr().err


def test_the_current_distributed_client_is_used_by_default():
    from distributed import Client, LocalCluster, get_task_stream

    X = np.random.default_rng(0).standard_normal((300, 6))
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with Client(cluster) as client:  # set as the default client
            with get_task_stream(client) as ts:
                est = dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, random_state=0).fit(X)
            assert len(ts.data) > 0  # the tasks ran on this client's cluster
    ref = dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, random_state=0, scheduler="synchronous").fit(X)
    np.testing.assert_allclose(est.covariance_.toarray(), ref.covariance_.toarray(), rtol=1e-12)
