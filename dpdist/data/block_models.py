"""Block-structured Gaussian instances, and exact draws of their statistics without rows.

A :class:`BlockModel` is ``Sigma = blockdiag(Sigma_1, ..., Sigma_B, v I_{n_bulk})`` in
*canonical coordinates*: block b covers coordinates ``b s .. (b + 1) s - 1`` and the
``n_bulk`` independent "bulk" coordinates (variance ``v`` each) come last. Operator-norm and
sin^2 errors do not depend on how coordinates are labelled, so an instance whose blocks sit
elsewhere (Construction 1's cliques, Model 2's random support) is described in canonical
coordinates without loss.

Drawn exactly (in law) for Gaussian rows, at any n (1e15 costs what 1e3 does):
:func:`wishart_blocks`, the second moment of n rows restricted to the blocks, and
:func:`bulk_top_two`, the two largest bulk diagonal entries. The simulation
(:mod:`dpdist.simulate`) and the PrivNorm/PrivPCA plans' pass-probability forecasts
(:mod:`dpdist.algorithms._friendly_forecast`) draw from them; no release is made from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdist.exceptions import ValidationError

__all__ = ["BlockModel", "block_triples", "bulk_top_two", "from_construction1", "from_model2", "model2_block_model",
           "open_uniforms", "wishart_blocks"]


@dataclass(frozen=True)
class BlockModel:
    """Sigma in canonical coordinates (see the module docstring).

    Attributes
    ----------
    blocks : ndarray (B, s, s)
    bulk_variance : float
        Variance of each bulk coordinate (ignored when ``n_bulk = 0``).
    n_bulk : int
    k : int
        Row-column sparsity the estimators are told (the model's k).
    sigma2 : float
        ``||Sigma||_op`` (the sub-Gaussian variance proxy of Gaussian rows).
    lambda1, lambda2 : float
        Top two eigenvalues of Sigma.
    v1 : ndarray (d,)
        Unit top eigenvector (canonical coordinates).
    family : str
        The instance family and its parameters, for the records.
    """

    blocks: np.ndarray
    bulk_variance: float
    n_bulk: int
    k: int
    sigma2: float
    lambda1: float
    lambda2: float
    v1: np.ndarray
    family: str

    @property
    def block_size(self) -> int:
        return int(self.blocks.shape[1])

    @property
    def n_blocks(self) -> int:
        return int(self.blocks.shape[0])

    @property
    def n_features(self) -> int:
        return self.n_blocks * self.block_size + self.n_bulk

    @property
    def gap(self) -> float:
        return 1.0 - self.lambda2 / self.lambda1

    def cholesky(self) -> np.ndarray:
        """Cholesky factors of the blocks (computed once per model)."""
        cached = self.__dict__.get("_chol")
        if cached is None:
            cached = np.linalg.cholesky(self.blocks)
            object.__setattr__(self, "_chol", cached)
        return cached

    def diagonal(self) -> np.ndarray:
        """Sigma_jj for every coordinate."""
        return np.concatenate([np.einsum("bii->bi", self.blocks).ravel(), np.full(self.n_bulk, self.bulk_variance)])

    def upper_triples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Upper-triangle non-zero entries ``(rows, cols, values)`` of Sigma."""
        return block_triples(self.blocks, self.n_bulk, np.full(self.n_bulk, self.bulk_variance))

    def describe(self) -> dict:
        return {"family": self.family, "n_features": self.n_features, "k": self.k, "sigma2": self.sigma2,
                "lambda1": self.lambda1, "lambda2": self.lambda2, "gap": self.gap,
                "n_blocks": self.n_blocks, "block_size": self.block_size, "n_bulk": self.n_bulk}


def block_triples(blocks: np.ndarray, n_bulk: int, bulk_diag: np.ndarray):
    """Upper-triangle entries of ``blockdiag(blocks, diag(bulk_diag))`` in canonical coordinates."""
    B, s, _ = blocks.shape
    iu, ju = np.triu_indices(s)
    offs = (np.arange(B) * s)[:, None]
    rows = (offs + iu).ravel()
    cols = (offs + ju).ravel()
    vals = blocks[:, iu, ju].ravel()
    bulk = B * s + np.arange(n_bulk)
    return (np.concatenate([rows, bulk]), np.concatenate([cols, bulk]),
            np.concatenate([vals, np.asarray(bulk_diag, dtype=np.float64)]))


def from_construction1(instance) -> BlockModel:
    """A :class:`~dpdist.data.hard_instances.theorem2.Construction1` draw (its blocks, no bulk)."""
    blocks = np.asarray(instance.blocks, dtype=np.float64)
    vals = np.linalg.eigvalsh(blocks)
    top = np.sort(vals.ravel())[::-1]
    b_top = int(np.argmax(vals[:, -1]))
    w, q = np.linalg.eigh(blocks[b_top])
    v1 = np.zeros(instance.n_features)
    v1[b_top * instance.k:(b_top + 1) * instance.k] = q[:, -1]
    return BlockModel(blocks, 0.0, 0, instance.k, float(top[0]), float(top[0]), float(top[1]), v1,
                      f"construction1(d={instance.n_features}, k={instance.k}, seed={instance.model.seed})")


def from_model2(instance) -> BlockModel:
    """A Model-2 instance of :func:`~dpdist.data.model2.make_model2` or
    :func:`~dpdist.data.model2.make_construction2` (support block + bulk ``lambda2``-or-level
    identity): the support block first, then the ``d - k`` bulk coordinates."""
    S = instance.covariance.toarray() if instance.n_features <= 4096 else None
    sup = np.asarray(instance.support)
    if S is not None:
        block = S[np.ix_(sup, sup)]
        outside = np.setdiff1d(np.arange(instance.n_features), sup)
        bulk = np.diag(S)[outside]
    else:
        import scipy.sparse as sp

        C = sp.csr_array(instance.covariance)
        block = C[sup][:, sup].toarray()
        outside = np.setdiff1d(np.arange(instance.n_features), sup)
        bulk = C.diagonal()[outside]
    if bulk.size and not np.allclose(bulk, bulk[0]):
        raise ValidationError("the simulation needs a constant variance off the support")
    v1 = np.zeros(instance.n_features)
    v1[: sup.size] = instance.v1[sup]
    return BlockModel(block[None], float(bulk[0]) if bulk.size else 0.0, int(outside.size), int(instance.k),
                      float(instance.sigma2), float(instance.lambda1), float(instance.lambda2), v1,
                      f"{instance.model}(d={instance.n_features}, k={instance.k}, gap={instance.gap:.3g})")


def model2_block_model(n_features: int, k: int, *, gap: float = 0.5, lambda1: float = 2.0,
                       random_state: int = 0) -> BlockModel:
    """The Model-2 sparse spike of :func:`~dpdist.data.model2.make_model2` built directly in
    canonical coordinates (any d, no d x d matrix): support block ``lambda2 I + (lambda1 -
    lambda2) v v^T`` with ``v`` flat ``+-1/sqrt(k)``, bulk ``lambda2``."""
    rng = np.random.default_rng(np.random.SeedSequence(int(random_state), spawn_key=(0,)))
    signs = np.where(rng.random(k) < 0.5, -1.0, 1.0)
    v = signs / math.sqrt(k)
    lam2 = (1.0 - gap) * lambda1
    block = lam2 * np.eye(k) + (lambda1 - lam2) * np.outer(v, v)
    v1 = np.zeros(n_features)
    v1[:k] = v
    return BlockModel(block[None], lam2, n_features - k, k, lambda1, lambda1, lam2, v1,
                      f"model2-sparse-spike(d={n_features}, k={k}, gap={gap}, lambda1={lambda1})")


def open_uniforms(rng: np.random.Generator, size) -> np.ndarray:
    """Uniforms in the open interval (0, 1) from 53-bit words (as :mod:`dpdist.privacy.noise.streams`)."""
    words = rng.integers(0, 1 << 53, size=size, dtype=np.int64)
    return (words.astype(np.float64) + 0.5) * 2.0**-53


def wishart_blocks(blocks: np.ndarray, n: float, rng: np.random.Generator, *, chol: np.ndarray | None = None
                   ) -> np.ndarray:
    """``W_b / n`` with ``W_b ~ Wishart(n, Sigma_b)`` for each block ``Sigma_b`` of ``blocks``
    (shape (B, s, s)), by the Bartlett decomposition ``W = L T T^T L^T`` (``L`` the Cholesky
    factor of Sigma_b, ``T`` lower triangular, ``T_ii^2 ~ chi2(n - i)``, ``T_ij ~ N(0, 1)``).

    Exact in law for the diagonal blocks of ``(1/n) X^T X`` with X's rows ``N(0, Sigma)``
    and Sigma block diagonal; ``n`` may be any real ``> s - 1`` (large n costs nothing more).
    ``chol``: the blocks' Cholesky factors, when already known.
    """
    blocks = np.asarray(blocks, dtype=np.float64)
    B, s, _ = blocks.shape
    L = np.linalg.cholesky(blocks + 0.0) if chol is None else chol
    T = np.zeros((B, s, s))
    il = np.tril_indices(s, -1)
    T[:, il[0], il[1]] = rng.standard_normal((B, il[0].size))
    df = float(n) - np.arange(s, dtype=np.float64)
    T[:, np.arange(s), np.arange(s)] = np.sqrt(rng.chisquare(df, size=(B, s)))
    LT = L @ T
    W = LT @ np.transpose(LT, (0, 2, 1)) / float(n)
    return 0.5 * (W + np.transpose(W, (0, 2, 1)))


def bulk_top_two(rng, n_cells: int, variance: float, sizes: np.ndarray) -> np.ndarray:
    """The two largest of ``n_cells`` i.i.d. ``variance chi2_b / b`` values, for each batch size
    b in ``sizes`` (exact order statistics). Shape (m, 2), descending."""
    from scipy.special import chdtri

    if n_cells <= 0:
        return np.full((sizes.size, 2), -np.inf)
    count = min(2, n_cells)
    q = np.empty((sizes.size, count))
    e = -np.log(open_uniforms(rng, (sizes.size, count)))
    q[:] = -np.expm1(-np.cumsum(e / (n_cells - np.arange(count))[None, :], axis=1))
    vals = variance * chdtri(sizes[:, None].astype(np.float64), q) / sizes[:, None]
    if count == 1:
        vals = np.column_stack([vals[:, 0], np.full(sizes.size, -np.inf)])
    return vals
