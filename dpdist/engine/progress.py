"""Progress bars of a fit's computations, on standard error."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
from typing import Any

import dask

__all__ = ["show_progress", "start_progress_bar"]


def show_progress(progress: bool | None) -> bool:
    if progress is None:  # dask.config key "dpdist.progress" (the dpdist command sets False)
        progress = dask.config.get("dpdist.progress", None)
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

