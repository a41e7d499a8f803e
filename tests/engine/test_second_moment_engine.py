"""Second-moment engine: per-block kernels against NumPy, dask wiring, mechanism invariants."""

from __future__ import annotations

import math
import os

import dask.array as da
import numpy as np
import pytest

from dpdist.engine import second_moment as eng
from dpdist.engine import second_moment_kernels as kern
from dpdist.engine.runtime import compute
from dpdist.exceptions import ValidationError
from dpdist.privacy.mechanisms.second_moment import GROWTH, level_schedule


def _random_projection(rng, d, k):
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    V = q[:, :k]
    return np.eye(d) - 0.5 * V @ V.T


def _steps(rng, d, radii, s0=1.0):
    steps = [(s0, radii[0])]
    for r in radii[1:]:
        steps.append((math.sqrt(GROWTH) * _random_projection(rng, d, int(rng.integers(0, d + 1))), r))
    return tuple(steps)


def test_clip_bounds_norms_and_keeps_inner_rows(rng):
    x = rng.standard_normal((500, 5)) * rng.uniform(0.1, 10, size=(500, 1))
    y = kern.chunk_clip_rows(x, 3.0)
    norms_x, norms_y = np.linalg.norm(x, axis=1), np.linalg.norm(y, axis=1)
    assert np.all(norms_y <= 3.0 * (1 + 1e-12))
    inside = norms_x <= 3.0
    np.testing.assert_array_equal(y[inside], x[inside])
    np.testing.assert_allclose(norms_y[~inside], 3.0, rtol=1e-12)
    # direction preserved
    np.testing.assert_allclose(y[~inside] / norms_y[~inside, None], x[~inside] / norms_x[~inside, None], rtol=1e-12)
    np.testing.assert_array_equal(kern.chunk_clip_rows(np.zeros((2, 3)), 1.0), np.zeros((2, 3)))


def test_every_level_bounds_norms_by_its_radius(rng):
    s = level_schedule(1000, 4, 1.0, m=2, alpha=0.5, radius=300.0)
    x = rng.standard_normal((2000, 4)) * np.array([1, 10, 100, 1000.0])
    steps = _steps(rng, 4, s.radii)
    for k in range(1, len(steps) + 1):
        y = kern.chunk_apply_steps(x, steps[:k])
        assert np.linalg.norm(y, axis=1).max() <= s.radii[k - 1] * (1 + 1e-12)


def test_apply_steps_matches_a_numpy_oracle(rng):
    x = rng.standard_normal((300, 4))
    A = rng.standard_normal((4, 4))
    y = kern.chunk_apply_steps(x, ((2.0, 5.0), (A, 1.5)))
    z = 2.0 * x
    z = z * np.minimum(1, 5.0 / np.linalg.norm(z, axis=1))[:, None]
    z = z @ A.T
    z = z * np.minimum(1, 1.5 / np.linalg.norm(z, axis=1))[:, None]
    np.testing.assert_allclose(y, z, rtol=1e-13)


def test_nonfinite_rows_become_zero_rows():
    x = np.array([[1.0, 2.0], [np.nan, 1.0], [np.inf, 0.0], [3.0, 4.0]])
    y = kern.chunk_apply_steps(x, ((1.0, 10.0),))
    np.testing.assert_array_equal(y, [[1, 2], [0, 0], [0, 0], [3, 4]])


