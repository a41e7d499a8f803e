"""Exact sampling of ``top_{k^2}(u u^T + G)`` without drawing d^2 Gaussians (Algorithm 2, Line 21).

``G`` is a d x d matrix of i.i.d. N(0, sigma^2) entries. Entries of ``u u^T`` outside
``S x S`` (S = supp(u), s = |S|) are zero, so outside the signal block ``P_hat + G`` is pure
noise. The K = min(k^2, d^2 - s^2) largest magnitudes among those N = d^2 - s^2 i.i.d.
half-normal values are drawn directly as order statistics:

* Renyi's representation of exponential order statistics: with ``E_1, E_2, ...`` i.i.d.
  Exp(1), the j smallest of N i.i.d. Exp(1) values are ``Y_(j) = sum_{i <= j} E_i / (N - i + 1)``;
* the j-th smallest of N uniforms (a *survival* probability) is ``q_j = 1 - exp(-Y_(j))``,
  computed as ``-expm1(-Y_(j))`` (log space: exact for q down to 1e-300);
* the j-th largest half-normal magnitude is ``sigma * Phi^{-1}(1 - q_j / 2) =
  -sigma * ndtri(q_j / 2)``.

By exchangeability, the K largest magnitudes sit at K distinct uniformly random positions of
the N noise cells (drawn with exact integer rejection sampling on 64-bit words: no modulo
bias), in random order, each with an independent uniform sign. The signal block's s^2 values
``u_a u_b + G_ab`` are drawn explicitly (in slices, keeping a running top-k^2). The top k^2
by magnitude of the union is then distributed exactly as ``top_{k^2}(u u^T + G)``: the
largest k^2 of all d^2 entries are among the signal block and the K largest noise entries.

Cost: ``O(s^2 + k^2 log k)``. All randomness comes from one :class:`NoiseSeed` purpose, so
the output is a pure function of ``(seed, purpose, u, sigma, k)``.

Caveat: floating-point inverse CDFs (see :data:`dpdist.privacy.noise.FLOAT_NOISE_CAVEAT`).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from dpdist.privacy.noise import NoiseSeed

__all__ = ["noise_top_magnitudes", "sample_distinct_cells", "top_k2_of_noisy_projector"]

#: Signal-block entries drawn per slice.
SIGNAL_SLICE = 1 << 22

# stream indices under the sampler's purpose
_STREAM_SIGNAL = 0
_STREAM_ORDER = 1
_STREAM_CELLS = 2
_STREAM_SIGNS = 3


def noise_top_magnitudes(n_cells: int, count: int, sigma: float, uniforms: np.ndarray) -> np.ndarray:
    """The ``count`` largest magnitudes (descending) among ``n_cells`` i.i.d. |N(0, sigma^2)|.

    ``uniforms`` (``count`` values in (0, 1)) drive the exponential spacings ``E = -log(U)``.
    """
    n_cells = int(n_cells)
    count = int(count)
    if count == 0:
        return np.empty(0)
    e = -np.log(np.asarray(uniforms[:count], dtype=np.float64))
    denom = n_cells - np.arange(count, dtype=np.float64)  # N, N-1, ..., N-count+1
    y = np.cumsum(e / denom)
    q = -np.expm1(-y)
    return -float(sigma) * special.ndtri(q / 2.0)


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


def top_k2_of_noisy_projector(
    support: np.ndarray,
    u_support: np.ndarray,
    n_features: int,
    k: int,
    sigma: float,
    seed: NoiseSeed,
    purpose: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact ``top_{k^2}(u u^T + G)`` as ``(rows, cols, values)`` (k^2 entries, any order).

    Parameters
    ----------
    support : array of int
        S = supp(u), distinct indices in [0, d).
    u_support : array of float
        The nonzero entries of u on ``support``.
    n_features : int
        d.
    k : int
        Keeps the k^2 largest entries by magnitude.
    sigma : float
        Standard deviation of the entries of G.
    seed, purpose
        The noise stream (see :class:`~dpdist.privacy.noise.NoiseSeed`).
    """
    support = np.asarray(support, dtype=np.int64)
    u_support = np.asarray(u_support, dtype=np.float64)
    d, kk = int(n_features), int(k) ** 2
    s = support.size
    key = seed.key(purpose)
    kk = min(kk, d * d)
    # signal block, in slices of the flattened s x s block, keeping a running top-kk
    best_r = np.empty(0, np.int64)
    best_c = np.empty(0, np.int64)
    best_v = np.empty(0)
    n_sig = s * s
    for start in range(0, n_sig, SIGNAL_SLICE):
        cnt = min(SIGNAL_SLICE, n_sig - start)
        flat = np.arange(start, start + cnt)
        a, b = np.divmod(flat, s)
        g = sigma * special.ndtri(seed.uniforms(key, _STREAM_SIGNAL, start, cnt))
        vals = u_support[a] * u_support[b] + g
        best_r = np.concatenate([best_r, support[a]])
        best_c = np.concatenate([best_c, support[b]])
        best_v = np.concatenate([best_v, vals])
        if best_v.size > kk:
            keep = np.argpartition(-np.abs(best_v), kk - 1)[:kk]
            best_r, best_c, best_v = best_r[keep], best_c[keep], best_v[keep]
    # the K largest pure-noise magnitudes, at distinct uniform cells, with uniform signs
    n_noise = d * d - n_sig
    kn = min(kk, n_noise)
    if kn > 0:
        mags = noise_top_magnitudes(n_noise, kn, sigma, seed.uniforms(key, _STREAM_ORDER, 0, kn))
        cells = sample_distinct_cells(seed, key, _STREAM_CELLS, kn, d, support)
        signs = np.where(seed.uniforms(key, _STREAM_SIGNS, 0, kn) < 0.5, -1.0, 1.0)
        r, c = np.divmod(cells, d)
        best_r = np.concatenate([best_r, r])
        best_c = np.concatenate([best_c, c])
        best_v = np.concatenate([best_v, signs * mags])
    if best_v.size > kk:
        keep = np.argpartition(-np.abs(best_v), kk - 1)[:kk]
        best_r, best_c, best_v = best_r[keep], best_c[keep], best_v[keep]
    return best_r, best_c, best_v
