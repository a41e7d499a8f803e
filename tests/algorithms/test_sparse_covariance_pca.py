"""SparseCovariancePCA: PrivCov's released matrix, then the truncated power method."""

from __future__ import annotations

import itertools
import warnings

import dask.array as da
import numpy as np
import pytest

import dpdist
from dpdist import SparseCovariance, SparseCovariancePCA, ValidationError
from dpdist.algorithms.sparse_covariance_pca import (
    sparse_covariance_pca,
    sparse_sin2_bound,
    truncated_power_method,
)
from dpdist.data.model2 import make_model2

SYNC = {"scheduler": "synchronous"}


def spike(d: int, support, lam1: float = 2.0, lam2: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    v = np.zeros(d)
    v[list(support)] = 1.0 / np.sqrt(len(support))
    return lam2 * np.eye(d) + (lam1 - lam2) * np.outer(v, v), v


def sym_noise(d: int, op_norm: float, seed: int) -> np.ndarray:
    G = np.random.default_rng(seed).standard_normal((d, d))
    E = (G + G.T) / 2
    return E * (op_norm / np.abs(np.linalg.eigvalsh(E)).max())


def sin2(u, v) -> float:
    u = np.ravel(u)
    return 1.0 - float(u @ v) ** 2 / float(u @ u)


def quiet_fit(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded noise (PrivacyWarning), tiny data (UtilityWarning)
        return est.fit(X)


def test_power_method_returns_the_best_k_sparse_rayleigh_quotient_on_a_noisy_spike():
    d, k = 10, 3
    Sigma, v = spike(d, [2, 5, 7])
    A = Sigma + sym_noise(d, 0.1, seed=1)
    u, support, q, _ = truncated_power_method(A, k)
    best = max(np.linalg.eigvalsh(A[np.ix_(S, S)])[-1] for S in map(list, itertools.combinations(range(d), k)))
    assert np.count_nonzero(u) <= k and abs(np.linalg.norm(u) - 1) < 1e-12
    assert list(support) == [2, 5, 7]
    assert q == pytest.approx(float(u @ A @ u), abs=1e-12)
    assert q >= best - 1e-9


def test_power_method_maximises_the_algebraic_not_the_absolute_rayleigh_quotient():
    # the eigenvalue of largest magnitude is negative: a power method without a shift would
    # move towards coordinate 0 (Rayleigh quotient -5); the best 2-sparse vector is e_1 (2)
    A = np.diag([-5.0, 2.0, 1.0, 0.5])
    u, _, q, _ = truncated_power_method(A, 2, start=np.ones(4))
    assert q == pytest.approx(2.0)
    np.testing.assert_allclose(np.abs(u), [0, 1, 0, 0], atol=1e-12)


def test_power_method_refuses_a_bad_k_or_start():
    A = np.eye(4)
    with pytest.raises(ValidationError, match="k"):
        truncated_power_method(A, 5)
    with pytest.raises(ValidationError, match="start"):
        truncated_power_method(A, 2, start=np.ones(3))


@pytest.mark.parametrize("seed", range(5))
def test_sin2_bound_holds_for_vectors_at_least_as_good_as_v_on_m(seed):
    # the derivation: any unit u with u^T M u >= v^T M v has sin^2(u, v) <= (2 eta / (g - 2 eta))^2
    d, k, eta = 30, 4, 0.12
    Sigma, v = spike(d, range(k))  # gap g = 1
    M = Sigma + sym_noise(d, eta, seed)
    bound = sparse_sin2_bound(eta, 1.0)
    u_dense = np.linalg.eigh(M)[1][:, -1]
    u_sparse, _, q, _ = truncated_power_method(M, k)
    assert q >= float(v @ M @ v)  # the condition the bound needs holds here
    assert sin2(u_dense, v) <= bound
    assert sin2(u_sparse, v) <= bound


def test_sin2_bound_formula():
    assert sparse_sin2_bound(0.1, 1.0) == pytest.approx((0.2 / 0.8) ** 2)
    assert sparse_sin2_bound(0.5, 1.0) == 1.0  # g <= 2 eta: nothing is said
    assert sparse_sin2_bound(0.0, 1.0) == 0.0
    with pytest.raises(ValidationError, match="eigengap"):
        sparse_sin2_bound(0.1, 0.0)


def test_takes_exactly_sparse_covariances_parameters():
    # every SparseCovariance parameter (present or added later) reaches PrivCov unchanged
    assert SparseCovariancePCA._param_names() == SparseCovariance._param_names()


def test_release_is_privcovs_release_plus_the_component():
    X = np.random.default_rng(0).standard_normal((400, 8))
    cov = quiet_fit(SparseCovariance(2, 1.0, 1e-6, sigma=1.0, random_state=5, **SYNC), X)
    pca = quiet_fit(SparseCovariancePCA(2, 1.0, 1e-6, sigma=1.0, random_state=5, **SYNC), X)
    a, b = cov.release_, pca.release_
    assert (pca.covariance_ != cov.covariance_).nnz == 0  # the same noise, bit for bit
    assert b.privacy == a.privacy and b.events == a.events and b.mechanisms == a.mechanisms
    assert b.noise_scales == a.noise_scales and b.seeding == a.seeding
    u = pca.components_[0]
    assert pca.components_.shape == (1, 8) and np.count_nonzero(u) <= 2 and abs(np.linalg.norm(u) - 1) < 1e-12
    assert set(np.flatnonzero(u)) <= set(pca.support_) and len(pca.support_) == 2
    assert pca.explained_variance_[0] == pytest.approx(float(u @ (pca.covariance_ @ u)))
    # the function gives the same release as the estimator
    rel = sparse_covariance_pca(X, 2, 1.0, 1e-6, sigma=1.0, random_state=5, scheduler="synchronous")
    np.testing.assert_array_equal(rel.values["components"], pca.components_)


def test_recovers_the_sparse_spike_of_model_2_when_the_noise_is_small():
    m = make_model2(20_000, 20, 3, gap=0.5, lambda1=2.0, random_state=0)
    est = quiet_fit(SparseCovariancePCA(3, 1.0, 1e-6, clip=6.0, random_state=1, **SYNC), m.X)
    # at this size PrivCov's noise swamps the spike (its plan says so) ...
    assert est.plan(20_000, 20, eigengap=m.eigengap).sin2_bound == 1.0
    # ... and with a budget large enough for small noise the support and direction are found
    est = quiet_fit(SparseCovariancePCA(3, 200.0, 1e-6, clip=6.0, random_state=1, **SYNC), m.X)
    assert list(est.support_) == sorted(m.support)
    assert sin2(est.components_, m.v1) < 0.05


def test_plan_is_privcovs_plan_with_the_sin2_bound():
    est = SparseCovariancePCA(3, 1.0, 1e-6, sigma=1.5)
    base = SparseCovariance(3, 1.0, 1e-6, sigma=1.5).plan(10**12, 1000)
    p = est.plan(10**12, 1000, eigengap=1.0)
    assert p.noise_scale == base.noise_scale and p.operator_error_bound == base.error_bound
    assert p.sin2_bound == p.error_bound == sparse_sin2_bound(base.error_bound, 1.0) < 1
    assert p.error_scale == 1.0 and not p.vacuous and p.conditions
    # without eigengap the plan is PrivCov's operator-norm plan
    assert est.plan(10**12, 1000).error_bound == base.error_bound
    p.to_dict()


def test_min_samples_is_the_least_n_whose_plan_meets_the_target():
    est = SparseCovariancePCA(3, 1.0, 1e-6, sigma=1.5)
    n = est.min_samples(0.1, 1000, eigengap=1.0)
    assert est.plan(n, 1000, eigengap=1.0).sin2_bound <= 0.1
    assert est.plan(int(n * 0.99), 1000, eigengap=1.0).sin2_bound > 0.1
    with pytest.raises(ValidationError, match="sigma"):
        SparseCovariancePCA(3, 1.0, 1e-6, clip=2.0).min_samples(0.1, 1000, eigengap=1.0)


def test_transform_projects_numpy_and_dask_rows_on_the_component():
    X = np.random.default_rng(0).standard_normal((300, 6))
    est = SparseCovariancePCA(2, 1.0, 1e-6, sigma=1.0, random_state=0, **SYNC)
    with pytest.raises(AttributeError, match="not fitted"):
        est.transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Z = est.fit_transform(X)
    assert np.any(est.location_)  # centred at a released mean by default: transform centres there too
    np.testing.assert_allclose(Z, (X - est.location_) @ est.components_.T)
    Zd = est.transform(da.from_array(X, chunks=(100, 6)))
    assert isinstance(Zd, da.Array)
    np.testing.assert_allclose(Zd.compute(), Z)
    with pytest.raises(ValidationError, match="X has 5 features"):
        est.transform(X[:, :5])


def test_is_exported():
    assert dpdist.SparseCovariancePCA is SparseCovariancePCA
