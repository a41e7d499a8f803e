"""Where graphs run: the scheduler, the time limit, and the single ``compute`` of a release.

Scheduler semantics
-------------------
Every estimator takes ``scheduler`` (CLI ``--scheduler``) with these values:

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

Time limits and failures
------------------------
``timeout`` (seconds; default :data:`DEFAULT_TIMEOUT`, one day, sized for unattended jobs;
``None`` for no limit) bounds a whole fit. On a ``distributed`` cluster a fit also fails
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
fit's seed and its position (:class:`~dpdist.privacy.lattice.LatticeField`), a recomputed task
draws the same noise: the release is the one an undisturbed run gives. When the scheduler
is lost, nothing can tell what its workers ran since the last look, so a step that draws
noise counts as having drawn it.

A progress bar is shown (on standard error) only when standard error is a terminal, or
when asked with ``progress=True``.
"""

from __future__ import annotations

import ast
import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import math
import multiprocessing
import numbers
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any, Iterator, Sequence

import dask

from dpdist.exceptions import DpdistError, InfrastructureError, ValidationError

__all__ = [
    "DEFAULT_TIMEOUT",
    "LOCAL_CLUSTER",
    "LOCAL_SCHEDULERS",
    "NO_WORKERS_TIMEOUT",
    "Runtime",
    "check_scheduler",
    "check_timeout",
    "client_for",
    "compute",
    "open_runtime",
    "single_threaded_blas",
    "spawn_problem",
    "unoptimized_delayed",
]

#: dask's local scheduler names (``dask.base.named_schedulers``).
LOCAL_SCHEDULERS = ("synchronous", "sync", "single-threaded", "threads", "threading", "processes", "multiprocessing")
#: The scheduler value that starts a LocalCluster for one fit.
LOCAL_CLUSTER = "local-cluster"
#: Default ``timeout`` of a fit, in seconds: one day. A job that has not finished in a day
#: on the cluster it was given is stuck; set ``timeout=None`` for no limit.
DEFAULT_TIMEOUT = 86400.0
#: Default seconds a ``distributed`` cluster may have no worker before a fit fails.
NO_WORKERS_TIMEOUT = 30.0
_DISTRIBUTED_NAMES = ("dask.distributed", "distributed")
_POLL_SECONDS = 1.0
_SYNC_NAMES = ("synchronous", "sync", "single-threaded")
_PROCESS_NAMES = ("processes", "multiprocessing")
_STORAGE_PACKAGES = ("zarr", "numcodecs", "fsspec", "s3fs", "gcsfs", "adlfs", "obstore")


# --------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------


def _distributed_types() -> tuple:
    try:
        from distributed import Client
        from distributed.deploy import Cluster
    except ImportError:  # pragma: no cover - distributed is a dependency
        return (), ()
    return Client, Cluster


def check_scheduler(scheduler: Any) -> Any:
    """Validate a ``scheduler`` argument without connecting to anything (see the module
    docstring for the accepted values)."""
    if scheduler is None or isinstance(scheduler, Runtime):
        return scheduler
    if isinstance(scheduler, str):
        if scheduler in LOCAL_SCHEDULERS or scheduler == LOCAL_CLUSTER:
            return scheduler
        return check_scheduler_address(scheduler)
    client_t, cluster_t = _distributed_types()
    if isinstance(scheduler, client_t) or isinstance(scheduler, cluster_t):
        return scheduler
    raise ValidationError(
        f"scheduler must be None, a string, a distributed.Client or a LocalCluster, got {scheduler!r}"
    )


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


def check_timeout(timeout: Any) -> float | None:
    """``None`` or ``math.inf`` (no limit) or a number of seconds > 0 (returned as a float, or
    None for no limit); bools, strings and NaN are refused."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout > 0:
        raise ValidationError(f"timeout must be None, math.inf or a number of seconds > 0, got {timeout!r}")
    return float(timeout) if math.isfinite(timeout) else None


def _no_workers_timeout() -> float:
    value = dask.config.get("dpdist.no-workers-timeout", NO_WORKERS_TIMEOUT)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValidationError(
            f"dask config dpdist.no-workers-timeout must be a number of seconds, got {value!r}"
        ) from None
    return value


# --------------------------------------------------------------------------------------
# spawn safety: would starting worker processes re-run the caller's script?
# --------------------------------------------------------------------------------------


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either order), possibly inside an ``and``."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_is_main_guard(v) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        sides = [test.left, test.comparators[0]]
        names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
        consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
        return bool(names and consts)
    return False


def _line_is_guarded(source: str, lineno: int) -> bool:
    """Whether line ``lineno`` of a module lies inside an ``if __name__ == "__main__":`` body."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True  # cannot tell: do not stand in the way
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_main_guard(node.test) and node.body:
            first, last = node.body[0].lineno, max(getattr(n, "end_lineno", n.lineno) for n in node.body)
            if first <= lineno <= last:
                return True
    return False


