"""Where graphs run: scheduler resolution, time limits, failures, progress output."""

from __future__ import annotations

import _thread
import threading
import time

import dask
import dask.array as da
import numpy as np
import pytest

import dpdist
from dpdist.engine.main_guard import _line_is_guarded, spawn_problem
from dpdist.engine.runtime import DEFAULT_TIMEOUT, check_scheduler, check_timeout, compute, open_runtime
from dpdist.exceptions import InfrastructureError, ValidationError


def _slow_sum(n_tasks: int, seconds: float):
    """A graph of ``n_tasks`` tasks of ``seconds`` each, summed."""

    def block(x):
        time.sleep(seconds)
        return x

    return da.ones(n_tasks, chunks=1).map_blocks(block, dtype=float).sum()


def _scheduler_forgets_everything(client, within: float = 2.0) -> bool:
    """Whether the scheduler holds no task within ``within`` seconds (the work cancelled
    takes several seconds to run)."""
    deadline = time.time() + within
    while time.time() < deadline:
        if client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def inproc_cluster():
    """A one-worker distributed cluster in this process (threads), never the default client."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with Client(cluster, set_as_default=False) as client:
            yield cluster, client


def test_local_schedulers_compute_once_together():
    x = da.arange(10, chunks=3)
    a, b = compute(x.sum(), (x * 2).sum(), scheduler="synchronous")
    assert (a, b) == (45, 90)


def test_bad_scheduler_refused():
    for bad in ("bogus", 3, object(), "dask.distributed"):
        with pytest.raises(ValidationError, match="scheduler"):
            check_scheduler(bad)


@pytest.mark.parametrize("address", ["127.0.0.1:8786", "[::1]:8786", "scheduler.example:8786", "tcp://h:1",
                                     "tls://h:1", "inproc://h/1/2", "ws://h:1", "wss://h:1"])
def test_scheduler_addresses_dask_accepts_are_accepted(address):
    from distributed.comm.addressing import normalize_address, parse_host_port

    assert check_scheduler(address) == address
    if not address.startswith("inproc"):
        parse_host_port(normalize_address(address))  # distributed reads it the same way


@pytest.mark.parametrize(("address", "problem"), [
    ("tpc://127.0.0.1:8786", "unknown scheme 'tpc://'; dask knows inproc, tcp, tls"),
    ("http://h:8786", "unknown scheme 'http://'"),
    ("tcp://localhost", "missing port number"),
    ("localhost", "missing port number"),
    ("tcp://:8786", "no host"),
    ("tcp://", "no location"),
    ("tcp://h:port", "the port after the last ':' in 'h:port' is not a number"),
])
def test_scheduler_addresses_dask_refuses_are_refused_naming_them(address, problem):
    with pytest.raises(ValidationError) as info:
        check_scheduler(address)
    assert f"scheduler {address!r} is not a dask scheduler address: {problem}" in str(info.value)
    assert info.value.exit_code == 2


def test_a_host_port_address_is_handed_to_distributed():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(InfrastructureError, match=f"cannot reach the dask scheduler at 127.0.0.1:{port}"):
            compute(da.ones(4, chunks=2).sum(), scheduler=f"127.0.0.1:{port}")


def test_bad_timeout_refused():
    assert check_timeout(None) is None and check_timeout(2) == 2.0
    assert check_timeout(float("inf")) is None  # math.inf: no limit, as None (CLI --timeout none)
    for bad in (0, -1.0, float("-inf"), float("nan"), True, "10", [1]):
        with pytest.raises(ValidationError, match="timeout"):
            check_timeout(bad)


def test_the_runtime_config_keys_have_registered_defaults():
    # registered with dask.config.update_defaults when the engine is imported
    assert dask.config.get("dpdist.timeout") == DEFAULT_TIMEOUT == 86400.0
    assert dask.config.get("dpdist.progress") is None
    assert dask.config.get("dpdist.no-workers-timeout") == 30.0


def _slow_rows(n_blocks: int, seconds: float):
    """``n_blocks`` blocks of 20 rows x 3 columns, each taking ``seconds`` to read."""

    def rows(block_id=None):
        time.sleep(seconds)
        return np.random.default_rng(block_id[0]).standard_normal((20, 3))

    return da.map_blocks(rows, chunks=((20,) * n_blocks, (3,)), dtype=float)


def test_a_fit_under_a_tiny_configured_timeout_times_out_and_spends_nothing():
    est = dpdist.baselines.ThresholdedCovariance(threshold=0.1, scheduler="synchronous")
    with dask.config.set({"dpdist.timeout": 0.05}), pytest.raises(InfrastructureError) as info:
        est.fit(_slow_rows(20, 0.02))  # 0.4 s of reading, past the 0.05 s limit
    assert str(info.value) == ("the computation did not finish within timeout=0.05 s on dask's local 'sync' "
                               "scheduler; no noise was drawn: nothing was spent")
    assert info.value.noise_drawn is False and not hasattr(est, "covariance_")
    with dask.config.set({"dpdist.timeout": None}):  # no limit
        assert est.fit(_slow_rows(3, 0.0)).covariance_.shape == (3, 3)


class _ReadCounter:
    def __init__(self):
        self.count = 0

    def rows(self, block):
        self.count += 1
        return block


@pytest.mark.parametrize("key,bad", [("dpdist.timeout", 0), ("dpdist.timeout", -1.0), ("dpdist.timeout", "600"),
                                     ("dpdist.timeout", True), ("dpdist.timeout", float("nan")),
                                     ("dpdist.progress", "yes"), ("dpdist.progress", 1)])
def test_an_invalid_runtime_config_is_refused_naming_the_key_before_any_data_is_read(key, bad):
    reads = _ReadCounter()
    X = da.ones((40, 3), chunks=(20, 3)).map_blocks(reads.rows, dtype=float, meta=np.empty((0, 0)))
    est = dpdist.SparseCovariance(2, 1.0, 1e-5, sigma=1.0, scheduler="synchronous")
    with dask.config.set({key: bad}):
        with pytest.raises(ValidationError, match=f"^dask config {key} must be None") as info:
            est.fit(X)
        assert repr(bad) in str(info.value)
        with pytest.raises(ValidationError, match=f"dask config {key}"):  # the engine refuses it too
            compute(X.sum(), scheduler="synchronous")
    assert reads.count == 0 and not hasattr(est, "covariance_")


def test_the_progress_config_reaches_the_engine_through_a_fit(capsys):
    X = np.random.default_rng(0).standard_normal((40, 3))
    est = dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0, scheduler="synchronous")
    est.fit(X)  # pytest's stderr is not a terminal: no bar by default
    assert capsys.readouterr().err == ""
    with dask.config.set({"dpdist.progress": True}):
        est.fit(X)
    assert "100%" in capsys.readouterr().err
    with dask.config.set({"dpdist.progress": False}):
        compute(da.ones(10, chunks=5).sum(), scheduler="synchronous")
    assert capsys.readouterr().err == ""


def test_a_fit_runs_on_the_scheduler_dask_config_names():
    """scheduler=None (the default) follows ``dask.config.set(scheduler=...)``: the synchronous
    scheduler runs every task in the calling thread, the threaded one in its pool."""
    threads = set()

    def rows(block):
        threads.add(threading.get_ident())
        return block

    X = da.from_array(np.random.default_rng(0).standard_normal((400, 4)), chunks=(50, 4)).map_blocks(rows,
                                                                                                      dtype=float)
    with dask.config.set(scheduler="synchronous"):
        dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0).fit(X)
    assert threads == {threading.get_ident()}
    threads.clear()
    with dask.config.set(scheduler="threads"):
        dpdist.SparseCovariance(2, 1.0, 1e-5, clip=2.0).fit(X)
    assert threading.get_ident() not in threads and threads


def test_default_is_the_threaded_scheduler_and_starts_nothing():
    with open_runtime(None) as rt:
        assert rt.client is None and rt.local == "threads"


def test_default_follows_dask_config():
    with dask.config.set(scheduler="synchronous"):
        with open_runtime(None) as rt:
            assert rt.client is None and rt.local == "sync"


def test_a_client_that_is_not_the_default_is_not_picked_up(inproc_cluster):
    _, client = inproc_cluster
    with open_runtime(None) as rt:
        assert rt.client is None
    with client.as_current(), open_runtime(None) as rt:
        assert rt.client is client  # distributed.get_client() semantics: the current client


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


def test_sparse_pca_runs_on_a_client_that_is_not_the_default(inproc_cluster):
    # Session.persist_each used to call distributed.wait without the session's client:
    # "ValueError: No clients found"
    from distributed import get_task_stream

    _, client = inproc_cluster
    x = np.random.default_rng(1).standard_normal((12000, 5))
    x[:, :2] = x[:, :2] @ np.linalg.cholesky([[3.0, 2.0], [2.0, 3.0]]).T  # a spike: the private tests pass
    kw = dict(gap=0.5, sigma=5**0.5, n_batches=60, tau=0.6, random_state=4)
    with get_task_stream(client) as ts:
        a = dpdist.SpectralNorm(2, 200.0, 1e-6, scheduler=client, **kw).fit(x)
    assert len(ts.data) > 0
    b = dpdist.SpectralNorm(2, 200.0, 1e-6, scheduler="synchronous", **kw).fit(x)
    assert a.norm_ == pytest.approx(b.norm_, rel=1e-12)


def test_a_cluster_object_gets_its_own_client(inproc_cluster):
    cluster, _ = inproc_cluster
    x = da.arange(10, chunks=3)
    assert compute(x.sum(), scheduler=cluster) == (45,)


def test_progress_is_silent_off_a_terminal_and_shown_when_asked(capsys):
    x = da.ones(100, chunks=10).sum()
    compute(x, scheduler="synchronous")  # pytest's stderr is not a terminal
    assert capsys.readouterr().err == ""
    compute(x, scheduler="synchronous", progress=True)
    assert "100%" in capsys.readouterr().err


def test_progress_on_a_client_that_is_not_the_default(inproc_cluster, capsys):
    # distributed.progress looks up the default client: "ValueError: No clients found"
    _, client = inproc_cluster
    assert compute(da.ones(100, chunks=10).sum(), scheduler=client, progress=True) == (100.0,)
    captured = capsys.readouterr()
    assert "100% Completed" in captured.err and captured.out == ""


def test_timeout_on_threads_reports_whether_noise_was_drawn():
    with dask.config.set({"dpdist.timeout": 0.3}), pytest.raises(InfrastructureError, match="timeout=0.3 s") as info:
        compute(_slow_sum(40, 0.05), scheduler="threads", noised=False)
    assert info.value.noise_drawn is False and "nothing was spent" in str(info.value)
    with dask.config.set({"dpdist.timeout": 0.3}), pytest.raises(InfrastructureError) as info:
        compute(_slow_sum(40, 0.05), scheduler="threads", noised=True)
    assert info.value.noise_drawn is True and "counts as spent" in str(info.value)


def test_a_failure_after_a_released_step_says_noise_was_drawn():
    with open_runtime("threads") as rt:
        rt.compute(da.ones(4, chunks=2).sum(), noised=True)
        err = rt.failure("boom", noised=False)
    assert err.noise_drawn is True and "earlier step" in str(err)


def test_timeout_on_a_cluster_cancels_the_futures(inproc_cluster):
    _, client = inproc_cluster
    with dask.config.set({"dpdist.timeout": 0.5}), pytest.raises(InfrastructureError, match="timeout") as info:
        compute(_slow_sum(50, 0.1), scheduler=client, noised=False)
    assert info.value.noise_drawn is False
    assert _scheduler_forgets_everything(client)  # nothing left of the failed fit (50 x 0.1 s of work)


def test_a_cluster_without_workers_fails_instead_of_hanging(inproc_cluster):
    cluster, client = inproc_cluster

    def lose_the_worker():
        time.sleep(0.5)
        cluster.scale(0)

    threading.Thread(target=lose_the_worker, daemon=True).start()
    t0 = time.monotonic()
    with dask.config.set({"dpdist.no-workers-timeout": 1.0}):
        with pytest.raises(InfrastructureError, match="no workers") as info:
            compute(_slow_sum(100, 0.1), scheduler=client, noised=False)
    assert time.monotonic() - t0 < 30 and info.value.noise_drawn is False


def test_ctrl_c_cancels_the_futures(inproc_cluster):
    import signal

    _, client = inproc_cluster
    # a terminal's default: a process started in the background of a non-interactive shell
    # inherits an ignored SIGINT, and interrupt_main then does nothing
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            compute(_slow_sum(50, 0.1), scheduler=client)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert _scheduler_forgets_everything(client)


def test_an_unreachable_scheduler_is_an_infrastructure_error():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        address = f"tcp://127.0.0.1:{port}"
        with pytest.raises(InfrastructureError, match=f"cannot reach the dask scheduler at {address}") as info:
            compute(da.ones(4, chunks=2).sum(), scheduler=address)
    assert info.value.noise_drawn is False and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("source", "line", "guarded"),
    [
        ("import x\nfit()\n", 2, False),
        ('import x\nif __name__ == "__main__":\n    fit()\n', 3, True),
        ("import x\nif '__main__' == __name__ and True:\n    a = 1\n    fit()\n", 4, True),
        ('if __name__ == "__main__":\n    pass\nfit()\n', 3, False),
        ('if __name__ != "__main__":\n    fit()\n', 2, False),
    ],
)
def test_main_guard_detection(source, line, guarded):
    assert _line_is_guarded(source, line) is guarded


def test_pytest_itself_may_start_worker_processes():
    assert spawn_problem() is None  # `python -m pytest`: the main module is pytest.__main__


def test_single_threaded_blas_limits_and_restores_with_one_cached_controller():
    # one BLAS thread inside (nested uses share the limit), the original count after; the
    # library scan (threadpoolctl.ThreadpoolController) is made once, not at every compute
    import threadpoolctl

    from dpdist.engine import blas

    def blas_threads():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    compute(da.ones(10, chunks=5).sum(), scheduler="threads")  # first use: imports, one scan
    controller = blas._BLAS_CONTROLLER
    assert controller is not None
    for _ in range(3):
        with blas.single_threaded_blas():
            with blas.single_threaded_blas():
                assert set(blas_threads()) <= {1}
            assert set(blas_threads()) <= {1}
        assert blas_threads() == before
    compute(da.ones(10, chunks=5).sum(), scheduler="threads")
    assert blas._BLAS_CONTROLLER is controller  # nothing new was imported: one scan served every call
