"""One contract, checked over every public estimator and baseline (docs/estimators.md).

As scikit-learn's ``check_estimator`` and zarr's ``StoreTests``: each check below runs over
every entry of :data:`ESTIMATORS`, so an estimator added to dpdist is added here and passes
the same checks:

- ``get_params`` / ``set_params`` and a ``repr`` showing every parameter; an estimator rebuilt
  from ``get_params()`` is unfitted and equal in parameters;
- ``fit`` returns self; the fitted attributes appear only after a success; a failed fit (a
  validation error, a ``NoPrivateResult``, a failed refit) leaves the object exactly as it was;
- ``plan()`` returns a frozen :class:`dpdist.Plan` with ``to_dict()`` (JSON), whose
  ``privacy`` is the estimator's ``privacy_cost()``;
- parameters follow one validation rule (:mod:`dpdist._validation`), at ``plan`` and at
  ``fit`` before any data is read, and everywhere in the privacy layer;
- vacuous releases are flagged (``UtilityWarning``, ``parameters["utility"]``);
- ``fit(X, reservation=r)`` inside ``with ledger.charge(...) as r`` charges a real SQLite ledger
  (reserve before reading, commit, refusal, ``NoPrivateResult``, infrastructure failures, a
  refusal during the pass, a reservation of another cost refused before reading).
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import dask.array as da
import numpy as np
import pytest

import dpdist
from dpdist import BudgetExceeded, InfrastructureError, NoPrivateResult, Plan, UtilityWarning, ValidationError
from dpdist.baselines import (
    AnalyzeGauss,
    GaussianCovariance,
    GaussianPCA,
    SubsampleAggregateSecondMoment,
    ThresholdedCovariance,
    ThresholdedPCA,
)
from dpdist.ops.ledger import SQLiteLedger
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.zcdp import ZCDP
from dpdist.testing.estimator_audits import spike_rows

SYNC = {"scheduler": "synchronous"}


def gauss(n: int = 300, d: int = 6) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((n, d))


def spike(n: int = 3000) -> np.ndarray:
    """Spike rows, every odd row the negation of the one before: their mean is exactly zero and
    so is every batch's, so the default centring leaves FriendlyCore's batches good."""
    X = spike_rows(n, noise=0.01)
    X[1::2] = -X[0::2]
    return X


#: name -> (estimator with valid parameters, data it fits, a size for plan())
ESTIMATORS = {
    "SparseCovariance": (lambda: dpdist.SparseCovariance(2, 1.0, 1e-5, sigma=1.0, random_state=1,
                                                         **SYNC), gauss, (300, 6)),
    "SparseCovariancePCA": (lambda: dpdist.SparseCovariancePCA(2, 1.0, 1e-5, sigma=1.0, random_state=1,
                                                               **SYNC), gauss, (300, 6)),
    "SpectralNorm": (lambda: dpdist.SpectralNorm(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02,
                                                 random_state=1, **SYNC), spike, (3000, 6)),
    "SparsePCA": (lambda: dpdist.SparsePCA(2, 50.0, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=100, tau=0.02,
                                           random_state=1, **SYNC), spike, (3000, 6)),
    "ExpMechSparsePCA": (lambda: dpdist.ExpMechSparsePCA(2, 1.0, 1e-5, sigma=1.0, random_state=1, **SYNC), gauss,
                         (300, 6)),
    "SecondMoment": (lambda: dpdist.SecondMoment(1.0, m=1, radius=20.0, lambda_min=0.5, random_state=1, **SYNC),
                     gauss, (300, 6)),
    "GaussianCovariance": (lambda: GaussianCovariance(1.0, 1e-5, sigma=1.0, random_state=1, **SYNC), gauss, (300, 6)),
    "ThresholdedCovariance": (lambda: ThresholdedCovariance(threshold=0.1, **SYNC), gauss, (300, 6)),
    "AnalyzeGauss": (lambda: AnalyzeGauss(1.0, 1e-5, row_norm=3.0, random_state=1, **SYNC), gauss, (300, 6)),
    "GaussianPCA": (lambda: GaussianPCA(1.0, 1e-5, sigma=1.0, random_state=1, **SYNC), gauss, (300, 6)),
    "ThresholdedPCA": (lambda: ThresholdedPCA(threshold=0.1, **SYNC), gauss, (300, 6)),
    # 60 groups of 50 rows in d = 4 agree (the noisy agreement clears its threshold 0.93 at this seed)
    "SubsampleAggregateSecondMoment": (lambda: SubsampleAggregateSecondMoment(2.0, 1e-3, m=50, unsafe_no_privacy=True,
                                                                              random_state=0, **SYNC),
                                       lambda: gauss(3000, 4), (3000, 4)),
}
NAMES = list(ESTIMATORS)
#: What the package exports as its estimators and baselines: the table above must cover them.
PUBLIC = {n for n in dpdist.__all__ if isinstance(getattr(dpdist, n), type) and hasattr(getattr(dpdist, n), "fit")}
PUBLIC |= {getattr(dpdist.baselines, n).__name__ for n in dpdist.baselines.__all__}
#: Parameters that only matter when data are read (validated by fit, not by plan).
RUNTIME = {"scheduler", "random_state", "on_nonfinite", "tile_size", "subsets_per_task"}


def fitted(est) -> dict:
    """The fitted attributes: public names ending in ``_``."""
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}


def snapshot(est) -> dict:
    return dict(vars(est))


def assert_unchanged(est, before: dict) -> None:
    after = vars(est)
    assert after.keys() == before.keys(), set(after) ^ set(before)
    for k, v in before.items():
        assert after[k] is v, k


def fit_quietly(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded (PrivacyWarning) and tiny (UtilityWarning) test fits
        return est.fit(X)


@pytest.fixture(scope="module")
def fits():
    """Each estimator fitted once (shared by the checks that need a fitted one)."""
    out = {}
    for name, (make, data, _) in ESTIMATORS.items():
        est = make()
        out[name] = (est, fit_quietly(est, data()))
    return out


def test_the_table_covers_every_public_estimator_and_baseline():
    assert PUBLIC == set(NAMES), PUBLIC ^ set(NAMES)
    for name, (make, _, _) in ESTIMATORS.items():
        assert isinstance(make(), dpdist.algorithms._base.Estimator), name


# ------------------------------------------------------------------------ parameters, repr
@pytest.mark.parametrize("name", NAMES)
def test_get_params_set_params_and_repr(name):
    est = ESTIMATORS[name][0]()
    params = est.get_params()
    import inspect

    assert list(params) == [p for p in inspect.signature(type(est).__init__).parameters if p != "self"]
    # where the fit runs is the scheduler's; its time limit, progress and ledger are not parameters
    assert not {"ledger", "dataset", "timeout", "progress"} & set(params)
    text = repr(est)
    assert text.startswith(f"{type(est).__name__}(") and all(f"{k}=" in text for k in params)
    assert est.set_params(scheduler="threads") is est and est.get_params()["scheduler"] == "threads"
    with pytest.raises(ValidationError, match="bogus"):
        est.set_params(scheduler="synchronous", bogus=1)
    assert "bogus" not in vars(est) and est.scheduler == "threads"  # nothing set when one key is unknown


@pytest.mark.parametrize("name", NAMES)
def test_rebuilt_from_get_params_is_unfitted_and_equal(name, fits):
    est, out = fits[name]
    assert out is est  # fit returns self
    clone = type(est)(**est.get_params())
    assert clone.get_params() == est.get_params() and repr(clone) == repr(est)
    assert fitted(clone) == {} and fitted(est)


# ------------------------------------------------------------------------ fit is atomic
@pytest.mark.parametrize("name", NAMES)
def test_fitted_attributes_appear_only_after_success(name, fits):
    est, _ = fits[name]
    fresh = ESTIMATORS[name][0]()
    assert fitted(fresh) == {}
    attrs = fitted(est)
    assert "release_" in attrs and all(k in attrs for k in ("release_",))
    assert "utility" in est.release_.parameters  # every release records its verdict
    if est.privacy_cost() is not None and est.release_.private:
        assert est.privacy_ == est.privacy_cost()


@pytest.mark.parametrize("name", NAMES)
def test_a_failed_fit_or_refit_leaves_the_estimator_as_it_was(name, fits):
    make, data, _ = ESTIMATORS[name]
    # a first fit that fails validation: still unfitted, nothing added
    est = make()
    first = next(k for k in ("epsilon", "rho", "threshold") if k in est.get_params())
    est.set_params(**{first: "1.5"})
    before = snapshot(est)
    with pytest.raises(ValidationError, match=first):
        est.fit(data())
    assert_unchanged(est, before)
    # a failed refit: the previous fit's attributes stay, the very same objects
    est, _ = fits[name]
    good = est.get_params()[first]
    est.set_params(**{first: "1.5"})
    before = snapshot(est)
    try:
        with pytest.raises(ValidationError):
            est.fit(data())
        assert_unchanged(est, before)
    finally:
        est.set_params(**{first: good})


def test_a_no_private_result_leaves_the_estimator_as_it_was():
    """SpectralNorm at epsilon = 0.2 with 40 batches: the friend-weight test cannot pass even
    when every batch is good (the plan says so), so every fit returns bottom."""
    est = dpdist.SpectralNorm(2, 0.2, 1e-3, gap=0.5, sigma=math.sqrt(5), n_batches=40, tau=0.02, random_state=1,
                              **SYNC)
    assert not est.plan(3000, 6).tests["tests_can_pass"] and est.plan(3000, 6).vacuous
    before = snapshot(est)
    with pytest.raises(NoPrivateResult) as info:
        est.fit(spike())
    assert_unchanged(est, before)
    assert info.value.release.status == "rejected"


# ------------------------------------------------------------------------ plan
@pytest.mark.parametrize("name", NAMES)
def test_plan_is_a_frozen_dataclass_with_to_dict(name):
    est = ESTIMATORS[name][0]()
    n, d = ESTIMATORS[name][2]
    plan = est.plan(n, d)
    assert isinstance(plan, Plan) and dataclasses.is_dataclass(plan)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.noise_scale = 0.0
    doc = plan.to_dict()
    assert set(doc) == {f.name for f in dataclasses.fields(plan)} and json.loads(json.dumps(doc)) == doc
    assert (doc["n_samples"], doc["n_features"]) == (n, d)
    assert doc["noise_scale"] == plan.noise_scale and "error_bound" in doc
    # fields are read as attributes: no dict protocol beside them
    assert not any(hasattr(plan, m) for m in ("get", "__contains__", "__getitem__", "keys"))
    assert plan.privacy == est.privacy_cost()
    assert plan.vacuous is (plan.vacuous_reason is not None)


def test_vacuity_is_the_predicted_error_against_the_scale():
    """The rule, on PrivCov (Theorem 1's bound against sigma^2): 10 rows are vacuous (the issue's
    example: a diagonal of +-1e4), 1e9 rows are not."""
    est = dpdist.SparseCovariance(3, 1.0, 1e-6, sigma=1.0)
    small, large = est.plan(10, 16), est.plan(10**9, 16)
    assert small.error_scale == large.error_scale == 1.0
    assert small.error_bound > 1e3 and small.vacuous and "sigma**2" in small.vacuous_reason
    assert large.error_bound < 1.0 and not large.vacuous and large.vacuous_reason is None
    # conditions of the prediction count too: SecondMoment below event E's sample size
    sm = dpdist.SecondMoment(1.0, m=20, radius=100.0, lambda_min=1.0).plan(1000, 4)
    assert not sm.event_e_holds and sm.vacuous and "event E" in sm.vacuous_reason


#: Overrides that make a table entry vacuous at its size (the others are already): a threshold
#: alone gives no model, hence no verdict; Analyze Gauss at epsilon = 1 is not vacuous at n = 300.
VACUOUS = {"ThresholdedCovariance": {"threshold": None, "sigma": 3.0}, "ThresholdedPCA": {"threshold": None, "sigma": 3.0},
           "AnalyzeGauss": {"epsilon": 0.3}, "SpectralNorm": {"tau": 0.3}}


@pytest.mark.parametrize("name", NAMES)
def test_vacuous_releases_warn_and_are_recorded(name):
    """Tiny fits: each is vacuous at its size (its plan says so before any data is read), and
    its fit warns and records the same verdict."""
    make, data, _ = ESTIMATORS[name]
    est = make().set_params(**VACUOUS.get(name, {}))
    plan = est.plan(*data().shape)
    assert plan.vacuous, name
    with pytest.warns(UtilityWarning, match="VACUOUS"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpdist.PrivacyWarning)
            est.fit(data())
    utility = est.release_.parameters["utility"]
    assert utility["vacuous"] is True and utility["vacuous_reason"] == plan.vacuous_reason
    assert any(note.startswith("VACUOUS release") for note in est.release_.notes)


def test_a_useful_release_does_not_warn():
    """Non-private thresholding at n = 4000, d = 4, sigma = 1: the largest entry error
    t + lambda_samp = 2 * 4 (sqrt(log(240)/4000) + log(240)/4000) = 0.307 < sigma^2."""
    est = ThresholdedCovariance(sigma=1.0, **SYNC)
    X = np.random.default_rng(2).standard_normal((4000, 4))
    assert est.plan(4000, 4).error_bound == pytest.approx(8 * (math.sqrt(math.log(240) / 4000) + math.log(240) / 4000))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X)
    assert not [w for w in caught if issubclass(w.category, UtilityWarning)]
    assert est.release_.parameters["utility"]["vacuous"] is False
    # without sigma there is no model: the verdict is "not assessed", not "useful"
    est = ThresholdedCovariance(threshold=0.1, **SYNC).fit(X)
    assert est.release_.parameters["utility"]["vacuous"] is None


# ------------------------------------------------------------------------ one validation rule
def _numeric_params(est) -> list[str]:
    return [k for k, v in est.get_params().items() if isinstance(v, (int, float)) and not isinstance(v, bool)]


BAD = [("1.5", "str"), (True, "bool"), (float("nan"), "nan"), (float("inf"), "inf")]


@pytest.mark.parametrize("name", NAMES)
def test_numbers_are_numbers_at_fit_before_any_data_is_read(name):
    """Every numeric parameter refuses a string, a bool, NaN and (but timeout) inf, naming itself,
    before the data is read: the path below does not exist, reading it would fail otherwise."""
    make = ESTIMATORS[name][0]
    for param in _numeric_params(make()):
        for value, _ in BAD:
            est = make().set_params(**{param: value})
            with pytest.raises(ValidationError, match=param) as info:
                est.fit("/nonexistent/data.zarr")
            assert "Zarr" not in str(info.value), (param, value)


@pytest.mark.parametrize("name", NAMES)
def test_plan_validates_with_the_same_rule_and_accepts_numpy_scalars(name):
    make, _, (n, d) = ESTIMATORS[name]
    for param in _numeric_params(make()):
        if param in RUNTIME:
            continue
        for value, _ in BAD[:3]:
            with pytest.raises(ValidationError, match=param):
                make().set_params(**{param: value}).plan(n, d)
        good = make().get_params()[param]
        as_numpy = np.int64(good) if isinstance(good, int) else np.float64(good)
        assert make().set_params(**{param: as_numpy}).plan(n, d).to_dict() == make().plan(n, d).to_dict()
    with pytest.raises(ValidationError, match="n_samples"):
        make().plan("300", d)


@pytest.mark.parametrize("call,name", [
    (lambda: dpdist.privacy.budget.check_epsilon("1.5"), "epsilon"),
    (lambda: dpdist.privacy.budget.check_delta(True), "delta"),
    (lambda: dpdist.privacy.zcdp.check_rho(True), "rho"),
    (lambda: dpdist.privacy.zcdp.check_rho("0.5"), "rho"),
    (lambda: ApproxDP("1", 1e-6), "epsilon"),
    (lambda: ApproxDP(1.0, "0"), "delta"),
    (lambda: ZCDP(float("nan")), "rho"),
    (lambda: dpdist.privacy.mechanisms.privcov.calibration.privcov_calibration(1.0, 1e-6, 100, 10, 2, "2.0"), "clip"),
    (lambda: dpdist.privacy.mechanisms.privcov.calibration.privcov_calibration(1.0, 1e-6, 100.0, 10, 2, 2.0), "n_samples"),
    (lambda: dpdist.privacy.mechanisms.privcov.calibration.subgaussian_clip("1", 10, 10, 0.1), "sigma"),
    (lambda: dpdist.privacy.mechanisms.gaussian.wang_xu_calibration(1.0, 1e-6, 100, 10, True), "clip"),
    (lambda: dpdist.privacy.mechanisms.expmech.expmech_calibration(1.0, 1e-6, 100, 10, 2.0, 1.0), "k"),
    (lambda: dpdist.privacy.mechanisms.gaussian.analyze_gauss_calibration(1.0, 1e-6, 100, "3"), "row_norm"),
    (lambda: dpdist.privacy.mechanisms.privpca.calibration.check_gap("0.5"), "gap"),
    (lambda: dpdist.privacy.mechanisms.privpca.calibration.split_norm_and_pca_budget(1.0, 1e-6, "0.5"), "norm_fraction"),
    (lambda: dpdist.privacy.mechanisms.privpca.calibration.check_n_batches(30.0), "n_batches"),
    (lambda: dpdist.privacy.mechanisms.second_moment.check_alpha(True), "alpha"),
    (lambda: dpdist.privacy.mechanisms.second_moment.check_m(2.0), "m"),
    (lambda: dpdist.privacy.mechanisms.second_moment.split_second_moment_rho(1.0, "0.1", private_radius=True,
                                                                   private_lambda=True), "init_fraction"),
])
def test_the_privacy_layer_follows_the_same_rule(call, name):
    with pytest.raises(ValidationError, match=f"{name} must be"):
        call()


def test_the_rule_accepts_numpy_scalars_and_names_rule_and_value():
    from dpdist._validation import check_int, check_real

    assert dpdist.privacy.budget.check_epsilon(np.float32(0.5)) == 0.5
    assert dpdist.privacy.zcdp.check_rho(np.int64(2)) == 2.0
    assert check_int(np.int32(3), "k") == 3
    with pytest.raises(ValidationError) as info:
        check_real("1.5", "epsilon", low=0.0)
    assert str(info.value) == ("epsilon must be a finite real number > 0 (int, float or numpy scalar; strings and "
                               "bools are not numbers), got '1.5' (str)")
    with pytest.raises(ValidationError, match=r"delta must be a finite real number in \(0, 1\), got 1.0"):
        dpdist.privacy.budget.check_delta(1.0)


# ------------------------------------------------------------------------ one name per concept
def test_row_norm_is_analyze_gauss_one_name_of_its_row_bound():
    """AnalyzeGauss takes the L2 bound the rows are scaled to as ``row_norm`` (its fixed public
    signature), required, with no second spelling; the release records it as ``radius``."""
    X = gauss()
    a = fit_quietly(AnalyzeGauss(1.0, 1e-5, row_norm=3.0, random_state=4, **SYNC), X)
    assert a.release_.parameters["radius"] == 3.0 and "row_norm" not in a.release_.parameters
    assert a.get_params()["row_norm"] == 3.0 and "radius" not in a.get_params()
    with pytest.raises(TypeError, match="radius"):
        AnalyzeGauss(1.0, 1e-5, radius=3.0)
    with pytest.raises(TypeError, match="row_norm"):
        AnalyzeGauss(1.0, 1e-5)
    with pytest.raises(ValidationError, match="give row_norm"):
        AnalyzeGauss(1.0, 1e-5, row_norm=None).plan(100, 4)
    assert "radius" in dpdist.SecondMoment(1.0, m=1).get_params()


def test_one_set_of_baselines_under_both_paths_each_under_its_own_name():
    from dpdist.algorithms import baselines as impl

    assert dpdist.baselines.__all__ == impl.__all__
    assert all(getattr(dpdist.baselines, n) is getattr(impl, n) for n in impl.__all__)
    assert all(getattr(impl, n).__name__ == n for n in impl.__all__)  # no second name for a class
    assert {"GaussianCovariance", "GaussianPCA"} <= set(impl.__all__)
    assert not any(hasattr(m, n) for m in (dpdist.baselines, impl) for n in ("WangXuCovariance", "WangXuPCA"))


def test_non_private_diagnostics_live_in_testing_and_rho_is_only_a_budget():
    import inspect

    import dpdist.algorithms.second_moment as sm
    from dpdist.engine.privpca.graph import friendly_pass2
    from dpdist.engine.privpca.kernels import tile_threshold

    assert not hasattr(sm, "second_moment_diagnostics") and "second_moment_diagnostics" not in sm.__all__
    assert callable(dpdist.testing.second_moment_diagnostics)
    for fn in (friendly_pass2, tile_threshold):
        params = inspect.signature(fn).parameters
        assert "threshold" in params and "rho" not in params


# ------------------------------------------------------------------------ ledger=
@pytest.fixture
def ledger(tmp_path):
    led = SQLiteLedger(tmp_path / "ledger.sqlite")
    try:
        yield led
    finally:
        led.close()


class Reads:
    """A dask array whose every chunk read is counted (to show nothing was read)."""

    def __init__(self, X: np.ndarray):
        self.count = 0
        base = da.from_array(X, chunks=(100, -1))

        def read(block):
            self.count += 1
            return block

        self.array = base.map_blocks(read, dtype=X.dtype, meta=np.empty((0, 0), dtype=X.dtype))


def _entries(led, dataset):
    return [e for e in led.history(dataset) if e.state != "budget-set"]


def charged_fit(ledger, dataset, est, X, cost=None):
    """``est.fit(X, reservation=r)`` inside ``with ledger.charge(dataset, cost) as r`` (the one
    way to charge a ledger; ``cost`` defaults to ``est.privacy_cost()``)."""
    with ledger.charge(dataset, est.privacy_cost() if cost is None else cost, job="test") as r:
        return fit_quietly_reserved(est, X, r)


def fit_quietly_reserved(est, X, reservation):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, reservation=reservation)


def test_a_fit_with_a_reservation_marks_it_running_and_is_committed_once(ledger):
    ledger.set_budget("claims", ApproxDP(3.0, 1e-4))
    data = Reads(gauss())
    est = dpdist.SparseCovariance(2, 1.0, 1e-5, sigma=1.0, random_state=1, **SYNC)
    assert charged_fit(ledger, "claims", est, data.array) is est
    (entry,) = _entries(ledger, "claims")
    assert entry.state == "committed" and entry.outcome == "released" and entry.stage == "running"
    assert entry.privacy == ApproxDP(1.0, 1e-5) == est.privacy_ and data.count > 0
    assert entry.charge.events == est.release_.events and len(entry.events) == len(est.release_.events) > 0
    assert [e["step"] for e in entry.events] == [label for label, _ in est.release_.events]
    # by its stated cost 2.0 is left; its events, accounted at the whole delta 1e-4, need less than 1.0
    assert 2.0 < float(ledger.remaining("claims").remaining()["epsilon"]) < 3.0


def test_a_refused_reservation_reads_nothing_and_leaves_the_estimator_unfitted(ledger):
    ledger.set_budget("claims", ApproxDP(0.5, 1e-4))
    data = Reads(gauss())
    est = GaussianCovariance(1.0, 1e-5, sigma=1.0, **SYNC)
    before = snapshot(est)
    with pytest.raises(BudgetExceeded):
        charged_fit(ledger, "claims", est, data.array)
    assert data.count == 0 and fitted(est) == {}
    assert_unchanged(est, before)
    assert [e.state for e in _entries(ledger, "claims")] == ["refused"]


@pytest.mark.parametrize("reserved", [ApproxDP(0.5, 1e-5), ApproxDP(2.0, 1e-5), ApproxDP(1.0, 1e-6), ZCDP(0.5)],
                         ids=["less-epsilon", "more-epsilon", "less-delta", "other-kind"])
def test_a_reservation_of_another_cost_is_refused_before_reading_and_spends_nothing(ledger, reserved):
    """A caller cannot reserve less (or other) than the fit spends: refused before any data is
    read; the block refunds the reservation, so the budget is as it was."""
    ledger.set_budget("claims", ApproxDP(3.0, 1e-4) if isinstance(reserved, ApproxDP) else ZCDP(2.0))
    remaining = ledger.remaining("claims").remaining()
    data = Reads(gauss())
    est = dpdist.SparseCovariance(2, 1.0, 1e-5, sigma=1.0, random_state=1, **SYNC)
    before = snapshot(est)
    with pytest.raises(ValidationError, match=r"reserve exactly est\.privacy_cost\(\); nothing was read") as info:
        charged_fit(ledger, "claims", est, data.array, cost=reserved)
    assert "fit spends (1, 1e-05)-DP" in str(info.value)
    assert data.count == 0 and fitted(est) == {}
    assert_unchanged(est, before)
    (entry,) = _entries(ledger, "claims")
    assert entry.state == "refunded" and entry.stage == "reserved"  # never marked running
    assert ledger.remaining("claims").remaining() == remaining


def test_no_private_result_commits_what_the_release_says_was_spent(ledger):
    """SparsePCA whose PrivNorm stage cannot pass: bottom after PrivNorm, which spent half of
    (epsilon, delta) (norm_fraction 0.5); PrivPCA never ran. The ledger commits that half."""
    ledger.set_budget("spike", ApproxDP(1.0, 1e-2))
    est = dpdist.SparsePCA(2, 0.4, 2e-3, gap=0.5, sigma=math.sqrt(5), n_batches=40, tau=0.02, random_state=1,
                           assume_centered=True, **SYNC)
    with pytest.raises(NoPrivateResult) as info:
        charged_fit(ledger, "spike", est, spike())
    (entry,) = _entries(ledger, "spike")
    assert entry.state == "committed" and entry.outcome == "no-private-result"
    assert info.value.release.privacy == entry.privacy == ApproxDP(0.2, 1e-3)
    assert fitted(est) == {}


@pytest.mark.parametrize("noise_drawn,state", [(False, "refunded"), (True, "committed")])
def test_infrastructure_failures_release_only_when_no_noise_was_drawn(ledger, monkeypatch, noise_drawn, state):
    ledger.set_budget("claims", ZCDP(1.0))
    est = dpdist.SecondMoment(0.5, m=1, radius=20.0, lambda_min=0.5, **SYNC)

    def lost(X, **kwargs):
        raise InfrastructureError("workers lost", noise_drawn=noise_drawn)

    monkeypatch.setattr(est, "_fit_release", lost)
    with pytest.raises(InfrastructureError):
        charged_fit(ledger, "claims", est, gauss())
    (entry,) = _entries(ledger, "claims")
    assert entry.state == state and entry.cost == {"type": "zcdp", "rho": "0.5"}


def test_a_refusal_during_the_pass_counts_as_spent(ledger):
    """on_nonfinite="raise" refuses data holding NaN only after reading them: one bit about the
    data was revealed, so the reservation is committed as spent (as the job runner does)."""
    ledger.set_budget("claims", ApproxDP(3.0, 1e-4))
    X = gauss()
    X[5, 2] = np.nan
    est = dpdist.SparseCovariance(2, 1.0, 1e-5, sigma=1.0, on_nonfinite="raise", **SYNC)
    with pytest.raises(ValidationError, match="NaN"):
        charged_fit(ledger, "claims", est, X)
    (entry,) = _entries(ledger, "claims")
    assert entry.state == "committed" and entry.outcome == "refused-during-pass"


def test_a_path_input_is_charged_under_its_canonical_location(ledger, tmp_path, monkeypatch):
    import zarr

    store = tmp_path / "data.zarr"
    zarr.create_array(str(store), shape=(300, 6), chunks=(100, 6), dtype="f8")[...] = gauss()
    monkeypatch.chdir(tmp_path)
    ledger.set_budget(str(store), ZCDP(2.0))
    est = dpdist.SecondMoment(0.5, m=1, radius=20.0, lambda_min=0.5, random_state=1, **SYNC)
    charged_fit(ledger, "data.zarr", est, "data.zarr")  # relative: the ledger sees the canonical location
    assert [e.state for e in _entries(ledger, str(store))] == ["committed"]


class _Reservation:
    """A stand-in reservation that records what fit asked of it."""

    def __init__(self, cost):
        self.cost, self.calls = cost, []

    def running(self):
        self.calls.append("running")

    def commit(self, **kw):
        self.calls.append("commit")


def test_what_cannot_be_charged_is_refused_before_the_reservation_is_marked_running():
    # a NOT PRIVATE estimator has no cost to charge; an object that is not a reservation is refused
    r = _Reservation(ApproxDP(1.0, 1e-5))
    with pytest.raises(ValidationError, match="NOT PRIVATE"):
        ThresholdedCovariance(threshold=0.1, **SYNC).fit(gauss(), reservation=r)
    with pytest.raises(ValidationError, match="reservation must be what ledger.charge"):
        dpdist.SecondMoment(0.5, m=1, radius=20.0, lambda_min=0.5, **SYNC).fit(gauss(), reservation=object())
    # a bad parameter is refused before the reservation is touched
    with pytest.raises(ValidationError, match="k must"):
        dpdist.SparseCovariance(0, 1.0, 1e-5, sigma=1.0, **SYNC).fit(gauss(), reservation=r)
    assert r.calls == []