@pytest.mark.parametrize("chunks", [(1000, 4), (97, 4), (250, 2), (1, 1)])
def test_level_gram_matches_numpy_for_any_chunking(rng, chunks):
    x = rng.standard_normal((1000, 4)) * [1, 3, 9, 27]
    steps = _steps(rng, 4, (40.0, 20.0, 10.0))
    expected = kern.chunk_gram(kern.chunk_apply_steps(x, steps))
    if chunks == (1, 1):
        chunks = (333, 1)
    (got,) = compute(eng.level_gram(da.from_array(x, chunks=chunks), steps), scheduler="threads")
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_norm_counts_and_bucket_counts_match_numpy(rng):
    x = rng.standard_normal((1000, 3)) * 4
    edges = np.array([0.5, 1.0, 2.0, 4.0, 8.0])
    (got,) = compute(eng.norm_counts(da.from_array(x, chunks=(130, 3)), edges), scheduler="synchronous")
    norms = np.linalg.norm(x, axis=1)
    expected = np.histogram(norms, bins=np.r_[0.0, edges, np.inf])[0]
    np.testing.assert_array_equal(got, expected)
    v = rng.uniform(-1, 10, size=200)
    np.testing.assert_array_equal(kern.combine_bucket_counts(v, edges), np.histogram(v, bins=np.r_[-np.inf, edges, np.inf])[0])


def test_group_grams_and_group_eigenvalues_match_numpy(rng):
    n, d, m = 1000, 3, 30
    x = rng.standard_normal((n, d))
    gid = rng.permutation(n) // m
    k = n // m
    gid[gid >= k] = -1
    (got,) = compute(eng.group_grams(da.from_array(x, chunks=(77, 3)), gid, k), scheduler="threads")
    for t in (0, 5, k - 1):
        np.testing.assert_allclose(got[t], x[gid == t].T @ x[gid == t], rtol=1e-12)
    lam = kern.combine_group_min_eigenvalues(got, m)
    assert lam[5] == pytest.approx(np.linalg.eigvalsh(x[gid == 5].T @ x[gid == 5] / m)[0], rel=1e-12)


def test_only_the_noised_statistic_is_returned(rng):
    x = rng.standard_normal((400, 3))
    seen = []

    def noise(g):
        seen.append(np.array(g))
        return {"noisy": g + 1.0}

    (out,) = compute(eng.noised(eng.level_gram(da.from_array(x, chunks=(100, 3))), noise), scheduler="synchronous")
    assert set(out) == {"noisy"}
    np.testing.assert_allclose(out["noisy"], x.T @ x + 1.0, rtol=1e-12)
    assert len(seen) == 1  # the noise function ran once, on the reduced Gram


def test_coupled_neighbours_sensitivity_per_level(rng):
    # X, X' differ in one row; the same public maps are applied to both
    n, d = 500, 4
    s = level_schedule(n, d, 1.0, m=2, alpha=0.5, radius=200.0)
    x = rng.standard_normal((n, d)) * np.array([1, 10, 50, 100.0])
    x2 = x.copy()
    x2[17] = rng.standard_normal(d) * 1e4  # far outside the radius: clipped
    steps = _steps(rng, d, s.radii)
    iu = np.triu_indices(d)
    for k in range(1, len(steps) + 1):
        a = kern.chunk_apply_steps(x, steps[:k])
        b = kern.chunk_apply_steps(x2, steps[:k])
        diff = (a.T @ a - b.T @ b)[iu] / n
        r2 = s.radii[k - 1] ** 2
        assert np.linalg.norm(diff) <= math.sqrt(2) * r2 / n * (1 + 1e-9)
        assert np.linalg.norm(diff) <= s.sensitivities[k - 1]


def test_unwinding_is_exact_without_clipping(rng):
    d = 5
    x = rng.standard_normal((200, d))
    pi = _random_projection(rng, d, 2)
    pinv = np.linalg.inv(pi)
    np.testing.assert_allclose(pinv @ pi, np.eye(d), atol=1e-13)
    V_part = np.eye(d) - pi  # = (1 - eta) V V^T
    np.testing.assert_allclose(pinv, np.eye(d) + 2 * V_part, atol=1e-13)  # I + (1/eta - 1) V V^T
    y = kern.chunk_apply_steps(x, ((math.sqrt(GROWTH) * pi, 1e9),))  # radius too large to clip
    sigma_x = x.T @ x / len(x)
    sigma_y = y.T @ y / len(y)
    np.testing.assert_allclose((7 / 8) * pinv @ sigma_y @ pinv, sigma_x, rtol=1e-12, atol=1e-14)