def spawn_problem() -> str | None:
    """Why worker processes started now with multiprocessing "spawn" would fail, or None.

    Spawned processes re-import the main module (as ``__mp_main__``) before they run
    anything. That re-runs the caller's script when the call that starts them is executed
    at its top level outside an ``if __name__ == "__main__":`` guard, and cannot work at
    all for code read from standard input. (Notebooks, ``python -c`` and ``python -m
    package`` have nothing to re-import.) This mirrors ``multiprocessing.spawn``'s rules.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        return "this process is itself a worker process re-importing the main script"
    main = sys.modules.get("__main__")
    if main is None:
        return None
    spec_name = getattr(getattr(main, "__spec__", None), "name", None)
    if spec_name is not None and (spec_name == "__main__" or spec_name.endswith(".__main__")):
        return None
    path = getattr(main, "__file__", None)
    if path is None:
        return None
    if spec_name is None and not os.path.isabs(path):
        from multiprocessing import process

        if process.ORIGINAL_DIR is not None:
            path = os.path.join(process.ORIGINAL_DIR, path)
    if os.path.splitext(os.path.basename(path))[0] == "ipython":
        return None
    if not os.path.isfile(path):
        return (
            f"they cannot re-import a main program that is not a file ({getattr(main, '__file__', path)!r}: "
            'code piped to `python -`?): save the code to a file and put the fit under `if __name__ == "__main__":`, '
            "or use the default scheduler (threads)"
        )
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:
        return None  # not called while the main module's top level runs
    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except OSError:
        return None
    if _line_is_guarded(source, frame.f_lineno):
        return None
    return (
        f"they re-import {os.path.basename(path)} and would run its line {frame.f_lineno} again: put the code "
        'that fits under `if __name__ == "__main__":`, or use the default scheduler (threads)'
    )


def _check_spawn(what: str) -> None:
    if what == LOCAL_CLUSTER:
        method = dask.config.get("distributed.worker.multiprocessing-method", "spawn")
    else:
        method = dask.config.get("multiprocessing.context", "spawn")
    if method == "fork":
        return
    problem = spawn_problem()
    if problem is not None:
        raise ValidationError(f"scheduler={what!r} starts worker processes with multiprocessing 'spawn'; {problem}")


# --------------------------------------------------------------------------------------
# the runtime of one fit
# --------------------------------------------------------------------------------------


def _local_name(name: Any) -> Any:
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


def _active_client() -> Any:
    """The client ``distributed.get_client()`` finds without connecting anywhere, or None."""
    if "distributed" not in sys.modules:
        return None  # nothing can have created a client
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError):
        return None


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    return (line[:limit] + "...") if len(line) > limit else line


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
        return InfrastructureError(f"{message}; {note}", noise_drawn=drawn)

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
            return exc if exc.noise_drawn else self.failure(str(exc), noised=False)
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
            return self.failure(f"reading the input failed during the computation ({name}: {_first_line(exc)})")
        if self.client is not None and isinstance(exc, (TimeoutError, OSError)):
            return self.failure(
                f"lost the connection to the scheduler of {self.description} ({name}: {_first_line(exc)})",
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
        if _show_progress(progress):
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
        bar = _start_progress_bar(self.client, futures) if _show_progress(progress) else None
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


def _start_progress_bar(client: Any, futures: list) -> concurrent.futures.Future:
    """A text progress bar on standard error for ``futures`` of ``client`` (not the default
    client: ``distributed.progress`` would look that one up), drawn from the client's loop."""
    from distributed.diagnostics.progressbar import ProgressBar
    from dask.utils import format_time

    class _StderrBar(ProgressBar):
        width = 40

        def _draw_bar(self, remaining, all, **kwargs):
            frac = (1 - remaining / all) if all else 1.0
            bar = "#" * int(self.width * frac)
            with contextlib.suppress(ValueError):
                elapsed = format_time(self.elapsed)
                sys.stderr.write(f"\r[{bar:<{self.width}}] | {int(100 * frac)}% Completed | {elapsed}")
                sys.stderr.flush()

        def _draw_stop(self, **kwargs):
            with contextlib.suppress(ValueError):
                sys.stderr.write("\n")
                sys.stderr.flush()

    bar = _StderrBar(futures, scheduler=client.scheduler.address, complete=True)
    return asyncio.run_coroutine_threadsafe(bar.listen(), client.loop.asyncio_loop)


