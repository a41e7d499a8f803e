"""Per-block NumPy kernels of private second-moment estimation (``chunk_*``, ``combine_*``): plain
functions on one block of rows, testable against a NumPy oracle (no dask, no privacy formulas).

A *step* is a pair ``(a, radius)``: rows are mapped ``y <- y a^T`` (``a`` a d x d matrix, or
a scalar multiplying every row) and then clipped to the ball of ``radius``:
``y <- y min(1, radius / ||y||)``. Level 0 of the estimator is ``(1/sqrt((1-alpha)
lambda_hat), R_0)`` (clip to R_hat, then normalise by the private lambda_hat); level j+1 adds
``(sqrt(8/7) Pi_j, R_{j+1})`` (Algorithm 2 lines 7-8). Every step acts on each row alone.

Rows holding NaN or inf are replaced by zero rows (scale 0) before the first step (a per-row
map, so replace-one neighbours stay neighbours and the sensitivity bound holds; nothing counts
or reports them, which would leak).

Numerics. Rows are scaled before any product is formed (:func:`map_and_clip`), with
norms that neither overflow nor underflow (:func:`row_norms`: exact power-of-two rescaling of
huge and subnormal rows) and a radius margin (:func:`shrink_radius`) so that every row's norm
*as computed* is within the level's radius; Gram sums use runs of at most
``GRAM_BATCH_ROWS`` rows combined pairwise. Together these give the bounded rounding that
``dpdist.privacy.float_rounding.gram_rounding_factor`` adds to the sensitivity.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from dpdist.engine.gram import GRAM_BATCH_ROWS, GramAccumulator, chunk_gram_sum

__all__ = [
    "chunk_apply_steps", "chunk_clip_rows", "chunk_gram", "chunk_group_grams", "chunk_level_gram", "chunk_level_step",
    "chunk_norm_counts", "chunk_row_scales", "chunk_sanitize", "combine_bucket_counts",
    "combine_group_min_eigenvalues", "compose_steps", "gram_batch_rows", "map_and_clip", "row_norms", "shrink_radius",
]

Step = tuple  # (scalar or (d, d) ndarray, radius)

_BLAS_SINGLE_THREAD = 262144


# ---------------------------------------------------------------------------------------
# per-block kernels
# ---------------------------------------------------------------------------------------


def chunk_sanitize(x: np.ndarray) -> np.ndarray:
    """float64 copy of ``x`` with every row that holds a NaN or inf replaced by zeros (the
    same scan, copy and masked write whether or not a row is bad)."""
    y = np.array(x, dtype=np.float64, copy=True)
    bad = ~np.isfinite(y).all(axis=1)
    y[bad] = 0.0
    return y


# Rows whose squared norm, computed directly, lies in this range need no rescaling: no
# overflow, and underflow in a squared component costs at most 2**-1074 against >= 2**-960.
_SQ_LO, _SQ_HI = 2.0**-960, 2.0**960

_U = 2.0**-53


def shrink_radius(radius: float, n_features: int) -> float:
    """The radius the kernels clip to, ``radius (1 - (d + 16) u)``: a computed norm errs by at
    most ``(d/2 + 4) u`` relatively (a sum of d squares, the square root, and the exact
    power-of-two rescaling of :func:`row_norms`) and the scaled row by ``2 u`` more, so a row
    clipped to it has norm at most ``radius`` *as computed* (exact norm of the float vector),
    which is the bound the sensitivity argument uses."""
    return float(radius) * (1.0 - (int(n_features) + 16) * _U)


def row_norms(x: np.ndarray) -> np.ndarray:
    """Euclidean norms of the rows, accurate to ``(d/2 + 4) u`` relatively for every finite
    row: rows whose squared norm would overflow or underflow (norms near 1e154 and above,
    subnormal rows) are rescaled by an exact power of two first. NaN for non-finite rows;
    inf only when the norm exceeds the largest float."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        sq = np.einsum("ij,ij->i", x, x)
    out = np.sqrt(np.where((sq >= _SQ_LO) & (sq <= _SQ_HI), sq, 1.0))
    slow = np.flatnonzero(~((sq >= _SQ_LO) & (sq <= _SQ_HI)))
    if slow.size:
        xs = x[slow]
        finite = np.isfinite(xs).all(axis=1)
        xs = np.where(finite[:, None], xs, 0.0)
        e = np.frexp(np.abs(xs).max(axis=1))[1]
        xs = np.ldexp(xs, -e[:, None])
        with np.errstate(over="ignore"):
            out[slow] = np.where(finite, np.ldexp(np.sqrt(np.einsum("ij,ij->i", xs, xs)), e), np.nan)
    return out


