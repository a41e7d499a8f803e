"""The PCA and second-moment estimators check each parameter once per fit and plan once per fit,
and their functional forms have the estimator's signature (the parameter list is written once).

"Checked once" is measured as the package measures it: every outermost call of a parameter
check (:mod:`dpdist._validation`, the privacy layer's named checks) during one fit, by the
parameter it names, made outside :mod:`dpdist.privacy` and :mod:`dpdist.engine` (their public
functions check their own arguments, as entry points of those layers).
"""

from __future__ import annotations

import collections
import inspect
import math
import sys
import warnings

import numpy as np
import pytest

import dpdist
from dpdist.algorithms.baselines.pca import GaussianPCA, ThresholdedPCA
from dpdist.algorithms.baselines.subsample_aggregate import (
    SubsampleAggregateSecondMoment,
    subsample_aggregate_second_moment,
)
from dpdist.algorithms.expmech_pca import ExpMechSparsePCA, expmech_pca
from dpdist.algorithms._base import Estimator
from dpdist.algorithms.plan import Plan
from dpdist.algorithms.second_moment import SecondMoment, second_moment
from dpdist.algorithms.sparse_pca import SparsePCA, SpectralNorm, private_norm, sparse_pca
from tests.estimator_zoo import gauss, spike

SYNC = {"scheduler": "synchronous", "random_state": 1}

FORMS = [
    (private_norm, SpectralNorm, ("k", "epsilon", "delta")),
    (sparse_pca, SparsePCA, ("k", "epsilon", "delta")),
    (expmech_pca, ExpMechSparsePCA, ("k", "epsilon", "delta")),
    (second_moment, SecondMoment, ("rho",)),
    (subsample_aggregate_second_moment, SubsampleAggregateSecondMoment, ("epsilon", "delta")),
]


@pytest.mark.parametrize("form,cls,positional", FORMS, ids=lambda x: getattr(x, "__name__", ""))
def test_a_functional_form_has_its_estimators_signature(form, cls, positional):
    got = list(inspect.signature(form).parameters.values())
    init = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert got[0].name == "X"
    assert [(p.name, p.default) for p in got[1:]] == [(p.name, p.default) for p in init]
    assert [p.name for p in got[1:] if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD] == list(positional)


#: The checks counted: those of dpdist._validation and the privacy layer's named ones.
_CHECKS = {"check_epsilon", "check_delta", "check_int", "check_real", "check_positive", "check_choice", "check_bool",
           "check_probability", "check_rho", "check_m", "check_alpha", "check_xi", "check_k", "check_gap",
           "check_n_batches", "_check_positive", "_check_sensitivity", "_check_prob", "check_nonfinite"}
#: What a named check names when it is not given ``name``.
_IMPLIED = {"check_epsilon": "epsilon", "check_delta": "delta", "check_rho": "rho", "check_m": "m",
            "check_alpha": "alpha", "check_xi": "xi", "check_k": "k", "check_gap": "gap",
            "check_n_batches": "n_batches",
            "_check_sensitivity": "sensitivity", "check_nonfinite": "on_nonfinite"}


def _is_dpdist(frame) -> bool:
    return "dpdist" in frame.f_code.co_filename.replace("\\", "/").split("/site-packages/")[-1]


def checks_per_parameter(fit) -> collections.Counter:
    """Outermost parameter checks made during ``fit()`` outside dpdist.privacy and dpdist.engine."""
    counts: collections.Counter = collections.Counter()

    def profile(frame, event, arg):
        code = frame.f_code
        if event != "call" or code.co_name not in _CHECKS or not _is_dpdist(frame):
            return
        caller = frame.f_back
        if caller is not None and caller.f_code.co_name in _CHECKS:
            return  # inside another check: counted there
        where = "" if caller is None else caller.f_code.co_filename.replace("\\", "/")
        if "/dpdist/privacy/" in where or "/dpdist/engine/" in where:
            return
        name = frame.f_locals.get("name")
        counts[name if isinstance(name, str) else _IMPLIED.get(code.co_name, code.co_name)] += 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded (PrivacyWarning) and tiny (UtilityWarning) test fits
        sys.setprofile(profile)
        try:
            fit()
        finally:
            sys.setprofile(None)
    return counts


