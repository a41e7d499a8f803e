"""Forecast, from public parameters only, of whether PrivNorm's and PrivPCA's private tests pass.

The plans of :class:`~dpdist.SpectralNorm` and :class:`~dpdist.SparsePCA` use this module to
say, before anything is read or spent, how likely a fit is to return a result rather than
``NoPrivateResult``. Nothing here sees data: the inputs are the estimator's parameters
(k, gap, sigma, the budget, m, tau), the planned size (n, d) and the planned ``lambda_1``.

Reference instance
------------------
The plan cannot know the data's covariance; it assumes the one the estimator's model states
at the given parameters: the Model-2 sparse spike of
:func:`~dpdist.data.block_models.model2_block_model` (Gaussian rows, top eigenvalue
``lambda_1``, second ``(1 - gap) lambda_1``, a flat k-sparse top eigenvector, bulk variance
``(1 - gap) lambda_1``). Data far from it (a smaller eigengap than ``gap``, a top
eigenvector spread over more than k coordinates) can fail tests the plan predicts to pass.

How the probabilities are computed
----------------------------------
- One batch of ``b`` rows (``b`` the smallest batch size): a seeded Monte Carlo sample of its
  support-block second moment (exact Wishart draws) and the two largest bulk diagonal
  entries (exact order statistics), thresholded at tau as the estimator does. This gives the
  probability ``q`` that a batch is good (Definition 4: k-RCS, ``lambda_2 <= (1 - gap/2)
  lambda_1``, and ``lambda_1 > 0`` or ``lambda_1 >= (1 - gap/2) lambda_hat``) and the
  FriendlyCore weight ``p_i`` of a batch (its friends among the sampled batches: support
  blocks within ``2 tau`` in max norm). Off-support entries are taken to stay below tau and
  not to separate batches (as in :func:`~dpdist.simulate.simulate_privpca`).
- Good-set count test: ``|C| ~ Binomial(m, q)`` (batches are independent), and the test
  passes when ``|C| + L >= 0.8 m + bound`` with ``L`` the bounded Laplace noise of the test.
- Friend-weight test: ``Z = sum_i p_i`` approximated as normal with the sampled mean and
  variance of ``p_i`` (times m), then the same noise and threshold rule.
- PrivPCA: ``lambda_hat = ||T_5tau(Sigma)||_op + N(0, sigma_norm^2)`` (Sigma_bar taken equal
  to Sigma), integrated over its law on 256 stratified points; PrivPCA runs only when
  ``lambda_hat > 0``.

The count and weight tests draw independent noise; their joint pass probability is taken as
the product. The sample is drawn from a fixed seed, so a plan is a deterministic function of
its parameters. Near a test's transition the pass probability turns on the third decimal of
``q`` (the count's spread is ``sqrt(m q (1 - q))`` batches), finer than the sample resolves:
each probability comes with a ``*_range``, its values at ``q`` plus and minus two Monte Carlo
standard errors. ``benchmarks/bench_friendly_forecast.py`` checks these forecasts against pass
rates measured on seeded simulated runs of the estimator's own tests.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

__all__ = ["BatchForecast", "REJECTION_LEVEL", "batch_forecast", "count_pass_probability", "weight_pass_probability"]

#: A plan whose predicted probability that the fit returns a result is below this says the
#: release "will be rejected" (an unmet condition; ``require_useful=True`` refuses it).
REJECTION_LEVEL = 0.5

#: Monte Carlo sample sizes of one batch's statistics (goodness; friendship among batches).
GOOD_DRAWS = 32768
#: Cap on the values of the batch sample (draws x k x k): fewer draws for large k.
DRAW_VALUES = 1 << 22
FRIEND_DRAWS = 384
#: Stratified points of lambda_hat's law.
LAMBDA_POINTS = 256
_SEED = 20260
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(48)


def _bounded_laplace_sf(t: np.ndarray, scale: float, bound: float) -> np.ndarray:
    """``P[X >= t]`` for ``X`` Laplace(scale) conditioned on ``|X| <= bound``."""
    t = np.clip(np.asarray(t, dtype=np.float64), -bound, bound)
    mass = -math.expm1(-bound / scale)  # P[|X| <= bound] of the unconditioned law
    # P[t <= X <= bound] / mass, for X Laplace(scale)
    tail = 0.5 * np.exp(-np.abs(t) / scale)  # P[X >= |t|] (never overflows)
    above = np.where(t >= 0, tail, 1.0 - tail)  # P[X >= t]
    upper = above - 0.5 * math.exp(-bound / scale)
    return np.clip(upper / mass, 0.0, 1.0)


def count_pass_probability(q, m: int, threshold: float, scale: float, bound: float) -> np.ndarray:
    """P[the good-set count test passes] when ``|C| ~ Binomial(m, q)``: ``|C| + L >= threshold``,
    ``L`` bounded Laplace(scale, bound). ``q`` may be an array."""
    q = np.atleast_1d(np.asarray(q, dtype=np.float64))
    lo = max(0, math.ceil(threshold - bound))
    hi = min(m, math.floor(threshold + bound))
    out = stats.binom.sf(hi, m, q)  # |C| > hi passes whatever the noise
    if hi >= lo:
        c = np.arange(lo, hi + 1)
        pmf = stats.binom.pmf(c[None, :], m, q[:, None])
        out = out + (pmf * _bounded_laplace_sf(threshold - c, scale, bound)[None, :]).sum(axis=1)
    return np.clip(out, 0.0, 1.0)


def weight_pass_probability(z_mean: float, z_sd: float, threshold: float, scale: float, bound: float) -> float:
    """P[the friend-weight test passes] when ``Z ~ N(z_mean, z_sd^2)``: ``Z + xi >= threshold``."""
    z = z_mean + z_sd * _GH_NODES
    mean = np.sum(_GH_WEIGHTS * _bounded_laplace_sf(threshold - z, scale, bound)) / math.sqrt(2 * math.pi)
    return float(np.clip(mean, 0.0, 1.0))


@dataclass(frozen=True)
class BatchForecast:
    """One batch's statistics on the reference instance (see the module docstring)."""

    good_cond: np.ndarray  # (draws,) bool: k-RCS and lambda_2 <= (1 - gap/2) lambda_1
    lam1: np.ndarray  # (draws,) top eigenvalue of T_tau(Sigma_i)
    weight_mean: float  # E[p_i]
    weight_var: float  # Var[p_i]
    norm_of_thresholded: float  # ||T_5tau(Sigma)||_op
    gap: float

    def q_norm(self) -> float:
        """P[a batch is good] for PrivNorm (``lambda_1 > 0``)."""
        return float(np.mean(self.good_cond & (self.lam1 > 0)))

    def q_pca(self, lambda_hat) -> np.ndarray:
        """P[a batch is good] for PrivPCA at each ``lambda_hat`` (``lambda_1 >= (1 - gap/2) lambda_hat``)."""
        lh = np.atleast_1d(np.asarray(lambda_hat, dtype=np.float64))
        cut = (1.0 - self.gap / 2.0) * lh
        lam = np.sort(np.where(self.good_cond, self.lam1, -np.inf))
        # fraction of draws with good_cond and lam1 >= cut (cut > 0 here)
        return 1.0 - np.searchsorted(lam, cut, side="left") / lam.size

    def standard_error(self, q) -> np.ndarray:
        """Monte Carlo standard error of an estimated batch probability ``q``."""
        q = np.asarray(q, dtype=np.float64)
        return np.sqrt(np.maximum(q * (1.0 - q), 0.25 / self.lam1.size) / self.lam1.size)

    def z_moments(self, m: int) -> tuple[float, float]:
        """Mean and standard deviation of ``Z = sum_i p_i`` over m batches."""
        return m * self.weight_mean, math.sqrt(m * self.weight_var)


