"""The error of a simulated estimate, given as upper-triangle triples of a block model's matrix:
``||M - Sigma||_op`` and ``sin^2`` to the leading eigenvector, computed on the connected pieces
the off-block entries create (dense, or by Lanczos for large pieces).
"""

from __future__ import annotations

import numpy as np

from dpdist.data.block_models import BlockModel


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
