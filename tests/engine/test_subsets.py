"""Subset enumeration by rank, k x k top-eigenvalue kernels and the enumeration's max graph.

The graph is driven here by a float-keyed arg max (:func:`chunk_key_max`, a test helper: the
package's selection uses the exact sampler of :mod:`dpdist.engine.gumbel_max`), which makes
the chunking invariance of the wiring checkable against a brute-force arg max."""

from __future__ import annotations

import itertools
import math

import dask
import numpy as np
import pytest

from dpdist.engine.subset_prefix import range_top_eigenvalue, top_eigenvalue_by_prefix
from dpdist.engine.subset_ranks import n_subsets, subset_rank, subsets_in_range, unrank_subset
from dpdist.engine.subset_scores import DEGENERATE_TOL, block_top_eigenvalue, top_eigenvalue_3x3
from dpdist.engine.subsets import block_release, enumeration_chunks, enumeration_max


def _all(d: int, k: int) -> np.ndarray:
    return np.array(list(itertools.combinations(range(d), k)), dtype=np.int64).reshape(-1, k)


def _brute_scores(M: np.ndarray, S: np.ndarray) -> np.ndarray:
    return np.linalg.eigvalsh(M[S[:, :, None], S[:, None, :]])[:, -1]


@pytest.mark.parametrize("d,k", [(6, 1), (7, 2), (7, 3), (8, 4), (7, 5), (5, 5)])
def test_subsets_in_range_equals_itertools_for_every_range(d, k):
    allc = _all(d, k)
    total = len(allc)
    assert n_subsets(d, k) == total
    for start in range(total + 1):
        for stop in range(start, total + 1):
            np.testing.assert_array_equal(subsets_in_range(d, k, start, stop), allc[start:stop])


@pytest.mark.parametrize("d,k", [(200, 3), (60, 4), (3000, 2)])
def test_subsets_in_range_is_exact_across_prefix_boundaries_at_larger_d(d, k):
    total = n_subsets(d, k)
    rng = np.random.default_rng(0)
    starts = list(rng.integers(0, total - 500, size=5)) + [0, total - 500]
    for s in starts:
        s = int(s)
        got = subsets_in_range(d, k, s, s + 500)
        want = np.array([unrank_subset(r, d, k) for r in range(s, s + 500)])
        np.testing.assert_array_equal(got, want)
        ref = np.array(list(itertools.islice(itertools.combinations(range(d), k), s, s + 3)))
        np.testing.assert_array_equal(got[:3], ref)


def test_rank_and_unrank_are_inverse():
    d, k = 9, 4
    for r, s in enumerate(itertools.combinations(range(d), k)):
        assert subset_rank(s, d) == r
        np.testing.assert_array_equal(unrank_subset(r, d, k), s)
    with pytest.raises(ValueError):
        unrank_subset(n_subsets(d, k), d, k)
    with pytest.raises(ValueError):
        subsets_in_range(d, k, 0, n_subsets(d, k) + 1)


def test_enumeration_chunks_cover_ranks_exactly_once():
    chunks = enumeration_chunks(103, 10)
    assert chunks[0] == (0, 10) and chunks[-1] == (100, 103)
    assert sum(e - s for s, e in chunks) == 103


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_scores_equal_brute_force_eigvalsh(k):
    rng = np.random.default_rng(k)
    d = 14
    A = rng.standard_normal((30, d)) * rng.uniform(0.1, 3.0, size=d)
    M = A.T @ A / 30
    S = _all(d, k)
    np.testing.assert_allclose(block_top_eigenvalue(M, S), _brute_scores(M, S), rtol=0, atol=1e-12 * np.abs(M).max())


def _sym3(vals: np.ndarray, rng) -> np.ndarray:
    Q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    return (Q * vals) @ Q.T


