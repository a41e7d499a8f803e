"""Where one fit runs: its :class:`Runtime` (a client or a local scheduler, a deadline, and
whether noise has been drawn), and the single ``compute`` of a release.

The values ``scheduler`` accepts are described in :mod:`dpdist.engine.scheduler`.

Time limits and failures
------------------------
The dask configuration key ``dpdist.timeout`` (seconds; default :data:`DEFAULT_TIMEOUT`, one
day, sized for unattended jobs; ``None`` or ``math.inf`` for no limit; environment variable
``DASK_DPDIST__TIMEOUT``) bounds a whole fit: ``with dask.config.set({"dpdist.timeout": 600}):
est.fit(X)``. It is read when a fit opens its runtime. On a ``distributed`` cluster a fit also fails
when the cluster has had no worker for ``dask.config.get("dpdist.no-workers-timeout")``
seconds (default :data:`NO_WORKERS_TIMEOUT`; environment variable
``DASK_DPDIST__NO_WORKERS_TIMEOUT``), instead of waiting forever for workers that are
gone. Both raise :class:`~dpdist.exceptions.InfrastructureError`, as do an unreachable
scheduler, a lost connection, a worker killed while running a task, and storage errors met
while reading the input; its ``noise_drawn`` says whether any noise had been drawn (then
the budget counts as spent) and its message says which. On any failure or interruption
(Ctrl-C) the fit's futures are cancelled. With a local scheduler the limit is checked
between tasks (a running task is not interrupted).

A worker lost while others remain is not a failure: ``distributed`` recomputes its tasks
(and the results it held) elsewhere, and since every noise value is a pure function of the
fit's seed and its position (:class:`~dpdist.privacy.noise.lattice.LatticeField`), a recomputed task
draws the same noise: the release is the one an undisturbed run gives. When the scheduler
is lost, nothing can tell what its workers ran since the last look, so a step that draws
noise counts as having drawn it.

A progress bar is shown (on standard error) as the dask configuration key ``dpdist.progress``
says: ``None`` (the default) only when standard error is a terminal, ``True`` always, ``False``
never (:mod:`dpdist.engine.progress`).

These keys' defaults are registered with ``dask.config.update_defaults`` when this module is
imported, as ``distributed`` registers its own; :func:`check_runtime_config` validates them
(every estimator calls it before reading any data).
"""

from __future__ import annotations

import contextlib
import math
import numbers
import shutil
import sys
import tempfile
import time
from typing import Any, Iterator, Sequence

import dask

import dpdist.engine.scheduler as schedulers
from dpdist.engine.blas import single_threaded_blas
from dpdist.engine.progress import check_progress, show_progress, start_progress_bar
from dpdist.engine.scheduler import first_line
from dpdist.exceptions import DpdistError, InfrastructureError, ValidationError

__all__ = [
    "DEFAULT_TIMEOUT",
    "NO_WORKERS_TIMEOUT",
    "Runtime",
    "check_runtime_config",
    "check_scheduler",
    "check_timeout",
    "client_for",
    "compute",
    "open_runtime",
    "unoptimized_delayed",
]

#: Default time limit of a fit (``dpdist.timeout``), in seconds: one day. A job that has not
#: finished in a day on the cluster it was given is stuck; set ``dpdist.timeout`` to None for
#: no limit.
DEFAULT_TIMEOUT = 86400.0
#: Default seconds a ``distributed`` cluster may have no worker before a fit fails.
NO_WORKERS_TIMEOUT = 30.0

dask.config.update_defaults(
    {"dpdist": {"timeout": DEFAULT_TIMEOUT, "progress": None, "no-workers-timeout": NO_WORKERS_TIMEOUT}}
)
_POLL_SECONDS = 1.0
_STORAGE_PACKAGES = ("zarr", "numcodecs", "fsspec", "s3fs", "gcsfs", "adlfs", "obstore")


