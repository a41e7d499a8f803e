"""Certified float evaluation of the values of the lazy selection's noise tree
(:mod:`dpdist.privacy.noise.lazy_selection`).

Each function returns an interval that provably holds the exact value (a node's uniform, its
minimum q, or the rounded Laplace magnitude ``floor(-s ln q + 1/2)``); where an interval is too
wide to decide a comparison, the caller decides it exactly in mpmath's interval arithmetic
(:func:`_iv`, :func:`_floor_half`). Error bounds: docs/privacy/lazy_selection.md.
"""

from __future__ import annotations

import threading

import numpy as np

#: Relative error bound of the float evaluation of one tree step (docs/privacy/lazy_selection.md).
_REL_STEP = 2.0**-44
#: Relative error bound of x = -s ln q in float64 (log: 2**-46, product: 2**-53).
_REL_X = 2.0**-45
_TWO53 = 2.0**-53
_LOCAL = threading.local()


def _iv():
    ctx = getattr(_LOCAL, "iv", None)
    if ctx is None:
        from mpmath.ctx_iv import MPIntervalContext

        ctx = _LOCAL.iv = MPIntervalContext()
    return ctx


def _cell(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float bounds ``[lo, hi]`` of the real uniform of a word: its 53-bit cell (the uniform of
    an internal node is the word's 64 bits, that of a leaf its top 63 bits: both lie in the
    cell of the top 53 bits)."""
    top = (words >> np.uint64(11)).astype(np.float64)  # exact: below 2**53
    return top * _TWO53, (top + 1.0) * _TWO53


def _step(u: np.ndarray, q: np.ndarray, size: np.ndarray) -> np.ndarray:
    """``1 - (1 - q) u^(1/size)`` in float64 (not yet widened by its error bound)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(u) / size
        g = -np.expm1(a) + q * np.exp(a)
        err = _REL_STEP * (np.abs(g) + np.where(np.isfinite(a), np.abs(a) * np.exp(a), 0.0)) + 2.0**-1060
    return g, err


def _q_interval(words: np.ndarray, size: np.ndarray, q_lo: np.ndarray, q_hi: np.ndarray):
    """Certified ``[q_lo, q_hi]`` of ``1 - (1 - q_v) U^(1/size)`` for U in the words' cells and
    q_v in ``[q_lo, q_hi]`` (increasing in q_v, decreasing in U)."""
    u_lo, u_hi = _cell(words)
    lo, e_lo = _step(u_hi, q_lo, size)
    hi, e_hi = _step(u_lo, q_hi, size)
    lo = np.maximum(lo - e_lo, q_lo)  # q_c >= q_v exactly
    hi = np.minimum(hi + e_hi, 1.0)
    return lo, hi


def _magnitude_interval(q_lo: np.ndarray, q_hi: np.ndarray, scale: float):
    """``[M_lo, M_hi]`` holding ``floor(-s ln q + 1/2)`` for every q in ``[q_lo, q_hi]``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        x_lo = -scale * np.log(q_hi)
        x_hi = -scale * np.log(np.maximum(q_lo, 0.0))
    x_lo = np.maximum(x_lo * (1.0 - _REL_X) - 2.0**-40, 0.0)
    x_hi = np.where(q_lo > 0, x_hi * (1.0 + _REL_X) + 2.0**-40, np.inf)
    return np.floor(x_lo + 0.5), np.floor(x_hi + 0.5)


def _floor_half(t) -> int | None:
    """``floor(v + 1/2)`` of an mpmath mpf tuple ``(sign, man, exp, bc)``, exactly (None: not finite)."""
    sign, man, exp, bc = t
    if man == 0:
        return 0 if bc == 0 else None  # zero, or a special value (inf, nan)
    num = -int(man) if sign else int(man)
    if exp >= 0:
        return num << exp
    den = 1 << (-exp)
    return (2 * num + den) // (2 * den)
