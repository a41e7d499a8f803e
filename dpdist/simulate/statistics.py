"""Draws of the statistics the estimators consume, and of order statistics, without rows.

Exact pieces (in law):

- :func:`~dpdist.data.block_models.wishart_blocks` (with the block models, which the plans'
  forecasts draw from too): the second moment of n Gaussian rows restricted to independent
  blocks of coordinates.
- :func:`scaled_chi2`: a coordinate independent of all others, ``Sigma_jj chi2_n / n``.
- :func:`top_survival`: the ``count`` smallest of ``N`` i.i.d. Uniform(0, 1) survival
  probabilities (the top order statistics of any continuous law, Renyi's representation),
  in log space so that ``N`` may be astronomically large.
- :func:`normal_gumbel_isf`: the inverse survival function of ``a |Z| + G`` (Z normal, G
  Gumbel), tabulated by quadrature.
- :func:`normal_laplace_abs_isf`: the inverse survival function of ``|G + L|``,
  ``G ~ N(0, s^2)``, ``L ~ Laplace(b)`` (closed form of the normal-Laplace convolution).

These seeds drive simulation only; no release is made from them.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special

from dpdist.data.block_models import open_uniforms

__all__ = [
    "normal_laplace_abs_sf",
    "normal_gumbel_conditional_abs",
    "normal_gumbel_isf",
    "normal_laplace_abs_isf",
    "scaled_chi2",
    "top_survival",
]


def scaled_chi2(rng: np.random.Generator, n: float, scale, size=None) -> np.ndarray:
    """``scale * chi2_n / n``: a diagonal entry of the second moment of n Gaussian rows."""
    return np.asarray(scale) * rng.chisquare(float(n), size=size) / float(n)


def top_survival(rng: np.random.Generator, n_cells: float, count: int, shape=()) -> np.ndarray:
    """Survival probabilities ``q_1 < q_2 < ... < q_count`` of the ``count`` largest of
    ``n_cells`` i.i.d. draws of any continuous law (the ``count`` smallest of ``n_cells``
    uniforms): Renyi, ``q_j = 1 - exp(-sum_{i <= j} E_i / (N - i + 1))``, E_i i.i.d. Exp(1).

    Returns an array of shape ``shape + (count,)``.
    """
    e = -np.log(open_uniforms(rng, tuple(shape) + (count,)))
    denom = float(n_cells) - np.arange(count, dtype=np.float64)
    return -np.expm1(-np.cumsum(e / denom, axis=-1))


def _log_sf_normal_laplace(x: np.ndarray, s: np.ndarray, b: float) -> np.ndarray:
    """``log P(G + L > x)`` for ``x >= 0``, ``G ~ N(0, s^2)``, ``L ~ Laplace(b)``.

    ``P = Phi(-x/s) + (1/2) e^{s^2 / (2 b^2)} (e^{-x/b} Phi(x/s - s/b) - e^{x/b} Phi(-x/s - s/b))``.
    """
    x = np.asarray(x, dtype=np.float64)
    s = np.broadcast_to(np.asarray(s, dtype=np.float64), x.shape)
    out = np.empty_like(x)
    lap = s <= 0
    out[lap] = math.log(0.5) - x[lap] / b
    g = ~lap
    xs, ss = x[g], s[g]
    c = ss * ss / (2 * b * b)
    t1 = special.log_ndtr(-xs / ss)
    a = c - xs / b + special.log_ndtr(xs / ss - ss / b)
    cc = c + xs / b + special.log_ndtr(-xs / ss - ss / b)
    # P = e^t1 + (e^a - e^cc)/2 with a >= cc; the bracket is positive
    diff = a + np.log1p(-np.exp(np.minimum(cc - a, 0.0))) + math.log(0.5)
    out[g] = np.logaddexp(t1, diff)
    return out


def normal_laplace_abs_sf(x, s, b: float) -> np.ndarray:
    """``P(|G + L| > x)``, ``x >= 0`` (G, L as in :func:`normal_laplace_abs_isf`)."""
    return np.minimum(1.0, 2.0 * np.exp(_log_sf_normal_laplace(np.asarray(x, float), s, b)))


def normal_laplace_abs_isf(q: np.ndarray, s, b: float, *, iterations: int = 80) -> np.ndarray:
    """The x with ``P(|G + L| > x) = q``, ``G ~ N(0, s^2)`` (s may be an array, 0 allowed),
    ``L ~ Laplace(b)``, by bisection on the log survival function (vectorised)."""
    q = np.asarray(q, dtype=np.float64)
    s = np.broadcast_to(np.asarray(s, dtype=np.float64), q.shape).copy()
    # Laplace-dominated tail: for x >> s the survival is exactly e^{s^2/(2b^2) - x/b} up to
    # terms below Phi(-(x/s - s/b)) and Phi(-x/s); use the closed form where both are
    # negligible (below 1e-12 relative), bisection elsewhere.
    closed = b * (s * s / (2.0 * b * b) - np.log(q))
    with np.errstate(divide="ignore"):
        z = np.where(s > 0, closed / np.where(s > 0, s, 1.0), np.inf)
    ok = (z - s / b > 8.0) & (special.log_ndtr(-z) < np.log(q) - 30.0)
    out = closed.copy()
    todo = ~ok
    if todo.any():
        qq, ss = q[todo], s[todo]
        target = np.log(qq / 2.0)
        # P(|G+L| > x) <= P(|G| > x/2) + P(|L| > x/2): each <= q/2 at hi; and
        # P(|G+L| > x) >= max(P(|L| > x), P(|G| > x)) / 2 (the signs agree w.p. 1/2): q at lo
        hi = 2.0 * np.maximum(ss * np.sqrt(2.0 * np.log(4.0 / qq)), b * np.log(2.0 / qq)) + 1e-300
        lo = np.where(qq < 0.5, np.maximum(b * np.log(1.0 / (2.0 * qq)),
                                           -ss * special.ndtri(np.minimum(qq, 0.5))), 0.0)
        lo = np.minimum(lo, hi)
        for _ in range(iterations):
            mid = 0.5 * (lo + hi)
            above = _log_sf_normal_laplace(mid, ss, b) > target
            lo = np.where(above, mid, lo)
            hi = np.where(above, hi, mid)
            if np.all(hi - lo <= 1e-12 * hi):
                break
        out[todo] = 0.5 * (lo + hi)
    return out


#: The ratios a = s / beta tabulated by :func:`normal_gumbel_isf` (0, then 1e-3 .. 1e3).
_NG_RATIOS = np.concatenate([[0.0], np.geomspace(1e-3, 1e3, 481)])
_NG_POINTS = 1200


def _log_sf_normal_gumbel(x: np.ndarray, a: float) -> np.ndarray:
    """``log P(a |Z| + G > x)``, Z standard normal, G standard Gumbel, by quadrature: over Z
    (``2 phi(z) P(G > x - a z)``) when ``a <= 1``, over G (``g(t) P(|Z| > (x - t) / a)``)
    otherwise, so that the integrand is smooth on the grid in both cases."""
    x = np.asarray(x, dtype=np.float64)[:, None]
    if a <= 1.0:
        z = np.linspace(0.0, 12.0, 1201)
        w = np.full(z.size, z[1] - z[0])
        w[[0, -1]] *= 0.5
        t = x - a * z[None, :]  # log P(G > t) = log(1 - exp(-e^-t))
        log_sf = np.log(-np.expm1(-np.exp(-np.maximum(t, -40.0))))
        terms = log_sf + (math.log(2.0) - 0.5 * z * z - 0.5 * math.log(2 * math.pi) + np.log(w))[None, :]
    else:
        t = np.linspace(-6.0, 60.0, 2201)
        w = np.full(t.size, t[1] - t[0])
        w[[0, -1]] *= 0.5
        log_g = -t - np.exp(-t)
        y = (x - t[None, :]) / a  # P(|Z| > y) = min(1, 2 Phi(-y))
        log_sf = np.minimum(math.log(2.0) + special.log_ndtr(-y), 0.0)
        terms = log_sf + (log_g + np.log(w))[None, :]
    return special.logsumexp(terms, axis=1)


@functools.lru_cache(maxsize=None)
def _normal_gumbel_column(j: int) -> tuple[np.ndarray, np.ndarray]:
    """``(log sf ascending, x descending)`` over a grid of x at the tabulated ratio ``j``."""
    a = float(_NG_RATIOS[j])
    x = np.linspace(-4.0, 32.0 + 8.0 * a, _NG_POINTS)
    ls = np.minimum.accumulate(_log_sf_normal_gumbel(x, a))  # monotone despite rounding
    return ls[::-1].copy(), x[::-1].copy()


def normal_gumbel_isf(q: np.ndarray, a) -> np.ndarray:
    """The x with ``P(a |Z| + G > x) = q`` (Z standard normal, G standard Gumbel, ``a >= 0``
    an array broadcast with q): the law of a key ``|N(0, s^2)| / beta + G`` with ``a = s /
    beta``. Tabulated by quadrature at the ratios :data:`_NG_RATIOS` the call needs (each
    once a process, 1,200 points of x), interpolated in log q, and linearly in a between
    tabulated ratios: the survival at the returned x is q within 2e-3 relative, enough for a
    simulation. Ratios above 1e3 are clamped."""
    q = np.asarray(q, dtype=np.float64)
    a = np.clip(np.broadcast_to(np.asarray(a, dtype=np.float64), q.shape), 0.0, _NG_RATIOS[-1])
    lq = np.log(q)
    hi = np.clip(np.searchsorted(_NG_RATIOS, a, side="right"), 1, _NG_RATIOS.size - 1)
    out = np.empty(q.shape)
    for j in np.unique(hi).tolist():
        m = hi == j
        x_lo = np.interp(lq[m], *_normal_gumbel_column(j - 1))
        x_hi = np.interp(lq[m], *_normal_gumbel_column(j))
        r0, r1 = _NG_RATIOS[j - 1], _NG_RATIOS[j]
        out[m] = x_lo + np.clip((a[m] - r0) / (r1 - r0), 0.0, 1.0) * (x_hi - x_lo)
    return out


#: Elements of :func:`normal_gumbel_conditional_abs` handled at once (its work arrays hold this
#: many rows of ``points`` values: 128 MiB each at 256 points).
_CONDITIONAL_BLOCK = 1 << 16


def normal_gumbel_conditional_abs(x: np.ndarray, a, u: np.ndarray, *, points: int = 256) -> np.ndarray:
    """A draw of ``|Z|`` given ``a |Z| + G = x`` (Z standard normal, G standard Gumbel, ``a >=
    0`` broadcast with x), by the inverse of its conditional distribution function at the
    uniforms ``u``: the density ``phi(z) g(x - a z)`` (g the Gumbel density) on a grid of
    ``points`` values of z over [0, 9] (cut where G would fall below -5: probability below
    1e-64), normalised. With ``a = 0``, the half-normal law (Z and G independent)."""
    x = np.asarray(x, dtype=np.float64)
    a = np.broadcast_to(np.asarray(a, dtype=np.float64), x.shape).ravel()
    u = np.broadcast_to(np.asarray(u, dtype=np.float64), x.shape).ravel()
    flat = x.ravel()
    out = np.empty(flat.size)
    grid = np.linspace(0.0, 1.0, points)
    # element by element, so a block of rows at a time: the (elements x points) work arrays stay
    # near _CONDITIONAL_BLOCK * points * 8 bytes each whatever the size of x
    for lo in range(0, flat.size, _CONDITIONAL_BLOCK):
        xs, as_, us = flat[lo:lo + _CONDITIONAL_BLOCK], a[lo:lo + _CONDITIONAL_BLOCK], u[lo:lo + _CONDITIONAL_BLOCK]
        top = np.where(as_ > 0, np.clip((xs + 5.0) / np.where(as_ > 0, as_, 1.0), 1e-9, 9.0), 9.0)
        z = top[:, None] * grid
        t = xs[:, None] - as_[:, None] * z
        log_w = -0.5 * z * z - t - np.exp(-np.maximum(t, -700.0))
        w = np.exp(log_w - log_w.max(axis=-1, keepdims=True))
        cdf = np.cumsum(w, axis=-1)
        cdf /= cdf[:, -1:]
        idx = np.minimum((cdf < us[:, None]).sum(axis=-1), points - 1)
        out[lo:lo + _CONDITIONAL_BLOCK] = np.take_along_axis(z, idx[:, None], axis=-1)[:, 0]
    return out.reshape(x.shape)
