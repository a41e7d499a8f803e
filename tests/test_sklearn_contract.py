"""scikit-learn's estimator contract, over every public estimator and baseline.

- ``sklearn.utils.estimator_checks.estimator_checks_generator`` gives scikit-learn's own checks of
  each estimator, on the small data sets those checks make; the checks that cannot apply to a
  private estimator are listed in :data:`EXPECTED_FAILED` with the reason (README.md lists them
  too). They are strict: a listed check that starts passing fails here, so the list stays true.
- ``sklearn.base.clone`` gives an unfitted estimator with the same parameters, sharing the
  scheduler and a ``NoiseSeed`` (one seed: a clone cannot draw the same noise again).
- The PCA estimators have ``transform`` / ``fit_transform`` and work as a ``Pipeline`` step.
"""

from __future__ import annotations

import math
import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import estimator_checks_generator

import dpdist
from dpdist import ValidationError
from dpdist.baselines import (
    AnalyzeGauss,
    GaussianCovariance,
    GaussianPCA,
    SubsampleAggregateSecondMoment,
    ThresholdedCovariance,
    ThresholdedPCA,
)
from dpdist.privacy.noise.streams import NoiseSeed
from dpdist.testing.estimator_audits import spike_rows

SYNC = {"scheduler": "synchronous"}

#: One instance of every public estimator and baseline, seeded (scikit-learn's checks compare
#: two fits), with parameters that fit scikit-learn's check data (10 to 30 rows, 1 to 5 columns).
CHECKED = [
    dpdist.SparseCovariance(2, 1.0, 1e-5, sigma=1.0, random_state=0, **SYNC),
    dpdist.SpectralNorm(1, 50.0, 1e-3, gap=0.5, sigma=1.0, n_batches=20, tau=0.02, random_state=0, **SYNC),
    dpdist.SparsePCA(1, 50.0, 1e-3, gap=0.5, sigma=1.0, n_batches=20, tau=0.02, lambda_hat=1.0, random_state=0,
                     **SYNC),
    dpdist.ExpMechSparsePCA(1, 1.0, 1e-5, sigma=1.0, random_state=0, **SYNC),
    dpdist.SparseCovariancePCA(1, 1.0, 1e-5, sigma=1.0, random_state=0, **SYNC),
    dpdist.SecondMoment(1.0, m=1, radius=20.0, lambda_min=0.5, random_state=0, **SYNC),
    GaussianCovariance(1.0, 1e-5, sigma=1.0, random_state=0, **SYNC),
    ThresholdedCovariance(threshold=0.1, **SYNC),
    AnalyzeGauss(1.0, 1e-5, row_norm=3.0, random_state=0, **SYNC),
    GaussianPCA(1.0, 1e-5, sigma=1.0, random_state=0, **SYNC),
    ThresholdedPCA(threshold=0.1, **SYNC),
    SubsampleAggregateSecondMoment(2.0, 1e-3, m=2, unsafe_no_privacy=True, random_state=0, **SYNC),
]

#: Why a check cannot apply (README.md, "scikit-learn's checks", says more).
OBJECT_DTYPE = "object arrays are refused: numeric arrays only"
TOO_SMALL_FOR_BATCHES = "scikit-learn's check data are too small for 20 stable batches (NoPrivateResult)"
TOO_SMALL_FOR_GROUPS = "scikit-learn's check data are too small for agreeing groups of m >= d rows (NoPrivateResult)"

#: Checks fitting scikit-learn's small data sets, by estimator family.
_FITS_SMALL = ["check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
               "check_estimators_fit_returns_self", "check_readonly_memmap_input",
               "check_n_features_in_after_fitting", "check_positive_only_tag_during_fit",
               "check_estimators_dtypes", "check_pipeline_consistency", "check_estimators_pickle",
               "check_f_contiguous_array_estimator", "check_methods_sample_order_invariance",
               "check_methods_subset_invariance", "check_dict_unchanged", "check_fit_idempotent",
               "check_fit_check_is_fitted", "check_n_features_in", "check_fit2d_predict1d"]
_FITS_SMALL_TRANSFORM = ["check_transformer_data_not_an_array", "check_transformer_general",
                         "check_transformer_preserve_dtypes"]

