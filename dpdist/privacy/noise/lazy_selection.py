"""Noisy row-wise top-k selection that draws O(d k) noise per row instead of d (PrivCov, line 6).

For each row i of the clipped second moment, the k columns with the largest
``|m_ij + K_ij|`` (``m = rint(S / gamma)`` on the release's lattice, ``K`` the rounded Laplace
law of :mod:`dpdist.privacy.noise.lattice`), ties to the smaller column. The d noises of a row are
defined by a tree over the columns (node minima of the uniforms, drawn top-down from keyed
ChaCha20 words); a branch-and-bound search evaluates only the nodes that can hold a winner.

Lemma (the tree draws i.i.d. noise): the leaves of the tree are d i.i.d. uniforms, so a
row's noise has exactly the rounded Laplace law, unbounded, a pure function of
``(root, purpose, row)``. Lemma (exactness): for every tiling the merged candidates are bit
for bit the top k of the fully evaluated tree. Hence the selection has exactly the law of
the naive one, and PrivCov's privacy statement (sensitivity and epsilon) is unchanged.
Magnitudes are certified intervals; undecided ones are decided exactly in mpmath.
Residual: fallback exhaustion, below ``2**-1000`` a leaf. The number of draws depends on
the data and is not released.

Proofs: docs/privacy/lazy_selection.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dpdist.privacy.noise.lattice import FALLBACK_SUFFIX, FALLBACK_WORDS, LatticeNoise
from dpdist.privacy.noise.lazy_selection_intervals import _floor_half, _iv, _magnitude_interval, _q_interval
from dpdist.privacy.noise.streams import NoiseSeed, chacha20_words

__all__ = [
    "DEFAULT_FANOUT",
    "EXHAUSTION_DELTA_PER_LEAF",
    "LazySelectionNoise",
    "RowFrontier",
]

#: Fan-out F of the noise tree (a revealed level-1 node costs F words).
DEFAULT_FANOUT = 64
#: Positions of one tree level in the row's stream (``level * 2^56 + ...``).
_LEVEL_SPAN = 1 << 56
#: Slots of a level: slot 0 holds the (q, p) words of the nodes, slots 1.. the retries of p.
_SLOT_SPAN = 1 << 51
_MAX_RETRIES = 31
#: Probability bound of the exhaustion residual of one exactly decided leaf (docs/privacy/lazy_selection.md).
EXHAUSTION_DELTA_PER_LEAF = 2.0**-1000


# ---------------------------------------------------------------------------------------
# the tree
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tree:
    d: int
    fanout: int
    height: int  # level of the root (>= 1)

    @staticmethod
    def build(d: int, fanout: int) -> "_Tree":
        h = 1
        while fanout**h < d:
            h += 1
        return _Tree(d, fanout, h)

    def width(self, level: int) -> int:
        return self.fanout**level

    def n_nodes(self, level: int) -> int:
        return -(-self.d // self.width(level))

    def size(self, level: int, beta: np.ndarray) -> np.ndarray:
        w = self.width(level)
        return np.minimum((beta + 1) * w, self.d) - beta * w


@dataclass
class _Nodes:
    """Values of a set of nodes (flat arrays): certified q and magnitude intervals, and p
    (the minimum's position; -1 while not drawn; at the leaves, the sign +-1)."""

    q_lo: np.ndarray
    q_hi: np.ndarray
    p: np.ndarray
    M_lo: np.ndarray
    M_hi: np.ndarray

    def take(self, idx) -> "_Nodes":
        return _Nodes(self.q_lo[idx], self.q_hi[idx], self.p[idx], self.M_lo[idx], self.M_hi[idx])


@dataclass(frozen=True)
class LazySelectionNoise:
    """Selection noise of PrivCov as a lazily evaluated tree (see docs/privacy/lazy_selection.md).

    Parameters
    ----------
    seed : NoiseSeed
        Root of the noise streams.
    purpose : str
        Noise purpose (PrivCov: :data:`dpdist.privacy.mechanisms.privcov.mechanism.PURPOSE_SELECT`);
        keys the ChaCha streams (its fallback words live under ``purpose + FALLBACK_SUFFIX``).
    noise : LatticeNoise
        The law: ``"laplace"`` (rounded Laplace) on the release's lattice, scale ``s`` units.
    n_features : int
        d, the number of columns of every row (the tree covers ``[0, d)``).
    score_bound : float or None
        Public C >= |S_ij| for every entry, in the data's units (PrivCov's is
        :func:`~dpdist.privacy.mechanisms.privcov.calibration.privcov_score_bound`);
        ``None`` disables the data-free floor (the search is then exact but slower when noise
        dominates).
    fanout : int
        Tree fan-out F >= 2.

    Notes
    -----
    Instances are small, immutable and picklable: they travel to workers inside the graph.
    The engine calls :meth:`prepare_rows` once per row block and :meth:`tile_candidates` per
    tile (``dpdist.engine.topk``); :meth:`full_noise` evaluates the whole tree (tests).
    Scores are in lattice units (integers); the raw values returned with them are the tile's.
    """

    seed: NoiseSeed
    purpose: str
    noise: LatticeNoise
    n_features: int
    score_bound: float | None = None
    fanout: int = DEFAULT_FANOUT
    _key: int = field(init=False, repr=False, compare=False)
    _fkey: int = field(init=False, repr=False, compare=False)
    _tree: _Tree = field(init=False, repr=False, compare=False)
    _bound_units: float | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        d, f = int(self.n_features), int(self.fanout)
        if d < 1 or d > 1 << 50:
            raise ValueError(f"n_features must lie in [1, 2^50], got {d}")
        if f < 2:
            raise ValueError(f"fanout must be >= 2, got {f}")
        if not isinstance(self.noise, LatticeNoise) or self.noise.law != "laplace":
            raise ValueError(f"the selection law must be a 'laplace' LatticeNoise, got {self.noise!r}")
        bound = None
        if self.score_bound is not None:
            if not (self.score_bound >= 0 and math.isfinite(self.score_bound)):
                raise ValueError(f"score_bound must be finite and >= 0, or None, got {self.score_bound!r}")
            bound = float(math.ceil(self.noise.lattice.units(self.score_bound)))
            if not bound < 2.0**51:
                raise ValueError("score_bound is too large for the lattice: scores must stay below 2**53 units")
        object.__setattr__(self, "_key", self.seed.key(self.purpose))
        object.__setattr__(self, "_fkey", self.seed.key(self.purpose + FALLBACK_SUFFIX))
        object.__setattr__(self, "_tree", _Tree.build(d, f))
        object.__setattr__(self, "_bound_units", bound)

    @property
    def scale(self) -> float:
        """Scale of the law in lattice units."""
        return self.noise.scale

    # -- words ---------------------------------------------------------------------------

    def _words(self, rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
        return chacha20_words(self.seed, self._key, rows, positions)

    @staticmethod
    def _node_position(level: int, beta: np.ndarray, slot: int = 0) -> np.ndarray:
        return np.uint64(level * _LEVEL_SPAN + slot * _SLOT_SPAN) + 2 * np.asarray(beta).astype(np.uint64)

    def _draw_p(self, rows: np.ndarray, level: int, beta: np.ndarray) -> np.ndarray:
        """Uniform position in node (level, beta): exact integer rejection on 64-bit words."""
        t = self._tree
        lo = beta * t.width(level)
        size = t.size(level, beta).astype(np.uint64)
        limit = np.uint64(2**64 - 1) - (np.uint64(2**64 - 1) % size + np.uint64(1)) % size  # last accepted word
        p = np.empty(beta.size, dtype=np.int64)
        todo = np.arange(beta.size)
        for attempt in range(_MAX_RETRIES + 1):
            w = self._words(rows[todo], self._node_position(level, beta[todo], attempt) + np.uint64(1))
            ok = w <= limit[todo]
            p[todo[ok]] = lo[todo[ok]] + (w[ok] % size[todo[ok]]).astype(np.int64)
            todo = todo[~ok]
            if todo.size == 0:
                return p
        raise RuntimeError("integer rejection sampling failed 32 times (probability < 2^-400)")

    def _ensure_p(self, rows: np.ndarray, level: int, beta: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Fill the argmax positions not drawn yet (-1): a node's p is drawn only when the node
        is expanded (it is a function of its own word, so when it is drawn does not matter)."""
        missing = np.flatnonzero(p < 0)
        if missing.size == 0:
            return p
        p = p.copy()
        p[missing] = self._draw_p(rows[missing], level, beta[missing])
        return p

    def _drawn(self, words: np.ndarray, size: np.ndarray, q_lo: np.ndarray, q_hi: np.ndarray):
        """Certified values of drawn nodes: ``(q_lo, q_hi, M_lo, M_hi)``."""
        lo, hi = _q_interval(words, size.astype(np.float64), q_lo, q_hi)
        m_lo, m_hi = _magnitude_interval(lo, hi, self.noise.scale)
        return lo, hi, m_lo, m_hi

    def _root(self, rows: np.ndarray) -> _Nodes:
        t = self._tree
        beta = np.zeros(rows.size, dtype=np.int64)
        w = self._words(rows, self._node_position(t.height, beta))
        zero = np.zeros(rows.size)
        q_lo, q_hi, m_lo, m_hi = self._drawn(w, np.full(rows.size, t.d), zero, zero)
        return _Nodes(q_lo, q_hi, self._draw_p(rows, t.height, beta), m_lo, m_hi)

    def _children(self, rows, level, beta, nodes: _Nodes, lo_beta=None, hi_beta=None):
        """Children (level - 1) of nodes (level, beta), optionally restricted to
        ``lo_beta <= child < hi_beta`` (per parent). Returns ``(parent_index, child_beta,
        nodes)``, in parent order then child order; ``p`` is -1 where not drawn yet (drawn
        when the node is expanded); at level 0 (leaves) ``p`` holds the leaves' signs (+-1)."""
        t = self._tree
        f = t.fanout
        cl = level - 1
        p = self._ensure_p(rows, level, beta, nodes.p)
        child = beta[:, None] * f + np.arange(f)[None, :]
        valid = child < t.n_nodes(cl)
        if lo_beta is not None:
            valid &= (child >= lo_beta[:, None]) & (child < hi_beta[:, None])
        par, col = np.nonzero(valid)
        cb = child[par, col]
        crow = rows[par]
        width = t.width(cl)
        inherit = (p[par] >= cb * width) & (p[par] < (cb + 1) * width)
        out = _Nodes(nodes.q_lo[par], nodes.q_hi[par], np.where(inherit, p[par], -1), nodes.M_lo[par], nodes.M_hi[par])
        draw = np.flatnonzero(~inherit)
        leaf_words = None
        if cl == 0:  # a leaf's word gives its uniform and its sign: fetch it for every leaf
            leaf_words = self._words(crow, cb.astype(np.uint64))
        if draw.size:
            w = leaf_words[draw] if cl == 0 else self._words(crow[draw], self._node_position(cl, cb[draw]))
            q_lo, q_hi, m_lo, m_hi = self._drawn(w, t.size(cl, cb[draw]), out.q_lo[draw], out.q_hi[draw])
            out.q_lo[draw], out.q_hi[draw] = q_lo, q_hi
            out.M_lo[draw] = np.minimum(m_lo, out.M_lo[draw])  # true M_c <= true M_v
            out.M_hi[draw] = np.minimum(m_hi, out.M_hi[draw])
        if cl == 0:
            out.p = _signs(leaf_words)
        return par, cb, out

    # -- exact decision of a leaf's magnitude (rare) --------------------------------------

    def _fallback_position(self, level: int, beta: int, used: int) -> int:
        return ((int(level) << 50) + int(beta)) * FALLBACK_WORDS + int(used)

    def exact_magnitudes(self, rows: np.ndarray, leaves: np.ndarray) -> np.ndarray:
        """The exact integer magnitudes ``|K|`` of leaves ``(rows[i], leaves[i])`` (see
        docs/privacy/lazy_selection.md): the tree path of each leaf is walked again (only its words and exact
        positions), and the uniforms it depends on are refined until the magnitude is decided."""
        rows = np.asarray(rows, dtype=np.int64).ravel()
        leaves = np.asarray(leaves, dtype=np.int64).ravel()
        t = self._tree
        m = rows.size
        if m == 0:
            return np.zeros(0)
        beta = np.zeros(m, dtype=np.int64)
        w = self._words(rows, self._node_position(t.height, beta))
        chains = [[(int(w[i]), t.d, t.height, 0)] for i in range(m)]
        p = self._draw_p(rows, t.height, beta)
        for level in range(t.height, 0, -1):
            cl = level - 1
            width = t.width(cl)
            cb = leaves // width
            draw = np.flatnonzero(~((p >= cb * width) & (p < (cb + 1) * width)))
            if draw.size:
                pos = cb[draw].astype(np.uint64) if cl == 0 else self._node_position(cl, cb[draw])
                wd = self._words(rows[draw], pos)
                sizes = t.size(cl, cb[draw])
                for i, word, size in zip(draw.tolist(), wd.tolist(), sizes.tolist()):
                    chains[i].append((int(word), int(size), cl, int(cb[i])))
                if cl > 0:
                    p = p.copy()
                    p[draw] = self._draw_p(rows[draw], cl, cb[draw])
        return np.array([self._decide(int(r), chain) for r, chain in zip(rows.tolist(), chains)], dtype=np.float64)

    def _decide(self, row: int, chain: list) -> int:
        """``floor(-s ln q + 1/2)`` for the q that the chain of drawn nodes composes, exactly."""
        ctx = _iv()
        s = self.noise.scale
        cells = []
        for word, size, level, beta in chain:
            num, bits = (word >> 1, 63) if level == 0 else (word, 64)
            cells.append([num, bits, 0, size, level, beta])
        z_lo = 0
        for _ in range(FALLBACK_WORDS + 1):
            ctx.prec = max(c[1] for c in cells) + 96
            q = ctx.mpf(0)
            for num, bits, _, size, _, _ in cells:
                hi = ctx.ldexp(ctx.mpf(num + 1), -bits)
                if num == 0:
                    root = ctx.mpf([0, ctx.exp(ctx.log(hi) / size).b])
                else:
                    root = ctx.exp(ctx.log(ctx.mpf([ctx.ldexp(ctx.mpf(num), -bits).a, hi.b])) / size)
                q = 1 - (1 - q) * root
            if q.a > 0:
                x = -s * ctx.log(q)
                lo, hi_ = _floor_half(x._mpi_[0]), _floor_half(x._mpi_[1])
                if lo is not None:
                    z_lo = max(lo, 0)
                    if lo == hi_:
                        return max(lo, 0)
            for c in cells:  # refine every cell by one fallback word
                word = int(self.seed.raw(self._fkey, row, self._fallback_position(c[4], c[5], c[2]), 1)[0])
                c[0], c[1], c[2] = (c[0] << 64) | word, c[1] + 64, c[2] + 1
        return z_lo  # exhaustion residual (EXHAUSTION_DELTA_PER_LEAF): a fixed function of the words

    # -- public --------------------------------------------------------------------------

    def full_noise(self, rows: np.ndarray) -> np.ndarray:
        """The whole noise matrix ``K[rows, 0:d]`` in lattice units (every node evaluated,
        every magnitude decided exactly; for tests, O(d) a row)."""
        rows = np.asarray(rows, dtype=np.int64).ravel()
        t = self._tree
        nodes = self._root(rows)
        r, beta = rows, np.zeros(rows.size, dtype=np.int64)
        for level in range(t.height, 0, -1):
            par, beta, nodes = self._children(r, level, beta, nodes)
            r = r[par]
        mag = nodes.M_lo.copy()
        und = np.flatnonzero(nodes.M_lo != nodes.M_hi)
        if und.size:
            mag[und] = self.exact_magnitudes(r[und], beta[und])
        out = np.empty((rows.size, t.d))
        row_pos = np.repeat(np.arange(rows.size), t.d)
        out[row_pos, beta] = (mag * nodes.p) + 0.0  # at the leaves p holds the signs
        return out

    def prepare_rows(self, rows: np.ndarray, k: int) -> "RowFrontier":
        """Data-free work shared by every tile of a row block: the tree's top levels and the floor.

        Expands each row's tree from the root down to the first level with at least 2k nodes
        (or the leaves) and returns those nodes' values and the floor ``M_lo(k) - C``: every
        node v of that level has its leaf p_v with ``|K| = M_v >= M_lo_v``, so at least k
        entries of the row score >= the k-th largest ``M_lo - C`` (docs/privacy/lazy_selection.md); ``-inf``
        when ``score_bound`` is None.
        """
        rows = np.asarray(rows, dtype=np.int64).ravel()
        k = int(k)
        t = self._tree
        nodes = self._root(rows)
        r, beta, level = rows, np.zeros(rows.size, dtype=np.int64), t.height
        while level > 1 and t.n_nodes(level) < 2 * k:
            par, beta, nodes = self._children(r, level, beta, nodes)
            r, level = r[par], level - 1
        n = t.n_nodes(level)
        shape = (rows.size, n)
        vals = [a.reshape(shape) for a in (nodes.q_lo, nodes.q_hi, nodes.p, nodes.M_lo, nodes.M_hi)]
        if self._bound_units is None or k < 1 or n < k:
            floor = np.full(rows.size, -np.inf)
        else:
            floor = -np.partition(-vals[3], k - 1, axis=1)[:, k - 1] - self._bound_units
        return RowFrontier(int(rows[0]) if rows.size else 0, level, *vals, floor)

    def tile_candidates(
        self, tile: np.ndarray, row_start: int, col_start: int, k: int, frontier: "RowFrontier | None" = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The top-k entries of each row of a tile by ``|rint(tile / gamma) + K|`` (ties:
        smaller column).

        Parameters
        ----------
        tile : (r, c) array
            ``S[row_start:row_start+r, col_start:col_start+c]``.
        row_start, col_start : int
        k : int
        frontier : RowFrontier, optional
            :meth:`prepare_rows` of (at least) these rows; computed here when None.

        Returns
        -------
        cols, scores, raw : (r, k) arrays
            Global column, noisy score (lattice units, an integer) and raw value of each
            candidate; empty slots have column -1 and score -inf. Every entry whose score
            reaches the row's floor and that is among the tile's k best is present (others
            cannot be selected).
        """
        tile = np.asarray(tile, dtype=np.float64)
        r, c = tile.shape
        k = int(k)
        t = self._tree
        c0, c1 = int(col_start), int(col_start) + c
        rows = np.arange(int(row_start), int(row_start) + r, dtype=np.int64)
        out_cols = np.full((r, k), -1, dtype=np.int64)
        out_scores = np.full((r, k), -np.inf)
        out_raw = np.zeros((r, k))
        if r == 0 or c == 0 or k == 0:
            return out_cols, out_scores, out_raw
        if frontier is None:
            frontier = self.prepare_rows(rows, k)
        units = np.where(np.isnan(tile), np.nan, self.noise.lattice.to_units(tile))  # NaN is never selected
        off = int(row_start) - frontier.row_start
        tau = frontier.floor[off : off + r].copy()
        # the frontier's nodes that meet the tile, as flat arrays (ri = row within the tile)
        level = frontier.level
        width = t.width(level)
        b_lo, b_hi = c0 // width, (c1 - 1) // width + 1
        nb = b_hi - b_lo
        ri = np.repeat(np.arange(r), nb)
        beta = np.tile(np.arange(b_lo, b_hi, dtype=np.int64), r)
        nodes = _Nodes(*(a[off : off + r, b_lo:b_hi].ravel() for a in
                         (frontier.q_lo, frontier.q_hi, frontier.p, frontier.M_lo, frontier.M_hi)))
        if self._bound_units is not None:
            # data-free prune first: smax <= C, so M + C < floor excludes the node
            keep = nodes.M_hi + self._bound_units >= tau[ri]
            ri, beta, nodes = ri[keep], beta[keep], nodes.take(keep)
            if ri.size == 0:
                return out_cols, out_scores, out_raw
        # smax pyramid (levels 1..level) of the rows that still have a node, from the data
        need = np.unique(ri)
        absval = np.abs(units[need])
        if self._bound_units is not None and np.any(absval.max(axis=1) > self._bound_units):
            # NaN compares False: non-finite input is the caller's guard's business
            raise RuntimeError(
                "internal error: an entry of the scored matrix exceeds the declared public bound "
                f"{self.score_bound!r} (the lazy selection would not be exact)"
            )
        slot = np.full(r, -1, dtype=np.int64)
        slot[need] = np.arange(need.size)
        smax = _pyramid(absval, c0, c1, level, t.fanout)
        while True:
            lo_b, sm = smax[level]
            bound = sm[slot[ri], beta - lo_b] + nodes.M_hi
            keep = bound >= tau[ri]
            ri, beta, nodes, bound = ri[keep], beta[keep], nodes.take(keep), bound[keep]
            if ri.size == 0 or level == 1:
                break
            clo, csm = smax[level - 1]
            lo = np.full(ri.size, clo)
            par, beta, nodes = self._children(rows[ri], level, beta, nodes, lo, lo + csm.shape[1])
            ri, level = ri[par], level - 1
        # level-1 nodes: reveal their leaves in rounds, best bound first; the floor rises
        while ri.size:
            alive = bound >= tau[ri]
            ri, beta, nodes, bound = ri[alive], beta[alive], nodes.take(alive), bound[alive]
            if ri.size == 0:
                break
            order = np.lexsort((-bound, ri))
            ri, beta, nodes, bound = ri[order], beta[order], nodes.take(order), bound[order]
            first = np.searchsorted(ri, ri, side="left")
            now = (np.arange(ri.size) - first) < k
            m = int(now.sum())
            par, leaf, lv = self._children(
                rows[ri[now]], 1, beta[now], nodes.take(now), np.full(m, c0), np.full(m, c1)
            )
            lri = ri[now][par]
            raw = tile[lri, leaf - c0]
            mu = units[lri, leaf - c0]
            sign = lv.p
            score = np.abs(mu + sign * lv.M_lo)
            undecided = lv.M_lo != lv.M_hi
            if undecided.any():
                # the best score an undecided leaf can have; below the floor it is never selected
                with np.errstate(invalid="ignore"):
                    best = np.maximum(score, np.abs(mu + sign * lv.M_hi))
                must = np.flatnonzero(undecided & (best >= tau[lri]))
                if must.size:
                    exact = self.exact_magnitudes(rows[lri[must]], leaf[must])
                    score[must] = np.abs(mu[must] + sign[must] * exact)
                drop = undecided.copy()
                drop[must] = False
                score[drop] = -np.inf
            # per node, only entries at or above its own k-th score can enter the top k
            keep = _node_top(par, score, m, t.fanout, k)
            lri, leaf, score, raw = lri[keep], leaf[keep], score[keep], raw[keep]
            out_cols, out_scores, out_raw = _merge_topk(out_cols, out_scores, out_raw, lri, leaf, score, raw, k)
            full = out_cols[:, k - 1] >= 0
            tau = np.where(full, np.maximum(tau, out_scores[:, k - 1]), tau)
            keep = ~now
            ri, beta, nodes, bound = ri[keep], beta[keep], nodes.take(keep), bound[keep]
        return out_cols, out_scores, out_raw


@dataclass(frozen=True)
class RowFrontier:
    """Data-free values shared by the tiles of a row block (:meth:`LazySelectionNoise.prepare_rows`).

    ``q_lo``, ``q_hi``, ``p``, ``M_lo``, ``M_hi`` have shape (rows, nodes of ``level``): each
    row's certified tree values at that level; ``floor`` (rows,) is the data-free floor. Holds
    no data.
    """

    row_start: int
    level: int
    q_lo: np.ndarray
    q_hi: np.ndarray
    p: np.ndarray
    M_lo: np.ndarray
    M_hi: np.ndarray
    floor: np.ndarray


def _pyramid(absval: np.ndarray, c0: int, c1: int, top: int, fanout: int) -> dict[int, tuple[int, np.ndarray]]:
    """``{level: (first node, smax)}`` for levels 1..top: max |value| over each node's part
    of the tile columns ``[c0, c1)`` (``np.maximum.reduceat``; NaN propagates)."""
    out: dict[int, tuple[int, np.ndarray]] = {}
    prev, prev_lo = absval, c0
    for level in range(1, top + 1):
        width = fanout**level
        lo_b, hi_b = c0 // width, (c1 - 1) // width
        unit = width if level == 1 else fanout
        starts = np.maximum(np.arange(lo_b, hi_b + 1) * unit, prev_lo) - prev_lo
        cur = np.maximum.reduceat(prev, starts, axis=1)
        out[level] = (lo_b, cur)
        prev, prev_lo = cur, lo_b
    return out


def _node_top(par: np.ndarray, score: np.ndarray, n_nodes: int, fanout: int, k: int) -> np.ndarray:
    """Mask of the leaves whose score is >= the k-th largest score of their node (ties kept,
    so the column tie-break of the merge still sees every candidate); NaN and -inf never kept."""
    if n_nodes == 0:
        return np.zeros(0, dtype=bool)
    first = np.searchsorted(par, np.arange(n_nodes))  # leaves come grouped by node
    pos = np.arange(par.size) - first[par]
    padded = np.full((n_nodes, fanout), -np.inf)
    padded[par, pos] = np.where(np.isnan(score), -np.inf, score)
    kk = min(k, fanout)
    kth = np.partition(padded, fanout - kk, axis=1)[:, fanout - kk]
    return (score >= kth[par]) & (score > -np.inf)


def _signs(words: np.ndarray) -> np.ndarray:
    """Bit 0 of a leaf's word: 1 means a negative noise."""
    return np.where((words & np.uint64(1)) == 1, -1.0, 1.0)


def _merge_topk(cols, scores, raw, ri, new_cols, new_scores, new_raw, k):
    """Merge scattered new entries (row ``ri``) into per-row top-k buffers (score desc, col asc).

    NaN and -inf scores never enter: a NaN row is the non-finite guard's business.
    """
    ok = ~np.isnan(new_scores) & (new_scores > -np.inf)
    ri, new_cols, new_scores, new_raw = ri[ok], new_cols[ok], new_scores[ok], new_raw[ok]
    if ri.size == 0:
        return cols, scores, raw
    touched = np.unique(ri)
    all_ri = np.concatenate([np.repeat(touched, k), ri])
    all_c = np.concatenate([cols[touched].ravel(), new_cols])
    all_s = np.concatenate([scores[touched].ravel(), new_scores])
    all_v = np.concatenate([raw[touched].ravel(), new_raw])
    big = np.iinfo(np.int64).max
    order = np.lexsort((np.where(all_c < 0, big, all_c), -all_s, all_ri))
    all_ri, all_c, all_s, all_v = all_ri[order], all_c[order], all_s[order], all_v[order]
    first = np.searchsorted(all_ri, all_ri, side="left")
    rank = np.arange(all_ri.size) - first
    sel = rank < k
    cols, scores, raw = cols.copy(), scores.copy(), raw.copy()
    cols[all_ri[sel], rank[sel]] = all_c[sel]
    scores[all_ri[sel], rank[sel]] = all_s[sel]
    raw[all_ri[sel], rank[sel]] = all_v[sel]
    return cols, scores, raw
