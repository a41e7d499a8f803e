"""The masked Gram release, exactly: ``round(A (I + eta N)(I + eta N)^T A^T)`` for a real Gaussian N.

The masking output of subsample-and-aggregate (MS25 Algorithm 3 line 11, after Ashtiani-Liaw
2022) needs N *continuous*: drawn from a countable set, N would make the outputs reachable
from two neighbouring datasets disjoint. :func:`masked_gram` releases ``grid_round(S)``,
``S = G G^T``, ``G = A (I + eta N)``, entry by entry, with N real standard Gaussians
(Box-Muller over keyed bit strings, enclosed in mpmath intervals) and ``grid_round`` one
fixed monotone rounding to ``GRID_BITS`` significant bits. Every rounding is decided exactly
(a rigorous float error bound, else interval arithmetic refined level by level), so the
release is exactly a post-processing of the continuous mechanism: its privacy carries over.
The law depends on A only through ``A A^T``; an :class:`ExactGram` is factored exactly.
Residual: an entry undecided after ``MAX_LEVELS`` levels (below 1e-300), and run time,
which depends on the data.

Proofs and the error bounds: docs/privacy/masking.md.
"""

from __future__ import annotations

import math

import numpy as np

from dpdist.privacy.noise.lattice import FALLBACK_SUFFIX, FALLBACK_WORDS
from dpdist.privacy.noise.streams import NoiseSeed

__all__ = ["ExactGram", "GRID_BITS", "GRID_MIN_EXPONENT", "MAX_LEVELS", "grid_round", "masked_gram"]

#: Significant bits of the release grid: relative spacing 2**-29 to 2**-30 (about 1e-9).
GRID_BITS = 30
#: Below 2**GRID_MIN_EXPONENT the grid is absolute (spacing 2**(GRID_MIN_EXPONENT - GRID_BITS + 1)).
GRID_MIN_EXPONENT = -1000
#: Refinement levels of the exact path (64 more bits a uniform each); bounded by the fallback stream.
MAX_LEVELS = FALLBACK_WORDS - 1
#: Bits of each uniform before any refinement (two 64-bit words).
FIRST_BITS = 128
_U = 2.0**-53
_TINY = 2.0**-1074


def _round_scaled(man: int, exp: int) -> float:
    """``grid_round(man * 2**exp)`` exactly, for integers man and exp."""
    if man == 0:
        return 0.0
    e = exp + abs(man).bit_length() - 1  # floor(log2 |x|)
    q = max(e, GRID_MIN_EXPONENT) - (GRID_BITS - 1)  # spacing 2**q
    sh = q - exp
    # y = floor(x / 2**q + 1/2): round to nearest, halves up (>> floors, negatives included)
    y = man << -sh if sh <= 0 else (man + (1 << (sh - 1))) >> sh
    try:
        return math.ldexp(float(y), q)  # |y| <= 2**GRID_BITS: exact
    except OverflowError:
        return math.copysign(math.inf, y)


def _round_float(x: float) -> float:
    if not math.isfinite(x):
        return x
    num, den = float(x).as_integer_ratio()
    return _round_scaled(num, 1 - den.bit_length())  # den is a power of two


def _round_raw(raw) -> float:
    """:func:`grid_round` of an mpmath raw mpf ``(sign, man, exp, bc)``; infinities as floats."""
    sign, man, exp, _ = raw
    if not man:
        if exp == 0:  # zero
            return 0.0
        return -math.inf if sign else math.inf  # mpmath's special values: +-inf (nan never arises)
    return _round_scaled(-man if sign else man, exp)


def grid_round(values) -> np.ndarray:
    """The release grid: each value to the nearest number with a :data:`GRID_BITS`-bit significand
    (halves up; spacing ``2**(max(floor(log2|x|), GRID_MIN_EXPONENT) - GRID_BITS + 1)``);
    +-inf past the largest float. Exact on floats, monotone non-decreasing, data-independent."""
    arr = np.asarray(values, dtype=np.float64)
    return np.array([_round_float(float(x)) for x in arr.ravel()], dtype=np.float64).reshape(arr.shape)