def _connect(address: str, timeout: float | None) -> Any:
    from dask.utils import parse_timedelta
    from distributed import Client

    connect = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect", "30s"), default="s")
    if timeout is not None:  # a fit with a shorter limit does not wait longer to connect
        connect = min(connect, timeout)
    try:
        return Client(address, set_as_default=False, timeout=connect)
    except (OSError, TimeoutError) as exc:
        raise InfrastructureError(
            f"cannot reach the dask scheduler at {address} ({type(exc).__name__}: {_first_line(exc)}); "
            "no noise was drawn: nothing was spent",
            noise_drawn=False,
        ) from None


class _DropCancelledReconnect(logging.Filter):
    """Drops the traceback ``distributed.client`` logs when a client whose scheduler is gone
    is closed while it tries to reconnect (its reconnect loop is cancelled): the fit's own
    one-line error already says that the scheduler was lost."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


def _close_client(client: Any) -> None:
    """Close a client this module connected."""
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


def _local_cluster_client() -> Any:
    """The client of this process's LocalCluster: started on first use (after the spawn
    check), reused by later fits while it runs, closed when the process exits."""
    from distributed import Client, LocalCluster

    _check_spawn(LOCAL_CLUSTER)
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
                f"could not start a LocalCluster ({type(exc).__name__}: {_first_line(exc)}); "
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


def _resolve_default() -> Any:
    """What ``scheduler=None`` means now: a client, or a local scheduler for dask.compute."""
    configured = dask.config.get("scheduler", None)
    if configured is None:
        client = _active_client()
        return client if client is not None else "threads"
    if isinstance(configured, str) and configured.lower() in _DISTRIBUTED_NAMES:
        client = _active_client()
        if client is None:
            raise ValidationError(
                "dask is configured to use the distributed scheduler (dask.config 'scheduler' = "
                f"{configured!r}) but no distributed.Client is active"
            )
        return client
    return _local_name(configured)


@contextlib.contextmanager
def open_runtime(scheduler: Any = None, *, timeout: Any = DEFAULT_TIMEOUT) -> Iterator[Runtime]:
    """The :class:`Runtime` of one fit on ``scheduler`` (see the module docstring).

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
    timeout = check_timeout(timeout)
    client_t, cluster_t = _distributed_types()
    with contextlib.ExitStack() as stack:
        if scheduler is None:
            resolved = _resolve_default()
            if isinstance(resolved, str) and resolved in _PROCESS_NAMES:
                _check_spawn(resolved)
            if client_t and isinstance(resolved, client_t):
                rt = Runtime(resolved, None, timeout, f"the active client's cluster {_address(resolved)}")
            else:
                rt = Runtime(None, resolved, timeout, f"dask's local {resolved!r} scheduler")
        elif isinstance(scheduler, str) and scheduler in LOCAL_SCHEDULERS:
            name = _local_name(scheduler)
            if name == "processes":
                _check_spawn(scheduler)
            rt = Runtime(None, name, timeout, f"dask's local {name!r} scheduler")
        elif scheduler == LOCAL_CLUSTER:
            client = _local_cluster_client()
            rt = Runtime(client, None, timeout, f"this process's LocalCluster at {_address(client)}")
        elif isinstance(scheduler, str):
            client = _connect(scheduler, timeout)
            stack.callback(_close_client, client)
            rt = Runtime(client, None, timeout, f"the cluster at {scheduler}")
        elif isinstance(scheduler, client_t):
            rt = Runtime(scheduler, None, timeout, f"the cluster at {_address(scheduler)}")
        else:  # a cluster object
            from distributed import Client

            client = Client(scheduler, set_as_default=False)
            stack.callback(_close_client, client)
            rt = Runtime(client, None, timeout, f"the cluster at {_address(client)}")
        stack.callback(rt.remove_scratch)  # first out: before any client this context closes
        yield rt