#: check name -> why it cannot apply, per estimator class name.
EXPECTED_FAILED = {
    name: {"check_dtype_object": OBJECT_DTYPE} for name in
    ("SparseCovariance", "SpectralNorm", "SparsePCA", "ExpMechSparsePCA", "SparseCovariancePCA", "SecondMoment", "GaussianCovariance",
     "ThresholdedCovariance", "AnalyzeGauss", "GaussianPCA", "ThresholdedPCA", "SubsampleAggregateSecondMoment")
}
EXPECTED_FAILED["SpectralNorm"].update(dict.fromkeys(_FITS_SMALL, TOO_SMALL_FOR_BATCHES))
EXPECTED_FAILED["SparsePCA"].update(dict.fromkeys(_FITS_SMALL + _FITS_SMALL_TRANSFORM, TOO_SMALL_FOR_BATCHES))
EXPECTED_FAILED["SubsampleAggregateSecondMoment"].update(dict.fromkeys(_FITS_SMALL, TOO_SMALL_FOR_GROUPS))


def test_the_checks_cover_every_public_estimator_and_baseline():
    public = {n for n in dpdist.__all__ if isinstance(getattr(dpdist, n), type) and hasattr(getattr(dpdist, n), "fit")}
    public |= {getattr(dpdist.baselines, n).__name__ for n in dpdist.baselines.__all__}
    assert {type(est).__name__ for est in CHECKED} == public == set(EXPECTED_FAILED)


def _check_id(value) -> str:
    """A short test id: the estimator's class name, the check's name (and its keywords)."""
    if isinstance(value, dpdist.algorithms._base.Estimator):
        return type(value).__name__
    func = getattr(value, "func", value)
    keywords = ",".join(f"{k}={v}" for k, v in getattr(value, "keywords", {}).items())
    return f"{func.__name__}({keywords})" if keywords else func.__name__


def _all_checks() -> list:
    """scikit-learn's checks of every estimator, the inapplicable ones marked strict xfail
    (what ``parametrize_with_checks`` builds, as a list with short ids on every version)."""
    cases = []
    with warnings.catch_warnings():
        # dpdist's estimators implement scikit-learn's protocol without subclassing BaseEstimator
        # (scikit-learn is optional): the checks below are what that warning is about
        warnings.filterwarnings("ignore", message=r"Estimator \w+ does not inherit from `sklearn.base.BaseEstimator`")
        for est in CHECKED:
            cases += estimator_checks_generator(est, legacy=True, expected_failed_checks=EXPECTED_FAILED[
                type(est).__name__], mark="xfail", xfail_strict=True)
    return cases


@pytest.mark.parametrize("estimator, check", _all_checks(), ids=_check_id)
def test_sklearn_check(estimator, check):
    with warnings.catch_warnings():
        # seeded fits warn PrivacyWarning, tiny ones UtilityWarning; integer input DataConversionWarning
        warnings.simplefilter("ignore")
        check(estimator)


# ------------------------------------------------------------------------ clone
def gauss(n: int = 300, d: int = 6) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((n, d))


@pytest.mark.parametrize("est", CHECKED, ids=lambda est: type(est).__name__)
def test_clone_is_unfitted_with_equal_parameters(est):
    twin = clone(est)
    assert type(twin) is type(est) and twin is not est
    assert twin.get_params() == est.get_params() and repr(twin) == repr(est)
    assert not [k for k in vars(twin) if k.endswith("_")]


def test_clone_keeps_one_noise_seed_so_two_fits_cannot_draw_the_same_noise():
    seed = NoiseSeed(entropy=12345, seeded=True)
    est = GaussianCovariance(1.0, 1e-5, sigma=1.0, random_state=seed, **SYNC)
    twin = clone(est)
    assert twin.random_state is seed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(gauss())
        with pytest.raises(ValidationError, match="NoiseSeed already drove a fit"):
            twin.fit(gauss())


def test_tags_say_unsupervised_nan_policy_and_determinism():
    from sklearn.utils import get_tags

    tags = get_tags(dpdist.SparsePCA(2, 1.0, 1e-5, gap=0.5, sigma=1.0))
    assert tags.transformer_tags is not None and not tags.target_tags.required
    assert tags.input_tags.allow_nan and tags.non_deterministic  # rows with NaN become zero rows; OS noise
    tags = get_tags(dpdist.SparseCovariance(2, 1.0, 1e-5, on_nonfinite="raise", random_state=3))
    assert tags.transformer_tags is None and not tags.input_tags.allow_nan and not tags.non_deterministic


