"""The drawn second moment of a block model: its diagonal blocks (exact Wishart) and bulk diagonal
(exact scaled chi^2), and the off-block entries that exceed a threshold, drawn as independent
Gaussians with the exact conditional variance, their count Poisson with the Gaussian tail rate
(an approximation each result lists).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpdist.data.block_models import BlockModel, open_uniforms, wishart_blocks
from dpdist.simulate.statistics import scaled_chi2


def _sample_hat(model: BlockModel, n: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """Diagonal blocks (exact Wishart) and bulk diagonal (exact scaled chi^2) of Sigma_hat."""
    blocks = wishart_blocks(model.blocks, n, rng, chol=model.cholesky())
    bulk = scaled_chi2(rng, n, model.bulk_variance, size=model.n_bulk) if model.n_bulk else np.zeros(0)
    return blocks, bulk


def _offblock_scale2(model: BlockModel, n: float) -> float:
    """Mean of Sigma_jj: the per-row variance of off-block entries is Sigma_hat_ii * this / n."""
    return float(model.diagonal().mean()) / float(n)


def _exceedances(model: BlockModel, n: float, diag_hat: np.ndarray, extra_sd: float, threshold: float, rng):
    """Off-block entries of ``Sigma_hat + G`` (G symmetric N(0, extra_sd^2), or none) whose
    magnitude reaches ``threshold``: a Poisson number at uniform random off-block pairs, values
    from the Gaussian tail. Returns upper triples and the expected count."""
    d, s, B = model.n_features, model.block_size, model.n_blocks
    pairs = (d * d - B * s * s - model.n_bulk) / 2.0
    sd = math.sqrt(float(np.mean(diag_hat)) * _offblock_scale2(model, n) + extra_sd**2)
    log_p = math.log(2.0) + float(special.log_ndtr(-threshold / sd))
    mean = pairs * math.exp(log_p)
    count = int(rng.poisson(mean)) if mean > 0 else 0
    if count == 0:
        return (np.zeros(0, np.int64),) * 2 + (np.zeros(0),), mean
    unit = np.concatenate([np.arange(B * s) // s, B + np.arange(model.n_bulk)])
    rows, cols = [], []
    while len(rows) < count:
        i, j = rng.integers(0, d, size=2)
        if unit[i] != unit[j]:
            rows.append(min(i, j))
            cols.append(max(i, j))
    u = open_uniforms(rng, count)
    tail = np.exp(log_p - math.log(2.0))  # P(N > threshold / sd)
    mag = -sd * special.ndtri(u * tail)
    signs = np.where(rng.random(count) < 0.5, -1.0, 1.0)
    return (np.array(rows), np.array(cols), signs * mag), mean
