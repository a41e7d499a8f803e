"""Theorem 5's instances: the signed edge-spike family of Lemmas 15-16, ``Sigma_s = I + D_s A D_s /
h`` on an ``h``-regular bipartite graph, whose rows have exactly two non-zeros.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dask.array as da
import numpy as np
import scipy.sparse as sp

from dpdist.data.hard_instances._common import _check_int, _check_seed
from dpdist.data.hard_instances.graphs import _bipartite_adjacency, _graph_with_small_lambda2, ramanujan_bound
from dpdist.data.hard_instances.theorem4 import GraphInstance
from dpdist.data.synthetic import Model1
from dpdist.exceptions import ValidationError

__all__ = ["EdgeSpike", "edge_spike"]


# --------------------------------------------------------------------------------------
# Lemmas 15-16: the signed edge-spike family
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EdgeSpike:
    """The edge-spike distribution ``D_{s,G}`` of Lemma 16 on the graph of Lemma 15.

    A row is ``sqrt(d/2) g D_s (e_u + e_v)``: ``(u, v)`` a uniform directed edge of the
    h-regular bipartite graph G, ``g`` a uniform sign. ``E[x] = 0``, ``E[x x^T] = Sigma_s =
    I + D_s A D_s / h``, ``||x||^2 = d`` for every row, and ``D_{s,G}`` is sub-Gaussian with
    ``sigma^2 = d`` (Definition 2).

    Attributes
    ----------
    graph : GraphInstance
        ``Sigma_s`` (as ``covariance``; its Gaussian sampler is *not* this distribution),
        the graph, v1 = s / sqrt(d), the eigenvalues and the Ramanujan check.
    signs : ndarray of +-1
        s.
    edges : ndarray (E, 2)
        The undirected edges (u, v) of G, u in the left part.
    seed : int
    """

    graph: GraphInstance
    signs: np.ndarray
    edges: np.ndarray
    seed: int

    @property
    def n_features(self) -> int:
        return self.graph.n_features

    @property
    def covariance(self) -> sp.csr_array:
        return self.graph.covariance

    @property
    def v1(self) -> np.ndarray:
        return self.graph.v1

    def sample_chunk(self, chunk_index: int, n_rows: int) -> np.ndarray:
        """Rows of chunk ``chunk_index`` (its own stream spawned from the seed)."""
        rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(1, int(chunk_index))))
        d = self.n_features
        e = rng.integers(0, self.edges.shape[0], size=n_rows)
        g = np.where(rng.random(n_rows) < 0.5, -1.0, 1.0) * math.sqrt(d / 2.0)
        out = np.zeros((n_rows, d))
        rows = np.arange(n_rows)
        u, v = self.edges[e, 0], self.edges[e, 1]
        out[rows, u] = g * self.signs[u]
        out[rows, v] = g * self.signs[v]
        return out

    def samples(self, n_samples: int, *, chunk_rows: int = 100_000) -> da.Array:
        """A lazy ``n_samples x d`` dask array of rows from ``D_{s,G}`` (direction of the
        directed edge does not matter: ``e_u + e_v`` is symmetric)."""
        n = _check_int(n_samples, "n_samples", 1)
        chunk_rows = int(max(1, min(chunk_rows, n)))
        sizes = [chunk_rows] * (n // chunk_rows) + ([n % chunk_rows] if n % chunk_rows else [])

        def block(block_id=None):
            return self.sample_chunk(block_id[0], sizes[block_id[0]])

        return da.map_blocks(block, chunks=(tuple(sizes), (self.n_features,)), dtype=np.float64, meta=np.empty((0, 0)))

    def mgf(self, u: np.ndarray) -> float:
        """``E[exp(u^T x)]`` exactly: the average over edges of ``cosh(sqrt(d/2) u^T D_s (e_u + e_v))``."""
        u = np.asarray(u, dtype=np.float64)
        t = math.sqrt(self.n_features / 2.0) * (u[self.edges[:, 0]] * self.signs[self.edges[:, 0]]
                                                + u[self.edges[:, 1]] * self.signs[self.edges[:, 1]])
        return float(np.mean(np.cosh(t)))

    def parameters(self) -> dict:
        p = self.graph.parameters()
        p.update(instance="edge_spike", sigma2=float(self.n_features), sigma=math.sqrt(self.n_features),
                 sigma2_rule="sub-Gaussian proxy of D_{s,G} (Lemma 16): sigma^2 = d",
                 paper="COLT 2026, Lemmas 15-16 (signed edge-spike family)")
        return p


def edge_spike(
    n_features: int, k: int, *, signs: np.ndarray | None = None, random_state: int = 0, max_tries: int = 200
) -> EdgeSpike:
    """Lemmas 15-16: ``Sigma_s = I + D_s A D_s / h``, ``h = k - 1``, and ``D_{s,G}``.

    A is an h-regular bipartite graph on ``d/2 + d/2`` vertices (Proposition 3 with t = 1)
    whose second eigenvalue meets ``2 sqrt(h - 1)`` (random, rejected until it does). Then
    (Lemma 15) ``Sigma_s`` is PSD and k-RCS, ``lambda_1 = 2``, ``v_1 = s / sqrt(d)`` and
    ``lambda_2 = 1 + lambda_2(A) / h <= 1 + 2 sqrt(h-1)/h``, which is ``<= 3/2`` for
    ``h >= 15`` (k >= 16, the lemma's "k sufficiently large"); ``lambda2`` records the value
    reached and ``gap`` the relative gap.

    Parameters
    ----------
    n_features : int
        d, even.
    k : int
        Row sparsity (3 <= k <= d/2 + 1).
    signs : array of +-1, optional
        s. Default: Theorem 5's family, ``s = (x, 1_{d/2})`` with x uniform in ``{+-1}^{d/2}``.
    random_state, max_tries
        As for :func:`corollary2`.
    """
    d = _check_int(n_features, "n_features", 4)
    k = _check_int(k, "k", 3)
    if d % 2:
        raise ValidationError(f"the edge-spike family needs d even, got d={d}")
    h = k - 1
    if h > d // 2:
        raise ValidationError(f"need k - 1 <= d/2, got k={k}, d={d}")
    seed = _check_seed(random_state)
    max_tries = _check_int(max_tries, "max_tries", 1)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,)))  # the graph
    if signs is None:
        pick = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2,)))
        s = np.concatenate([np.where(pick.random(d // 2) < 0.5, -1.0, 1.0), np.ones(d // 2)])
    else:
        s = np.asarray(signs, dtype=np.float64)
        if s.shape != (d,) or not np.all(np.abs(s) == 1):
            raise ValidationError(f"signs must be {d} values in {{-1, +1}}")
    left, right = np.arange(d // 2), np.arange(d // 2, d)
    bound = ramanujan_bound(h, h)
    B, lam2_graph, draws = _graph_with_small_lambda2(d // 2, d // 2, h, rng, bound, max_tries)
    A = _bipartite_adjacency(B, left, right, d)
    D = sp.diags_array(s)
    cov = sp.csr_array(sp.eye_array(d, format="csr") + (D @ A @ D) / h)
    coo = sp.coo_array(B)
    edges = np.column_stack([left[coo.row], right[coo.col]])
    # Gaussian factor of Sigma_s (for reference samplers only): the rows of D_{s,G} are not Gaussian.
    m = edges.shape[0]
    factor = sp.csr_array(
        (np.concatenate([s[edges[:, 0]], s[edges[:, 1]]]) / math.sqrt(h),
         (np.concatenate([np.arange(m)] * 2), np.concatenate([edges[:, 0], edges[:, 1]]))), shape=(m, d))
    lam2 = 1.0 + lam2_graph / h
    model = Model1(cov, k, 2.0, "edge_spike", np.zeros(d), factor, seed, 1.0 - lam2 / 2.0)
    graph = GraphInstance(
        model=model, adjacency=A, left=left, right=right, v1=s / math.sqrt(d), lambda1=2.0, lambda2=lam2,
        lambda2_bound=1.0 + 2.0 * math.sqrt(h - 1) / h, graph_lambda2=lam2_graph, graph_bound=bound, draws=draws,
        scale=1.0, k=k, name="edge_spike", extra={"h": h, "lemma15_lambda2_le_1.5": lam2 <= 1.5},
    )
    return EdgeSpike(graph, s, edges, seed)
