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
and updates the m x m "separated" relation. Tiles are computed in groups of at most
``group_bytes`` of batch tiles, one group after the other (:func:`pass1_tile_groups`,
:func:`persist_pass1`): memory is bounded by the group budget plus the row chunks in flight,
and X is read once per group (once for d = 1,000, m = 200 with the defaults). The friend
relation needs all m batch values of an entry at once, so a single read with less memory than
``m d^2 / 2`` values is impossible; more groups trade reads for memory.

Within a group, one task per row chunk (:func:`chunk_group_moments`) checks the chunk for
non-finite rows and clips it once, then forms every batch's moments over the group's columns:
when the group covers the upper triangle of its columns (a one-group pass), one BLAS ``syrk``
per batch over all of them (the shape BLAS runs fastest; upper triangle only, each batch
matrix being defined by its upper triangle), sliced into the tiles; otherwise one product per
tile. :func:`tile_pass1` reads each tile batch by batch (one t x t slice in cache at a time:
finiteness, the entries above tau and their row counts, the running maximum and minimum over
the batches). The friend relation uses the span fast path: an entry whose values across the
(finite) batches span at most 2 tau separates no pair; only wider entries are compared
pairwise (``scipy.spatial.distance.cdist(..., "chebyshev")`` on blocks of wide entries), and
among batches that still have an unseparated partner only: a batch already separated from
every other one (an outlier batch) drops out, so its wide entries cost nothing after the first
block. (A sort-and-sweep per wide entry finds the same pairs, but the union over entries
still has to be written into the m x m relation; the blocked Chebyshev distance does that in
compiled code.)

Pass 2: when pass 1 is one group, its normalised batch tiles are kept where they were
computed (at most ``group_bytes``, the memory pass 1 needs anyway) and ``Sigma_bar`` is their
weighted sum (:func:`tile_weighted_moment`, m t^2 operations a tile): X is read once in all.
Otherwise pass 2 reads X again: one weighted Gram per tile (``syrk`` on the diagonal tiles),
summed over row chunks in a tree (:func:`friendly_pass2`).

Non-finite values and magnitudes (issue 9): both passes first replace every row holding a
NaN or an infinity by a zero row (the row rule of every estimator: a per-row map, uncounted)
and clip every entry to the caller's public ``clip`` (:func:`chunk_rows`), so each product
``x_a x_b`` is at most ``clip^2`` and the rounding of every batch moment and of Sigma_bar is
bounded by public values (``dpdist.privacy.pca_calibration.friendly_float_bounds``). A batch
whose second moment is still non-finite (possible only with ``clip = inf``) is not good, has
no friends (not even itself: ``NaN <= 2 tau`` is false), weighs 0, and its rows (or its kept
tiles) are skipped (not multiplied by 0) in pass 2.
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
    "pass1_tile_groups",
    "persist_pass1",
    "persist_pass2",
    "chunk_group_moments",
    "tile_weighted_moment",
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
    """Indices of the rows of ``x`` holding a NaN or an infinity. One pass of row sums in the
    input's own precision (a sum propagates NaN and inf; ``einsum``, single-threaded; no
    float64 copy of a float32 chunk) finds the candidates; only rows whose sum is not finite
    (also those whose finite entries overflow the sum) are checked entry by entry."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    if x.shape[1] == 0:
        return np.zeros(0, dtype=np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        sums = np.einsum("ij->i", x)
    cand = np.flatnonzero(~np.isfinite(sums))
    if cand.size == 0:
        return cand
    return cand[~np.isfinite(x[cand]).all(axis=1)]


def chunk_rows(
    x: np.ndarray, cols: tuple[int, int], clip: float = math.inf, bad: np.ndarray | None = None, *, copy: bool = True
) -> np.ndarray:
    """Columns ``cols`` of a row chunk (whole rows) as float64, with every row holding a NaN or
    an infinity (anywhere, all columns) replaced by zeros and every entry clipped to
    ``[-clip, clip]``. ``bad`` (:func:`nonfinite_rows`) may be passed when known.

    The result is a new C-contiguous array (one copy: float64 input is clipped into it,
    float32 input converted exactly and clipped in place), whatever the values: a view for
    columns that need no change would make the time a chunk takes say whether it held a
    non-finite row or an entry beyond the clip. ``copy`` is accepted for callers that only
    read the result; it changes nothing."""
    if bad is None:
        bad = nonfinite_rows(x)
    part = np.asarray(x)[:, cols[0] : cols[1]]
    if part.dtype == np.float64:
        out = np.clip(part, -clip, clip) if math.isfinite(clip) else np.array(part, copy=True)
    else:
        out = part.astype(np.float64)
        if math.isfinite(clip):
            np.clip(out, -clip, clip, out=out)
    out = np.ascontiguousarray(out)
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
    the batch matrix is defined by its upper triangle throughout. (One tile of
    :func:`chunk_group_moments`.)
    """
    present, sums, _ = chunk_group_moments(x, labels, [(cols_i, cols_j)], clip)[0]
    return present, sums