def test_fused_and_persisted_forms_equal_the_step_by_step_definition(rng):
    x = rng.standard_normal((3000, 4)) * np.array([1, 10, 100, 1000.0])
    x[7] = np.nan
    x[8, 2] = np.inf
    s = level_schedule(3000, 4, 1.0, m=2, alpha=0.5, radius=300.0)
    steps = _steps(rng, 4, s.radii[:6], s0=0.7)
    # fused (all maps in one product) and persisted-scale (one map per level) forms
    prev, M = None, np.eye(4)
    for k in range(1, len(steps) + 1):
        oracle = kern.chunk_apply_steps(x, steps[:k])
        a, r = steps[k - 1]
        M = a * M if np.ndim(a) == 0 else a @ M
        t, g = kern.chunk_level_step(x, prev, M=M, radius=r)
        prev = t
        np.testing.assert_allclose(g, oracle.T @ oracle, rtol=1e-11, atol=1e-9)
        np.testing.assert_allclose(t[:, None] * (np.nan_to_num(x, posinf=0.0) @ M.T) * (t[:, None] > 0), oracle,
                                   rtol=1e-11, atol=1e-9)
        assert t[7] == 0 and t[8] == 0
        np.testing.assert_allclose(kern.chunk_level_gram(x, steps[:k])[0], oracle.T @ oracle, rtol=1e-11, atol=1e-9)


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
def test_level_step_keeps_scales_per_block_and_is_chunking_invariant(rng, scheduler):
    x = rng.standard_normal((2000, 3)) * [1, 5, 25]
    steps = ((0.5, 10.0), (math.sqrt(GROWTH) * _random_projection(rng, 3, 1), 6.0))
    oracle = kern.chunk_apply_steps(x, steps)
    for chunks in ((2000, 3), (333, 2)):
        X = da.from_array(x, chunks=chunks)
        grams = []
        for data in (X, eng.row_blocks(X)):  # the array, or its row blocks made once for all levels
            prev, M = None, np.eye(3)
            for a, r in steps:
                M = a * M if np.ndim(a) == 0 else a @ M
                ts, gram = eng.level_step(data, prev, M, r)
                prev, g = eng.persist_and_release(ts, eng.noised(gram, lambda v: v), scheduler)
            assert len(prev) == X.numblocks[0]
            np.testing.assert_allclose(g, oracle.T @ oracle, rtol=1e-12)
            grams.append(g)
        np.testing.assert_array_equal(grams[0], grams[1])


