"""Theorem 2's instance: Construction 1 (Section 3.2), block-diagonal inverse-Wishart blocks on a
union of ``d/k`` cliques, with Gaussian rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dask.array as da
import numpy as np
import scipy.sparse as sp

from dpdist.data.hard_instances._common import _check_int, _check_seed
from dpdist.data.synthetic import Model1, make_model1
from dpdist.exceptions import ValidationError

__all__ = ["Construction1", "construction1"]


# --------------------------------------------------------------------------------------
# Construction 1
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Construction1:
    """Construction 1 (COLT 2026, Section 3.2): block-diagonal ``InvWishart((k-1) I_k, 2k)``.

    Attributes
    ----------
    model : Model1
        The covariance in factor form and its Gaussian sampler (``samples``, ``write_zarr``).
    k : int
        Block (clique) size; Sigma is k-RCS.
    blocks : ndarray (d/k, k, k)
        ``Sigma_b``; block b covers coordinates ``k b .. k (b + 1) - 1``.
    condition_holds : bool
        Whether Construction 1's requirement ``k >= 2 log(d / k)`` holds (Lemma 4's tail bound
        uses it); False only when the caller waived it.
    """

    model: Model1
    k: int
    blocks: np.ndarray
    condition_holds: bool

    @property
    def n_features(self) -> int:
        return self.model.n_features

    @property
    def covariance(self) -> sp.csr_array:
        return self.model.covariance

    @property
    def labels(self) -> np.ndarray:
        """Block (clique) of each coordinate."""
        return np.arange(self.n_features) // self.k

    def graph(self) -> sp.csr_array:
        """Adjacency of G: the union of the d/k cliques, no edges between cliques, no loops."""
        lab = self.labels
        i, j = np.nonzero(lab[:, None] == lab[None, :]) if self.n_features <= 4096 else self._clique_pairs()
        keep = i != j
        return sp.csr_array((np.ones(int(keep.sum())), (i[keep], j[keep])), shape=(self.n_features,) * 2)

    def _clique_pairs(self):
        base = np.arange(self.k)
        bi, bj = (a.ravel() for a in np.meshgrid(base, base, indexing="ij"))
        offs = np.arange(self.n_features // self.k)[:, None] * self.k
        return (offs + bi).ravel(), (offs + bj).ravel()

    def project(self, M) -> np.ndarray:
        """``P_G(M)`` of eq. (8): keep the diagonal and the entries on edges of G, zero the rest."""
        M = M.toarray() if sp.issparse(M) else np.asarray(M, dtype=np.float64)
        lab = self.labels
        return np.where(lab[:, None] == lab[None, :], M, 0.0)

    def samples(self, n_samples: int, *, chunk_rows: int = 100_000) -> da.Array:
        """Lazy Gaussian rows ``N(0, Sigma)`` (see :meth:`Model1.samples`)."""
        return self.model.samples(n_samples, chunk_rows=chunk_rows)

    def parameters(self) -> dict:
        """Model parameters the instance satisfies (Model 1: k-RCS, sigma^2 = ||Sigma||_op)."""
        return {
            "instance": "construction1",
            "paper": "COLT 2026, Construction 1 (block InvWishart((k-1) I, 2k) on d/k cliques)",
            "n_features": self.n_features,
            "k": self.k,
            "n_blocks": int(self.blocks.shape[0]),
            "sigma2": self.model.sigma2,
            "sigma": math.sqrt(self.model.sigma2),
            "gap": self.model.eigengap,
            "condition_k_ge_2log_d_over_k": self.condition_holds,
            "random_state": self.model.seed,
        }


def construction1(n_features: int, k: int, *, random_state: int = 0, require_condition: bool = True) -> Construction1:
    """Draw Construction 1: ``Sigma = blockdiag(Sigma_1 .. Sigma_{d/k})``,
    ``Sigma_b ~ InvWishart((k-1) I_k, 2k)`` i.i.d. (eq. (9)), on the clique graph G.

    Parameters
    ----------
    n_features : int
        d; k must divide it.
    k : int
        Clique size, k >= 2.
    random_state : int
        Seed of the blocks and (by spawned streams) of the samples.
    require_condition : bool
        Construction 1 asks ``k >= 2 log(d / k)``; a ValidationError is raised when it fails
        unless this is False (then ``condition_holds`` records it, for experiments at small k).

    Notes
    -----
    ``E[Sigma_b] = (k - 1) I / (2k - k - 1) = I`` (Fact 4). The samples are Gaussian, so the
    instance is Model 1 with ``sigma^2 = ||Sigma||_op`` (recorded as ``sigma2``), and Lemma 4
    holds: ``P_G(Sigma_hat)`` is block diagonal with the block moments, blocks of a row are
    independent, and ``P[||Sigma||_op > t] <= (d/k) (3 e^2 / t)^(k/2)``.
    """
    d = _check_int(n_features, "n_features", 2)
    k = _check_int(k, "k", 2)
    seed = _check_seed(random_state)
    if d % k:
        raise ValidationError(f"Construction 1 needs k dividing d, got d={d}, k={k}")
    holds = k >= 2 * math.log(d / k)
    if require_condition and not holds:
        raise ValidationError(
            f"Construction 1 needs k >= 2 log(d/k) = {2 * math.log(d / k):.3f}, got k={k} at d={d} "
            "(pass require_condition=False to draw the blocks anyway)"
        )
    model = make_model1(d, k, structure="block", random_state=seed)
    cov = model.covariance.toarray() if d <= 4096 else None
    if cov is not None:
        blocks = np.stack([cov[b * k:(b + 1) * k, b * k:(b + 1) * k] for b in range(d // k)])
    else:
        csr = sp.csr_array(model.covariance)
        blocks = np.stack([csr[b * k:(b + 1) * k][:, b * k:(b + 1) * k].toarray() for b in range(d // k)])
    return Construction1(model, k, blocks, holds)
