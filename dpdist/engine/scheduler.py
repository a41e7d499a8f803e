"""What a ``scheduler`` value means: its check, and the client or local scheduler it resolves to.

Scheduler semantics
-------------------
Every estimator takes ``scheduler`` (CLI ``--scheduler``) with the values below. It stays a
parameter, unlike the time limit and the progress bar (dask configuration keys, see
:mod:`dpdist.engine.runtime`), because it is part of the public signature of
``SparseCovariance``, ``SpectralNorm``, ``SparsePCA`` and ``SecondMoment``, which code outside
the package calls; its default, ``None``, defers to dask as ``dask.compute`` does:

``None`` (the default)
    Resolved the way ``dask.compute`` resolves it (``dask.base.get_scheduler``), and it
    starts no process, so it works in plain scripts, notebooks and ``python -`` pipes:

    1. dask's configured scheduler, ``dask.config.get("scheduler")``, when one is set: a
       local one (``dask.config.set(scheduler="synchronous")``), or ``"dask.distributed"``,
       which a ``distributed.Client`` sets when it becomes the default client (the usual
       ``client = Client(...)``); then that client is used;
    2. otherwise the client that ``distributed.get_client()`` finds without connecting
       anywhere: inside a task on a worker, the worker's client; inside
       ``with client.as_current():``, that client;
    3. otherwise dask's threaded scheduler (one thread per core, one BLAS thread per task).

    A ``Client(..., set_as_default=False)`` is never picked up implicitly: pass it.
``"threads"``, ``"synchronous"`` (``"sync"``), ``"processes"``
    dask's local schedulers.
``"local-cluster"``
    A ``distributed.LocalCluster`` of worker processes sized to the machine (one
    single-threaded worker per core, at most 8), started by the first fit that asks for it
    in this process, reused by the later ones, and closed when the process exits.
``"tcp://host:port"``, ``"host:port"`` (any ``distributed`` address)
    Connect to that running cluster for this fit. The address is checked with
    ``distributed``'s own parsing before anything runs (:func:`check_scheduler_address`).
a ``distributed.Client``, or a ``LocalCluster`` (any ``distributed`` cluster object)
    Use it (a cluster gets a private client for this fit; neither is closed).

Worker processes started with multiprocessing "spawn" (``"local-cluster"``,
``"processes"``) re-import the main script. When that would re-run the fit (a script
without an ``if __name__ == "__main__":`` guard, or code piped to ``python -``),
:class:`~dpdist.exceptions.ValidationError` says so in one line before any process starts.

Every graph of a fit runs on the scheduler it was given: nothing here or in the estimators
calls a ``distributed`` function that looks up a default client (``wait``, ``progress``,
``get_client``) on behalf of an explicit scheduler.

:func:`dpdist.engine.runtime.open_runtime` turns a value into the runtime of one fit.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import sys
import threading
from typing import Any

import dask

from dpdist.engine.main_guard import spawn_problem
from dpdist.exceptions import InfrastructureError, ValidationError

__all__ = [
    "LOCAL_CLUSTER",
    "LOCAL_SCHEDULERS",
    "PROCESS_NAMES",
    "check_scheduler_address",
    "check_spawn",
    "client_address",
    "close_client",
    "connect",
    "distributed_types",
    "first_line",
    "local_cluster_client",
    "local_name",
    "resolve_default",
]

#: dask's local scheduler names (``dask.base.named_schedulers``).
LOCAL_SCHEDULERS = ("synchronous", "sync", "single-threaded", "threads", "threading", "processes", "multiprocessing")
#: The scheduler value that starts a LocalCluster for one fit.
LOCAL_CLUSTER = "local-cluster"
_DISTRIBUTED_NAMES = ("dask.distributed", "distributed")
_SYNC_NAMES = ("synchronous", "sync", "single-threaded")
#: dask's local schedulers that start worker processes.
PROCESS_NAMES = ("processes", "multiprocessing")


def distributed_types() -> tuple:
    try:
        from distributed import Client
        from distributed.deploy import Cluster
    except ImportError:  # pragma: no cover - distributed is a dependency
        return (), ()
    return Client, Cluster


def check_scheduler_address(address: str) -> str:
    """``address`` unchanged when ``distributed`` can connect to it: ``SCHEME://LOCATION`` with
    a scheme ``distributed`` has a backend for (``tcp``, ``tls``, ``inproc``, ``ucx``, ``ws``,
    ``wss``, or one a plugin registers), or ``host:port``, which ``distributed`` reads with its
    default scheme (``distributed.comm.default-scheme``, tcp). The host-based schemes need a
    host and a port. Parsed by ``distributed``'s own functions; nothing is contacted."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import backends, get_backend

    local = "'threads', 'synchronous', 'processes', 'local-cluster'"

    def refuse(problem: str) -> ValidationError:
        return ValidationError(
            f"scheduler {address!r} is not a dask scheduler address: {problem} (expected one of {local}, "
            "or an address like tcp://HOST:PORT or HOST:PORT)"
        )

    scheme, location = parse_address(address)
    try:
        get_backend(scheme)
    except ValueError:
        raise refuse(f"unknown scheme {scheme + '://'!r}; dask knows {', '.join(sorted(backends))}") from None
    if not location.strip():
        raise refuse("no location after the scheme")
    if scheme in ("tcp", "tls", "ws", "wss"):
        try:
            host, port = parse_host_port(location)
        except ValueError as exc:
            problem = str(exc)
            if problem.startswith("invalid literal"):  # int(port)
                problem = f"the port after the last ':' in {location!r} is not a number"
            raise refuse(problem) from None
        if not host:
            raise refuse("no host")
    return address


