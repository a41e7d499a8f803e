"""The exponential mechanism as an exact Gumbel-max that a chunked max-reduction can run.

Candidate ``c`` gets the key ``q_c + G_c``: its weighted score on the public lattice
``2**-SCORE_BITS`` plus an *exact* standard Gumbel drawn from keyed ChaCha20 words; keys are
compared with a certified float radius, and overlapping ones are decided exactly in mpmath
after refining the uniforms. The arg max is exactly the exponential mechanism's law (the
Gumbel-max trick), whatever the chunking of the max-reduction; the noise is unbounded, so no
output is impossible under a neighbour (a float Gumbel-max has bounded noise and quantised
probabilities, which break both).

Guarantee: if every weighted score moves by at most ``u`` between neighbours, the release is
``2 (u + 2**-SCORE_BITS)``-DP (McSherry-Talwar 2007); with weight ``epsilon / (2 Delta)``,
``epsilon + 2**-(SCORE_BITS - 1)``, which the mechanism object calibrates away.
Residuals: undecided comparisons after ``FALLBACK_WORDS`` refinements (below ``2**-1000``
each, added to delta), the ``2**-46`` accuracy trusted of ``log``/``log1p``, ChaCha20 as a PRF.

Proofs, the failures of a float sampler and the residuals: docs/privacy/gumbel.md.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from dpdist.privacy.noise.lattice import FALLBACK_SUFFIX, FALLBACK_WORDS
from dpdist.privacy.noise.streams import NoiseSeed

__all__ = ["Candidate", "EMPTY", "EXHAUSTION_DELTA_PER_COMPARISON", "GumbelMax", "GumbelTopK", "SCORE_BITS"]

#: Weighted scores are rounded to the lattice 2**-SCORE_BITS.
SCORE_BITS = 30
#: Per-comparison probability bound of the exhaustion residual.
EXHAUSTION_DELTA_PER_COMPARISON = 2.0**-1000

_REL = 2.0**-46
_CLAMP = 2.0**900
#: Cells within 2**-44 of U = 1 (Gumbel in [-3.80, -3.41]) get a fixed interval.
_NEAR_ONE = float((1 << 64) - (1 << 20))
#: Cells below 2**-44 get bounds from E ~ U (the midpoint radius needs a narrow cell).
_SMALL = float(1 << 20)
_LOCAL = threading.local()


class Candidate(NamedTuple):
    """A batch's best candidate: a certified interval ``[lo, hi]`` holding its exact key, its
    rank and its lattice score."""

    lo: float
    hi: float
    rank: int
    score: float


#: The best candidate of an empty range.
EMPTY = Candidate(-math.inf, -math.inf, -1, -math.inf)


def _iv():
    ctx = getattr(_LOCAL, "iv", None)
    if ctx is None:
        from mpmath.ctx_iv import MPIntervalContext

        ctx = _LOCAL.iv = MPIntervalContext()
    return ctx


def _lattice_scores(scores, weight: float) -> np.ndarray:
    """``q = rint(clamp(weight * score) 2**SCORE_BITS) 2**-SCORE_BITS`` (NaN -> -2**900)."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow -> inf -> the clamp
        x = np.asarray(scores, dtype=np.float64) * weight
    x = np.nan_to_num(x, nan=-_CLAMP, posinf=_CLAMP, neginf=-_CLAMP)
    np.clip(x, -_CLAMP, _CLAMP, out=x)
    return np.ldexp(np.rint(np.ldexp(x, SCORE_BITS)), -SCORE_BITS)