def test_scales_spilled_by_the_fit_runtime_equal_held_scales_and_leave_no_file(rng, tmp_path, monkeypatch):
    # with the fit's Runtime on a local scheduler, the per-row scales go to files in its
    # scratch directory (nothing of size n is held between levels), bit for bit the held
    # values; each level's files replace the previous level's; the directory is gone after
    # the fit, also when it fails
    import dask

    from dpdist.engine.runtime import open_runtime

    x = rng.standard_normal((2000, 3)) * [1, 5, 25]
    x[11] = np.inf
    steps = ((0.5, 10.0), (math.sqrt(GROWTH) * _random_projection(rng, 3, 1), 6.0), (0.9, 3.0))
    X = da.from_array(x, chunks=(333, 3))

    def levels(scheduler, fail_at=None):
        prev, M, out = None, np.eye(3), []
        for k, (a, r) in enumerate(steps):
            M = a * M if np.ndim(a) == 0 else a @ M
            ts, gram = eng.level_step(X, prev, M, r, spill_to=eng.spill_stem(scheduler))
            noise = (lambda v: v) if k != fail_at else (lambda v: 1 / 0)
            prev, g = eng.persist_and_release(ts, eng.noised(gram, noise), scheduler)
            out.append((prev, g))
        return out

    assert eng.spill_stem("threads") is None  # no runtime to own the files: held
    held = levels("threads")
    with dask.config.set({"temporary-directory": str(tmp_path)}):
        with open_runtime("threads") as rt:
            assert eng.spill_stem(rt, 2000) is None  # 16,000 bytes of scales: held by default
            spilled = levels(rt)
            scratch = rt.scratch_dir()
            paths = [state[0] for state in spilled[-1][0]]
            assert all(isinstance(p, str) for p in paths)
            assert sorted(os.listdir(scratch)) == sorted(os.path.basename(p) for p in paths)
            t_last = np.concatenate([np.fromfile(p) for p in paths])
        assert not os.path.exists(scratch) and not os.listdir(tmp_path)
        for (_, g_held), (_, g_spilled) in zip(held, spilled):
            np.testing.assert_array_equal(g_spilled, g_held)
        np.testing.assert_array_equal(t_last, np.concatenate([s[0] for s in held[-1][0]]))
        assert t_last[11] == 0
        with pytest.raises(ZeroDivisionError):
            with open_runtime("threads") as rt:
                levels(rt, fail_at=1)
        assert not os.listdir(tmp_path)
        # the estimator's default path spills (files written) once the scales exceed
        # dpdist.scales-in-memory-bytes, and leaves nothing behind; below it, nothing is written
        from dpdist import SecondMoment

        calls = []
        real = eng._level_block

        def level_block(*args, **kwargs):  # records the files written and the states returned
            state = real(*args, **kwargs)
            calls.append((kwargs["spill_path"], state[0]))
            return state

        monkeypatch.setattr(eng, "_level_block", level_block)
        est = SecondMoment(1.0, m=5, radius=60.0, lambda_min=0.5, random_state=0)
        with dask.config.set({"dpdist.scales-in-memory-bytes": 8 * 2000 - 1}):  # one byte short
            spilled_fit = est.fit(X).second_moment_
        L = est.n_levels_
        assert L > 2 and len(calls) == L * X.numblocks[0]
        written = [p for p, _ in calls if p is not None]  # every level but the last writes its scales
        assert len(written) == (L - 1) * X.numblocks[0] and all(p.startswith(str(tmp_path)) for p in written)
        assert all(state is None or isinstance(state, str) for _, state in calls)  # no scales held
        calls.clear()
        assert not os.listdir(tmp_path)
        calls.clear()
        with dask.config.set({"dpdist.scales-in-memory-bytes": 8 * 2000}):  # fits exactly: held
            held_fit = est.fit(X).second_moment_
        assert all(p is None for p, _ in calls) and not os.listdir(tmp_path)
        np.testing.assert_array_equal(held_fit, spilled_fit)  # same seed: the same release either way
        with dask.config.set({"dpdist.scales-in-memory-bytes": -1}):
            with pytest.raises(ValidationError, match="scales-in-memory-bytes"):
                est.fit(X)


def test_group_labels_computed_per_block_match_the_materialised_labels(rng):
    from dpdist.privacy.noise.streams import NoiseSeed
    from dpdist.privacy.noise.partition import GroupPartition

    n, d, m = 1000, 3, 30
    x = rng.standard_normal((n, d))
    part = GroupPartition(NoiseSeed(4, True), n, m, "test/groups")
    k = part.n_groups
    (expected,) = compute(eng.group_grams(da.from_array(x, chunks=(n, 3)), part(0, n), k), scheduler="sync")
    for chunks in ((77, 3), (500, 2)):
        (got,) = compute(eng.group_grams(da.from_array(x, chunks=chunks), part, k), scheduler="threads")
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    labels = part(0, n)
    np.testing.assert_allclose(expected[3], x[labels == 3].T @ x[labels == 3], rtol=1e-12)


