"""Row-wise noisy top-k over tiles, merged by a tree: equal to the global selection."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from dpdist.engine.topk import chunk_row_topk, combine_row_topk, row_topk_release


def zero_noise(rows, cols):
    return np.zeros((len(rows), len(cols)))


def oracle_topk(S, k):
    """Per row, the k best columns by (|S_ij| desc, j asc)."""
    out = []
    for row in np.abs(S):
        order = np.lexsort((np.arange(len(row)), -row))
        out.append(order[:k])
    return np.array(out)


def run_release(S_np, k, row_chunk, col_chunk, split_every=2):
    S = da.from_array(S_np, chunks=(row_chunk, col_chunk))
    parts = row_topk_release(S, k, zero_noise, lambda r, c, raw: raw, split_every=split_every)
    res = sorted(dask.compute(*parts, scheduler="sync"), key=lambda r: r.row_start)
    return np.vstack([r.cols for r in res]), np.vstack([r.values for r in res]), np.concatenate([r.diag for r in res])


@pytest.mark.parametrize("row_chunk,col_chunk", [(30, 30), (7, 5), (11, 29), (1, 3)])
def test_tree_merge_equals_global_topk(rng, row_chunk, col_chunk):
    S = rng.standard_normal((30, 30))
    cols, values, diag = run_release(S, 4, row_chunk, col_chunk)
    np.testing.assert_array_equal(np.sort(cols, axis=1), np.sort(oracle_topk(S, 4), axis=1))
    np.testing.assert_array_equal(values, np.take_along_axis(S, cols, axis=1))
    np.testing.assert_array_equal(diag, np.diag(S))


def test_ties_are_broken_by_column_index_whatever_the_tiling():
    S = np.ones((6, 12))  # all scores tie
    for col_chunk in (12, 5, 1):
        cols, _, _ = run_release(S, 3, 6, col_chunk)
        np.testing.assert_array_equal(np.sort(cols, axis=1), np.tile([0, 1, 2], (6, 1)))


def test_noise_is_added_to_scores_only():
    tile = np.zeros((2, 5))

    def noise(rows, cols):  # makes column 3 the winner of every row
        out = np.zeros((len(rows), len(cols)))
        out[:, 3] = 10.0
        return out

    c = chunk_row_topk(tile, 0, 0, 1, noise)
    np.testing.assert_array_equal(c.cols[:, 0], [3, 3])
    np.testing.assert_array_equal(c.raw[:, 0], [0.0, 0.0])  # the raw (un-noised) value is kept


def test_combine_keeps_diagonal_from_the_diagonal_tile():
    S = np.arange(16.0).reshape(4, 4)
    a = chunk_row_topk(S[:2, :2], 0, 0, 1, zero_noise)
    b = chunk_row_topk(S[:2, 2:], 0, 2, 1, zero_noise)
    m = combine_row_topk([b, a], 1)
    np.testing.assert_array_equal(m.diag_raw, [0.0, 5.0])
    np.testing.assert_array_equal(m.cols[:, 0], [3, 3])


def test_guard_false_releases_nothing():
    S = da.from_array(np.ones((4, 4)), chunks=2)
    parts = row_topk_release(S, 1, zero_noise, lambda r, c, raw: raw, guard=False)
    assert all(p is None for p in dask.compute(*parts, scheduler="sync"))


# ---------------------------------------------------------------------------------------
# lazy selection samplers (the LazyNoise protocol) and the symmetric mode
# ---------------------------------------------------------------------------------------


def lazy_sampler(d, scale=0.5, bound=4.0):
    """A lazy sampler on the lattice 2**-10 (the test's data are multiples of 2**-10, so the
    dense path's ``|S + noise|`` is the lazy path's integer score times 2**-10)."""
    from dpdist.privacy.noise.lattice import Lattice, LatticeNoise
    from dpdist.privacy.noise.lazy_selection import LazySelectionNoise
    from dpdist.privacy.noise.streams import NoiseSeed

    lat = Lattice(-10)
    return LazySelectionNoise(NoiseSeed(21, True), "t", LatticeNoise("laplace", lat, lat.units(scale)), d,
                              score_bound=bound, fanout=4)


def release_all(S, k, noise, chunks, symmetric):
    S = da.from_array(S, chunks=chunks)
    parts = row_topk_release(S, k, noise, lambda r, c, raw: raw, split_every=3, symmetric=symmetric)
    res = sorted(dask.compute(*parts, scheduler="sync"), key=lambda r: r.row_start)
    return np.vstack([r.cols for r in res]), np.vstack([r.values for r in res]), np.concatenate([r.diag for r in res])


@pytest.mark.parametrize("scale", [0.5, 50.0])  # data- and noise-dominated
def test_lazy_sampler_equals_the_dense_path_with_its_full_noise_for_every_tiling(rng, scale):
    d, k = 45, 4
    A = rng.standard_normal((45, d))
    S = np.rint(np.clip(A.T @ A / 45, -4, 4) * 1024) / 1024  # symmetric, |S| <= the bound, on the lattice
    lz = lazy_sampler(d, scale)
    full = lz.full_noise(np.arange(d)) / 1024  # lattice units -> data units (exact)

    def dense(rows, cols):
        return full[np.ix_(rows, cols)]

    ref = release_all(S, k, dense, 45, False)
    for chunks in (45, 16, 7):
        for symmetric in (False, True):
            got = release_all(S, k, lz, chunks, symmetric)
            for a, b in zip(got, ref):
                np.testing.assert_array_equal(a, b)


def test_symmetric_mode_reads_each_upper_tile_once_and_never_a_lower_one(rng):
    from dpdist.engine.gram import clipped_second_moment

    S = clipped_second_moment(da.from_array(rng.standard_normal((30, 12)), chunks=(30, 4)), 3.0, tile=4)
    parts = row_topk_release(S, 2, zero_noise, lambda r, c, raw: raw, symmetric=True)
    from dask.callbacks import Callback

    ran: list[str] = []
    with Callback(pretask=lambda key, dsk, state: ran.append(str(key))):
        dask.compute(*parts, scheduler="sync")
    assert len([k for k in ran if "_symmetric_task" in k]) == 6  # 3 x 4 / 2 upper tiles
    assert not [k for k in ran if "transpose" in k]  # no lower tile is built
    with pytest.raises(ValueError, match="square tiles"):
        row_topk_release(da.from_array(np.eye(12), chunks=(4, 6)), 2, zero_noise, lambda r, c, raw: raw,
                         symmetric=True)
