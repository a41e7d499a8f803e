"""Helpers shared by the covariance baselines."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dpdist.exceptions import ValidationError
from dpdist.algorithms.plan import Plan


@dataclass(frozen=True, kw_only=True)
class ThresholdPlanBase(Plan):
    """The fields every hard-thresholded covariance plan has, private or not (the private and
    the non-private plan each inherit them; neither is a kind of the other).

    ``threshold`` is the hard threshold t the fit applies, ``sampling_threshold`` Fact 1's
    entrywise sampling error at ``sigma`` and ``beta`` (None without ``sigma``), ``sigma`` the
    sub-Gaussian scale given (or None), ``beta`` the failure probability of the bound.
    """

    threshold: float | None
    sampling_threshold: float | None
    sigma: float | None
    beta: float


def triples_to_csr(results: list, d: int) -> sp.csr_array:
    """Stack per-tile ``(rows, cols, values)`` triples into a d x d CSR array.

    Raises ValidationError when a tile refused to release (its input guard failed).
    """
    if any(r is None for r in results):
        raise ValidationError(
            "X contains NaN or infinite values; nothing was released. Clean the data or pass "
            "on_nonfinite='zero'"
        )
    if not results:
        return sp.csr_array((d, d))
    rows = np.concatenate([r[0] for r in results])
    cols = np.concatenate([r[1] for r in results])
    vals = np.concatenate([r[2] for r in results])
    return sp.csr_array((vals, (rows, cols)), shape=(d, d))
