"""Simulated thresholding: non-private hard thresholding and the Wang-Xu Gaussian baseline, with
the threshold and the noise scale from the estimators' own ``plan()``.

Approximate: the exceedances off the blocks are Poisson with the Gaussian tail rate.
"""

from __future__ import annotations

import math

import numpy as np

from dpdist.data.block_models import BlockModel, block_triples, open_uniforms
from dpdist.privacy.noise.streams import gaussian_from_uniform
from dpdist.simulate.draws import _exceedances, _sample_hat
from dpdist.simulate.errors import _op_error, _sin2
from dpdist.simulate.result import SIMULATED, SimResult, clip_probability

__all__ = ["simulate_thresholded", "simulate_wang_xu"]


def _threshold_estimate(model: BlockModel, n: float, threshold: float, noise_sd: float, rng, method: str,
                        error: str) -> SimResult:
    """Shared by non-private thresholding and Wang-Xu: ``T_lambda(Sigma_hat + G)`` (diagonal
    always kept), G symmetric Gaussian (noise_sd = 0: none)."""
    blocks, bulk = _sample_hat(model, n, rng)
    if noise_sd > 0:
        B, s, _ = blocks.shape
        iu = np.triu_indices(s)
        g = np.zeros_like(blocks)
        g[:, iu[0], iu[1]] = gaussian_from_uniform(open_uniforms(rng, (B, iu[0].size)), noise_sd)
        g = g + np.transpose(np.triu(g, 1), (0, 2, 1))
        blocks = blocks + g
        bulk = bulk + gaussian_from_uniform(open_uniforms(rng, bulk.size), noise_sd)
    diag_hat = np.concatenate([np.einsum("bii->bi", blocks).ravel(), bulk])
    r, c, v = block_triples(blocks, model.n_bulk, bulk)
    keep = (np.abs(v) >= threshold) | (r == c)
    (er, ec, ev), expected = _exceedances(model, n, diag_hat, noise_sd, threshold, rng)
    triples = (np.concatenate([r[keep], er]), np.concatenate([c[keep], ec]), np.concatenate([v[keep], ev]))
    err = _op_error(model, triples) if error == "operator" else _sin2(model, triples)
    return SimResult(err, True, {
        "label": SIMULATED, "method": method, "n_samples": float(n), "threshold": threshold,
        "noise_sd": noise_sd, "expected_offblock_exceedances": expected,
        "approximations": ["off-block entries Gaussian, independent, Poisson exceedances"],
    })


def simulate_thresholded(model: BlockModel, n: float, rng, *, sigma: float | None = None,
                         error: str = "operator") -> SimResult:
    """Non-private hard thresholding (:class:`~dpdist.baselines.ThresholdedCovariance` /
    :class:`~dpdist.baselines.ThresholdedPCA` with ``sigma``): threshold from the estimator's plan."""
    from dpdist.baselines import ThresholdedPCA

    sigma = math.sqrt(model.sigma2) if sigma is None else float(sigma)
    lam = ThresholdedPCA(sigma=sigma).plan(max(2, int(n)), model.n_features).threshold
    out = _threshold_estimate(model, n, lam, 0.0, rng, "thresholded (NOT PRIVATE)", error)
    out.info["p_clip"] = 0.0  # no clipping in this estimator
    return out


def simulate_wang_xu(model: BlockModel, n: float, epsilon: float, delta: float, rng, *,
                     sigma: float | None = None, beta: float = 0.1, error: str = "operator") -> SimResult:
    """Wang-Xu (:class:`~dpdist.baselines.GaussianCovariance` / ``GaussianPCA`` with ``sigma``):
    clip, Gaussian scale and threshold from the estimator's own ``plan()``."""
    from dpdist.baselines import GaussianCovariance

    sigma = math.sqrt(model.sigma2) if sigma is None else float(sigma)
    plan = GaussianCovariance(epsilon, delta, sigma=sigma, beta=beta, assume_centered=True).plan(max(2, int(n)),
                                                                                                 model.n_features)
    out = _threshold_estimate(model, n, plan.threshold, plan.gaussian_sigma, rng, "wang-xu", error)
    out.info.update(p_clip=clip_probability(model, n, plan.clip), clip=plan.clip, epsilon=epsilon, delta=delta)
    return out
