"""The old floating-point noise of the second-moment mechanisms: kept as twins, not used to release.

The estimators release through the float-safe mechanism objects of
:mod:`dpdist.privacy.mechanisms.second_moment` (lattice noise, exactly sampled). The callables
here draw Gaussian and truncated-Laplace noise by inverse CDF of 53-bit uniforms and add it to
floats: Mironov (2012)'s setting, where outputs drawn under one dataset can be impossible under
its neighbour. issue 10 (item 5) keeps them so that the support test can show that they fail
it (tests/privacy/test_mechanism_support.py); the zCDP audits of :mod:`dpdist.testing` that
still call them check the calibration (the scale), which the two paths share.

Each is a small frozen, picklable callable keyed by a purpose and an index, like the
mechanism objects' noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpdist.privacy.mechanisms.second_moment import PURPOSE_LAMBDA, PURPOSE_LEVEL, PURPOSE_ONE_SHOT, PURPOSE_RADIUS
from dpdist.privacy.noise import NoiseSeed, bounded_laplace_from_uniform, gaussian_from_uniform

__all__ = [
    "GaussianHistogramNoise",
    "GUEMeanNoise",
    "PURPOSE_LAMBDA",
    "PURPOSE_LEVEL",
    "PURPOSE_ONE_SHOT",
    "PURPOSE_RADIUS",
    "gue_matrix",
    "gaussian_vector",
    "truncated_laplace",
]



def gue_matrix(seed: NoiseSeed, purpose: str, index: int, n_features: int, sigma: float) -> np.ndarray:
    """GUE(sigma^2) in MS25's normalisation (section 1): N_ij ~ N(0, sigma^2) i.i.d. for i <= j
    (diagonal included, variance sigma^2, not 2 sigma^2), N_ji = N_ij.

    The d(d+1)/2 draws fill the upper triangle in row-major order (``numpy.triu_indices``)
    from positions 0.. of stream ``index`` of ``purpose``.
    """
    d = int(n_features)
    u = seed.uniforms(purpose, int(index), 0, d * (d + 1) // 2)
    vals = gaussian_from_uniform(u, float(sigma))
    out = np.zeros((d, d), dtype=np.float64)
    iu = np.triu_indices(d)
    out[iu] = vals
    out.T[iu] = vals
    return out


def gaussian_vector(seed: NoiseSeed, purpose: str, index: int, size: int, sigma: float) -> np.ndarray:
    """``size`` i.i.d. N(0, sigma^2) draws from stream ``index`` of ``purpose``."""
    return gaussian_from_uniform(seed.uniforms(purpose, int(index), 0, int(size)), float(sigma))


def truncated_laplace(seed: NoiseSeed, purpose: str, index: int, sensitivity: float, epsilon: float, support: float) -> float:
    """One TLap(Delta, eps, delta) draw: Laplace(Delta/eps) conditioned on |z| <= A (GAP 13)."""
    u = seed.uniforms(purpose, int(index), 0, 1)
    return float(bounded_laplace_from_uniform(u, float(sensitivity) / float(epsilon), float(support))[0])


@dataclass(frozen=True)
class GUEMeanNoise:
    """``gram -> gram / n + GUE(sigma^2)``: the Gaussian mechanism on (1/n) sum x x^T.

    Called by the engine on the reduced Gram matrix, on a worker.
    """

    seed: NoiseSeed
    purpose: str
    index: int
    sigma: float
    n_samples: int

    def __call__(self, gram: np.ndarray) -> np.ndarray:
        gram = np.asarray(gram, dtype=np.float64)
        mean = (gram + gram.T) / (2.0 * self.n_samples)
        return mean + gue_matrix(self.seed, self.purpose, self.index, gram.shape[0], self.sigma)


@dataclass(frozen=True)
class GaussianHistogramNoise:
    """``counts -> counts + N(0, sigma^2)`` on *every* bin, empty ones included (section 3.2)."""

    seed: NoiseSeed
    purpose: str
    index: int
    sigma: float

    def __call__(self, counts: np.ndarray) -> np.ndarray:
        counts = np.asarray(counts, dtype=np.float64).ravel()
        return counts + gaussian_vector(self.seed, self.purpose, self.index, counts.size, self.sigma)
