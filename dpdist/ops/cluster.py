"""Where a job's computation runs: a scheduler address, a local scheduler, or a cluster the
job starts itself (dask-jobqueue's ``SLURMCluster`` or a ``LocalCluster``).

Every failure to reach or start the cluster is an
:class:`~dpdist.exceptions.InfrastructureError` raised *before* any data is read (exit code
5; the job's reservation is released).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from dpdist.exceptions import InfrastructureError, ValidationError
from dpdist.ops.job import ClusterSpec, Job

__all__ = ["make_cluster", "scheduler_for"]

#: Seconds to wait for a scheduler or for the first worker when the job file gives no timeout.
DEFAULT_CONNECT_TIMEOUT = 120.0


def _import_slurm_cluster() -> type:
    """``dask_jobqueue.SLURMCluster``, keeping this process's SIGINT handler: importing
    dask_jobqueue installs its own (``dask_jobqueue.runner`` calls ``sys.exit`` on SIGINT), which
    would replace the command line's one-line Ctrl-C handling for the rest of the process."""
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main_thread else None
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError:
        raise ValidationError("[cluster] kind = 'slurm' needs dask-jobqueue: pip install 'dpdist[slurm]'") from None
    finally:
        if main_thread and previous is not None:
            signal.signal(signal.SIGINT, previous)
    return SLURMCluster


def make_cluster(spec: ClusterSpec) -> Any:
    """Start (but do not scale) the cluster ``spec`` describes."""
    options = dict(spec.options)
    if spec.kind == "slurm":
        SLURMCluster = _import_slurm_cluster()
        options.setdefault("scheduler_options", {"dashboard_address": None})
        try:
            return SLURMCluster(**options)
        except TypeError as exc:
            raise ValidationError(f"[cluster.options]: {exc}") from None
    from distributed import LocalCluster

    options.setdefault("dashboard_address", None)
    options.setdefault("threads_per_worker", 1)
    if options.get("processes", True):
        options.setdefault("host", "127.0.0.1")  # never listen beyond this host unless asked
    try:
        return LocalCluster(n_workers=spec.jobs, **options)
    except TypeError as exc:
        raise ValidationError(f"[cluster.options]: {exc}") from None


@contextlib.contextmanager
def scheduler_for(job: Job) -> Iterator[Any]:
    """Yield the ``scheduler`` argument for the job's estimator, connected and ready.

    An address yields a connected ``distributed.Client`` (so an unreachable scheduler fails
    here, before the reservation's running stage); ``[cluster]`` starts the cluster, scales
    it to ``jobs`` and waits for a first worker; a local scheduler name passes through.
    """
    timeout = job.timeout or DEFAULT_CONNECT_TIMEOUT
    address = job.scheduler
    if job.cluster is None and (address is None or "://" not in address and address != "local-cluster"):
        yield address
        return
    from distributed import Client

    with contextlib.ExitStack() as stack:
        try:
            if job.cluster is not None:
                cluster = stack.enter_context(make_cluster(job.cluster))
                if job.cluster.kind == "slurm":
                    cluster.scale(jobs=job.cluster.jobs)
                client = stack.enter_context(Client(cluster, set_as_default=False))
                client.wait_for_workers(1, timeout=timeout)
            elif address == "local-cluster":
                cluster = stack.enter_context(make_cluster(ClusterSpec("local", jobs=2)))
                client = stack.enter_context(Client(cluster, set_as_default=False))
            else:
                client = stack.enter_context(Client(address, timeout=timeout, set_as_default=False))
                client.wait_for_workers(1, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            where = address if job.cluster is None else f"the {job.cluster.kind} cluster"
            raise InfrastructureError(f"cannot reach {where}: {type(exc).__name__}: {exc}") from None
        yield client
