"""Float-safe noise: released values on a public power-of-two lattice, noise sampled exactly.

Guarantee. A value ``v`` is released as ``f(rint(v / gamma) + K)``, a fixed function of an
integer, with ``gamma = 2**e`` public and ``K`` drawn exactly from the rounded Laplace, rounded
Gaussian or rounded truncated Laplace law: post-processing of the continuous mechanism on
the integer ``rint(v / gamma)``, so it is ``Delta_Z / s``-DP, ``Delta_Z^2 / (2 s^2)``-zCDP or
the truncated Laplace's (epsilon, delta), accounted by the continuous mechanisms' events.
Float outputs carry no low-order bits that identify the input (Mironov, CCS 2012).

Sensitivity (:meth:`Lattice.sensitivity_units`): ``|v - v'| <= Delta`` gives
``Delta_Z = floor(Delta / gamma) + 1``; for n coordinates, ``+ n`` in L1 and ``+ sqrt(n)`` in L2.

Deviation: rounded continuous laws instead of the discrete Laplace and discrete Gaussian
(the same epsilon and rho, and one 64-bit word a sample instead of rejection sampling).
Residuals: fallback-word exhaustion (below ``2**-1000`` an entry for the unbounded laws,
added to delta), the ``2**-46`` accuracy trusted of ``log``/``ndtri``, ChaCha20 as a PRF.

Proofs, the exact sampler and the stream layout: docs/privacy/lattice.md.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
from scipy import special

from dpdist.privacy.noise.streams import NoiseSeed, chacha20_words

__all__ = [
    "EXHAUSTION_DELTA_PER_ENTRY",
    "FALLBACK_SUFFIX",
    "FALLBACK_WORDS",
    "LATTICE_BITS",
    "LAWS",
    "Lattice",
    "LatticeField",
    "LatticeNoise",
    "sample_units",
]

#: Noise scales are 2**LATTICE_BITS .. 2**(LATTICE_BITS + 1) lattice units.
LATTICE_BITS = 28
#: Fallback words reserved for each entry (its own block of the fallback stream).
FALLBACK_WORDS = 64
#: The fallback stream's purpose is the main purpose plus this suffix (a NUL cannot occur in
#: the printable purpose names dpdist uses, so no main purpose can collide with it).
FALLBACK_SUFFIX = "\x00fallback"
#: Per-entry probability that an unbounded-law entry exhausts its fallback block (see
#: docs/privacy/lattice.md): (2**-62)**(FALLBACK_WORDS - 2), written as a bound.
EXHAUSTION_DELTA_PER_ENTRY = 2.0**-1000
#: The supported laws.
LAWS = ("laplace", "gaussian", "bounded-laplace")
#: Lattice values are clamped to +- 2**CLAMP_BITS lattice units.
CLAMP_BITS = 1000

#: Assumed relative accuracy of numpy.log and scipy.special.ndtri (64 ulp; measured errors are
#: below 4 ulp, tests/privacy/test_lattice.py).
_REL = 2.0**-46
#: Entries with W below this (probability 2**-23) always take the exact path.
_W_MIN = float(1 << 40)
_MASK63 = np.uint64((1 << 63) - 1)
_SHIFT63 = np.uint64(63)
_TWO63 = 2.0**-63
_TWO64 = 2.0**-64
_SQRT2PI = math.sqrt(2.0 * math.pi)
#: Entries processed together by the vectorised fast path (keeps temporaries in cache).
_BLOCK = 1 << 15

_LOCAL = threading.local()


# --------------------------------------------------------------------------------------
# the lattice
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lattice:
    """The public lattice ``gamma Z`` with ``gamma = 2**exponent``.

    Parameters
    ----------
    exponent : int
        ``gamma = 2**exponent``; between -1000 and 900 so that every product ``z * gamma``
        with ``|z| < 2**53`` is an exact float and clamped values never overflow.
    """

    exponent: int

    def __post_init__(self) -> None:
        if isinstance(self.exponent, bool) or not isinstance(self.exponent, (int, np.integer)):
            raise ValueError(f"lattice exponent must be an int, got {self.exponent!r}")
        if not -1000 <= int(self.exponent) <= 900:
            raise ValueError(f"lattice exponent must lie in [-1000, 900], got {self.exponent}")
        object.__setattr__(self, "exponent", int(self.exponent))

    @classmethod
    def for_scale(cls, scale: float, bits: int = LATTICE_BITS) -> "Lattice":
        """``gamma = 2**(floor(log2(scale)) - bits)``: the scale is ``2**bits .. 2**(bits+1)`` units."""
        scale = float(scale)
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"noise scale must be finite and > 0, got {scale!r}")
        return cls(math.frexp(scale)[1] - 1 - int(bits))

    @property
    def gamma(self) -> float:
        """The lattice step ``2**exponent``."""
        return math.ldexp(1.0, self.exponent)

    def units(self, x: float) -> float:
        """``x / gamma`` (exact: division by a power of two)."""
        return math.ldexp(float(x), -self.exponent)

    def sensitivity_units(self, sensitivity: float, *, norm: str = "linf", coordinates: int = 1) -> float:
        """Sensitivity on the lattice of ``rint(v / gamma)`` given ``|v - v'| <= sensitivity``.

        ``norm="linf"`` (one coordinate, or a per-coordinate bound):
        ``floor(Delta / gamma) + 1``. ``"l1"``: ``floor(Delta_1 / gamma) + coordinates``.
        ``"l2"``: ``Delta_2 / gamma + sqrt(coordinates)``, rounded up. ``coordinates`` counts
        the coordinates that may change between neighbours (each rounding moves by < 1).
        """
        sensitivity = float(sensitivity)
        if not (math.isfinite(sensitivity) and sensitivity >= 0):
            raise ValueError(f"sensitivity must be finite and >= 0, got {sensitivity!r}")
        n = int(coordinates)
        if n < 1:
            raise ValueError(f"coordinates must be >= 1, got {coordinates!r}")
        d = self.units(sensitivity)  # exact
        if norm == "linf":
            return float(math.floor(d) + 1)
        if norm == "l1":
            return float(math.floor(d) + n)
        if norm == "l2":
            return math.nextafter(math.nextafter(d + math.sqrt(n), math.inf), math.inf)
        raise ValueError(f"norm must be 'linf', 'l1' or 'l2', got {norm!r}")

    def to_units(self, values) -> np.ndarray:
        """``rint(clamp(values) / gamma)`` as float64 integers (NaN -> 0, +-inf -> the clamp)."""
        with np.errstate(over="ignore"):  # overflow -> inf -> the clamp (same as exact)
            v = np.ldexp(np.asarray(values, dtype=np.float64), -self.exponent)
        lim = math.ldexp(1.0, CLAMP_BITS)
        return np.rint(np.nan_to_num(np.clip(v, -lim, lim), nan=0.0))

    def from_units(self, z) -> np.ndarray:
        """``fl(gamma * fl(z)) + 0.0``: lattice units back to values (exact for |z| < 2**53)."""
        with np.errstate(over="ignore"):  # beyond the float range: +-inf, a fixed function of z
            return np.ldexp(np.asarray(z, dtype=np.float64), self.exponent) + 0.0

    def contains(self, values) -> np.ndarray:
        """True where ``values`` is a finite lattice point other than ``-0.0``."""
        v = np.asarray(values, dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            u = np.ldexp(v, -self.exponent)
            ok = np.isfinite(u) & (np.rint(u) == u)
        return ok & ~((v == 0) & np.signbit(v))

    def to_dict(self) -> dict:
        return {"exponent": self.exponent, "gamma": self.gamma}


# --------------------------------------------------------------------------------------
# exact resolution (rare entries): dyadic cells against boundaries, in mpmath
# --------------------------------------------------------------------------------------


def _mp():
    """A thread-local mpmath context (mpmath's global ``mp`` is shared by threads)."""
    ctx = getattr(_LOCAL, "mp", None)
    if ctx is None:
        import mpmath

        ctx = _LOCAL.mp = mpmath.MPContext()
    return ctx


def _boundary(law: str, scale: float, z: int, ctx):
    """``b(z)``: magnitude z holds for ``b(z) < P <= b(z - 1)`` (decreasing in z)."""
    if law == "gaussian":  # P = U / 2 = upper tail at |x| = z + 1/2
        return ctx.erfc((ctx.mpf(z) + 0.5) / (ctx.mpf(scale) * ctx.sqrt(2))) / 2
    return ctx.exp(-(ctx.mpf(z) + 0.5) / ctx.mpf(scale))  # Laplace: P = U = exp(-x / s)


def _compare(num: int, bits: int, law: str, scale: float, z: int) -> int:
    """Sign of ``num * 2**-bits - b(z)``, decided exactly (raising precision as needed).

    ``b(z)`` is irrational or transcendental at every z (``exp`` of a nonzero rational,
    ``erfc`` at a nonzero point... or 1/2 exactly never: ``z + 1/2 != 0``), so it never equals a
    dyadic rational and the loop ends.
    """
    if z < 0:
        return -1  # b(-1) >= sup P
    ctx = _mp()
    prec = max(bits, num.bit_length()) + 64
    for _ in range(12):
        ctx.prec = prec
        q = ctx.ldexp(ctx.mpf(num), -bits)  # exact: prec exceeds num's bit length
        b = _boundary(law, scale, z, ctx)
        gap = q - b
        if abs(gap) > ctx.ldexp(abs(b), 24 - prec):  # mpmath's error is a few ulp of b
            return 1 if gap > 0 else -1
        prec *= 2
    raise RuntimeError("exact comparison did not converge (internal error)")


def _guess(law: str, scale: float, num: int, bits: int) -> int:
    """Float estimate of the magnitude at ``P = num 2**-bits`` (a starting point only)."""
    lp = math.log(num) - bits * math.log(2.0)  # ln P, fine for huge ints
    if law == "gaussian":
        if lp > -700:
            x = -special.ndtri(math.exp(lp))
        else:  # Mills ratio: ln Q(x) ~ -x^2/2 - ln(x sqrt(2 pi))
            x = math.sqrt(-2.0 * lp)
        return max(0, int(math.floor(scale * x + 0.5)))
    return max(0, int(math.floor(-scale * lp + 0.5)))


def _locate(law: str, scale: float, num: int, bits: int, z: int) -> int:
    """The z with ``b(z) < P <= b(z - 1)`` for ``P = num 2**-bits > 0``."""
    while _compare(num, bits, law, scale, z) <= 0:  # P <= b(z): magnitude above z
        z += 1
    while z > 0 and _compare(num, bits, law, scale, z - 1) > 0:  # P > b(z - 1): below
        z -= 1
    return z


def _resolve(law: str, scale: float, W: int, bits: int, words: Iterator[int], budget: int) -> tuple[int, int]:
    """Exact magnitude for the cell ``[W, W + 1) 2**-bits``, refining it with ``words``.

    Returns ``(magnitude, words_used)``. After ``budget`` refinements without a decision (the
    exhaustion residual) the lower end's magnitude is returned.
    """
    num, used = int(W), 0
    z = _guess(law, scale, num, bits) if num > 0 else 0
    while True:
        if num > 0:
            z = _locate(law, scale, num, bits, z)
            if z == 0 or _compare(num + 1, bits, law, scale, z - 1) <= 0:  # hi <= b(z - 1)
                return z, used
        if used >= budget:
            return z, used
        num = (num << 64) | int(next(words))
        bits += 64
        used += 1
        if num > 0 and z == 0:
            z = _guess(law, scale, num, bits)


# --------------------------------------------------------------------------------------
# the vectorised fast path
# --------------------------------------------------------------------------------------


def _fast_magnitudes(law: str, scale: float, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Magnitudes ``floor(x + 1/2)`` at the cells' midpoints and the mask of undecided cells.

    ``W`` holds the 63-bit cell indices (uint64). See docs/privacy/lattice.md for the radius.
    """
    wf = W.astype(np.float64)
    if law == "gaussian":
        p = (wf + 0.5) * _TWO64  # U / 2
        n = -special.ndtri(p)
        x = scale * n
        # |dx/dP| = s / phi(n); cell half-width 2**-65 plus input rounding 2**-52 p, doubled
        radius = np.exp(0.5 * n * n)
        radius *= (2.0**-64 * _SQRT2PI * scale) + (2.0**-51 * _SQRT2PI * scale) * p
        radius += x * _REL
        radius += scale * _REL
    else:
        u = (wf + 0.5) * _TWO63
        x = np.log(u)
        x *= -scale
        # |dx/dU| = s / U; cell half-width 2**-64 plus input rounding 2**-52 u, doubled
        radius = (scale * 2.0**-63) / u
        radius += x * _REL
        radius += scale * (2.0**-51 + _REL)
    r = x + 0.5
    mag = np.floor(r)
    r -= mag  # the fraction, exact (Sterbenz)
    r -= 0.5
    np.abs(r, out=r)
    r += radius  # undecided iff a half-integer lies within the radius
    pending = (r >= 0.5) | (wf < _W_MIN)
    return mag, pending


def _fallback_words(seed: NoiseSeed, key: int, index: int, position: int) -> Iterator[int]:
    """The fallback words of entry (index, position), in order, lazily."""
    base = int(position) * FALLBACK_WORDS
    got = 0
    while got < FALLBACK_WORDS:
        take = 4 if got == 0 else FALLBACK_WORDS - got
        for w in seed.raw(key, int(index), base + got, take).tolist():
            yield w
        got += take


def sample_units(
    noise: "LatticeNoise", words: np.ndarray, fallback: Callable[[int], Iterator[int]]
) -> np.ndarray:
    """Noise in lattice units (float64 integers) from one main word per entry.

    Parameters
    ----------
    noise : LatticeNoise
        The law and its scale.
    words : ndarray of uint64
        The main word of each entry (any shape).
    fallback : callable
        ``fallback(flat_entry) -> iterator of uint64 words``: the entry's own fallback
        words, consumed in order (called only for the rare entries that need them).
    """
    words = np.asarray(words, dtype=np.uint64)
    flat = words.ravel()
    out = np.empty(flat.shape, dtype=np.float64)
    law = noise.law
    base_law = "gaussian" if law == "gaussian" else "laplace"
    bits = 64 if base_law == "gaussian" else 63
    scale = noise.scale
    bound = noise.bound
    todo: list[np.ndarray] = []
    for s in range(0, flat.size, _BLOCK):
        w = flat[s : s + _BLOCK]
        mag, pending = _fast_magnitudes(base_law, scale, w & _MASK63)
        if law == "bounded-laplace":
            pending |= mag > bound
        neg = (w >> _SHIFT63).astype(bool)
        np.negative(mag, out=mag, where=neg)
        out[s : s + _BLOCK] = mag
        idx = np.flatnonzero(pending)
        if idx.size:
            todo.append(idx + s)
    if not todo:
        return (out + 0.0).reshape(words.shape)
    entries = np.concatenate(todo)
    current = flat[entries]
    streams = {int(e): fallback(int(e)) for e in entries.tolist()}
    budget = np.full(entries.size, FALLBACK_WORDS)
    while entries.size:
        # certified attempts consume no fallback words, exactly as on the exact path, so the
        # vectorised redraws below and _exact_entry read the same words in the same order
        mag, pending = _fast_magnitudes(base_law, scale, current & _MASK63)
        done = ~pending & (mag <= bound)
        vals = np.where((current >> _SHIFT63).astype(bool), -mag, mag)
        out[entries[done]] = vals[done]
        for e, w, b in zip(entries[pending].tolist(), current[pending].tolist(), budget[pending].tolist()):
            out[e] = _exact_entry(base_law, bits, scale, bound, int(w), streams[e], int(b))
        redraw = ~pending & ~done  # certified but beyond the bound: next attempt word
        exhausted = redraw & (budget <= 0)
        out[entries[exhausted]] = np.copysign(bound, vals[exhausted])
        redraw &= ~exhausted
        entries, budget = entries[redraw], budget[redraw] - 1
        current = np.array([next(streams[int(e)]) for e in entries.tolist()], dtype=np.uint64)
    return (out + 0.0).reshape(words.shape)


def _exact_entry(
    law: str, bits: int, scale: float, bound: float, word: int, words: Iterator[int], budget: int = FALLBACK_WORDS
) -> float:
    """One entry on the exact path: resolve, and for the bounded law redraw until |K| <= A.

    ``budget`` is the number of fallback words the entry has left.
    """
    while True:
        mag, used = _resolve(law, scale, word & ((1 << 63) - 1), bits, words, budget)
        budget -= used
        value = -float(mag) if word >> 63 else float(mag)
        if mag <= bound:
            return value
        if budget <= 0:  # exhaustion residual of the bounded law: a fixed in-range value
            return math.copysign(float(bound), value)
        word = int(next(words))
        budget -= 1


# --------------------------------------------------------------------------------------
# the law object and the keyed field
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LatticeNoise:
    """An exact integer noise law on a lattice (see docs/privacy/lattice.md for the laws).

    Parameters
    ----------
    law : {"laplace", "gaussian", "bounded-laplace"}
    lattice : Lattice
        The output lattice ``gamma Z``.
    scale : float
        ``s`` in lattice units: Laplace ``b / gamma``, Gaussian ``sigma / gamma``; at most
        ``2**40`` (beyond, the float fast path cannot resolve single lattice units).
    bound : float
        ``A`` (an integer, lattice units) for ``"bounded-laplace"``; ``inf`` otherwise.
    """

    law: str
    lattice: Lattice
    scale: float
    bound: float = math.inf

    def __post_init__(self) -> None:
        if self.law not in LAWS:
            raise ValueError(f"law must be one of {LAWS}, got {self.law!r}")
        scale = float(self.scale)
        if not (math.isfinite(scale) and 0 < scale <= 2.0**40):
            raise ValueError(f"scale (lattice units) must lie in (0, 2**40], got {self.scale!r}")
        object.__setattr__(self, "scale", scale)
        bound = float(self.bound)
        if self.law == "bounded-laplace":
            if not (math.isfinite(bound) and bound >= 0 and bound == math.floor(bound)):
                raise ValueError(f"bounded-laplace needs an integer bound >= 0, got {self.bound!r}")
        elif bound != math.inf:
            raise ValueError(f"bound applies to 'bounded-laplace' only, got {self.bound!r} for {self.law!r}")
        object.__setattr__(self, "bound", bound)

    @classmethod
    def for_scale(cls, law: str, scale: float, *, bound: float | None = None, bits: int = LATTICE_BITS) -> "LatticeNoise":
        """The law with real noise scale ``scale`` on ``Lattice.for_scale(scale)``; a real
        ``bound`` becomes ``ceil(bound / gamma)`` lattice units (never a smaller support)."""
        lat = Lattice.for_scale(scale, bits)
        units_bound = math.inf if bound is None else float(math.ceil(lat.units(bound)))
        return cls(law, lat, lat.units(scale), units_bound)

    def pmf(self, k) -> np.ndarray:
        """Exact probability of ``K = k`` (float64 evaluation of the closed forms)."""
        k = np.abs(np.asarray(k, dtype=np.float64))
        s = self.scale
        if self.law == "gaussian":
            return special.ndtr((k + 0.5) / s) - special.ndtr((k - 0.5) / s)
        p = np.where(k == 0, -np.expm1(-0.5 / s), np.exp(-k / s) * math.sinh(0.5 / s))
        if self.law == "bounded-laplace":
            inside = -math.expm1(-(self.bound + 0.5) / s)  # P(|L| < A + 1/2)
            p = np.where(k <= self.bound, p / inside, 0.0)
        return p

    def cdf(self, k) -> np.ndarray:
        """Exact ``P(K <= k)`` for integers k (float64 evaluation)."""
        k = np.asarray(k, dtype=np.float64)
        s = self.scale
        if self.law == "gaussian":
            return special.ndtr((k + 0.5) / s)
        x = k + 0.5  # continuous Laplace CDF at k + 1/2
        c = np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / s), 1.0 - 0.5 * np.exp(-np.maximum(x, 0) / s))
        if self.law == "bounded-laplace":
            a = self.bound + 0.5
            lo = 0.5 * math.exp(-a / s)
            c = np.clip((c - lo) / (1.0 - 2.0 * lo), 0.0, 1.0)
        return c

    def epsilon(self, sensitivity_units: float) -> float:
        """Pure epsilon of the (unbounded) Laplace law at ``Delta_Z``: ``Delta_Z / s``."""
        if self.law != "laplace":
            raise ValueError(f"epsilon() is the pure-DP cost of the 'laplace' law, not {self.law!r}")
        return float(sensitivity_units) / self.scale

    def rho(self, sensitivity_units: float) -> float:
        """zCDP rho of the Gaussian law at L2 sensitivity ``Delta_Z``: ``Delta_Z^2 / (2 s^2)``."""
        if self.law != "gaussian":
            raise ValueError(f"rho() is the zCDP cost of the 'gaussian' law, not {self.law!r}")
        return float(sensitivity_units) ** 2 / (2.0 * self.scale**2)

    def exhaustion_delta(self) -> float:
        """Per-entry probability bound of the exhaustion residual (docs/privacy/lattice.md)."""
        if self.law != "bounded-laplace":
            return EXHAUSTION_DELTA_PER_ENTRY
        q = math.exp(-(self.bound + 0.5) / self.scale)  # P(|L| >= A + 1/2)
        return min(1.0, EXHAUSTION_DELTA_PER_ENTRY + q ** (FALLBACK_WORDS // 2))

    def to_dict(self) -> dict:
        d = {"law": self.law, "lattice": self.lattice.to_dict(), "scale_units": self.scale,
             "scale": self.scale * self.lattice.gamma}
        if self.law == "bounded-laplace":
            d["bound_units"] = self.bound
        return d


@dataclass(frozen=True)
class LatticeField:
    """Float-safe noise for every entry of a vector or matrix, as a pure function of its address.

    Entry ``(i, j)`` of a matrix is address ``(index=i, position=j)`` under ``purpose``
    (``symmetric=True`` reads ``(i, j)`` with ``i > j`` from ``(j, i)``); entry ``p`` of a
    vector is ``(index=stream, position=p)``. Small, frozen and picklable: it travels inside
    dask graphs.

    Parameters
    ----------
    seed : NoiseSeed
    purpose : str
        The noise's role; its fallback words live under ``purpose + FALLBACK_SUFFIX``.
    noise : LatticeNoise
    symmetric : bool
    stream : int
        Stream index of the vector layout (1-D tiles and scalars).
    """

    seed: NoiseSeed
    purpose: str
    noise: LatticeNoise
    symmetric: bool = False
    stream: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", self.seed.key(self.purpose))
        object.__setattr__(self, "_fkey", self.seed.key(self.purpose + FALLBACK_SUFFIX))

    # -- addresses -> words --------------------------------------------------------------
    def _units_at(self, index: np.ndarray, position: np.ndarray) -> np.ndarray:
        """Noise units at flat addresses: the main words by the vectorised ChaCha20 of
        :func:`~dpdist.privacy.noise.streams.chacha20_words` (equal to ``NoiseSeed.raw``; each block
        computed once), so scattered entries cost one word each, not a stream span."""
        index = np.asarray(index, dtype=np.int64).ravel()
        position = np.asarray(position, dtype=np.int64).ravel()
        words = chacha20_words(self.seed, self._key, index.astype(np.uint64), position.astype(np.uint64))
        fb = lambda e: _fallback_words(self.seed, self._fkey, int(index[e]), int(position[e]))  # noqa: E731
        return sample_units(self.noise, words, fb)

    def units(self, rows, cols) -> np.ndarray:
        """Noise (lattice units) for the block ``rows x cols`` (contiguous index ranges)."""
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        if rows.size == 0 or cols.size == 0:
            return np.zeros((rows.size, cols.size))
        r0, c0, nr, nc = int(rows[0]), int(cols[0]), rows.size, cols.size
        if not self.symmetric:  # one stream span per row
            words = np.stack([self.seed.raw(self._key, r0 + a, c0, nc) for a in range(nr)])
            fb = lambda e: _fallback_words(self.seed, self._fkey, r0 + e // nc, c0 + e % nc)  # noqa: E731
            return sample_units(self.noise, words, fb)
        # symmetric: entry (i, j) is address (min, max): stream spans for the entries on and
        # above the diagonal (per row) and below it (per column)
        words = np.empty((nr, nc), dtype=np.uint64)
        r1, c1 = r0 + nr, c0 + nc
        for a in range(nr):
            start = max(c0, r0 + a)
            if start < c1:
                words[a, start - c0 :] = self.seed.raw(self._key, r0 + a, start, c1 - start)
        for b in range(nc):
            start = max(r0, c0 + b + 1)
            if start < r1:
                words[start - r0 :, b] = self.seed.raw(self._key, c0 + b, start, r1 - start)

        def fb(e: int):
            i, j = r0 + e // nc, c0 + e % nc
            return _fallback_words(self.seed, self._fkey, min(i, j), max(i, j))

        return sample_units(self.noise, words, fb)

    def vector_units(self, start: int, count: int) -> np.ndarray:
        """Noise (lattice units) for positions ``start .. start + count - 1`` of ``stream``."""
        words = self.seed.raw(self._key, self.stream, int(start), int(count))
        fb = lambda e: _fallback_words(self.seed, self._fkey, self.stream, int(start) + e)  # noqa: E731
        return sample_units(self.noise, words, fb)

    # -- releases ------------------------------------------------------------------------
    def __call__(self, tile_values, tile_index=()) -> np.ndarray:
        """Released values of a tile: ``f(rint(v / gamma) + K)``.

        ``tile_index`` is the tile's offset: ``(row0, col0)`` for a 2-D tile, ``(start,)`` or
        ``start`` for a 1-D tile (positions of ``stream``), ``()`` for a scalar (position 0).
        """
        v = np.asarray(tile_values, dtype=np.float64)
        off = (tile_index,) if np.isscalar(tile_index) else tuple(tile_index)
        if v.ndim == 2:
            r0, c0 = (int(x) for x in off)
            k = self.units(np.arange(r0, r0 + v.shape[0]), np.arange(c0, c0 + v.shape[1]))
        elif v.ndim <= 1:
            start = int(off[0]) if off else 0
            k = self.vector_units(start, max(v.size, 1))[: v.size].reshape(v.shape)
        else:
            raise ValueError(f"tiles are scalars, vectors or matrices, got shape {v.shape}")
        lat = self.noise.lattice
        return lat.from_units(lat.to_units(v) + k)

    def at(self, rows, cols, values) -> np.ndarray:
        """Released values at scattered matrix entries ``(rows[..], cols[..])``."""
        rows, cols = np.broadcast_arrays(np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))
        if self.symmetric:
            rows, cols = np.minimum(rows, cols), np.maximum(rows, cols)
        k = self._units_at(rows, cols).reshape(rows.shape)
        lat = self.noise.lattice
        return lat.from_units(lat.to_units(values) + k)