# ------------------------------------------------------------------------ transform, Pipeline
def spike() -> np.ndarray:
    """Spike rows, every odd row the negation of the one before (mean exactly zero, in every
    batch too: the default centring leaves FriendlyCore's batches good)."""
    X = spike_rows(3000, noise=0.01)
    X[1::2] = -X[0::2]
    return X


#: The PCA estimators: name -> (estimator, data it fits).
PCA = {
    "SparsePCA": (lambda: dpdist.SparsePCA(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02,
                                           random_state=1, **SYNC), spike),
    "ExpMechSparsePCA": (lambda: dpdist.ExpMechSparsePCA(2, 1.0, 1e-5, sigma=1.0, random_state=1, **SYNC), gauss),
    "SparseCovariancePCA": (lambda: dpdist.SparseCovariancePCA(2, 1.0, 1e-5, sigma=1.0, random_state=1, **SYNC),
                            gauss),
    "GaussianPCA": (lambda: GaussianPCA(1.0, 1e-5, sigma=1.0, random_state=1, **SYNC), gauss),
    "ThresholdedPCA": (lambda: ThresholdedPCA(threshold=0.1, **SYNC), gauss),
    "AnalyzeGauss": (lambda: AnalyzeGauss(1.0, 1e-5, row_norm=3.0, random_state=1, **SYNC), gauss),
}


def test_the_pca_estimators_are_the_transformers():
    assert {type(est).__name__ for est in CHECKED if hasattr(est, "transform")} == set(PCA)


@pytest.mark.parametrize("name", list(PCA))
def test_pca_estimators_transform_and_work_in_a_pipeline(name):
    make, data = PCA[name]
    X = data()
    flip = FunctionTransformer(np.negative)  # the same second moment, so each fit stays in its regime
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe = make_pipeline(flip, make())
        Z = pipe.fit_transform(X)
        est = pipe[-1]
        mean = getattr(est, "location_", 0.0)  # the mean the fit centred at
        np.testing.assert_allclose(Z, (-X - mean) @ est.components_.T)
        assert Z.shape == (X.shape[0], 1) and isinstance(Z, np.ndarray)
        np.testing.assert_allclose(pipe.transform(X[:5]), Z[:5])
        # a fresh fit_transform is fit then transform, on the estimator itself
        alone = make()
        np.testing.assert_allclose(alone.fit_transform(-X), Z)
    assert isinstance(pipe, Pipeline) and est.n_features_in_ == X.shape[1]


def test_transform_validates_its_input_and_keeps_dask_lazy():
    est = ThresholdedPCA(threshold=0.1, **SYNC)
    with pytest.raises(AttributeError, match="not fitted"):
        est.transform(gauss())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(gauss())
    with pytest.raises(ValidationError, match="X has 5 features, but ThresholdedPCA is expecting 6 features"):
        est.transform(gauss(d=5))
    lazy = est.transform(da.from_array(gauss(), chunks=(100, -1)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), (gauss() - est.location_) @ est.components_.T)


def test_with_on_nonfinite_raise_nan_and_inf_are_refused_as_scikit_learn_checks():
    """scikit-learn's check_estimators_nan_inf runs where the tags say NaN is refused."""
    from sklearn.utils.estimator_checks import check_estimators_nan_inf

    for est in (dpdist.SparseCovariance(2, 1.0, 1e-5, sigma=1.0, random_state=0, on_nonfinite="raise", **SYNC),
                ThresholdedPCA(threshold=0.1, on_nonfinite="raise", **SYNC)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_estimators_nan_inf(type(est).__name__, est)


def test_transform_treats_nonfinite_rows_as_fit_does():
    X = gauss()
    est = ThresholdedPCA(threshold=0.1, **SYNC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    bad = X.copy()
    bad[3, 1], bad[7, 0] = np.nan, np.inf
    Z = est.transform(bad)
    zero_row = -est.location_ @ est.components_.T  # zero rows, as on_nonfinite="zero" makes them in fit, centred
    np.testing.assert_allclose(Z[[3, 7]], np.vstack([zero_row, zero_row]))
    np.testing.assert_allclose(np.delete(Z, [3, 7], axis=0),
                               (np.delete(X, [3, 7], axis=0) - est.location_) @ est.components_.T)
    est.set_params(on_nonfinite="raise")
    with pytest.raises(ValidationError, match="NaN or infinite"):
        est.transform(bad)


def test_import_dpdist_does_not_import_scikit_learn():
    """scikit-learn is optional: the protocol above imports it only when scikit-learn calls in."""
    import subprocess
    import sys

    code = "import sys, dpdist, dpdist.baselines; print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
