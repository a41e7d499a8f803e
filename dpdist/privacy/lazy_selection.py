"""Noisy row-wise top-k selection that draws O(d k) noise per row instead of d (PrivCov, line 6).

PrivCov keeps, for each row i of the d x d clipped second moment ``S``, the k indices with the
largest scores ``|S_ij + w_ij|``, with ``w_i`` a vector of d i.i.d. symmetric noises (Laplace(b)
in Algorithm 1). Drawing all d^2 noises costs more than the Gram matrix at large d and small n
(d = 100,000: 1e10 draws). This module draws, per row, exactly the same selection while
generating only the noise values that can matter.

The noise tree (what is drawn)
------------------------------
The d noises of row i are *defined* by a tree over the column positions, not by one draw per
position. Write each noise as ``w_j = sigma_j |w_j|`` with an independent sign and
``|w_j| = isf(V_j)``, where ``V_j`` is a uniform "survival probability" in (0, 1) and ``isf``
the inverse survival function of the magnitude law (:class:`LaplaceMagnitude`:
``isf(q) = -b log q``). Positions are grouped in a fixed tree with fan-out F (default 64): a
node of level l covers the aligned range ``[beta F^l, (beta + 1) F^l)`` cut at d; the root
covers ``[0, d)``; leaves are positions. Every node v carries ``q_v = min_{j in v} V_j`` (so
``M_v = isf(q_v) = max_{j in v} |w_j|``) and ``p_v``, the position where the minimum sits:

* root (N positions): ``q = 1 - U^(1/N)`` (law of the minimum of N uniforms), ``p`` uniform
  in ``[0, d)``;
* a child c (size N_c) of node v: the child holding ``p_v`` inherits ``(q_v, p_v)``; every
  other child draws ``q_c = 1 - (1 - q_v) U^(1/N_c)`` (the minimum of N_c uniforms
  conditioned to exceed q_v) and a fresh ``p_c`` uniform in its range;
* a leaf j is a node of size 1; its sign is bit 0 of its word, independent of the 53 bits
  that make its uniform.

Each value is a function of its own word of the keyed ChaCha20 stream of row i (stream
index i, positions below; :class:`~dpdist.privacy.noise.NoiseSeed`): leaf j at position j;
node (l, beta) at ``l * 2^56 + 2 beta`` (q) and ``+ 1`` (p); integer rejection retries for
p in further slots of the level's range. So the noise vector of row i is a pure function of
``(root, purpose, i)``: the same whatever the tiling, the chunking, the worker or the data.

**Lemma (the tree draws i.i.d. noise).** The leaf values ``V_1..V_d`` of the tree are i.i.d.
uniform on (0, 1) and independent of the signs; hence the tree's noise vector is i.i.d. with
the magnitude law's symmetric law (Laplace(b) for :class:`LaplaceMagnitude`).
*Proof.* For N i.i.d. uniforms, (a) the minimum m has ``P(m > y) = (1 - y)^N`` (the root
formula inverts it); (b) its position is uniform and independent of m (exchangeability,
continuity); (c) given (m, position), the other N - 1 values are i.i.d. uniform on (m, 1).
Given a node's (q_v, p_v) with (c), the child holding p_v holds the value q_v at p_v and
N_c - 1 i.i.d. U(q_v, 1) values, so (a)-(c) hold for it with the same (q_v, p_v); each other
child holds N_c i.i.d. U(q_v, 1) values, whose minimum has
``P(q_c > y) = ((1 - y) / (1 - q_v))^N_c`` (the child formula inverts it), at a uniform
position, the rest i.i.d. U(q_c, 1): (a)-(c) again. Children use disjoint words, so they are
conditionally independent given (q_v, p_v). By induction down to the leaves the joint law of
the leaves is that of d i.i.d. uniforms. Signs are other bits of other words. Then
``P(isf(V) > x) = P(V < sf(x)) = sf(x)`` gives the magnitude law (this also holds for the
generalised inverse of a discrete law). []

The lazy search (what is computed)
----------------------------------
For a tile ``S[rows, c0:c1]`` the search computes, per row, the tile's top-k entries of the
tree's noise vector by branch and bound, visiting only nodes that can hold an entry of the
row's top k:

* the *bound* of node v within the tile is ``fl(smax_v + M_v)`` with
  ``smax_v = max |S_ij|`` over the tile's positions j in v. Every entry j of v has score
  ``|fl(S_ij + w_j)| <= fl(smax_v + M_v)`` in floating point: ``|S_ij + w_j| <= |S_ij| +
  |w_j| <= smax_v + M_v`` and rounding to nearest is monotone and symmetric;
* a *floor* tau_i is any number such that at least k entries of row i have score >= tau_i,
  so that an entry with score < tau_i is not selected (at least k entries beat it). Two
  floors are used: exact scores of entries revealed in the tile (the k-th largest), and the
  data-free floor of :meth:`LazySelectionNoise.prepare_rows`: for k disjoint nodes v, the
  leaf p_v has ``|w| = M_v`` and so a score ``>= fl(M_v - C)``, where C is a public bound on
  ``|S_ij|`` (for PrivCov the clipped second moment satisfies ``|S_ij| <= R^2`` up to the
  float error bounded in :func:`privcov_score_bound`); its k-th largest ``fl(M - C)`` is a
  floor for the whole row, so tiles far from the row's winners stop at the root;
* the stopping rule: a node is expanded only if its bound is >= the row's floor (ties kept:
  an entry whose score equals the floor may still win on the column tie-break); leaves of
  expanded level-1 nodes are revealed (exact scores) in rounds, best bound first, and the
  floor rises as entries are revealed.

**Lemma (exactness).** For every tiling, the tile candidates merged by
``dpdist.engine.topk.combine_row_topk`` are bit for bit the top-k, under the order (score
descending, column ascending), of the scores computed from the fully evaluated tree
(:meth:`LazySelectionNoise.full_noise`). *Proof.* Every value computed lazily is the value
the full evaluation computes (the same function of the same word; magnitudes are clamped
to their parent's, ``M_c = min(isf(q_c), M_v)``, so ``|w_j| <= M_v`` holds for the computed
floats of every ancestor v of j). An entry of the row's top k has a score >= every floor,
so it lies in no pruned node (bound >= score >= floor), is revealed in its tile, and is in
that tile's top k (it is in the row's). The merge keeps the top k of the union. []

Together: the selected sets and their noisy scores have exactly the law of the naive
selection with d i.i.d. noises per row (the idealised, real-number mechanism: the float
caveat of :data:`~dpdist.privacy.noise.FLOAT_NOISE_CAVEAT` applies as to every sampler
here), so the privacy statement of PrivCov is unchanged. The release noise z is drawn as
before (:class:`~dpdist.privacy.noise.NoiseField`, purpose ``privcov/release``).

Ties, signs and the stopping rule
---------------------------------
Scores are ``|S_ij + sigma_j |w_j||``: the sign matters for the score, so every revealed
entry is scored exactly with its own sign; the bound ``smax + M`` holds for either sign.
Ties in the score are broken by the smaller column, as in the dense engine, and the
stopping rule is non-strict (a node whose bound equals the floor is expanded), so ties are
resolved exactly as in the full evaluation.

Swapping the law (discrete noise)
---------------------------------
The tree is built on the uniforms V_j; the law enters only through ``isf`` (and ``sf`` for
documentation and tests). A discrete magnitude law (a lattice Laplace or Gaussian) plugs in
through its generalised inverse ``isf(q) = min{x : sf(x) <= q}``: the lemma above holds
unchanged, ties in |w| then have positive probability and are resolved by the column rule,
and the floor and bounds stay valid because isf is monotone and the clamp keeps every
magnitude below its parent's. What the discrete sampler must still provide is an ``isf``
that is exact on the lattice for the 53-bit uniforms used here (or a finer uniform): that is
where an exact discrete sampler differs from an inverse CDF in floating point.

Cost and side channel
---------------------
Per row the work is O(k F log_F d) draws in the regime where the noise dominates the data
(small n; PrivCov at d = 100,000 and n = 2,000 draws about 30 words a row per tile), and
O(F) draws per tile-row plus O(k F) per revealed node when the data dominate. The number of
draws depends on the data; like every task's run time it is not released (no timings leave
the mechanism).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dpdist.privacy.noise import NoiseSeed, chacha20_words

__all__ = [
    "DEFAULT_FANOUT",
    "LaplaceMagnitude",
    "LazySelectionNoise",
    "RowFrontier",
    "privcov_score_bound",
]

#: Fan-out F of the noise tree (a revealed level-1 node costs F words).
DEFAULT_FANOUT = 64
#: Positions of one tree level in the row's stream (``level * 2^56 + ...``).
_LEVEL_SPAN = 1 << 56
#: Slots of a level: slot 0 holds the (q, p) words of the nodes, slots 1.. the retries of p.
_SLOT_SPAN = 1 << 51
_MAX_RETRIES = 31


def _uniform(words: np.ndarray) -> np.ndarray:
    """Top 53 bits of a word as a uniform in the open interval (0, 1) (as NoiseSeed.uniforms)."""
    return ((words >> np.uint64(11)).astype(np.float64) + 0.5) * (2.0**-53)


# ---------------------------------------------------------------------------------------
# magnitude laws
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaplaceMagnitude:
    """|w| for w ~ Laplace(0, ``scale``): Exponential(scale); ``sf(x) = exp(-x / scale)``.

    A magnitude law is any object with ``isf(q)`` (inverse survival function, monotone
    non-increasing, ``isf(1) = 0``), ``sf(x)`` and ``scale``; see the module docstring for a
    discrete law.
    """

    scale: float

    def __post_init__(self) -> None:
        if not (self.scale > 0 and math.isfinite(self.scale)):
            raise ValueError(f"noise scale must be finite and > 0, got {self.scale!r}")

    def isf(self, q: np.ndarray) -> np.ndarray:
        """``x`` with ``P(|w| > x) = q``, for q in (0, 1]."""
        return -self.scale * np.log(q)

    def sf(self, x: np.ndarray) -> np.ndarray:
        """``P(|w| > x)``."""
        return np.exp(-np.asarray(x, dtype=np.float64) / self.scale)


def privcov_score_bound(clip: float, n_samples: int) -> float:
    """A public bound C >= |S_ij| for the *computed* clipped second moment ``(1/n) Y^T Y``.

    Entries of Y are in [-R, R] exactly (``np.clip``); every computed product has magnitude
    <= fl(R^2); a float sum of n such terms in any order (BLAS, tree over chunks) is <=
    n fl(R^2) (1 + gamma_n) with gamma_n = n u / (1 - n u), u = 2^-53; scaling by fl(1/n)
    adds two roundings. So ``|S_ij| <= R^2 (1 + (n + 4) u / (1 - (n + 4) u))(1 + u)^2``; we
    return ``R^2 (1 + 4 (n + 8) u)``, rounded up, which exceeds it for n < 2^50.
    """
    r2 = float(clip) * float(clip)
    u = 2.0**-53
    return math.nextafter(r2 * (1.0 + 4.0 * (int(n_samples) + 8) * u), math.inf)


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


@dataclass(frozen=True)
class LazySelectionNoise:
    """Selection noise of PrivCov as a lazily evaluated tree (see the module docstring).

    Parameters
    ----------
    seed : NoiseSeed
        Root of the noise streams.
    purpose : str
        Noise purpose (PrivCov: ``"privcov/select"``); keys the ChaCha streams.
    law : magnitude law
        :class:`LaplaceMagnitude` (or any object with ``isf``/``sf``/``scale``).
    n_features : int
        d, the number of columns of every row (the tree covers ``[0, d)``).
    score_bound : float or None
        Public C >= |S_ij| for every entry (:func:`privcov_score_bound`). ``None`` disables
        the data-free floor (the search is then exact but slower when noise dominates).
    fanout : int
        Tree fan-out F >= 2.

    Notes
    -----
    Instances are small, immutable and picklable: they travel to workers inside the graph.
    The engine calls :meth:`prepare_rows` once per row block and :meth:`tile_candidates` per
    tile (``dpdist.engine.topk``); :meth:`full_noise` evaluates the whole tree (tests).
    """

    seed: NoiseSeed
    purpose: str
    law: object
    n_features: int
    score_bound: float | None = None
    fanout: int = DEFAULT_FANOUT
    _key: int = field(init=False, repr=False, compare=False)
    _tree: _Tree = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        d, f = int(self.n_features), int(self.fanout)
        if d < 1 or d > 1 << 50:
            raise ValueError(f"n_features must lie in [1, 2^50], got {d}")
        if f < 2:
            raise ValueError(f"fanout must be >= 2, got {f}")
        if self.score_bound is not None and not (self.score_bound >= 0):
            raise ValueError(f"score_bound must be >= 0 or None, got {self.score_bound!r}")
        object.__setattr__(self, "_key", self.seed.key(self.purpose))
        object.__setattr__(self, "_tree", _Tree.build(d, f))

    @property
    def scale(self) -> float:
        """Scale of the magnitude law (the Laplace b)."""
        return float(self.law.scale)

    # -- words ---------------------------------------------------------------------------

    def _words(self, rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
        return chacha20_words(self.seed, self._key, rows, positions)

    @staticmethod
    def _node_position(level: int, beta: np.ndarray, slot: int = 0) -> np.ndarray:
        return np.uint64(level * _LEVEL_SPAN + slot * _SLOT_SPAN) + 2 * beta.astype(np.uint64)

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

    def _child_q(self, words: np.ndarray, size: np.ndarray, q_parent: np.ndarray) -> np.ndarray:
        """Minimum of ``size`` uniforms conditioned to exceed ``q_parent`` (root: q_parent = 0)."""
        a = np.log(_uniform(words)) / size
        q = -np.expm1(a) + q_parent * np.exp(a)
        return np.minimum(np.maximum(q, q_parent), 1.0)

    def _root(self, rows: np.ndarray):
        t = self._tree
        beta = np.zeros(rows.size, dtype=np.int64)
        w = self._words(rows, self._node_position(t.height, beta))
        q = self._child_q(w, np.full(rows.size, float(t.d)), np.zeros(rows.size))
        p = self._draw_p(rows, t.height, beta)
        return q, p, self.law.isf(q)

    def _children(self, rows, level, beta, q, p, M, lo_beta=None, hi_beta=None):
        """Children (level - 1) of nodes (level, beta), optionally restricted to
        ``lo_beta <= child < hi_beta`` (per parent). Returns flat arrays
        ``(parent_index, child_beta, q, p, M)``, in parent order then child order; ``p`` is
        -1 where not drawn yet (drawn when the node is expanded); at level 0 (leaves) the
        fourth array is the leaves' signs (+-1) instead of p."""
        t = self._tree
        f = t.fanout
        cl = level - 1
        p = self._ensure_p(rows, level, beta, p)
        child = beta[:, None] * f + np.arange(f)[None, :]
        valid = child < t.n_nodes(cl)
        if lo_beta is not None:
            valid &= (child >= lo_beta[:, None]) & (child < hi_beta[:, None])
        par, col = np.nonzero(valid)
        cb = child[par, col]
        crow = rows[par]
        width = t.width(cl)
        inherit = (p[par] >= cb * width) & (p[par] < (cb + 1) * width)
        cq = q[par].copy()
        cM = M[par].copy()
        cp = np.where(inherit, p[par], -1)
        draw = np.flatnonzero(~inherit)
        leaf_words = None
        if cl == 0:  # a leaf's word gives its uniform and its sign: fetch it for every leaf
            leaf_words = self._words(crow, cb.astype(np.uint64))
        if draw.size:
            if cl == 0:
                w = leaf_words[draw]
            else:
                w = self._words(crow[draw], self._node_position(cl, cb[draw]))
            size = t.size(cl, cb[draw]).astype(np.float64)
            qd = self._child_q(w, size, q[par][draw])
            cq[draw] = qd
            cM[draw] = np.minimum(self.law.isf(qd), M[par][draw])
        if cl == 0:
            return par, cb, cq, _signs(leaf_words), cM
        return par, cb, cq, cp, cM

    # -- public --------------------------------------------------------------------------

    def full_noise(self, rows: np.ndarray) -> np.ndarray:
        """The whole noise matrix ``w[rows, 0:d]`` (every node evaluated; for tests, O(d) a row)."""
        rows = np.asarray(rows, dtype=np.int64).ravel()
        t = self._tree
        q, p, M = self._root(rows)
        r, beta = rows, np.zeros(rows.size, dtype=np.int64)
        for level in range(t.height, 0, -1):
            par, beta, q, p, M = self._children(r, level, beta, q, p, M)
            r = r[par]
        out = np.empty((rows.size, t.d))
        row_pos = np.repeat(np.arange(rows.size), t.d)
        out[row_pos, beta] = M * p  # at the leaves p holds the signs
        return out

    def prepare_rows(self, rows: np.ndarray, k: int) -> "RowFrontier":
        """Data-free work shared by every tile of a row block: the tree's top levels and the floor.

        Expands each row's tree from the root down to the first level with at least 2k nodes
        (or the leaves) and returns those nodes' values and the floor ``fl(M_(k) - C)``:
        every node v of that level has its leaf p_v with ``|w| = M_v``, so at least k entries
        of the row score >= ``fl(M_(k) - C)`` (module docstring); ``-inf`` when
        ``score_bound`` is None.
        """
        rows = np.asarray(rows, dtype=np.int64).ravel()
        k = int(k)
        t = self._tree
        q, p, M = self._root(rows)
        r, beta, level = rows, np.zeros(rows.size, dtype=np.int64), t.height
        while level > 1 and t.n_nodes(level) < 2 * k:
            par, beta, q, p, M = self._children(r, level, beta, q, p, M)
            r, level = r[par], level - 1
        n = t.n_nodes(level)
        shape = (rows.size, n)
        q, p, M = q.reshape(shape), p.reshape(shape), M.reshape(shape)  # row order, then beta order
        if self.score_bound is None or k < 1 or n < k:
            floor = np.full(rows.size, -np.inf)
        else:
            floor = -np.partition(-M, k - 1, axis=1)[:, k - 1] - float(self.score_bound)
        return RowFrontier(int(rows[0]) if rows.size else 0, level, q, p, M, floor)

    def tile_candidates(
        self, tile: np.ndarray, row_start: int, col_start: int, k: int, frontier: "RowFrontier | None" = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The top-k entries of each row of a tile by ``|tile + w|`` (ties: smaller column).

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
            Global column, noisy score and raw value of each candidate; empty slots have
            column -1 and score -inf. Every entry whose score reaches the row's floor and
            that is among the tile's k best is present (others cannot be selected).
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
        off = int(row_start) - frontier.row_start
        tau = frontier.floor[off : off + r].copy()
        # the frontier's nodes that meet the tile, as flat arrays (ri = row within the tile)
        level = frontier.level
        width = t.width(level)
        b_lo, b_hi = c0 // width, (c1 - 1) // width + 1
        nb = b_hi - b_lo
        ri = np.repeat(np.arange(r), nb)
        beta = np.tile(np.arange(b_lo, b_hi, dtype=np.int64), r)
        q = frontier.q[off : off + r, b_lo:b_hi].ravel()
        p = frontier.p[off : off + r, b_lo:b_hi].ravel()
        M = frontier.M[off : off + r, b_lo:b_hi].ravel()
        if self.score_bound is not None:
            # data-free prune first: smax <= C, so M + C < floor excludes the node
            keep = M + float(self.score_bound) >= tau[ri]
            ri, beta, q, p, M = ri[keep], beta[keep], q[keep], p[keep], M[keep]
            if ri.size == 0:
                return out_cols, out_scores, out_raw
        # smax pyramid (levels 1..level) of the rows that still have a node, from the data
        need = np.unique(ri)
        absval = np.abs(tile[need])
        if self.score_bound is not None and np.any(absval.max(axis=1) > self.score_bound):
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
            bound = sm[slot[ri], beta - lo_b] + M
            keep = bound >= tau[ri]
            ri, beta, q, p, M, bound = ri[keep], beta[keep], q[keep], p[keep], M[keep], bound[keep]
            if ri.size == 0 or level == 1:
                break
            clo, csm = smax[level - 1]
            lo = np.full(ri.size, clo)
            par, beta, q, p, M = self._children(rows[ri], level, beta, q, p, M, lo, lo + csm.shape[1])
            ri, level = ri[par], level - 1
        # level-1 nodes: reveal their leaves in rounds, best bound first; the floor rises
        while ri.size:
            alive = bound >= tau[ri]
            ri, beta, q, p, M, bound = ri[alive], beta[alive], q[alive], p[alive], M[alive], bound[alive]
            if ri.size == 0:
                break
            order = np.lexsort((-bound, ri))
            ri, beta, q, p, M, bound = ri[order], beta[order], q[order], p[order], M[order], bound[order]
            first = np.searchsorted(ri, ri, side="left")
            now = (np.arange(ri.size) - first) < k
            m = int(now.sum())
            par, leaf, _, sign, lM = self._children(
                rows[ri[now]], 1, beta[now], q[now], p[now], M[now], np.full(m, c0), np.full(m, c1)
            )
            lri = ri[now][par]
            raw = tile[lri, leaf - c0]
            score = np.abs(raw + sign * lM)
            # per node, only entries at or above its own k-th score can enter the top k
            keep = _node_top(par, score, m, t.fanout, k)
            lri, leaf, score, raw = lri[keep], leaf[keep], score[keep], raw[keep]
            out_cols, out_scores, out_raw = _merge_topk(out_cols, out_scores, out_raw, lri, leaf, score, raw, k)
            full = out_cols[:, k - 1] >= 0
            tau = np.where(full, np.maximum(tau, out_scores[:, k - 1]), tau)
            keep = ~now
            ri, beta, q, p, M, bound = ri[keep], beta[keep], q[keep], p[keep], M[keep], bound[keep]
        return out_cols, out_scores, out_raw


@dataclass(frozen=True)
class RowFrontier:
    """Data-free values shared by the tiles of a row block (:meth:`LazySelectionNoise.prepare_rows`).

    ``q``, ``p``, ``M`` have shape (rows, nodes of ``level``): each row's tree values at that
    level; ``floor`` (rows,) is the data-free floor. Holds no data.
    """

    row_start: int
    level: int
    q: np.ndarray
    p: np.ndarray
    M: np.ndarray
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
    so the column tie-break of the merge still sees every candidate); NaN never kept."""
    if n_nodes == 0:
        return np.zeros(0, dtype=bool)
    first = np.searchsorted(par, np.arange(n_nodes))  # leaves come grouped by node
    pos = np.arange(par.size) - first[par]
    padded = np.full((n_nodes, fanout), -np.inf)
    padded[par, pos] = np.where(np.isnan(score), -np.inf, score)
    kk = min(k, fanout)
    kth = np.partition(padded, fanout - kk, axis=1)[:, fanout - kk]
    return score >= kth[par]


def _signs(words: np.ndarray) -> np.ndarray:
    """Bit 0 of a leaf's word: 1 means a negative noise."""
    return np.where((words & np.uint64(1)) == 1, -1.0, 1.0)


def _merge_topk(cols, scores, raw, ri, new_cols, new_scores, new_raw, k):
    """Merge scattered new entries (row ``ri``) into per-row top-k buffers (score desc, col asc).

    NaN scores never enter (they compare false): a NaN row is the non-finite guard's business.
    """
    ok = ~np.isnan(new_scores)
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
