"""The constraints framework: each kind refuses as the shared checks do, a table is checked once
in its order, every estimator's table covers its parameters, a fit validates once and plans
once, and a functional form's signature is its estimator's."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import dpdist
from dpdist._validation import check_bool, check_choice, check_int, check_real
from dpdist.algorithms._base import BASE_PARAMETER_CONSTRAINTS, Estimator
from dpdist.algorithms._constraints import (
    Boolean,
    Custom,
    Delta,
    Epsilon,
    Integer,
    Options,
    Params,
    RandomState,
    Real,
    Scheduler,
    functional_form,
    validate_params,
)
from dpdist.algorithms.fingerprint import ESTIMATORS
from dpdist.algorithms.plan import Plan
from dpdist.engine.runtime import check_scheduler
from dpdist.exceptions import ValidationError
from dpdist.privacy.budget import ApproxDP, check_delta, check_epsilon
from dpdist.privacy.noise.streams import check_random_state
from dpdist.privacy.release import Release


def _message(fn, *args, **kwargs) -> str:
    with pytest.raises(ValidationError) as info:
        fn(*args, **kwargs)
    return str(info.value)


@pytest.mark.parametrize("constraint, check, value", [
    (Real(low=0.0), lambda v, n: check_real(v, n, low=0.0), "1.5"),
    (Real(low=0.0, high=1.0, closed="left"), lambda v, n: check_real(v, n, low=0.0, high=1.0, closed="left"), 1.0),
    (Real(finite=False), lambda v, n: check_real(v, n, finite=False), math.nan),
    (Integer(), lambda v, n: check_int(v, n), 3.0),
    (Integer(low=2, high=5), lambda v, n: check_int(v, n, low=2, high=5), 6),
    (Options("a", "b"), lambda v, n: check_choice(v, n, ("a", "b")), "c"),
    (Boolean(), check_bool, 1),
    (Epsilon(), check_epsilon, 2e6),
    (Delta(), check_delta, 1.0),
    (Scheduler(), lambda v, n: check_scheduler(v), 3),
    (RandomState(), lambda v, n: check_random_state(v), -1),
])
def test_each_kind_refuses_with_the_shared_checks_message(constraint, check, value):
    assert _message(constraint.check, value, "p") == _message(check, value, "p")


@pytest.mark.parametrize("constraint, value, expected", [
    (Real(low=0.0), np.float32(0.5), 0.5),
    (Real(allow_none=True), None, None),
    (Integer(), np.int64(4), 4),
    (Boolean(), np.bool_(True), True),
    (Boolean(allow_none=True), None, None),
    (Epsilon(), 2, 2.0),
    (Options("zero", "raise"), "raise", "raise"),
    (Scheduler(), "synchronous", "synchronous"),
    (RandomState(), 7, 7),
])
def test_each_kind_returns_the_value_normalised(constraint, value, expected):
    out = constraint.check(value, "p")
    assert out == expected and type(out) is type(expected)


def test_custom_returns_its_functions_value_or_keeps_the_given_one():
    assert Custom(lambda v, n: v * 2).check(3, "p") == 6
    seen = []
    kept = Custom(lambda v, n: seen.append((v, n)), keep=True)
    assert kept.check([1], "p") == [1] and seen == [([1], "p")]
    with pytest.raises(ValidationError, match="p is odd"):
        Custom(lambda v, n: (_ for _ in ()).throw(ValidationError(f"{n} is odd"))).check(3, "p")


def test_a_table_is_checked_in_its_order_and_skips_absent_names():
    table = {"b": Integer(), "a": Real(low=0.0), "c": Boolean()}
    assert "b must be" in _message(validate_params, table, {"a": -1.0, "b": "x"})  # b comes first in the table
    out = validate_params(table, {"a": np.float64(2), "b": np.int32(3)})
    assert out.as_dict() == {"b": 3, "a": 2.0} and "c" not in out


def test_params_are_read_only_and_replace_copies():
    p = Params({"k": 2})
    with pytest.raises(AttributeError, match="read-only"):
        p.k = 3
    with pytest.raises(AttributeError, match="no validated parameter 'x'"):
        p.x
    q = p.replace(k=3, d=4)
    assert (p.k, q.k, q.d) == (2, 3, 4) and p != q and p == Params({"k": 2})


def _estimators() -> list[type]:
    assert dpdist.SparseCovariance  # the package is imported: every estimator class is registered
    return sorted(ESTIMATORS.values(), key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", _estimators(), ids=lambda c: c.__name__)
def test_every_estimator_table_lists_exactly_its_parameters(cls):
    assert cls._parameter_constraints is not None  # every estimator validates through its table
    names = set(cls._param_names())
    assert set(cls._constraints(fit=True)) == names  # no parameter unchecked, no stale entry
    own = set(cls._parameter_constraints)
    assert own <= names and not own & (set(BASE_PARAMETER_CONSTRAINTS) & names - own)


# -- a toy estimator with a table: the fit's sequence -----------------------------------------

class _Counting(Real):
    calls = 0

    def check(self, value, name):
        type(self).calls += 1
        return super().check(value, name)


class _ToyPlan(Plan):
    pass


class Toy(Estimator):
    """A toy estimator.

    Parameters
    ----------
    k : int
        Sparsity.
    scale : float, default 1.0
        A positive scale.
    random_state : None or int
        Seed.

    Attributes
    ----------
    value_ : float
    """

    _parameter_constraints = {"k": Integer(), "scale": _Counting(low=0.0)}
    plans = 0

    def __init__(self, k, *, scale=1.0, random_state=None):
        self.k = k
        self.scale = scale
        self.random_state = random_state

    def _validate_together(self, params, n_samples, n_features):
        n = check_int(n_samples, "n_samples", low=2)
        d = check_int(n_features, "n_features", low=2)
        if params.k > d:
            raise ValidationError(f"k must satisfy k <= d = {d}, got k={params.k}")
        return params.replace(n=n, d=d)

    def _plan_validated(self, params):
        type(self).plans += 1
        return _ToyPlan(n_samples=params.n, n_features=params.d, privacy=ApproxDP(1.0, 1e-6), noise_scale=1.0,
                        error_bound=0.1, error_metric="toy", error_scale=params.scale, error_scale_rule="scale")

    def plan(self, n_samples, n_features):
        return self._plan_validated(self._validated_at(n_samples, n_features))

    def _release_validated(self, X, params, plan):
        assert plan is None or plan.n_samples == X.shape[0]  # the fit passes its one plan down
        return Release(mechanism="toy", privacy=ApproxDP(1.0, 1e-6),
                       parameters={"n_samples": params.n, "n_features": params.d, "k": params.k},
                       noise_scales={}, values={"value": float(params.scale)}, seeding={"seeded": False})

    def _fitted_attributes(self, rel):
        return {"value_": rel.values["value"], "release_": rel}


def test_a_fit_validates_each_parameter_once_and_plans_once():
    _Counting.calls = Toy.plans = 0
    est = Toy(2, scale=np.float32(2.0)).fit(np.ones((4, 3)))
    assert (_Counting.calls, Toy.plans) == (1, 1)
    assert est.value_ == 2.0 and est.release_.parameters["utility"]["vacuous"] is False  # the fit's plan, recorded


def test_a_fit_checks_the_runtime_entries_before_the_estimators_own():
    message = _message(Toy(0, random_state="seed").fit, np.ones((4, 3)))
    assert message.startswith("random_state")
    assert "k must be" in _message(Toy(0).fit, np.ones((4, 3)))
    assert "k must satisfy k <= d = 3" in _message(Toy(4).fit, np.ones((4, 3)))
    assert not hasattr(Toy(4), "value_")


def test_plan_checks_the_model_parameters_only():
    assert Toy(2, random_state="not a seed").plan(10, 3).n_samples == 10  # runtime entries are the fit's
    assert "scale must be" in _message(Toy(2, scale=-1.0).plan, 10, 3)


def test_the_fit_table_is_the_base_entries_the_estimator_has_then_its_own():
    assert list(Toy._constraints(fit=True)) == ["random_state", "k", "scale"]
    assert list(Toy._constraints(fit=False)) == ["k", "scale"]
    assert set(Toy._constraints()) == set(Toy._param_names())


toy_function = functional_form(Toy, name="toy_function", positional=("k",), summary="Toy's release.",
                               returns="Release\n    The toy release.")


def test_a_functional_form_has_its_estimators_signature():
    sig = inspect.signature(toy_function)
    assert list(sig.parameters) == ["X", "k", "scale", "random_state"]
    assert sig.parameters["k"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert sig.parameters["scale"].kind is inspect.Parameter.KEYWORD_ONLY
    assert sig.parameters["scale"].default == 1.0
    assert toy_function.__name__ == "toy_function"


def test_a_functional_form_returns_the_release_without_the_fits_utility_record():
    Toy.plans = 0
    rel = toy_function(np.ones((4, 3)), 2, scale=3.0)
    assert Toy.plans == 0  # no plan: the function's release records no verdict
    assert isinstance(rel, Release) and rel.values == {"value": 3.0} and "utility" not in rel.parameters
    with pytest.raises(TypeError):
        toy_function(np.ones((4, 3)), 2, 3.0)  # scale is keyword-only, as on the estimator


def test_a_functional_forms_docstring_is_built_from_the_estimators():
    doc = toy_function.__doc__
    assert doc.startswith("Toy's release.")
    assert "X : array-like" in doc and "k : int" in doc and "scale : float, default 1.0" in doc
    assert "Attributes" not in doc and doc.rstrip().endswith("The toy release.")


class ToyChild(Toy):
    """A toy estimator that takes its parent's parameters (its docstring lists none)."""


def test_a_functional_form_takes_its_parameters_docs_from_the_first_class_listing_them():
    form = functional_form(ToyChild, name="toy_child", positional=("k",), summary="Child.", returns="Release")
    assert "scale : float, default 1.0" in form.__doc__ and form.__module__ == ToyChild.__module__
    assert "the estimator and its fitted attributes are discarded" in form.__doc__
