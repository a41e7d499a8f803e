"""Analyze Gauss (Dwork, Talwar, Thakurta and Zhang 2014): dense DP PCA by symmetric Gaussian
noise on the second moment of norm-clipped rows, then the top eigenvector."""

from __future__ import annotations

import math
from typing import Any

import dask.array as da
import numpy as np

from dpdist.algorithms._base import Estimator, check_int, check_nonfinite, check_positive, nonfinite_note
from dpdist.algorithms.baselines._common import triples_to_csr
from dpdist.algorithms.expmech_pca import leading_eigenvector
from dpdist.data.validation import as_dask_array
from dpdist.engine.gram import DEFAULT_TILE, clipped_second_moment, nonfinite_guard
from dpdist.engine.runtime import DEFAULT_TIMEOUT, check_scheduler, check_timeout, compute
from dpdist.engine.second_moment import chunk_clip_rows
from dpdist.engine.threshold import threshold_triples
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
from dpdist.privacy.expmech_calibration import (
    analyze_gauss_calibration,
    davis_kahan_sin2,
    sampling_operator_error,
    symmetric_gaussian_operator_bound,
)
from dpdist.privacy.noise import FLOAT_NOISE_CAVEAT, NoiseField, resolve_random_state
from dpdist.privacy.release import Release, warn_if_unsafe

__all__ = ["AnalyzeGauss", "block_row_norm_clip", "row_norm_clip"]

MECHANISM = "Analyze Gauss (Dwork-Talwar-Thakurta-Zhang 2014): Gaussian noise on the second moment of norm-clipped rows"


def block_row_norm_clip(x: np.ndarray, row_norm: float) -> np.ndarray:
    """Scale each row (whole rows: all columns) to L2 norm at most ``row_norm`` *as computed*
    (:func:`dpdist.engine.second_moment.chunk_clip_rows`: robust norms, no overflow at
    1e154, no underflow for subnormal rows; zero rows stay 0; non-finite rows become 0)."""
    return chunk_clip_rows(x, float(row_norm))


def row_norm_clip(X: da.Array, row_norm: float) -> da.Array:
    """Lazy ``x_i * min(1, L / ||x_i||)`` on blocks of whole rows (columns in one chunk)."""
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    return X.map_blocks(block_row_norm_clip, float(row_norm), dtype=np.float64)


