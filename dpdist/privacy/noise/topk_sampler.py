"""Exact sampling of ``top_{k^2}(u u^T + G)`` without drawing d^2 Gaussians (Algorithm 2, Line 21).

:func:`lattice_top_k2` is float-safe: PrivPCA releases through it. (A floating-point sampler
whose values are ``u_a u_b + sigma ndtri(U)`` in float64 would carry low bits that identify
the input, the exposure Mironov (2012) describes.)

Guarantee: :func:`lattice_top_k2` has *exactly* the law of the mechanism that rounds
``fl(u_a u_b)`` to the lattice, adds an independent rounded Gaussian to every one of the d^2
cells, and keeps the k^2 largest by magnitude (ties by independent uniform keys): the
rounded Gaussian mechanism on an integer matrix, then post-processing. Sensitivity on the
lattice: ``Delta_Z = (Delta + 2**-51) / gamma + d``. Lemma: the noise cells' top order
statistics follow Renyi's representation (exact, from keyed uniforms; undecided ones refined
in mpmath), the signal cells are drawn as the mechanism draws them, and the merge keeps the
top k^2. Residuals: refinement exhaustion and 512-bit key ties, far below 1e-15.

Proofs: docs/privacy/topk_sampler.md.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpdist.privacy.noise.lattice import FALLBACK_SUFFIX, FALLBACK_WORDS, LatticeField, LatticeNoise, _mp
from dpdist.privacy.noise.streams import NoiseSeed, chacha20_words

__all__ = ["TIE_WORDS", "lattice_top_k2", "sample_distinct_cells"]

#: Signal-block entries drawn per slice.
SIGNAL_SLICE = 1 << 22


def sample_distinct_cells(
    seed: NoiseSeed, key: int, index: int, count: int, n_features: int, support: np.ndarray
) -> np.ndarray:
    """``count`` distinct cells (flat indices ``row * d + col``) uniform among the d^2 cells
    outside ``support x support``, in the order drawn (uniformly random order).

    Exact: each 64-bit word ``w`` is accepted only below the largest multiple of d^2 that
    fits in 2^64 and mapped to ``w mod d^2`` (no modulo bias); cells in the signal block or
    already drawn are rejected, which conditions the uniform draw exactly.
    """
    d = int(n_features)
    total = d * d
    limit = (1 << 64) - ((1 << 64) % total)
    in_support = np.zeros(d, dtype=bool)
    in_support[np.asarray(support, dtype=np.int64)] = True
    out: list[int] = []
    seen: set[int] = set()
    position = 0
    while len(out) < count:
        want = max(16, 2 * (count - len(out)))
        words = seed.raw(key, index, position, want)
        position += want
        for w in words.tolist():
            if w >= limit:
                continue
            cell = w % total
            r, c = divmod(cell, d)
            if (in_support[r] and in_support[c]) or cell in seen:
                continue
            seen.add(cell)
            out.append(cell)
            if len(out) == count:
                break
    return np.asarray(out, dtype=np.int64)


# --------------------------------------------------------------------------------------
# the float-safe sampler (docs/privacy/topk_sampler.md)
# --------------------------------------------------------------------------------------

#: 64-bit words of a signal cell's tie key.
TIE_WORDS = 8
#: Trusted relative accuracy of numpy.log, expm1 and scipy.special.ndtri (as in privacy/lattice).
_REL = 2.0**-46
#: Order-statistic words below this, or above 2**64 minus it, take the exact path.
_W_EDGE = float(1 << 40)
_SUM_EPS = float(np.finfo(np.longdouble).eps)
_SQRT2PI = math.sqrt(2.0 * math.pi)
_START_PREC = 128


def _order_fast(n_cells: int, scale: float, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Magnitudes (lattice units) of the ``len(words)`` largest of ``n_cells`` rounded
    half-normals of scale ``scale``, and the mask of those the radius leaves undecided."""
    j = np.arange(words.size, dtype=np.float64)
    den = float(n_cells) - j  # exact: n_cells < 2**53
    wf = words.astype(np.float64)
    u = (wf + 0.5) * 2.0**-64
    edge = (wf < _W_EDGE) | (wf > 2.0**64 - _W_EDGE)
    u = np.where(edge, 0.5, u)
    e = -np.log(u)
    t = e / den
    # |dE| <= (2**-65 + 2**-53 u) / u (half cell, conversion of W); log, division; doubled
    rad_t = 2.0 * ((2.0**-65 / u + 2.0**-53) / den + t * (_REL + 2.0**-52))
    y_ld = np.cumsum(t.astype(np.longdouble))
    y = y_ld.astype(np.float64)
    rad_y = np.cumsum(rad_t) * (1.0 + 2.0**-40) + y * ((j + 2.0) * _SUM_EPS * 2.0 + 2.0**-52)
    q = -np.expm1(-y)
    rad_q = q * (rad_y / y + 2.0**-51 + _REL)  # |dq/dY| Y / q <= 1
    n = -special.ndtri(q / 2.0)
    x = scale * n
    with np.errstate(over="ignore"):
        radius = 2.0 * (0.5 * _SQRT2PI * scale * np.exp(0.5 * n * n) * rad_q + (x + scale) * _REL)
    r = x + 0.5
    mag = np.floor(r)
    r -= mag
    r -= 0.5
    np.abs(r, out=r)
    r += radius
    pending = ~(r < 0.5) | np.maximum.accumulate(edge)  # an edge word makes every later Y inexact
    return mag, pending


