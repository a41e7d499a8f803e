"""Twins: verbatim copies of computations that were found unsafe, kept to show the tests catch them.

NEVER used by an estimator. Each twin is a drop-in replacement that a test (or an audit) patches
in for the duration of one call, to check that the same-seed neighbour tests
(tests/privacy_hostile/) and the end-to-end audits (:mod:`dpdist.testing.estimator_audits`)
flag the bug it carries:

* :func:`cancelling_chunk_level_step`: the SecondMoment kernel before issue 9. It added the
  plain Gram of a batch and then subtracted the shrunk rows' excess ``(1 - t_i^2) z_i z_i^T``:
  a row of large finite norm (a fill value near 1e37) swamps the sum and the subtraction
  cancels every other row of its batch; rows of norm near 1e154 make it NaN. Patch it over
  ``dpdist.engine.second_moment.chunk_level_step`` (:func:`cancelling_second_moment_kernel`).
* :func:`unbounded_privnorm`: PrivNorm/PrivPCA before issue 9: no entry clip (so the
  rounding of ``Sigma_bar`` grows with the data's magnitude), the threshold ``5 tau``
  without the float slack, the exact-arithmetic sensitivity, and ``Sigma_bar`` summed row by
  row in a second pass over the data (as then; the engine now forms it from the kept batch
  tiles when they fit, whose rounding on the reproduction's rows happens to cancel).
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterator
from unittest import mock

import numpy as np

__all__ = [
    "cancelling_chunk_level_step",
    "cancelling_second_moment_kernel",
    "unbounded_privnorm",
]

_BLAS_SINGLE_THREAD = 262144


def cancelling_chunk_level_step(
    x: np.ndarray, prev: np.ndarray | None = None, *, M: np.ndarray, radius: float
) -> tuple[np.ndarray, np.ndarray]:
    """UNSAFE (the pre-issue-9 kernel, verbatim but for silenced overflow warnings): plain Gram
    plus a subtracted correction."""
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    MT = np.ascontiguousarray(np.asarray(M, dtype=np.float64).T)
    prev = None if prev is None else np.asarray(prev, dtype=np.float64).ravel()
    t = np.empty(n, dtype=np.float64)
    g = np.zeros((d, d), dtype=np.float64)
    batch = max(256, _BLAS_SINGLE_THREAD // (d * d) - 1)
    for lo in range(0, n, batch):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            z = x[lo : lo + batch] @ MT
            norms = np.sqrt(np.einsum("ij,ij->i", z, z))
            tb = np.minimum(1.0, np.where(norms > 0, float(radius) / norms, 1.0))
        if prev is not None:
            np.minimum(tb, prev[lo : lo + batch], out=tb)
        bad = ~np.isfinite(norms)
        if bad.any():
            tb[bad] = 0.0
            z[bad] = 0.0
        shrunk = np.flatnonzero(tb < 1.0)
        if len(shrunk) <= len(tb) // 8:
            with np.errstate(over="ignore", invalid="ignore"):
                g += z.T @ z
                if len(shrunk):
                    zs = z[shrunk]
                    g -= (zs.T * (1.0 - tb[shrunk] ** 2)) @ zs
        else:
            z *= tb[:, None]
            g += z.T @ z
        t[lo : lo + batch] = tb
    return t, (g + g.T) / 2.0


@contextlib.contextmanager
def cancelling_second_moment_kernel() -> Iterator[None]:
    """Run SecondMoment with :func:`cancelling_chunk_level_step` inside the block (the
    engine's module attribute is patched; local schedulers only: a worker process imports the
    unpatched module)."""
    import dpdist.engine.second_moment as engine

    with mock.patch.object(engine, "chunk_level_step", cancelling_chunk_level_step):
        yield


@contextlib.contextmanager
def unbounded_privnorm() -> Iterator[None]:
    """Run PrivNorm/PrivPCA as before issue 9 inside the block: no entry clip (infinite),
    Sigma_bar thresholded at exactly 5 tau, the exact-arithmetic sensitivities (no float
    terms). Patches names of :mod:`dpdist.algorithms.sparse_pca`; local schedulers only."""
    import dpdist.algorithms.sparse_pca as module
    from dpdist.privacy.pca_calibration import FriendlyFloatBounds

    def no_bounds(n_samples, n_batches, n_features, entry_clip, tau, k):
        return FriendlyFloatBounds(entry_clip=math.inf, eta=0.0, threshold=5.0 * tau, eigen_error=0.0,
                                   vector_error=0.0)

    real_norm, real_pca = module.privnorm_calibration, module.privpca_calibration

    def norm_cal(epsilon, delta, k, tau, float_bounds=None):
        return real_norm(epsilon, delta, k, tau)

    def pca_cal(epsilon, delta, k, tau, gap, lambda_hat, float_bounds=None):
        return real_pca(epsilon, delta, k, tau, gap, lambda_hat)

    real_pass1 = module.persist_pass1

    def pass1_keeping_nothing(*args, **kwargs):
        groups, _ = real_pass1(*args, **kwargs)
        return groups, None  # pass 2 reads the rows again, as before issue 9


    with mock.patch.object(module, "friendly_float_bounds", no_bounds), \
            mock.patch.object(module, "friendly_entry_clip", lambda *a, **k: math.inf), \
            mock.patch.object(module, "privnorm_calibration", norm_cal), \
            mock.patch.object(module, "privpca_calibration", pca_cal), \
            mock.patch.object(module, "persist_pass1", pass1_keeping_nothing):
        yield
