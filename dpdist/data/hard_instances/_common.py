"""Helpers shared by the lower-bound instances: the integer and seed checks of their generators and
the top two eigenvalues of a sparse covariance.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dpdist.exceptions import ValidationError


def _check_int(value, name: str, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or int(value) < low:
        raise ValidationError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _check_seed(random_state) -> int:
    if isinstance(random_state, (bool, np.bool_)) or not isinstance(random_state, (int, np.integer)) or random_state < 0:
        raise ValidationError(f"random_state must be a non-negative int for a generator, got {random_state!r}")
    return int(random_state)


def _top_two(cov: sp.csr_array) -> tuple[float, float]:
    d = cov.shape[0]
    if d <= 2000:
        vals = np.linalg.eigvalsh(cov.toarray())
        return float(vals[-1]), float(vals[-2])
    from scipy.sparse.linalg import eigsh

    vals = np.sort(eigsh(cov, k=2, which="LA", return_eigenvectors=False, v0=np.ones(d)))
    return float(vals[-1]), float(vals[-2])
