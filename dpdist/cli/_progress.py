"""One progress line on standard error for a whole command, on any scheduler.

The command line owns the progress display: the library's own bars are switched off for the
duration of a command (``dask.config`` key ``dpdist.progress``), and one line is redrawn in
place instead::

    dpdist covariance: [##########              ]  41% | pass 2 | 3.1s

- dask's local schedulers (threads, synchronous, processes) report through a global
  :class:`dask.callbacks.Callback`, so every ``dask.compute`` of the command is seen, including
  the ones an estimator runs without a ``progress`` parameter;
- on a ``distributed`` cluster a background thread asks the scheduler, twice a second, how
  many tasks are done and how many are still to run (cluster-wide counts).

Only task counts and elapsed time are shown: the graph's shape is public (it depends on the
data's shape and chunking, and on the stages a mechanism runs), never on data values.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any, Iterator, TextIO

__all__ = ["progress_display"]

#: States of a ``distributed`` task that count as finished for the display.
_DONE_STATES = ("memory", "released", "erred", "forgotten")


class _Line:
    """Redraws one line ``label [bar] pct% | pass N | elapsed`` on ``stream``."""

    def __init__(self, stream: TextIO, label: str, width: int = 24) -> None:
        self.stream = stream
        self.label = label
        self.width = width
        self.start = time.perf_counter()
        self.passes = 0
        self.drawn = False
        self.closed = False
        self.lock = threading.Lock()

    def draw(self, done: int, total: int) -> None:
        frac = min(1.0, done / total) if total else 0.0
        bar = "#" * int(self.width * frac)
        elapsed = time.perf_counter() - self.start
        msg = (f"\r{self.label}: [{bar:<{self.width}}] {int(100 * frac):>3}% | pass {max(self.passes, 1)} "
               f"| {elapsed:.1f}s")
        with self.lock, contextlib.suppress(ValueError, OSError):
            if self.closed:
                return
            self.stream.write(msg)
            self.stream.flush()
            self.drawn = True

    def close(self) -> None:
        with self.lock, contextlib.suppress(ValueError, OSError):
            self.closed = True
            if self.drawn:
                self.stream.write("\n")
                self.stream.flush()


def _local_callback(line: _Line, interval: float):
    """A dask Callback drawing ``line`` for every local-scheduler ``compute``."""
    from dask.callbacks import Callback

    class _Bar(Callback):
        def __init__(self) -> None:
            super().__init__()
            self.state: dict | None = None
            self.running = False

        def _start_state(self, dsk, state) -> None:
            self.state = state
            line.passes += 1
            self.running = True
            threading.Thread(target=self._tick, daemon=True).start()

        def _tick(self) -> None:
            while self.running:
                self._draw()
                time.sleep(interval)

        def _draw(self) -> None:
            s = self.state
            if s:
                done = len(s["finished"])
                total = done + sum(len(s[k]) for k in ("ready", "waiting", "running"))
                line.draw(done, total)

        def _finish(self, dsk, state, errored) -> None:
            self.running = False
            if not errored:
                line.draw(1, 1)

    return _Bar()


def _scheduler_counts():
    """(done, to_run) task counts, computed on the scheduler (shipped by value)."""

    def counts(dask_scheduler=None):
        done = todo = 0
        for ts in dask_scheduler.tasks.values():
            if ts.state in _DONE_STATES:
                done += 1
            else:
                todo += 1
        return done, todo

    return counts


def _poll_cluster(client, line: _Line, stop: threading.Event, interval: float) -> None:
    counts = _scheduler_counts()
    busy = False
    while not stop.wait(interval):
        try:
            done, todo = client.run_on_scheduler(counts)
        except Exception:  # the display never fails a command
            return
        if todo and not busy:
            line.passes += 1
        busy = bool(todo)
        if busy:
            line.draw(done, done + todo)


@contextlib.contextmanager
def progress_display(enabled: bool, label: str, client: Any = None, *, stream: TextIO | None = None,
                     interval: float = 0.1) -> Iterator[None]:
    """Show one progress line for everything computed inside the block (when ``enabled``).

    The library's own progress bars are switched off inside the block whether or not the
    line is shown, so ``--no-progress`` silences everything.

    Parameters
    ----------
    enabled : bool
        Draw the line (``--progress``, or a terminal with neither flag).
    label : str
        Start of the line, e.g. ``"dpdist covariance"``.
    client : distributed.Client, optional
        The cluster the command runs on; None for dask's local schedulers.
    stream : file, optional
        Where to draw (default: ``sys.stderr`` at entry).
    """
    import dask

    with dask.config.set({"dpdist.progress": False}):
        if not enabled:
            yield
            return
        line = _Line(stream if stream is not None else sys.stderr, label)
        stop = threading.Event()
        with _local_callback(line, interval):
            poller = None
            if client is not None:
                poller = threading.Thread(target=_poll_cluster, args=(client, line, stop, max(interval, 0.5)),
                                          daemon=True)
                poller.start()
            completed = False
            try:
                yield
                completed = True
            finally:
                stop.set()
                if poller is not None:
                    poller.join(timeout=5)
                    # the cluster's last pass ended: show it complete (also when the whole run was
                    # shorter than one polling interval, so the poller never drew it)
                    if completed:
                        line.draw(1, 1)
                line.close()
