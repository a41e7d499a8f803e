"""Theorem 4's instances: Corollary 2's covariance ``I + A / (sqrt(2) h)`` on a biregular bipartite
graph, and Lemma 13's codebook that indexes the packing of such instances, with the proof's
decoder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import dask.array as da
import numpy as np
import scipy.sparse as sp

from dpdist.data.hard_instances._common import _check_int, _check_seed
from dpdist.data.hard_instances.graphs import _bipartite_adjacency, _graph_with_small_lambda2, ramanujan_bound
from dpdist.data.synthetic import Model1
from dpdist.exceptions import ValidationError

__all__ = ["Codebook", "GraphInstance", "corollary2", "theorem4_codebook"]


# --------------------------------------------------------------------------------------
# Corollary 2 (pure-DP PCA lower bound)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GraphInstance:
    """A covariance ``I + w A`` built on a bipartite graph, with its Gaussian sampler.

    Attributes
    ----------
    model : Model1
        Covariance in factor form (``scale * (I + w A)``) and the sampler of ``N(0, covariance)``.
    adjacency : scipy.sparse.csr_array
        A (d x d, 0/1, symmetric).
    left, right : ndarray of int
        The bipartition (vertex labels in [d]).
    v1 : ndarray
        Unit top eigenvector stated by the lemma.
    lambda1, lambda2 : float
        Top two eigenvalues of ``I + w A`` (unscaled), lambda2 computed from the graph drawn.
    lambda2_bound : float
        The lemma's bound on ``lambda_2(I + w A)``.
    graph_lambda2, graph_bound : float
        ``lambda_2(A)`` of the graph drawn, and the Ramanujan bound it was required to meet.
    draws : int
        Graphs drawn until one met the bound.
    """

    model: Model1
    adjacency: sp.csr_array
    left: np.ndarray
    right: np.ndarray
    v1: np.ndarray
    lambda1: float
    lambda2: float
    lambda2_bound: float
    graph_lambda2: float
    graph_bound: float
    draws: int
    scale: float
    k: int
    name: str
    extra: dict = field(default_factory=dict)

    @property
    def n_features(self) -> int:
        return self.model.n_features

    @property
    def covariance(self) -> sp.csr_array:
        """The covariance of the rows, ``scale * (I + w A)``."""
        return self.model.covariance

    def samples(self, n_samples: int, *, chunk_rows: int = 100_000) -> da.Array:
        return self.model.samples(n_samples, chunk_rows=chunk_rows)

    def parameters(self) -> dict:
        return {
            "instance": self.name,
            "n_features": self.n_features,
            "k": self.k,
            "sigma2": self.scale * self.lambda1,
            "sigma": math.sqrt(self.scale * self.lambda1),
            "gap": 1.0 - self.lambda2 / self.lambda1,
            "lambda1": self.lambda1,
            "lambda2": self.lambda2,
            "lambda2_bound": self.lambda2_bound,
            "graph_lambda2": self.graph_lambda2,
            "graph_ramanujan_bound": self.graph_bound,
            "graph_draws": self.draws,
            "row_scale": self.scale,
            "random_state": self.model.seed,
            **self.extra,
        }


def corollary2(
    n_features: int, k: int, *, right: np.ndarray | None = None, scale: float = 0.5, random_state: int = 0,
    max_tries: int = 200,
) -> GraphInstance:
    """Corollary 2 (COLT 2026, Section 5.1): ``Sigma = I + A / (sqrt(2) h)``, ``h = (k-2)/2``.

    ``A`` is the adjacency of an ``(h, 2h)``-biregular bipartite graph between ``L = [d] \\ R``
    (2d/3 vertices of degree h) and ``R`` (d/3 vertices of degree 2h) whose second eigenvalue
    meets Proposition 3's bound ``sqrt(h - 1) + sqrt(2h - 1)`` (drawn at random and rejected
    until it does). Then (eq. (14)) Sigma is k-RCS, ``lambda_1 = 2`` with eigenvector
    ``sqrt(3/(4d)) (1_L, sqrt(2) 1_R)``, and ``lambda_2 <= 1 + (sqrt(k-4) + sqrt(2k-6))/(k-2)
    < 1.97``. Rows are ``N(0, scale * Sigma)``; ``scale = 1/2`` is Theorem 4's ``P_x``: Model 1
    with ``sigma^2 = 1`` and gap ``gamma >= 1/100``.

    Parameters
    ----------
    n_features : int
        d = 3g with g >= k.
    k : int
        Even, >= 6.
    right : array of int, optional
        R, the g vertices of degree 2h (the support of a codeword in Theorem 4). Default: a
        uniformly random g-subset.
    scale : float
        Rows are ``N(0, scale * Sigma)``.
    random_state : int
        Seed of R, of the graph and (by spawned streams) of the samples.
    max_tries : int
        Graph draws before giving up (ValidationError).

    Notes
    -----
    Sampler: with ``a^2 = 1/h`` on L and ``b^2 = 1/(2h)`` on R, one latent ``N(0, 1)`` per edge
    ``(u, v)`` loading ``a`` on u and ``b`` on v gives ``Var(x_u) = h a^2 = 1``,
    ``Var(x_v) = 2h b^2 = 1`` and ``Cov(x_u, x_v) = a b = 1/(sqrt(2) h)``: exactly Sigma, with no
    d x d factorisation (Sigma is singular: its smallest eigenvalue is 0).
    """
    d = _check_int(n_features, "n_features", 18)
    k = _check_int(k, "k", 6)
    if k % 2:
        raise ValidationError(f"Corollary 2 needs k even, got k={k}")
    if d % 3 or d // 3 < k:
        raise ValidationError(f"Corollary 2 needs d = 3g with g >= k, got d={d}, k={k}")
    if not (isinstance(scale, (int, float, np.floating)) and not isinstance(scale, bool) and math.isfinite(scale)
            and scale > 0):
        raise ValidationError(f"scale must be a finite number > 0, got {scale!r}")
    seed = _check_seed(random_state)
    max_tries = _check_int(max_tries, "max_tries", 1)
    g, h = d // 3, (k - 2) // 2
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,)))  # the graph
    if right is None:
        pick = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2,)))
        right = np.sort(pick.choice(d, size=g, replace=False))
    else:
        right = np.unique(np.asarray(right, dtype=np.int64))
        if right.size != g or right.min() < 0 or right.max() >= d:
            raise ValidationError(f"right must hold g = d/3 = {g} distinct indices in [0, {d}), got {right.size}")
    left = np.setdiff1d(np.arange(d), right)
    bound = ramanujan_bound(h, 2 * h)
    B, lam2_graph, draws = _graph_with_small_lambda2(left.size, right.size, h, rng, bound, max_tries)
    A = _bipartite_adjacency(B, left, right, d)
    w = 1.0 / (math.sqrt(2.0) * h)
    coo = sp.coo_array(B)
    m = coo.row.size
    a, b = math.sqrt(1.0 / h), math.sqrt(1.0 / (2 * h))
    factor = sp.csr_array(
        (np.concatenate([np.full(m, a), np.full(m, b)]) * math.sqrt(scale),
         (np.concatenate([np.arange(m), np.arange(m)]), np.concatenate([left[coo.row], right[coo.col]]))),
        shape=(m, d),
    )
    cov = sp.csr_array(scale * (sp.eye_array(d, format="csr") + w * A))
    v1 = np.empty(d)
    v1[left] = math.sqrt(3.0 / (4.0 * d))
    v1[right] = math.sqrt(3.0 / (2.0 * d))
    lam2 = 1.0 + w * lam2_graph
    model = Model1(cov, k, scale * 2.0, "corollary2", np.zeros(d), factor, seed, 1.0 - lam2 / 2.0)
    return GraphInstance(
        model=model, adjacency=A, left=left, right=right, v1=v1, lambda1=2.0, lambda2=lam2,
        lambda2_bound=1.0 + (math.sqrt(k - 4) + math.sqrt(2 * k - 6)) / (k - 2), graph_lambda2=lam2_graph,
        graph_bound=bound, draws=draws, scale=float(scale), k=k, name="corollary2",
        extra={"paper": "COLT 2026, Corollary 2 (I + A/(sqrt(2) h), (h, 2h)-biregular A)", "h": h},
    )


# --------------------------------------------------------------------------------------
# Lemma 13 and Theorem 4: the packing of Corollary 2 instances
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Codebook:
    """Lemma 13's code: ``m`` words of ``{0, 1}^{3g}``, each of weight g, pairwise Hamming
    distance at least ``g/2``; Theorem 4 attaches to word x the Corollary 2 instance with
    ``R = supp(x)``, whose leading eigenvector is ``v_x = sqrt(3/(4d)) (1_L, sqrt(2) 1_R)``.

    Attributes
    ----------
    words : ndarray (m, 3g) of bool
    g : int
    min_distance : int
        The smallest pairwise Hamming distance, computed over all pairs of the words kept.
    candidates : int
        Random weight-g words examined by the greedy construction.
    seed : int
    """

    words: np.ndarray
    g: int
    min_distance: int
    candidates: int
    seed: int

    @property
    def n_features(self) -> int:
        return 3 * self.g

    @property
    def size(self) -> int:
        return int(self.words.shape[0])

    def leading_vectors(self) -> np.ndarray:
        """``v_x`` for every word (rows), eq. (14)."""
        d = self.n_features
        return np.where(self.words, math.sqrt(3.0 / (2.0 * d)), math.sqrt(3.0 / (4.0 * d)))

    def instance(self, index: int, k: int, *, random_state: int = 0, max_tries: int = 200) -> GraphInstance:
        """Theorem 4's ``P_x`` for word ``index``: :func:`corollary2` with ``R = supp(x)`` and rows
        ``N(0, Sigma_x / 2)`` (Model 1 with ``sigma^2 = 1``)."""
        index = _check_int(index, "index", 0)
        if index >= self.size:
            raise ValidationError(f"index must be below the codebook size {self.size}, got {index}")
        return corollary2(self.n_features, k, right=np.flatnonzero(self.words[index]), scale=0.5,
                          random_state=random_state, max_tries=max_tries)

    def decode(self, v_hat) -> int:
        """The proof's decoder D: the word whose ``v_x`` minimises
        ``d_sign(v_x, v_hat) = min(||v_x - u||, ||v_x + u||)``, ``u = v_hat / ||v_hat||`` (ties
        and ``v_hat = 0`` go to the lowest index: a fixed, data-independent rule)."""
        u = np.asarray(v_hat, dtype=np.float64).ravel()
        if u.shape != (self.n_features,):
            raise ValidationError(f"v_hat must have {self.n_features} entries, got {u.size}")
        norm = float(np.linalg.norm(u))
        if not math.isfinite(norm):
            raise ValidationError("v_hat must be finite")
        if norm == 0.0:
            return 0
        u = u / norm
        V = self.leading_vectors()
        dist = np.minimum(np.linalg.norm(V - u, axis=1), np.linalg.norm(V + u, axis=1))
        return int(np.argmin(dist))

    def parameters(self) -> dict:
        return {
            "instance": "theorem4_codebook",
            "paper": "COLT 2026, Lemma 13 (weight-g words of length 3g at Hamming distance >= g/2) and Theorem 4",
            "n_features": self.n_features, "g": self.g, "size": self.size, "min_distance": self.min_distance,
            "required_distance": self.g / 2.0, "candidates": self.candidates, "random_state": self.seed,
            "lemma13_size_guarantee_full_greedy": 4.0**self.g / self.g**1.5,
        }


def theorem4_codebook(g: int, size: int, *, random_state: int = 0, max_candidates: int | None = None) -> Codebook:
    """Lemma 13's code, built greedily from random words: draw uniform weight-g words of
    ``{0, 1}^{3g}`` and keep each one at Hamming distance ``>= g/2`` from every word kept so
    far, until ``size`` words are kept (Lemma 13's greedy, with random instead of exhaustive
    candidates; run to exhaustion it keeps at least ``4^g / g^1.5`` words). The minimum
    distance is then recomputed over all pairs.

    Parameters
    ----------
    g : int
        Weight; the words have length d = 3g. Theorem 4 pairs it with k <= g (Corollary 2).
    size : int
        Words wanted (m); Theorem 4's packing bound grows with ``log m``.
    random_state : int
        Seed of the candidate words.
    max_candidates : int, optional
        Candidates drawn before giving up (default ``50 * size + 1000``).

    Raises
    ------
    ValidationError
        Bad parameters, or fewer than ``size`` words found within ``max_candidates``.
    """
    g = _check_int(g, "g", 2)
    m = _check_int(size, "size", 2)
    seed = _check_seed(random_state)
    budget = 50 * m + 1000 if max_candidates is None else _check_int(max_candidates, "max_candidates", 1)
    d = 3 * g
    need = math.ceil(g / 2)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(3,)))
    kept = np.zeros((m, d), dtype=np.int64)
    count = drawn = 0
    while count < m and drawn < budget:
        batch = min(4096, budget - drawn)
        cand = np.zeros((batch, d), dtype=np.int64)
        pos = np.argsort(rng.random((batch, d)), axis=1)[:, :g]
        np.put_along_axis(cand, pos, 1, axis=1)
        drawn += batch
        for w in cand:
            # Hamming distance of two weight-g words: 2 (g - overlap)
            if count == 0 or 2 * (g - int((kept[:count] @ w).max())) >= need:
                kept[count] = w
                count += 1
                if count == m:
                    break
    if count < m:
        raise ValidationError(
            f"found only {count} words of weight {g} in {{0,1}}^{d} at distance >= {g / 2:g} in {drawn} candidates; "
            "ask for fewer words or raise max_candidates")
    overlap = kept @ kept.T
    np.fill_diagonal(overlap, -1)
    min_distance = int(2 * (g - overlap.max()))
    return Codebook(kept.astype(bool), g, min_distance, drawn, seed)
