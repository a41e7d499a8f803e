"""Simulated runs of the estimators: the statistic is drawn, the mechanism is the estimator's.

Every function takes a :class:`~dpdist.data.block_models.BlockModel`, a sample size ``n``
(any real number >= the block size; 1e15 costs what 1e3 does), the estimator's public
parameters, and a NumPy ``Generator``, and returns a :class:`SimResult` whose metadata says
SIMULATED and lists the approximations it made. Calibrations come from the estimators'
own ``plan()`` or from :mod:`dpdist.privacy` (never re-typed); noise is drawn from the same
laws (:func:`~dpdist.privacy.noise.laplace_from_uniform`,
:func:`~dpdist.privacy.noise.gaussian_from_uniform`) and, for PrivPCA, by the estimator's own
release functions.

Which parts are exact and which approximate
-------------------------------------------
Exact in law (Gaussian rows, clipping inactive; ``p_clip`` in the result is the probability
that some entry of the n x d data exceeds the clip level, computed exactly for Gaussian
rows):

- the diagonal blocks of the second moment (Wishart), the bulk diagonal (scaled chi^2);
- every noise value on block entries and on the diagonal; the top order statistics of the
  off-block noise scores (Renyi) and their uniformly random positions;
- PrivPCA: the support-block moments of all m batches, the top two bulk diagonal values of
  each batch, the private tests, the norm release, and the projector release (the
  estimator's exact top-k^2 sampler).

Approximate:

- off-block entries of the second moment are drawn as independent ``N(0, Sigma_hat_ii
  mean(Sigma_jj) / n)`` (their law given the row's own column of data is exactly Gaussian
  with variance ``Sigma_hat_ii Sigma_jj / n``; we drop the correlation within the other
  block, use the mean of Sigma_jj, and draw the (i, j) and (j, i) raw values of a selected
  off-block pair independently);
- with the Laplace selection, a selected off-block raw value is drawn independently of its
  selection score (exact when the Laplace scale dominates the sampling spread, which is the
  regime of n* there); with the Gumbel selection, whose scale is comparable to the sampling
  spread near n*, it is drawn from its law given its key (on a grid of 256 values), and the
  row j of a selected off-block entry (i, j) gets column i as a candidate with the same raw
  value and its own key (the rows' off-block order statistics are otherwise independent);
- the Wang-Xu / thresholding exceedances off the blocks are Poisson with the Gaussian tail
  rate above;
- PrivPCA: batches are good and friends unless their support blocks say otherwise; the
  probability that an off-support entry of a batch exceeds tau, or that two batches are
  separated off the support, is computed and reported (``approx_event_probability``);
  Sigma_bar's bulk diagonal is drawn as independent Gaussians with the exact mean and
  variance of the weighted chi^2 average.

The validation (``dpdist.experiments.validation`` and ``tests/simulate``) compares the
simulated error distributions with the real pipeline's at each method's n* (or the largest n
the real pipeline reaches) and states the difference as an implied shift of n*.

PrivNorm and PrivPCA are simulated with the estimators' own steps, called unchanged on the
drawn statistics, so the simulation applies the very same mechanism: the set-up, the private
tests and the two releases of :mod:`dpdist.algorithms.friendly_steps`, on the FriendlyCore
statistics container :class:`dpdist.engine.friendly.kernels.FriendlyStats` with the weights of
:func:`dpdist.engine.friendly.kernels.friendly_weights`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from dpdist.exceptions import ValidationError
from dpdist.privacy.noise import gaussian_from_uniform, laplace_from_uniform
from dpdist.data.block_models import BlockModel, block_triples, bulk_top_two, open_uniforms, wishart_blocks
from dpdist.simulate.statistics import (
    normal_gumbel_conditional_abs,
    normal_gumbel_isf,
    normal_laplace_abs_isf,
    scaled_chi2,
)

__all__ = [
    "SIMULATED",
    "SimResult",
    "clip_probability",
    "row_clip_probability",
    "simulate_privcov",
    "simulate_privnorm",
    "simulate_privpca",
    "simulate_thresholded",
    "simulate_wang_xu",
]

#: Label carried by every simulated result, its metadata and its plots.
SIMULATED = "SIMULATED"


@dataclass
class SimResult:
    """One simulated run.

    Attributes
    ----------
    error : float
        Operator-norm error ``||M - Sigma||_op`` (covariance methods) or ``sin^2`` of the
        released component (PCA methods; 1.0 when nothing was released).
    released : bool
        False when the mechanism returned bottom (PrivPCA's tests).
    info : dict
        ``label = "SIMULATED"``, the method, the calibration used, ``p_clip``, the
        approximations made and (PrivPCA) the probability of the approximated events.
    """

    error: float
    released: bool
    info: dict = field(default_factory=dict)


def clip_probability(model: BlockModel, n: float, clip: float) -> float:
    """P(some |x_tj| > clip) for n Gaussian rows of the model (exact; the simulation is exact
    in law on the complement)."""
    diag = model.diagonal()
    log_keep = np.log1p(-np.minimum(1.0, 2.0 * special.ndtr(-clip / np.sqrt(diag))))
    return float(-np.expm1(float(n) * log_keep.sum()))


def row_clip_probability(model: BlockModel, n: float, row_clip: float) -> float:
    """An upper bound on P(some ||x_t|| > row_clip) for n Gaussian rows of the model (0 when
    row_clip is inf): ``||x||^2 = sum_i lambda_i g_i^2`` over the covariance's eigenvalues, and
    Laurent and Massart 2000 (Lemma 1) give ``P(||x||^2 >= sum lambda + 2 sqrt(t sum lambda^2)
    + 2 t max lambda) <= e^-t``; t is solved from ``row_clip**2`` and the bound is ``min(1, n
    e^-t)``. The simulation is exact in law when no row is scaled (nor entry clipped)."""
    if not math.isfinite(row_clip):
        return 0.0
    lam = np.linalg.eigvalsh(model.blocks).ravel() if model.n_blocks else np.zeros(0)
    lam = np.concatenate([lam, np.full(model.n_bulk, float(model.bulk_variance))])
    tr, s2, top = float(lam.sum()), math.sqrt(float((lam**2).sum())), float(lam.max())
    gap = row_clip**2 - tr
    if gap <= 0:
        return 1.0
    x = (-2 * s2 + math.sqrt(4 * s2 * s2 + 8 * top * gap)) / (4 * top)  # sqrt(t)
    return float(min(1.0, float(n) * math.exp(-x * x)))


def _sample_hat(model: BlockModel, n: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """Diagonal blocks (exact Wishart) and bulk diagonal (exact scaled chi^2) of Sigma_hat."""
    blocks = wishart_blocks(model.blocks, n, rng, chol=model.cholesky())
    bulk = scaled_chi2(rng, n, model.bulk_variance, size=model.n_bulk) if model.n_bulk else np.zeros(0)
    return blocks, bulk


def _split_units(model: BlockModel, triples):
    """Split upper-triangle triples of M (canonical coordinates, rows <= cols, no duplicates)
    into the dense diagonal blocks, the bulk diagonal, and the entries between units."""
    r, c, v = (np.asarray(a) for a in triples)
    B, s, nb = model.n_blocks, model.block_size, model.n_blocks * model.block_size
    unit = lambda i: np.where(i < nb, i // s, B + (i - nb))  # noqa: E731
    ur, uc = unit(r), unit(c)
    same = ur == uc
    blocks = np.zeros((B, s, s))
    inb = same & (r < nb)
    blocks[ur[inb], r[inb] % s, c[inb] % s] = v[inb]
    blocks[ur[inb], c[inb] % s, r[inb] % s] = v[inb]
    bulk = np.zeros(model.n_bulk)
    bk = same & (r >= nb)
    bulk[r[bk] - nb] = v[bk]
    return blocks, bulk, (r[~same], c[~same], v[~same])


#: Pieces with more coordinates than this are kept sparse and their extreme eigenvalue found by
#: Lanczos (``eigsh``); a dense eigendecomposition of a 6,000-coordinate piece takes about 10 s
#: and one of 20,000 would not fit the simulator's budget.
_DENSE_MAX = 1500


def _touched(model: BlockModel, blocks, bulk, extras) -> list:
    """The connected pieces that extra entries create: for each connected component of the
    units (blocks, bulk coordinates) linked by extras, the matrix on its coordinates (blocks,
    bulk diagonals and extras; a dense array up to ``_DENSE_MAX`` coordinates, else a sparse
    CSR array) and the coordinate list."""
    from scipy.sparse import coo_array
    from scipy.sparse.csgraph import connected_components

    r, c, v = extras
    if r.size == 0:
        return []
    B, s, nb = model.n_blocks, model.block_size, model.n_blocks * model.block_size
    unit = lambda i: np.where(i < nb, i // s, B + (i - nb))  # noqa: E731
    ur, uc = unit(r), unit(c)
    units = np.unique(np.concatenate([ur, uc]))
    lr, lc = np.searchsorted(units, ur), np.searchsorted(units, uc)
    ncomp, lab = connected_components(coo_array((np.ones(lr.size), (lr, lc)), shape=(units.size,) * 2),
                                      directed=False)
    pieces = []
    blk = np.arange(s)
    for comp in range(ncomp):
        us = units[lab == comp]
        coords = np.concatenate([u * s + blk if u < B else np.array([nb + (u - B)]) for u in us])
        pos = np.full(int(coords.max()) + 1, -1)
        pos[coords] = np.arange(coords.size)
        rows, cols, vals = [], [], []
        for u in us:
            if u < B:
                idx = pos[u * s + blk]
                rows.append(np.repeat(idx, s))
                cols.append(np.tile(idx, s))
                vals.append(blocks[u].ravel())
            else:
                j = pos[nb + (u - B)]
                rows.append(np.array([j]))
                cols.append(np.array([j]))
                vals.append(np.array([bulk[u - B]]))
        sel = lab[lr] == comp
        pr, pc, pv = pos[r[sel]], pos[c[sel]], v[sel]
        off = pr != pc
        rows += [pr, pc[off]]
        cols += [pc, pr[off]]
        vals += [pv, pv[off]]
        # duplicates add up, as the dense np.add.at did
        M = coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(coords.size,) * 2).tocsr()
        pieces.append((M.toarray() if coords.size <= _DENSE_MAX else M, coords))
    return pieces


def _extreme_pair(M, which: str):
    """``(eigenvalue, eigenvector)`` of a piece: the largest in magnitude (``"LM"``) or the
    largest algebraic (``"LA"``), by a dense eigendecomposition or, for a sparse piece, Lanczos."""
    if isinstance(M, np.ndarray):
        w, q = np.linalg.eigh(M)
        i = int(np.argmax(np.abs(w))) if which == "LM" else w.size - 1
        return float(w[i]), q[:, i]
    from scipy.sparse.linalg import eigsh

    w, q = eigsh(M, k=1, which=which, tol=1e-10)
    return float(w[0]), q[:, 0]


def _op_norm_units(model: BlockModel, blocks, bulk, extras) -> float:
    """Operator norm of blockdiag(blocks, diag(bulk)) + extras: the maximum over connected
    pieces (a principal submatrix never has a larger norm, so max(units, touched pieces))."""
    base = float(np.abs(np.linalg.eigvalsh(blocks)).max()) if blocks.size else 0.0
    if bulk.size:
        base = max(base, float(np.abs(bulk).max()))
    for M, _ in _touched(model, blocks, bulk, extras):
        base = max(base, abs(_extreme_pair(M, "LM")[0]) if not isinstance(M, np.ndarray)
                   else float(np.abs(np.linalg.eigvalsh(M)).max()))
    return base


def _op_error(model: BlockModel, triples) -> float:
    """``||M - Sigma||_op`` for M given by upper-triangle triples (rows <= cols, no duplicates)."""
    blocks, bulk, extras = _split_units(model, triples)
    return _op_norm_units(model, blocks - model.blocks, bulk - model.bulk_variance, extras)


def _sin2(model: BlockModel, triples) -> float:
    """sin^2 between v1 and the top eigenvector of M (largest algebraic eigenvalue, taken on
    the piece that carries it, as ``leading_eigenvector`` does)."""
    blocks, bulk, extras = _split_units(model, triples)
    pieces = _touched(model, blocks, bulk, extras)
    B, s, nb = model.n_blocks, model.block_size, model.n_blocks * model.block_size
    coords = np.concatenate([p[1] for p in pieces]) if pieces else np.zeros(0, np.int64)
    touched_blocks = {int(x) // s for x in coords[coords < nb]}
    touched_bulk = [int(x) - nb for x in coords[coords >= nb]]
    best, vec, support = -np.inf, None, None
    if B:
        w, q = np.linalg.eigh(blocks)
        for b in range(B):
            if b not in touched_blocks and w[b, -1] > best:
                best, vec, support = w[b, -1], q[b, :, -1], b * s + np.arange(s)
    if bulk.size:
        free = np.ones(bulk.size, bool)
        free[touched_bulk] = False
        if free.any():
            j = int(np.flatnonzero(free)[np.argmax(bulk[free])])
            if bulk[j] > best:
                best, vec, support = bulk[j], np.ones(1), np.array([nb + j])
    for M, cs in pieces:
        top, v = _extreme_pair(M, "LA")
        if top > best:
            best, vec, support = top, v, cs
    cos = float(vec @ model.v1[support]) / max(float(np.linalg.norm(vec)), 1e-300)
    return max(0.0, 1.0 - cos * cos)


def _offblock_scale2(model: BlockModel, n: float) -> float:
    """Mean of Sigma_jj: the per-row variance of off-block entries is Sigma_hat_ii * this / n."""
    return float(model.diagonal().mean()) / float(n)


def _exceedances(model: BlockModel, n: float, diag_hat: np.ndarray, extra_sd: float, threshold: float, rng):
    """Off-block entries of ``Sigma_hat + G`` (G symmetric N(0, extra_sd^2), or none) whose
    magnitude reaches ``threshold``: a Poisson number at uniform random off-block pairs, values
    from the Gaussian tail. Returns upper triples and the expected count."""
    d, s, B = model.n_features, model.block_size, model.n_blocks
    pairs = (d * d - B * s * s - model.n_bulk) / 2.0
    sd = math.sqrt(float(np.mean(diag_hat)) * _offblock_scale2(model, n) + extra_sd**2)
    log_p = math.log(2.0) + float(special.log_ndtr(-threshold / sd))
    mean = pairs * math.exp(log_p)
    count = int(rng.poisson(mean)) if mean > 0 else 0
    if count == 0:
        return (np.zeros(0, np.int64),) * 2 + (np.zeros(0),), mean
    unit = np.concatenate([np.arange(B * s) // s, B + np.arange(model.n_bulk)])
    rows, cols = [], []
    while len(rows) < count:
        i, j = rng.integers(0, d, size=2)
        if unit[i] != unit[j]:
            rows.append(min(i, j))
            cols.append(max(i, j))
    u = open_uniforms(rng, count)
    tail = np.exp(log_p - math.log(2.0))  # P(N > threshold / sd)
    mag = -sd * special.ndtri(u * tail)
    signs = np.where(rng.random(count) < 0.5, -1.0, 1.0)
    return (np.array(rows), np.array(cols), signs * mag), mean


def _threshold_estimate(model: BlockModel, n: float, threshold: float, noise_sd: float, rng, method: str,
                        error: str) -> SimResult:
    """Shared by non-private thresholding and Wang-Xu: ``T_lambda(Sigma_hat + G)`` (diagonal
    always kept), G symmetric Gaussian (noise_sd = 0: none)."""
    blocks, bulk = _sample_hat(model, n, rng)
    if noise_sd > 0:
        B, s, _ = blocks.shape
        iu = np.triu_indices(s)
        g = np.zeros_like(blocks)
        g[:, iu[0], iu[1]] = gaussian_from_uniform(open_uniforms(rng, (B, iu[0].size)), noise_sd)
        g = g + np.transpose(np.triu(g, 1), (0, 2, 1))
        blocks = blocks + g
        bulk = bulk + gaussian_from_uniform(open_uniforms(rng, bulk.size), noise_sd)
    diag_hat = np.concatenate([np.einsum("bii->bi", blocks).ravel(), bulk])
    r, c, v = block_triples(blocks, model.n_bulk, bulk)
    keep = (np.abs(v) >= threshold) | (r == c)
    (er, ec, ev), expected = _exceedances(model, n, diag_hat, noise_sd, threshold, rng)
    triples = (np.concatenate([r[keep], er]), np.concatenate([c[keep], ec]), np.concatenate([v[keep], ev]))
    err = _op_error(model, triples) if error == "operator" else _sin2(model, triples)
    return SimResult(err, True, {
        "label": SIMULATED, "method": method, "n_samples": float(n), "threshold": threshold,
        "noise_sd": noise_sd, "expected_offblock_exceedances": expected,
        "approximations": ["off-block entries Gaussian, independent, Poisson exceedances"],
    })


def simulate_thresholded(model: BlockModel, n: float, rng, *, sigma: float | None = None,
                         error: str = "operator") -> SimResult:
    """Non-private hard thresholding (:class:`~dpdist.baselines.ThresholdedCovariance` /
    :class:`~dpdist.baselines.ThresholdedPCA` with ``sigma``): threshold from the estimator's plan."""
    from dpdist.baselines import ThresholdedPCA

    sigma = math.sqrt(model.sigma2) if sigma is None else float(sigma)
    lam = ThresholdedPCA(sigma=sigma).plan(max(2, int(n)), model.n_features).threshold
    out = _threshold_estimate(model, n, lam, 0.0, rng, "thresholded (NOT PRIVATE)", error)
    out.info["p_clip"] = 0.0  # no clipping in this estimator
    return out


def simulate_wang_xu(model: BlockModel, n: float, epsilon: float, delta: float, rng, *,
                     sigma: float | None = None, beta: float = 0.1, error: str = "operator") -> SimResult:
    """Wang-Xu (:class:`~dpdist.baselines.GaussianCovariance` / ``GaussianPCA`` with ``sigma``):
    clip, Gaussian scale and threshold from the estimator's own ``plan()``."""
    from dpdist.baselines import GaussianCovariance

    sigma = math.sqrt(model.sigma2) if sigma is None else float(sigma)
    plan = GaussianCovariance(epsilon, delta, sigma=sigma, beta=beta, assume_centered=True).plan(max(2, int(n)),
                                                                                                 model.n_features)
    out = _threshold_estimate(model, n, plan.threshold, plan.gaussian_sigma, rng, "wang-xu", error)
    out.info.update(p_clip=clip_probability(model, n, plan.clip), clip=plan.clip, epsilon=epsilon, delta=delta)
    return out


def _distinct_positions(rng, n_rows: int, pool: int, count: int) -> np.ndarray:
    """``count`` distinct uniform indices in [0, pool) per row."""
    if pool <= 4096:
        return np.argsort(rng.random((n_rows, pool)), axis=1)[:, :count]
    pos = rng.integers(0, pool, size=(n_rows, count))
    while True:
        srt = np.sort(pos, axis=1)
        bad = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))
        if bad.size == 0:
            return pos
        pos[bad] = rng.integers(0, pool, size=(bad.size, count))


