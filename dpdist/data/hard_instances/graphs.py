"""Random biregular bipartite graphs whose second eigenvalue meets the Ramanujan bound
(Proposition 3 by rejection), the graphs of the Corollary 2 and edge-spike instances.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from dpdist.exceptions import ValidationError

__all__ = ["biregular_second_eigenvalue", "ramanujan_bound", "random_biregular_graph"]


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
