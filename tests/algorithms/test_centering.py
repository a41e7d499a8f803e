"""Centring: ``covariance_`` is a covariance (assume_centered, mean=, the private mean)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dpdist
from dpdist.exceptions import ValidationError
from dpdist.privacy.accounting import Accountant, release_guarantee, zcdp_rho
from dpdist.privacy.events import GaussianEvent

SYNC = "synchronous"


def _fit(X, **kw):
    params = dict(k=2, epsilon=1.0, delta=1e-6, sigma=1.0, random_state=3, scheduler=SYNC)
    params.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded (and possibly vacuous) on purpose
        return dpdist.SparseCovariance(**params).fit(X)


def test_data_with_mean_five_give_a_covariance_within_the_predicted_error():
    """N(5, I) data: the default (centred) estimate lies within the plan's error bound of the
    true covariance I, a non-vacuous bound; the second moment (assume_centered=True, what the
    estimator released before) is about 25 on the diagonal (clipped to clip**2), far outside."""
    n, d = 200_000, 2
    X = np.random.default_rng(1).standard_normal((n, d)) + 5.0
    params = dict(k=1, epsilon=4.0, delta=1e-3, sigma=1.0, clip=5.0, mean_clip=12.0)
    est = _fit(X, **params)
    plan = est.plan(n, d)
    assert not plan.vacuous and plan.error_bound < 1.0
    err = np.linalg.norm(est.covariance_.toarray() - np.eye(d), 2)
    assert err <= plan.error_bound
    assert np.abs(est.location_ - 5.0).max() < 0.05
    moment = _fit(X, assume_centered=True, **params)
    assert np.linalg.norm(moment.covariance_.toarray() - np.eye(d), 2) > 10 * plan.error_bound


#: A seeded release of main before centring existed (SparseCovariance(k=2, epsilon=1, delta=1e-6,
#: sigma=1, random_state=3), Algorithm 1's analysis, on the data of the test below): its non-zero
#: entries, as float.hex.
_TODAY = {
    (0, 0): "-0x1.1dc334f000000p+6",
    (1, 1): "0x1.b151768000000p+3",
    (2, 2): "-0x1.2c5c04a000000p+5",
    (2, 3): "-0x1.c9b706c000000p+4",
    (3, 2): "-0x1.c9b706c000000p+4",
    (3, 3): "-0x1.3590a80000000p+6",
    (4, 4): "-0x1.3baad2d800000p+7",
}


def test_assume_centered_on_centred_data_is_todays_release_bit_for_bit():
    X = np.random.default_rng(7).standard_normal((500, 5))
    X -= X.mean(axis=0)
    est = _fit(X, assume_centered=True, selection="paper")
    M = est.covariance_.toarray()
    assert {(i, j) for i, j in zip(*np.nonzero(M))} == set(_TODAY)
    for (i, j), hx in _TODAY.items():
        assert M[i, j] == float.fromhex(hx), (i, j)
    # the same sets as main; each is now released in column order (main released the noisy ranking)
    assert est.selected_.tolist() == [[3, 4], [1, 4], [2, 3], [1, 2], [2, 4]]
    rel = est.release_
    assert rel.parameters["centering"]["mode"] == "assume-centered"
    assert [label for label, _ in rel.events] == ["PrivCov rows"] and "mean" not in rel.values
    np.testing.assert_array_equal(est.location_, 0.0)


def test_a_public_mean_is_recorded_as_public_and_costs_nothing():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((400, 4)) + np.array([1.0, -2.0, 0.5, 3.0])
    mu = np.array([1.0, -2.0, 0.5, 3.0])
    est = _fit(X, mean=mu)
    ref = _fit(X - mu, assume_centered=True)  # the same noise on the same centred rows
    np.testing.assert_array_equal(est.covariance_.toarray(), ref.covariance_.toarray())
    c = est.release_.parameters["centering"]
    assert c["mode"] == "public-mean" and c["mean"] == mu.tolist() and "public" in c["mean_source"]
    assert [label for label, _ in est.release_.events] == ["PrivCov rows"]
    np.testing.assert_array_equal(est.location_, mu)
    assert est.plan(400, 4).centering == "public-mean" and est.plan(400, 4).lambda_center == 0.0


def test_the_private_mean_spends_its_stated_share():
    X = np.random.default_rng(4).standard_normal((600, 3)) + 2.0
    est = _fit(X, clip=4.0, mean_fraction=0.25, mean_clip=8.0)
    rel = est.release_
    assert rel.privacy.epsilon == 1.0 and rel.privacy.delta == 1e-6
    labels = [label for label, _ in rel.events]
    assert labels == ["mean", "PrivCov rows"]
    mean_event, cov_event = (e for _, e in rel.events)
    assert isinstance(mean_event, GaussianEvent)
    # the stages compose in zCDP: the mean has a quarter of rho, PrivCov the rest, and both
    # events together account to the whole budget (CKS20), no more
    rho = rel.parameters["calibration"]["rho"] / 0.75
    assert zcdp_rho(mean_event) == pytest.approx(0.25 * rho, rel=1e-8)
    assert zcdp_rho(cov_event) <= 0.75 * rho
    zcdp = Accountant().compose(mean_event).compose(cov_event).epsilons(1e-6, external=False)["zcdp-cks20"]
    assert 1.0 - 1e-6 <= zcdp <= 1.0 * (1 + 1e-12)
    assert release_guarantee([mean_event, cov_event], delta=1e-6).epsilon <= 1.0 * (1 + 1e-12)
    c = rel.parameters["centering"]
    assert c["mode"] == "private-mean" and c["mean_fraction"] == 0.25 and c["mean_clip"] == 8.0
    assert c["composition"] == "zcdp"
    # the mean's recorded budget is its stand-alone guarantee at the full delta
    assert c["mean_budget"]["delta"] == 1e-6
    assert release_guarantee([mean_event], delta=1e-6).epsilon <= c["mean_budget"]["epsilon"] * (1 + 1e-12)
    np.testing.assert_array_equal(rel.values["mean"], est.location_)
    assert "mean" not in c  # a released value, not a parameter: it lives in values["mean"]
    assert rel.noise_scales["mean_gaussian"] > 0
    assert any(m["mechanism"].startswith("clipped-mean") for m in rel.mechanisms)


def test_plan_includes_the_means_cost_and_error():
    base = dict(k=2, epsilon=1.0, delta=1e-6, sigma=1.0)
    n, d = 10**7, 50
    centred = dpdist.SparseCovariance(**base).plan(n, d)
    moment = dpdist.SparseCovariance(**base, assume_centered=True).plan(n, d)
    # PrivCov's share: (1 - f) of rho, at its stand-alone epsilon and the full delta
    share = centred.calibration.epsilon
    assert centred.calibration.delta == 1e-6 and 0.9 < share < 1.0
    at_share = dpdist.SparseCovariance(2, share, 1e-6, sigma=1.0, assume_centered=True).plan(n, d)
    assert centred.privacy == moment.privacy  # the whole budget, charged once
    assert centred.noise_scale == at_share.noise_scale > moment.noise_scale
    # less noise than splitting (epsilon, delta) into (0.9, 0.9e-6) for PrivCov
    assert centred.noise_scale < 0.96 * dpdist.SparseCovariance(2, 0.9, 0.9e-6, sigma=1.0,
                                                                assume_centered=True).plan(n, d).noise_scale
    assert centred.centering == "private-mean" and centred.mean_noise_scale > 0
    assert centred.lambda_center > 0
    assert centred.error_bound == pytest.approx(at_share.error_bound + 6 * 2 * centred.lambda_center)
    assert "2 beta" in centred.error_metric
    assert moment.centering == "assume-centered" and moment.mean_noise_scale is None


def test_the_private_mean_does_not_depend_on_the_chunks():
    import dask.array as da

    X = np.random.default_rng(5).standard_normal((300, 4)) + 1.0
    a = _fit(da.from_array(X, chunks=(300, 4)), clip=4.0)
    b = _fit(da.from_array(X, chunks=(37, 3)), clip=4.0)
    np.testing.assert_array_equal(a.location_, b.location_)


@pytest.mark.parametrize("kw, match", [
    (dict(mean=[0.0, 1.0]), "mean has 2 entries"),
    (dict(mean=[0.0, np.nan, 1.0]), "finite"),
    (dict(mean="zero"), "mean"),
    (dict(assume_centered=True, mean=[0.0, 0.0, 0.0]), "not both"),
    (dict(assume_centered="yes"), "assume_centered"),
    (dict(mean_fraction=1.0), "mean_fraction"),
    (dict(mean_clip=0.0), "mean_clip"),
])
def test_bad_centring_parameters_are_refused_by_name(kw, match):
    X = np.zeros((50, 3))
    est = dpdist.SparseCovariance(1, 1.0, 1e-6, sigma=1.0, scheduler=SYNC, **kw)
    with pytest.raises(ValidationError, match=match):
        est.fit(X)
    assert not hasattr(est, "covariance_")


def test_nonfinite_data_are_refused_before_the_mean_is_released():
    X = np.random.default_rng(6).standard_normal((100, 3))
    X[5, 1] = np.nan
    with pytest.raises(ValidationError, match="nothing was released"):
        _fit(X, on_nonfinite="raise")


# ------------------------------------------------------------------ the Gaussian baselines
_WX_TODAY = [
    ["0x1.d8a817a000000p+0", "-0x1.699bedf000000p-1", "0x1.a5486f4000000p-3", "-0x1.9b38b34000000p-1"],
    ["-0x1.699bedf000000p-1", "0x1.497d0fd000000p-1", "-0x1.fef8920000000p-3", "-0x1.2cb9740000000p-2"],
    ["0x1.a5486f4000000p-3", "-0x1.fef8920000000p-3", "-0x1.4639d00000000p-6", "0x1.7897b9b000000p-1"],
    ["-0x1.9b38b34000000p-1", "-0x1.2cb9740000000p-2", "0x1.7897b9b000000p-1", "0x1.4fdeb28000000p-3"],
]


def _centred(n, d, seed=7):
    X = np.random.default_rng(seed).standard_normal((n, d))
    return X - X.mean(axis=0)


def test_wang_xu_assume_centered_is_todays_release_bit_for_bit():
    """Main's seeded GaussianCovariance(1, 1e-6, clip=3, threshold=1e-9, random_state=3)."""
    from dpdist.baselines import GaussianCovariance

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = GaussianCovariance(1.0, 1e-6, clip=3.0, threshold=1e-9, random_state=3, scheduler=SYNC,
                                 assume_centered=True).fit(_centred(500, 4))
    expected = np.array([[float.fromhex(h) for h in row] for row in _WX_TODAY])
    np.testing.assert_array_equal(est.covariance_.toarray(), expected)


