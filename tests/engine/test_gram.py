"""Tiled clipped second moments against a NumPy oracle."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from dpdist.engine.gram import block_clip, clipped_second_moment, nonfinite_guard
from dpdist.exceptions import ValidationError


def oracle(x, clip):
    y = np.sign(x) * np.minimum(np.abs(x), clip)
    return y.T @ y / x.shape[0]


@pytest.mark.parametrize("row_chunk,col_chunk,tile", [(100, 13, 13), (37, 40, 8), (1000, 40, 64), (250, 7, 16)])
def test_second_moment_is_invariant_to_chunking_and_tiling(rng, row_chunk, col_chunk, tile):
    x = rng.standard_t(3, size=(1000, 40))
    S = clipped_second_moment(da.from_array(x, chunks=(row_chunk, col_chunk)), 1.7, tile=tile)
    assert max(S.chunks[0]) <= min(tile, 40) and max(S.chunks[1]) <= min(tile, 40)
    np.testing.assert_allclose(S.compute(scheduler="sync"), oracle(x, 1.7), rtol=1e-12, atol=1e-14)


def test_block_clip_is_entrywise_truncation():
    x = np.array([[-5.0, -1.0, 0.0, 0.5, 9.0]])
    np.testing.assert_array_equal(block_clip(x, 2.0), [[-2.0, -1.0, 0.0, 0.5, 2.0]])


def test_nonfinite_guard(rng):
    x = rng.standard_normal((50, 4))
    x[3, 1] = np.nan
    x[7, 2] = np.inf
    X = da.from_array(x, chunks=(20, 4))
    _, finite = nonfinite_guard(X, "raise")
    assert not finite.compute(scheduler="sync")
    Z, none = nonfinite_guard(X, "zero")
    assert none is None
    z = Z.compute(scheduler="sync")
    assert z[3, 1] == 0 and z[7, 2] == 0 and np.isfinite(z).all()
    with pytest.raises(ValidationError, match="on_nonfinite"):
        nonfinite_guard(X, "drop")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nonfinite_rows_become_zero_rows_whatever_the_column_chunks(dtype):
    # one column chunk takes the per-block path (the block itself when all rows are finite),
    # several the masked one: the same rows, the dtype kept, finite rows untouched bit for bit
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 7)).astype(dtype)
    x[3, 2], x[50, 0], x[51, 6], x[299, 3] = np.nan, np.inf, -np.inf, np.nan
    x[10] = np.finfo(dtype).max
    x[11] = np.finfo(dtype).tiny / 4  # subnormal
    want = x.copy()
    want[[3, 50, 51, 299]] = 0
    for chunks in ((300, 7), (64, 7), (64, 3)):
        got = nonfinite_guard(da.from_array(x, chunks=chunks), "zero")[0].compute(scheduler="sync")
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)
    clean = np.ones((40, 3), dtype=dtype)
    np.testing.assert_array_equal(nonfinite_guard(da.from_array(clean, chunks=(16, 3)), "zero")[0].compute(), clean)


_PEAKS = """
import json, sys, tracemalloc
import numpy as np
from dpdist.engine.gram import block_zero_nonfinite

x = np.random.default_rng(0).standard_normal((2_000, 30)).astype(sys.argv[1])
y = x.copy()
y[10, 2], y[11, 0] = np.nan, -np.inf

def peak(block):
    tracemalloc.start()
    try:
        block_zero_nonfinite(block)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

peak(x), peak(y)  # first calls may allocate caches once
print(json.dumps([peak(x), peak(y), x.nbytes]))
"""


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_zeroing_nonfinite_rows_does_the_same_work_whether_or_not_the_block_holds_one(dtype):
    """The block costs the same (same allocations, a fresh output either way), so the time a
    block takes does not say whether it held a NaN or an infinity; the values are those of
    the plain rule (bad rows zero, every other entry as read, -0.0 kept)."""
    import json
    import subprocess
    import sys

    from dpdist.engine.gram import block_zero_nonfinite

    # memory peaks measured in a fresh interpreter: tracemalloc counts every thread, and a long
    # test run has dask's and distributed's threads allocating meanwhile
    proc = subprocess.run([sys.executable, "-c", _PEAKS, np.dtype(dtype).name], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    peak_x, peak_y, nbytes = json.loads(proc.stdout)
    assert peak_x >= nbytes and peak_y >= nbytes  # both blocks are copied
    assert abs(peak_x - peak_y) < 0.01 * nbytes  # copying only a bad block differed by about 75%

    x = np.random.default_rng(0).standard_normal((2_000, 30)).astype(dtype)
    x[3, 4] = -0.0
    y = x.copy()
    y[10, 2], y[11, 0] = np.nan, -np.inf
    out_x, out_y = block_zero_nonfinite(x), block_zero_nonfinite(y)
    assert not np.shares_memory(out_x, x) and not np.shares_memory(out_y, y)
    expected = y.copy()
    expected[[10, 11]] = 0
    for out, want in ((out_x, x), (out_y, expected)):
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, want)
        assert np.array_equal(np.signbit(out), np.signbit(want))
