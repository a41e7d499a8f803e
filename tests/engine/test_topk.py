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
