"""The covariance family validates each parameter once per fit, calibrates once, and its
functional forms are its estimators (same signature, same release)."""

from __future__ import annotations

import collections
import inspect
import sys

import numpy as np
import pytest

import dpdist
from dpdist.algorithms.sparse_covariance import private_sparse_covariance
from dpdist.algorithms.sparse_covariance_pca import sparse_covariance_pca

#: The shared checks a parameter goes through (:mod:`dpdist._validation`, the budget's).
CHECKS = {"check_epsilon", "check_delta", "check_int", "check_real", "check_positive", "check_probability",
          "check_choice", "check_bool", "check_scheduler", "check_random_state", "check_row_clip",
          "check_mean", "_check_selection"}
NESTED = {"dpdist._validation", "dpdist.privacy.budget"}  # a check calling another counts once
#: The utility bounds' own checks of the derived values a plan passes them (AnalyzeGauss's beta / 2)
UTILITY = "dpdist.algorithms._utility"
CALIBRATIONS = {"privcov_gumbel_calibration", "privcov_zcdp_calibration", "privcov_calibration", "wang_xu_calibration",
                "analyze_gauss_calibration"}
GUMBEL = {"privcov_gumbel_calibration": 1, "wang_xu_calibration": 1}  # the plan compares with Wang-Xu's scale


def _name(frame) -> str:
    code = frame.f_code
    if code.co_name in ("check_scheduler", "check_random_state", "check_row_clip"):
        return code.co_name[len("check_"):]
    if code.co_name == "check_epsilon":
        return frame.f_locals.get("name", "epsilon")
    if code.co_name == "check_delta":
        return frame.f_locals.get("name", "delta")
    return frame.f_locals.get("name", "?")


def _traced(fn):
    """``fn()`` run under a profiler: the parameter checks made by the estimator's code (not
    by the privacy layer's primitives, the engine, or the plans of the measured n*'s
    fingerprint, nor a utility bound's check of a derived value), by parameter name, and the
    calibrations made."""
    checks, calibrations = collections.Counter(), collections.Counter()

    def profile(frame, event, arg):
        if event != "call":
            return
        name = frame.f_code.co_name
        if name not in CHECKS and name not in CALIBRATIONS:
            return
        f = frame.f_back
        caller = f.f_globals.get("__name__", "") if f is not None else ""
        while f is not None:
            if f.f_globals.get("__name__") == "dpdist.algorithms.fingerprint":
                return
            f = f.f_back
        if name in CALIBRATIONS:
            calibrations[name] += 1
        elif caller.startswith("dpdist.algorithms") and caller not in NESTED and caller != UTILITY:
            checks[_name(frame)] += 1

    sys.setprofile(profile)
    try:
        out = fn()
    finally:
        sys.setprofile(None)
    return out, checks, calibrations


X = np.random.default_rng(0).standard_normal((300, 6))
PARAMS = {"sigma": 1.0, "random_state": 0, "scheduler": "synchronous"}
USER = {"k", "epsilon", "delta", "beta", "sigma", "clip", "selection", "row_clip", "assume_centered", "mean_clip",
        "mean_fraction", "mean", "scheduler", "random_state", "on_nonfinite", "tile_size",
        "threshold", "radius", "row_norm"}
RUNTIME = {"scheduler": "synchronous", "random_state": 0}


