"""PCA baselines: Analyze Gauss, the Wang-Xu Gaussian covariance's top eigenvector, and the
non-private thresholded covariance's top eigenvector."""

from __future__ import annotations

import math

import dask.array as da
import numpy as np
import pytest

from dpdist.algorithms.baselines.analyze_gauss import block_row_norm_clip
from dpdist.algorithms.expmech_pca.release import leading_eigenvector
from dpdist.baselines import AnalyzeGauss, GaussianCovariance, GaussianPCA, ThresholdedCovariance, ThresholdedPCA
from dpdist.data.model2 import make_model2
from dpdist.exceptions import ValidationError
from dpdist.privacy.mechanisms.gaussian import analyze_gauss_calibration


def _norm_clipped_moment(X: np.ndarray, L: float) -> np.ndarray:
    norms = np.linalg.norm(X, axis=1)
    Y = X * np.minimum(1.0, L / np.maximum(norms, 1e-300))[:, None]
    return Y.T @ Y / len(Y)


def test_row_norm_clip_kernel():
    x = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    out = block_row_norm_clip(x, 1.0)
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]])
    # rows whose squares overflow (1e200) or underflow (subnormal) are clipped, not zeroed or NaN
    big = block_row_norm_clip(np.array([[1e200, -1e200], [5e-320, 0.0]]), 1.0)
    np.testing.assert_allclose(big[0], [2**-0.5, -(2**-0.5)], rtol=1e-12)
    assert big[1, 0] == 5e-320 and np.linalg.norm(big[0]) <= 1.0


def test_analyze_gauss_adds_symmetric_noise_of_the_calibrated_scale():
    rng = np.random.default_rng(0)
    n, d, L = 2_000, 40, 3.0
    X = rng.standard_normal((n, d))
    est = AnalyzeGauss(0.5, 1e-5, row_norm=L, random_state=1, scheduler="synchronous", tile_size=16,
                       assume_centered=True).fit(X)
    s = analyze_gauss_calibration(0.5, 1e-5, n, L)["gaussian_sigma"]
    assert est.noise_scale_ == s
    E = est.covariance_ - _norm_clipped_moment(X, L)
    np.testing.assert_allclose(E, E.T, atol=0)
    upper = E[np.triu_indices(d)]
    # 820 i.i.d. N(0, s^2) entries: the sample sd is within 15% of s except with prob < 1e-6
    assert abs(upper.std() / s - 1) < 0.15 and abs(upper.mean()) < 5 * s / math.sqrt(upper.size)
    v, _ = leading_eigenvector(est.covariance_)
    np.testing.assert_allclose(est.components_[0], v)
    assert est.release_.privacy.epsilon == 0.5 and est.release_.metadata()["seeding"]["mode"] == "seeded"


def test_analyze_gauss_sensitivity_bound_holds_on_neighbours():
    rng = np.random.default_rng(1)
    n, d, L = 50, 6, 2.0
    X = rng.standard_normal((n, d))
    sens = analyze_gauss_calibration(1.0, 1e-6, n, L)["sensitivity"]
    for extreme in (np.full(d, 1e9), np.zeros(d), -X[0] * 100):
        Y = X.copy()
        Y[0] = extreme
        diff = _norm_clipped_moment(X, L) - _norm_clipped_moment(Y, L)
        assert np.linalg.norm(diff[np.triu_indices(d)]) <= sens * (1 + 1e-12)


def test_analyze_gauss_is_deterministic_across_chunkings_and_finds_the_spike():
    m = make_model2(40_000, 15, 2, gap=0.7, lambda1=6.0, chunks=10_000, random_state=2)
    X = m.X.compute()
    a = AnalyzeGauss(1.0, 1e-6, row_norm=12.0, random_state=5, scheduler="synchronous").fit(X)
    b = AnalyzeGauss(1.0, 1e-6, row_norm=12.0, random_state=5, scheduler="threads", tile_size=4).fit(
        da.from_array(X, chunks=(3_000, 15)))
    np.testing.assert_allclose(a.covariance_, b.covariance_, rtol=0, atol=1e-12)
    assert m.sin2_error(a.components_) < 0.05


def test_analyze_gauss_plan_noise_grows_with_d():
    est = AnalyzeGauss(1.0, 1e-6, row_norm=10.0)
    ops = [est.plan(100_000, d).noise_operator_bound for d in (100, 1_000, 10_000)]
    assert ops[0] < ops[1] < ops[2]
    p = est.plan(100_000, 100, sigma=1.0, eigengap=1.0)
    assert p.operator_error_bound == pytest.approx(p.noise_operator_bound + p.sampling_operator_bound
                                                   + p.center_operator_bound)
    assert p.center_operator_bound > 0 and p.centering == "private-mean"
    assert 0 < p.sin2_bound <= 1 and p.error_bound == p.sin2_bound


