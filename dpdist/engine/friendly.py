"""FriendlyCore front end of PrivNorm and PrivPCA (COLT 2026, Algorithms 2 and 3, Lines 1-16).

Exact statistics only: this module computes, from the rows of X split into m batches,

* per batch i: whether its second moment ``Sigma_i`` is finite, whether ``T_tau(Sigma_i)`` is
  k-RCS, and the two largest eigenvalues of ``T_tau(Sigma_i)`` (the ingredients of the good
  set C, Definition 4);
* the friend counts ``f_i = #{j : ||Sigma_j - Sigma_i||_max <= 2 tau}`` and the FriendlyCore
  weights ``p_i = clip((f_i - m/2) / (m/6), 0, 1)`` and ``Z = sum p_i`` (Lines 7-11);
* in a second pass, ``T_threshold(Sigma_bar)`` (hard thresholding) with ``Sigma_bar = sum p_i Sigma_i / Z`` (Line 16),
  as a sparse matrix, and its spectrum by connected components.

It contains no privacy formula and draws no noise: the private tests and releases are
functions supplied by :mod:`dpdist.algorithms.sparse_pca`, run where the statistics live
through a :class:`Session`.

What reaches the client
-----------------------
Nothing computed here is returned to the caller's process when the scheduler is a
``distributed`` cluster: :meth:`Session.persist` keeps each result as a future on the
cluster, :meth:`Session.apply` runs the caller's (noising) function there, and only what the
caller explicitly :meth:`Session.fetch`-es (the noised test outcomes and the released value)
travels back. With a local scheduler ("synchronous", "threads", "processes") the graph runs
in the caller's process and the statistics exist there in memory, but they are never
attached to an estimator or a release.

Cost (ALGORITHMS.md section 2)
------------------------------
Pass 1 works column tile by column tile: for a tile (I, J) (I <= J) it forms the m batch tiles
``Sigma_i[I, J]`` (m x t x t values, never m x d x d; ``t`` from ``tile_bytes``), counts
per-row entries above tau, keeps the thresholded entries of batches that can still be k-RCS,
and updates the m x m "separated" relation. Diagonal tiles are formed by BLAS ``syrk`` (upper
triangle only: each batch matrix is defined by its upper triangle). Tiles are computed in
groups of at most ``group_bytes`` of batch tiles, one group after the other
(:func:`friendly_pass1_groups`, :meth:`Session.persist_each`): memory is bounded by the group
budget plus the row chunks in flight, and X is read once per group (once for d = 1,000,
m = 200 with the defaults). The friend relation needs all m batch values of an entry at once,
so a single read with less memory than ``m d^2 / 2`` values is impossible; more groups
trade reads for memory. The friend relation uses the span fast path: an entry whose values
across the (finite) batches span at most 2 tau separates no pair; only wider entries are
compared pairwise (``scipy.spatial.distance.cdist(..., "chebyshev")`` on blocks of wide
entries), and among batches that still have an unseparated partner only: a batch already
separated from every other one (an outlier batch) drops out, so its wide entries cost
nothing after the first block. (A sort-and-sweep per wide entry finds the same pairs, but the
union over entries still has to be written into the m x m relation; the blocked Chebyshev
distance does that in compiled code.) Pass 2 is one weighted Gram per tile (``syrk`` on the diagonal
tiles), summed over row chunks in a tree.

Non-finite values and magnitudes (issue 9): both passes first replace every row holding a
NaN or an infinity by a zero row (the row rule of every estimator: a per-row map, uncounted)
and clip every entry to the caller's public ``clip`` (:func:`chunk_rows`), so each product
``x_a x_b`` is at most ``clip^2`` and the rounding of every batch moment and of Sigma_bar is
bounded by public values (``dpdist.privacy.pca_calibration.friendly_float_bounds``). A batch
whose second moment is still non-finite (possible only with ``clip = inf``) is not good, has
no friends (not even itself: ``NaN <= 2 tau`` is false), weighs 0, and its rows are skipped
(not multiplied by 0) in pass 2.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import dask
import numpy as np
from scipy import sparse
from scipy.linalg import blas
from scipy.sparse import csgraph
from scipy.spatial.distance import cdist

from dpdist.engine.gram import GramAccumulator
from dpdist.engine.runtime import DEFAULT_TIMEOUT, Runtime, open_runtime

__all__ = [
    "FriendlyStats",
    "Session",
    "SparseSpectrum",
    "TileStats",
    "batch_labels",
    "consecutive_labels",
    "block_separated",
    "chunk_batch_moments",
    "chunk_rows",
    "nonfinite_rows",
    "chunk_weighted_moment",
    "column_tiles",
    "combine_batch_moments",
    "combine_pass1",
    "friendly_pass1",
    "friendly_pass1_groups",
    "combine_pass1_groups",
    "merge_batch_pieces",
    "friendly_pass2",
    "friendly_weights",
    "open_session",
    "sparse_spectrum",
    "tile_pass1",
    "tile_threshold",
    "batch_top_two_eigenvalues",
]

#: Default bytes of the m batch tiles of one column tile (m * t * t * 8).
DEFAULT_TILE_BYTES = 256 * 2**20
#: Memory budget of one group of pass-1 tiles (see :func:`friendly_pass1_groups`).
DEFAULT_GROUP_BYTES = 2 * 2**30
#: Wide entries compared per block in the friend relation's slow path.
SWEEP_BLOCK = 512
#: Components up to this size are diagonalised densely, in batches of equal size.
DENSE_COMPONENT_LIMIT = 2048


# --------------------------------------------------------------------------------------
# batches and tiles
# --------------------------------------------------------------------------------------


def batch_labels(n_samples: int, sizes: Sequence[int], permutation: np.ndarray | None = None) -> np.ndarray:
    """Batch index of every row: consecutive row ranges of the given ``sizes``, or, with a
    (public) ``permutation``, batch i holds rows ``permutation[start_i:end_i]``."""
    pos_labels = np.repeat(np.arange(len(sizes), dtype=np.int64), np.asarray(sizes, dtype=np.int64))
    if pos_labels.size != n_samples:
        raise ValueError("batch sizes must add up to n_samples")
    if permutation is None:
        return pos_labels
    labels = np.empty(n_samples, dtype=np.int64)
    labels[np.asarray(permutation)] = pos_labels
    return labels


def column_tiles(n_features: int, n_batches: int, tile_bytes: int = DEFAULT_TILE_BYTES) -> list[tuple[int, int]]:
    """Column ranges of the tiles: width t with ``m t^2 8 <= tile_bytes`` (at least 16)."""
    t = int(math.sqrt(tile_bytes / (8.0 * max(1, n_batches))))
    t = max(16, min(n_features, t))
    return [(a, min(a + t, n_features)) for a in range(0, n_features, t)]


# --------------------------------------------------------------------------------------
# per-block kernels (plain NumPy)
# --------------------------------------------------------------------------------------


def nonfinite_rows(x: np.ndarray) -> np.ndarray:
    """Indices of the rows of ``x`` holding a NaN or an infinity. One pass of row sums (a sum
    propagates NaN and inf; ``einsum``, single-threaded) finds the candidates; only rows whose
    sum is not finite (also those whose finite entries overflow the sum) are checked entry by
    entry."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[1] == 0:
        return np.zeros(0, dtype=np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        sums = np.einsum("ij->i", x)
    cand = np.flatnonzero(~np.isfinite(sums))
    if cand.size == 0:
        return cand
    return cand[~np.isfinite(x[cand]).all(axis=1)]


def chunk_rows(x: np.ndarray, cols: tuple[int, int], clip: float = math.inf, bad: np.ndarray | None = None) -> np.ndarray:
    """Columns ``cols`` of a row chunk (whole rows) as a new float64 array, with every row
    holding a NaN or an infinity (anywhere, all columns) replaced by zeros and every entry
    clipped to ``[-clip, clip]``. ``bad`` (:func:`nonfinite_rows`) may be passed when known."""
    if bad is None:
        bad = nonfinite_rows(x)
    part = np.asarray(x[:, cols[0] : cols[1]], dtype=np.float64)
    out = np.clip(part, -clip, clip) if math.isfinite(clip) else np.array(part, copy=True)
    if len(bad):
        out[bad] = 0.0
    return out


def chunk_batch_moments(
    x: np.ndarray, labels: np.ndarray, cols_i: tuple[int, int], cols_j: tuple[int, int], clip: float = math.inf
) -> tuple[np.ndarray, np.ndarray]:
    """Unnormalised batch second-moment tiles of one row chunk.

    Returns ``(present, sums)``: the batch indices present in the chunk and, for each,
    ``sum over its rows of x[I] x[J]^T`` (shape ``(len(present), |I|, |J|)``), with rows
    prepared by :func:`chunk_rows` (non-finite rows zeroed, entries clipped to ``clip``).
    For a diagonal tile (I == J) only the upper triangle is computed (the lower one is zero):
    the batch matrix is defined by its upper triangle throughout.
    """
    labels = np.asarray(labels)
    if labels.size and np.any(labels[1:] < labels[:-1]):
        order = np.argsort(labels, kind="stable")
        x, labels = x[order], labels[order]
    bad = nonfinite_rows(x)
    xi = chunk_rows(x, cols_i, clip, bad)
    xj = xi if cols_i == cols_j else chunk_rows(x, cols_j, clip, bad)
    present, starts = np.unique(labels, return_index=True)
    ends = np.append(starts[1:], labels.size)
    sums = np.empty((present.size, xi.shape[1], xj.shape[1]))
    diag = cols_i == cols_j
    with np.errstate(over="ignore", invalid="ignore"):  # inf/NaN moments: non-finite batches
        for g, (s, e) in enumerate(zip(starts, ends)):
            # runs of at most GRAM_BATCH_ROWS rows combined pairwise (bounded rounding depth);
            # upper triangle only on a diagonal tile (all that it uses): BLAS syrk, half the flops
            acc = GramAccumulator(_syrk_product if diag else None)
            acc.add(xi[s:e], None if diag else xj[s:e])
            sums[g] = acc.total(sums.shape[1:])
    return present, sums


def _syrk_product(a: np.ndarray, b: None) -> np.ndarray:
    return _syrk_upper(a)


def _syrk_upper(a: np.ndarray) -> np.ndarray:
    """Upper triangle of ``a^T a`` (the strict lower triangle is zero), by BLAS ``dsyrk``."""
    if a.shape[0] == 0:
        return np.zeros((a.shape[1], a.shape[1]))
    return blas.dsyrk(1.0, a.T, trans=0, lower=0)


def combine_batch_moments(pieces: Sequence[tuple[np.ndarray, np.ndarray]], sizes: np.ndarray) -> np.ndarray:
    """Sum chunk pieces into the m batch tiles and divide by the batch sizes: ``(m, |I|, |J|)``.

    A batch's pieces (one per chunk it spans) are added pairwise, so the rounding depth grows
    with the log of the number of pieces (the float bound of
    ``dpdist.privacy.pca_calibration.friendly_float_bounds``)."""
    sizes = np.asarray(sizes, dtype=np.float64)
    shape = pieces[0][1].shape[1:]
    out = np.zeros((sizes.size,) + shape)
    parts: dict[int, list] = {}
    for present, sums in pieces:
        for j, b in enumerate(np.asarray(present).tolist()):
            parts.setdefault(b, []).append(sums[j])
    with np.errstate(over="ignore", invalid="ignore"):
        for b, items in parts.items():
            while len(items) > 1:
                items = [items[i] + items[i + 1] if i + 1 < len(items) else items[i] for i in range(0, len(items), 2)]
            out[b] = items[0]
        out /= sizes[:, None, None]
    return out


def block_separated(values: np.ndarray, two_tau: float, sep: np.ndarray | None = None) -> np.ndarray:
    """Mark pairs of batches separated by some entry: ``|v_i - v_j| > 2 tau``.

    ``values`` is ``(m, P)``: batch i's values at P matrix entries (all finite). ``sep`` (m x m
    bool, updated in place and returned) accumulates across calls. Span fast path: entries
    whose span ``max - min`` over the batches is at most 2 tau separate nothing (rounding is
    monotone, so ``fl(v_i - v_j) <= fl(max - min)``: the fast path is exact). The remaining
    entries are compared pairwise in blocks, within each connected component of the
    still-unseparated pairs only (where the span test is applied again).
    """
    m = values.shape[0]
    if sep is None:
        sep = np.zeros((m, m), dtype=bool)
    if m < 2 or values.shape[1] == 0:
        return sep
    with np.errstate(over="ignore", invalid="ignore"):
        return _block_separated(values, two_tau, sep)


def _unsettled_groups(sep: np.ndarray) -> list[np.ndarray]:
    """Connected components (of size >= 2) of the graph of still-unseparated pairs. Two
    batches in different components are already separated, so wide entries need only be
    compared within components: an outlier batch forms no group, and two clusters of
    batches are compared each within itself."""
    unsettled = ~sep
    np.fill_diagonal(unsettled, False)
    if not unsettled.any():
        return []
    _, lab = csgraph.connected_components(sparse.csr_matrix(unsettled), directed=False)
    order = np.argsort(lab, kind="stable")
    sizes = np.bincount(lab)
    parts = np.split(order, np.cumsum(sizes)[:-1])
    return [g for g in parts if g.size >= 2]


def _block_separated(values: np.ndarray, two_tau: float, sep: np.ndarray) -> np.ndarray:
    # differences of huge finite values may overflow to inf: inf > 2 tau marks them separated
    span = values.max(axis=0) - values.min(axis=0)
    wide = np.flatnonzero(~(span <= two_tau))
    groups = None
    for start in range(0, wide.size, SWEEP_BLOCK):
        if groups is None:  # recomputed only after new separations
            groups = _unsettled_groups(sep)
        if not groups:
            break
        cols = wide[start : start + SWEEP_BLOCK]
        changed = False
        for g in groups:
            vg = values[np.ix_(g, cols)]
            keep = ~((vg.max(axis=0) - vg.min(axis=0)) <= two_tau)
            if not keep.any():
                continue
            new = ~(cdist(vg[:, keep], vg[:, keep], metric="chebyshev") <= two_tau)
            block = sep[np.ix_(g, g)]
            if (new & ~block).any():
                sep[np.ix_(g, g)] = block | new
                changed = True
        if changed:
            groups = None
    return sep


@dataclass
class TileStats:
    """Pass-1 statistics of one column tile (I, J), I <= J."""

    cols_i: tuple[int, int]
    cols_j: tuple[int, int]
    nonfinite: np.ndarray  # (m,) bool
    over: np.ndarray  # (m,) bool: some row already has more than k entries above tau
    count_i: np.ndarray  # (m, |I|) entries above tau per row of I in this tile
    count_j: np.ndarray | None  # (m, |J|) per row of J (off-diagonal tiles only)
    separated: np.ndarray  # (m, m) bool
    entries: tuple  # (batch, row, col, value) of entries above tau, row <= col


def tile_pass1(
    batch_tiles: np.ndarray,
    cols_i: tuple[int, int],
    cols_j: tuple[int, int],
    tau: float,
    k: int,
) -> TileStats:
    """Pass-1 kernel of one tile of the m batch moments (``batch_tiles``: (m, |I|, |J|)).

    For a diagonal tile (I == J) the batch matrix is defined by the tile's upper triangle
    (its strict lower triangle is ignored and zeroed): row counts count each off-diagonal
    entry in its row and its column, and only entries with row <= col are kept and compared.
    Everything works on views or single elementwise passes of the (m, |I|, |J|) array.
    """
    m = batch_tiles.shape[0]
    diag = cols_i == cols_j
    tiles = np.triu(batch_tiles) if diag else batch_tiles  # zero lower triangle: never wide, never above tau
    values = tiles.reshape(m, -1)
    finite = np.isfinite(values).all(axis=1)
    above = np.abs(tiles) > tau  # NaN compares False; non-finite batches are excluded below
    if diag:
        t = tiles.shape[1]
        on_diag = above[:, np.arange(t), np.arange(t)]
        count_i = (above.sum(axis=2) + above.sum(axis=1) - on_diag).astype(np.int32)
        count_j = None
        over = count_i.max(axis=1, initial=0) > k
    else:
        count_i = above.sum(axis=2).astype(np.int32)
        count_j = above.sum(axis=1).astype(np.int32)
        over = (count_i.max(axis=1, initial=0) > k) | (count_j.max(axis=1, initial=0) > k)
    keep_b = finite & ~over
    b_idx, r_l, c_l = np.nonzero(above & keep_b[:, None, None])
    entries = (
        b_idx.astype(np.int64),
        (r_l + cols_i[0]).astype(np.int64),
        (c_l + cols_j[0]).astype(np.int64),
        tiles[b_idx, r_l, c_l],
    )
    sep = np.zeros((m, m), dtype=bool)
    fi = np.flatnonzero(finite)
    if fi.size == m:
        block_separated(values, 2.0 * tau, sep)
    elif fi.size >= 2:
        sep[np.ix_(fi, fi)] = block_separated(values[fi], 2.0 * tau)
    return TileStats(cols_i, cols_j, ~finite, over, count_i, count_j, sep, entries)


@dataclass
class FriendlyStats:
    """Exact pass-1 statistics of the m batches (never released; see the module docstring)."""

    n_batches: int
    n_features: int
    batch_sizes: np.ndarray
    finite: np.ndarray
    krcs: np.ndarray
    lambda_1: np.ndarray
    lambda_2: np.ndarray
    friend_counts: np.ndarray
    weights: np.ndarray = field(repr=False)
    weight_sum: float = 0.0


def friendly_weights(friend_counts: np.ndarray, n_batches: int) -> tuple[np.ndarray, float]:
    """FriendlyCore weights of Algorithm 2 Lines 9 and 11: ``p_i = min(max((f_i - m/2)/(m/6),
    0), 1)`` and ``Z = sum p_i``."""
    m = float(n_batches)
    p = np.clip((np.asarray(friend_counts, dtype=np.float64) - m / 2.0) / (m / 6.0), 0.0, 1.0)
    return p, float(p.sum())


def combine_pass1(tiles: Sequence[TileStats], n_features: int, k: int, sizes: np.ndarray) -> FriendlyStats:
    """Reduce the tiles' statistics into :class:`FriendlyStats` (good-set ingredients, friend
    counts, weights)."""
    m = tiles[0].separated.shape[0]
    d = int(n_features)
    nonfinite = np.zeros(m, dtype=bool)
    over = np.zeros(m, dtype=bool)
    sep = np.zeros((m, m), dtype=bool)
    ent = [[], [], [], []]
    for t in tiles:
        nonfinite |= t.nonfinite
        over |= t.over
        sep |= t.separated
        for a, b in zip(ent, t.entries):
            a.append(b)
    finite = ~nonfinite
    sep[nonfinite, :] = True
    sep[:, nonfinite] = True
    friend_counts = (m - sep.sum(axis=1)).astype(np.int64)
    b, r, c, v = (np.concatenate(a) for a in ent)
    # Row counts of T_tau(Sigma_i) from the kept entries: a batch never 'over' in any tile kept
    # all its entries above tau (upper triangle), so each row's count is exact for it (memory
    # O(kept entries), not O(m d)); an off-diagonal entry counts in its row and its column.
    live = ~over[b]
    off = live & (r != c)
    keys = np.concatenate([b[live] * d + r[live], b[off] * d + c[off]])
    uniq, cnt = np.unique(keys, return_counts=True)
    row_max = np.zeros(m, dtype=np.int64)
    np.maximum.at(row_max, uniq // d, cnt)
    krcs = finite & ~over & (row_max <= k)
    keep = krcs[b]
    lam1, lam2 = batch_top_two_eigenvalues(b[keep], r[keep], c[keep], v[keep], m, n_features)
    lam1[~krcs] = np.nan
    lam2[~krcs] = np.nan
    p, z = friendly_weights(friend_counts, m)
    return FriendlyStats(m, n_features, np.asarray(sizes), finite, krcs, lam1, lam2, friend_counts, p, z)


# --------------------------------------------------------------------------------------
# spectra of sparse thresholded matrices, by connected components
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# pass 2 kernels
# --------------------------------------------------------------------------------------


def chunk_weighted_moment(
    x: np.ndarray,
    labels: np.ndarray,
    cols_i: tuple[int, int],
    cols_j: tuple[int, int],
    stats: FriendlyStats,
    clip: float = math.inf,
) -> np.ndarray:
    """``sum_rows w_row x[I] x[J]^T`` with ``w_row = p_batch / (Z b_batch)`` over the rows of
    one chunk whose weight is positive (rows of weight 0 are skipped, never multiplied); rows
    prepared by :func:`chunk_rows` as in pass 1."""
    w = stats.weights[labels] / (stats.weight_sum * stats.batch_sizes[labels])
    sel = w > 0
    xs = np.asarray(x)[sel]
    bad = nonfinite_rows(xs)
    xi = chunk_rows(xs, cols_i, clip, bad)
    with np.errstate(over="ignore", invalid="ignore"):
        if cols_i == cols_j:
            # y^T y with y = sqrt(w) x, upper triangle only (all a diagonal tile uses): syrk,
            # in runs of at most GRAM_BATCH_ROWS rows combined pairwise
            acc = GramAccumulator(_syrk_product)
            acc.add(xi * np.sqrt(w[sel])[:, None])
            return acc.total((xi.shape[1], xi.shape[1]))
        xj = chunk_rows(xs, cols_j, clip, bad)
        acc = GramAccumulator()
        acc.add(xi, xj * w[sel, None])
        return acc.total((xi.shape[1], xj.shape[1]))


def tile_threshold(tile: np.ndarray, cols_i: tuple[int, int], cols_j: tuple[int, int], threshold: float) -> tuple:
    """Entries of ``T_threshold`` (entries with ``|v| > threshold``) of one tile of ``Sigma_bar``
    with row <= col: ``(rows, cols, vals)``.

    A diagonal tile is symmetrised from its upper triangle (the definition used in pass 1)."""
    if cols_i == cols_j:
        iu = np.triu_indices(tile.shape[0])
        vals = tile[iu]
        r, c = iu
    else:
        vals = tile.ravel()
        r, c = np.unravel_index(np.arange(vals.size), tile.shape)
    keep = np.abs(vals) > threshold
    return (r[keep] + cols_i[0]).astype(np.int64), (c[keep] + cols_j[0]).astype(np.int64), vals[keep]


def _sum_arrays(*parts):
    out = parts[0].copy()
    for p in parts[1:]:
        out += p
    return out


def merge_batch_pieces(*pieces: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Merge chunk pieces ``(present, sums)`` into one piece (sums of the same batch add)."""
    present = np.unique(np.concatenate([p[0] for p in pieces]))
    out = np.zeros((present.size,) + pieces[0][1].shape[1:])
    with np.errstate(over="ignore", invalid="ignore"):
        for pr, sm in pieces:
            out[np.searchsorted(present, pr)] += sm
    return present, out


def normalise_batch_moments(piece: tuple[np.ndarray, np.ndarray], sizes: np.ndarray) -> np.ndarray:
    """The merged piece as the ``(m, |I|, |J|)`` batch moments (sums divided by batch sizes)."""
    return combine_batch_moments([piece], sizes)


def _concat_entries(*parts):
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def _tree(fn, items: list, fan_in: int = 4):
    """Reduce delayed ``items`` with ``fn(*group)`` in a tree of fan-in ``fan_in``, so that
    partial results are merged (and freed) as they arrive instead of all held at once."""
    while len(items) > 1:
        items = [
            dask.delayed(fn, pure=True)(*items[i : i + fan_in]) if len(items[i : i + fan_in]) > 1 else items[i]
            for i in range(0, len(items), fan_in)
        ]
    return items[0]


# --------------------------------------------------------------------------------------
# dask wiring
# --------------------------------------------------------------------------------------


def consecutive_labels(start: int, stop: int, bounds: np.ndarray) -> np.ndarray:
    """Batch indices of rows ``start .. stop-1`` for consecutive batches with boundaries
    ``bounds`` (``bounds[i]`` is the first row of batch i; ``bounds[m] = n``)."""
    return np.searchsorted(bounds, np.arange(start, stop), side="right") - 1


def _label_parts(labels, sizes, ranges) -> tuple[list, bool]:
    """Per-chunk batch labels: for consecutive batches (``labels is None``) a tiny task per
    chunk computes them from the m + 1 batch boundaries (nothing of size n on the client);
    otherwise slices of the given ``labels`` array (a public permutation)."""
    if labels is None:
        bounds = dask.delayed(np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))]))
        return [dask.delayed(consecutive_labels, pure=True)(a, b, bounds) for a, b in ranges], True
    labels = np.asarray(labels)
    return [labels[a:b] for a, b in ranges], bool(np.all(np.diff(labels) >= 0))


def _row_chunks(X):
    """Row-chunk delayed blocks of X with all columns in one chunk, and their row ranges."""
    X = X.rechunk({1: -1}) if len(X.chunks[1]) > 1 else X
    blocks = X.to_delayed().ravel().tolist()
    bounds = np.concatenate([[0], np.cumsum(X.chunks[0])])
    return blocks, [(int(bounds[i]), int(bounds[i + 1])) for i in range(len(blocks))]


def friendly_pass1_groups(
    X,
    *,
    labels: np.ndarray | None,
    sizes: Sequence[int],
    tau: float,
    k: int,
    tile_bytes: int = DEFAULT_TILE_BYTES,
    group_bytes: int = DEFAULT_GROUP_BYTES,
    clip: float = math.inf,
) -> list:
    """Pass 1 as groups of tiles, each a delayed list of :class:`TileStats`.

    ``labels`` is the batch index of every row, or None for consecutive batches of ``sizes``
    (computed per chunk on the workers). ``clip`` is the public entry clip (:func:`chunk_rows`).

    A group holds tiles whose m batch tiles together take at most ``group_bytes`` (at least
    one tile). Computing the groups one after the other bounds memory by about
    ``group_bytes`` plus the row chunks in flight, at the price of reading X once per group;
    with the defaults a d = 1,000, m = 200 problem is a single group (one read).
    """
    n, d = X.shape
    m = len(sizes)
    sizes = np.asarray(sizes, dtype=np.int64)
    blocks, ranges = _row_chunks(X)
    tiles = column_tiles(d, m, tile_bytes)
    label_parts, consecutive = _label_parts(labels, sizes, ranges)
    groups, current, used = [], [], 0
    for ti, ci in enumerate(tiles):
        for cj in tiles[ti:]:
            size = 8 * m * (ci[1] - ci[0]) * (cj[1] - cj[0])
            if current and used + size > group_bytes:
                groups.append(current)
                current, used = [], 0
            pieces = [
                dask.delayed(chunk_batch_moments, pure=True)(blk, lab, ci, cj, float(clip))
                for blk, lab in zip(blocks, label_parts)
            ]
            if consecutive:
                # chunks hold disjoint runs of batches: one allocation, each piece copied once
                bt = dask.delayed(combine_batch_moments, pure=True)(pieces, sizes)
            else:
                # shuffled batches: every piece spans all m batches, so merge them in a tree
                bt = dask.delayed(normalise_batch_moments, pure=True)(_tree(merge_batch_pieces, pieces), sizes)
            current.append(dask.delayed(tile_pass1, pure=True)(bt, ci, cj, float(tau), int(k)))
            used += size
    groups.append(current)
    return [dask.delayed(list, pure=True)(g) for g in groups]


def combine_pass1_groups(*groups: list, n_features: int, k: int, sizes) -> FriendlyStats:
    """:func:`combine_pass1` over the tiles of all groups."""
    return combine_pass1([t for g in groups for t in g], n_features, k, sizes)


def friendly_pass1(
    X,
    *,
    labels: np.ndarray | None,
    sizes: Sequence[int],
    tau: float,
    k: int,
    tile_bytes: int = DEFAULT_TILE_BYTES,
    clip: float = math.inf,
):
    """Delayed :class:`FriendlyStats` of X (n x d dask array) split into batches by ``labels``
    (all tiles in one graph; the estimators use :func:`friendly_pass1_groups`)."""
    groups = friendly_pass1_groups(
        X, labels=labels, sizes=sizes, tau=tau, k=k, tile_bytes=tile_bytes, group_bytes=1 << 62, clip=clip
    )
    return dask.delayed(combine_pass1_groups, pure=True)(
        *groups, n_features=int(X.shape[1]), k=int(k), sizes=np.asarray(sizes, dtype=np.int64)
    )


def friendly_pass2(
    X,
    stats,
    *,
    labels: np.ndarray | None,
    threshold: float,
    sizes: Sequence[int] | None = None,
    tile_bytes: int = DEFAULT_TILE_BYTES,
    clip: float = math.inf,
):
    """Delayed ``(rows, cols, vals)`` (row <= col) of ``T_threshold(Sigma_bar)``.

    ``clip`` is the public entry clip of pass 1 (:func:`chunk_rows`); ``threshold`` the hard
    threshold (named so, not ``rho``: in dpdist ``rho`` is a zCDP budget).

    ``labels`` as in :func:`friendly_pass1_groups` (None: consecutive batches of ``sizes``).

    ``stats`` is the pass-1 result: a :class:`FriendlyStats`, a delayed one, or a
    ``distributed`` future of one (so the weights stay on the cluster).
    """
    n, d = X.shape
    blocks, ranges = _row_chunks(X)
    tiles = column_tiles(d, 1, tile_bytes)
    label_parts, _ = _label_parts(labels, sizes, ranges)
    parts = []
    for ti, ci in enumerate(tiles):
        for cj in tiles[ti:]:
            pieces = [
                dask.delayed(chunk_weighted_moment, pure=True)(blk, lab, ci, cj, stats, float(clip))
                for blk, lab in zip(blocks, label_parts)
            ]
            tile = _tree(_sum_arrays, pieces)
            parts.append(dask.delayed(tile_threshold, pure=True)(tile, ci, cj, float(threshold)))
    return dask.delayed(_concat_entries, pure=True)(*parts)


# --------------------------------------------------------------------------------------
# where results live: a session on one scheduler
# --------------------------------------------------------------------------------------


class Handle:
    """A result kept where it was computed: a ``distributed`` future, or a local value."""

    __slots__ = ("_obj",)

    def __init__(self, obj: Any):
        self._obj = obj

    def __repr__(self) -> str:  # never show the value
        return "<dpdist Handle>"

    @property
    def graph_input(self) -> Any:
        """What to pass into a delayed graph (the future, or the local value)."""
        return self._obj


class Session:
    """Runs graphs on one :class:`~dpdist.engine.runtime.Runtime` and keeps their
    non-private results where they were computed.

    Parameters
    ----------
    runtime : Runtime
        The fit's runtime (a ``distributed`` client, or a local dask scheduler), with its
        deadline. Every graph, wait and fetch goes through it: nothing here looks up a
        default client.
    """

    def __init__(self, runtime: Runtime):
        self.runtime = runtime

    @property
    def client(self) -> Any:
        """The ``distributed.Client``, or None for a local scheduler."""
        return self.runtime.client

    def persist(self, obj, *, noised: bool = False) -> Handle:
        """Compute a delayed object once (waiting for it), keeping its result on the cluster."""
        return Handle(self.runtime.persist([obj], noised=noised)[0])

    def persist_each(self, objs: Sequence, *, noised: bool = False) -> list[Handle]:
        """Persist delayed objects one after the other (each finished before the next starts),
        so that their working memories never add up."""
        return [self.persist(obj, noised=noised) for obj in objs]

    def apply(self, fn: Callable, *args: Any, **kwargs: Any) -> Handle:
        """Run ``fn`` where the handles' values live (handles in ``args`` are resolved there)."""
        args = tuple(a.graph_input if isinstance(a, Handle) else a for a in args)
        return Handle(self.runtime.submit(fn, *args, **kwargs))

    def fetch(self, handle: Handle) -> Any:
        """Bring a (noised, releasable) result back to the caller."""
        return self.runtime.result(handle.graph_input, noised=True)


@contextlib.contextmanager
def open_session(scheduler: Any, *, timeout: Any = DEFAULT_TIMEOUT) -> Iterator[Session]:
    """A :class:`Session` on ``scheduler`` (values and ``timeout`` as in
    :func:`dpdist.engine.runtime.open_runtime`)."""
    with open_runtime(scheduler, timeout=timeout) as runtime:
        yield Session(runtime)
