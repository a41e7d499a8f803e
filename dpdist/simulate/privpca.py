"""Simulated PrivNorm and PrivPCA, with the estimators' own steps called unchanged on the drawn
statistics, so the simulation applies the very same mechanism: the set-up, the private tests
and the two releases of :mod:`dpdist.algorithms.friendly_steps`, on the FriendlyCore
statistics container :class:`dpdist.engine.privpca.kernels.FriendlyStats` with the weights of
:func:`dpdist.engine.privpca.kernels.friendly_weights`.

Exact in law: the support-block moments of all m batches, the top two bulk diagonal values of
each batch, the private tests, the norm release, and the projector release (the estimator's
exact top-k^2 sampler). Approximate: batches are good and friends unless their support blocks
say otherwise; the probability that an off-support entry of a batch exceeds tau, or that two
batches are separated off the support, is computed and reported
(``approx_event_probability``); Sigma_bar's bulk diagonal is drawn as independent Gaussians
with the exact mean and variance of the weighted chi^2 average.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpdist.data.block_models import BlockModel, bulk_top_two, open_uniforms, wishart_blocks
from dpdist.exceptions import ValidationError
from dpdist.privacy.noise.streams import gaussian_from_uniform
from dpdist.simulate.result import SIMULATED, SimResult

__all__ = ["simulate_privnorm", "simulate_privpca"]


def simulate_privpca(model: BlockModel, n: float, epsilon: float, delta: float, rng, *, gap: float | None = None,
                     sigma: float | None = None, norm_fraction: float = 0.5, n_batches: int | None = None,
                     tau: float | None = None, beta: float | None = None) -> SimResult:
    """PrivNorm + PrivPCA (:class:`~dpdist.SparsePCA`, Theorem 3) on a Model-2 block model
    (one support block and a bulk), with the estimator's own set-up, tests and releases.

    The rows are taken as mean-zero: the estimator simulated is ``SparsePCA(...,
    assume_centered=True)``, whose whole budget goes to PrivNorm and PrivPCA. The default
    estimator first spends a share on a private mean (less budget for the tests, so
    more batches and a larger tau); compare with its plan only at ``assume_centered=True``.

    ``gap`` and ``sigma`` default to the model's (as a user who knows the model would pass).
    Returns sin^2 of the released component, 1.0 when a test returned bottom.
    """
    from dpdist.privacy.mechanisms.privpca.calibration import split_norm_and_pca_budget

    (en, dn), (ep, dp) = split_norm_and_pca_budget(epsilon, delta, norm_fraction)
    return _simulate_friendly(model, n, rng, (en, dn), (ep, dp), gap=gap, sigma=sigma, n_batches=n_batches,
                              tau=tau, beta=beta, epsilon=epsilon, delta=delta)


def simulate_privnorm(model: BlockModel, n: float, epsilon: float, delta: float, rng, *, gap: float | None = None,
                      sigma: float | None = None, n_batches: int | None = None, tau: float | None = None,
                      beta: float | None = None) -> SimResult:
    """PrivNorm alone (:class:`~dpdist.SpectralNorm`, Algorithm 3, the whole budget on the norm)
    on a Model-2 block model, with the estimator's own set-up, tests and release (the same
    draws as :func:`simulate_privpca`'s first stage).

    ``error`` is ``|lambda_hat - lambda_1| / lambda_1``, 1.0 when a test returned bottom;
    ``info["lambda_hat"]`` the released norm.
    """
    return _simulate_friendly(model, n, rng, (float(epsilon), float(delta)), None, gap=gap, sigma=sigma,
                              n_batches=n_batches, tau=tau, beta=beta, epsilon=epsilon, delta=delta)


def _simulate_friendly(model: BlockModel, n: float, rng, norm_budget, pca_budget, *, gap, sigma, n_batches, tau,
                       beta, epsilon, delta) -> SimResult:
    """The shared body of :func:`simulate_privpca` (``pca_budget`` given) and
    :func:`simulate_privnorm` (``pca_budget`` None: stop after the norm's release)."""
    from dpdist.algorithms.friendly_steps import friendly_setup, friendly_tests, release_norm, release_pca
    from dpdist.privacy.mechanisms.privpca.mechanism import (
        FriendlyTestMechanism,
        PrivNormMechanism,
        PrivPCAMechanism,
    )
    from dpdist.engine.privpca.kernels import FriendlyStats, friendly_weights
    from dpdist.privacy.noise.streams import NoiseSeed
    from dpdist.privacy.mechanisms.privpca.calibration import (
        DEFAULT_BETA,
        friendly_test_calibration,
        privnorm_calibration,
        privpca_calibration,
    )

    if model.n_blocks != 1:
        raise ValidationError("the PrivNorm / PrivPCA simulation needs a Model-2 block model (one support block plus a "
                              "bulk)")
    beta = DEFAULT_BETA if beta is None else float(beta)
    gap = model.gap if gap is None else float(gap)
    sigma = math.sqrt(model.sigma2) if sigma is None else float(sigma)
    d, k = model.n_features, model.k
    en, dn = norm_budget
    budgets = [norm_budget] if pca_budget is None else [norm_budget, pca_budget]
    setup = friendly_setup(int(n), d, k, gap, sigma, n_batches, tau, beta, budgets)
    m, t = setup.n_batches, setup.tau
    sizes = np.asarray(setup.sizes, dtype=np.int64)
    seed = NoiseSeed(int(rng.integers(0, 1 << 62)), seeded=True)
    info = {"label": SIMULATED, "method": "privnorm" if pca_budget is None else "privpca", "n_samples": float(n),
            "n_batches": m, "tau": t,
            "epsilon": epsilon, "delta": delta, "p_clip": 0.0,
            "approximations": ["batches separated or made non-k-RCS only by their support blocks; Sigma_bar's "
                               "bulk diagonal Gaussian with the exact moments; off-support entries below tau"]}
    # --- per-batch statistics (exact on the support block and for the bulk's top two) -------
    s = model.block_size
    reps = np.repeat(model.blocks, m, axis=0)
    batch_blocks = np.stack([wishart_blocks(model.blocks, float(b), rng)[0] for b in sizes]) if m <= 64 else None
    if batch_blocks is None:
        # group batches of equal size (at most two sizes) for one vectorised Bartlett draw each
        batch_blocks = np.empty((m, s, s))
        for b in np.unique(sizes):
            idx = np.flatnonzero(sizes == b)
            batch_blocks[idx] = wishart_blocks(reps[idx], float(b), rng)
    bulk2 = bulk_top_two(rng, model.n_bulk, model.bulk_variance, sizes)
    kept = np.where(np.abs(batch_blocks) > t, batch_blocks, 0.0)  # T_tau on the block
    row_counts = (kept != 0).sum(axis=2).max(axis=1)
    krcs = row_counts <= k
    bw = np.linalg.eigvalsh(kept)[:, ::-1]
    cand = np.concatenate([bw[:, :2] if s > 1 else np.column_stack([bw[:, 0], np.full(m, -np.inf)]),
                           np.where(bulk2 > t, bulk2, 0.0 if model.n_bulk > 2 else -np.inf)], axis=1)
    cand = -np.sort(-cand, axis=1)
    lam1, lam2 = cand[:, 0].copy(), cand[:, 1].copy()
    lam1[~krcs] = np.nan
    lam2[~krcs] = np.nan
    # friends: ||Sigma_i - Sigma_j||_max <= 2 tau, on the support block (exact)
    from scipy.spatial.distance import cdist

    iu = np.triu_indices(s)
    flat = batch_blocks[:, iu[0], iu[1]]
    sep = cdist(flat, flat, "chebyshev") > 2 * t
    friend_counts = (m - sep.sum(axis=1)).astype(np.int64)
    weights, z = friendly_weights(friend_counts, m)
    # probability of the events the simulation ignores (an off-support entry above tau in some
    # batch; two batches separated off the support), for the record
    bmin = float(sizes.min())
    v_off = model.lambda1 * max(model.bulk_variance, 1e-300) / bmin
    pairs_off = d * d / 2.0
    p_exceed = min(1.0, m * pairs_off * 2.0 * math.exp(float(special.log_ndtr(-t / math.sqrt(v_off)))))
    p_sep = min(1.0, m * m * pairs_off * 2.0 * math.exp(float(special.log_ndtr(-2 * t / math.sqrt(4 * v_off)))))
    info["approx_event_probability"] = min(1.0, p_exceed + p_sep)
    stats = FriendlyStats(m, d, sizes, np.ones(m, bool), krcs, lam1, lam2, friend_counts, weights, z)
    # Sigma_bar = sum p_i Sigma_i / Z: the support block exactly from the batch blocks; the bulk
    # diagonal (i.i.d. over coordinates) with the exact mean and variance of the weighted chi^2
    if z > 0:
        sbar = np.einsum("i,iab->ab", weights, batch_blocks) / z
        var = model.bulk_variance**2 * float(np.sum(weights**2 * 2.0 / sizes)) / z**2
    else:
        sbar, var = np.zeros((s, s)), 0.0
    bulk_bar = model.bulk_variance + math.sqrt(var) * gaussian_from_uniform(open_uniforms(rng, model.n_bulk), 1.0)
    r0, c0 = np.triu_indices(s)
    bv = sbar[r0, c0]
    keep = np.abs(bv) > 5 * t
    bulk_idx = s + np.arange(model.n_bulk)
    bk = np.abs(bulk_bar) > 5 * t
    entries = (np.concatenate([r0[keep], bulk_idx[bk]]), np.concatenate([c0[keep], bulk_idx[bk]]),
               np.concatenate([bv[keep], bulk_bar[bk]]))
    # --- the estimator's own tests and releases ---------------------------------------
    tests = FriendlyTestMechanism.from_calibration(friendly_test_calibration(en, dn, m), "norm")
    out = friendly_tests(stats, gap, None, tests, seed)
    info["tests"] = {"norm": out}
    if not (out["count_passed"] and out.get("weight_passed", False)):
        return SimResult(1.0, False, info)
    lam_hat = release_norm(entries, d, PrivNormMechanism.from_calibration(privnorm_calibration(en, dn, k, t)), seed)
    info["lambda_hat"] = lam_hat
    if pca_budget is None:
        return SimResult(abs(float(lam_hat) - model.lambda1) / model.lambda1, True, info)
    ep, dp = pca_budget
    if not lam_hat > 0:
        return SimResult(1.0, False, info)
    tests = FriendlyTestMechanism.from_calibration(friendly_test_calibration(ep, dp, m), "pca")
    out = friendly_tests(stats, gap, float(lam_hat), tests, seed)
    info["tests"]["pca"] = out
    if not (out["count_passed"] and out.get("weight_passed", False)):
        return SimResult(1.0, False, info)
    cal = privpca_calibration(ep, dp, k, t, gap, float(lam_hat))
    rel = release_pca(entries, d, k, PrivPCAMechanism.from_calibration(cal, d), seed)
    info["sigma_priv"] = cal.sigma
    vec = np.asarray(rel["values"], dtype=np.float64)
    cos = float(vec @ model.v1[rel["support"]]) / max(float(np.linalg.norm(vec)), 1e-300)
    return SimResult(max(0.0, 1.0 - cos * cos), True, info)
