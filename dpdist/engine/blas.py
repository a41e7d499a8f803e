"""BLAS threads: one per task while dask runs tasks (:func:`single_threaded_blas`)."""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Iterator

__all__ = ["single_threaded_blas"]


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

