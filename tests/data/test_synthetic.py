"""Model-1 generator: the stated model parameters hold, samples match, Zarr round trip."""

from __future__ import annotations

import numpy as np
import pytest

from dpdist.data.synthetic import STRUCTURES, load_truth, make_model1
from dpdist.data.validation import READING_NOTES, as_dask_array, chunk_reading_notes
from dpdist.exceptions import ValidationError


@pytest.mark.parametrize("structure", STRUCTURES)
def test_covariance_is_k_rcs_symmetric_positive_definite(structure):
    m = make_model1(24, 4, structure=structure, random_state=5)
    C = m.covariance.toarray()
    assert (np.count_nonzero(C, axis=1) <= 4).all()
    np.testing.assert_array_equal(C, C.T)
    ev = np.linalg.eigvalsh(C)
    assert ev.min() > 0
    assert m.sigma2 == pytest.approx(ev.max(), rel=1e-8)  # sigma^2 = ||Sigma||_op
    assert m.eigengap == pytest.approx(1 - ev[-2] / ev[-1], rel=1e-6, abs=1e-9)
    if structure != "block":
        np.testing.assert_allclose(np.diag(C), 1.0)
        assert (np.count_nonzero(C, axis=1) > 1).any()


@pytest.mark.parametrize("structure", STRUCTURES)
def test_samples_have_the_model_covariance(structure):
    m = make_model1(12, 3 if structure != "block" else 4, structure=structure, random_state=1)
    n = 200_000
    X = m.samples(n, chunk_rows=30_000).compute(scheduler="sync")
    C = m.covariance.toarray()
    # Var of x_i x_j for Gaussian rows is C_ii C_jj + C_ij^2; 6 standard errors over 144 entries
    se = np.sqrt((np.outer(np.diag(C), np.diag(C)) + C**2) / n)
    assert (np.abs(X.T @ X / n - C) <= 6 * se).all()


def test_samples_do_not_depend_on_the_scheduler():
    m = make_model1(8, 3, random_state=2)
    a = m.samples(5000, chunk_rows=1000).compute(scheduler="sync")
    b = m.samples(5000, chunk_rows=1000).compute(scheduler="threads")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a[:1000], a[1000:2000])  # chunks use different streams


def test_write_zarr_round_trip(tmp_path):
    m = make_model1(10, 3, random_state=4)
    path = m.write_zarr(str(tmp_path / "d.zarr"), 2500, chunk_rows=1000, scheduler="sync")
    X = as_dask_array(path, missing_chunks="raise")  # dpdist's stores carry a chunk manifest
    assert X.shape == (2500, 10) and X.chunks[0] == (1000, 1000, 500)
    assert chunk_reading_notes(X) == (READING_NOTES["manifest"],)
    np.testing.assert_array_equal(X.compute(scheduler="sync"), m.samples(2500, chunk_rows=1000).compute(scheduler="sync"))
    np.testing.assert_array_equal(load_truth(path).toarray(), m.covariance.toarray())
    with pytest.raises(ValidationError, match="already exists"):
        m.write_zarr(str(tmp_path / "d.zarr"), 10)


def test_bad_parameters():
    with pytest.raises(ValidationError):
        make_model1(10, 3, structure="block")  # 3 does not divide 10
    with pytest.raises(ValidationError):
        make_model1(10, 11)
    with pytest.raises(ValidationError):
        make_model1(10, 3, structure="star")
