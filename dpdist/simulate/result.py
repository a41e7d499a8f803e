"""What a simulated run returns (:class:`SimResult`, labelled :data:`SIMULATED`) and the
probability that clipping is active on n Gaussian rows of a block model (the simulation is
exact in law on the complement).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from dpdist.data.block_models import BlockModel

__all__ = ["SIMULATED", "SimResult", "clip_probability", "row_clip_probability"]

#: Label carried by every simulated result, its metadata and its plots.
SIMULATED = "SIMULATED"


@dataclass
class SimResult:
    """One simulated run.

    Attributes
    ----------
    error : float
        Operator-norm error ``||M - Sigma||_op`` (covariance methods) or ``sin^2`` of the
        released component (PCA methods; 1.0 when nothing was released).
    released : bool
        False when the mechanism returned bottom (PrivPCA's tests).
    info : dict
        ``label = "SIMULATED"``, the method, the calibration used, ``p_clip``, the
        approximations made and (PrivPCA) the probability of the approximated events.
    """

    error: float
    released: bool
    info: dict = field(default_factory=dict)


def clip_probability(model: BlockModel, n: float, clip: float) -> float:
    """P(some |x_tj| > clip) for n Gaussian rows of the model (exact; the simulation is exact
    in law on the complement)."""
    diag = model.diagonal()
    log_keep = np.log1p(-np.minimum(1.0, 2.0 * special.ndtr(-clip / np.sqrt(diag))))
    return float(-np.expm1(float(n) * log_keep.sum()))


def row_clip_probability(model: BlockModel, n: float, row_clip: float) -> float:
    """An upper bound on P(some ||x_t|| > row_clip) for n Gaussian rows of the model (0 when
    row_clip is inf): ``||x||^2 = sum_i lambda_i g_i^2`` over the covariance's eigenvalues, and
    Laurent and Massart 2000 (Lemma 1) give ``P(||x||^2 >= sum lambda + 2 sqrt(t sum lambda^2)
    + 2 t max lambda) <= e^-t``; t is solved from ``row_clip**2`` and the bound is ``min(1, n
    e^-t)``. The simulation is exact in law when no row is scaled (nor entry clipped)."""
    if not math.isfinite(row_clip):
        return 0.0
    lam = np.linalg.eigvalsh(model.blocks).ravel() if model.n_blocks else np.zeros(0)
    lam = np.concatenate([lam, np.full(model.n_bulk, float(model.bulk_variance))])
    tr, s2, top = float(lam.sum()), math.sqrt(float((lam**2).sum())), float(lam.max())
    gap = row_clip**2 - tr
    if gap <= 0:
        return 1.0
    x = (-2 * s2 + math.sqrt(4 * s2 * s2 + 8 * top * gap)) / (4 * top)  # sqrt(t)
    return float(min(1.0, float(n) * math.exp(-x * x)))
