"""The lower-bound instances of the COLT 2026 paper, as generators for experiments.

Each generator returns its covariance, the structure its lemma talks about (the graph, the
blocks, the leading eigenvector) and :meth:`parameters`: the model parameters the instance
satisfies, ``k`` (row-column sparsity), ``sigma2`` (sub-Gaussian variance proxy) and ``gap``
(relative eigengap ``1 - lambda_2 / lambda_1``), computed from the instance drawn, next to the
values the lemma promises.

- :func:`construction1`: Construction 1 (Section 3.2), block-diagonal inverse-Wishart blocks
  on a union of ``d/k`` cliques. Gaussian rows; an instance of Model 1 with
  ``sigma^2 = ||Sigma||_op`` (the paper, after Construction 1).
- :func:`corollary2`: Corollary 2 (Section 5.1), ``Sigma = I + A / (sqrt(2) h)`` with ``A``
  the adjacency matrix of an ``(h, 2h)``-biregular bipartite graph with a small second
  eigenvalue. Gaussian rows ``N(0, Sigma / 2)`` as in the proof of Theorem 4 (Model 1 with
  ``sigma^2 = 1``).
- :func:`edge_spike`: Lemmas 15-16 (Section 5.2), ``Sigma_s = I + D_s A D_s / h`` with ``A``
  an ``h``-regular bipartite graph, and the signed edge-spike distribution ``D_{s,G}`` whose
  rows have exactly two non-zeros (sub-Gaussian with ``sigma^2 = d``).
- :func:`theorem4_codebook`: Lemma 13's code (weight-g words of length 3g, pairwise Hamming
  distance >= g/2) that indexes Theorem 4's packing: one Corollary 2 instance per codeword,
  ``R = supp(x)`` (:meth:`Codebook.instance`), with the decoder of the proof
  (:meth:`Codebook.decode`).
- Construction 2 (Appendix E, spiked inverse-Wishart) is :func:`dpdist.data.model2.make_construction2`,
  re-exported here.

The graphs of Corollary 2 and Lemma 15 come from Proposition 3 (Gribinski-Marcus 2021: a
biregular bipartite graph whose second eigenvalue meets the Ramanujan bound
``sqrt(h - 1) + sqrt(t h - 1)``). We draw them as random biregular graphs: the configuration
model (a uniform random matching of the edge stubs), with repeated edges removed by
degree-preserving double-edge switches (rejecting every multigraph is hopeless for h >= 5:
a draw is simple with probability about ``exp(-(h-1)(th-1)/2)``), and the whole graph rejected
and redrawn until its second eigenvalue meets the bound (random biregular graphs approach it
as the size grows, Brito-Dumitriu-Harris 2022). The number of draws and the second eigenvalue
reached are recorded.

Rows are generated chunk by chunk, each chunk from its own stream spawned from the root seed
(``spawn_key=(1, chunk)``; the graph uses ``(0,)``, the random signs or vertex set ``(2,)``)
(the streams of :mod:`dpdist.data.synthetic`), so the data do not depend on the scheduler.
These seeds drive data generation only, never privacy noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import dask.array as da
import numpy as np
import scipy.sparse as sp

from dpdist.data.model2 import make_construction2
from dpdist.data.synthetic import Model1, make_model1
from dpdist.exceptions import ValidationError

__all__ = [
    "Codebook",
    "Construction1",
    "EdgeSpike",
    "GraphInstance",
    "biregular_second_eigenvalue",
    "construction1",
    "corollary2",
    "edge_spike",
    "make_construction2",
    "random_biregular_graph",
    "ramanujan_bound",
    "theorem4_codebook",
]


def _check_int(value, name: str, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or int(value) < low:
        raise ValidationError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _check_seed(random_state) -> int:
    if isinstance(random_state, (bool, np.bool_)) or not isinstance(random_state, (int, np.integer)) or random_state < 0:
        raise ValidationError(f"random_state must be a non-negative int for a generator, got {random_state!r}")
    return int(random_state)


def _top_two(cov: sp.csr_array) -> tuple[float, float]:
    d = cov.shape[0]
    if d <= 2000:
        vals = np.linalg.eigvalsh(cov.toarray())
        return float(vals[-1]), float(vals[-2])
    from scipy.sparse.linalg import eigsh

    vals = np.sort(eigsh(cov, k=2, which="LA", return_eigenvectors=False, v0=np.ones(d)))
    return float(vals[-1]), float(vals[-2])


# --------------------------------------------------------------------------------------
# random biregular bipartite graphs (Proposition 3 by rejection)
# --------------------------------------------------------------------------------------


def ramanujan_bound(left_degree: int, right_degree: int) -> float:
    """``sqrt(c1 - 1) + sqrt(c2 - 1)``: Proposition 3's bound on the second eigenvalue of the
    adjacency matrix of a ``(c1, c2)``-biregular bipartite graph (Gribinski-Marcus 2021)."""
    return math.sqrt(left_degree - 1) + math.sqrt(right_degree - 1)


def random_biregular_graph(n_left: int, n_right: int, left_degree: int, rng: np.random.Generator) -> sp.csr_array:
    """A simple ``(left_degree, right_degree)``-biregular bipartite graph, as its 0/1
    biadjacency matrix (``n_left x n_right``), ``right_degree = n_left left_degree / n_right``.

    Configuration model: a uniform random matching of the left stubs to the right stubs; every
    repeated edge is then swapped with a uniformly chosen edge (the right end points are
    exchanged: degrees are preserved) until the graph is simple.
    """
    total = n_left * left_degree
    if total % n_right:
        raise ValidationError(f"n_left * left_degree = {total} is not divisible by n_right = {n_right}")
    right_degree = total // n_right
    if left_degree > n_right or right_degree > n_left:
        raise ValidationError(f"no simple ({left_degree}, {right_degree})-biregular graph on {n_left} + {n_right} vertices")
    left = np.repeat(np.arange(n_left, dtype=np.int64), left_degree)
    right = rng.permutation(np.repeat(np.arange(n_right, dtype=np.int64), right_degree))
    for _ in range(10_000):
        keys = left * n_right + right
        order = np.argsort(keys, kind="stable")
        dup = order[1:][keys[order][1:] == keys[order][:-1]]
        if dup.size == 0:
            break
        partners = rng.integers(0, total, size=dup.size)
        for e, f in zip(dup.tolist(), partners.tolist()):  # one swap at a time: a permutation
            right[e], right[f] = right[f], right[e]
    else:  # pragma: no cover - switching converges in a few rounds for any feasible degrees
        raise ValidationError("could not remove repeated edges from the configuration model")
    data = np.ones(total)
    return sp.csr_array((data, (left, right)), shape=(n_left, n_right))


def biregular_second_eigenvalue(biadjacency: sp.csr_array) -> float:
    """``lambda_2(A)`` of the bipartite adjacency ``A = [[0, B], [B^T, 0]]``: the second largest
    singular value of the biadjacency ``B`` (eigenvalues of A are +- the singular values of B)."""
    B = sp.csr_array(biadjacency, dtype=np.float64)
    if min(B.shape) <= 1000:
        s = np.linalg.svd(B.toarray(), compute_uv=False)
        return float(s[1]) if s.size > 1 else 0.0
    from scipy.sparse.linalg import svds

    s = svds(B, k=2, return_singular_vectors=False, v0=np.ones(min(B.shape)), tol=1e-10)
    return float(np.sort(s)[0])


def _graph_with_small_lambda2(n_left, n_right, left_degree, rng, bound, max_tries) -> tuple[sp.csr_array, float, int]:
    best = math.inf
    for attempt in range(1, max_tries + 1):
        B = random_biregular_graph(n_left, n_right, left_degree, rng)
        lam2 = biregular_second_eigenvalue(B)
        if lam2 <= bound:
            return B, lam2, attempt
        best = min(best, lam2)
    raise ValidationError(
        f"no random ({left_degree}, {n_left * left_degree // n_right})-biregular graph on {n_left} + {n_right} "
        f"vertices met lambda_2 <= {bound:.6g} in {max_tries} draws (best {best:.6g}); raise max_tries, "
        "use another random_state, or a larger d"
    )


def _bipartite_adjacency(B: sp.csr_array, left: np.ndarray, right: np.ndarray, d: int) -> sp.csr_array:
    """The d x d adjacency of the bipartite graph with biadjacency B between vertex sets
    ``left`` and ``right`` (labels in [d])."""
    coo = sp.coo_array(B)
    r, c = left[coo.row], right[coo.col]
    A = sp.coo_array((np.ones(2 * r.size), (np.concatenate([r, c]), np.concatenate([c, r]))), shape=(d, d))
    return sp.csr_array(A)


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