def chunk_group_moments(
    x: np.ndarray,
    labels: np.ndarray,
    tiles: Sequence[tuple[tuple[int, int], tuple[int, int]]],
    clip: float = math.inf,
    sizes: np.ndarray | None = None,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`chunk_batch_moments` of one row chunk for several tiles ``(cols_i, cols_j)`` at
    once: one task per row chunk and bundle of tiles, so the rows are sorted by batch, checked
    for non-finite values and clipped once (at most one float64 copy of the columns the tiles
    span, none when they need no change: :func:`chunk_rows`), not once per tile.

    When the tiles cover most of the upper triangle of the columns they span (a whole pass-1
    group of d = 1,000 columns, say), each batch's moment over the span is one BLAS ``syrk``
    (upper triangle; the shape BLAS runs fastest) and the tiles are sliced out of it;
    otherwise each tile is its own product (``syrk`` on a diagonal tile, ``gemm`` off it).
    Either way every entry is a dot product over the batch's rows, summed by a
    :class:`~dpdist.engine.gram.GramAccumulator` (runs of at most ``GRAM_BATCH_ROWS`` rows
    combined pairwise: the summation depth of
    ``dpdist.privacy.pca_calibration.friendly_float_bounds``), and the strict lower triangle
    of a diagonal tile is zero.

    Returns, per tile, ``(present, sums, done)``. With the batch ``sizes`` (all m of them), a
    batch whose rows all lie in this chunk is finished here: its sum is divided by its size
    as it is written (``done`` True; the same two roundings as dividing later), so that
    :func:`combine_batch_moments` need not copy it. Otherwise ``done`` is all False and the
    sums are raw.
    """
    labels = np.asarray(labels)
    x = np.asarray(x)
    if labels.size and np.any(labels[1:] < labels[:-1]):
        order = np.argsort(labels, kind="stable")
        x, labels = x[order], labels[order]
    lo = min(min(ci[0], cj[0]) for ci, cj in tiles)
    hi = max(max(ci[1], cj[1]) for ci, cj in tiles)
    rows = chunk_rows(x, (lo, hi), clip, nonfinite_rows(x), copy=False)  # read only
    present, starts = np.unique(labels, return_index=True)
    ends = np.append(starts[1:], labels.size)
    if sizes is None:
        done = np.zeros(present.size, dtype=bool)
    else:
        done = (ends - starts) == np.asarray(sizes)[present]
    divisor = np.where(done, np.asarray(sizes)[present] if sizes is not None else 1, 1).astype(np.float64)
    out = [(present, np.empty((present.size, ci[1] - ci[0], cj[1] - cj[0])), done) for ci, cj in tiles]
    area = sum((ci[1] - ci[0]) * (cj[1] - cj[0]) for ci, cj in tiles)
    whole_span = area >= 0.75 * (hi - lo) * (hi - lo + 1) / 2
    with np.errstate(over="ignore", invalid="ignore"):  # inf/NaN moments: non-finite batches
        for g, (s, e) in enumerate(zip(starts, ends)):
            if whole_span:
                acc = GramAccumulator(_syrk_product)
                acc.add(rows[s:e])
                full = acc.total((hi - lo, hi - lo))
                for (ci, cj), (_, sums, _) in zip(tiles, out):
                    _write(full[ci[0] - lo : ci[1] - lo, cj[0] - lo : cj[1] - lo], done[g], divisor[g], sums[g])
                continue
            for (ci, cj), (_, sums, _) in zip(tiles, out):
                a = rows[s:e, ci[0] - lo : ci[1] - lo]
                if ci == cj:  # syrk needs a contiguous operand (upper triangle, half the flops)
                    acc = GramAccumulator(_syrk_product)
                    acc.add(np.ascontiguousarray(a))
                else:
                    acc = GramAccumulator()
                    acc.add(a, rows[s:e, cj[0] - lo : cj[1] - lo])
                _write(acc.total(sums.shape[1:]), done[g], divisor[g], sums[g])
    return out


def _write(total: np.ndarray, done: bool, size: float, out: np.ndarray) -> None:
    """``out[...] = total / size`` for a finished batch, else ``out[...] = total``."""
    if done:
        np.divide(total, size, out=out)
    else:
        out[...] = total


def _syrk_product(a: np.ndarray, b: None) -> np.ndarray:
    return _syrk_upper(a)


def _syrk_upper(a: np.ndarray) -> np.ndarray:
    """Upper triangle of ``a^T a`` (the strict lower triangle is zero), by BLAS ``dsyrk``
    (``a`` C-contiguous: its transpose is passed to Fortran without a copy)."""
    if a.shape[0] == 0:
        return np.zeros((a.shape[1], a.shape[1]))
    return blas.dsyrk(1.0, a.T, trans=0, lower=0)


def combine_batch_moments(pieces: Sequence[tuple], sizes: np.ndarray) -> list[np.ndarray]:
    """The m normalised batch tiles ``S_i[I, J]`` from chunk pieces ``(present, sums)`` or
    ``(present, sums, done)`` (:func:`chunk_group_moments`): a list of m ``(|I|, |J|)``
    arrays.

    A batch finished in one chunk (``done``) is that piece's slice, not copied. Otherwise its
    pieces (one per chunk it spans) are added pairwise, so the rounding depth grows with the
    log of the number of pieces (the float bound of
    ``dpdist.privacy.pca_calibration.friendly_float_bounds``), and the sum divided by the
    batch size: the same operations as dividing a whole-batch sum, so either way a batch's
    tile is bit for bit the same."""
    sizes = np.asarray(sizes, dtype=np.float64)
    shape = pieces[0][1].shape[1:]
    parts: dict[int, list] = {}
    out: list = [None] * sizes.size
    for piece in pieces:
        present, sums = piece[0], piece[1]
        done = piece[2] if len(piece) > 2 else np.zeros(len(present), dtype=bool)
        for j, b in enumerate(np.asarray(present).tolist()):
            if done[j]:
                out[b] = sums[j]
            else:
                parts.setdefault(b, []).append(sums[j])
    with np.errstate(over="ignore", invalid="ignore"):
        for b in range(sizes.size):
            if out[b] is not None:
                continue
            items = parts.get(b)
            if not items:
                out[b] = np.zeros(shape)
                continue
            while len(items) > 1:
                items = [items[i] + items[i + 1] if i + 1 < len(items) else items[i] for i in range(0, len(items), 2)]
            out[b] = items[0] / sizes[b]
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
        # differences of huge finite values may overflow to inf: inf > 2 tau marks them separated
        span = values.max(axis=0) - values.min(axis=0)
        return _separate_wide(values, np.flatnonzero(~(span <= two_tau)), two_tau, sep)


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


def _separate_wide(values: np.ndarray, wide: np.ndarray, two_tau: float, sep: np.ndarray) -> np.ndarray:
    """The slow path of :func:`block_separated` on the ``wide`` columns of ``values`` (those
    whose span exceeds 2 tau over the batches); batches already separated from every other one
    (non-finite batches are passed that way) form no group and are never read."""
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
    batch_tiles: Sequence[np.ndarray] | np.ndarray,
    cols_i: tuple[int, int],
    cols_j: tuple[int, int],
    tau: float,
    k: int,
) -> TileStats:
    """Pass-1 kernel of one tile of the m batch moments (``batch_tiles``: m arrays of shape
    (|I|, |J|), :func:`combine_batch_moments`, or one (m, |I|, |J|) array).

    For a diagonal tile (I == J) the batch matrix is defined by the tile's upper triangle
    (its strict lower triangle is ignored and zeroed): row counts count each off-diagonal
    entry in its row and its column, and only entries with row <= col are kept and compared.

    The tile is read batch by batch (one batch tile, ``|I| |J|`` values, stays in cache while
    it is checked for finiteness, compared with tau and folded into the running maximum and
    minimum over the finite batches), never as (m, |I|, |J|) temporaries. Entries above tau
    are sparse: the row counts are counted from their indices. The friend relation then
    compares, pairwise, only the entries whose span over the finite batches exceeds 2 tau
    (:func:`block_separated`'s slow path).
    """
    m = len(batch_tiles)
    ti, tj = batch_tiles[0].shape
    diag = cols_i == cols_j
    finite = np.ones(m, dtype=bool)
    over = np.zeros(m, dtype=bool)
    count_i = np.zeros((m, ti), dtype=np.int32)
    count_j = None if diag else np.zeros((m, tj), dtype=np.int32)
    hi = np.full(ti * tj, -np.inf)
    lo = np.full(ti * tj, np.inf)
    lower = np.tri(ti, tj, -1, dtype=bool) if diag else None
    buf = np.empty((ti, tj)) if diag else None
    ent_b, ent_f, ent_v = [], [], []
    with np.errstate(over="ignore", invalid="ignore"):
        for b in range(m):
            s = batch_tiles[b]
            if diag:  # zero lower triangle: never wide, never above tau
                np.copyto(buf, s)
                buf[lower] = 0.0
                s = buf
            # a finite sum proves every entry finite; an overflowing one is checked entrywise
            finite[b] = bool(np.isfinite(s.sum())) or bool(np.isfinite(s).all())
            sv = s.reshape(-1)
            flat = np.flatnonzero(np.abs(sv) > tau)  # NaN compares False
            r, c = np.divmod(flat, tj)
            ci = np.bincount(r, minlength=ti)
            if diag:
                ci += np.bincount(c, minlength=tj)
                ci -= np.bincount(r[r == c], minlength=ti)
            else:
                cj = np.bincount(c, minlength=tj)
                count_j[b] = cj
                over[b] = cj.max(initial=0) > k
            count_i[b] = ci
            over[b] |= ci.max(initial=0) > k
            if finite[b]:
                if not over[b]:
                    ent_b.append(np.full(flat.size, b, dtype=np.int64))
                    ent_f.append(flat)
                    ent_v.append(sv[flat])
                np.maximum(hi, sv, out=hi)
                np.minimum(lo, sv, out=lo)
        flat = np.concatenate(ent_f) if ent_f else np.zeros(0, np.int64)
        r_l, c_l = np.divmod(flat, tj)
        entries = (
            np.concatenate(ent_b) if ent_b else np.zeros(0, np.int64),
            (r_l + cols_i[0]).astype(np.int64),
            (c_l + cols_j[0]).astype(np.int64),
            np.concatenate(ent_v) if ent_v else np.zeros(0),
        )
        sep = np.zeros((m, m), dtype=bool)
        nonfinite = ~finite
        if m >= 2 and finite.sum() >= 2 and hi.size:
            # differences of huge finite values may overflow to inf: inf > 2 tau marks them separated
            wide = np.flatnonzero(~(hi - lo <= 2.0 * tau))
            if wide.size:
                # the wide entries of the finite batches (upper triangle only on a diagonal tile:
                # the lower one is zero in every batch, never wide); non-finite batches enter as
                # separated from all (no group, never read), then are unmarked: the tile
                # reports separations among finite batches only
                values = np.zeros((m, wide.size))
                for b in np.flatnonzero(finite):
                    values[b] = batch_tiles[b].reshape(-1)[wide]
                sep[nonfinite, :] = True
                sep[:, nonfinite] = True
                _separate_wide(values, np.arange(wide.size), 2.0 * tau, sep)
                sep[nonfinite, :] = False
                sep[:, nonfinite] = False
    return TileStats(cols_i, cols_j, nonfinite, over, count_i, count_j, sep, entries)


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
    prepared by :func:`chunk_rows` as in pass 1. (Pass 2 when the batch tiles of pass 1 were
    not kept, :func:`friendly_pass2`.)"""
    w = stats.weights[labels] / (stats.weight_sum * stats.batch_sizes[labels])
    sel = w > 0
    xs = np.asarray(x)
    if not sel.all():
        xs, w = xs[sel], w[sel]
    bad = nonfinite_rows(xs)
    xi = chunk_rows(xs, cols_i, clip, bad)
    with np.errstate(over="ignore", invalid="ignore"):
        if cols_i == cols_j:
            # y^T y with y = sqrt(w) x (scaled in place), upper triangle only (all a diagonal
            # tile uses): syrk, in runs of at most GRAM_BATCH_ROWS rows combined pairwise
            xi *= np.sqrt(w)[:, None]
            acc = GramAccumulator(_syrk_product)
            acc.add(xi)
            return acc.total((xi.shape[1], xi.shape[1]))
        xj = chunk_rows(xs, cols_j, clip, bad)
        xj *= w[:, None]
        acc = GramAccumulator()
        acc.add(xi, xj)
        return acc.total((xi.shape[1], xj.shape[1]))


#: Rows of a tile weighted and summed together in :func:`tile_weighted_moment` (bounds its
#: temporary to about this many values per batch).
_WEIGHTED_SLAB_VALUES = 1 << 16


def tile_weighted_moment(batch_tiles: Sequence[np.ndarray] | np.ndarray, stats: FriendlyStats) -> np.ndarray:
    """One tile of ``Sigma_bar`` from the kept batch tiles of pass 1: ``C = sum_i q_i S_i``
    over the batches with ``p_i > 0``, ``q_i = p_i / Z`` (batches of weight 0 are skipped,
    never multiplied: a non-finite batch weighs 0), summed pairwise over the batches.

    ``batch_tiles`` are the m normalised batch moments ``S_i[I, J]`` that pass 1 compared
    (:func:`combine_batch_moments`); they are not modified. The work is a slab of tile rows
    at a time (all batches of the slab: a temporary of at most ``_WEIGHTED_SLAB_VALUES``
    values per batch), weighted and then added pairwise in place.

    Float error: each term ``fl(q_i S_i)`` passes through at most ``ceil(log2 m)`` additions,
    so C lies within ``gamma_{m + ceil(log2 m) + 1} c^2 (1 + gamma_D)`` of a convex combination
    of the computed batch moments (the matrices the friend test compared), which is within the
    ``eta_0`` of ``dpdist.privacy.pca_calibration.friendly_float_bounds`` (proof there).
    """
    p = np.asarray(stats.weights, dtype=np.float64)
    sel = np.flatnonzero(p > 0)
    ti, tj = batch_tiles[0].shape
    out = np.zeros((ti, tj))
    if sel.size == 0:
        return out
    q = p[sel] / stats.weight_sum
    slab = max(1, _WEIGHTED_SLAB_VALUES // max(1, tj))
    part = np.empty((sel.size, min(slab, ti), tj))
    with np.errstate(over="ignore", invalid="ignore"):
        for r0 in range(0, ti, slab):
            r1 = min(ti, r0 + slab)
            buf = part[:, : r1 - r0]
            for j, b in enumerate(sel):
                np.multiply(batch_tiles[b][r0:r1], q[j], out=buf[j])
            out[r0:r1] = _pairwise_sum_first_axis(buf)
    return out


def _pairwise_sum_first_axis(a: np.ndarray) -> np.ndarray:
    """Sum over axis 0, pairwise and in place (``a`` is overwritten): every term passes through
    at most ``ceil(log2 len(a))`` additions."""
    k = a.shape[0]
    while k > 1:
        h = k // 2
        a[:h] += a[k - h : k]  # pairs i and k - h + i; for odd k the middle term waits
        k -= h
    return a[0]


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
        for piece in pieces:  # (present, sums) or, raw sums, (present, sums, done)
            out[np.searchsorted(present, piece[0])] += piece[1]
    return present, out


def normalise_batch_moments(piece: tuple[np.ndarray, np.ndarray], sizes: np.ndarray) -> list[np.ndarray]:
    """The merged piece as the m batch moments (sums divided by batch sizes)."""
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


def pass1_tile_groups(
    n_features: int, n_batches: int, tile_bytes: int = DEFAULT_TILE_BYTES, group_bytes: int = DEFAULT_GROUP_BYTES
) -> list[list[tuple[tuple[int, int], tuple[int, int]]]]:
    """The tiles ``(cols_i, cols_j)`` (I <= J) of pass 1 in groups whose m batch tiles together
    take at most ``group_bytes`` (at least one tile a group), in row-major order."""
    cols = column_tiles(int(n_features), int(n_batches), tile_bytes)
    tiles = [(ci, cj) for a, ci in enumerate(cols) for cj in cols[a:]]
    return _pack(tiles, group_bytes, 8 * int(n_batches))


def _pack(tiles: list, budget: int, bytes_per_value: int) -> list[list]:
    """Consecutive runs of ``tiles`` whose ``|I| |J| bytes_per_value`` bytes together fit in
    ``budget`` (at least one tile a run)."""
    out, current, used = [], [], 0
    for ci, cj in tiles:
        size = bytes_per_value * (ci[1] - ci[0]) * (cj[1] - cj[0])
        if current and used + size > budget:
            out.append(current)
            current, used = [], 0
        current.append((ci, cj))
        used += size
    out.append(current)
    return out


def _chunk_batch_counts(labels, sizes, ranges) -> list[int]:
    """Upper bounds on the number of batches each row chunk holds (public: from the batch
    sizes and the chunk boundaries, or from the public labels)."""
    m = len(sizes)
    if labels is None:
        bounds = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))])
        return [
            int(np.searchsorted(bounds, b - 1, side="right") - np.searchsorted(bounds, a, side="right")) + 1
            if b > a else 0
            for a, b in ranges
        ]
    labels = np.asarray(labels)
    if labels.size and np.all(np.diff(labels) >= 0):
        return [int(labels[b - 1] - labels[a]) + 1 if b > a else 0 for a, b in ranges]
    return [m] * len(ranges)