CASES = {
    "SpectralNorm": (lambda: SpectralNorm(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02, **SYNC),
                     spike, ("k", "epsilon", "delta", "gap", "sigma", "n_batches", "tau", "beta", "shuffle_batches",
                             "require_useful", "on_nonfinite", "assume_centered", "mean_fraction", "mean_clip")),
    "SparsePCA": (lambda: SparsePCA(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02, **SYNC),
                  spike, ("k", "epsilon", "delta", "gap", "sigma", "n_batches", "tau", "beta", "norm_fraction",
                          "lambda_hat", "shuffle_batches", "require_useful", "on_nonfinite", "assume_centered",
                          "mean_fraction", "mean_clip")),
    "ExpMechSparsePCA": (lambda: ExpMechSparsePCA(2, 1.0, 1e-5, sigma=1.0, **SYNC), gauss,
                         ("k", "epsilon", "delta", "sigma", "clip", "max_subsets", "beta", "subsets_per_task",
                          "on_nonfinite", "assume_centered", "mean_fraction", "mean_clip")),
    "SecondMoment": (lambda: SecondMoment(1.0, m=1, radius=20.0, lambda_min=0.5, **SYNC),
                     lambda: gauss(scales=[1, 2, 3, 5, 8, 13]),
                     ("rho", "m", "alpha", "radius", "lambda_min", "init_fraction", "sensitivity", "xi",
                      "lambda_floor", "psd", "on_nonfinite")),
    "SubsampleAggregateSecondMoment": (
        lambda: SubsampleAggregateSecondMoment(2.0, 1e-3, m=30, unsafe_no_privacy=True, **SYNC),
        lambda: gauss(3000, 3, seed=5), ("epsilon", "delta", "m", "alpha", "xi", "unsafe_no_privacy", "on_nonfinite")),
    "GaussianPCA": (lambda: GaussianPCA(1.0, 1e-5, sigma=1.0, **SYNC), gauss,
                    ("epsilon", "delta", "beta", "sigma", "clip", "threshold", "tile_size", "on_nonfinite",
                     "assume_centered", "mean_fraction", "mean_clip")),
    "ThresholdedPCA": (lambda: ThresholdedPCA(threshold=0.1, scheduler="synchronous"), gauss,
                       ("threshold", "sigma", "tile_size", "on_nonfinite", "assume_centered")),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_fit_checks_each_parameter_once(name):
    make, data, params = CASES[name]
    X = data()
    make().plan(*X.shape)  # the first plan in a process evaluates the measured n*'s fingerprints once
    counts = checks_per_parameter(lambda: make().fit(X))
    assert {p: counts[p] for p in params} == {p: 1 for p in params}


def plans_per_fit(fit) -> int:
    """How many plans (:class:`~dpdist.algorithms.plan.Plan` instances) ``fit()`` builds."""
    made = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "__init__" and isinstance(frame.f_locals.get("self"), Plan):
            made.append(type(frame.f_locals["self"]).__name__)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.setprofile(profile)
        try:
            fit()
        finally:
            sys.setprofile(None)
    return len(made)


@pytest.mark.parametrize("cls", [SpectralNorm, SparsePCA], ids=lambda c: c.__name__)
def test_a_fit_that_requires_a_useful_plan_plans_once_and_records_the_plan_it_checked(cls, monkeypatch):
    # these tiny data would be refused as useless: the refusal is replaced by a record of the
    # plan it was given, so that the fit goes on and the plan it checked can be compared
    checked = []
    monkeypatch.setattr(Estimator, "_check_useful", lambda self, plan, **kwargs: checked.append(plan))
    X = spike()
    est = cls(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02, require_useful=True, **SYNC)
    assert plans_per_fit(lambda: est.fit(X)) == 1
    assert len(checked) == 1 and est.release_.parameters["utility"] == checked[0].utility()


def test_a_functional_form_returns_the_fits_release_without_its_utility_record():
    X = spike()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = private_norm(X, 2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02, **SYNC)
        est = SpectralNorm(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02, **SYNC).fit(X)
    assert "utility" not in rel.parameters and "utility" in est.release_.parameters
    assert plans_per_fit(lambda: second_moment(gauss(scales=[1, 2, 3, 5, 8, 13]), 1.0, m=1, radius=20.0,
                                               lambda_min=0.5, **SYNC)) == 0  # nor does it plan
    assert rel.values["norm"] == est.norm_
    assert np.array_equal(rel.values["mean"], est.location_)


def test_the_simulation_keeps_its_checked_batch_setup():
    from dpdist.algorithms.friendly_steps import friendly_setup
    from dpdist.exceptions import ValidationError

    with pytest.raises(ValidationError, match="n_batches must be >= 20"):
        friendly_setup(1000, 10, 2, 0.5, 1.0, 10, None, 0.05, [(1.0, 1e-5)])
    with pytest.raises(ValidationError, match="sigma must be"):
        friendly_setup(1000, 10, 2, 0.5, "1", None, None, 0.05, [(1.0, 1e-5)])
    assert dpdist.SparsePCA  # the package is importable alongside