class _Normals:
    """Enclosures of N's entries at a level: interval Box-Muller over dyadic cells of the uniforms."""

    def __init__(self, seed: NoiseSeed, purpose: str, d: int, first_bits: int):
        from mpmath.ctx_iv import MPIntervalContext

        self.d, self.pairs = d, (d * d + 1) // 2
        self.first_bits = int(first_bits)
        self.seed, self.fkey = seed, seed.key(purpose + FALLBACK_SUFFIX)
        key = seed.key(purpose)
        self.words = [seed.raw(key, c, 0, 2 * self.pairs).reshape(-1, 2) for c in (0, 1)]
        self.extra: dict = {}
        self.iv = MPIntervalContext()
        self.level = -1
        self.cells: list = []

    def bits(self, level: int) -> int:
        return self.first_bits + 64 * level

    def _prefix(self, p: int, c: int, bits: int) -> int:
        """The first ``bits`` bits of uniform (p, c) as an integer."""
        w = self.words[c][p]
        num, have = (int(w[0]) << 64) | int(w[1]), 128
        k = 0
        while have < bits:
            ext = self.extra.get((p, c, k))
            if ext is None:
                ext = self.extra[(p, c, k)] = int(self.seed.raw(self.fkey, c, p * FALLBACK_WORDS + k, 1)[0])
            num, have, k = (num << 64) | ext, have + 64, k + 1
        return num >> (have - bits)

    def at(self, level: int) -> list:
        """The d*d enclosures (row-major) at ``level``, at precision bits + 64."""
        if level != self.level:
            ivc = self.iv
            bits = self.bits(level)
            ivc.prec = bits + 64
            two_pi = 2 * ivc.pi
            one = ivc.mpf(1)
            cells = []
            for p in range(self.pairs):
                a, b = self._prefix(p, 0, bits), self._prefix(p, 1, bits)
                v1 = ivc.ldexp(ivc.mpf([a, a + 1]), -bits)  # exact: the dyadic cells
                u2 = ivc.ldexp(ivc.mpf([b, b + 1]), -bits)
                r = ivc.sqrt(-2 * ivc.log(one - v1))
                t = two_pi * u2
                cells.append(r * ivc.cos(t))
                cells.append(r * ivc.sin(t))
            self.cells, self.level = cells[: self.d * self.d], level
        return self.cells


