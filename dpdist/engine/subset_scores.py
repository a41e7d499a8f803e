"""Scores of k-subsets, ``lambda_1(M[S, S])``: the closed form for k = 2, a vectorised symmetric
3 x 3 solver (trigonometric form of Cardano, with a batched ``eigvalsh`` fallback near a double
top eigenvalue where the closed form loses accuracy) for k = 3, batched ``eigvalsh`` above, for
explicit subsets (over a rank range, :func:`dpdist.engine.subset_prefix.range_top_eigenvalue`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEGENERATE_TOL", "block_top_eigenvalue", "top_eigenvalue_2x2", "top_eigenvalue_3x3"]

#: The 3 x 3 closed form is replaced by ``eigvalsh`` where ``1 + r < DEGENERATE_TOL`` (the
#: top two eigenvalues nearly coincide and ``arccos`` amplifies rounding); with this
#: tolerance the closed form's error stays near 1e-14 of the block's scale.
DEGENERATE_TOL = 1e-4


def top_eigenvalue_2x2(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Largest eigenvalue of ``[[a, b], [b, c]]``, elementwise: ``(a+c)/2 + hypot((a-c)/2, b)``."""
    return 0.5 * (a + c) + np.hypot(0.5 * (a - c), b)


def top_eigenvalue_3x3(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray
) -> np.ndarray:
    """Largest eigenvalue of ``[[a, x, y], [x, b, z], [y, z, c]]``, elementwise.

    Trigonometric solution of the characteristic cubic (Smith 1961): with ``q = tr/3``,
    ``p = sqrt(||A - q I||_F^2 / 6)`` and ``r = det((A - q I)/p)/2``,
    ``lambda_1 = q + 2 p cos(arccos(r)/3)``. Where ``1 + r < DEGENERATE_TOL`` (top two
    eigenvalues nearly equal; ``arccos`` is ill-conditioned at -1) the value is recomputed
    by ``numpy.linalg.eigvalsh``.
    """
    q = (a + b + c) * (1.0 / 3.0)
    aa, bb, cc = a - q, b - q, c - q
    p1 = x * x + y * y + z * z
    p2 = aa * aa + bb * bb + cc * cc + 2.0 * p1
    p = np.sqrt(p2 * (1.0 / 6.0))
    det = aa * (bb * cc - z * z) - x * (x * cc - z * y) + y * (x * z - bb * y)
    p3 = p * p * p
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(p3 > 0, det / (2.0 * p3), 0.0)
    np.clip(r, -1.0, 1.0, out=r)
    lam = q + 2.0 * p * np.cos(np.arccos(r) * (1.0 / 3.0))
    bad = np.flatnonzero((r < -1.0 + DEGENERATE_TOL) & (p > 0))
    if bad.size:
        blocks = np.empty((bad.size, 3, 3))
        blocks[:, 0, 0], blocks[:, 1, 1], blocks[:, 2, 2] = a[bad], b[bad], c[bad]
        blocks[:, 0, 1] = blocks[:, 1, 0] = x[bad]
        blocks[:, 0, 2] = blocks[:, 2, 0] = y[bad]
        blocks[:, 1, 2] = blocks[:, 2, 1] = z[bad]
        lam[bad] = np.linalg.eigvalsh(blocks)[:, -1]
    return lam


def block_top_eigenvalue(M: np.ndarray, subsets: np.ndarray) -> np.ndarray:
    """``lambda_1(M[S, S])`` for every row ``S`` of ``subsets`` (shape (B, k)).

    ``M`` is a symmetric ``d x d`` float64 array (only its entries on the blocks are read).
    """
    M = np.ascontiguousarray(M, dtype=np.float64)
    d = M.shape[0]
    k = subsets.shape[1]
    flat = M.ravel()
    diag = np.ascontiguousarray(np.diagonal(M))
    if k == 1:
        return diag[subsets[:, 0]]
    if k == 2:
        i, j = subsets[:, 0], subsets[:, 1]
        return top_eigenvalue_2x2(diag[i], flat[i * d + j], diag[j])
    if k == 3:
        i, j, l = subsets[:, 0], subsets[:, 1], subsets[:, 2]
        return top_eigenvalue_3x3(diag[i], diag[j], diag[l], flat[i * d + j], flat[i * d + l], flat[j * d + l])
    blocks = M[subsets[:, :, None], subsets[:, None, :]]
    return np.linalg.eigvalsh(blocks)[:, -1]
