"""Simulated PrivCov: the noise scales and clip from the estimator's ``plan()``, the selection
noise drawn from the same laws.

Approximate: off-block entries of the second moment are drawn as independent ``N(0, Sigma_hat_ii
mean(Sigma_jj) / n)`` (their law given the row's own column of data is exactly Gaussian with
variance ``Sigma_hat_ii Sigma_jj / n``; we drop the correlation within the other block, use the
mean of Sigma_jj, and draw the (i, j) and (j, i) raw values of a selected off-block pair
independently). With the Laplace selection, a selected off-block raw value is drawn
independently of its selection score (exact when the Laplace scale dominates the sampling
spread, which is the regime of n* there); with the Gumbel selection, whose scale is comparable
to the sampling spread near n*, it is drawn from its law given its key (on a grid of 256
values), and the row j of a selected off-block entry (i, j) gets column i as a candidate with
the same raw value and its own key (the rows' off-block order statistics are otherwise
independent).
"""

from __future__ import annotations

import math

import numpy as np

from dpdist.data.block_models import BlockModel, open_uniforms
from dpdist.exceptions import ValidationError
from dpdist.privacy.noise.streams import gaussian_from_uniform, laplace_from_uniform
from dpdist.simulate.draws import _offblock_scale2, _sample_hat
from dpdist.simulate.errors import _op_error
from dpdist.simulate.result import SIMULATED, SimResult, clip_probability, row_clip_probability
from dpdist.simulate.statistics import normal_gumbel_conditional_abs, normal_gumbel_isf, normal_laplace_abs_isf

__all__ = ["simulate_privcov"]


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
    :func:`dpdist.privacy.mechanisms.privcov.calibration.privcov_calibration`, ``privcov_zcdp_calibration`` or
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