@pytest.mark.parametrize("fit, names, calibrations", [
    (lambda: dpdist.SparseCovariance(2, 1.0, 1e-6, **PARAMS).fit(X), {"k", "sigma", "row_clip"}, GUMBEL),
    (lambda: dpdist.SparseCovariancePCA(2, 1.0, 1e-6, **PARAMS).fit(X), {"k", "sigma"}, GUMBEL),
    (lambda: dpdist.SparseCovariance(2, 1.0, 1e-6, selection="paper", mean=np.zeros(6), **PARAMS).fit(X),
     {"k", "mean"}, {"privcov_calibration": 1, "wang_xu_calibration": 1}),
    (lambda: private_sparse_covariance(X, 2, 1.0, 1e-6, **PARAMS), {"k", "selection"},
     {"privcov_gumbel_calibration": 1}),  # a function computes no plan (it records no utility verdict)
    (lambda: sparse_covariance_pca(X, 2, 1.0, 1e-6, assume_centered=True, **PARAMS), {"k", "assume_centered"},
     {"privcov_gumbel_calibration": 1}),
    (lambda: dpdist.baselines.GaussianCovariance(1.0, 1e-6, sigma=1.0, **RUNTIME).fit(X), {"threshold", "mean_clip"},
     {"wang_xu_calibration": 1}),
    (lambda: dpdist.baselines.AnalyzeGauss(1.0, 1e-6, row_norm=3.0, **RUNTIME).fit(X), {"row_norm", "mean_fraction"},
     {"analyze_gauss_calibration": 1}),
    (lambda: dpdist.baselines.ThresholdedCovariance(sigma=1.0, scheduler="synchronous").fit(X),
     {"threshold", "sigma", "mean"}, {}),
], ids=["SparseCovariance", "SparseCovariancePCA", "SparseCovariance-paper-public-mean",
        "private_sparse_covariance", "sparse_covariance_pca", "GaussianCovariance", "AnalyzeGauss",
        "ThresholdedCovariance"])
def test_a_fit_checks_each_parameter_once_and_calibrates_once(fit, names, calibrations):
    _, checks, calibrated = _traced(fit)
    user = {name: count for name, count in checks.items() if name in USER}
    assert user == {name: 1 for name in user}, user
    assert names | {"scheduler", "on_nonfinite", "tile_size"} <= set(user)
    assert calibrated == calibrations  # the plan's calibration is the release's


def test_the_vacuous_verdict_recorded_is_the_fits_plan():
    est = dpdist.SparseCovariance(2, 1.0, 1e-6, **PARAMS)
    with pytest.warns(dpdist.exceptions.VacuousReleaseWarning):
        est.fit(X)
    assert est.release_.parameters["utility"] == est.plan(300, 6).utility()


@pytest.mark.parametrize("fn, cls", [(private_sparse_covariance, dpdist.SparseCovariance),
                                     (sparse_covariance_pca, dpdist.SparseCovariancePCA)])
def test_a_functional_forms_signature_is_its_estimators(fn, cls):
    est = list(inspect.signature(cls).parameters.values())
    params = list(inspect.signature(fn).parameters.values())
    assert params[0].name == "X"
    assert [(p.name, p.default) for p in params[1:]] == [(p.name, p.default) for p in est]
    assert [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD] == ["X", "k", "epsilon", "delta"]
    assert "on_nonfinite : " in fn.__doc__


def test_a_functional_form_releases_what_its_estimator_releases():
    rel = private_sparse_covariance(X, 2, 1.0, 1e-6, **PARAMS)
    with pytest.warns(dpdist.exceptions.VacuousReleaseWarning):
        fitted = dpdist.SparseCovariance(2, 1.0, 1e-6, **PARAMS).fit(X).release_
    assert "utility" not in rel.parameters  # the function's release carries no utility verdict, as before
    assert (rel.values["covariance"] != fitted.values["covariance"]).nnz == 0
    assert {k: v for k, v in fitted.parameters.items() if k != "utility"} == rel.parameters


@pytest.mark.parametrize("kwargs, message", [
    ({"k": 2.0}, "k must be an integer"),
    ({"sigma": None}, "give either sigma"),
    ({"selection": "paper", "row_clip": 3.0}, "row_clip applies to selection='gumbel'"),
    ({"k": 7}, "k must satisfy k <= d = 6"),
    ({"mean": np.zeros(5)}, "mean has 5 entries but the data have 6 features"),
    ({"assume_centered": True, "mean": np.zeros(6)}, "give either assume_centered=True or mean="),
    ({"selection": "exact"}, "selection must be one of"),
    ({"mean_fraction": 1.0}, "mean_fraction must be a finite real number in (0, 1)"),
])
def test_the_function_and_the_estimator_refuse_alike_and_before_any_noise(kwargs, message):
    args = {"k": 2, "epsilon": 1.0, "delta": 1e-6, **PARAMS, **kwargs}
    with pytest.raises(dpdist.exceptions.ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        private_sparse_covariance(X, **args)
    est = dpdist.SparseCovariance(**args)
    with pytest.raises(dpdist.exceptions.ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        est.fit(X)
    assert not hasattr(est, "covariance_")