def check_scheduler(scheduler: Any) -> Any:
    """Validate a ``scheduler`` argument without connecting to anything (the accepted values
    are described in :mod:`dpdist.engine.scheduler`; a :class:`Runtime` is accepted too)."""
    if scheduler is None or isinstance(scheduler, Runtime):
        return scheduler
    if isinstance(scheduler, str):
        if scheduler in schedulers.LOCAL_SCHEDULERS or scheduler == schedulers.LOCAL_CLUSTER:
            return scheduler
        return schedulers.check_scheduler_address(scheduler)
    client_t, cluster_t = schedulers.distributed_types()
    if isinstance(scheduler, client_t) or isinstance(scheduler, cluster_t):
        return scheduler
    raise ValidationError(
        f"scheduler must be None, a string, a distributed.Client or a LocalCluster, got {scheduler!r}"
    )


def check_timeout(timeout: Any, name: str = "timeout") -> float | None:
    """``None`` or ``math.inf`` (no limit) or a number of seconds > 0 (returned as a float, or
    None for no limit); bools, strings and NaN are refused (``name`` says what was given)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout > 0:
        raise ValidationError(f"{name} must be None, math.inf or a number of seconds > 0, got {timeout!r}")
    return float(timeout) if math.isfinite(timeout) else None


def configured_timeout() -> float | None:
    """The fit's time limit in seconds (None: no limit): the dask configuration key
    ``dpdist.timeout``, validated."""
    return check_timeout(dask.config.get("dpdist.timeout", DEFAULT_TIMEOUT), "dask config dpdist.timeout")


def check_runtime_config() -> None:
    """Validate the dask configuration keys a fit reads (``dpdist.timeout``, ``dpdist.progress``);
    raises ValidationError naming the key. Reads no data: a fit calls it first."""
    configured_timeout()
    check_progress(dask.config.get("dpdist.progress", None))


def _no_workers_timeout() -> float:
    value = dask.config.get("dpdist.no-workers-timeout", NO_WORKERS_TIMEOUT)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValidationError(
            f"dask config dpdist.no-workers-timeout must be a number of seconds, got {value!r}"
        ) from None
    return value


def _is_storage_error(exc: BaseException) -> bool:
    """An error raised in the storage libraries (zarr, codecs, fsspec): its traceback, remote
    frames included, passes through them. Connection errors of the client do not."""
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename.replace("\\", "/")
        if any(f"/{pkg}/" in filename for pkg in _STORAGE_PACKAGES):
            return True
        tb = tb.tb_next
    return False


class Runtime:
    """Where one fit runs: a ``distributed`` client or a local dask scheduler, a deadline,
    and whether any noise has been drawn yet (for honest failure messages).

    Built by :func:`open_runtime`; a ``Runtime`` is itself a valid ``scheduler`` value for
    :func:`compute` and the engine's functions, so that every step of a fit shares it.

    Attributes
    ----------
    client : distributed.Client or None
        None for a local dask scheduler.
    local : str or callable or None
        The local scheduler given to ``dask.compute`` when ``client`` is None.
    timeout : float or None
        The fit's limit in seconds.
    noise_drawn : bool
        True once a graph that draws noise has completed.
    """

    def __init__(self, client: Any, local: Any, timeout: float | None, description: str):
        self.client = client
        self.local = local
        self.timeout = timeout
        self.description = description
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.noise_drawn = False
        self._scratch: str | None = None

    def __repr__(self) -> str:
        return f"<dpdist Runtime on {self.description}>"

    # ---- scratch space ---------------------------------------------------------------
    def scratch_dir(self) -> str:
        """A private temporary directory (mode 0700, made by :func:`tempfile.mkdtemp` under
        dask's ``temporary-directory`` setting, else the system default) for intermediate state
        of this fit that depends on the data and must not be held in memory (per-row scales of
        SecondMoment's levels). It is made on first use, on this machine (local schedulers
        only), and removed with everything in it when the :func:`open_runtime` context that
        made this runtime exits, whether the fit succeeded or not. Nothing in it is an output.
        """
        if self._scratch is None:
            self._scratch = tempfile.mkdtemp(prefix="dpdist-scratch-", dir=dask.config.get("temporary-directory", None))
        return self._scratch

    def remove_scratch(self) -> None:
        """Remove the scratch directory (if one was made) and everything in it."""
        path, self._scratch = self._scratch, None
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)

    # ---- failures -------------------------------------------------------------------

    def failure(self, message: str, *, noised: bool = False, started: bool = True) -> InfrastructureError:
        """An :class:`InfrastructureError` whose message ends with what was spent."""
        if self.noise_drawn:
            drawn, note = True, "noise had been drawn by an earlier step of this fit: its budget counts as spent"
        elif noised and started:
            drawn, note = True, (
                "noise may have been drawn on the workers in the failed step (nothing was released): "
                "the budget counts as spent"
            )
        else:
            drawn, note = False, "no noise was drawn: nothing was spent"
        exc = InfrastructureError(f"{message}; {note}", noise_drawn=drawn)
        exc.spent_noted = True  # its message already says what was spent (see translate)
        return exc

    def _remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _timed_out(self, noised: bool, started: bool) -> InfrastructureError:
        return self.failure(
            f"the computation did not finish within timeout={self.timeout:g} s on {self.description}",
            noised=noised, started=started,
        )

    def translate(self, exc: BaseException, *, noised: bool, started: bool = True) -> BaseException:
        """The exception to raise for ``exc`` met while computing (others pass through).

        A failed read of the input (an :class:`InfrastructureError` raised in a task by
        :mod:`dpdist.data.validation`, or an error from the storage libraries) reports no
        noise drawn in the failed step: every dpdist mechanism draws noise only on
        statistics of all rows, which a step that could not read a chunk never completes.
        """
        if isinstance(exc, InfrastructureError):
            if exc.noise_drawn or getattr(exc, "spent_noted", False):
                return exc  # e.g. this runtime's own time limit, raised inside a local computation
            return self.failure(str(exc), noised=False)
        if isinstance(exc, DpdistError):
            return exc
        try:
            from distributed import client as _client
            from distributed.scheduler import KilledWorker
        except ImportError:  # pragma: no cover
            _client, KilledWorker = None, ()  # type: ignore[assignment,misc]
        # distributed.wait raises FuturesCancelledError when futures are cancelled (for
        # instance when the client loses its scheduler); a future's result, FutureCancelledError
        cancelled = tuple(getattr(_client, n) for n in ("FutureCancelledError", "FuturesCancelledError")
                          if hasattr(_client, n))
        name = type(exc).__name__
        if isinstance(exc, KilledWorker):
            return self.failure(f"workers died while running a task on {self.description} ({name})", noised=noised)
        if cancelled and isinstance(exc, cancelled):
            if "scheduler-connection-lost" in str(exc):
                return self.failure(f"lost the connection to the scheduler of {self.description} ({name})",
                                    noised=noised)
            return self.failure(f"the computation was cancelled on {self.description} ({name})", noised=noised)
        if _is_storage_error(exc):
            return self.failure(f"reading the input failed during the computation ({name}: {first_line(exc)})")
        if self.client is not None and isinstance(exc, (TimeoutError, OSError)):
            return self.failure(
                f"lost the connection to the scheduler of {self.description} ({name}: {first_line(exc)})",
                noised=noised, started=started,
            )
        return exc

    # ---- running graphs ----------------------------------------------------------------

    def compute(self, *collections: Any, progress: bool | None = None, noised: bool = True) -> tuple:
        """Compute ``collections`` once, together, and return their values.

        ``noised`` says whether the graphs draw noise (conservatively True): it decides
        what a failure reports as spent.
        """
        if self.client is None:
            return self._local(collections, progress, noised)
        futures = self.client.compute(list(collections))
        return tuple(self._gather(futures, progress, noised))

    def persist(self, collections: Sequence[Any], *, noised: bool = False, optimize_graph: bool = True) -> list:
        """Compute ``collections`` and keep their values where they were computed: futures
        on a cluster (waited for; they never travel to this process), values locally.
        ``optimize_graph=False`` skips dask's graph optimisation, for graphs built from
        already optimised parts (it is repeated at every call otherwise)."""
        if self.client is None:
            return list(self._local(tuple(collections), False, noised, optimize_graph))
        futures = self.client.compute(list(collections), optimize_graph=optimize_graph)
        self._wait(futures, False, noised)
        return futures

    def submit(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` where the arguments live (a future on a cluster)."""
        if self.client is None:
            return fn(*args, **kwargs)
        return self.client.submit(fn, *args, pure=False, **kwargs)

    def result(self, obj: Any, *, noised: bool = True) -> Any:
        """The value of a future (or a local value) brought to this process."""
        if self.client is None or not hasattr(obj, "key") or not hasattr(obj, "status"):
            return obj
        return self._gather([obj], False, noised)[0]

    def _local(self, collections: tuple, progress: bool | None, noised: bool, optimize_graph: bool = True) -> tuple:
        from dask.callbacks import Callback

        started = [False]
        runtime = self

        class _Guard(Callback):  # this computation only (not a global callback)
            def _pretask(self, key, dsk, state):
                started[0] = True
                remaining = runtime._remaining()
                if remaining is not None and remaining <= 0:
                    raise runtime._timed_out(noised, True)

        callbacks = [*Callback.active, _Guard()._callback]
        if show_progress(progress):
            from dask.diagnostics import ProgressBar

            callbacks.append(ProgressBar(out=sys.stderr)._callback)
        with single_threaded_blas(self.local in ("threads", "sync")):
            try:
                out = dask.compute(*collections, scheduler=self.local, callbacks=callbacks,
                                   optimize_graph=optimize_graph)
            except Exception as exc:
                translated = self.translate(exc, noised=noised, started=started[0])
                if translated is exc:
                    raise
                raise translated from None
        if noised:
            self.noise_drawn = True
        return out

    def _workers(self) -> int:
        return len(self.client.nthreads())

    def _wait(self, futures: list, progress: bool | None, noised: bool) -> None:
        """Wait for ``futures`` under the deadline and the no-worker watchdog; raise the
        first task error. Cancels the futures on any failure (Ctrl-C included)."""
        from distributed import wait

        grace = _no_workers_timeout()
        # "started": a worker was there since the futures were submitted, so a task may have
        # run (and drawn noise). Looked at right away: a worker lost before the first poll
        # below may already have run a task of this step.
        try:
            started = self._workers() > 0
        except Exception as exc:  # the scheduler is gone
            self._cancel(futures)
            raise self.translate(exc, noised=noised) from None
        empty_since = None
        bar = start_progress_bar(self.client, futures) if show_progress(progress) else None
        try:
            while True:
                remaining = self._remaining()
                step = _POLL_SECONDS if remaining is None else max(0.01, min(_POLL_SECONDS, remaining))
                try:
                    with self.client.as_current():
                        wait(futures, timeout=step)
                    break
                except TimeoutError:
                    pass
                except Exception as exc:  # futures cancelled: the scheduler is gone, or cancelled them
                    translated = self.translate(exc, noised=noised)
                    if translated is exc:
                        raise
                    raise translated from None
                try:
                    n_workers = self._workers()
                except Exception as exc:
                    # the scheduler is gone: its workers may have run tasks since the last look
                    raise self.translate(exc, noised=noised) from None
                if n_workers:
                    started, empty_since = True, None
                else:
                    empty_since = time.monotonic() if empty_since is None else empty_since
                    if time.monotonic() - empty_since >= grace:
                        raise self.failure(
                            f"{self.description} has had no workers for {grace:g} s (all workers lost?)",
                            noised=noised, started=started,
                        )
                remaining = self._remaining()
                if remaining is not None and remaining <= 0:
                    raise self._timed_out(noised, started)
            for f in futures:
                if f.status == "error":
                    exc = f.exception()
                    exc = exc.with_traceback(f.traceback())
                    translated = self.translate(exc, noised=noised, started=True)
                    raise translated from None
                if f.status == "cancelled":
                    raise self.failure(f"the computation was cancelled on {self.description}", noised=noised)
        except BaseException:
            self._cancel(futures)
            raise
        finally:
            if bar is not None:  # let the bar draw its last line, then stop it
                with contextlib.suppress(Exception):
                    bar.result(timeout=2.0)
                bar.cancel()
        if noised:
            self.noise_drawn = True

    def _cancel(self, futures: list) -> None:
        pending = list({f.key: f for f in futures if f.status == "pending"}.values())
        if pending:
            with contextlib.suppress(Exception):
                self.client.cancel(pending)

    def _gather(self, futures: list, progress: bool | None, noised: bool) -> list:
        self._wait(futures, progress, noised)
        try:
            return self.client.gather(futures)
        except BaseException as exc:
            self._cancel(futures)
            translated = self.translate(exc, noised=noised) if isinstance(exc, Exception) else exc
            if translated is exc:
                raise
            raise translated from None


@contextlib.contextmanager
def open_runtime(scheduler: Any = None) -> Iterator[Runtime]:
    """The :class:`Runtime` of one fit on ``scheduler`` (values as in :mod:`dpdist.engine.scheduler`),
    with the time limit of the dask configuration key ``dpdist.timeout``.

    A client connected here (an address, a cluster object) is closed on exit; the
    ``"local-cluster"`` cluster lives on for the process's later fits. Futures are not
    tracked here: each is released when the fit drops it (a failed wait cancels its own).
    A :class:`Runtime` passes through unchanged (its own deadline applies). The runtime's
    scratch directory (:meth:`Runtime.scratch_dir`) is removed on exit.
    """
    if isinstance(scheduler, Runtime):
        yield scheduler
        return
    scheduler = check_scheduler(scheduler)
    timeout = configured_timeout()
    client_t, cluster_t = schedulers.distributed_types()
    with contextlib.ExitStack() as stack:
        if scheduler is None:
            resolved = schedulers.resolve_default()
            if isinstance(resolved, str) and resolved in schedulers.PROCESS_NAMES:
                schedulers.check_spawn(resolved)
            if client_t and isinstance(resolved, client_t):
                rt = Runtime(resolved, None, timeout,
                             f"the active client's cluster {schedulers.client_address(resolved)}")
            else:
                rt = Runtime(None, resolved, timeout, f"dask's local {resolved!r} scheduler")
        elif isinstance(scheduler, str) and scheduler in schedulers.LOCAL_SCHEDULERS:
            name = schedulers.local_name(scheduler)
            if name == "processes":
                schedulers.check_spawn(scheduler)
            rt = Runtime(None, name, timeout, f"dask's local {name!r} scheduler")
        elif scheduler == schedulers.LOCAL_CLUSTER:
            client = schedulers.local_cluster_client()
            rt = Runtime(client, None, timeout, f"this process's LocalCluster at {schedulers.client_address(client)}")
        elif isinstance(scheduler, str):
            client = schedulers.connect(scheduler, timeout)
            stack.callback(schedulers.close_client, client)
            rt = Runtime(client, None, timeout, f"the cluster at {scheduler}")
        elif isinstance(scheduler, client_t):
            rt = Runtime(scheduler, None, timeout, f"the cluster at {schedulers.client_address(scheduler)}")
        else:  # a cluster object
            from distributed import Client

            client = Client(scheduler, set_as_default=False)
            stack.callback(schedulers.close_client, client)
            rt = Runtime(client, None, timeout, f"the cluster at {schedulers.client_address(client)}")
        stack.callback(rt.remove_scratch)  # first out: before any client this context closes
        yield rt


@contextlib.contextmanager
def client_for(scheduler: Any) -> Iterator[Any]:
    """Yield a ``distributed.Client`` for ``scheduler``, or None for a local dask scheduler
    (the same resolution as :func:`open_runtime`)."""
    with open_runtime(scheduler) as rt:
        yield rt.client


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


def compute(
    *collections: Any,
    scheduler: Any = None,
    progress: bool | None = None,
    noised: bool = True,
) -> tuple:
    """Compute dask ``collections`` once, together, on the chosen scheduler.

    Each release must be computed exactly once (a noised graph computed twice is two releases
    and twice the spend): callers pass every output of a mechanism in one call. ``scheduler``
    as in :mod:`dpdist.engine.scheduler`; the time limit is ``dpdist.timeout`` of dask's
    configuration (see the module docstring; a :class:`Runtime` brings its own deadline).
    ``progress=False`` shows no bar for this computation (an auxiliary pass); None follows
    ``dpdist.progress``. ``noised`` says whether the graphs draw noise, for the failure message.
    """
    with open_runtime(scheduler) as rt:
        return rt.compute(*collections, progress=progress, noised=noised)