def _mirror_offblock(cols, scores, raw, top, n_in: int, b: float, rng):
    """Row j's candidate for column i when row i selected the off-block entry (i, j): the same
    raw value (the second moment is symmetric) with its own Gumbel key ``|raw| + b G``, added to
    row j's candidates (when row j does not hold column i already). The off-block order
    statistics of the rows are drawn independently; this restores the dependence that matters
    once the keys follow the values (a large off-block entry is likely chosen from both sides)."""
    d = cols.shape[0]
    rows, slots = np.nonzero(top >= n_in)
    if rows.size == 0:
        return cols, scores, raw
    picked = top[rows, slots]
    J, I, R = cols[rows, picked], rows, raw[rows, picked]
    key = np.abs(R) - b * np.log(-np.log(open_uniforms(rng, R.shape)))
    order = np.argsort(J, kind="stable")
    J, I, R, key = J[order], I[order], R[order], key[order]
    counts = np.bincount(J, minlength=d)
    pos = np.arange(J.size) - np.repeat(np.cumsum(counts) - counts, counts)
    width = int(counts.max())
    extra_cols = np.full((d, width), -1, np.int64)
    extra_scores = np.full((d, width), -np.inf)
    extra_raw = np.zeros((d, width))
    held = (cols[J] == I[:, None]).any(axis=1)
    extra_cols[J, pos] = np.where(held, -1, I)
    extra_scores[J, pos] = np.where(held, -np.inf, key)
    extra_raw[J, pos] = R
    return (np.concatenate([cols, extra_cols], axis=1), np.concatenate([scores, extra_scores], axis=1),
            np.concatenate([raw, extra_raw], axis=1))