def _pass1_graph(X, *, labels, sizes, tau, k, tile_bytes, group_bytes, clip) -> list[tuple[Any, list]]:
    """Pass 1 as a list of groups ``(delayed list of TileStats, [(cols_i, cols_j, delayed
    batch tiles), ...])`` (see :func:`friendly_pass1_groups`)."""
    n, d = X.shape
    m = len(sizes)
    sizes = np.asarray(sizes, dtype=np.int64)
    blocks, ranges = _row_chunks(X)
    label_parts, consecutive = _label_parts(labels, sizes, ranges)
    counts = _chunk_batch_counts(labels, sizes, ranges)
    out = []
    for group in pass1_tile_groups(d, m, tile_bytes, group_bytes):
        pieces: dict[tuple, list] = {tile: [] for tile in group}
        for blk, lab, present in zip(blocks, label_parts, counts):
            # one task per row chunk and bundle of tiles: the chunk is checked and clipped once;
            # with consecutive batches, the batches it holds whole are finished there
            # a task's pieces (the batches it holds times its tiles) take at most tile_bytes;
            # with shuffled batches every chunk holds all m, and each tile is a task of its own
            for bundle in _pack(group, tile_bytes, 8 * max(1, present)):
                part = dask.delayed(chunk_group_moments, pure=True)(blk, lab, bundle, float(clip),
                                                                   sizes if consecutive else None)
                for t, tile in enumerate(bundle):
                    pieces[tile].append(part[t])
        stats, kept = [], []
        for ci, cj in group:
            if consecutive:
                # chunks hold disjoint runs of batches: those held whole are kept as they are,
                # the few cut by a chunk boundary are summed
                bt = dask.delayed(combine_batch_moments, pure=True)(pieces[(ci, cj)], sizes)
            else:
                # shuffled batches: every piece spans all m batches, so merge them in a tree
                bt = dask.delayed(normalise_batch_moments, pure=True)(_tree(merge_batch_pieces, pieces[(ci, cj)]), sizes)
            stats.append(dask.delayed(tile_pass1, pure=True)(bt, ci, cj, float(tau), int(k)))
            kept.append((ci, cj, bt))
        out.append((dask.delayed(list, pure=True)(stats), kept))
    return out


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
    one tile, :func:`pass1_tile_groups`). Computing the groups one after the other bounds
    memory by about ``group_bytes`` plus the row chunks in flight, at the price of reading X
    once per group; with the defaults a d = 1,000, m = 200 problem is a single group (one
    read). Within a group, one task per row chunk computes the pieces of as many of the
    group's tiles as fit in ``tile_bytes`` (:func:`chunk_group_moments`: the chunk is checked
    and clipped once, not once per tile).
    """
    return [g for g, _ in _pass1_graph(X, labels=labels, sizes=sizes, tau=tau, k=k, tile_bytes=tile_bytes,
                                       group_bytes=group_bytes, clip=clip)]


def persist_pass1(
    session: "Session",
    X,
    *,
    labels: np.ndarray | None,
    sizes: Sequence[int],
    tau: float,
    k: int,
    tile_bytes: int = DEFAULT_TILE_BYTES,
    group_bytes: int = DEFAULT_GROUP_BYTES,
    clip: float = math.inf,
) -> tuple[list, list | None]:
    """Run pass 1 on ``session``: returns the handles of the groups' :class:`TileStats` lists
    (for :func:`combine_pass1_groups`) and the kept batch tiles, or None.

    When the whole pass is one group (``m`` times the upper-triangle tiles take at most
    ``group_bytes``: d = 1,000 and m = 200 with the defaults), the group's normalised batch
    tiles are kept where they were computed, as ``[(cols_i, cols_j, Handle)]``, and
    :func:`persist_pass2` forms ``Sigma_bar`` from them instead of reading X a second time
    (ALGORITHMS.md section 2: "or batch tiles cached"); they hold at most ``group_bytes``,
    the memory pass 1 already needs, until pass 2 has run. Otherwise the groups are computed
    one after the other and nothing is kept.
    """
    graph = _pass1_graph(X, labels=labels, sizes=sizes, tau=tau, k=k, tile_bytes=tile_bytes,
                         group_bytes=group_bytes, clip=clip)
    if len(graph) == 1:
        stats, kept = graph[0]
        handles = session.persist_all([stats] + [bt for _, _, bt in kept])
        return handles[:1], [(ci, cj, h) for (ci, cj, _), h in zip(kept, handles[1:])]
    return session.persist_each([g for g, _ in graph]), None


def _kept_tile_threshold(batch_tiles, stats, cols_i, cols_j, threshold):
    return tile_threshold(tile_weighted_moment(batch_tiles, stats), cols_i, cols_j, threshold)


def persist_pass2(
    session: "Session",
    X,
    stats,
    kept: list | None,
    *,
    labels: np.ndarray | None,
    threshold: float,
    sizes: Sequence[int] | None = None,
    tile_bytes: int = DEFAULT_TILE_BYTES,
    clip: float = math.inf,
):
    """Handle of ``(rows, cols, vals)`` (row <= col) of ``T_threshold(Sigma_bar)``, computed on
    ``session``: from the batch tiles that :func:`persist_pass1` kept
    (:func:`tile_weighted_moment`, where they live; X is not read), or, when none were kept,
    by :func:`friendly_pass2` (one more pass over X). ``stats`` is the handle of the pass-1
    :class:`FriendlyStats`; the other arguments as in :func:`friendly_pass2`.
    """
    if kept is None:
        return session.persist(friendly_pass2(X, stats.graph_input, labels=labels, threshold=threshold, sizes=sizes,
                                              tile_bytes=tile_bytes, clip=clip))
    # pure=False: a local value of the kept tiles is never hashed for a key
    parts = [
        dask.delayed(_kept_tile_threshold, pure=False)(h.graph_input, stats.graph_input, ci, cj, float(threshold))
        for ci, cj, h in kept
    ]
    return session.persist(dask.delayed(_concat_entries, pure=True)(*parts))


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

    def persist_all(self, objs: Sequence, *, noised: bool = False) -> list[Handle]:
        """Compute several delayed objects together (one pass over shared inputs), keeping
        each result where it was computed."""
        return [Handle(h) for h in self.runtime.persist(list(objs), noised=noised)]

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
