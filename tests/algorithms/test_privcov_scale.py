"""PrivCov at scale: memory O(tile + d k) (no task ever holds a d x d array, the client gathers
only per-row-block releases) and the same output for the same seed whatever the chunking."""

from __future__ import annotations

import dask.array as da
import numpy as np
from dask.callbacks import Callback

import dpdist


def fit(X, **kw):
    return dpdist.SparseCovariance(3, 1.0, 1e-6, clip=3.0, random_state=5, scheduler="synchronous",
                                   **kw).fit(X)


def test_no_task_holds_a_d_by_d_array_or_a_lower_tile():
    n, d, tile = 40, 300, 64
    X = da.from_array(np.random.default_rng(0).standard_normal((n, d)), chunks=(n, tile))
    biggest: list[int] = []
    names: list[str] = []

    def arrays(x):
        if isinstance(x, np.ndarray):
            yield x
        elif isinstance(x, (tuple, list)):
            for y in x:
                yield from arrays(y)
        elif hasattr(x, "__dict__"):  # Candidates, RowRelease, RowFrontier
            for y in vars(x).values():
                yield from arrays(y)

    def post(key, result, dsk, state, worker_id):
        names.append(str(key))
        biggest.append(max((a.size for a in arrays(result)), default=0))

    with Callback(posttask=post):
        est = fit(X, tile_size=tile)
    assert est.covariance_.shape == (d, d)
    assert max(biggest) <= tile * d // 4 < d * d // 16  # a tile (64 x 64) or an input chunk (40 x 64)
    assert not [k for k in names if "transpose" in k]  # lower tiles of the Gram are never built


def test_same_seed_same_release_whatever_the_chunking_and_tile():
    X = np.random.default_rng(1).standard_normal((120, 70))
    ref = fit(da.from_array(X, chunks=(120, 70)), tile_size=70)
    for chunks, tile in (((50, 70), 16), ((120, 9), 25), ((7, 33), 64)):
        got = fit(da.from_array(X, chunks=chunks), tile_size=tile)
        np.testing.assert_array_equal(got.selected_, ref.selected_)
        np.testing.assert_allclose(got.release_.values["selected_values"], ref.release_.values["selected_values"],
                                   rtol=0, atol=1e-12)  # Gram sums in a different order