class _OrderExact:
    """Exact decisions on the noise order statistics (docs/privacy/topk_sampler.md): enclosures of Y_j
    over the uniforms' dyadic cells, refined with fallback words."""

    def __init__(self, n_cells: int, scale: float, words: np.ndarray, seed: NoiseSeed, fkey: int):
        self.n, self.s = int(n_cells), float(scale)
        self.first = [int(w) for w in words.tolist()]
        self.seed, self.fkey = seed, fkey
        self.level, self.extra = 0, {}
        self.exhausted = False
        self._reset()

    def _reset(self) -> None:
        self.prec = _START_PREC + 128 * self.level  # cells gain 64 bits a level
        self.lo, self.hi = [], []  # prefix sums at this precision

    def _cell(self, i: int) -> tuple[int, int]:
        num = self.first[i]
        if self.level:
            ext = self.extra.get(i)
            if ext is None or len(ext) < self.level:
                ext = [int(w) for w in self.seed.raw(self.fkey, 0, i * FALLBACK_WORDS, self.level).tolist()]
                self.extra[i] = ext
            for w in ext[: self.level]:
                num = (num << 64) | w
        return num, 64 * (self.level + 1)

    def escalate(self) -> bool:
        """One more word for every cell and 128 more bits of precision; False once exhausted."""
        if self.level + 1 >= FALLBACK_WORDS:
            self.exhausted = True
            return False
        self.level += 1
        self._reset()
        return True

    def interval(self, j: int):
        """``[lo, hi]`` enclosing ``Y_j`` (mpf; hi may be +inf while a cell touches 0)."""
        ctx = _mp()
        ctx.prec = self.prec
        while len(self.lo) <= j:
            i = len(self.lo)
            num, bits = self._cell(i)
            den = ctx.mpf(self.n - i)
            e_lo = -ctx.log(ctx.ldexp(ctx.mpf(num + 1), -bits))
            e_hi = ctx.inf if num == 0 else -ctx.log(ctx.ldexp(ctx.mpf(num), -bits))
            plo, phi = (self.lo[-1], self.hi[-1]) if self.lo else (ctx.zero, ctx.zero)
            self.lo.append(plo + e_lo / den)
            self.hi.append(phi + e_hi / den)
        margin = ctx.ldexp(ctx.mpf(j + 16), 4 - self.prec)
        return self.lo[j] * (1 - margin), self.hi[j] * (1 + margin)

    def _t(self, z: int, ctx):
        """``T(z) = -ln(1 - S(z))`` (decreasing in z; callers allow ``2**(24 - prec)`` relative)."""
        if z <= 0:
            return ctx.inf
        return -ctx.log1p(-self._s(z, ctx))

    def _s(self, z: int, ctx):
        """``S(z) = P(|K| >= z)`` (relative accuracy: mpmath's erfc at the precision)."""
        if z <= 0:
            return ctx.one
        return ctx.erfc((ctx.mpf(z) - 0.5) / (ctx.mpf(self.s) * ctx.sqrt(2)))

    def magnitude(self, j: int, guess: int) -> int:
        """``|K|_j`` exactly (the guess if the cells are exhausted: the stated residual)."""
        while True:
            lo, hi = self.interval(j)
            if hi < _mp().inf:  # start from the enclosure's own float estimate
                y = float((lo + hi) / 2)
                guess = math.floor(-self.s * float(special.ndtri(-math.expm1(-y) / 2.0)) + 0.5) if y > 0 else guess
            z = self._locate(lo, hi, max(0, int(guess)))
            if z is not None:
                return z
            if not self.escalate():
                return max(0, int(guess))

    def _locate(self, lo, hi, z: int):
        ctx = _mp()
        m = ctx.ldexp(ctx.one, 24 - self.prec)
        while True:
            tz = self._t(z, ctx)
            if lo > tz * (1 + m):  # Y > T(z): magnitude below z
                z -= 1
                continue
            if not hi < tz * (1 - m):
                return None
            tz1 = self._t(z + 1, ctx)
            if hi < tz1 * (1 - m):  # Y < T(z + 1): magnitude above z
                z += 1
                continue
            if not lo > tz1 * (1 + m):
                return None
            return z

    def key_above(self, j: int, z: int, key: int, key_bits: int) -> bool | None:
        """Whether ``xi_j`` exceeds every point of ``[key, key + 1] 2**-key_bits`` (True), lies
        below them all (False), or is undecided at the current precision (None)."""
        lo, hi = self.interval(j)
        ctx = _mp()
        m = ctx.ldexp(ctx.one, 24 - self.prec)
        sz, sz1 = self._s(z, ctx), self._s(z + 1, ctx)
        err = ctx.ldexp(sz, 8 - self.prec)  # absolute error of Q below (S(z) >= Q >= S(z + 1))

        def q_at(b):  # xi_j > b iff q_j < Q(b) = S(z) - b (S(z) - S(z + 1)) iff Y < -ln(1 - Q(b))
            return sz - ctx.ldexp(ctx.mpf(b), -key_bits) * (sz - sz1)

        q_hi, q_lo = q_at(key + 1) - err, q_at(key) + err
        if q_hi > 0 and hi < -ctx.log1p(-q_hi) * (1 - m):
            return True
        if q_lo < 1 and lo > -ctx.log1p(-q_lo) * (1 + m):
            return False
        return None