def test_level_kernel_in_blocks_equals_batch_by_batch_bitwise(rng, monkeypatch):
    # rows beyond several blocks and BLAS batches, hostile rows in different blocks: the
    # block-wise kernel gives bit for bit what one BLAS batch at a time gives (each row's map,
    # norm and scale depend on that row alone; the Gram runs are the same batches)
    n, d = 40_000, 8
    x = rng.standard_normal((n, d)) * np.logspace(0, 3, d)
    x[[3, 20_000]] = 1e200  # squares overflow: the rescaled path
    x[17_000, 2] = np.nan
    x[30_001] = 5e-310  # subnormal
    x[39_999] = 0.0
    M = math.sqrt(GROWTH) * _random_projection(rng, d, 3) * 0.01
    prev = rng.uniform(0.2, 1.0, n)
    assert n > 2 * kern.gram_batch_rows(d) * (kern._LEVEL_BLOCK_VALUES // (kern.gram_batch_rows(d) * d))
    blocks = kern.chunk_level_step(x, prev, M=M, radius=3.0)
    monkeypatch.setattr(kern, "_LEVEL_BLOCK_VALUES", 1)  # one BLAS batch a block
    batches = kern.chunk_level_step(x, prev, M=M, radius=3.0)
    np.testing.assert_array_equal(blocks[0], batches[0])
    np.testing.assert_array_equal(blocks[1], batches[1])
    assert blocks[0][17_000] == 0 and 0 < blocks[0][3] < 1e-190
    oracle = kern.map_and_clip(x, np.ascontiguousarray(M.T), 3.0, prev)[0]
    np.testing.assert_allclose(blocks[1], oracle.T @ oracle, rtol=1e-11, atol=1e-12)
    with np.errstate(over="ignore"):
        x32 = x.astype(np.float32)  # 1e200 becomes inf; converted block by block as if first
    np.testing.assert_array_equal(kern.chunk_level_step(x32, prev, M=M, radius=3.0)[1],
                                  kern.chunk_level_step(x32.astype(np.float64), prev, M=M, radius=3.0)[1])


def test_chunk_row_scales_gives_the_rows_of_the_step_by_step_definition():
    """y_k = t_i M_k x_i equals applying the steps one by one (chunk_apply_steps), clipped rows
    and non-finite rows (t = 0) included; with no step, t is 1 on finite rows."""
    from dpdist.engine.second_moment_kernels import chunk_apply_steps, chunk_row_scales

    rng = np.random.default_rng(5)
    x = rng.standard_normal((200, 4)) * rng.uniform(0.1, 5.0, size=(200, 1))
    x[7, 2] = np.nan
    a = rng.standard_normal((4, 4))
    steps = [(0.5, 3.0), (a, 2.0)]
    t, mk = chunk_row_scales(x, steps)
    expected = chunk_apply_steps(x, steps)
    got = t[:, None] * (np.nan_to_num(x, nan=0.0) @ mk.T)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert t[7] == 0.0 and 0.0 < t.min(initial=1.0, where=np.arange(200) != 7) < 1.0
    t0, _ = chunk_row_scales(x, [])
    assert t0[7] == 0.0 and np.all(np.delete(t0, 7) == 1.0)


def _level_step_op_by_op(x, prev, M, radius):
    """The level kernel written out one operation at a time, as main computed it before the
    in-place kernel (fresh arrays everywhere): per BLAS batch of gram_batch_rows rows, the map
    (a^T x^T), the squared norms, t = min(prev, 1, r / sqrt(sq)), the rescaled path for the
    rows outside [2^-960, 2^960], the scaling, and the Gram of the batch."""
    from dpdist.engine.gram import GramAccumulator

    d = x.shape[1]
    MT = np.ascontiguousarray(M.T)
    r = kern.shrink_radius(radius, d)
    batch = kern.gram_batch_rows(d)
    acc, ts = GramAccumulator(), []
    for lo in range(0, x.shape[0], batch):
        xb = np.asarray(x[lo : lo + batch], dtype=np.float64)
        with np.errstate(all="ignore"):
            zT = MT.T @ xb.T
            sq = np.einsum("ji,ji->i", zT, zT)
            t = np.minimum(np.minimum(r / np.sqrt(sq), 1.0), 1.0 if prev is None else prev[lo : lo + batch])
        slow = np.flatnonzero(~((sq >= 2.0**-960) & (sq <= 2.0**960)))
        t[slow] = 0.0
        with np.errstate(all="ignore"):
            y = (zT * t).T
        if slow.size:
            y[slow], t[slow] = kern._map_and_clip_scaled(xb[slow], MT, r, None if prev is None else prev[lo + slow])
        acc.add(y)
        ts.append(t)
    g = acc.total((d, d))
    return np.concatenate(ts), (g + g.T) / 2.0


@pytest.mark.parametrize("n", [1, 4095, 4096, 40_000])
def test_in_place_level_kernel_equals_the_op_by_op_kernel_bitwise(rng, n):
    # the kernel computes into reused buffers, in place; every value must be the same
    # operation on the same operands as the op-by-op definition (same seed, same release)
    d = 8
    x = rng.standard_normal((n, d)) * np.logspace(0, 3, d)
    for i, v in zip((3, 17, 2000, 30_001, 39_999), (1e200, np.nan, 5e-310, np.inf, 0.0)):
        if i < n:
            x[i, 1 if np.isnan(v) or np.isinf(v) else slice(None)] = v
    M = math.sqrt(GROWTH) * _random_projection(rng, d, 3) * 0.01
    with np.errstate(over="ignore"):
        x32 = x.astype(np.float32)  # 1e200 becomes inf
    for prev in (None, rng.uniform(0.2, 1.0, n)):
        for xx in (x, x32):
            got = kern.chunk_level_step(xx, prev, M=M, radius=3.0)
            want = _level_step_op_by_op(xx, prev, M, 3.0)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
def test_rows_kept_between_levels_are_read_once_and_give_the_streamed_values_bitwise(rng, scheduler):
    import threading

    x = rng.standard_normal((2000, 3)) * [1, 5, 25]
    x[5] = np.nan
    reads, lock = [], threading.Lock()

    def counted(block, block_info=None):
        with lock:
            reads.append(block_info[0]["chunk-location"][0])
        return block

    X = da.from_array(x, chunks=(333, 3)).map_blocks(counted, dtype=x.dtype)
    steps = ((0.5, 10.0), (math.sqrt(GROWTH) * _random_projection(rng, 3, 1), 6.0), (0.9, 3.0))

    def levels(keep):
        blocks, prev, M, out = eng.row_blocks(X), None, np.eye(3), []
        for k, (a, r) in enumerate(steps):
            M = a * M if np.ndim(a) == 0 else a @ M
            ts, gram = eng.level_step(blocks, prev, M, r, keep_rows=keep and k < len(steps) - 1,
                                      rows_in_prev=keep and k > 0)
            prev, g = eng.persist_and_release(ts, eng.noised(gram, lambda v: v), scheduler)
            out.append(g)
        return out, [p[0] for p in prev]

    streamed = levels(False)
    assert sorted(reads) == sorted(list(range(X.numblocks[0])) * len(steps))  # every level reads every block
    reads.clear()
    kept = levels(True)
    assert sorted(reads) == list(range(X.numblocks[0]))  # each block read once, at the first level
    for a, b in zip(streamed[0], kept[0]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.concatenate(streamed[1]), np.concatenate(kept[1]))
    with pytest.raises(ValueError, match="rows_in_prev"):
        eng.level_step(X, None, np.eye(3), 1.0, rows_in_prev=True)


def test_rows_in_memory_follows_its_config_and_the_scales_threshold():
    import dask

    X = da.zeros((1000, 4), chunks=(100, 4))  # 32,000 bytes of rows + 8,000 of scales
    with dask.config.set({"dpdist.rows-in-memory-bytes": 40_000}):
        assert eng.rows_in_memory(X)
        with dask.config.set({"dpdist.scales-in-memory-bytes": 7_999}):
            assert not eng.rows_in_memory(X)  # spilled scales: the rows are not kept either
    with dask.config.set({"dpdist.rows-in-memory-bytes": 39_999}):
        assert not eng.rows_in_memory(X)
    for bad in (-1, "1e6", True):
        with dask.config.set({"dpdist.rows-in-memory-bytes": bad}):
            with pytest.raises(ValidationError, match="rows-in-memory-bytes"):
                eng.rows_in_memory(X)