def test_3x3_solver_is_accurate_on_degenerate_and_extreme_blocks():
    rng = np.random.default_rng(0)
    mats = [
        np.zeros((3, 3)),
        np.eye(3) * 7.0,
        np.diag([1.0, 1.0, 0.5]),
        np.diag([2.0, 1.0, 1.0]),
        np.diag([-1.0, -2.0, -3.0]),
        np.full((3, 3), 1e6),
        np.full((3, 3), 1e-9),
    ]
    for gap in [0.0, 1e-12, 1e-9, 1e-6, 1e-4, 1e-2]:  # near-double top eigenvalue
        mats.append(_sym3(np.array([1.0, 1.0 - gap, 0.3]), rng))
        mats.append(_sym3(np.array([1.0, 0.3, 0.3 - gap]), rng))
        mats.append(_sym3(np.array([1e3 + 1.0, 1e3 + 1.0 - gap, 1e3]), rng))
    for _ in range(200):
        mats.append(_sym3(rng.standard_normal(3) * 10 ** rng.uniform(-3, 3), rng))
    B = np.array([(m + m.T) / 2 for m in mats])
    got = top_eigenvalue_3x3(B[:, 0, 0], B[:, 1, 1], B[:, 2, 2], B[:, 0, 1], B[:, 0, 2], B[:, 1, 2])
    want = np.linalg.eigvalsh(B)[:, -1]
    scale = np.maximum(np.abs(B).reshape(len(B), -1).max(axis=1), 1e-300)
    # eigvalsh itself is accurate to a few ulps of ||B||; 1e-12 leaves a wide margin while
    # catching the ~sqrt(eps) = 1e-8 error of an unguarded arccos near r = -1.
    assert np.all(np.abs(got - want) <= 1e-12 * scale)
    assert DEGENERATE_TOL <= 1e-3


class RankKeyed:
    """Picklable perturbation keyed by rank (independent of chunking)."""

    def __init__(self, seed: int, weight: float) -> None:
        self.seed, self.weight = seed, weight

    def __call__(self, scores, start):
        from dpdist.privacy.noise.streams import NoiseSeed

        u = NoiseSeed(self.seed, True).uniforms("test/gumbel", 0, start, len(scores))
        return self.weight * scores - np.log(-np.log(u))


def chunk_key_max(M, k, start, stop, perturb, *, batch):
    """Largest ``perturb(scores, s)`` over the subsets of ranks ``[start, stop)`` and its rank
    (the smallest among ties), scored ``batch`` subsets at a time; ``(-inf, -1)`` when empty."""
    M = np.ascontiguousarray(M, dtype=np.float64)
    best_key, best_rank = -math.inf, -1
    for s in range(int(start), int(stop), int(batch)):
        e = min(int(stop), s + int(batch))
        keys = np.asarray(perturb(range_top_eigenvalue(M, k, s, e), s), dtype=np.float64)
        i = int(np.argmax(keys))
        if keys[i] > best_key:
            best_key, best_rank = float(keys[i]), s + i
    return best_key, best_rank


def combine_key_max(parts):
    """Max-combine of ``(key, rank)`` pairs; ties go to the smaller rank."""
    best_key, best_rank = -math.inf, -1
    for key, rank in parts:
        if rank >= 0 and (key > best_key or (key == best_key and rank < best_rank)):
            best_key, best_rank = key, rank
    return best_key, best_rank


def _rank_of(part):
    return int(part[1])


def _matrix(d: int, seed: int = 0) -> np.ndarray:
    A = np.random.default_rng(seed).standard_normal((40, d))
    return A.T @ A / 40


def test_batched_scores_give_the_brute_force_argmax():
    d, k = 12, 3
    M = _matrix(d)
    S = _all(d, k)
    perturb = RankKeyed(5, 4.0)
    keys = perturb(_brute_scores(M, S), 0)
    key, rank = chunk_key_max(M, k, 0, len(S), perturb, batch=37)
    assert rank == int(np.argmax(keys))
    assert key == pytest.approx(keys.max(), abs=1e-12)


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
def test_argmax_is_invariant_to_chunking_and_scheduler(scheduler):
    d, k = 16, 3
    M = _matrix(d, 1)
    perturb = RankKeyed(11, 2.0)
    want = int(np.argmax(perturb(_brute_scores(M, _all(d, k)), 0)))
    import dask.array as da

    for subsets_per_task, batch, split_every in [(n_subsets(d, k), 1 << 16, 8), (97, 13, 2), (1, 1, 3), (500, 64, 4)]:
        Md = da.from_array(M, chunks=(5, 7))
        rank = enumeration_max(Md, k, chunk_key_max, (perturb,), combine_key_max, (), _rank_of,
                               subsets_per_task=subsets_per_task, split_every=split_every, batch=batch)
        assert dask.compute(rank, scheduler=scheduler)[0] == want


def test_block_release_gathers_the_block_of_the_rank():
    d, k = 9, 3
    M = _matrix(d)
    rank = 40
    seen = {}

    def release(subset, block):
        seen["block"] = block
        return block + 1.0

    subset, out = dask.compute(*block_release(M, rank, k, release), scheduler="synchronous")
    want = unrank_subset(rank, d, k)
    np.testing.assert_array_equal(subset, want)
    np.testing.assert_array_equal(out, M[np.ix_(want, want)] + 1.0)


# ---------------------------------------------------------------------------------------
# the prefix kernel (k >= 4 over rank ranges)
# ---------------------------------------------------------------------------------------