def test_gaussian_pca_is_the_top_eigenvector_of_the_wang_xu_estimate():
    m = make_model2(30_000, 10, 2, gap=0.7, lambda1=5.0, random_state=3)
    kw = dict(clip=9.0, threshold=0.3, random_state=4, scheduler="synchronous")
    pca = GaussianPCA(2.0, 1e-6, **kw).fit(m.X)
    cov = GaussianCovariance(2.0, 1e-6, **kw).fit(m.X)
    np.testing.assert_allclose(pca.covariance_.toarray(), cov.covariance_.toarray())
    v, _ = leading_eigenvector(cov.covariance_)
    np.testing.assert_allclose(pca.components_[0], v)
    assert pca.privacy_ == cov.privacy_ and pca.noise_scale_ == cov.noise_scale_
    assert "post-processing" in pca.release_.mechanism
    # seeded (random_state=4): not private, whatever the mechanism
    assert not pca.release_.private and any("seed" in r for r in pca.release_.not_private_reasons)


def test_gaussian_pca_plan_error_grows_with_d():
    est = GaussianPCA(1.0, 1e-6, sigma=1.0)
    errs = [est.plan(100_000, d, k=3, eigengap=1.0).operator_error_bound for d in (100, 1_000, 10_000)]
    assert errs[0] < errs[1] < errs[2]
    assert est.plan(100_000, 100, k=3, eigengap=1.0).sin2_bound <= 1


def test_thresholded_pca_is_labelled_not_private_and_accurate():
    m = make_model2(50_000, 20, 3, gap=0.5, lambda1=3.0, random_state=6)
    est = ThresholdedPCA(sigma=m.sigma, scheduler="synchronous").fit(m.X)
    cov = ThresholdedCovariance(sigma=m.sigma, scheduler="synchronous").fit(m.X)
    np.testing.assert_allclose(est.covariance_.toarray(), cov.covariance_.toarray())
    meta = est.release_.metadata()
    assert meta["private"] is False and meta["privacy"] is None
    assert any("NOT PRIVATE" in note for note in meta["notes"])
    assert m.sin2_error(est.components_) < 0.02
    p = est.plan(50_000, 20, k=3, eigengap=m.eigengap)
    assert p.privacy is None and p.noise_scale == 0 and p.threshold == pytest.approx(est.threshold_)


def test_bad_parameters():
    X = np.random.default_rng(0).standard_normal((20, 4))
    with pytest.raises(ValidationError, match="row_norm"):
        AnalyzeGauss(1.0, 1e-6, row_norm=-1.0).fit(X)
    with pytest.raises(ValidationError, match="epsilon"):
        AnalyzeGauss(0.0, 1e-6, row_norm=1.0).plan(10, 4)
    with pytest.raises(ValidationError, match="sigma"):
        GaussianPCA(1.0, 1e-6).fit(X)
    with pytest.raises(ValidationError, match="threshold or sigma"):
        ThresholdedPCA().fit(X)
    with pytest.raises(ValidationError, match="k"):
        GaussianPCA(1.0, 1e-6, sigma=1.0).plan(100, 10, k=11)


def test_private_baseline_plans_are_not_kinds_of_the_not_private_plan():
    """The Wang-Xu plans share the thresholding fields with the NOT PRIVATE thresholded plan
    but do not inherit from it: an isinstance check for the non-private plan never matches a
    private one. The shared fields keep their place in ``to_dict()`` for both."""
    from dpdist.algorithms.baselines.gaussian import GaussianCovariancePlan
    from dpdist.algorithms.baselines.pca import GaussianPCAPlan, ThresholdedPCAPlan
    from dpdist.algorithms.baselines.thresholded import ThresholdedCovariancePlan

    private = [GaussianCovariance(1.0, 1e-6, sigma=1.0).plan(1000, 20),
               GaussianPCA(1.0, 1e-6, sigma=1.0).plan(1000, 20)]
    not_private = [ThresholdedCovariance(sigma=1.0).plan(1000, 20), ThresholdedPCA(sigma=1.0).plan(1000, 20)]
    assert [type(p) for p in private] == [GaussianCovariancePlan, GaussianPCAPlan]
    assert [type(p) for p in not_private] == [ThresholdedCovariancePlan, ThresholdedPCAPlan]
    for p in private:
        assert p.privacy is not None and not isinstance(p, ThresholdedCovariancePlan)
    for p in not_private:
        assert p.privacy is None and isinstance(p, ThresholdedCovariancePlan)
    shared = ["threshold", "sampling_threshold", "sigma", "beta"]
    for p in private + not_private:
        keys = list(p.to_dict())
        assert keys[4:8] == shared, type(p).__name__
        assert p.threshold > 0 and p.sampling_threshold > 0 and p.sigma == 1.0 and p.beta == 0.1