def _mid_radius(cells: list, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Nearest floats of the midpoints and rounded-up radii (inf where an enclosure is unbounded)."""
    mid = np.empty(d * d)
    rad = np.empty(d * d)
    for i, c in enumerate(cells):
        m = float(c.mid)
        mid[i] = m
        if not math.isfinite(m):
            mid[i], rad[i] = 0.0, math.inf
            continue
        lo, hi = c.a - m, c.b - m  # intervals: their .b bounds |N - m| from above
        r = max(float(abs(lo).b), float(abs(hi).b))
        rad[i] = r * (1.0 + 2.0**-50) + _TINY
    return mid.reshape(d, d), rad.reshape(d, d)


def _fast(am: np.ndarray, ra: np.ndarray, eta: float, nm: np.ndarray, rn: np.ndarray):
    """Float path: the upper triangle's decided values (NaN where undecided). ``|A - am| <= ra``."""
    d = am.shape[0]
    gam = d * _U / (1.0 - d * _U)
    with np.errstate(over="ignore", invalid="ignore"):
        aa, an = np.abs(am), np.abs(nm)
        p = am @ nm
        q = eta * p
        gm = am + q
        # |A N - am nm| <= |am| rN + rA |nm| + rA rN, and fl(am nm) errs by gamma_d |am||nm|
        an_err = aa @ rn + ra @ an + ra @ rn + gam * (aa @ an) + d * _TINY
        rg = 2.0 * (ra + 2 * _U * np.abs(gm) + 2 * _U * np.abs(q) + abs(eta) * an_err + _TINY)
        sm = gm @ gm.T
        ag = np.abs(gm)
        rs = 2.0 * (gam * (ag @ ag.T) + ag @ rg.T + rg @ ag.T + rg @ rg.T + d * _TINY) + _TINY
        lo = np.nextafter(sm - rs, -np.inf)
        hi = np.nextafter(sm + rs, np.inf)
    out = np.full((d, d), np.nan)
    for i in range(d):
        for j in range(i, d):
            a, b = float(lo[i, j]), float(hi[i, j])
            if math.isfinite(a) and math.isfinite(b):
                ra_ = _round_float(a)
                if ra_ == _round_float(b):
                    out[i, j] = ra_
    return out


class _Exact:
    """Exact path: rows of G and entries of S in interval arithmetic, at a level."""

    def __init__(self, factor: "_Factor | ExactGram", eta: float, normals: _Normals):
        self.factor, self.eta, self.normals = factor, float(eta), normals
        self.level, self.rows = None, {}

    def _row(self, i: int, level: int):
        if level != self.level:
            self.level, self.rows = level, {}
        row = self.rows.get(i)
        if row is None:
            ivc, d = self.normals.iv, self.normals.d
            cells = self.normals.at(level)
            ai = self.factor.enclosure(ivc)[i]
            eta = ivc.mpf(self.eta)
            row = []
            for col in range(d):
                acc = ivc.mpf(0)
                for m in range(d):
                    acc += ai[m] * cells[m * d + col]
                row.append(ai[col] + eta * acc)
            self.rows[i] = row
        return row

    def entry(self, i: int, j: int, level: int):
        """``(decided, value)`` of grid_round(S_ij) at ``level``."""
        ivc = self.normals.iv
        gi, gj = self._row(i, level), self._row(j, level)
        acc = ivc.mpf(0)
        for x, y in zip(gi, gj):
            acc += x * y
        lo, hi = acc._mpi_
        rl, rh = _round_raw(lo), _round_raw(hi)
        if rl == rh:
            return True, rl
        mid = acc.mid._mpi_[0]
        return False, _round_raw(mid)


class _Factor:
    """A as exact float entries (``radius`` 0)."""

    def __init__(self, a: np.ndarray):
        self.a, self.shape = a, a.shape
        self._cache: tuple | None = None

    def mid_radius(self, ivc) -> tuple[np.ndarray, np.ndarray]:
        return self.a, np.zeros_like(self.a)

    def enclosure(self, ivc) -> list:
        if self._cache is None or self._cache[0] != ivc.prec:
            self._cache = (ivc.prec, [[ivc.mpf(float(x)) for x in row] for row in self.a])
        return self._cache[1]


class ExactGram:
    """A symmetric positive-definite matrix given exactly: ``numerators * 2**exponent / denominator``
    (Python integers). :func:`masked_gram` takes its Cholesky factor, enclosed in interval
    arithmetic at the working precision (doubled until the enclosure certifies every pivot
    positive), so that ``A A^T`` is this matrix exactly."""

    def __init__(self, numerators, exponent: int, denominator: int):
        self.numerators = [[int(x) for x in row] for row in numerators]
        self.exponent, self.denominator = int(exponent), int(denominator)
        d = len(self.numerators)
        if d < 1 or any(len(row) != d for row in self.numerators) or self.denominator <= 0:
            raise ValueError("an ExactGram needs a non-empty square integer matrix and a positive denominator")
        if any(self.numerators[i][j] != self.numerators[j][i] for i in range(d) for j in range(i)):
            raise ValueError("an ExactGram must be symmetric")
        self._cache: tuple | None = None

    @property
    def shape(self) -> tuple[int, int]:
        d = len(self.numerators)
        return d, d

    def _cholesky(self, ivc, prec: int):
        from mpmath.ctx_iv import MPIntervalContext

        c = MPIntervalContext()
        c.prec = prec
        d = self.shape[0]
        den = c.mpf(self.denominator)
        a = [[c.ldexp(c.mpf(x), self.exponent) / den for x in row] for row in self.numerators]
        low = [[c.mpf(0)] * d for _ in range(d)]
        for j in range(d):
            piv = a[j][j]
            for m in range(j):
                piv -= low[j][m] ** 2
            if not piv.a > 0:  # the enclosure does not certify the pivot positive
                return None
            low[j][j] = c.sqrt(piv)
            for i in range(j + 1, d):
                acc = a[i][j]
                for m in range(j):
                    acc -= low[i][m] * low[j][m]
                low[i][j] = acc / low[j][j]
        return [[ivc.mpf(x) for x in row] for row in low]  # endpoints kept exactly

    def enclosure(self, ivc) -> list:
        """Rows of an enclosure of the exact Cholesky factor (``ivc``'s precision or more)."""
        if self._cache is None or self._cache[0] != ivc.prec:
            prec = ivc.prec
            while (low := self._cholesky(ivc, prec)) is None:
                if prec >= _MAX_CHOLESKY_PREC:
                    raise ValueError("the ExactGram is not positive definite")
                prec *= 2
            self._cache = (ivc.prec, low)
        return self._cache[1]

    def mid_radius(self, ivc) -> tuple[np.ndarray, np.ndarray]:
        """Nearest floats of the factor's enclosure midpoints and rounded-up radii."""
        cells = [x for row in self.enclosure(ivc) for x in row]
        return _mid_radius(cells, self.shape[0])


#: Precision cap of the exact Cholesky factor: float entries span at most 2**2100, so a
#: positive-definite ExactGram certifies far below it.
_MAX_CHOLESKY_PREC = 1 << 16


def masked_gram(factor, eta: float, seed: NoiseSeed, purpose: str, *, fast: bool = True,
                first_bits: int = FIRST_BITS) -> np.ndarray:
    """``grid_round(A (I + eta N)(I + eta N)^T A^T)`` for N a d x d matrix of real standard
    Gaussians keyed by ``(seed, purpose)`` (docs/privacy/masking.md).

    Parameters
    ----------
    factor : ndarray (d, d) or ExactGram
        A as finite floats, taken as exact reals; or an :class:`ExactGram` C, for which A is the
        exact Cholesky factor of C (enclosed), so that the release is the mechanism on C itself.
        The law depends on A only through A A^T.
    eta : float
        The masking scale (finite, >= 0).
    seed, purpose
        The noise stream.
    fast : bool, default True
        Try the float path first. False decides every entry in interval arithmetic; the result is
        the same (a test hook: both compute the same function).
    first_bits : int, default 128
        Bits of each uniform before refinement. Fewer bits change nothing but the work done (the
        uniforms are the same reals); a test hook for the refinement.

    Returns
    -------
    ndarray (d, d)
        Symmetric; every entry a grid value (or +-inf past the largest float).
    """
    if isinstance(factor, ExactGram):
        fac = factor
    else:
        a = np.asarray(factor, dtype=np.float64)
        if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 1:
            raise ValueError(f"factor must be a non-empty square matrix, got shape {a.shape}")
        if not np.isfinite(a).all():
            raise ValueError("factor must be finite")
        fac = _Factor(a)
    eta = float(eta)
    if not (math.isfinite(eta) and eta >= 0.0):
        raise ValueError(f"eta must be finite and >= 0, got {eta!r}")
    if not 1 <= int(first_bits) <= FIRST_BITS:
        raise ValueError(f"first_bits must be in [1, {FIRST_BITS}], got {first_bits!r}")
    d = fac.shape[0]
    normals = _Normals(seed, purpose, d, first_bits)
    out = np.full((d, d), np.nan)
    if fast:
        cells = normals.at(0)
        nm, rn = _mid_radius(cells, d)
        am, ra = fac.mid_radius(normals.iv)
        out = _fast(am, ra, eta, nm, rn)
    exact = _Exact(fac, eta, normals)
    level = 0  # only grows: a finer level's enclosures are as valid for every entry
    for i in range(d):
        for j in range(i, d):
            if not np.isnan(out[i, j]):
                continue
            while True:
                decided, value = exact.entry(i, j, level)
                if decided or level == MAX_LEVELS:
                    break  # after MAX_LEVELS: the midpoint's rounding (the stated residual)
                level += 1
            out[i, j] = value
    iu = np.triu_indices(d, 1)
    out[(iu[1], iu[0])] = out[iu]
    return out