def _address(client: Any) -> str:
    try:
        return str(client.scheduler.address)
    except Exception:  # pragma: no cover - a closed client
        return "?"


@contextlib.contextmanager
def client_for(scheduler: Any, *, timeout: Any = DEFAULT_TIMEOUT) -> Iterator[Any]:
    """Yield a ``distributed.Client`` for ``scheduler``, or None for a local dask scheduler
    (the same resolution as :func:`open_runtime`)."""
    with open_runtime(scheduler, timeout=timeout) as rt:
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


@contextlib.contextmanager
def single_threaded_blas(active: bool = True) -> Iterator[None]:
    """One BLAS thread per task while dask's thread pool runs tasks concurrently, and under
    the synchronous scheduler.

    OpenBLAS's own threads on top of dask's threads oversubscribe the cores (on a loaded
    2-core machine the per-batch products of SparsePCA ran about 4x slower). The engine's
    products are thin (at most ``GRAM_BATCH_ROWS`` rows a run), and threaded thin products
    stall when the cores are shared even with one task at a time: PrivCov on the synchronous
    scheduler (2e6 x 100 float32) took 7.4-16 CPU seconds with OpenBLAS's threads against
    2.8-3.7 on dask's threads with one BLAS thread each, measured in the same run. ``distributed``
    workers already start with one BLAS thread (the nanny sets ``OPENBLAS_NUM_THREADS=1``).
    The limit is process-wide, so concurrent fits on threads share one reference count.
    """
    if not active:
        yield
        return
    with _BLAS_LOCK:
        global _BLAS_USERS, _BLAS_LIMITS
        if _BLAS_USERS == 0:
            _BLAS_LIMITS = _blas_controller().limit(limits=1, user_api="blas")
        _BLAS_USERS += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS -= 1
            if _BLAS_USERS == 0 and _BLAS_LIMITS is not None:
                _BLAS_LIMITS.restore_original_limits()
                _BLAS_LIMITS = None


_BLAS_LOCK = threading.Lock()
_BLAS_USERS = 0
_BLAS_LIMITS: Any = None
_BLAS_CONTROLLER: Any = None
_BLAS_CONTROLLER_MODULES = -1


def _blas_controller() -> Any:
    """One ``threadpoolctl.ThreadpoolController`` for the process, built on first use (call
    with ``_BLAS_LOCK`` held). Building one scans the loaded shared libraries (about 2.5 ms,
    paid by every ``threadpool_limits`` call: twice per pass of a fit before); it is rebuilt
    only when Python modules were imported since (an extension module may have loaded
    another BLAS, such as SciPy's own OpenBLAS)."""
    global _BLAS_CONTROLLER, _BLAS_CONTROLLER_MODULES
    if _BLAS_CONTROLLER is None or len(sys.modules) != _BLAS_CONTROLLER_MODULES:
        from threadpoolctl import ThreadpoolController

        _BLAS_CONTROLLER_MODULES = len(sys.modules)
        _BLAS_CONTROLLER = ThreadpoolController()
    return _BLAS_CONTROLLER


def _show_progress(progress: bool | None) -> bool:
    if progress is None:  # dask.config key "dpdist.progress" (the dpdist command sets False)
        progress = dask.config.get("dpdist.progress", None)
    if progress is not None:
        return bool(progress)
    return sys.stderr.isatty()


def compute(
    *collections: Any,
    scheduler: Any = None,
    progress: bool | None = None,
    timeout: Any = DEFAULT_TIMEOUT,
    noised: bool = True,
) -> tuple:
    """Compute dask ``collections`` once, together, on the chosen scheduler.

    Each release must be computed exactly once (STYLE.md principle 8): callers pass every
    output of a mechanism in one call. ``scheduler`` and ``timeout`` as in the module
    docstring (a :class:`Runtime` brings its own deadline); ``noised`` says whether the
    graphs draw noise, for the failure message.
    """
    with open_runtime(scheduler, timeout=timeout) as rt:
        return rt.compute(*collections, progress=progress, noised=noised)