def test_wang_xu_on_mean_five_data_is_within_its_predicted_error():
    from dpdist.baselines import GaussianCovariance, GaussianPCA

    n, d = 50_000, 3
    scale = np.array([1.0, 2.0, 1.0])
    X = np.random.default_rng(3).standard_normal((n, d)) * scale + 5.0
    params = dict(sigma=2.0, clip=8.0, mean_clip=20.0, random_state=0, scheduler=SYNC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = GaussianCovariance(2.0, 1e-5, **params).fit(X)
        moment = GaussianCovariance(2.0, 1e-5, assume_centered=True, **params).fit(X)
        pca = GaussianPCA(2.0, 1e-5, **params).fit(X)
    plan = est.plan(n, d)
    assert plan.centering == "private-mean" and plan.lambda_center > 0 and not plan.vacuous
    truth = np.diag(scale**2)
    assert np.abs(est.covariance_.toarray() - truth).max() <= plan.error_bound
    assert np.abs(moment.covariance_.toarray() - truth).max() > 20  # the second moment, about 25 + var
    assert [label for label, _ in est.release_.events] == ["mean", "gaussian"]
    assert est.release_.parameters["centering"]["mode"] == "private-mean"
    assert abs(pca.components_[0, 1]) == pytest.approx(1.0)  # the largest variance, not the mean direction
    np.testing.assert_array_equal(pca.location_, est.location_)


_AG_TODAY = ["-0x1.063daa4a1cfdcp-2", "0x1.dd4e7586bffe2p-2", "0x1.80c64e978a256p-1", "0x1.8fb8fc93bcf6fp-2"]


def test_analyze_gauss_assume_centered_is_todays_release_bit_for_bit():
    """Main's seeded AnalyzeGauss(1, 1e-6, row_norm=3, random_state=3): its component."""
    from dpdist.baselines import AnalyzeGauss

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = AnalyzeGauss(1.0, 1e-6, row_norm=3.0, random_state=3, scheduler=SYNC,
                           assume_centered=True).fit(_centred(500, 4))
    assert [v.hex() for v in est.components_[0]] == _AG_TODAY


def test_analyze_gauss_finds_the_largest_variance_not_the_mean():
    from dpdist.baselines import AnalyzeGauss

    n, d = 20_000, 3
    X = np.random.default_rng(0).standard_normal((n, d)) * np.array([1.0, 2.0, 1.0]) + 5.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = AnalyzeGauss(2.0, 1e-5, row_norm=8.0, mean_clip=20.0, random_state=0, scheduler=SYNC).fit(X)
        moment = AnalyzeGauss(2.0, 1e-5, row_norm=8.0, random_state=0, scheduler=SYNC, assume_centered=True).fit(X)
    assert abs(est.components_[0, 1]) > 0.99
    np.testing.assert_allclose(np.abs(moment.components_[0]), 1 / np.sqrt(3), atol=0.05)  # the mean's direction
    plan = est.plan(n, d, sigma=2.0)
    assert plan.centering == "private-mean" and plan.center_operator_bound > 0
    truth = np.diag([1.0, 4.0, 1.0])
    assert np.linalg.norm(est.covariance_ - truth, 2) <= plan.error_bound
    assert est.release_.parameters["centering"]["mean_clip"] == 20.0


# ------------------------------------------------------------------ ExpMechSparsePCA
def test_expmech_assume_centered_is_todays_release_bit_for_bit():
    """The seeded ExpMechSparsePCA(2, 1, 1e-6, sigma=1, random_state=3) since the block's noise
    is the analytic Gaussian mechanism's at the split that minimises the bound (before:
    "0x1.91a8bf9fef077p-1", "-0x1.3d83165603f8cp-1", with the printed sigma_priv at epsilon/2)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = dpdist.ExpMechSparsePCA(2, 1.0, 1e-6, sigma=1.0, random_state=3, scheduler=SYNC,
                                      assume_centered=True).fit(_centred(500, 5))
    assert est.support_.tolist() == [2, 4]
    assert [v.hex() for v in est.components_[0]] == [
        "0x0.0p+0", "0x0.0p+0", "0x1.93a37e78450cep-1", "0x0.0p+0", "-0x1.3afde75e89601p-1"]


def test_expmech_on_shifted_data_finds_the_support_of_the_covariance():
    from dpdist.data.model2 import make_model2

    m = make_model2(20_000, 12, 2, gap=0.5, lambda1=2.0, random_state=0)
    X = m.X + 5.0
    params = dict(sigma=m.sigma, clip=6 * m.sigma, mean_clip=40.0, random_state=0, scheduler=SYNC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = dpdist.ExpMechSparsePCA(2, 1.0, 1e-6, **params).fit(X)
        ref = dpdist.ExpMechSparsePCA(2, 1.0, 1e-6, **params, assume_centered=True).fit(m.X)
    assert sorted(est.support_.tolist()) == sorted(ref.support_.tolist())
    assert [label for label, _ in est.release_.events] == ["mean", "ExpMechPCA selection and block"]
    plan, plain = est.plan(20_000, 12), dpdist.ExpMechSparsePCA(2, 1.0, 1e-6, **params, assume_centered=True).plan(
        20_000, 12)
    assert plan.centering == "private-mean" and plan.error["eta_center"] > 0
    assert plan.noise_scale > plain.noise_scale and plan.privacy == plain.privacy


# ------------------------------------------------------------------ the NOT PRIVATE baselines
def test_thresholded_baselines_centre_at_the_exact_mean():
    from dpdist.baselines import ThresholdedCovariance, ThresholdedPCA

    X = np.random.default_rng(0).standard_normal((2000, 3)) * np.array([1.0, 2.0, 1.0]) + 5.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ThresholdedCovariance(threshold=1e-12, scheduler=SYNC).fit(X)
        moment = ThresholdedCovariance(threshold=1e-12, scheduler=SYNC, assume_centered=True).fit(X)
        pca = ThresholdedPCA(threshold=1e-12, scheduler=SYNC).fit(X)
    np.testing.assert_allclose(est.covariance_.toarray(), np.cov(X.T, bias=True), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.location_, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(moment.covariance_.toarray(), X.T @ X / len(X), rtol=1e-9)
    assert est.release_.parameters["centering"]["mode"] == "exact-mean"
    assert abs(pca.components_[0, 1]) == pytest.approx(1.0, abs=1e-3)


def test_centring_parameters_are_checked_even_when_unused():
    est = dpdist.SparseCovariance(1, 1.0, 1e-6, sigma=1.0, assume_centered=True, mean_fraction=5.0)
    with pytest.raises(ValidationError, match="mean_fraction"):
        est.plan(100, 3)


# ------------------------------------------------------------------ PrivNorm and PrivPCA
def _paired_spike(seed, n, d=12, support=(3, 8), lam=5.0, noise=1e-3):
    """Rows ``z sqrt(lam) v + noise g`` with Rademacher z, every odd row the negation of the
    row before: each batch's moment is within a tiny distance of ``lam v v^T`` (so the private
    tests pass at a small tau) and the sample mean is exactly zero."""
    rng = np.random.default_rng(seed)
    v = np.zeros(d)
    v[list(support)] = 1 / np.sqrt(len(support))
    z = rng.choice([-1.0, 1.0], size=n)
    X = z[:, None] * np.sqrt(lam) * v + noise * rng.standard_normal((n, d))
    X[1::2] = -X[0::2]
    return X, v


def _friendly(cls, *args, **kw):
    params = dict(gap=0.5, n_batches=80, random_state=3, scheduler=SYNC)
    params.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded, huge epsilon
        return cls(*args, **params)


#: Main's seeded SparsePCA(2, 1e5, 1e-3, gap=0.5, sigma=sqrt(5), n_batches=80, tau=0.01,
#: random_state=3) on _paired_spike(11, 4000, noise=0.01), before centring existed.
_PRIVPCA_TODAY = {3: "0x1.6a81693995224p-1", 8: "0x1.69923c15c030ap-1"}
_PRIVPCA_LAMBDA_TODAY = "0x1.4028f9731e000p+2"
#: Main's seeded SpectralNorm(2, 1e5, 1e-3, gap=0.5, sigma=sqrt(3), n_batches=80, tau=0.01,
#: random_state=3) on _paired_spike(12, 4000, lam=3, noise=0.01).
_PRIVNORM_TODAY = "0x1.80506e1f84000p+1"


def test_privpca_and_privnorm_assume_centered_are_todays_releases_bit_for_bit():
    X, _ = _paired_spike(11, 4000, noise=0.01)
    est = _friendly(dpdist.SparsePCA, 2, 1e5, 1e-3, sigma=np.sqrt(5), tau=0.01, assume_centered=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    comp = est.components_[0]
    assert {int(i): float(comp[i]).hex() for i in np.flatnonzero(comp)} == _PRIVPCA_TODAY
    assert float(est.lambda_hat_).hex() == _PRIVPCA_LAMBDA_TODAY
    assert est.release_.parameters["centering"]["mode"] == "assume-centered"
    assert [label for label, _ in est.release_.events][0] == "norm/tests"
    np.testing.assert_array_equal(est.location_, 0.0)
    X, _ = _paired_spike(12, 4000, lam=3.0, noise=0.01)
    norm = _friendly(dpdist.SpectralNorm, 2, 1e5, 1e-3, sigma=np.sqrt(3), tau=0.01, assume_centered=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        norm.fit(X)
    assert float(norm.norm_).hex() == _PRIVNORM_TODAY


def test_privpca_on_mean_five_data_is_within_its_predicted_error():
    """The released component of X + 5 lies within the plan's sin^2 bound (Theorem 3 for the
    centred rows plus the centring's Davis-Kahan term, a bound below 1 whose centring
    condition holds) of the spike; taking the same rows as mean-zero, the private tests fail."""
    from dpdist.exceptions import NoPrivateResult

    n = 80_000
    X, v = _paired_spike(1, n)
    params = dict(sigma=np.sqrt(5), tau=0.001)
    est = _friendly(dpdist.SparsePCA, 2, 1e5, 1e-3, mean_clip=30.0, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X + 5.0)
    plan = est.plan(n, 12, lambda_1=5.0)
    assert plan.centering == "private-mean" and 0 < plan.centring_sin_bound and plan.error_bound < 0.1
    assert not any("centring" in u for u in plan.unmet_conditions)
    assert 1 - float(est.components_[0] @ v) ** 2 <= plan.error_bound
    assert np.abs(est.location_ - 5.0).max() < 1e-3
    np.testing.assert_array_equal(est.transform(X[:4] + 5.0), (X[:4] + 5.0 - est.location_) @ est.components_.T)
    with pytest.raises(NoPrivateResult):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _friendly(dpdist.SparsePCA, 2, 1e5, 1e-3, assume_centered=True, **params).fit(X + 5.0)


def test_spectral_norm_on_mean_five_data_is_within_its_predicted_error():
    n = 16_000
    X, _ = _paired_spike(2, n, lam=3.0, noise=0.01)
    est = _friendly(dpdist.SpectralNorm, 2, 1e5, 1e-3, sigma=np.sqrt(3), tau=0.01, mean_clip=30.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X + 5.0)
    plan = est.plan(n, 12, lambda_1=3.0)
    assert plan.centering == "private-mean" and plan.mean_offset_bound > 0 and plan.error_bound < 0.5
    assert not any("centring" in u for u in plan.unmet_conditions)
    assert abs(est.norm_ - 3.0) <= plan.error_bound
    # the second moment of X + 5 has top eigenvalue about 25 d: its batches are not even good
    from dpdist.exceptions import NoPrivateResult

    with pytest.raises(NoPrivateResult):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _friendly(dpdist.SpectralNorm, 2, 1e5, 1e-3, sigma=np.sqrt(3), tau=0.01, assume_centered=True).fit(X + 5.0)


def test_privpca_charges_and_records_the_means_share():
    X, _ = _paired_spike(1, 8000)
    est = _friendly(dpdist.SparsePCA, 2, 1e5, 1e-3, sigma=np.sqrt(5), tau=0.001, mean_clip=30.0, mean_fraction=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X + 5.0)
    rel = est.release_
    assert rel.privacy.epsilon == 1e5 and rel.privacy.delta == 1e-3
    assert [label for label, _ in rel.events] == ["mean", "norm/tests", "norm/release", "pca/tests", "pca/release"]
    mean_event = rel.events[0][1]
    assert isinstance(mean_event, GaussianEvent)
    assert release_guarantee([mean_event], delta=0.2e-3).epsilon <= 0.2e5 * (1 + 1e-9)
    split = rel.parameters["budget_split"]
    assert split["mean"] == [0.2e5, 0.2e-3]
    assert split["norm"] == pytest.approx([0.4e5, 0.4e-3]) and split["pca"] == pytest.approx([0.4e5, 0.4e-3])
    c = rel.parameters["centering"]
    assert c["mode"] == "private-mean" and c["mean_fraction"] == 0.2 and c["mean_clip"] == 30.0
    assert c["mean_budget"] == {"epsilon": 0.2e5, "delta": 0.2e-3}
    np.testing.assert_array_equal(rel.values["mean"], est.location_)
    assert rel.noise_scales["mean_gaussian"] > 0
    assert any("centred at the privately released mean" in note for note in rel.notes)


def test_a_rejected_privnorm_stage_counts_the_means_share_as_spent():
    from dpdist.exceptions import NoPrivateResult

    X = np.random.default_rng(2).standard_cauchy((4000, 12)) * 10 + 5.0  # heavy tails: no batch is good
    est = _friendly(dpdist.SparsePCA, 2, 1e5, 1e-3, sigma=1.0, tau=0.01, mean_clip=50.0, mean_fraction=0.2)
    with pytest.raises(NoPrivateResult) as info:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X)
    rel = info.value.release
    assert [label for label, _ in rel.events] == ["mean", "norm/tests"]
    assert rel.privacy.epsilon == pytest.approx(0.2e5 + 0.4e5) and rel.privacy.delta == pytest.approx(0.6e-3)
    assert not hasattr(est, "components_")


def test_privpca_and_privnorm_plans_include_the_means_cost_and_error():
    n, d = 10**6, 50
    base = dict(gap=0.5, sigma=1.0)
    pca = dpdist.SparsePCA(2, 1.0, 1e-6, **base).plan(n, d)
    at_share = dpdist.SparsePCA(2, 0.9, 0.9e-6, assume_centered=True, **base).plan(n, d)
    moment = dpdist.SparsePCA(2, 1.0, 1e-6, assume_centered=True, **base).plan(n, d)
    assert pca.privacy == moment.privacy  # the whole budget
    assert pca.noise_scale == at_share.noise_scale > moment.noise_scale
    assert pca.sin2_error_bound == at_share.sin2_error_bound
    assert pca.centering == "private-mean" and pca.mean_noise_scale > 0 and pca.centring_sin_bound > 0
    expected = min(1.0, (np.sqrt(at_share.sin2_error_bound) + pca.mean_offset_bound**2 / (0.5 * 1.0)) ** 2)
    assert pca.error_bound == pytest.approx(expected) and "2 beta" in pca.error_metric
    assert moment.centering == "assume-centered" and moment.centring_sin_bound == 0.0
    norm = dpdist.SpectralNorm(2, 1.0, 1e-6, **base).plan(n, d)
    norm_share = dpdist.SpectralNorm(2, 0.9, 0.9e-6, assume_centered=True, **base).plan(n, d)
    assert norm.privacy == dpdist.privacy.budget.ApproxDP(1.0, 1e-6)
    assert norm.noise_scale == norm_share.noise_scale
    assert norm.error_bound == pytest.approx(norm_share.error_bound + norm.mean_offset_bound**2)
    assert norm.mean_offset_bound > 0 and "2 beta" in norm.error_metric


def test_privpca_and_privnorm_at_a_public_mean_are_the_centred_data_releases():
    X, _ = _paired_spike(11, 4000, noise=0.01)
    mu = np.linspace(-3.0, 3.0, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = _friendly(dpdist.SparsePCA, 2, 1e5, 1e-3, sigma=np.sqrt(5), tau=0.01, mean=mu).fit(X + mu)
        ref = _friendly(dpdist.SparsePCA, 2, 1e5, 1e-3, sigma=np.sqrt(5), tau=0.01, assume_centered=True).fit(X)
        norm = _friendly(dpdist.SpectralNorm, 2, 1e5, 1e-3, sigma=np.sqrt(5), tau=0.01, mean=mu).fit(X + mu)
    np.testing.assert_allclose(est.components_, ref.components_, atol=1e-9)
    c = est.release_.parameters["centering"]
    assert c["mode"] == "public-mean" and c["mean"] == mu.tolist() and "public" in c["mean_source"]
    assert "mean" not in [label for label, _ in est.release_.events]
    np.testing.assert_array_equal(est.location_, mu)
    assert norm.release_.parameters["centering"]["mode"] == "public-mean"
    assert norm.norm_ == pytest.approx(ref.lambda_hat_, rel=0.01)
