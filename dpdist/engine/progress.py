"""Progress bars of a fit's computations, on standard error.

Whether a bar is shown is the dask configuration key ``dpdist.progress`` (environment variable
``DASK_DPDIST__PROGRESS``): ``None`` (the default) only when standard error is a terminal,
``True`` always, ``False`` never. ``with dask.config.set({"dpdist.progress": False}): est.fit(X)``
silences a fit; the ``dpdist`` command line sets it to False while it draws its own line.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
from typing import Any

import dask

from dpdist.exceptions import ValidationError

__all__ = ["check_progress", "show_progress", "start_progress_bar"]


def check_progress(progress: Any) -> bool | None:
    """A value of ``dpdist.progress``: None, True or False (not 0/1, not strings)."""
    import numpy as np

    if progress is None or isinstance(progress, (bool, np.bool_)):
        return None if progress is None else bool(progress)
    raise ValidationError(f"dask config dpdist.progress must be None, True or False, got {progress!r}")


def show_progress(progress: bool | None = None) -> bool:
    """Whether a computation shows a bar: ``progress`` when given (False for an auxiliary pass),
    else the dask configuration key ``dpdist.progress`` (validated), else whether standard error
    is a terminal."""
    if progress is None:
        progress = check_progress(dask.config.get("dpdist.progress", None))
    if progress is not None:
        return bool(progress)
    return sys.stderr.isatty()


def start_progress_bar(client: Any, futures: list) -> concurrent.futures.Future:
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