def check_spawn(what: str) -> None:
    if what == LOCAL_CLUSTER:
        method = dask.config.get("distributed.worker.multiprocessing-method", "spawn")
    else:
        method = dask.config.get("multiprocessing.context", "spawn")
    if method == "fork":
        return
    problem = spawn_problem()
    if problem is not None:
        raise ValidationError(f"scheduler={what!r} starts worker processes with multiprocessing 'spawn'; {problem}")


def local_name(name: Any) -> Any:
    """dask's name for a local scheduler value (callables/executors pass through)."""
    if isinstance(name, str):
        name = name.lower()
        if name in _SYNC_NAMES:
            return "sync"
        if name == "threading":
            return "threads"
        if name == "multiprocessing":
            return "processes"
    return name


def active_client() -> Any:
    """The client ``distributed.get_client()`` finds without connecting anywhere, or None."""
    if "distributed" not in sys.modules:
        return None  # nothing can have created a client
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError):
        return None


def first_line(exc: BaseException, limit: int = 200) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    return (line[:limit] + "...") if len(line) > limit else line


def connect(address: str, timeout: float | None) -> Any:
    from dask.utils import parse_timedelta
    from distributed import Client

    connect = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect", "30s"), default="s")
    if timeout is not None:  # a fit with a shorter limit does not wait longer to connect
        connect = min(connect, timeout)
    try:
        return Client(address, set_as_default=False, timeout=connect)
    except (OSError, TimeoutError) as exc:
        raise InfrastructureError(
            f"cannot reach the dask scheduler at {address} ({type(exc).__name__}: {first_line(exc)}); "
            "no noise was drawn: nothing was spent",
            noise_drawn=False,
        ) from None


class _DropCancelledReconnect(logging.Filter):
    """Drops the traceback ``distributed.client`` logs when a client whose scheduler is gone
    is closed while it tries to reconnect (its reconnect loop is cancelled): the fit's own
    one-line error already says that the scheduler was lost."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


def close_client(client: Any) -> None:
    """Close a client connected for one fit (:func:`connect`, or a private client of a cluster object)."""
    log = logging.getLogger("distributed.client")
    quiet = _DropCancelledReconnect()
    log.addFilter(quiet)
    try:
        client.close()
    finally:
        log.removeFilter(quiet)


_LOCAL_CLUSTER_LOCK = threading.Lock()
_LOCAL_CLUSTER: list = []  # [(cluster, client)] of this process, started on first use


def _close_local_cluster() -> None:
    with _LOCAL_CLUSTER_LOCK:
        while _LOCAL_CLUSTER:
            cluster, client = _LOCAL_CLUSTER.pop()
            with contextlib.suppress(Exception):
                client.close()
            with contextlib.suppress(Exception):
                cluster.close()


def local_cluster_client() -> Any:
    """The client of this process's LocalCluster: started on first use (after the spawn
    check), reused by later fits while it runs, closed when the process exits."""
    from distributed import Client, LocalCluster

    check_spawn(LOCAL_CLUSTER)
    with _LOCAL_CLUSTER_LOCK:
        if _LOCAL_CLUSTER:
            cluster, client = _LOCAL_CLUSTER[0]
            if cluster.status.name == "running" and client.status == "running":
                return client
            _LOCAL_CLUSTER.clear()
            with contextlib.suppress(Exception):
                client.close()
                cluster.close()
        n_workers = max(1, min(os.cpu_count() or 1, 8))
        try:
            cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0")
        except Exception as exc:
            raise InfrastructureError(
                f"could not start a LocalCluster ({type(exc).__name__}: {first_line(exc)}); "
                "no noise was drawn: nothing was spent",
                noise_drawn=False,
            ) from None
        client = Client(cluster, set_as_default=False)
        if not _LOCAL_CLUSTER_EXIT:
            atexit.register(_close_local_cluster)
            _LOCAL_CLUSTER_EXIT.append(True)
        _LOCAL_CLUSTER.append((cluster, client))
        return client


_LOCAL_CLUSTER_EXIT: list = []


def resolve_default() -> Any:
    """What ``scheduler=None`` means now: a client, or a local scheduler for dask.compute."""
    configured = dask.config.get("scheduler", None)
    if configured is None:
        client = active_client()
        return client if client is not None else "threads"
    if isinstance(configured, str) and configured.lower() in _DISTRIBUTED_NAMES:
        client = active_client()
        if client is None:
            raise ValidationError(
                "dask is configured to use the distributed scheduler (dask.config 'scheduler' = "
                f"{configured!r}) but no distributed.Client is active"
            )
        return client
    return local_name(configured)


def client_address(client: Any) -> str:
    try:
        return str(client.scheduler.address)
    except Exception:  # pragma: no cover - a closed client
        return "?"

