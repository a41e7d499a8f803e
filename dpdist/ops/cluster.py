"""Where a job's computation runs: the job's scheduler (an address, ``"local-cluster"``, a
local dask scheduler) or a cluster the job starts itself (dask-jobqueue's ``SLURMCluster``
or a ``LocalCluster``), opened as one :class:`~dpdist.engine.runtime.Runtime` for the fit.

Connecting, the LocalCluster of ``"local-cluster"``, the time limit and the no-worker
watchdog are the runtime's (:func:`~dpdist.engine.runtime.open_runtime`); this module only
starts the cluster of a ``[cluster]`` table. Every failure to reach or start the cluster is
an :class:`~dpdist.exceptions.InfrastructureError` raised *before* any data is read (exit
code 5; the job's reservation is released).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from dpdist.engine.runtime import Runtime, open_runtime
from dpdist.exceptions import InfrastructureError, ValidationError
from dpdist.ops.job import ClusterSpec, Job

__all__ = ["make_cluster", "scheduler_for"]

#: Seconds to wait for the first worker of a cluster the job starts, when the job file gives no timeout.
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
def scheduler_for(job: Job) -> Iterator[Runtime]:
    """The :class:`~dpdist.engine.runtime.Runtime` the job's estimator runs on (its
    ``scheduler``), connected and ready; closed (with any cluster started here) on exit.

    ``[scheduler].address`` goes to :func:`~dpdist.engine.runtime.open_runtime` as it is (so
    an unreachable scheduler fails here, before the reservation's running stage);
    ``[cluster]`` starts the cluster, scales it to ``jobs`` and waits (at most
    ``[scheduler].timeout`` or :data:`DEFAULT_CONNECT_TIMEOUT` seconds) for a first worker.
    The runtime's deadline (the dask configuration key ``dpdist.timeout``, which the runner
    sets from ``[scheduler].timeout``: :meth:`~dpdist.ops.job.Job.runtime_config`) bounds the
    whole fit.
    """
    with contextlib.ExitStack() as stack:
        if job.cluster is None:
            yield stack.enter_context(open_runtime(job.scheduler))
            return
        try:
            cluster = stack.enter_context(make_cluster(job.cluster))
            if job.cluster.kind == "slurm":
                cluster.scale(jobs=job.cluster.jobs)
            rt = stack.enter_context(open_runtime(cluster))
            rt.client.wait_for_workers(1, timeout=job.timeout or DEFAULT_CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            raise InfrastructureError(f"cannot start the {job.cluster.kind} cluster: {type(exc).__name__}: {exc}; "
                                      "no noise was drawn: nothing was spent") from None
        yield rt