def _hostile_matrices(d: int, rng) -> dict:
    A = rng.standard_normal((50, d)) * rng.uniform(0.1, 3.0, size=d)
    B = rng.standard_normal((d, 3))
    C = rng.standard_normal((d, d))
    E = np.eye(d) + 1e-9 * rng.standard_normal((d, d))
    return {
        "wishart": A.T @ A / 50,
        "identity": np.eye(d),
        "zero": np.zeros((d, d)),
        "rank-one": np.ones((d, d)),
        "rank-three": B @ B.T,
        "near-identity": (E + E.T) / 2,
        "indefinite-1e6": (C + C.T) * 1e6,
        "tiny-1e-150": (C + C.T) * 1e-150,
        "diagonal-ties": np.diag((np.arange(d) // 2).astype(float)),
        "clipped-spike": np.clip(A.T @ A / 50 + 4 * np.outer(np.eye(d)[0] + np.eye(d)[1], np.eye(d)[0] + np.eye(d)[1]), -5, 5),
    }


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("k", [3, 4, 5, 6])
def test_prefix_kernel_matches_eigvalsh_on_hostile_blocks(k, compiled):
    # Error model: the certificate |g(x)| <= 2^-45 scale bounds |x - lambda_1| up to the
    # rounding of g and of the prefix eigh (a few ulps of the block), so 1e-12 of the block's
    # largest entry is met with a margin of ~30 (measured worst: 3.5e-14).
    rng = np.random.default_rng(k)
    d = 13
    for name, M in _hostile_matrices(d, rng).items():
        total = n_subsets(d, k)
        S = _all(d, k)
        want = _brute_scores(M, S)
        scale = np.maximum(np.abs(M[S[:, :, None], S[:, None, :]]).max(axis=(1, 2)), 1e-300)
        for start, stop in [(0, total), (1, total - 1), (total // 3, total // 3 + 17), (total - 1, total)]:
            got = top_eigenvalue_by_prefix(M, k, start, stop, compiled=compiled)
            assert np.all(np.abs(got - want[start:stop]) <= 1e-12 * scale[start:stop]), name


def test_compiled_prefix_kernel_is_installed_and_matches_its_python_source():
    # the [test] extra installs numba: CI runs the compiled kernel (a missing numba would
    # silently fall back to NumPy); the uncompiled source gives the same scores and the same
    # uncertified subsets (NaN, sent to eigvalsh)
    from dpdist.engine import subset_prefix as sub

    compiled = sub.compiled_newton_runs()
    assert compiled is not None
    rng = np.random.default_rng(3)
    d, k = 9, 5
    for M in (_hostile_matrices(d, rng)["wishart"], np.diag((np.arange(d) // 2).astype(float)), np.zeros((d, d))):
        total = n_subsets(d, k)
        P, counts, skip = sub._prefix_runs(d, k, 0, total)
        pa, pb, off = sub._pair_table(d)
        lam, Q = np.linalg.eigh(M[P[:, :, None], P[:, None, :]])
        W = np.ascontiguousarray(np.einsum("pij,pik->pjk", Q, M[P]))
        run = off[P[:, -1] + 1]
        args = (M, np.ascontiguousarray(np.diagonal(M)), lam, W, pa[run], pb[run], counts, sub.PREFIX_TOL, 40)
        fast, slow = np.empty(total), np.empty(total)
        compiled(*args, fast)
        with np.errstate(all="ignore"):
            sub._newton_runs_py(*args, slow)
        np.testing.assert_array_equal(np.isnan(fast), np.isnan(slow))
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-13 * max(1.0, np.abs(M).max()))


def test_range_scores_equal_block_scores_across_prefix_runs():
    d, k = 30, 5
    M = _matrix(d, 3)
    total = n_subsets(d, k)
    for start in (0, 5, 100, total // 2, total - 300):
        S = subsets_in_range(d, k, start, start + 300)
        np.testing.assert_allclose(range_top_eigenvalue(M, k, start, start + 300), block_top_eigenvalue(M, S),
                                   rtol=0, atol=1e-12 * np.abs(M).max())


def test_batched_scores_at_k4_give_the_brute_force_argmax_for_any_batch():
    d, k = 11, 4
    M = _matrix(d, 2)
    S = _all(d, k)
    perturb = RankKeyed(7, 3.0)
    keys = perturb(_brute_scores(M, S), 0)
    for batch in (len(S), 37, 1):
        key, rank = chunk_key_max(M, k, 0, len(S), perturb, batch=batch)
        assert rank == int(np.argmax(keys))