def _gumbel_bounds(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Certified bounds ``(lo, hi)`` on the exact Gumbel of each cell (docs/privacy/gumbel.md)."""
    wf = words.astype(np.float64)
    u = np.minimum((wf + 0.5) * 2.0**-64, 1.0 - 2.0**-53)
    e = -np.log1p(-u)
    g = -np.log(e)
    # |dG/dU| = 1 / ((1 - U) E); cell half-width 2**-65 plus input rounding 2**-52 u, doubled
    radius = (2.0**-64 + 2.0**-51 * u) / ((1.0 - u) * e)
    radius += _REL * (2.0 + np.abs(g))
    lo, hi = g - radius, g + radius
    small = wf < _SMALL
    if small.any():  # U < 2**-44: E in [x, x (1 + x)], G = -ln E; W = 0 has no upper bound
        w = wf[small]
        with np.errstate(divide="ignore"):
            hi[small] = -np.log(w * 2.0**-64) + 2.0**-30
        lo[small] = -np.log((w + 1.0) * 2.0**-64 * (1.0 + 2.0**-40)) - 2.0**-30
    near_one = wf >= _NEAR_ONE
    if near_one.any():  # U > 1 - 2**-44: E in [30.4, 44.4], G in [-3.80, -3.41]
        lo[near_one] = -3.85
        hi[near_one] = -3.35
    return lo, hi


def _key_bounds(q: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Certified bounds on the exact keys ``q + G`` of lattice scores q and words."""
    glo, ghi = _gumbel_bounds(words)
    lo, hi = q + glo, q + ghi
    lo -= 2.0**-52 * np.abs(lo)  # rounding of the sums
    hi += 2.0**-52 * np.abs(hi)
    return lo, hi


def _interval(q: float, num: int, bits: int):
    """mpmath interval holding the exact key ``q + G`` of the uniform cell ``[num, num + 1) 2**-bits``."""
    ctx = _iv()
    ctx.prec = bits + 64
    lo = ctx.ldexp(ctx.mpf(num), -bits)
    hi = ctx.ldexp(ctx.mpf(num + 1), -bits)
    u = ctx.mpf([lo, hi])
    return ctx.mpf(q) - ctx.log(-ctx.log(1 - u))


def _exact_greater(qa: float, word_a: int, fallback_a, qb: float, word_b: int, fallback_b) -> bool | None:
    """Exactly whether the key ``qa + G_a`` exceeds ``qb + G_b``; ``G`` the exact Gumbel of the
    uniform whose first 64 bits are ``word`` and whose next 64-bit words are ``fallback(t)``,
    t = 0, 1, ... (refined until the mpmath intervals separate). None when still undecided
    after ``FALLBACK_WORDS`` refinements of both cells (the exhaustion residual)."""
    cells = [[int(word_a), 64, 0, fallback_a], [int(word_b), 64, 0, fallback_b]]
    for _ in range(FALLBACK_WORDS + 1):
        ia = _interval(qa, cells[0][0], cells[0][1])
        ib = _interval(qb, cells[1][0], cells[1][1])
        if ia.a > ib.b:
            return True
        if ib.a > ia.b:
            return False
        for cell in cells:  # refine both cells by one word
            if cell[2] < FALLBACK_WORDS:
                cell[0] = (cell[0] << 64) | int(cell[3](cell[2]))
                cell[1] += 64
                cell[2] += 1
        if all(cell[2] >= FALLBACK_WORDS for cell in cells):
            break
    return None


@dataclass(frozen=True)
class _KeyedGumbel:
    """What both samplers hold: the seed, the purpose their keys are drawn under (main words and
    fallback words), and the weight that turns scores into Gumbel units."""

    seed: NoiseSeed
    purpose: str
    weight: float

    def __post_init__(self) -> None:
        w = float(self.weight)
        if not (math.isfinite(w) and w > 0):
            raise ValueError(f"weight must be finite and > 0, got {self.weight!r}")
        object.__setattr__(self, "weight", w)
        object.__setattr__(self, "_key", self.seed.key(self.purpose))
        object.__setattr__(self, "_fkey", self.seed.key(self.purpose + FALLBACK_SUFFIX))


@dataclass(frozen=True)
class GumbelMax(_KeyedGumbel):
    """Exact exponential mechanism by Gumbel-max over candidates addressed by rank.

    Parameters
    ----------
    seed : NoiseSeed
    purpose : str
        Candidate r's main word is position r of stream 0 under this purpose.
    weight : float
        Multiplies the raw scores into Gumbel units (``epsilon / (2 Delta)`` for the
        textbook calibration; see docs/privacy/gumbel.md for the residual).

    Small, frozen and picklable: ``best`` runs in the chunk tasks, ``combine`` in the merges.
    """

    # -- float keys --------------------------------------------------------------------------
    def lattice_scores(self, scores) -> np.ndarray:
        """``q = rint(clamp(weight * score) 2**SCORE_BITS) 2**-SCORE_BITS`` (NaN -> -2**900)."""
        return _lattice_scores(scores, self.weight)

    def _words(self, start: int, count: int) -> np.ndarray:
        return self.seed.raw(self._key, 0, int(start), int(count))

    @staticmethod
    def _gumbel(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Certified bounds ``(lo, hi)`` on the exact Gumbel of each cell (docs/privacy/gumbel.md)."""
        return _gumbel_bounds(words)

    def keys(self, scores, start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Certified key bounds ``(lo, hi)`` and lattice scores ``q`` of ranks ``start ..``."""
        q = self.lattice_scores(scores)
        lo, hi = _key_bounds(q, self._words(start, q.size))
        return lo, hi, q

    # -- exact comparisons -------------------------------------------------------------------
    def _fallback(self, rank: int, used: int) -> int:
        return int(self.seed.raw(self._fkey, int(rank), int(used), 1)[0])

    def beats(self, a: Candidate, b: Candidate) -> bool:
        """Exactly whether ``a``'s key exceeds ``b``'s (ties, of probability 0, and the
        exhaustion residual go to the smaller rank)."""
        if a.rank < 0:
            return False
        if b.rank < 0:
            return True
        if a.lo > b.hi:
            return True
        if b.lo > a.hi:
            return False
        got = _exact_greater(a.score, int(self._words(a.rank, 1)[0]), lambda t: self._fallback(a.rank, t),
                             b.score, int(self._words(b.rank, 1)[0]), lambda t: self._fallback(b.rank, t))
        return a.rank < b.rank if got is None else got  # None: the exhaustion residual

    def combine(self, a: Candidate, b: Candidate) -> Candidate:
        """The exact larger of two candidates: the merge of a max-reduction."""
        return a if self.beats(a, b) else b

    def best(self, scores, start: int) -> Candidate:
        """The exact arg max of the candidates of ranks ``start .. start + len(scores) - 1``.

        Only candidates whose upper bound reaches the float leader's lower bound can win; they
        are compared exactly (usually the leader alone).
        """
        lo, hi, q = self.keys(scores, start)
        if lo.size == 0:
            return EMPTY
        i = int(np.argmax(lo))
        contenders = np.flatnonzero(hi >= lo[i])
        win = Candidate(float(lo[i]), float(hi[i]), int(start) + i, float(q[i]))
        for j in contenders.tolist():
            if j != i:
                win = self.combine(win, Candidate(float(lo[j]), float(hi[j]), int(start) + j, float(q[j])))
        return win


@dataclass(frozen=True)
class GumbelTopK(_KeyedGumbel):
    """Exact row-wise Gumbel top-k: for each row i, the k columns of largest keys
    ``q_ij + G_ij`` (the peeling exponential mechanism, Durfee and Rogers 2019), decided exactly
    across any tiling of the columns.

    ``q_ij`` is ``weight * |S_ij|`` on the public lattice ``2**-SCORE_BITS`` (as
    :meth:`GumbelMax.lattice_scores`); ``G_ij`` is an exact standard Gumbel whose uniform has its
    first 64 bits in the word at position j of stream i under ``key(purpose)`` and its next
    words at positions ``j * FALLBACK_WORDS + t`` of stream i under ``key(purpose +
    FALLBACK_SUFFIX)``. The keys of row i are a function of (seed, purpose, i, S_i) only.

    **Exactness.** A batch of candidates (one tile's entries, or the merged candidates of
    several tiles) keeps, per row, the k candidates of largest exact key: with certified float
    intervals ``[lo, hi]`` (:class:`GumbelMax`'s), let ``L`` be the k-th largest ``lo``; a
    candidate with ``hi < L`` is below k others and is dropped; when exactly k remain they are
    the top k; otherwise the remaining ones are ordered by exact comparisons (mpmath interval
    arithmetic on refined cells, :func:`_exact_greater`) and the first k kept. So each tile
    returns its exact top k, and the top k of a union of such lists is the exact top k of the
    union of the tiles: the result is the same set, bit for bit, whatever the tiling and the
    merge tree. Ties (probability 0) and comparisons still undecided after ``FALLBACK_WORDS``
    refinements (probability below 2**-1000 each) go to the smaller column.

    This sampler draws every key of a row (``d`` words a row, not lazily). It implements the
    engine's lazy-noise protocol (:func:`dpdist.engine.topk.row_topk_release`) with the exact
    merge hook :meth:`exact_select`.
    """

    def lattice_scores(self, values) -> np.ndarray:
        """``q = rint(clamp(weight * |value|) 2**SCORE_BITS) 2**-SCORE_BITS``."""
        return _lattice_scores(np.abs(np.asarray(values, dtype=np.float64)), self.weight)

    def words(self, row_start: int, col_start: int, n_rows: int, n_cols: int) -> np.ndarray:
        """The main words of a block of entries, shape ``(n_rows, n_cols)``: entry (i, j) is
        position j of stream i (narrow blocks in one vectorised call, the same words)."""
        from dpdist.privacy.noise.streams import chacha20_words

        if n_cols <= 64:
            rows = np.arange(row_start, row_start + n_rows, dtype=np.int64)[:, None]
            cols = np.arange(col_start, col_start + n_cols, dtype=np.int64)[None, :]
            return chacha20_words(self.seed, self._key, rows, cols)
        return np.stack([self.seed.raw(self._key, int(row_start) + a, int(col_start), int(n_cols))
                         for a in range(int(n_rows))])

    def _fallback(self, row: int, col: int, t: int) -> int:
        return int(self.seed.raw(self._fkey, int(row), int(col) * FALLBACK_WORDS + int(t), 1)[0])

    def greater(self, row: int, a: tuple, b: tuple) -> bool:
        """Exactly whether candidate ``a = (col, q, lo, hi)`` of ``row`` has a larger key than ``b``."""
        ca, qa, loa, hia = a
        cb, qb, lob, hib = b
        if loa > hib:
            return True
        if lob > hia:
            return False
        got = _exact_greater(qa, int(self.words(row, ca, 1, 1)[0, 0]), lambda t: self._fallback(row, ca, t),
                             qb, int(self.words(row, cb, 1, 1)[0, 0]), lambda t: self._fallback(row, cb, t))
        return ca < cb if got is None else got  # None: the exhaustion residual

    # -- the engine's protocol ---------------------------------------------------------------
    def prepare_rows(self, rows: np.ndarray, k: int) -> None:
        """No per-row state: every key of a row is drawn where its tile is seen."""
        return None

    def tile_candidates(self, tile: np.ndarray, row_start: int, col_start: int, k: int, state=None):
        """The exact top k of each row of a tile: ``(cols, lo, raw, aux)`` (see :meth:`exact_select`)."""
        tile = np.asarray(tile, dtype=np.float64)
        r, c = tile.shape
        q = self.lattice_scores(tile)
        cols = np.broadcast_to(np.arange(col_start, col_start + c, dtype=np.int64), (r, c))
        lo, hi = _key_bounds(q, self.words(row_start, col_start, r, c))
        return self.exact_select(row_start, cols, lo, tile, np.stack([hi, q], axis=-1), k)

    def exact_select(self, row_start: int, cols, lo, raw, aux, k: int):
        """Per row, the k candidates of largest exact key among ``cols`` (-1: empty slot).

        ``lo`` and ``aux[..., 0]`` bound each candidate's key, ``aux[..., 1]`` is its lattice
        score. Returns ``(cols, lo, raw, aux)`` of shape (rows, k), the kept candidates in
        increasing column order (empty slots last, column -1, ``lo = -inf``).
        """
        cols = np.asarray(cols, dtype=np.int64)
        lo = np.where(cols >= 0, np.asarray(lo, dtype=np.float64), -np.inf)
        raw = np.asarray(raw, dtype=np.float64)
        aux = np.asarray(aux, dtype=np.float64)
        r, m = cols.shape
        k = int(k)
        valid = cols >= 0
        keep = valid.copy()
        if m > k:  # drop every candidate whose upper bound is below the k-th largest lower bound
            kth = np.partition(lo, m - k, axis=1)[:, m - k]
            keep &= aux[..., 0] >= kth[:, None]
        big = np.iinfo(np.int64).max
        for a in np.flatnonzero(keep.sum(axis=1) > k).tolist():  # overlapping intervals: exact comparisons
            idx = self._exact_top(row_start + a, cols[a], lo[a], aux[a], np.flatnonzero(keep[a]), k)
            keep[a] = False
            keep[a, idx] = True
        # the kept candidates (at most k a row) in increasing column order, empty slots last
        order = np.argsort(np.where(keep, cols, big), axis=1, kind="stable")
        if m < k:
            order = np.hstack([order, np.zeros((r, k - m), np.intp)])
        order = order[:, :k]
        slot = np.take_along_axis(keep, order, axis=1)
        if m < k:
            slot[:, m:] = False
        out_cols = np.where(slot, np.take_along_axis(cols, order, axis=1), -1)
        out_lo = np.where(slot, np.take_along_axis(lo, order, axis=1), -np.inf)
        out_raw = np.where(slot, np.take_along_axis(raw, order, axis=1), 0.0)
        out_aux = np.where(slot[..., None], np.take_along_axis(aux, order[..., None], axis=1), 0.0)
        out_aux[..., 0] = np.where(slot, out_aux[..., 0], -np.inf)
        return out_cols, out_lo, out_raw, out_aux

    def _exact_top(self, row: int, cols, lo, aux, idx: np.ndarray, k: int) -> np.ndarray:
        """The k of ``idx`` with the largest exact keys (exact comparisons, a sort)."""
        import functools

        idx = idx[np.argsort(cols[idx], kind="stable")]  # a start independent of the tiling
        cand = {int(i): (int(cols[i]), float(aux[i, 1]), float(lo[i]), float(aux[i, 0])) for i in idx.tolist()}

        def order(i: int, j: int) -> int:
            return -1 if self.greater(row, cand[i], cand[j]) else 1

        ranked = sorted(cand, key=functools.cmp_to_key(order))
        return np.asarray(ranked[:k], dtype=np.int64)
