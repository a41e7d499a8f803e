"""The FriendlyCore front end against a brute-force NumPy oracle (m^2 pairs, dense matrices)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from dpdist.engine.privpca.graph import batch_labels, consecutive_labels, friendly_pass1, friendly_pass2
from dpdist.engine.privpca.kernels import FriendlyStats, block_separated, friendly_weights
from dpdist.engine.sparse_spectrum import sparse_spectrum
from dpdist.privacy.mechanisms.privpca.calibration import batch_sizes


def oracle(X, labels, m, tau, k):
    """Brute force: batch moments, good-set ingredients, friend counts, weights, T_5tau(Sigma_bar).

    Rows holding NaN or inf are zero rows (the row rule of every estimator)."""
    n, d = X.shape
    X = np.where(np.isfinite(X).all(axis=1, keepdims=True), X, 0.0)
    sizes = np.bincount(labels, minlength=m)
    with np.errstate(all="ignore"):
        S = np.stack([X[labels == i].T @ X[labels == i] / sizes[i] for i in range(m)])
        # the engine defines each batch matrix by its upper triangle
        iu = np.triu_indices(d)
        U = S[:, iu[0], iu[1]]
        S = np.zeros_like(S)
        S[:, iu[0], iu[1]] = U
        S[:, iu[1], iu[0]] = U
        diff = np.abs(S[:, None] - S[None, :])  # (m, m, d, d)
        friends = (diff <= 2 * tau).all(axis=(2, 3))  # NaN compares False: no friends
    f = friends.sum(axis=1)
    finite = np.isfinite(S).all(axis=(1, 2))
    T = np.where(np.abs(S) > tau, S, 0.0)
    krcs = finite & ((T != 0).sum(axis=2).max(axis=1) <= k)
    lam1 = np.full(m, np.nan)
    lam2 = np.full(m, np.nan)
    for i in np.flatnonzero(krcs):
        w = np.linalg.eigvalsh(T[i])
        lam1[i], lam2[i] = w[-1], w[-2]
    p = np.clip((f - m / 2) / (m / 6), 0, 1)
    Z = p.sum()
    sel = p > 0
    sbar = (p[sel, None, None] * S[sel]).sum(axis=0) / Z if Z > 0 else None
    return dict(f=f, finite=finite, krcs=krcs, lam1=lam1, lam2=lam2, p=p, Z=Z, sbar=sbar)


def make_data(rng, labels, d, outliers=(), nan_batch=None):
    X = rng.standard_normal((labels.size, d))
    for i in outliers:
        X[labels == i] *= 4.0  # a batch far from the others
    if nan_batch is not None:
        X[np.flatnonzero(labels == nan_batch)[1], 2] = np.nan
    return X


def run_engine(X, labels, sizes, tau, k, chunks, tile_bytes):
    dX = da.from_array(X, chunks=chunks)
    stats = dask.compute(
        friendly_pass1(dX, labels=labels, sizes=sizes, tau=tau, k=k, tile_bytes=tile_bytes),
        scheduler="sync",
    )[0]
    return dX, stats


@pytest.mark.parametrize(
    "chunks,tile_bytes,shuffle,tau",
    [
        ((40, 10), 1 << 30, False, 0.55),
        ((33, 4), 8 * 20 * 5 * 5, False, 0.40),
        ((57, 10), 8 * 20 * 4 * 4, True, 0.40),
    ],
)
def test_friend_counts_and_weights_equal_brute_force_with_outlier_batches(chunks, tile_bytes, shuffle, tau):
    rng = np.random.default_rng(11)
    m, n, d, k = 24, 730, 10, 3
    sizes = batch_sizes(n, m)  # unequal batches: 31 and 30 rows
    perm = rng.permutation(n) if shuffle else None
    labels = batch_labels(n, sizes, perm)
    X = make_data(rng, labels, d, outliers=(3, 17), nan_batch=8)
    want = oracle(X, labels, m, tau, k)
    # a mix of friends and strangers (and, at tau = 0.4, fractional weights), so the test can fail
    assert 0 < (want["f"] > m / 2).sum() < m
    assert len(set(want["f"].tolist())) >= 3
    _, got = run_engine(X, labels, sizes, tau, k, chunks, tile_bytes)
    assert isinstance(got, FriendlyStats)
    np.testing.assert_array_equal(got.friend_counts, want["f"])
    np.testing.assert_array_equal(got.finite, want["finite"])
    np.testing.assert_array_equal(got.krcs, want["krcs"])
    np.testing.assert_allclose(got.lambda_1, want["lam1"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.lambda_2, want["lam2"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.weights, want["p"], rtol=0, atol=0)
    assert got.weight_sum == pytest.approx(want["Z"], rel=1e-14)
    # the batch holding a NaN row: that row is a zero row (row rule), the batch stays finite
    assert got.finite[8] and got.friend_counts[8] == want["f"][8]
    assert got.friend_counts[3] <= 1 and got.friend_counts[17] <= 1  # outliers befriend nobody else


def test_pass2_thresholded_average_equals_brute_force_with_nan_rows_as_zero_rows():
    rng = np.random.default_rng(5)
    m, b, d, k, tau = 24, 400, 8, 8, 0.18
    sizes = batch_sizes(m * b, m)
    labels = batch_labels(m * b, sizes)
    X = make_data(rng, labels, d, outliers=(0,), nan_batch=5)
    X[:, 1] += X[:, 0]  # a correlated pair so T_5tau keeps an off-diagonal entry
    want = oracle(X, labels, m, tau, k)
    dX, stats = run_engine(X, labels, sizes, tau, k, (50, 8), 8 * 24 * 4 * 4)
    r, c, v = dask.compute(friendly_pass2(dX, stats, labels=labels, threshold=5 * tau, tile_bytes=8 * 3 * 3), scheduler="sync")[0]
    assert np.all(np.isfinite(v)) and np.all(r <= c)
    got = np.zeros((d, d))
    got[r, c] = v
    got[c, r] = v
    ref = np.where(np.abs(want["sbar"]) > 5 * tau, want["sbar"], 0.0)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    assert (ref != 0).sum() > d  # off-diagonal entries survive
    assert 0 < (stats.weights > 0).sum() < m  # the outlier batch weighs 0
    assert stats.weights[5] > 0  # the batch with a NaN row counts, that row as a zero row


def brute_separated(values, two_tau):
    with np.errstate(all="ignore"):
        return (np.abs(values[:, None, :] - values[None, :, :]) > two_tau).any(axis=2)


@pytest.mark.parametrize("seed", range(4))
def test_span_fast_path_equals_pairwise_slow_path(seed):
    rng = np.random.default_rng(seed)
    m, P = 30, 3000
    values = rng.normal(0, 0.1, (m, P))
    values[rng.integers(0, m, 3)] += rng.normal(0, 1.0, (3, P))  # outlier batches: many wide entries
    values[:, rng.integers(0, P, 40)] += rng.normal(0, 0.5, (m, 40))  # scattered wide entries
    two_tau = 0.5
    got = block_separated(values, two_tau)
    want = brute_separated(values, two_tau)
    np.testing.assert_array_equal(got, want)
    assert want.any() and not want.all()


def test_span_fast_path_boundary_is_exact():
    # span exactly 2 tau: not separated; a hair above: separated
    v = np.array([[0.0, 1.0], [0.5, 1.0], [0.25, 1.0]])
    assert not block_separated(v, 0.5).any()
    v[1, 0] = np.nextafter(0.5, 1.0)
    sep = block_separated(v, 0.5)
    np.testing.assert_array_equal(sep, brute_separated(v, 0.5))
    assert sep[0, 1] and sep[1, 0] and not sep[0, 2]


def test_friendly_weights_formula():
    p, z = friendly_weights(np.array([0, 12, 13, 16, 18, 24]), 24)
    np.testing.assert_allclose(p, [0, 0, 0.25, 1.0, 1.0, 1.0])
    assert z == pytest.approx(3.25)


@pytest.mark.parametrize("seed", range(3))
def test_sparse_spectrum_equals_dense_eigendecomposition(seed):
    rng = np.random.default_rng(seed)
    n = 40
    A = np.zeros((n, n))
    idx = rng.integers(0, n, (60, 2))
    A[idx[:, 0], idx[:, 1]] = rng.normal(size=60)
    A = np.triu(A + A.T)
    A[5, :] = 0
    A[:, 5] = 0  # an isolated vertex
    r, c = np.nonzero(A)
    spec = sparse_spectrum(r, c, A[r, c], n, vectors=True)
    full = A + np.triu(A, 1).T
    w, q = np.linalg.eigh(full)
    assert spec.largest() == pytest.approx(w[-1], rel=1e-12)
    assert spec.operator_norm() == pytest.approx(np.abs(w).max(), rel=1e-12)
    allv = np.sort(np.concatenate(spec.comp_values + [np.zeros(spec.n_isolated)]))
    np.testing.assert_allclose(allv, w, atol=1e-12)
    sup, vals = spec.top_vector()
    u = np.zeros(n)
    u[sup] = vals
    assert np.linalg.norm(u) == pytest.approx(1.0)
    np.testing.assert_allclose(full @ u, w[-1] * u, atol=1e-10)


def test_large_components_use_the_sparse_solver_and_agree(monkeypatch):
    import dpdist.engine.sparse_spectrum as spectrum

    monkeypatch.setattr(spectrum, "DENSE_COMPONENT_LIMIT", 5)
    rng = np.random.default_rng(3)
    n = 60
    A = np.zeros((n, n))
    for i in range(29):  # a path on vertices 0..29 (one large component) plus a 3-clique
        A[i, i + 1] = rng.normal()
    A[np.arange(30), np.arange(30)] = rng.normal(size=30)
    A[40, 41], A[40, 42], A[41, 42] = 0.5, -0.3, 0.2
    r, c = np.nonzero(A)
    full = A + np.triu(A, 1).T
    w, _ = np.linalg.eigh(full)
    spec = spectrum.sparse_spectrum(r, c, A[r, c], n, vectors=True)
    assert spec.largest() == pytest.approx(w[-1], rel=1e-9)
    assert spec.operator_norm() == pytest.approx(np.abs(w).max(), rel=1e-9)
    sup, vals = spec.top_vector()
    u = np.zeros(n)
    u[sup] = vals
    np.testing.assert_allclose(full @ u, w[-1] * u, atol=1e-8)
    again = spectrum.sparse_spectrum(r, c, A[r, c], n, vectors=True).top_vector()
    np.testing.assert_array_equal(again[1], vals)  # deterministic start vector


def test_pass1_in_memory_bounded_groups_equals_one_graph():
    from dpdist.engine.privpca.graph import combine_pass1_groups, friendly_pass1_groups

    rng = np.random.default_rng(4)
    m, n, d, k, tau = 24, 720, 40, 3, 0.6
    sizes = batch_sizes(n, m)
    labels = batch_labels(n, sizes)
    X = make_data(rng, labels, d, outliers=(5,))
    dX = da.from_array(X, chunks=(100, 40))
    kw = dict(labels=labels, sizes=sizes, tau=tau, k=k, tile_bytes=8 * m * 16 * 16)  # tiles of 16 columns
    one = dask.compute(friendly_pass1(dX, **kw), scheduler="sync")[0]
    groups = friendly_pass1_groups(dX, group_bytes=8 * m * 16 * 16, **kw)
    assert len(groups) > 3
    parts = [dask.compute(g, scheduler="sync")[0] for g in groups]
    many = combine_pass1_groups(*parts, n_features=d, k=k, sizes=np.asarray(sizes))
    np.testing.assert_array_equal(many.friend_counts, one.friend_counts)
    np.testing.assert_array_equal(many.krcs, one.krcs)
    np.testing.assert_array_equal(many.weights, one.weights)
    np.testing.assert_allclose(many.lambda_1, one.lambda_1, rtol=1e-12)
    want = oracle(X, labels, m, tau, k)
    np.testing.assert_array_equal(many.friend_counts, want["f"])
    np.testing.assert_array_equal(many.krcs, want["krcs"])
    assert len(set(want["f"].tolist())) >= 3


def test_huge_finite_values_and_overflowing_batches_are_handled_without_warnings():
    rng = np.random.default_rng(9)
    m, n, d, k, tau = 24, 480, 6, 3, 0.6
    sizes = batch_sizes(n, m)
    labels = batch_labels(n, sizes)
    X = make_data(rng, labels, d)
    X[labels == 2] *= 1e150  # moments ~1e300: finite, but their differences overflow
    X[labels == 3] *= -1e150
    X[np.flatnonzero(labels == 4)[0]] = 1e200  # its square overflows: a non-finite batch
    want = oracle(X, labels, m, tau, k)
    _, got = run_engine(X, labels, sizes, tau, k, (50, 6), 1 << 30)
    np.testing.assert_array_equal(got.friend_counts, want["f"])
    np.testing.assert_array_equal(got.finite, want["finite"])
    assert not got.finite[4] and got.friend_counts[4] == 0
    assert got.friend_counts[2] == 1 and got.friend_counts[3] == 1


def test_k_rcs_is_decided_by_row_counts_summed_across_tiles():
    # row 0 of T_tau(Sigma_i) has 4 entries (diagonal, columns 5, 20 and 35), at most 2 in any
    # one 16-column tile: only the sum across tiles shows that it is not 3-RCS
    rng = np.random.default_rng(12)
    m, n, d, k, tau = 24, 2400, 40, 3, 0.3
    sizes = batch_sizes(n, m)
    labels = batch_labels(n, sizes)
    X = rng.standard_normal((n, d))
    spread = labels < 12
    for j in (5, 20, 35):
        X[spread, j] += X[spread, 0]
    want = oracle(X, labels, m, tau, k)
    assert want["krcs"][12:].all() and not want["krcs"][:12].any()
    _, got = run_engine(X, labels, sizes, tau, k, (300, 40), 8 * m * 16 * 16)
    np.testing.assert_array_equal(got.krcs, want["krcs"])
    np.testing.assert_allclose(got.lambda_1, want["lam1"], rtol=1e-10)


def test_consecutive_batches_need_no_label_array():
    rng = np.random.default_rng(8)
    m, n, d, k, tau = 24, 730, 8, 3, 0.5
    sizes = batch_sizes(n, m)
    labels = batch_labels(n, sizes)
    np.testing.assert_array_equal(consecutive_labels(100, 400, np.concatenate([[0], np.cumsum(sizes)])),
                                  labels[100:400])
    X = make_data(rng, labels, d, outliers=(2,))
    dX = da.from_array(X, chunks=(97, 8))
    a = dask.compute(friendly_pass1(dX, labels=labels, sizes=sizes, tau=tau, k=k), scheduler="sync")[0]
    b = dask.compute(friendly_pass1(dX, labels=None, sizes=sizes, tau=tau, k=k), scheduler="sync")[0]
    np.testing.assert_array_equal(a.friend_counts, b.friend_counts)
    np.testing.assert_array_equal(a.weights, b.weights)
    ea = dask.compute(friendly_pass2(dX, a, labels=labels, threshold=tau), scheduler="sync")[0]
    eb = dask.compute(friendly_pass2(dX, b, labels=None, sizes=sizes, threshold=tau), scheduler="sync")[0]
    for x, y in zip(ea, eb):
        np.testing.assert_array_equal(x, y)


def test_separation_with_two_clusters_and_outliers_equals_brute_force():
    rng = np.random.default_rng(21)
    m, P = 40, 4000
    values = rng.normal(0, 0.05, (m, P))
    values[: m // 2, : P // 2] += 1.0  # two clusters, separated on half the entries
    values[[3, 31]] += rng.normal(0, 2.0, (2, P))  # two outliers
    values[:, rng.integers(0, P, 25)] += rng.normal(0, 0.3, (m, 25))
    np.testing.assert_array_equal(block_separated(values, 0.4), brute_separated(values, 0.4))


def _tile_oracle(x, labels, present, ci, cj, clip):
    """Batch sums of rows zeroed (non-finite) and clipped, tile (I, J); upper triangle on a
    diagonal tile."""
    x = np.asarray(x, dtype=np.float64)
    x = np.where(np.isfinite(x).all(axis=1, keepdims=True), np.clip(x, -clip, clip), 0.0)
    out = []
    for b in present:
        xb = x[labels == b]
        s = xb[:, ci[0] : ci[1]].T @ xb[:, cj[0] : cj[1]]
        out.append(np.triu(s) if ci == cj else s)
    return np.stack(out)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shuffle", [False, True])
def test_chunk_group_moments_equal_a_numpy_oracle_for_whole_and_partial_spans(dtype, shuffle):
    from dpdist.engine.privpca.kernels import chunk_group_moments

    rng = np.random.default_rng(31)
    n, d, clip = 300, 20, 2.5
    labels = np.repeat(np.arange(7), [30, 50, 10, 70, 40, 60, 40])
    if shuffle:
        labels = rng.permutation(labels)
    x = rng.standard_normal((n, d)).astype(dtype)
    x[5, 3] = np.nan
    x[17, 0] = -np.inf
    x[40, 7] = 1e30  # clipped
    cols = [(0, 6), (6, 12), (12, 18), (18, 20)]
    whole = [(ci, cj) for a, ci in enumerate(cols) for cj in cols[a:]]  # one syrk a batch, sliced
    partial = [(cols[0], cols[2]), (cols[1], cols[1]), (cols[3], cols[3])]  # 36% of their span: per tile
    # batch sizes of the whole data: batches 0 and 6 are larger than what this chunk holds
    sizes = np.bincount(labels, minlength=7) + np.array([5, 0, 0, 0, 0, 0, 9])
    for tiles in (whole, partial):
        for given in (None, sizes):
            got = chunk_group_moments(x, labels, tiles, clip, given)
            assert len(got) == len(tiles)
            for (ci, cj), (present, sums, done) in zip(tiles, got):
                np.testing.assert_array_equal(present, np.arange(7))
                # batches held whole are finished (divided by their size) in the chunk
                np.testing.assert_array_equal(done, np.zeros(7, bool) if given is None else [0, 1, 1, 1, 1, 1, 0])
                want = _tile_oracle(x, labels, present, ci, cj, clip)
                want[done] /= sizes[done][:, None, None]
                np.testing.assert_allclose(sums, want, rtol=1e-12, atol=1e-12)
                if ci == cj:  # the strict lower triangle of a diagonal tile is exactly zero
                    assert not np.tril(sums, -1).any()


def test_chunk_rows_copies_whatever_the_values():
    """A fresh contiguous copy every time: a view for unchanged columns would make a chunk's
    time say whether it held a non-finite row or an entry beyond the clip."""
    from dpdist.engine.privpca.kernels import chunk_rows, nonfinite_rows

    x = np.random.default_rng(2).standard_normal((50, 6))
    for copy in (False, True):
        got = chunk_rows(x, (1, 4), 10.0, nonfinite_rows(x), copy=copy)
        assert not np.shares_memory(got, x) and got.flags.c_contiguous and np.array_equal(got, x[:, 1:4])
    x[3, 2] = 11.0  # above the clip: clipped
    got = chunk_rows(x, (1, 4), 10.0, nonfinite_rows(x), copy=False)
    assert not np.shares_memory(got, x) and got[3, 1] == 10.0
    x[9, 5] = np.nan  # a non-finite entry outside the columns still zeroes its row
    got = chunk_rows(x, (1, 4), 10.0, nonfinite_rows(x), copy=False)
    assert not got[9].any() and not np.shares_memory(got, x)


def test_nonfinite_rows_of_float32_input():
    from dpdist.engine.privpca.kernels import nonfinite_rows

    x = np.ones((6, 3), dtype=np.float32)
    x[1, 1] = np.nan
    x[3, 0] = np.inf
    x[4] = 3e38  # finite; its float32 row sum overflows: checked entry by entry, not flagged
    np.testing.assert_array_equal(nonfinite_rows(x), [1, 3])


def test_kept_batch_tiles_give_the_sigma_bar_of_a_second_read():
    from dpdist.engine.privpca.graph import combine_pass1_groups, persist_pass1, persist_pass2
    from dpdist.engine.session import open_session

    rng = np.random.default_rng(5)
    m, b, d, k, tau = 24, 400, 40, 8, 0.18
    sizes = batch_sizes(m * b, m)
    labels = batch_labels(m * b, sizes)
    X = make_data(rng, labels, d, outliers=(0,), nan_batch=5)
    X[:, 1] += X[:, 0]
    want = oracle(X, labels, m, tau, k)
    dX = da.from_array(X, chunks=(450, 40))  # chunks cut batches: pieces are added
    tile_bytes = 8 * m * 16 * 16  # column tiles of 16, 16, 8: 6 tiles
    kw = dict(labels=None, sizes=sizes, tau=tau, k=k, tile_bytes=tile_bytes)

    def dense(entries):
        r, c, v = entries
        assert np.all(r <= c) and np.all(np.isfinite(v))
        out = np.zeros((d, d))
        out[r, c] = v
        out[c, r] = v
        return out

    with open_session("synchronous") as session:
        groups, kept = persist_pass1(session, dX, **kw)
        assert len(groups) == 1 and len(kept) == 6  # one group: its batch tiles are kept
        stats = session.apply(combine_pass1_groups, *groups, n_features=d, k=k, sizes=np.asarray(sizes))
        p2 = dict(labels=None, sizes=sizes, threshold=5 * tau, tile_bytes=tile_bytes)
        from_tiles = dense(session.fetch(persist_pass2(session, dX, stats, kept, **p2)))
        reread = dense(session.fetch(persist_pass2(session, dX, stats, None, **p2)))
        groups2, kept2 = persist_pass1(session, dX, group_bytes=8 * m * 16 * 16, **kw)
        assert len(groups2) > 1 and kept2 is None  # several groups: nothing kept, pass 2 reads X
    ref = np.where(np.abs(want["sbar"]) > 5 * tau, want["sbar"], 0.0)
    assert (ref != 0).sum() > d
    np.testing.assert_allclose(from_tiles, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(from_tiles, reread, rtol=1e-12, atol=1e-12)