def simulate_privcov(model: BlockModel, n: float, epsilon: float, delta: float, rng, *,
                     sigma: float | None = None, beta: float = 0.1, error: str = "operator",
                     selection: str = "gumbel") -> SimResult:
    """PrivCov (:class:`~dpdist.SparseCovariance` with ``sigma``, ``k = model.k`` and
    ``selection``): the noise scales and clip come from the estimator's ``plan()`` (hence from
    :func:`dpdist.privacy.privcov_calibration.privcov_calibration`, ``privcov_zcdp_calibration`` or
    ``privcov_gumbel_calibration``); selection (keys ``|S_ij + Laplace(b)|``, or ``|S_ij| +
    beta G_ij`` with G standard Gumbel for ``"gumbel"``, float noise: this measures accuracy,
    not privacy) and release (Laplace b for ``"paper"``, Gaussian ``release_sigma``
    otherwise) follow the algorithm row by row, the AND rule is
    :func:`~dpdist.algorithms.sparse_covariance.assemble_privcov`. The off-block candidates
    of a row are the top order statistics of the key's law (``normal_laplace_abs_isf``,
    ``normal_gumbel_isf``).

    ``error="operator"``: ``||M - Sigma||_op``; ``error="sin2"``: ``sin^2`` to ``v1`` of the
    k-sparse component that :class:`~dpdist.SparseCovariancePCA` takes from M (its own
    :func:`~dpdist.algorithms.sparse_covariance_pca.truncated_power_method`)."""
    if error not in ("operator", "sin2"):
        raise ValidationError(f"error must be 'operator' or 'sin2', got {error!r}")
    from dpdist import SparseCovariance
    from dpdist.algorithms.sparse_covariance.release import assemble_privcov

    sigma = math.sqrt(model.sigma2) if sigma is None else float(sigma)
    d, k, s, B = model.n_features, model.k, model.block_size, model.n_blocks
    plan = SparseCovariance(k, epsilon, delta, sigma=sigma, beta=beta, assume_centered=True,
                            selection=selection).plan(max(2, int(n)), d)
    b = float(plan.noise_scale)

    def release_noise(shape):
        u = open_uniforms(rng, shape)
        if plan.release_sigma is None:
            return laplace_from_uniform(u, b)
        return gaussian_from_uniform(u, float(plan.release_sigma))

    blocks, bulk = _sample_hat(model, n, rng)
    # candidates inside the row's own block (a bulk row's block is its diagonal; -1 pads)
    nb = B * s
    in_cols = np.full((d, s), -1, np.int64)
    in_raw = np.zeros((d, s))
    if B:
        in_cols[:nb] = (np.arange(nb) // s * s)[:, None] + np.arange(s)[None, :]
        in_raw[:nb] = blocks.reshape(nb, s)
    if model.n_bulk:
        in_cols[nb:, 0] = nb + np.arange(model.n_bulk)
        in_raw[nb:, 0] = bulk
    valid = in_cols >= 0
    gumbel = selection == "gumbel"
    if gumbel:  # keys in data units: |S_ij| + beta G_ij
        in_keys = np.abs(in_raw) - b * np.log(-np.log(open_uniforms(rng, in_raw.shape)))
    else:
        in_keys = np.abs(in_raw + laplace_from_uniform(open_uniforms(rng, in_raw.shape), b))
    in_scores = np.where(valid, in_keys, -np.inf)
    diag_hat = np.concatenate([np.einsum("bii->bi", blocks).ravel(), bulk])
    # off-block candidates: the k largest keys (|N(0, tau_i^2) + Laplace(b)|, or |N(0, tau_i^2)| + b G) of the others
    n_in = np.where(np.arange(d) < nb, s, 1)
    pool = d - n_in
    tau = np.sqrt(np.maximum(diag_hat, 0.0) * _offblock_scale2(model, n))
    kk = int(min(k, pool.min())) if d > s else 0
    if kk > 0:
        e = -np.log(open_uniforms(rng, (d, kk)))  # Renyi: top survival probabilities per row
        q = -np.expm1(-np.cumsum(e / (pool[:, None] - np.arange(kk)[None, :]), axis=1))
        if gumbel:
            off_scores = b * normal_gumbel_isf(q, tau[:, None] / b)
        else:
            off_scores = normal_laplace_abs_isf(q, tau[:, None], b)
        # positions: distinct uniform among the row's off-block columns
        off_cols = np.empty((d, kk), np.int64)
        rows_blk = np.arange(d) < nb
        if rows_blk.any():
            p = _distinct_positions(rng, int(rows_blk.sum()), d - s, kk)
            start = (np.arange(nb) // s * s)[:, None]
            off_cols[rows_blk] = np.where(p >= start, p + s, p)
        if model.n_bulk:
            p = _distinct_positions(rng, model.n_bulk, d - 1, kk)
            own = (nb + np.arange(model.n_bulk))[:, None]
            off_cols[~rows_blk] = np.where(p >= own, p + 1, p)
        if gumbel:  # the raw value given its key: |Z| given a |Z| + G = key / b, a random sign
            a = np.broadcast_to(tau[:, None] / b, off_scores.shape)
            z = normal_gumbel_conditional_abs(off_scores / b, a, open_uniforms(rng, (d, kk)))
            off_raw = tau[:, None] * z * np.where(open_uniforms(rng, (d, kk)) < 0.5, -1.0, 1.0)
        else:
            off_raw = tau[:, None] * gaussian_from_uniform(open_uniforms(rng, (d, kk)), 1.0)
    else:
        off_scores = np.zeros((d, 0))
        off_cols = np.zeros((d, 0), np.int64)
        off_raw = np.zeros((d, 0))
    cols = np.concatenate([in_cols, off_cols], axis=1)
    scores = np.concatenate([in_scores, off_scores], axis=1)
    raw = np.concatenate([in_raw, off_raw], axis=1)
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    if gumbel and kk > 0:
        cols, scores, raw = _mirror_offblock(cols, scores, raw, top, in_cols.shape[1], b, rng)
        top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    sel_cols = np.take_along_axis(cols, top, axis=1)
    sel_raw = np.take_along_axis(raw, top, axis=1)
    sel_vals = sel_raw + release_noise(sel_raw.shape)
    sel_vals[sel_cols < 0] = 0.0
    # the diagonal is released for every row (line 11) with its own release noise; when i is in
    # S_i the two are the same noisy value (same (i, i) cell of the release noise field)
    diag_rel = diag_hat + release_noise(d)
    is_diag = sel_cols == np.arange(d)[:, None]
    sel_vals = np.where(is_diag, diag_rel[:, None], sel_vals)
    M = assemble_privcov(sel_cols, sel_vals, diag_rel)
    if error == "sin2":
        from dpdist.algorithms.sparse_covariance_pca import truncated_power_method

        u = truncated_power_method(M, k)[0]
        err = max(0.0, 1.0 - float(u @ model.v1) ** 2)
    else:
        coo = M.tocoo()
        up = coo.row <= coo.col
        err = _op_error(model, (coo.row[up].astype(np.int64), coo.col[up].astype(np.int64), coo.data[up]))
    return SimResult(err, True, {
        "label": SIMULATED, "method": "privcov" if error == "operator" else "privcov_power",
        "n_samples": float(n), "gumbel_scale" if gumbel else "laplace_scale": b, "selection": selection,
        "release_sigma": plan.release_sigma,
        "clip": plan.clip, "p_clip": clip_probability(model, n, plan.clip), "epsilon": epsilon, "delta": delta,
        "row_clip": plan.row_clip, "p_row_clip_bound": row_clip_probability(model, n, plan.row_clip),
        "approximations": ["off-block second-moment entries Gaussian and independent; raw value of a selected "
                           + ("off-block entry drawn given its key on a grid, and offered to row j with its own key"
                              if gumbel else "off-block entry independent of its score; (i,j) and (j,i) raw values "
                              "drawn apart")],
    })


def simulate_privpca(model: BlockModel, n: float, epsilon: float, delta: float, rng, *, gap: float | None = None,
                     sigma: float | None = None, norm_fraction: float = 0.5, n_batches: int | None = None,
                     tau: float | None = None, beta: float | None = None) -> SimResult:
    """PrivNorm + PrivPCA (:class:`~dpdist.SparsePCA`, Theorem 3) on a Model-2 block model
    (one support block and a bulk), with the estimator's own set-up, tests and releases.

    The rows are taken as mean-zero: the estimator simulated is ``SparsePCA(...,
    assume_centered=True)``, whose whole budget goes to PrivNorm and PrivPCA. The default
    estimator first spends a share on a private mean (less budget for the tests, so
    more batches and a larger tau); compare with its plan only at ``assume_centered=True``.

    ``gap`` and ``sigma`` default to the model's (as a user who knows the model would pass).
    Returns sin^2 of the released component, 1.0 when a test returned bottom.
    """
    from dpdist.privacy.pca_calibration import split_budget

    (en, dn), (ep, dp) = split_budget(epsilon, delta, norm_fraction)
    return _simulate_friendly(model, n, rng, (en, dn), (ep, dp), gap=gap, sigma=sigma, n_batches=n_batches,
                              tau=tau, beta=beta, epsilon=epsilon, delta=delta)


def simulate_privnorm(model: BlockModel, n: float, epsilon: float, delta: float, rng, *, gap: float | None = None,
                      sigma: float | None = None, n_batches: int | None = None, tau: float | None = None,
                      beta: float | None = None) -> SimResult:
    """PrivNorm alone (:class:`~dpdist.SpectralNorm`, Algorithm 3, the whole budget on the norm)
    on a Model-2 block model, with the estimator's own set-up, tests and release (the same
    draws as :func:`simulate_privpca`'s first stage).

    ``error`` is ``|lambda_hat - lambda_1| / lambda_1``, 1.0 when a test returned bottom;
    ``info["lambda_hat"]`` the released norm.
    """
    return _simulate_friendly(model, n, rng, (float(epsilon), float(delta)), None, gap=gap, sigma=sigma,
                              n_batches=n_batches, tau=tau, beta=beta, epsilon=epsilon, delta=delta)


def _simulate_friendly(model: BlockModel, n: float, rng, norm_budget, pca_budget, *, gap, sigma, n_batches, tau,
                       beta, epsilon, delta) -> SimResult:
    """The shared body of :func:`simulate_privpca` (``pca_budget`` given) and
    :func:`simulate_privnorm` (``pca_budget`` None: stop after the norm's release)."""
    from dpdist.algorithms.friendly_steps import friendly_setup, friendly_tests, release_norm, release_pca
    from dpdist.privacy.mechanisms.friendly import FriendlyTestMechanism, PrivNormMechanism, PrivPCAMechanism
    from dpdist.engine.friendly.kernels import FriendlyStats, friendly_weights
    from dpdist.privacy.noise import NoiseSeed
    from dpdist.privacy.pca_calibration import (
        DEFAULT_BETA,
        friendly_test_calibration,
        privnorm_calibration,
        privpca_calibration,
    )

    if model.n_blocks != 1:
        raise ValidationError("the PrivNorm / PrivPCA simulation needs a Model-2 block model (one support block plus a "
                              "bulk)")
    beta = DEFAULT_BETA if beta is None else float(beta)
    gap = model.gap if gap is None else float(gap)
    sigma = math.sqrt(model.sigma2) if sigma is None else float(sigma)
    d, k = model.n_features, model.k
    en, dn = norm_budget
    budgets = [norm_budget] if pca_budget is None else [norm_budget, pca_budget]
    setup = friendly_setup(int(n), d, k, gap, sigma, n_batches, tau, beta, budgets)
    m, t = setup.n_batches, setup.tau
    sizes = np.asarray(setup.sizes, dtype=np.int64)
    seed = NoiseSeed(int(rng.integers(0, 1 << 62)), seeded=True)
    info = {"label": SIMULATED, "method": "privnorm" if pca_budget is None else "privpca", "n_samples": float(n),
            "n_batches": m, "tau": t,
            "epsilon": epsilon, "delta": delta, "p_clip": 0.0,
            "approximations": ["batches separated or made non-k-RCS only by their support blocks; Sigma_bar's "
                               "bulk diagonal Gaussian with the exact moments; off-support entries below tau"]}
    # --- per-batch statistics (exact on the support block and for the bulk's top two) -------
    s = model.block_size
    reps = np.repeat(model.blocks, m, axis=0)
    batch_blocks = np.stack([wishart_blocks(model.blocks, float(b), rng)[0] for b in sizes]) if m <= 64 else None
    if batch_blocks is None:
        # group batches of equal size (at most two sizes) for one vectorised Bartlett draw each
        batch_blocks = np.empty((m, s, s))
        for b in np.unique(sizes):
            idx = np.flatnonzero(sizes == b)
            batch_blocks[idx] = wishart_blocks(reps[idx], float(b), rng)
    bulk2 = bulk_top_two(rng, model.n_bulk, model.bulk_variance, sizes)
    kept = np.where(np.abs(batch_blocks) > t, batch_blocks, 0.0)  # T_tau on the block
    row_counts = (kept != 0).sum(axis=2).max(axis=1)
    krcs = row_counts <= k
    bw = np.linalg.eigvalsh(kept)[:, ::-1]
    cand = np.concatenate([bw[:, :2] if s > 1 else np.column_stack([bw[:, 0], np.full(m, -np.inf)]),
                           np.where(bulk2 > t, bulk2, 0.0 if model.n_bulk > 2 else -np.inf)], axis=1)
    cand = -np.sort(-cand, axis=1)
    lam1, lam2 = cand[:, 0].copy(), cand[:, 1].copy()
    lam1[~krcs] = np.nan
    lam2[~krcs] = np.nan
    # friends: ||Sigma_i - Sigma_j||_max <= 2 tau, on the support block (exact)
    from scipy.spatial.distance import cdist

    iu = np.triu_indices(s)
    flat = batch_blocks[:, iu[0], iu[1]]
    sep = cdist(flat, flat, "chebyshev") > 2 * t
    friend_counts = (m - sep.sum(axis=1)).astype(np.int64)
    weights, z = friendly_weights(friend_counts, m)
    # probability of the events the simulation ignores (an off-support entry above tau in some
    # batch; two batches separated off the support), for the record
    bmin = float(sizes.min())
    v_off = model.lambda1 * max(model.bulk_variance, 1e-300) / bmin
    pairs_off = d * d / 2.0
    p_exceed = min(1.0, m * pairs_off * 2.0 * math.exp(float(special.log_ndtr(-t / math.sqrt(v_off)))))
    p_sep = min(1.0, m * m * pairs_off * 2.0 * math.exp(float(special.log_ndtr(-2 * t / math.sqrt(4 * v_off)))))
    info["approx_event_probability"] = min(1.0, p_exceed + p_sep)
    stats = FriendlyStats(m, d, sizes, np.ones(m, bool), krcs, lam1, lam2, friend_counts, weights, z)
    # Sigma_bar = sum p_i Sigma_i / Z: the support block exactly from the batch blocks; the bulk
    # diagonal (i.i.d. over coordinates) with the exact mean and variance of the weighted chi^2
    if z > 0:
        sbar = np.einsum("i,iab->ab", weights, batch_blocks) / z
        var = model.bulk_variance**2 * float(np.sum(weights**2 * 2.0 / sizes)) / z**2
    else:
        sbar, var = np.zeros((s, s)), 0.0
    bulk_bar = model.bulk_variance + math.sqrt(var) * gaussian_from_uniform(open_uniforms(rng, model.n_bulk), 1.0)
    r0, c0 = np.triu_indices(s)
    bv = sbar[r0, c0]
    keep = np.abs(bv) > 5 * t
    bulk_idx = s + np.arange(model.n_bulk)
    bk = np.abs(bulk_bar) > 5 * t
    entries = (np.concatenate([r0[keep], bulk_idx[bk]]), np.concatenate([c0[keep], bulk_idx[bk]]),
               np.concatenate([bv[keep], bulk_bar[bk]]))
    # --- the estimator's own tests and releases ---------------------------------------
    tests = FriendlyTestMechanism.from_calibration(friendly_test_calibration(en, dn, m), "norm")
    out = friendly_tests(stats, gap, None, tests, seed)
    info["tests"] = {"norm": out}
    if not (out["count_passed"] and out.get("weight_passed", False)):
        return SimResult(1.0, False, info)
    lam_hat = release_norm(entries, d, PrivNormMechanism.from_calibration(privnorm_calibration(en, dn, k, t)), seed)
    info["lambda_hat"] = lam_hat
    if pca_budget is None:
        return SimResult(abs(float(lam_hat) - model.lambda1) / model.lambda1, True, info)
    ep, dp = pca_budget
    if not lam_hat > 0:
        return SimResult(1.0, False, info)
    tests = FriendlyTestMechanism.from_calibration(friendly_test_calibration(ep, dp, m), "pca")
    out = friendly_tests(stats, gap, float(lam_hat), tests, seed)
    info["tests"]["pca"] = out
    if not (out["count_passed"] and out.get("weight_passed", False)):
        return SimResult(1.0, False, info)
    cal = privpca_calibration(ep, dp, k, t, gap, float(lam_hat))
    rel = release_pca(entries, d, k, PrivPCAMechanism.from_calibration(cal, d), seed)
    info["sigma_priv"] = cal.sigma
    vec = np.asarray(rel["values"], dtype=np.float64)
    cos = float(vec @ model.v1[rel["support"]]) / max(float(np.linalg.norm(vec)), 1e-300)
    return SimResult(max(0.0, 1.0 - cos * cos), True, info)