class AnalyzeGauss(Estimator):
    """(epsilon, delta)-DP leading principal component by Analyze Gauss (DTTZ 2014). Dense baseline.

    Parameters
    ----------
    epsilon, delta : float
    row_norm : float
        Public L2 bound L: each row is scaled to norm at most L before the second moment.
    random_state : None or int
    beta : float
        Failure probability used by :meth:`plan`.
    scheduler, tile_size, on_nonfinite, timeout
        As for the other estimators (:mod:`dpdist.engine.runtime` for scheduler and timeout).

    Attributes
    ----------
    components_ : ndarray of shape (1, d)
        Unit top eigenvector of the released noisy second moment.
    covariance_ : ndarray (d, d)
        The released ``(1/n) sum x x^T + E`` (E symmetric Gaussian).
    noise_scale_ : float
    privacy_, release_

    Notes
    -----
    **Guarantee.** (epsilon, delta)-DP under replace-one neighbours, for any input.
    **Sensitivity.** Rows of norm <= L: replacing one row moves ``(1/n) sum x x^T`` by at
    most ``2 L^2 / n`` in Frobenius norm, hence the released upper triangle (diagonal
    included) by at most that in L2 (DTTZ14 state 1 for add/remove neighbours, unnormalised,
    L = 1). **Mechanism.** i.i.d. ``N(0, s^2)`` on the upper triangle, mirrored, with
    ``s`` from :func:`~dpdist.privacy.expmech_calibration.analyze_gauss_calibration` (classic
    Gaussian mechanism for epsilon < 1, analytic Balle-Wang for epsilon >= 1); the
    eigenvector is post-processing. The noise is dense d x d, ``||E||_op ~ 3 s sqrt(d)``, so
    its error grows with d: the dense baseline. Noise is added tile by tile on the workers.
    Floating point: rows are scaled to norm at most L as computed before the product, and the
    noise is calibrated for ``kappa(n)`` times the sensitivity
    (:func:`~dpdist.privacy.calibration.gram_rounding_factor`). Non-finite rows become zero
    rows (``on_nonfinite="zero"``, the default; "raise" reveals one bit). Caveat:
    floating-point noise (no snapping).
    """

    def __init__(self, epsilon: float, delta: float, *, row_norm: float, random_state: Any = None,
                 beta: float = 0.1, scheduler: Any = None, tile_size: int = DEFAULT_TILE,
                 on_nonfinite: str = "zero", timeout: float | None = DEFAULT_TIMEOUT) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.row_norm = row_norm
        self.random_state = random_state
        self.beta = beta
        self.scheduler = scheduler
        self.tile_size = tile_size
        self.on_nonfinite = on_nonfinite
        self.timeout = timeout

    def _calibration(self, n: int) -> dict:
        eps = check_epsilon(self.epsilon)
        delta = check_delta(self.delta)
        check_positive(self.row_norm, "row_norm")
        return analyze_gauss_calibration(eps, delta, n, self.row_norm)

    def plan(self, n_samples: int, n_features: int, *, sigma: float | None = None,
             eigengap: float | None = None) -> dict:
        """Noise scale and predicted error for a data size; reads no data.

        ``noise_operator_bound`` bounds ``||E||_op`` w.p. >= 1 - beta/2. With ``sigma``
        (sub-Gaussian scale) and ``eigengap`` (absolute), ``sin2_bound`` is Davis-Kahan
        applied to noise plus Lemma 2's sampling error (s = d), assuming no row is clipped.
        """
        n = check_int(n_samples, "n_samples", low=1)
        d = check_int(n_features, "n_features", low=2)
        beta = check_positive(self.beta, "beta")
        cal = self._calibration(n)
        noise_op = symmetric_gaussian_operator_bound(cal["gaussian_sigma"], d, beta / 2)
        out = {"n_samples": n, "n_features": d, "noise_scale": cal["gaussian_sigma"],
               "noise_operator_bound": noise_op, "calibration": cal}
        if sigma is not None:
            samp = sampling_operator_error(sigma, n, d, d, beta / 2)
            out["sampling_operator_bound"] = samp
            out["operator_error_bound"] = noise_op + samp
            if eigengap is not None:
                out["sin2_bound"] = davis_kahan_sin2(noise_op + samp, eigengap)
        return out

    def fit(self, X: Any, y: Any = None) -> "AnalyzeGauss":
        """Release the noisy second moment and its top eigenvector (one PrivacyWarning when seeded)."""
        tile = check_int(self.tile_size, "tile_size")
        check_scheduler(self.scheduler)
        timeout = check_timeout(self.timeout)
        check_nonfinite(self.on_nonfinite)
        seed = resolve_random_state(self.random_state)
        X = as_dask_array(X)
        n, d = (int(s) for s in X.shape)
        cal = self._calibration(n)
        Xg, finite = nonfinite_guard(X, self.on_nonfinite)
        Y = row_norm_clip(Xg, cal["row_norm"])
        S = clipped_second_moment(Y, math.inf, tile=tile)
        noise = NoiseField(seed, "analyze-gauss/gaussian", "gaussian", cal["gaussian_sigma"], symmetric=True)
        results = compute(*threshold_triples(S, 0.0, noise, guard=finite), scheduler=self.scheduler,
                          timeout=timeout)
        M = triples_to_csr(list(results), d).toarray()
        v, lam = leading_eigenvector(M)
        notes = [FLOAT_NOISE_CAVEAT, f"Gaussian scale rule: {cal['rule']}",
                 "components are post-processing (top eigenvector of the released noisy matrix)",
                 nonfinite_note(self.on_nonfinite)]
        rel = warn_if_unsafe(Release(
            mechanism=MECHANISM,
            privacy=ApproxDP(check_epsilon(self.epsilon), check_delta(self.delta)),
            parameters={"n_samples": n, "n_features": d, "row_norm": cal["row_norm"],
                        "sensitivity": cal["sensitivity"], "float_factor": cal["float_factor"], "rule": cal["rule"],
                        "on_nonfinite": self.on_nonfinite},
            noise_scales={"gaussian": cal["gaussian_sigma"]},
            values={"components": v[None, :], "covariance": M, "eigenvalue": lam},
            seeding=seed.describe(),
            notes=tuple(notes),
        ))
        self.components_ = v[None, :]
        self.covariance_ = M
        self.noise_scale_ = cal["gaussian_sigma"]
        self.privacy_ = rel.privacy
        self.release_ = rel
        return self
