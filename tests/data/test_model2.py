"""Model-2 generator: the truth satisfies the model's parameters; samples are lazy,
chunk-invariant, reproducible, and match the covariance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpdist.data.model2 import load_model2_truth, make_model2
from dpdist.data.validation import READING_NOTES, as_dask_array, chunk_reading_notes
from dpdist.exceptions import ValidationError


@pytest.mark.parametrize("d,k,gap,lambda1", [(30, 3, 0.5, 2.0), (50, 1, 0.2, 1.0), (8, 8, 0.9, 10.0)])
def test_truth_satisfies_model2(d, k, gap, lambda1):
    m = make_model2(100, d, k, gap=gap, lambda1=lambda1, random_state=0)
    S = m.covariance.toarray()
    np.testing.assert_array_equal(S, S.T)
    # k-RCS: at most k non-zeros per row and column (Definition 1)
    assert (np.count_nonzero(S, axis=1) <= k).all() and (np.count_nonzero(S, axis=0) <= k).all()
    vals, vecs = np.linalg.eigh(S)
    assert vals[-1] == pytest.approx(lambda1, rel=1e-12) and m.lambda1 == lambda1
    if d > 1:
        assert vals[-2] == pytest.approx((1 - gap) * lambda1, rel=1e-12) == m.lambda2
        assert vals[-2] <= (1 - gap) * vals[-1] * (1 + 1e-12)  # Model 1 gap condition
    assert m.eigengap == pytest.approx(gap * lambda1)
    # v1 is the unit, k-sparse top eigenvector
    assert np.count_nonzero(m.v1) == k and np.linalg.norm(m.v1) == pytest.approx(1.0)
    np.testing.assert_array_equal(np.flatnonzero(m.v1), m.support)
    assert abs(vecs[:, -1] @ m.v1) == pytest.approx(1.0, abs=1e-12)
    # sigma^2 = ||Sigma||_op (Gaussian rows are sqrt(lambda1)-sub-Gaussian)
    assert m.sigma2 == pytest.approx(vals[-1]) and m.sigma == pytest.approx(math.sqrt(lambda1))


def test_samples_are_lazy_and_have_the_model_covariance():
    m = make_model2(60_000, 12, 3, gap=0.5, lambda1=3.0, chunks=(7_000, 5), random_state=1)
    assert m.X.chunks[0][0] == 7_000 and m.X.chunks[1] == (5, 5, 2)
    X = m.X.compute()
    C = X.T @ X / len(X)
    # entry (i, j) of the sample second moment has sd sqrt((S_ii S_jj + S_ij^2) / n) <= 3 sqrt(2/n);
    # 6 sd over 78 entries fails with probability < 1e-7
    assert np.abs(C - m.covariance.toarray()).max() < 6 * 3.0 * math.sqrt(2 / len(X))
    assert m.sin2_error(np.linalg.eigh(C)[1][:, -1]) < 0.01


def test_samples_are_a_function_of_the_seed_and_chunk_grid_only():
    a = make_model2(1000, 6, 2, chunks=100, random_state=5)
    b = make_model2(1000, 6, 2, chunks=100, random_state=5)
    np.testing.assert_array_equal(a.X.compute(), b.X.compute())
    np.testing.assert_array_equal(a.X.compute(scheduler="threads"), a.X[::-1].compute()[::-1])
    np.testing.assert_array_equal(a.X[250:260].compute(), a.X.compute()[250:260])
    c = make_model2(1000, 6, 2, chunks=100, random_state=6)
    assert not np.allclose(a.X.compute(), c.X.compute())
    assert make_model2(10, 6, 2).entropy != make_model2(10, 6, 2).entropy  # fresh entropy by default


def test_float32_samples():
    m = make_model2(100, 5, 2, dtype="float32", random_state=0)
    assert m.X.dtype == np.float32 and m.X.compute().dtype == np.float32


def test_write_zarr_round_trip(tmp_path):
    m = make_model2(500, 7, 2, chunks=(120, 7), random_state=2)
    path = m.write_zarr(tmp_path / "m2.zarr")
    X = as_dask_array(str(path), missing_chunks="raise")  # dpdist reads the group's "X"; it has a manifest
    assert chunk_reading_notes(X) == (READING_NOTES["manifest"],)
    np.testing.assert_array_equal(X.compute(), m.X.compute())
    truth = load_model2_truth(path)
    np.testing.assert_array_equal(truth["v1"], m.v1)
    np.testing.assert_array_equal(truth["covariance"].toarray(), m.covariance.toarray())
    assert truth["k"] == 2 and truth["lambda1"] == m.lambda1 and truth["support"] == list(m.support)
    with pytest.raises(ValidationError, match="exists"):
        m.write_zarr(path)


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        ((10, 5, 6), {}, "k"),
        ((10, 5, 0), {}, "k"),
        ((10, 1, 1), {}, "n_features"),
        ((0, 5, 2), {}, "n_samples"),
        ((10, 5, 2), {"gap": 0.0}, "gap"),
        ((10, 5, 2), {"gap": 1.0}, "gap"),
        ((10, 5, 2), {"lambda1": -1.0}, "lambda1"),
        ((10, 5, 2), {"random_state": -3}, "random_state"),
        ((10, 5, 2), {"dtype": "int8"}, "dtype"),
        ((10, 5, 2), {"chunks": 0}, "chunks"),
    ],
)
def test_bad_parameters(args, kwargs, match):
    with pytest.raises(ValidationError, match=match):
        make_model2(*args, **kwargs)


@pytest.mark.parametrize("d,k,gamma,seed", [(40, 4, 0.3, 0), (40, 4, 0.45, 1), (12, 12, 0.2, 2), (30, 1, 0.3, 3)])
def test_construction2_satisfies_lemma_23_and_model2(d, k, gamma, seed):
    from dpdist.data.model2 import make_construction2

    m = make_construction2(100, d, k=k, gamma=gamma, random_state=seed)
    S = m.covariance.toarray()
    np.testing.assert_allclose(S, S.T, atol=1e-14)
    assert (np.count_nonzero(S, axis=1) <= k).all()  # k-RCS
    vals, vecs = np.linalg.eigh(S)
    assert 0.2 <= vals[0] and vals[-1] <= 1.1  # Lemma 23 (1): 1/5 I <= Sigma <= 11/10 I
    assert vals[-1] - vals[-2] >= 0.03  # Lemma 23 (1): eigengap >= 3/100
    assert m.lambda1 == pytest.approx(vals[-1]) and m.lambda2 == pytest.approx(vals[-2])
    assert m.gap == pytest.approx(1 - vals[-2] / vals[-1]) and m.sigma2 == pytest.approx(vals[-1])
    assert abs(vecs[:, -1] @ m.v1) == pytest.approx(1.0, abs=1e-10)
    assert np.count_nonzero(m.v1) == k and set(np.flatnonzero(m.v1)) == set(m.support.tolist())


def test_construction2_samples_have_its_covariance_across_column_chunks():
    from dpdist.data.model2 import make_construction2

    m = make_construction2(40_000, 15, k=5, gamma=0.3, chunks=(9_000, 4), random_state=4)
    X = m.X.compute()
    C = X.T @ X / len(X)
    # entry sd <= sqrt(2) * 1.1 / sqrt(n); 6 sd over 120 entries
    assert np.abs(C - m.covariance.toarray()).max() < 6 * 1.1 * math.sqrt(2 / len(X))
    again = make_construction2(40_000, 15, k=5, gamma=0.3, chunks=(9_000, 4), random_state=4)
    np.testing.assert_array_equal(again.X[:100].compute(), X[:100])
    with pytest.raises(ValidationError, match="gamma"):
        make_construction2(10, 5, gamma=0.6)