@functools.lru_cache(maxsize=64)
def batch_forecast(n_features: int, k: int, gap: float, lambda_1: float, batch_size: int, tau: float
                   ) -> BatchForecast:
    """Sample one batch's statistics on the reference instance (fixed seed: deterministic).

    A pure function of public scalars, so it is cached: one fit (and one ``dpdist run``, which
    plans before reserving and again in the fit) draws the sample once. The returned arrays
    are read-only."""
    from dpdist.data.block_models import bulk_top_two, model2_block_model, wishart_blocks

    model = model2_block_model(int(n_features), int(k), gap=float(gap), lambda1=float(lambda_1), random_state=0)
    rng = np.random.default_rng(np.random.SeedSequence(_SEED, spawn_key=(int(n_features), int(k), int(batch_size))))
    b = float(batch_size)
    draws = int(min(GOOD_DRAWS, max(1024, DRAW_VALUES // (k * k))))
    chol = np.broadcast_to(model.cholesky(), (draws, k, k))
    if batch_size >= k:  # exact Wishart draws (Bartlett)
        blocks = wishart_blocks(np.broadcast_to(model.blocks, (draws, k, k)), b, rng, chol=chol)
    else:  # fewer rows than support coordinates: the rows themselves (few numbers)
        rows = rng.standard_normal((draws, int(batch_size), k)) @ model.cholesky()[0].T
        blocks = np.einsum("nbi,nbj->nij", rows, rows) / b
    bulk2 = bulk_top_two(rng, model.n_bulk, model.bulk_variance, np.full(draws, int(batch_size)))
    kept = np.where(np.abs(blocks) > tau, blocks, 0.0)
    krcs = (kept != 0).sum(axis=2).max(axis=1) <= k
    bw = np.linalg.eigvalsh(kept)[:, ::-1]
    top = bw[:, :2] if k > 1 else np.column_stack([bw[:, 0], np.full(draws, -np.inf)])
    cand = np.concatenate([top, np.where(bulk2 > tau, bulk2, 0.0 if model.n_bulk > 2 else -np.inf)], axis=1)
    cand = -np.sort(-cand, axis=1)
    lam1, lam2 = cand[:, 0], cand[:, 1]
    with np.errstate(invalid="ignore"):
        good = krcs & (lam2 <= (1.0 - gap / 2.0) * lam1)
    # friendship among FRIEND_DRAWS batches: support blocks within 2 tau in max norm
    iu = np.triu_indices(k)
    flat = blocks[:FRIEND_DRAWS][:, iu[0], iu[1]]
    sep = np.stack([(np.abs(flat - row) > 2.0 * tau).any(axis=1) for row in flat])
    friend_fraction = 1.0 - sep.sum(axis=1) / FRIEND_DRAWS
    p = np.clip(6.0 * friend_fraction - 3.0, 0.0, 1.0)
    # ||T_5tau(Sigma)||_op on the reference instance
    sb = np.where(np.abs(model.blocks[0]) > 5 * tau, model.blocks[0], 0.0)
    norm = float(np.max(np.abs(np.linalg.eigvalsh(sb)))) if sb.any() else 0.0
    if model.n_bulk and model.bulk_variance > 5 * tau:
        norm = max(norm, model.bulk_variance)
    good.setflags(write=False)
    lam1.setflags(write=False)
    return BatchForecast(good, lam1, float(p.mean()), float(p.var()), norm, float(gap))


def lambda_hat_points(center: float, sd: float) -> np.ndarray:
    """Stratified points of ``N(center, sd^2)`` (equal probability each)."""
    u = (np.arange(LAMBDA_POINTS) + 0.5) / LAMBDA_POINTS
    return center + sd * special.ndtri(u)
