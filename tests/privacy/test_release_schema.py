"""Releases carry only public parameters and noised values.

An allow-list schema over every estimator's release metadata and every Zarr result written:

* the metadata's top-level keys are exactly the Release schema's;
* every key of ``parameters``, ``noise_scales`` and ``values`` is on the estimator's allow-list
  below, each entry a public parameter (given, or derived from public values), a noise scale,
  a noised value, or post-processing of noised values;
* nothing is a timing, a count of affected rows, or a noisy test statistic (FriendlyCore's
  test outcomes are bits);
* ``created`` is a date (no time of day);
* every estimator's release records its utility verdict (``parameters["utility"]``: the plan's
  predicted error against the quantity's scale, and whether the release is vacuous), a public
  function of the parameters and the shape;
* and, the check that needs no list: fitted with the same seed on two neighbouring datasets
  (one row replaced by a fill value), every *public* part of the metadata is identical. A
  timing, a count, or any other unnoised function of the data differs and fails this test,
  whatever its name.

The Zarr results written by :func:`dpdist.data.results.write_result` (the CLI's write path)
hold the same metadata and only the allowed arrays.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from dpdist.data.results import load_result, write_result
from dpdist.exceptions import NoPrivateResult
from tests.estimator_zoo import FITS, release_of

TOP = {"mechanism", "private", "not_private_reasons", "privacy", "parameters", "noise_scales", "seeding", "notes",
       "status", "library", "version", "created", "events", "mechanisms"}

#: Metadata that are released (noised) values or post-processing of them: they may differ
#: between neighbours. Everything else must be identical. SecondMoment with a private radius
#: and lambda_min derives its level schedule (and the budget's per-level breakdown) from them;
#: SparsePCA calibrates PrivPCA at PrivNorm's released lambda_hat.
RELEASED_PARAMETERS = {"q_tilde", "subspace_dims"}
DERIVED_FROM_RELEASED = {
    "SecondMoment-private-init": {
        "parameters": {"radius", "lambda_min", "lambda_bucket_lower_edge", "n_levels", "normalised_radius", "kappas",
                       "level_radii", "thresholds", "utility"},
        "noise_scales": {"level_sigmas"},
        "privacy": {"breakdown"},
    },
    # PrivPCA's noise scale is calibrated at PrivNorm's released lambda_hat (so are its event
    # and its mechanism's description: list entries named by step / mechanism)
    "SparsePCA": {"noise_scales": {"pca/sigma_priv", "pca/sensitivity"}, "events": {"pca/release"},
                  "mechanisms": {"PrivPCA Gaussian projector release (COLT 2026, Algorithm 2, Lemma 10)"}},
}

#: Words no metadata key may contain (timings, counts of affected rows, noisy test statistics).
FORBIDDEN = re.compile(r"seconds|_time|time_|elapsed|duration|_noisy|\bn_nonfinite|zeroed|n_clipped|clipped_rows")

COMMON_PRIVCOV = {"n_samples", "n_features", "sigma", "clip", "beta", "on_nonfinite"}
ALLOWED = {
    "SparseCovariance": (
        COMMON_PRIVCOV | {"k", "clip_rule", "tile_size", "calibration", "centering", "selection",
                           "row_clip", "row_clip_rule"},
        {"gumbel_select", "laplace_select", "laplace_release", "gaussian_release", "mean_gaussian"},
        {"covariance", "selected", "selected_values", "diagonal", "mean"},
    ),
    "GaussianCovariance": (
        COMMON_PRIVCOV | {"epsilon", "delta", "threshold", "sensitivity", "float_factor", "gaussian_sigma", "rule",
                          "centering"},
        {"gaussian", "mean_gaussian"},
        {"covariance", "mean"},
    ),
    "GaussianPCA": (
        COMMON_PRIVCOV | {"epsilon", "delta", "threshold", "sensitivity", "float_factor", "gaussian_sigma", "rule",
                          "centering"},
        {"gaussian", "mean_gaussian"},
        {"covariance", "components", "eigenvalue", "mean"},
    ),
    "AnalyzeGauss": (
        {"n_samples", "n_features", "radius", "sensitivity", "float_factor", "rule", "on_nonfinite", "centering"},
        {"gaussian", "mean_gaussian"},
        {"components", "covariance", "eigenvalue", "mean"},
    ),
    "ExpMechSparsePCA": (
        COMMON_PRIVCOV | {"k", "clip_source", "max_subsets", "budget_split", "calibration", "centering"},
        {"selection_gumbel_scale", "block_gaussian_sigma", "mean_gaussian"},
        {"components", "support", "noisy_block", "block_eigenvalue", "mean"},
    ),
    "SecondMoment": (
        {"n_samples", "n_features", "rho", "m", "alpha", "xi", "sensitivity", "init_fraction", "budget_split", "psd",
         "on_nonfinite", "radius_source", "lambda_source", "radius", "lambda_min", "n_levels", "normalised_radius",
         "kappas", "level_radii", "thresholds", "subspace_dims", "float_factor"},
        {"level_sigmas", "level_sigmas_units"},
        {"second_moment", "projections", "level_matrices"},
    ),
    "SecondMoment-private-init": (
        {"n_samples", "n_features", "rho", "m", "alpha", "xi", "sensitivity", "init_fraction", "budget_split", "psd",
         "on_nonfinite", "radius_source", "lambda_source", "radius", "lambda_min", "n_levels", "normalised_radius",
         "kappas", "level_radii", "thresholds", "subspace_dims", "float_factor", "radius_grid", "lambda_groups",
         "lambda_bucket_lower_edge", "rejected_stage"},
        {"level_sigmas", "level_sigmas_units", "radius_histogram_sigma", "lambda_histogram_sigma"},
        {"second_moment", "projections", "level_matrices"},
    ),
    "one_shot_second_moment": (
        {"n_samples", "n_features", "rho", "radius", "sensitivity", "on_nonfinite"},
        {"sigma"},
        {"second_moment"},
    ),
    "SpectralNorm": (
        {"n_samples", "n_features", "k", "gap", "sigma", "n_batches", "batch_size_min", "batch_size_max", "batches",
         "tau", "tau_rule", "threshold_sigma_bar", "entry_clip", "float_bounds", "beta", "on_nonfinite", "stages",
         "centering"},
        {"norm/count_test_scale", "norm/count_test_bound", "norm/weight_test_scale", "norm/weight_test_bound",
         "norm/sigma", "norm/sensitivity", "norm/rule", "mean_gaussian"},
        {"tests", "norm", "mean"},
    ),
    "SparsePCA": (
        {"n_samples", "n_features", "k", "gap", "sigma", "n_batches", "batch_size_min", "batch_size_max", "batches",
         "tau", "tau_rule", "threshold_sigma_bar", "entry_clip", "float_bounds", "beta", "on_nonfinite", "stages",
         "budget_split", "centering"},
        {f"{stage}/{key}" for stage in ("norm", "pca") for key in (
            "count_test_scale", "count_test_bound", "weight_test_scale", "weight_test_bound", "sensitivity", "rule")}
        | {"norm/sigma", "pca/sigma_priv", "mean_gaussian"},
        {"tests", "components", "projector_top_k2", "lambda_hat", "norm", "mean"},
    ),
    "SparsePCA-lambda-hat": (
        {"n_samples", "n_features", "k", "gap", "sigma", "n_batches", "batch_size_min", "batch_size_max", "batches",
         "tau", "tau_rule", "threshold_sigma_bar", "entry_clip", "float_bounds", "beta", "on_nonfinite", "stages",
         "budget_split", "centering"},
        {f"pca/{key}" for key in ("count_test_scale", "count_test_bound", "weight_test_scale", "weight_test_bound",
                                  "sigma_priv", "sensitivity", "rule")} | {"mean_gaussian"},
        {"tests", "components", "projector_top_k2", "lambda_hat", "mean"},
    ),
    "SubsampleAggregateSecondMoment": (
        {"n_samples", "n_features", "epsilon", "delta", "m", "alpha", "xi", "n_groups", "eta_b", "C_N", "threshold",
         "q_tilde", "privacy_min_samples", "utility_min_samples", "privacy_precondition_holds", "unsafe_no_privacy",
         "on_nonfinite"},
        {"tlap_scale", "tlap_support", "masking_eta_b"},
        {"second_moment"},
    ),
    # NOT PRIVATE: the default centres at the exact empirical mean (a value of the release)
    "ThresholdedCovariance": ({"n_samples", "n_features", "threshold", "sigma", "on_nonfinite", "centering"}, set(),
                              {"covariance", "mean"}),
    "ThresholdedPCA": (
        {"n_samples", "n_features", "threshold", "sigma", "on_nonfinite", "centering"}, set(),
        {"covariance", "components", "eigenvalue", "mean"},
    ),
}


#: Every estimator's release records the plan's utility verdict (a function of public values;
#: for SecondMoment with a private initialisation, of the released radius and lambda_min).
#: PrivCov's record, plus the component and its power-method iterations (post-processing)
ALLOWED["SparseCovariancePCA"] = (set(ALLOWED["SparseCovariance"][0]), set(ALLOWED["SparseCovariance"][1]),
                                  ALLOWED["SparseCovariance"][2] | {"components", "explained_variance", "support",
                                                                    "n_iter"})
for _name, (_params, _scales, _values) in ALLOWED.items():
    if _name != "one_shot_second_moment":  # a function, not an estimator: no plan
        _params |= {"utility"}


def _release(name, X, rs=5):
    fit, _ = FITS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return release_of(fit(X, rs, "synchronous"))
        except NoPrivateResult as exc:
            return exc.release


def _keys(obj, prefix=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield f"{prefix}{k}"
            yield from _keys(v, f"{prefix}{k}.")


@pytest.mark.parametrize("name", list(FITS))
def test_release_metadata_is_on_the_allow_list(name, tmp_path):
    X = FITS[name][1]()
    rel = _release(name, X)
    meta = rel.metadata()
    params, scales, values = ALLOWED[name]
    assert set(meta) == TOP
    assert set(meta["parameters"]) <= params, set(meta["parameters"]) - params
    assert set(meta["noise_scales"]) <= scales, set(meta["noise_scales"]) - scales
    assert set(rel.values) <= values, set(rel.values) - values
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", meta["created"])
    for key in _keys(meta):
        assert not FORBIDDEN.search(key.lower()), key
    if "tests" in rel.values:  # FriendlyCore outcomes: bits, and the public thresholds
        for outcome in rel.values["tests"].values():
            assert {k for k, v in outcome.items() if not isinstance(v, bool)} <= {"count_threshold", "weight_threshold"}
    # the Zarr result written by the CLI's path: the same metadata, only allowed arrays
    out = write_result(tmp_path / "r.zarr", meta, rel.values)
    loaded = load_result(out)
    assert loaded.metadata == meta
    assert set(loaded.values) <= values


@pytest.mark.parametrize("name", list(FITS))
def test_public_metadata_does_not_depend_on_the_data(name):
    """Same seed, neighbouring datasets (one row replaced by a 9.97e36 fill value): every part of
    the metadata that is not a released (noised) value is identical."""
    X = FITS[name][1]()
    Xp = np.array(X, dtype=np.float64)
    Xp[7, 0] = 9.97e36
    a, b = _release(name, X).metadata(), _release(name, Xp).metadata()
    for meta in (a, b):
        for key in RELEASED_PARAMETERS:
            meta["parameters"].pop(key, None)
        for part, keys in DERIVED_FROM_RELEASED.get(name, {}).items():
            if isinstance(meta[part], list):  # events, mechanisms: entries named by step / mechanism
                meta[part] = [x for x in meta[part] if x.get("step", x.get("mechanism")) not in keys]
                continue
            for key in keys:
                meta[part].pop(key, None)
    assert a == b


# ------------------------------------------------------------------------------------------
# the schema declared in the code: Release refuses any parameter or noise scale not on it


def test_the_declared_schema_covers_every_allow_list_here_and_names_nothing_forbidden():
    from dpdist.privacy.release import NOISE_SCALE_SCHEMA, PARAMETER_SCHEMA

    for name, (params, scales, _) in ALLOWED.items():
        assert params <= set(PARAMETER_SCHEMA), (name, params - set(PARAMETER_SCHEMA))
        assert scales <= set(NOISE_SCALE_SCHEMA), (name, scales - set(NOISE_SCALE_SCHEMA))
    for key in (*PARAMETER_SCHEMA, *NOISE_SCALE_SCHEMA):
        assert not FORBIDDEN.search(key.lower()), key


@pytest.mark.parametrize("name", list(FITS))
def test_every_estimator_releases_only_declared_keys_and_types(name):
    """Every estimator's release (on data and on a hostile neighbour) passes the declared
    schema key by key, with the value types it declares."""
    from dpdist.privacy.release import NOISE_SCALE_SCHEMA, PARAMETER_SCHEMA, _plain_type

    X = np.array(FITS[name][1](), dtype=np.float64)
    Xp = X.copy()
    Xp[7, 0] = 9.97e36
    for data in (X, Xp):
        rel = _release(name, data)
        for part, schema in (("parameters", PARAMETER_SCHEMA), ("noise_scales", NOISE_SCALE_SCHEMA)):
            for key, value in getattr(rel, part).items():
                assert key in schema, (part, key)
                assert _plain_type(value) in schema[key], (part, key, type(value))


def test_release_refuses_an_undeclared_parameter_or_a_wrong_type():
    from dpdist.privacy.release import Release

    base = {"mechanism": "m", "privacy": None, "private": False, "noise_scales": {"sigma": 1.0}}
    Release(parameters={"n_samples": np.int64(3), "sigma": None, "kappas": np.array([1.0])}, **base)  # declared
    with pytest.raises(TypeError, match="key 'elapsed' is not declared"):
        Release(parameters={"n_samples": 3, "elapsed": 1.5}, **base)
    with pytest.raises(TypeError, match=r"parameters\['n_samples'\] must be of type int, got float"):
        Release(parameters={"n_samples": 3.0}, **base)
    with pytest.raises(TypeError, match=r"parameters\['k'\] must be of type int, got list"):
        Release(parameters={"k": np.arange(3)}, **base)
    with pytest.raises(TypeError, match="noise_scales key 'n_zeroed_rows' is not declared"):
        Release(parameters={}, **{**base, "noise_scales": {"n_zeroed_rows": 2}})
