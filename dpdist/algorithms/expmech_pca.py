"""ExpMechPCA (COLT 2026, Algorithm 4, Appendix F): exhaustive exponential-mechanism sparse PCA.

:func:`expmech_pca` does the math and returns a :class:`~dpdist.privacy.release.Release`;
:class:`ExpMechSparsePCA` is the scikit-learn-style wrapper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdist.algorithms._base import Estimator, check_nonfinite, nonfinite_note
from dpdist.data.validation import as_dask_array
from dpdist.engine.gram import clipped_second_moment, nonfinite_guard
from dpdist.engine.runtime import DEFAULT_TIMEOUT, check_scheduler, check_timeout, compute
from dpdist.engine.subsets import DEFAULT_CHUNK_SIZE, block_release, gumbel_max_subset
from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
from dpdist.privacy.expmech_calibration import (
    ExpMechCalibration,
    expmech_calibration,
    expmech_clip,
    expmech_error_bound,
    expmech_min_samples,
)
from dpdist.privacy.noise import FLOAT_NOISE_CAVEAT, NoiseSeed, gaussian_from_uniform, resolve_random_state
from dpdist.privacy.release import Release, warn_if_unsafe

__all__ = ["DEFAULT_MAX_SUBSETS", "ExpMechSparsePCA", "expmech_pca", "leading_eigenvector"]

#: Default refusal limit on C(d, k): about a minute per core at k = 3 (15 M subsets/s/core
#: measured on the project's 2-core machine; benchmarks/bench_expmech.py).
DEFAULT_MAX_SUBSETS = 10**9
#: Default failure probability beta of Theorem 7 (clip level and plan()).
DEFAULT_BETA = 0.1

MECHANISM = "ExpMechPCA (COLT 2026, Algorithm 4)"
SELECT_PURPOSE = "expmech/select"
BLOCK_PURPOSE = "expmech/block"


@dataclass(frozen=True)
class GumbelKeys:
    """``weight * score + Gumbel(0, 1)``, the Gumbel noise of rank ``r`` at position ``r``
    of stream 0 of the selection key: noise is a function of the subset, not of the chunking."""

    seed: NoiseSeed
    key: int
    weight: float

    def __call__(self, scores: np.ndarray, start: int) -> np.ndarray:
        u = self.seed.uniforms(self.key, 0, int(start), len(scores))
        return self.weight * np.asarray(scores, dtype=np.float64) - np.log(-np.log(u))


@dataclass(frozen=True)
class BlockGaussian:
    """``block + G_S`` with ``G`` the d x d matrix of i.i.d. N(0, sigma^2) entries of Algorithm 4
    (line 12): entry ``G[i, j]`` is position ``j`` of stream ``i`` of the block key."""

    seed: NoiseSeed
    key: int
    sigma: float

    def __call__(self, subset: np.ndarray, block: np.ndarray) -> np.ndarray:
        noise = np.stack([self.seed.uniforms_at(self.key, int(i), subset) for i in subset])
        return block + gaussian_from_uniform(noise, self.sigma)


def leading_eigenvector(A, n_features: int | None = None) -> tuple[np.ndarray, float]:
    """Unit top eigenvector (largest algebraic eigenvalue) of a symmetric matrix, and its eigenvalue.

    Dense ``numpy.linalg.eigh`` up to 2,000 columns or for dense input, ``scipy.sparse.linalg.eigsh``
    for larger sparse input. Sign convention: the entry of largest magnitude is positive.
    """
    import scipy.sparse as sp

    if sp.issparse(A) and A.shape[0] > 2000:
        from scipy.sparse.linalg import eigsh

        A = sp.csr_array(A, dtype=np.float64)
        A = (A + A.T) * 0.5
        vals, vecs = eigsh(A, k=1, which="LA", v0=np.ones(A.shape[0]))
        lam, v = float(vals[0]), vecs[:, 0]
    else:
        A = A.toarray() if sp.issparse(A) else np.asarray(A, dtype=np.float64)
        A = 0.5 * (A + A.T)
        vals, vecs = np.linalg.eigh(A)
        lam, v = float(vals[-1]), vecs[:, -1]
    v = v / np.linalg.norm(v)
    i = int(np.argmax(np.abs(v)))
    if v[i] < 0:
        v = -v
    return v, lam


def _resolve_clip(sigma, clip, n: int, d: int, beta: float) -> tuple[float, str]:
    if clip is not None:
        c = float(clip)
        if not (math.isfinite(c) and c > 0):
            raise ValidationError(f"clip must be finite and > 0, got {clip!r}")
        return c, "clip (user)"
    if sigma is None:
        raise ValidationError(
            "ExpMechSparsePCA needs a public bound: give sigma (sub-Gaussian scale; tau = 2 sigma "
            "sqrt(log(4 n d / beta)), Theorem 7) or clip (the entry truncation level tau)"
        )
    return expmech_clip(sigma, n, d, beta), "2 sigma sqrt(log(4 n d / beta)) (Theorem 7)"


def _check_params(k, epsilon, delta, sigma, clip, max_subsets, beta) -> None:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValidationError(f"k must be an integer >= 1, got {k!r}")
    check_epsilon(epsilon)
    check_delta(delta)
    if sigma is not None:
        s = float(sigma)
        if not (math.isfinite(s) and s > 0):
            raise ValidationError(f"sigma must be finite and > 0, got {sigma!r}")
    if clip is not None:
        c = float(clip)
        if not (math.isfinite(c) and c > 0):
            raise ValidationError(f"clip must be finite and > 0, got {clip!r}")
    if isinstance(max_subsets, bool) or not isinstance(max_subsets, (int, np.integer)) or max_subsets < 1:
        raise ValidationError(f"max_subsets must be an integer >= 1, got {max_subsets!r}")
    b = float(beta)
    if not 0 < b < 1:
        raise ValidationError(f"beta must lie in the open interval (0, 1), got {beta!r}")


def _check_range(cal: ExpMechCalibration, max_subsets: int) -> None:
    if cal.n_subsets >= 1 << 62:
        raise ValidationError(
            f"C({cal.n_features}, {cal.k}) = {cal.n_subsets:.3e} supports exceed the 2**62 noise "
            "positions of one stream; ExpMechPCA cannot run at this size"
        )
    if cal.n_subsets > max_subsets:
        raise ValidationError(
            f"ExpMechPCA enumerates all C(d, k) = C({cal.n_features}, {cal.k}) = {cal.n_subsets:,} "
            f"supports, more than max_subsets = {max_subsets:,}; raise max_subsets if you mean it "
            "(there is no inexact fallback), or use SparsePCA (PrivPCA)"
        )


def expmech_pca(
    X: Any,
    k: int,
    epsilon: float,
    delta: float,
    *,
    sigma: float | None = None,
    clip: float | None = None,
    max_subsets: int = DEFAULT_MAX_SUBSETS,
    beta: float = DEFAULT_BETA,
    random_state: Any = None,
    scheduler: Any = None,
    on_nonfinite: str = "zero",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> Release:
    """Private k-sparse leading eigenvector by the exhaustive exponential mechanism.

    Parameters
    ----------
    X : array-like, dask array, zarr.Array or str
        ``(n, d)`` data, rows are individuals, assumed mean-zero (the second moment is used).
    k : int
        Support size of the released vector.
    epsilon, delta : float
        Total budget; ``epsilon/2`` selects the support, ``(epsilon/2, delta)`` releases the
        block (Lemma 29).
    sigma : float, optional
        Public sub-Gaussian scale; sets ``tau = 2 sigma sqrt(log(4 n d / beta))`` when
        ``clip`` is not given.
    clip : float, optional
        Public entry truncation level tau (overrides ``sigma`` for the clip).
    max_subsets : int
        Refuse (``ValidationError``) when ``C(d, k)`` exceeds it, before reading data.
    beta : float
        Failure probability used for tau (and by ``plan``).
    random_state : None or int
        ``None``: OS entropy (the only mode for real releases); int: seeded, for tests.
    scheduler : optional
        See :func:`dpdist.engine.runtime.compute`.
    on_nonfinite : {"zero", "raise"}, default "zero"
        "zero": rows holding NaN or inf become zero rows before any statistic (uncounted).
        "raise": explicit validation mode, refuse before releasing (reveals one bit, recorded
        in the release's notes).
    chunk_size : int
        Subsets per task of the enumeration (does not change the output).
    timeout : float or None, default one day
        Seconds for the fit; see :mod:`dpdist.engine.runtime`.

    Returns
    -------
    Release
        ``values``: ``components`` (1, d) unit vector supported on ``support``, ``support``
        (k,), ``noisy_block`` (the released ``Sigma_hat_S + G_S``, not symmetrised), and
        ``block_eigenvalue`` (top eigenvalue of the symmetrised noisy block).

    Notes
    -----
    Guarantee: ``(epsilon, delta)``-DP under replace-one neighbours (rows), for every input,
    by Lemma 29 of the COLT 2026 paper. Entries are truncated to ``[-tau, tau]`` with a
    public tau; the score ``lambda_1(Sigma_hat_S)`` of each support S has global sensitivity
    ``2 k tau^2 / n`` and the ``k x k`` block the same Frobenius sensitivity. The support is
    drawn by the exponential mechanism at ``epsilon/2`` (Lemma 28), sampled exactly by
    Gumbel-max: ``argmax_S epsilon n q(S) / (8 k tau^2) + Gumbel_S`` over all ``C(d, k)``
    supports; the block is released with i.i.d. ``N(0, sigma_priv^2)`` noise at
    ``(epsilon/2, delta)`` (Fact 2), ``sigma_priv`` as printed in line 11 or larger (see
    :func:`~dpdist.privacy.expmech_calibration.expmech_calibration`); symmetrising and the
    eigenvector are post-processing; basic composition gives ``(epsilon, delta)``.

    Cost: ``C(d, k)`` score evaluations, and every enumeration task holds the dense
    ``d x d`` clipped second moment (``8 d^2`` bytes; ``plan()`` reports it).

    Caveats: the guarantee is for the idealised real-valued mechanism (floating-point
    scores, Gumbel and Gaussian noise by inverse CDF of 53-bit uniforms, no snapping). Only
    the winning support and the noisy block leave the workers; the noisy maximum and the
    scores do not. ``on_nonfinite="raise"`` refuses data with NaN/inf: the check runs in the
    same pass and the release task outputs nothing when it fails (the refusal itself reveals
    one bit). Floating point: the Gumbel weight and the block noise use the sensitivities of
    the computed scores and block
    (:func:`~dpdist.privacy.expmech_calibration.expmech_calibration`).
    """
    _check_params(k, epsilon, delta, sigma, clip, max_subsets, beta)
    check_nonfinite(on_nonfinite)
    check_scheduler(scheduler)
    timeout = check_timeout(timeout)
    Xd = as_dask_array(X, min_rows=1, min_cols=1)
    n, d = (int(s) for s in Xd.shape)
    k = int(k)
    if k > d:
        raise ValidationError(f"k must satisfy 1 <= k <= d = {d}, got k={k}")
    tau, clip_source = _resolve_clip(sigma, clip, n, d, beta)
    cal = expmech_calibration(epsilon, delta, n, d, k, tau)
    _check_range(cal, int(max_subsets))
    seed = resolve_random_state(random_state)

    Xg, all_finite = nonfinite_guard(Xd, on_nonfinite)
    M = clipped_second_moment(Xg, tau)
    perturb = GumbelKeys(seed, seed.key(SELECT_PURPOSE), cal.gumbel_weight)
    release_fn = BlockGaussian(seed, seed.key(BLOCK_PURPOSE), cal.gaussian_sigma)
    rank = gumbel_max_subset(M, k, perturb, chunk_size=chunk_size)
    # as a Delayed on the unoptimised graph the finiteness check shares the data's keys with
    # the second moment (each chunk is read once); the release task checks it on the worker
    guard = None if all_finite is None else all_finite.to_delayed(optimize_graph=False).ravel()[0]
    subset_d, block_d = block_release(M, rank, k, release_fn, guard=guard)
    subset, noisy_block = compute(subset_d, block_d, scheduler=scheduler, timeout=timeout)
    if all_finite is not None and noisy_block is None:
        raise ValidationError(
            "X contains NaN or infinite values; nothing was released (pass on_nonfinite='zero' "
            "to replace such rows by zero rows)"
        )
    subset = np.asarray(subset, dtype=np.int64)
    if subset.shape != (k,) or noisy_block is None:
        raise ValidationError("no support was selected: the scores were not finite; nothing was released")
    noisy_block = np.asarray(noisy_block, dtype=np.float64)
    u, lam = leading_eigenvector(noisy_block)
    components = np.zeros((1, d))
    components[0, subset] = u
    parameters = {
        "n_samples": n,
        "n_features": d,
        "k": k,
        "clip": tau,
        "clip_source": clip_source,
        "sigma": None if sigma is None else float(sigma),
        "beta": float(beta),
        "max_subsets": int(max_subsets),
        "on_nonfinite": on_nonfinite,
        "budget_split": {
            "selection": {"epsilon": cal.selection_epsilon, "delta": 0.0},
            "block": {"epsilon": cal.release_epsilon, "delta": cal.release_delta},
        },
        "calibration": cal.to_dict(),
    }
    notes = (
        FLOAT_NOISE_CAVEAT,
        "support drawn exactly by Gumbel-max over all C(d, k) supports (Lemma 28 at epsilon/2); "
        "Gumbel noise of subset rank r is a function of (seed, r) only",
        f"block noise scale: {cal.gaussian_rule}",
        "components are post-processing of the noisy block (symmetrised, top eigenvector)",
        nonfinite_note(on_nonfinite),
    )
    return warn_if_unsafe(Release(
        mechanism=MECHANISM,
        privacy=ApproxDP(cal.epsilon, cal.delta),
        parameters=parameters,
        noise_scales={"selection_gumbel_scale": cal.gumbel_scale, "block_gaussian_sigma": cal.gaussian_sigma},
        values={
            "components": components,
            "support": subset,
            "noisy_block": noisy_block,
            "block_eigenvalue": lam,
        },
        seeding=seed.describe(),
        notes=notes,
    ))


class ExpMechSparsePCA(Estimator):
    """Private leading k-sparse principal component by the exponential mechanism (Algorithm 4).

    Parameters
    ----------
    k : int
        Support size.
    epsilon, delta : float
        Privacy budget (replace-one neighbours).
    sigma : float, optional
        Public sub-Gaussian scale (sets the clip level, and is needed by :meth:`plan`).
    clip : float, optional
        Public entry truncation level tau.
    max_subsets : int
        Refusal limit on ``C(d, k)`` (default :data:`DEFAULT_MAX_SUBSETS`).
    beta : float
        Failure probability for the clip level and :meth:`plan`.
    random_state : None or int
        ``None`` for OS entropy; an int seeds the noise (tests and reproduction only).
    scheduler : optional
        Where the graph runs (:func:`dpdist.engine.runtime.compute`).
    on_nonfinite : {"zero", "raise"}, default "zero"
        See :func:`expmech_pca`.
    chunk_size : int
        Subsets per task.
    timeout : float or None, default 86400 (one day)
        Seconds for the fit; None for no limit (:mod:`dpdist.engine.runtime`).

    Attributes
    ----------
    components_ : ndarray of shape (1, n_features)
        Unit vector supported on ``support_``.
    support_ : ndarray of shape (k,)
    noise_scale_ : float
        Gaussian scale of the block release (sigma_priv).
    selection_scale_ : float
        Gumbel scale of the selection, in score units (``8 k tau^2 / (epsilon n)``).
    clip_ : float
    privacy_ : ApproxDP
    release_ : Release

    Notes
    -----
    Guarantee: ``(epsilon, delta)``-DP under replace-one neighbours, Lemma 29 of the COLT
    2026 paper; see :func:`expmech_pca` for sensitivities, the budget split and caveats.
    The cost is ``C(d, k)`` score evaluations (exact enumeration; refused above
    ``max_subsets``).

    Examples
    --------
    >>> from dpdist.data.model2 import make_model2
    >>> m = make_model2(20_000, 20, 2, gap=0.5, lambda1=2.0, random_state=0)
    >>> est = ExpMechSparsePCA(2, 1.0, 1e-6, sigma=m.sigma, random_state=0, scheduler="synchronous")
    >>> est.fit(m.X).components_.shape
    (1, 20)
    """

    def __init__(
        self,
        k: int,
        epsilon: float,
        delta: float,
        *,
        sigma: float | None = None,
        clip: float | None = None,
        max_subsets: int = DEFAULT_MAX_SUBSETS,
        beta: float = DEFAULT_BETA,
        random_state: Any = None,
        scheduler: Any = None,
        on_nonfinite: str = "zero",
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> None:
        self.k = k
        self.epsilon = epsilon
        self.delta = delta
        self.sigma = sigma
        self.clip = clip
        self.max_subsets = max_subsets
        self.beta = beta
        self.random_state = random_state
        self.scheduler = scheduler
        self.on_nonfinite = on_nonfinite
        self.chunk_size = chunk_size
        self.timeout = timeout

    def fit(self, X: Any, y: Any = None) -> "ExpMechSparsePCA":
        """Release the private leading sparse component of ``X`` (spends the budget once)."""
        rel = expmech_pca(
            X,
            self.k,
            self.epsilon,
            self.delta,
            sigma=self.sigma,
            clip=self.clip,
            max_subsets=self.max_subsets,
            beta=self.beta,
            random_state=self.random_state,
            scheduler=self.scheduler,
            on_nonfinite=self.on_nonfinite,
            chunk_size=self.chunk_size,
            timeout=self.timeout,
        )
        self.release_ = rel
        self.components_ = rel.values["components"]
        self.support_ = rel.values["support"]
        self.noise_scale_ = rel.noise_scales["block_gaussian_sigma"]
        self.selection_scale_ = rel.noise_scales["selection_gumbel_scale"]
        self.clip_ = rel.parameters["clip"]
        self.privacy_ = rel.privacy
        return self

    def _calibration(self, n_samples: int, n_features: int) -> ExpMechCalibration:
        _check_params(self.k, self.epsilon, self.delta, self.sigma, self.clip, self.max_subsets, self.beta)
        n, d = int(n_samples), int(n_features)
        tau, _ = _resolve_clip(self.sigma, self.clip, n, d, self.beta)
        return expmech_calibration(self.epsilon, self.delta, n, d, int(self.k), tau)

    def plan(self, n_samples: int, n_features: int, *, eigengap: float | None = None) -> dict:
        """Noise scales and the predicted error at this size, without reading data.

        Parameters
        ----------
        n_samples, n_features : int
        eigengap : float, optional
            Absolute eigengap ``lambda_1 - lambda_2`` of the population covariance (a model
            assumption); with it the plan includes the ``sin^2`` bound of Theorem 7's proof.

        Returns
        -------
        dict
            ``n_subsets``, ``feasible`` (``n_subsets <= max_subsets``), ``clip``,
            ``noise_scales``, the calibration, and (with ``sigma``) ``error``: the pieces of
            :func:`~dpdist.privacy.expmech_calibration.expmech_error_bound`, holding with
            probability >= 1 - beta.
        """
        cal = self._calibration(n_samples, n_features)
        out = {
            "mechanism": MECHANISM,
            "n_samples": cal.n_samples,
            "n_features": cal.n_features,
            "k": cal.k,
            "n_subsets": int(cal.n_subsets),
            "max_subsets": int(self.max_subsets),
            "feasible": cal.n_subsets <= int(self.max_subsets) and cal.n_subsets < 1 << 62,
            # the second moment is held densely by the enumeration's tasks
            "dense_second_moment_bytes": 8 * cal.n_features**2,
            "clip": cal.clip,
            "noise_scales": {
                "selection_gumbel_scale": cal.gumbel_scale,
                "block_gaussian_sigma": cal.gaussian_sigma,
            },
            "calibration": cal.to_dict(),
        }
        if self.sigma is not None:
            out["error"] = expmech_error_bound(cal, float(self.sigma), float(self.beta), eigengap)
        return out

    def min_samples(self, target_sin2: float, n_features: int, *, eigengap: float) -> int:
        """Least n for which :meth:`plan` predicts ``sin^2 <= target_sin2`` (needs ``sigma``)."""
        if self.sigma is None:
            raise ValidationError("min_samples needs sigma (the sub-Gaussian scale of the model)")
        _check_params(self.k, self.epsilon, self.delta, self.sigma, self.clip, self.max_subsets, self.beta)
        return expmech_min_samples(
            target_sin2,
            self.epsilon,
            self.delta,
            int(n_features),
            int(self.k),
            sigma=float(self.sigma),
            eigengap=eigengap,
            beta=float(self.beta),
            clip=None if self.clip is None else float(self.clip),
        )
