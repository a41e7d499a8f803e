"""FriendlyCore per-block kernels (plain NumPy): the work of one task of the two passes.

Pass 1 forms each batch's second-moment tiles from a row chunk (:func:`chunk_group_moments`),
combines the chunks' pieces (:func:`combine_batch_moments`), reads each tile batch by batch
(:func:`tile_pass1`) and reduces the tiles into :class:`FriendlyStats` (:func:`combine_pass1`).
Pass 2 forms tiles of ``Sigma_bar`` (:func:`chunk_weighted_moment` from the rows,
:func:`tile_weighted_moment` from kept batch tiles) and thresholds them (:func:`tile_threshold`).
How these kernels are wired into dask graphs is :mod:`dpdist.engine.privpca.graph`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy import sparse
from scipy.linalg import blas
from scipy.sparse import csgraph
from scipy.spatial.distance import cdist

from dpdist.engine.gram import GramAccumulator
from dpdist.engine.sparse_spectrum import batch_top_two_eigenvalues

__all__ = [
    "FriendlyStats",
    "TileStats",
    "block_separated",
    "chunk_group_moments",
    "chunk_rows",
    "chunk_weighted_moment",
    "combine_batch_moments",
    "combine_pass1",
    "friendly_weights",
    "merge_batch_pieces",
    "nonfinite_rows",
    "normalise_batch_moments",
    "tile_pass1",
    "tile_threshold",
    "tile_weighted_moment",
]

#: Wide entries compared per block in the friend relation's slow path.
SWEEP_BLOCK = 512

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


def chunk_group_moments(
    x: np.ndarray,
    labels: np.ndarray,
    tiles: Sequence[tuple[tuple[int, int], tuple[int, int]]],
    clip: float = math.inf,
    sizes: np.ndarray | None = None,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Unnormalised batch second-moment tiles of one row chunk, for several tiles
    ``(cols_i, cols_j)`` at once: one task per row chunk and bundle of tiles, so the rows are
    sorted by batch, checked for non-finite values and clipped once (at most one float64 copy
    of the columns the tiles span, none when they need no change: :func:`chunk_rows`), not
    once per tile.

    When the tiles cover most of the upper triangle of the columns they span (a whole pass-1
    group of d = 1,000 columns, say), each batch's moment over the span is one BLAS ``syrk``
    (upper triangle; the shape BLAS runs fastest) and the tiles are sliced out of it;
    otherwise each tile is its own product (``syrk`` on a diagonal tile, ``gemm`` off it).
    Either way every entry is a dot product over the batch's rows, summed by a
    :class:`~dpdist.engine.gram.GramAccumulator` (runs of at most ``GRAM_BATCH_ROWS`` rows
    combined pairwise: the summation depth of
    ``dpdist.privacy.mechanisms.privpca.calibration.friendly_float_bounds``), and the strict lower triangle
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
    ``dpdist.privacy.mechanisms.privpca.calibration.friendly_float_bounds``), and the sum divided by the
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
    ``eta_0`` of ``dpdist.privacy.mechanisms.privpca.calibration.friendly_float_bounds`` (proof there).
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


