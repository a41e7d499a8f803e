"""Progress of a whole command on standard error, on any scheduler.

The command line owns the progress display: the library's own bars are switched off for the
duration of a command (``dask.config`` key ``dpdist.progress``). At a terminal one line is
redrawn in place::

    dpdist demo: [##########              ]  41% | PrivCov | 3.1s

For logs (standard error not a terminal, or ``--progress`` given) nothing is redrawn: one
plain line is written when a stage or pass starts, at every further 10%, and when a named
stage ends::

    dpdist demo: writing the data: 40% | 3.1s
    dpdist demo: writing the data: done in 7.9s

A command names its stages with :func:`stage`, whose timer is also the clock of any time the
command prints afterwards (one clock for the progress and the summary); work outside a
named stage is numbered ``pass N``.

- dask's local schedulers (threads, synchronous, processes) report through a global
  :class:`dask.callbacks.Callback`, so every ``dask.compute`` of the command is seen, including
  the ones an estimator runs without a ``progress`` parameter;
- on a ``distributed`` cluster a background thread asks the scheduler, twice a second, how
  many tasks are done and how many are still to run (cluster-wide counts).

Only task counts, stage names and elapsed time are shown: the graph's shape is public (it
depends on the data's shape and chunking, and on the stages a mechanism runs), never on data
values.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any, Iterator, TextIO

__all__ = ["progress_display", "stage"]

#: States of a ``distributed`` task that count as finished for the display.
_DONE_STATES = ("memory", "released", "erred", "forgotten")

#: The line of the display now open (None outside :func:`progress_display` or when disabled).
_ACTIVE: list = []


class _Line:
    """The progress of one command on ``stream``: a redrawn line (``plain=False``) or one
    plain line per stage or pass and per 10% (``plain=True``)."""

    def __init__(self, stream: TextIO, label: str, width: int = 24, *, plain: bool = False) -> None:
        self.stream = stream
        self.label = label
        self.width = width
        self.plain = plain
        self.start = self.stage_start = time.perf_counter()
        self.passes = self.stage_passes = 0
        self.stage: str | None = None
        self.written: tuple | None = None  # (what, pass, tenth) of the last plain line
        self.drawn = False
        self.closed = False
        self.lock = threading.Lock()

    def _what(self) -> str:
        if self.stage is None:
            return f"pass {max(self.passes, 1)}"
        n = self.passes - self.stage_passes
        return self.stage if n <= 1 else f"{self.stage}, pass {n}"

    def _write(self, text: str) -> None:
        with self.lock, contextlib.suppress(ValueError, OSError):
            if self.closed:
                return
            self.stream.write(text)
            self.stream.flush()
            self.drawn = not self.plain

    def draw(self, done: int, total: int) -> None:
        frac = min(1.0, done / total) if total else 0.0
        elapsed = time.perf_counter() - (self.stage_start if self.stage is not None else self.start)
        if self.plain:
            key = (self._what(), self.passes, int(10 * frac))
            if key == self.written:
                return
            if self.written is not None and key[:2] == self.written[:2] and key[2] < self.written[2]:
                # a log line never goes back: on a cluster the share of finished tasks can fall
                # within a pass (finished tasks are forgotten) or across a pass boundary the
                # poll missed
                return
            self.written = key
            self._write(f"{self.label}: {self._what()}: {10 * key[2]}% | {elapsed:.1f}s\n")
            return
        bar = "#" * int(self.width * frac)
        self._write(f"\r{self.label}: [{bar:<{self.width}}] {int(100 * frac):>3}% | {self._what()} | {elapsed:.1f}s")

    def begin_stage(self, name: str, start: float) -> None:
        self.stage, self.stage_start, self.stage_passes, self.written = name, start, self.passes, None

    def end_stage(self, seconds: float) -> None:
        if self.plain and self.stage is not None:
            self._write(f"{self.label}: {self.stage}: done in {seconds:.1f}s\n")
        self.stage = None

    def close(self) -> None:
        with self.lock, contextlib.suppress(ValueError, OSError):
            self.closed = True
            if self.drawn:
                self.stream.write("\n")
                self.stream.flush()


class StageTimer:
    """The clock of one :func:`stage`: ``seconds`` is its duration once it ended (while it
    runs, the time so far)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.end: float | None = None

    @property
    def seconds(self) -> float:
        return (self.end if self.end is not None else time.perf_counter()) - self.start


@contextlib.contextmanager
def stage(name: str) -> Iterator[StageTimer]:
    """Name the work inside the block in the command's progress (when a display is open) and
    time it; yields the :class:`StageTimer` the command reports that time from."""
    timer = StageTimer()
    line = _ACTIVE[-1] if _ACTIVE else None
    if line is not None:
        line.begin_stage(name, timer.start)
    ok = False
    try:
        yield timer
        ok = True
    finally:
        timer.end = time.perf_counter()
        if line is not None:
            if ok:
                line.end_stage(timer.seconds)
            else:
                line.stage = None


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
        if busy and not todo:
            line.draw(1, 1)  # the pass ended since the last poll: show it complete
        if todo and not busy:
            line.passes += 1
        busy = bool(todo)
        if busy:
            line.draw(done, done + todo)


@contextlib.contextmanager
def progress_display(enabled: bool, label: str, client: Any = None, *, stream: TextIO | None = None,
                     interval: float = 0.1, plain: bool = False) -> Iterator[None]:
    """Show the progress of everything computed inside the block (when ``enabled``).

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
    plain : bool, default False
        Write plain lines for logs instead of redrawing one line (see the module docstring).
    """
    import dask

    with dask.config.set({"dpdist.progress": False}):
        if not enabled:
            yield
            return
        line = _Line(stream if stream is not None else sys.stderr, label, plain=plain)
        _ACTIVE.append(line)
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
                    if completed:  # show it complete, also when every pass ended between polls
                        line.draw(1, 1)
                line.close()
                _ACTIVE.remove(line)