def _tie_keys(seed: NoiseSeed, tkey: int, rows: np.ndarray, cols: np.ndarray) -> list[int]:
    """The full 512-bit tie keys of signal cells (only those tied at the boundary)."""
    out = []
    for r, c in zip(rows.tolist(), cols.tolist()):
        words = seed.raw(tkey, int(r), int(c) * TIE_WORDS, TIE_WORDS).tolist()
        out.append(sum(int(w) << (64 * (TIE_WORDS - 1 - i)) for i, w in enumerate(words)))
    return out


def _noise_above_signal(order: _OrderExact, j: int, z: int, key: int) -> bool:
    """Exact ``xi_j > xi_signal`` for a signal key of ``64 * TIE_WORDS`` bits."""
    total = 64 * TIE_WORDS
    for words in range(1, TIE_WORDS + 1):
        prefix = key >> (total - 64 * words)
        for _ in range(2):
            got = order.key_above(j, z, prefix, 64 * words)
            if got is not None:
                return got
            if not order.escalate():
                break
    # residual: undecided after every bit of the key and every fallback word
    return False


def lattice_top_k2(
    support: np.ndarray,
    u_support: np.ndarray,
    n_features: int,
    k: int,
    noise: LatticeNoise,
    seed: NoiseSeed,
    purpose: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float-safe ``top_{k^2}(u u^T + G)`` (docs/privacy/topk_sampler.md) as ``(rows, cols, values)``.

    Parameters
    ----------
    support : array of int
        S = supp(u), distinct indices in [0, d).
    u_support : array of float
        The entries of u on ``support``.
    n_features : int
        d (at most 9.4e7, so that every cell count is an exact float).
    k : int
        Keeps the k^2 largest cells.
    noise : LatticeNoise
        The ``"gaussian"`` law and its lattice (the mechanism's).
    seed, purpose
        The noise streams: ``purpose/signal``, ``/tie``, ``/order``, ``/cells``, ``/signs``.

    Returns
    -------
    rows, cols : ndarray of int
    values : ndarray of float
        Lattice points ``z gamma`` (never -0.0), in no particular order.
    """
    if noise.law != "gaussian":
        raise ValueError(f"the projector's law is 'gaussian', got {noise.law!r}")
    support = np.asarray(support, dtype=np.int64)
    u_support = np.asarray(u_support, dtype=np.float64)
    d = int(n_features)
    if not 1 <= d or d * d >= 1 << 53:
        raise ValueError(f"n_features must lie in [1, 9.4e7], got {n_features!r}")
    lat = noise.lattice
    kk = min(int(k) ** 2, d * d)
    s_sig = support.size
    field = LatticeField(seed, f"{purpose}/signal", noise)
    tkey = seed.key(f"{purpose}/tie")
    # signal block, in slices, keeping every cell that can still be among the top kk by
    # (|z|, first tie word): a superset of the signal cells of the final selection
    keep_r = np.empty(0, np.int64)
    keep_c = np.empty(0, np.int64)
    keep_z = np.empty(0)
    keep_w = np.empty(0, np.uint64)
    n_sig = s_sig * s_sig
    for start in range(0, n_sig, SIGNAL_SLICE):
        cnt = min(SIGNAL_SLICE, n_sig - start)
        a, b = np.divmod(np.arange(start, start + cnt), s_sig)
        rows, cols = support[a], support[b]
        z = lat.to_units(field.at(rows, cols, u_support[a] * u_support[b]))
        w = chacha20_words(seed, tkey, rows.astype(np.uint64), (cols * TIE_WORDS).astype(np.uint64))
        keep_r = np.concatenate([keep_r, rows])
        keep_c = np.concatenate([keep_c, cols])
        keep_z = np.concatenate([keep_z, z])
        keep_w = np.concatenate([keep_w, w])
        if keep_z.size > kk:
            order = np.lexsort((keep_w, np.abs(keep_z)))[::-1]  # descending by (|z|, w)
            cut = order[kk - 1]
            az, wc = abs(keep_z[cut]), keep_w[cut]
            sel = (np.abs(keep_z) > az) | ((np.abs(keep_z) == az) & (keep_w >= wc))
            keep_r, keep_c, keep_z, keep_w = keep_r[sel], keep_c[sel], keep_z[sel], keep_w[sel]
    # the K_n largest noise cells: exact magnitudes, uniform distinct cells, uniform signs
    n_noise = d * d - n_sig
    kn = min(kk, n_noise)
    order_exact = None  # the exact path's state, built on first need (rare)
    if kn > 0:
        words = seed.raw(seed.key(f"{purpose}/order"), 0, 0, kn)
        mags, pending = _order_fast(n_noise, noise.scale, words)

        def exact() -> _OrderExact:
            return order_exact or _OrderExact(n_noise, noise.scale, words, seed,
                                              seed.key(f"{purpose}/order" + FALLBACK_SUFFIX))

        if pending.any():
            order_exact = exact()
            for j in np.flatnonzero(pending).tolist():
                mags[j] = order_exact.magnitude(j, int(mags[j]) if np.isfinite(mags[j]) else 0)
        cells = sample_distinct_cells(seed, seed.key(f"{purpose}/cells"), 0, kn, d, support)
        negative = (seed.raw(seed.key(f"{purpose}/signs"), 0, 0, kn) >> np.uint64(63)).astype(bool)
        noise_r, noise_c = np.divmod(cells, d)
        noise_z = np.where(negative, -mags, mags)
    else:
        mags = noise_z = np.empty(0)
        noise_r = noise_c = np.empty(0, np.int64)
    # merge by (|value|, key): cells above the boundary level are in, below are out; the
    # boundary level is ordered exactly (noise by rank, signal by key, mixed by _OrderExact)
    all_abs = np.concatenate([np.abs(keep_z), mags])
    n_keep = keep_z.size
    chosen = np.ones(all_abs.size, dtype=bool)
    if all_abs.size > kk:
        level = -np.partition(-all_abs, kk - 1)[kk - 1]
        chosen = all_abs > level
        room = kk - int(chosen.sum())
        tied = np.flatnonzero(all_abs == level)
        if tied.size == room:
            chosen[tied] = True
        else:
            sig = tied[tied < n_keep]
            noi = tied[tied >= n_keep]  # ascending rank: descending key
            keymap = dict(zip(sig.tolist(), _tie_keys(seed, tkey, keep_r[sig], keep_c[sig])))
            sig = sorted(keymap, key=lambda x: (keymap[x], -x), reverse=True)  # key desc, then index
            if noi.size and sig:
                order_exact = exact()
            a = b = 0
            z_level = int(level)
            for _ in range(room):
                take_noise = b >= len(sig) or (
                    a < noi.size and _noise_above_signal(order_exact, int(noi[a]) - n_keep, z_level, keymap[sig[b]]))
                if take_noise:
                    chosen[noi[a]] = True
                    a += 1
                else:
                    chosen[sig[b]] = True
                    b += 1
    rows = np.concatenate([keep_r, noise_r])[chosen]
    cols = np.concatenate([keep_c, noise_c])[chosen]
    values = lat.from_units(np.concatenate([keep_z, noise_z])[chosen])
    return rows, cols, values