def _apply_map(x: np.ndarray, a) -> np.ndarray:
    """``x a`` as a new array (a copy for the identity). A matrix product is formed as
    ``(a^T x^T)^T``: the result is column-major, so that the per-row norms and the scaling run
    along contiguous columns (each row's values are dot products of length d whatever the
    layout; :func:`_map_and_clip_into` forms the same products into a buffer)."""
    if a is None:
        return np.array(x, dtype=np.float64, copy=True)
    if np.ndim(a) == 0:
        return x * float(a)
    return (np.asarray(a).T @ x.T).T


def _map_and_clip_scaled(x: np.ndarray, aT, radius: float, prev: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`map_and_clip` for rows that need rescaling (huge, tiny, zero or non-finite).

    With ``x = 2^e xs`` (``max |xs|`` in [0.5, 1), exact) and ``xs a^T = 2^e2 zs`` (``max |zs|``
    in [0.5, 1), exact), the level row ``t (x a^T)`` equals ``c zs`` with
    ``c = min(2^(e+e2) prev, radius / ||zs||)`` and ``t = c 2^-(e+e2)``: nothing overflows
    (``||zs|| >= 1/2``), whatever the row's magnitude. Non-finite rows get t = 0 (a zero row).
    """
    n = x.shape[0]
    finite = np.isfinite(x).all(axis=1)
    xs = np.where(finite[:, None], x, 0.0)
    e = np.frexp(np.abs(xs).max(axis=1))[1]
    with np.errstate(all="ignore"):
        zs = _apply_map(np.ldexp(xs, -e[:, None]), aT)
        finite &= np.isfinite(zs).all(axis=1)
        zs = np.where(finite[:, None], zs, 0.0)
        m2 = np.abs(zs).max(axis=1) if zs.shape[1] else np.zeros(n)
        e2 = np.frexp(m2)[1]
        zs = np.ldexp(zs, -e2[:, None])
        s = np.sqrt(np.einsum("ij,ij->i", zs, zs))
        cap = radius / np.where(m2 > 0, s, 1.0)
        base = np.ldexp(np.ones(n) if prev is None else prev, e + e2)
        c = np.minimum(base, cap)
        t = np.ldexp(c, -(e + e2))
    limit = np.ones(n) if prev is None else prev
    t = np.minimum(t, limit)
    nonzero = finite & (m2 > 0)
    t = np.where(nonzero, t, np.where(finite, limit, 0.0))
    y = np.where(nonzero[:, None], c[:, None] * zs, 0.0)
    return y, t


def map_and_clip(x: np.ndarray, aT=None, radius: float = np.inf, prev: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One public step on a block of rows: ``y_i = t_i (x_i a^T)`` with
    ``t_i = min(prev_i, 1, r / ||x_i a^T||)`` and ``r`` = :func:`shrink_radius` (radius, d).

    ``aT`` is the transposed map (a (d, d) matrix), a scalar, or None (identity). Returns
    ``(y, t)``. The rows are scaled *before* any product is formed (scale, then multiply:
    every row's Gram term ``y y^T`` is bounded by radius^2 as computed, which the
    sensitivity bound needs). Typical rows take one product and one norm; rows that
    are huge (near 1e154 and above: their squares overflow), tiny (subnormal), zero or
    non-finite take the exactly rescaled path of :func:`_map_and_clip_scaled`. Non-finite
    rows get t = 0 and a zero row.
    """
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[1] if aT is None or np.ndim(aT) == 0 else np.shape(aT)[1]
    r = shrink_radius(radius, d) if np.isfinite(radius) else np.inf
    return _map_and_clip(x, aT, r, prev)


def _map_and_clip(x: np.ndarray, aT, r: float, prev: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`map_and_clip` with the radius already shrunk (a matrix map: one BLAS product,
    :func:`_map_and_clip_into`; the level kernel calls that directly, in batches)."""
    if aT is not None and np.ndim(aT) != 0:
        zT, t = np.empty((np.shape(aT)[1], x.shape[0])), np.empty(x.shape[0])
        _map_and_clip_into(x, aT, r, prev, None, zT, t, np.empty(x.shape[0]))
        return zT.T, t
    with np.errstate(all="ignore"):
        z = _apply_map(x, aT)
        sq = np.einsum("ij,ij->i", z, z)
    t = np.empty(x.shape[0])
    slow = _clip_scales(sq, r, prev, t)
    if slow is not None:
        z[slow] = 0.0
    z *= t[:, None]
    if slow is not None:
        z[slow], t[slow] = _map_and_clip_scaled(x[slow], aT, r, None if prev is None else prev[slow])
    return z, t


def _clip_scales(sq: np.ndarray, r: float, prev: np.ndarray | None, t: np.ndarray) -> np.ndarray | None:
    """Into ``t``: the clip scales ``min(prev, 1, r / sqrt(sq))`` of rows of squared norms
    ``sq``. Returns the indices of the rows whose squared norm needs the rescaled path
    (outside [_SQ_LO, _SQ_HI], or NaN; their t is set to 0 here), or None when there is none
    (the usual case: two reductions)."""
    with np.errstate(all="ignore"):
        np.sqrt(sq, out=t)
        np.divide(r, t, out=t)
        np.minimum(t, 1.0, out=t)
    if prev is not None:
        np.minimum(t, prev, out=t)
    if sq.size == 0 or (sq.min() >= _SQ_LO and sq.max() <= _SQ_HI):  # NaN fails both
        return None
    slow = np.flatnonzero(~((sq >= _SQ_LO) & (sq <= _SQ_HI)))
    t[slow] = 0.0
    return slow


def _map_and_clip_into(
    x: np.ndarray, MT: np.ndarray, r: float, prev: np.ndarray | None, batch: int | None,
    zT: np.ndarray, t: np.ndarray, sq: np.ndarray,
) -> None:
    """:func:`map_and_clip` for a (d, d) matrix map ``MT`` (the transposed map), writing into
    caller-owned buffers: ``zT`` (d, b), C-contiguous, receives the level's rows transposed
    (column-major rows: the norms, the scaling and the Gram run along contiguous columns),
    ``t`` (b,) the scales and ``sq`` (b,) is scratch. The map is formed as ``(a^T x^T)``,
    ``batch`` rows per BLAS call (all rows at once when None); then, in place, the squared
    norms, ``t = min(prev, 1, r / sqrt(sq))`` and the scaling: each value is the same
    operation as in :func:`map_and_clip`, only without temporaries."""
    n = x.shape[0]
    aT = MT.T
    step = n if batch is None else batch
    with np.errstate(all="ignore"):
        for lo in range(0, n, max(step, 1)):
            np.matmul(aT, x[lo : lo + step].T, out=zT[:, lo : lo + step])
        np.einsum("ji,ji->i", zT, zT, out=sq)
    slow = _clip_scales(sq, r, prev, t)
    with np.errstate(all="ignore"):
        zT *= t  # along contiguous columns
    if slow is not None:
        ys, ts = _map_and_clip_scaled(x[slow], MT, r, None if prev is None else prev[slow])
        zT[:, slow] = ys.T
        t[slow] = ts


def chunk_clip_rows(x: np.ndarray, radius: float) -> np.ndarray:
    """Rows scaled by ``min(1, r / ||row||)`` (the shrink S of Algorithm 2; zero rows stay;
    non-finite rows become zero rows), with ``r`` = :func:`shrink_radius`: every clipped row
    has norm at most ``radius`` as computed."""
    return map_and_clip(x, None, float(radius))[0]


def chunk_apply_steps(x: np.ndarray, steps: Sequence[Step]) -> np.ndarray:
    """Apply the public per-row ``steps`` (see module docstring) to a block of rows."""
    y = chunk_sanitize(x)
    for a, radius in steps:
        aT = float(a) if np.ndim(a) == 0 else np.asarray(a, dtype=np.float64).T
        y, _ = map_and_clip(y, aT, float(radius))
    return y


def chunk_gram(x: np.ndarray) -> np.ndarray:
    """x^T x in float64 (d x d), summed in the bounded-depth order of :class:`GramAccumulator`."""
    return chunk_gram_sum(np.asarray(x, dtype=np.float64))


def compose_steps(steps: Sequence[Step], n_features: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cumulative maps M_j = a_j M_{j-1} (M_0 = I), stacked as a (k d, d) matrix, the radii
    r_j, and M_k."""
    d = int(n_features)
    M = np.eye(d)
    mats = []
    for a, _ in steps:
        M = float(a) * M if np.ndim(a) == 0 else np.asarray(a, dtype=np.float64) @ M
        mats.append(M)
    radii = np.array([float(r) for _, r in steps], dtype=np.float64)
    stack = np.concatenate(mats, axis=0) if mats else np.zeros((0, d))
    return stack, radii, M


def chunk_row_scales(x: np.ndarray, steps: Sequence[Step]) -> tuple[np.ndarray, np.ndarray]:
    """Fused form of :func:`chunk_apply_steps`: returns (t, M_k) with y_k = t_i M_k x_i.

    A clip scales a row by a scalar, and scalars commute with the linear maps, so
    y_j = t_j M_j x with t_j = min(t_{j-1}, r_j / ||M_j x||) (t_0 = 1): the same rows as the
    step-by-step definition, computed level by level with :func:`map_and_clip` on the
    cumulative maps. Rows holding NaN or inf get t = 0.
    """
    x = np.asarray(x, dtype=np.float64)
    Mk = compose_steps(steps, x.shape[1])[2]
    t = None
    M = np.eye(x.shape[1])
    for a, r in steps:
        M = float(a) * M if np.ndim(a) == 0 else np.asarray(a, dtype=np.float64) @ M
        _, t = map_and_clip(x, np.ascontiguousarray(M.T), float(r), t)
    if t is None:
        t = np.where(np.isfinite(x).all(axis=1), 1.0, 0.0)
    return t, Mk


def chunk_level_gram(x: np.ndarray, steps: Sequence[Step] = ()) -> np.ndarray:
    """Gram of the transformed block (rows scaled before the product), with a leading block
    axis: shape (1, d, d)."""
    g = chunk_gram(chunk_apply_steps(x, steps))
    return ((g + g.T) / 2.0)[None]


def chunk_norm_counts(x: np.ndarray, edges: np.ndarray, steps: Sequence[Step] = ()) -> np.ndarray:
    """Counts of row norms in bins [0, e_0), [e_0, e_1), ..., [e_K, inf): K + 2 bins, (1, K+2).

    Norms by :func:`row_norms` (no overflow at 1e154, no underflow for subnormal rows);
    non-finite rows count as zero rows."""
    y = chunk_apply_steps(x, steps)
    norms = row_norms(y)
    idx = np.searchsorted(np.asarray(edges, dtype=np.float64), norms, side="right")
    return np.bincount(idx, minlength=len(edges) + 1).astype(np.float64)[None]


def chunk_group_grams(x: np.ndarray, group_ids: np.ndarray, n_groups: int, steps: Sequence[Step] = ()) -> np.ndarray:
    """Per-group Gram sums of the transformed block: shape (1, n_groups, d, d).

    ``group_ids`` gives each row's group in 0..n_groups-1, or -1 for an unused row. Rows are
    clipped before their outer products are formed; each group's sum depends on that group's
    rows only (a replaced row changes one group's matrix).
    """
    y = chunk_apply_steps(x, steps)
    gid = np.asarray(group_ids).ravel().astype(np.int64)
    d = y.shape[1]
    out = np.zeros((int(n_groups), d, d), dtype=np.float64)
    keep = gid >= 0
    if keep.any():
        gid, y = gid[keep], y[keep]
        order = np.argsort(gid, kind="stable")
        gid, y = gid[order], y[order]
        starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
        with np.errstate(over="ignore", invalid="ignore"):  # unclipped huge rows: that group's matrix is inf
            outer = y[:, :, None] * y[:, None, :]
            out[gid[starts]] = np.add.reduceat(outer, starts, axis=0)
    return out[None]


def gram_batch_rows(n_features: int) -> int:
    """Rows per BLAS product in :func:`chunk_level_step`: small enough that OpenBLAS runs each
    product on one thread (its threading threshold is m n k >= 262144: thin products threaded
    across rows stall badly when the cores are shared, measured 50x slower on a loaded 2-core
    machine), and at most :data:`~dpdist.engine.gram.GRAM_BATCH_ROWS`."""
    d = int(n_features)
    return int(min(GRAM_BATCH_ROWS, max(256, _BLAS_SINGLE_THREAD // (d * d) - 1)))


#: Values (rows x d) of a level's elementwise work done at once in :func:`chunk_level_step`:
#: a few MiB, so that the map's output, the norms and the scaling stay in cache while each
#: numpy call covers several BLAS batches (fewer Python round trips per row).
_LEVEL_BLOCK_VALUES = 1 << 17


def chunk_level_step(
    x: np.ndarray, prev: np.ndarray | None = None, *, M: np.ndarray, radius: float
) -> tuple[np.ndarray, np.ndarray]:
    """One level in persisted-scale form, fused: returns (t_k, Gram of the level's rows).

    t_k = min(t_{k-1}, r_k / ||M_k x||) (t_{-1} = 1) and the Gram is
    sum_i (t_i M_k x_i)(t_i M_k x_i)^T (see :func:`chunk_row_scales` for why the level's row
    is y = t_k M_k x). Keeping t between levels makes level k cost one d x d map per row
    instead of k.

    Numerics: every row is scaled to the level's radius *before* it enters a product
    (:func:`map_and_clip`: scale, then multiply), so each row's term is bounded by R_k^2 as
    computed, and the terms are summed in runs of at most ``GRAM_BATCH_ROWS`` rows combined
    pairwise (:class:`~dpdist.engine.gram.GramAccumulator`), the order the privacy layer's
    float-error bound assumes. No large term is ever added and subtracted again. Rows holding
    NaN or inf get t = 0 and contribute nothing.

    Cost: one read of the chunk. The rows are taken in blocks of about
    ``_LEVEL_BLOCK_VALUES`` values (converted to float64 block by block: no float64 copy of a
    whole float32 chunk); within a block the map and the Gram are BLAS calls of
    :func:`gram_batch_rows` rows each (one BLAS thread), the norms and the scaling one numpy
    call each, in place, on the mapped rows held column-major in one buffer reused by every
    block (:func:`_map_and_clip_into`: contiguous columns, about a fifth cheaper than row-major
    at d = 8; no temporaries: about 6% less time than a fresh array per step, measured in the same
    run). The values do not depend on the block size (every row's map, norm and scale depend
    on that row alone; the Gram runs are the same batches), and are bit for bit those of the
    operation-by-operation definition (tests/engine/test_second_moment_engine.py).
    """
    x = np.asarray(x)
    n, d = x.shape
    MT = np.ascontiguousarray(np.asarray(M, dtype=np.float64).T)
    prev = None if prev is None else np.asarray(prev, dtype=np.float64).ravel()
    t = np.empty(n, dtype=np.float64)
    acc = GramAccumulator()
    batch = gram_batch_rows(d)
    block = max(1, min(n, batch * max(1, _LEVEL_BLOCK_VALUES // (batch * max(1, d)))))
    r = shrink_radius(radius, d)
    zbuf, sq = np.empty((d, block)), np.empty(block)  # reused by every block of the chunk
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        zT = zbuf if hi - lo == block else np.empty((d, hi - lo))
        _map_and_clip_into(np.asarray(x[lo:hi], dtype=np.float64), MT, r, None if prev is None else prev[lo:hi],
                           batch, zT, t[lo:hi], sq[: hi - lo])
        y = zT.T
        for a in range(0, hi - lo, batch):
            acc.add(y[a : a + batch])
    g = acc.total((d, d))
    return t, (g + g.T) / 2.0


def combine_group_min_eigenvalues(grams: np.ndarray, group_size: int) -> np.ndarray:
    """lambda_min((1/m) X_t^T X_t) for every group t (Algorithm 4, line 2)."""
    grams = np.asarray(grams, dtype=np.float64) / float(group_size)
    grams = (grams + np.transpose(grams, (0, 2, 1))) / 2.0
    return np.linalg.eigvalsh(grams)[:, 0]


def combine_bucket_counts(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts of ``values`` in bins (-inf, e_0), [e_0, e_1), ..., [e_K, inf): K + 2 bins."""
    idx = np.searchsorted(np.asarray(edges, dtype=np.float64), np.asarray(values, dtype=np.float64), side="right")
    return np.bincount(idx, minlength=len(edges) + 1).astype(np.float64)
