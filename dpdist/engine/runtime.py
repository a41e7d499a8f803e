"""Where graphs run: the scheduler choice and the single ``compute`` of a release.

``scheduler`` (the same parameter on every estimator) may be

- ``None``: the current ``distributed.Client`` if there is one, otherwise a
  ``LocalCluster`` sized to the machine, started for this call and closed after it (the
  embedded default);
- ``"synchronous"``, ``"threads"`` or ``"processes"``: dask's local schedulers;
- an address such as ``"tcp://127.0.0.1:8786"``: connect to that existing cluster;
- a ``distributed.Client``.

A progress bar is shown only when standard error is a terminal.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterator

import dask

from dpdist.exceptions import ValidationError

__all__ = [
    "LOCAL_SCHEDULERS",
    "check_scheduler",
    "client_for",
    "compute",
    "single_threaded_blas",
    "unoptimized_delayed",
]

LOCAL_SCHEDULERS = ("synchronous", "sync", "single-threaded", "threads", "processes")


def check_scheduler(scheduler: Any) -> Any:
    """Validate a ``scheduler`` argument without connecting to anything."""
    if scheduler is None or isinstance(scheduler, str):
        if isinstance(scheduler, str) and scheduler not in LOCAL_SCHEDULERS and "://" not in scheduler:
            raise ValidationError(
                f"scheduler must be None, one of {LOCAL_SCHEDULERS}, an address like "
                f"'tcp://host:port', or a distributed.Client; got {scheduler!r}"
            )
        return scheduler
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - distributed is a dependency
        Client = ()  # type: ignore[assignment]
    if isinstance(scheduler, Client):
        return scheduler
    raise ValidationError(f"scheduler must be None, a string or a distributed.Client, got {scheduler!r}")


def unoptimized_delayed(x: Any) -> Any:
    """A dask array as a single ``Delayed`` *without* graph optimisation (other values pass
    through). Optimising renames the data-loading keys, and two collections computed together
    would then read the same chunks twice."""
    import dask.array as da

    if isinstance(x, da.Array):
        parts = x.to_delayed(optimize_graph=False)
        if parts.size != 1:
            raise ValueError("unoptimized_delayed expects a single-chunk array")
        return parts.ravel()[0]
    return x


def _current_client():
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


@contextlib.contextmanager
def client_for(scheduler: Any) -> Iterator[Any]:
    """Yield a ``distributed.Client`` for ``scheduler``, or None for a local dask scheduler."""
    scheduler = check_scheduler(scheduler)
    if isinstance(scheduler, str) and scheduler in LOCAL_SCHEDULERS:
        yield None
        return
    from distributed import Client, LocalCluster

    if isinstance(scheduler, Client):
        yield scheduler
        return
    if isinstance(scheduler, str):
        with Client(scheduler, set_as_default=False) as client:
            yield client
        return
    current = _current_client()
    if current is not None:
        yield current
        return
    n_workers = max(1, min(os.cpu_count() or 1, 8))
    with LocalCluster(
        n_workers=n_workers, threads_per_worker=1, dashboard_address=None, processes=True
    ) as cluster, Client(cluster, set_as_default=False) as client:
        yield client


@contextlib.contextmanager
def single_threaded_blas(active: bool = True) -> Iterator[None]:
    """One BLAS thread per task while dask's thread pool runs tasks concurrently.

    OpenBLAS's own threads on top of dask's threads oversubscribe the cores (on a loaded
    2-core machine the per-batch products of SparsePCA ran about 4x slower). ``distributed``
    workers already start with one BLAS thread (the nanny sets ``OPENBLAS_NUM_THREADS=1``).
    """
    if not active:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _show_progress(progress: bool | None) -> bool:
    if progress is None:  # dask.config key "dpdist.progress" (the dpdist command sets False)
        progress = dask.config.get("dpdist.progress", None)
    if progress is not None:
        return bool(progress)
    return sys.stderr.isatty()


def compute(*collections: Any, scheduler: Any = None, progress: bool | None = None) -> tuple:
    """Compute dask ``collections`` once, together, on the chosen scheduler.

    Each release must be computed exactly once (STYLE.md principle 8): callers pass every
    output of a mechanism in one call.
    """
    show = _show_progress(progress)
    with client_for(scheduler) as client:
        if client is None:
            name = "sync" if scheduler in ("synchronous", "single-threaded") else scheduler
            with single_threaded_blas(name == "threads"), contextlib.ExitStack() as stack:
                if show:
                    from dask.diagnostics import ProgressBar

                    stack.enter_context(ProgressBar(out=sys.stderr))
                return dask.compute(*collections, scheduler=name)
        futures = client.compute(list(collections))
        if show:
            from distributed import progress as dprogress

            dprogress(futures)
        return tuple(client.gather(futures))
