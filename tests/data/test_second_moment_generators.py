"""Generators of the second-moment test distributions (MS25 Appendix D, outliers): seeding, layout independence, moments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpdist.data import second_moment_generators as gen
from dpdist.data.validation import READING_NOTES, as_dask_array, chunk_reading_notes
from dpdist.exceptions import ValidationError


@pytest.mark.parametrize(
    "make",
    [
        lambda c: gen.ellipsoid(10_000, 4, random_state=3, chunk_rows=c),
        lambda c: gen.lambda_v(10_000, 3, random_state=3, chunk_rows=c),
        lambda c: gen.lambda_circ_v(10_000, 3, random_state=3, chunk_rows=c),
        lambda c: gen.anisotropic_gaussian(10_000, random_state=3, chunk_rows=c),
        lambda c: gen.outlier_mixture(10_000, eta=0.02, f=50.0, random_state=3, chunk_rows=c),
    ],
)
def test_values_do_not_depend_on_chunking_or_scheduler(make):
    a = make(10_000).X.compute(scheduler="synchronous")
    b = make(777).X.compute(scheduler="threads")
    np.testing.assert_array_equal(a, b)
    assert make(777).X.numblocks[0] == math.ceil(10_000 / 777)


def test_seeds_give_different_data_and_prefixes_are_stable():
    a = gen.anisotropic_gaussian(9000, random_state=1).X.compute()
    b = gen.anisotropic_gaussian(9000, random_state=2).X.compute()
    c = gen.anisotropic_gaussian(5000, random_state=1).X.compute()
    assert not np.allclose(a, b)
    np.testing.assert_array_equal(a[:5000], c)  # row i depends on (seed, i) only


def test_pareto6_moments_match_the_spec():
    B = 10.0
    assert gen.pareto6_moment(1, B) == pytest.approx(1.24989, abs=1e-5)
    assert gen.pareto6_moment(2, B) == pytest.approx(1.66502, abs=1e-5)
    assert gen.pareto6_moment(4, B) == pytest.approx(4.50005, abs=1e-5)
    # closed forms of the truncated Pareto P6 on [1, B]
    assert gen.pareto6_moment(1, B) == pytest.approx(1.25 * B * (B**4 - 1) / (B**5 - 1), rel=1e-14)
    assert gen.pareto6_moment(2, B) == pytest.approx(5 / 3 * B**2 * (B**3 - 1) / (B**5 - 1), rel=1e-14)
    assert gen.pareto6_moment(4, B) == pytest.approx(5 * B**4 * (B - 1) / (B**5 - 1), rel=1e-14)


def test_pareto6_sampler_has_the_right_support_and_mean(rng):
    x = gen.pareto6_from_uniform(rng.random(200_000), 10.0)
    assert x.min() >= 1.0 and x.max() <= 10.0
    sd = math.sqrt(gen.pareto6_moment(2, 10.0) - gen.pareto6_moment(1, 10.0) ** 2)
    assert abs(x.mean() - gen.pareto6_moment(1, 10.0)) < 5 * sd / math.sqrt(x.size)


def _check_second_moment(data, n, tol_sd=6.0):
    X = data.X.compute(scheduler="synchronous")
    emp = X.T @ X / n
    # entrywise sd of a sample mean of x_i x_j is <= sqrt(E[x_i^2 x_j^2] / n); estimate it
    sd = np.sqrt(np.einsum("ni,nj->ij", X**2, X**2) / n / n)
    assert np.all(np.abs(emp - data.second_moment) <= tol_sd * sd + 1e-12)
    return X


def test_ellipsoid_push_forward_second_moment_and_radius():
    n, d = 100_000, 4
    data = gen.ellipsoid(n, d, condition=1e4, random_state=5)
    X = _check_second_moment(data, n)
    A = data.info["A"]
    np.testing.assert_allclose(data.second_moment, A / d, rtol=1e-12)
    assert np.linalg.eigvalsh(A)[0] == pytest.approx(1e-4, rel=1e-9)
    assert np.linalg.norm(X, axis=1).max() <= data.info["radius"] * (1 + 1e-12)
    # points lie on the ellipsoid x^T A^{-1} x = 1
    np.testing.assert_allclose(np.einsum("ij,jk,ik->i", X, np.linalg.inv(A), X), 1.0, rtol=1e-6)


def test_lambda_v_and_lambda_circ_v_moments():
    n = 100_000
    lv = gen.lambda_v(n, 3, random_state=6)
    X = _check_second_moment(lv, n)
    assert np.linalg.norm(X, axis=1).max() <= 10.0
    np.testing.assert_allclose(lv.second_moment, gen.pareto6_moment(2, 10.0) / 3 * np.eye(3))
    lc = gen.lambda_circ_v(n, 3, random_state=6)
    Y = _check_second_moment(lc, n)
    assert Y.shape == (n, 4)
    assert np.linalg.norm(Y, axis=1).max() <= math.sqrt(101.0)
    np.testing.assert_allclose(np.linalg.norm(Y[:, 1:], axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("kind", ["point", "stochastic"])
def test_outlier_mixture_counts_and_compliance(kind):
    n, eta, f = 20_000, 0.02, 0.9
    data = gen.outlier_mixture(n, eta=eta, f=f, kind=kind, random_state=8, chunk_rows=3000)
    X = data.X.compute(scheduler="synchronous")
    mask = data.info["outlier_rows"](0, n)
    assert mask.sum() == math.floor(n * eta)
    K = 1 / (7 * eta) + 1
    Sd, So = data.info["clean_second_moment"], data.info["outlier_second_moment"]
    # compliant: Sigma_out <= K Sigma_D (f <= 1)
    assert np.linalg.eigvalsh(K * Sd - So)[0] >= -1e-9
    np.testing.assert_allclose(data.second_moment, (1 - eta) * Sd + eta * So)
    if kind == "point":
        np.testing.assert_allclose(np.abs(X[mask, 0]), math.sqrt(f * K), rtol=1e-12)
        np.testing.assert_array_equal(X[mask, 1:], 0.0)


def test_violating_outliers_break_compliance():
    data = gen.outlier_mixture(1000, eta=0.02, f=50.0, random_state=8)
    K = data.info["K"]
    assert np.linalg.eigvalsh(K * data.info["clean_second_moment"] - data.info["outlier_second_moment"])[0] < 0


def test_to_zarr_round_trip(tmp_path):
    data = gen.lambda_v(5000, 3, random_state=2, chunk_rows=1000)
    path = gen.to_zarr(data, tmp_path / "x.zarr")
    X = as_dask_array(path, missing_chunks="raise")  # written with its chunk manifest
    assert chunk_reading_notes(X) == (READING_NOTES["manifest"],)
    back = X.compute()
    np.testing.assert_array_equal(back, data.X.compute())
    with pytest.raises(ValidationError, match="exists"):
        gen.to_zarr(data, tmp_path / "x.zarr")


@pytest.mark.parametrize(
    "call,name",
    [(lambda: gen.anisotropic_gaussian(0), "n_samples"), (lambda: gen.anisotropic_gaussian(10, random_state=-1), "random_state"),
     (lambda: gen.outlier_mixture(10, eta=1.5, f=1.0), "eta"), (lambda: gen.outlier_mixture(10, eta=0.1, f=1.0, kind="x"), "kind"),
     (lambda: gen.lambda_v(10, 2, chunk_rows=0), "chunk_rows")],
)
def test_bad_generator_parameters_are_refused(call, name):
    with pytest.raises(ValidationError, match=name):
        call()
