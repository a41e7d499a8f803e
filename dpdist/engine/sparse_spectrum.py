"""Spectra of sparse symmetric matrices, component by component (the thresholded matrices
of PrivNorm and PrivPCA: their entries above a threshold form small connected components)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

__all__ = ["DENSE_COMPONENT_LIMIT", "SparseSpectrum", "batch_top_two_eigenvalues", "sparse_spectrum"]

#: Components up to this size are diagonalised densely, in batches of equal size.
DENSE_COMPONENT_LIMIT = 2048


@dataclass
class SparseSpectrum:
    """Eigen-decomposition of a sparse symmetric matrix by connected components.

    ``comp_vertices[c]`` are the vertices of component c, ``comp_values[c]`` its eigenvalues
    (descending). Vertices with no entry form 1 x 1 zero blocks (``n_isolated`` of them).
    """

    n: int
    comp_vertices: list
    comp_values: list
    comp_vectors: list | None
    n_isolated: int

    def largest(self) -> float:
        """Largest eigenvalue (0 counts when some vertex is isolated)."""
        vals = [v[0] for v in self.comp_values]
        if self.n_isolated:
            vals.append(0.0)
        return float(max(vals))

    def operator_norm(self) -> float:
        """``max |lambda|`` (0 for the zero matrix)."""
        vals = [max(abs(v[0]), abs(v[-1])) for v in self.comp_values]
        return float(max(vals, default=0.0))

    def top_vector(self) -> tuple[np.ndarray, np.ndarray]:
        """``(support, values)`` of a unit top eigenvector, supported on the component that
        carries the largest eigenvalue (first such component). When only isolated vertices
        attain it (every component's top eigenvalue is negative), the first isolated vertex."""
        best = -np.inf
        arg = None
        for c, v in enumerate(self.comp_values):
            if v[0] > best:
                best, arg = v[0], c
        if (arg is None or best < 0) and self.n_isolated:
            used = np.zeros(self.n, bool)
            for vs in self.comp_vertices:
                used[vs] = True
            j = int(np.flatnonzero(~used)[0])
            return np.array([j]), np.array([1.0])
        vec = self.comp_vectors[arg]
        i = int(np.argmax(np.abs(vec)))
        vec = vec if vec[i] > 0 else -vec  # deterministic sign
        return self.comp_vertices[arg], vec


def _symmetric_coo(rows, cols, vals, n):
    off = rows != cols
    r = np.concatenate([rows, cols[off]])
    c = np.concatenate([cols, rows[off]])
    v = np.concatenate([vals, vals[off]])
    return r, c, v


def sparse_spectrum(rows, cols, vals, n: int, *, vectors: bool = False) -> SparseSpectrum:
    """Spectrum of the symmetric n x n matrix with upper-triangle entries ``(rows, cols,
    vals)`` (rows <= cols, no duplicates), component by component.

    Components of equal size up to :data:`DENSE_COMPONENT_LIMIT` are diagonalised together
    by batched ``numpy.linalg.eigh``; larger ones by ``scipy.sparse.linalg.eigsh`` from a fixed
    start vector (the two largest and the smallest eigenvalue only, which is all the callers
    use: top two, largest, operator norm, top eigenvector).
    """
    rows = np.asarray(rows, np.int64)
    cols = np.asarray(cols, np.int64)
    vals = np.asarray(vals, np.float64)
    r, c, v = _symmetric_coo(rows, cols, vals, n)
    active = np.unique(np.concatenate([r, c]))
    comp_vertices, comp_values, comp_vectors = [], [], [] if vectors else None
    if active.size:
        pos = np.full(n, -1, np.int64) if n <= 50_000_000 else None
        if pos is not None:
            pos[active] = np.arange(active.size)
            ra, ca = pos[r], pos[c]
        else:
            ra, ca = np.searchsorted(active, r), np.searchsorted(active, c)
        a = active.size
        adj = sparse.coo_matrix((np.ones_like(v), (ra, ca)), shape=(a, a)).tocsr()
        ncomp, lab = csgraph.connected_components(adj, directed=False)
        order = np.argsort(lab, kind="stable")
        sizes = np.bincount(lab, minlength=ncomp)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        local = np.empty(a, np.int64)
        local[order] = np.arange(a) - np.repeat(starts, sizes)
        mat = sparse.coo_matrix((v, (ra, ca)), shape=(a, a)).tocsr()
        members = np.split(order, np.cumsum(sizes)[:-1])
        results: dict[int, tuple] = {}
        for s in np.unique(sizes):
            cs = np.flatnonzero(sizes == s)
            if s <= DENSE_COMPONENT_LIMIT:
                blocks = np.zeros((cs.size, s, s))
                sel = np.isin(lab[ra], cs)
                ci = np.searchsorted(cs, lab[ra[sel]])
                np.add.at(blocks, (ci, local[ra[sel]], local[ca[sel]]), v[sel])
                if vectors:
                    w, q = np.linalg.eigh(blocks)
                else:
                    w, q = np.linalg.eigvalsh(blocks), None
                for t, comp in enumerate(cs):
                    results[comp] = (w[t, ::-1], None if q is None else q[t, :, -1])
            else:
                from scipy.sparse.linalg import eigsh

                for comp in cs:
                    idx = members[comp]
                    sub = mat[idx][:, idx]
                    v0 = np.full(idx.size, 1.0 / math.sqrt(idx.size))  # fixed start: deterministic
                    wl, ql = eigsh(sub, k=2, which="LA", v0=v0)
                    ws = eigsh(sub, k=1, which="SA", v0=v0, return_eigenvectors=False)
                    w = np.sort(np.concatenate([wl, ws]))[::-1]
                    results[comp] = (w, ql[:, int(np.argmax(wl))])
        for comp in range(ncomp):
            idx = members[comp]
            # members are in 'order' (sorted by label, stable): local position = rank within
            comp_vertices.append(active[idx])
            w, q = results[comp]
            comp_values.append(np.asarray(w))
            if vectors:
                comp_vectors.append(np.asarray(q))
    return SparseSpectrum(n, comp_vertices, comp_values, comp_vectors, n - active.size)


def batch_top_two_eigenvalues(b, r, c, v, n_batches: int, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Two largest eigenvalues of each batch's thresholded matrix, all batches at once.

    The batches' matrices are the diagonal blocks of one ``m d x m d`` sparse matrix; its
    components never cross batches. A batch with fewer than d active vertices also has the
    eigenvalue 0 (with multiplicity ``d - active``). Batches without entries get (0, 0).
    """
    m, d = int(n_batches), int(n_features)
    spec = sparse_spectrum(b * d + r, b * d + c, v, m * d)
    cand_b, cand_v = [], []
    active = np.zeros(m, np.int64)
    for verts, vals in zip(spec.comp_vertices, spec.comp_values):
        bb = int(verts[0] // d)
        active[bb] += verts.size
        cand_b.extend([bb] * min(2, vals.size))
        cand_v.extend(vals[:2].tolist())
    inactive = d - active
    for bb in range(m):
        z = min(2, int(inactive[bb]))
        cand_b.extend([bb] * z)
        cand_v.extend([0.0] * z)
    cb = np.asarray(cand_b, np.int64)
    cv = np.asarray(cand_v, np.float64)
    order = np.lexsort((-cv, cb))
    cb, cv = cb[order], cv[order]
    first = np.searchsorted(cb, np.arange(m))
    lam1 = cv[first]
    second = np.minimum(first + 1, cb.size - 1)
    lam2 = np.where((second < cb.size) & (cb[second] == np.arange(m)), cv[second], -np.inf)
    return lam1.astype(np.float64), lam2.astype(np.float64)
