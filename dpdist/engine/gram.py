"""Clipped second moments in tiles, streaming over row chunks.

Per-block kernels are plain NumPy (``block_*``); :func:`clipped_second_moment` is the thin
dask wiring. The result is a lazy ``d x d`` dask array whose chunks are ``tile x tile``
tiles: no task ever holds more than one tile of the second moment, so memory scales with
the tile size, not with d^2. Each tile is a tree-reduced sum over row chunks of
``Y[rows, I].T @ Y[rows, J]``.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from dpdist.exceptions import ValidationError

__all__ = [
    "DEFAULT_TILE",
    "GRAM_BATCH_ROWS",
    "GramAccumulator",
    "block_clip",
    "row_scale_factors",
    "row_norm_clip",
    "block_zero_nonfinite",
    "chunk_gram_sum",
    "clipped_second_moment",
    "nonfinite_guard",
    "zero_nonfinite_rows",
    "with_column_tiles",
]

#: Default tile width (columns) of the second moment: 2048 x 2048 float64 = 32 MiB a tile.
DEFAULT_TILE = 2048
NONFINITE_POLICIES = ("raise", "zero")
#: Most rows summed in one run (a BLAS product plus a running sum) before runs are combined
#: pairwise (:class:`GramAccumulator`). The privacy layer's float-error bound
#: (``dpdist.privacy.float_rounding.summation_depth``) assumes at most this many.
GRAM_BATCH_ROWS = 4096


class GramAccumulator:
    """Sum of ``a^T b`` over the rows of blocks, in the order whose rounding error is bounded.

    Rows are multiplied and summed in runs of at most :data:`GRAM_BATCH_ROWS` rows (BLAS
    products added into a running sum); complete runs are combined pairwise (a binary
    counter: the sums held are O(log) in number). Every row's term therefore passes through at
    most ``GRAM_BATCH_ROWS + 2 ceil(log2(rows))`` additions, whatever the block sizes.
    """

    def __init__(self, product=None) -> None:
        #: ``product(a_rows, b_rows)`` (b_rows None for ``a^T a``); default ``a^T b``
        self._product = product
        self._run: np.ndarray | None = None
        self._run_rows = 0
        self._stack: list[tuple[int, np.ndarray]] = []

    def add(self, a: np.ndarray, b: np.ndarray | None = None) -> None:
        """Add ``a^T b`` (``a^T a`` when b is None) of a block of rows."""
        for lo in range(0, a.shape[0], GRAM_BATCH_ROWS):
            aa = a[lo : lo + GRAM_BATCH_ROWS]
            if self._run is not None and self._run_rows + aa.shape[0] > GRAM_BATCH_ROWS:
                self._push()
            bb = None if b is None else b[lo : lo + GRAM_BATCH_ROWS]
            if self._product is not None:
                g = self._product(aa, bb)
            else:
                g = aa.T @ (aa if bb is None else bb)
            if self._run is None:
                self._run = g
            else:
                self._run += g
            self._run_rows += aa.shape[0]

    def _push(self) -> None:
        part, level = self._run, 0
        self._run, self._run_rows = None, 0
        while self._stack and self._stack[-1][0] == level:
            _, prev = self._stack.pop()
            prev += part
            part, level = prev, level + 1
        self._stack.append((level, part))

    def total(self, shape: tuple[int, int]) -> np.ndarray:
        """The sum (zeros of ``shape`` when nothing was added)."""
        if self._run is not None:
            self._push()
        if not self._stack:
            return np.zeros(shape)
        out = self._stack.pop()[1]
        while self._stack:
            out = self._stack.pop()[1] + out
        return out


def chunk_gram_sum(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """``a^T b`` (``a^T a`` when b is None) summed by a :class:`GramAccumulator`."""
    acc = GramAccumulator()
    acc.add(a, b)
    return acc.total((a.shape[1], a.shape[1] if b is None else b.shape[1]))


def block_clip(x: np.ndarray, clip: float) -> np.ndarray:
    """Entrywise truncation ``sign(x) * min(|x|, clip)`` (Algorithm 1, line 1), as float64.

    ``maximum`` then ``minimum`` in place on one float64 copy: the same values as
    ``np.clip`` (NaN stays NaN, +-inf become +-clip, -0.0 stays -0.0) at about half its cost,
    which matters when the Gram is cheap (d ~ 100, streaming).
    """
    y = np.array(x, dtype=np.float64, copy=True)
    np.maximum(y, -clip, out=y)
    np.minimum(y, clip, out=y)
    return y


def row_scale_factors(sumsq: np.ndarray, row_clip: float, n_features: int) -> np.ndarray:
    """Per-row factors ``min(1, C' / sqrt(s))`` from the computed sums of squares ``s`` of the
    rows, with ``C' = C (1 - 4 (d + 8) 2**-53)``: each row times its factor has norm at most
    ``C`` in exact arithmetic, rounding included.

    Why the margin suffices (u = 2**-53, ``gamma_m = m u / (1 - m u)``, Higham's Lemma 3.1 and
    3.4): the computed sum of squares of a row y of d entries, in any order, is at least ``(1 -
    gamma_d) ||y||^2``; the square root, the computed ``C'``, the division and the final product
    ``y_j f`` add four factors ``(1 + delta)``, ``|delta| <= u``; so the computed row has norm at
    most ``C (1 - 4 (d + 8) u) (1 + u)^4 / ((1 - u) sqrt(1 - gamma_d)) <= C`` (a row left
    unscaled, whose computed norm is at most ``C'``, likewise has exact norm at most C). The factor is at
    most 1, so no entry grows. A zero row gets 1; a sum of squares that overflows to inf gets 0
    (the row becomes zero, still within C); NaN (a non-finite row under
    ``on_nonfinite="raise"``, refused later) stays NaN.
    """
    target = float(row_clip) * (1.0 - 4.0 * (int(n_features) + 8) * 2.0**-53)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        return np.minimum(1.0, target / np.sqrt(sumsq))


def row_norm_clip(Y: da.Array, row_clip: float) -> da.Array:
    """Lazy ``Y`` with each row scaled to L2 norm at most ``row_clip`` (:func:`row_scale_factors`):
    the sums of squares are reduced over the column chunks of each row block, the factors stay a
    lazy ``(n, 1)`` column of row chunks, and the scaling is a blockwise product. The work per
    block is the same whatever the values."""
    d = Y.shape[1]
    sumsq = (Y * Y).sum(axis=1, keepdims=True)
    factors = sumsq.map_blocks(row_scale_factors, float(row_clip), d, dtype=np.float64)
    return Y * factors


def block_zero_nonfinite(x: np.ndarray) -> np.ndarray:
    """The block with every row that holds a NaN or an infinity replaced by a zero row.

    The block must hold whole rows (all columns); :func:`zero_nonfinite_rows` applies the
    rule to a dask array whatever its column chunks. The work is the same whatever the
    values: one ``isfinite`` scan and one masked copy, also when every row is finite (a
    shortcut for all-finite blocks would make the time per block say whether it held a NaN
    or an infinity).
    """
    x = np.asarray(x)
    ok = np.isfinite(x).all(axis=1)
    return np.where(ok[:, None], x, x.dtype.type(0))


def zero_nonfinite_rows(X: da.Array) -> da.Array:
    """Lazy ``X`` with every row holding a NaN or an infinity replaced by a zero row (the
    default ``on_nonfinite="zero"``: a per-row map, so replace-one neighbours stay
    neighbours; nothing counts the rows). Works across column chunks.

    When each row block holds whole rows (one column chunk, the usual streaming layout) it is
    one :func:`block_zero_nonfinite` per block; otherwise a row-wise ``isfinite`` reduction
    and a ``where``. Either way each block costs the same whether or not it holds a NaN or an
    infinity."""
    if X.numblocks[1] == 1:
        return X.map_blocks(block_zero_nonfinite, dtype=X.dtype, meta=np.empty((0, 0), dtype=X.dtype))
    ok = da.isfinite(X).all(axis=1, keepdims=True)
    return da.where(ok, X, 0).astype(X.dtype)


def nonfinite_guard(X: da.Array, on_nonfinite: str) -> tuple[da.Array, da.Array | None]:
    """Apply the non-finite policy lazily.

    Returns ``(X, all_finite)``: for ``"zero"`` (the default of every estimator) the array
    with non-finite rows replaced by zero rows (:func:`zero_nonfinite_rows`) and ``None``;
    for ``"raise"`` (explicit validation mode) the array unchanged and a lazy boolean to be
    computed *in the same pass* as the statistics (so the data are read once); the caller
    raises before releasing anything when it is False. The raise reveals one bit (whether a
    non-finite value exists); callers record that in the release.
    """
    if on_nonfinite not in NONFINITE_POLICIES:
        raise ValidationError(f"on_nonfinite must be one of {NONFINITE_POLICIES}, got {on_nonfinite!r}")
    if on_nonfinite == "zero":
        return zero_nonfinite_rows(X), None
    return X, da.isfinite(X).all()


def with_column_tiles(X: da.Array, tile: int) -> da.Array:
    """Rechunk columns to width ``tile`` (rows untouched: no extra read, slices only)."""
    d = X.shape[1]
    tile = int(min(max(1, tile), d))
    if all(c == tile for c in X.chunks[1][:-1]) and X.chunks[1][-1] <= tile:
        return X
    return X.rechunk({1: tile})


def clipped_second_moment(X: da.Array, clip: float, *, tile: int = DEFAULT_TILE, split_every: int = 8,
                          row_clip: float | None = None) -> da.Array:
    """Lazy ``(1/n) Y^T Y`` with ``Y = clip(X)``, tiled ``tile x tile``; with ``row_clip`` C, each
    clipped row is then scaled to L2 norm at most C (:func:`row_norm_clip`, on the row chunks
    before the column tiling: a row's norm needs all its columns).

    Only the upper-triangle tiles (I <= J) are computed: diagonal tiles with ``Y_I^T Y_I``
    (BLAS syrk, half the flops of a general product), off-diagonal ones with
    ``Y_I^T Y_J``; each tile is a tree sum over row chunks with fan-in ``split_every``
    (at most 8, which the privacy layer's float-error bound assumes), and each chunk's
    contribution a :class:`GramAccumulator` sum.
    Tiles below the diagonal are transposed views of their mirror.

    Parameters
    ----------
    X : dask array (n, d)
    clip : float
        Entrywise truncation level R (``math.inf`` for no truncation).
    tile : int
        Tile width; tiles are the chunks of the returned array.
    split_every : int
        Fan-in of the tree reduction over row chunks.
    row_clip : float, optional
        Row-norm level C (None: entry clip only). Entries stay within ``clip``.
    """
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    if split_every > 8:
        raise ValueError("split_every must be <= 8 (the float-error bound assumes it)")
    n = X.shape[0]
    if row_clip is None:
        Y = with_column_tiles(X, tile).map_blocks(block_clip, clip, dtype=np.float64)
    else:
        Y = with_column_tiles(row_norm_clip(X.map_blocks(block_clip, clip, dtype=np.float64), row_clip), tile)
    n_row, n_col = len(Y.chunks[0]), len(Y.chunks[1])
    token = tokenize(Y, n, split_every)
    part, tree, name = f"gram-part-{token}", f"gram-tree-{token}", f"clipped-second-moment-{token}"
    dsk: dict = {}
    for i in range(n_col):
        for j in range(i, n_col):
            level = []
            for r in range(n_row):
                dsk[(part, r, i, j)] = (_block_gram, (Y.name, r, i), (Y.name, r, j), i == j)
                level.append((part, r, i, j))
            depth = 0
            while len(level) > 1:
                nxt = []
                for g in range(0, len(level), split_every):
                    key = (tree, depth, g // split_every, i, j)
                    dsk[key] = (_sum_tiles, level[g : g + split_every])
                    nxt.append(key)
                level, depth = nxt, depth + 1
            dsk[(name, i, j)] = (_scale, level[0], 1.0 / n)
            if i != j:
                dsk[(name, j, i)] = (np.transpose, (name, i, j))
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[Y])
    return da.Array(graph, name, chunks=(Y.chunks[1], Y.chunks[1]), dtype=np.float64)


def _block_gram(a: np.ndarray, b: np.ndarray, diagonal: bool) -> np.ndarray:
    """One row chunk's contribution to tile (I, J), summed by :func:`chunk_gram_sum` (runs of
    at most GRAM_BATCH_ROWS rows, combined pairwise); ``a.T @ a`` is BLAS syrk."""
    with np.errstate(over="ignore", invalid="ignore"):  # unclipped (non-private) input may overflow
        return chunk_gram_sum(a, None if diagonal else b)


def _sum_tiles(parts: list) -> np.ndarray:
    out = np.array(parts[0], dtype=np.float64, copy=True)
    for p in parts[1:]:
        out += p
    return out


def _scale(tile: np.ndarray, factor: float) -> np.ndarray:
    return tile * factor
