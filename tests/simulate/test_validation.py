"""The validation of the simulation (dpdist experiment validate-simulation): the translation of a
real-vs-simulated difference into a shift of n*, on error laws whose shift is known, and the
short form of the run (the sweeps' smoke instances at their n*)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.conftest import LONG


def _errors(n, reps, rng, *, slope=-0.5, spread=0.1):
    """Errors whose median is exactly n**slope: lognormal around it."""
    return n**slope * np.exp(spread * rng.standard_normal(reps))


def _samples(real_n, *, reps_real, slope=-0.5, spread=0.1, n=1e6, reps_sim=600, seed=1):
    rng = np.random.default_rng(seed)
    sim = [_errors(m, reps_sim, rng, slope=slope, spread=spread) for m in (n, n / 1.25, n * 1.25)]
    return _errors(real_n, reps_real, rng, slope=slope, spread=spread), *sim


def test_a_real_pipeline_that_behaves_like_the_simulation_at_fewer_rows_needs_more_rows():
    from dpdist.experiments.validation import implied_shift

    # the real pipeline at n errs as the simulation does at n / 1.3: it needs 30% more rows
    real, sim, lo, hi = _samples(1e6 / 1.3, reps_real=300)
    out = implied_shift(real, sim, lo, hi)
    assert out["slope_dlog_error_dlog_n"] == pytest.approx(-0.5, abs=0.03)
    assert out["shift"] == pytest.approx(0.3, abs=0.05)
    assert out["shift_ci95"][0] <= 0.3 <= out["shift_ci95"][1]
    assert out["shift_ci95"][0] > 0.1
    assert out["verdict"] == "shift"
    # and one that errs as the simulation at 1.3 n needs fewer
    real, sim, lo, hi = _samples(1e6 * 1.3, reps_real=300)
    out = implied_shift(real, sim, lo, hi)
    assert out["shift"] == pytest.approx(1 / 1.3 - 1, abs=0.05)
    assert out["verdict"] == "shift"


def test_the_same_law_passes_with_enough_real_runs_and_is_inconclusive_with_too_few():
    from dpdist.experiments.validation import implied_shift

    real, sim, lo, hi = _samples(1e6, reps_real=300)
    out = implied_shift(real, sim, lo, hi, target=1e-3)
    assert out["verdict"] == "pass"
    assert -0.1 <= out["shift_ci95"][0] <= 0 <= out["shift_ci95"][1] <= 0.1
    assert out["reps_real_needed"] == 300
    # the median of the errors is exactly the target here: about half the runs succeed
    assert 0.35 < out["success_real"] < 0.65 and 0.45 < out["success_sim"] < 0.55
    # a wide law, 10 real runs placed at its deciles (their median is the simulated one): the
    # median's error of ~ 1.25 * 0.5 / sqrt(10) in log error is ~ 0.4 in log n at slope -0.5,
    # far wider than +-10%; an interval 0.2 wide on each side needs 4 x 10 runs at least
    from scipy import stats

    _, sim, lo, hi = _samples(1e6, reps_real=1, spread=0.5)
    real = 1e6**-0.5 * np.exp(0.5 * stats.norm.ppf((np.arange(10) + 0.5) / 10))
    out = implied_shift(real, sim, lo, hi)
    assert out["verdict"] == "inconclusive"
    assert abs(out["shift"]) < 0.05
    assert out["shift_ci95"][0] < -0.2 or out["shift_ci95"][1] > 0.2
    assert out["reps_real_needed"] > 10 * (0.2 / 0.1) ** 2


def test_an_error_that_does_not_move_with_n_defines_no_shift():
    from dpdist.experiments.validation import implied_shift

    real, sim, lo, hi = _samples(1e6, reps_real=50, slope=0.0)
    out = implied_shift(real, sim, lo, hi)
    assert out["verdict"] == "flat" and out["shift"] is None and out["shift_ci95"] is None


@pytest.mark.statistical
def test_short_form_runs_at_the_sweeps_n_star_and_finds_no_shift():
    from dpdist.experiments.sample_complexity import SMOKE
    from dpdist.experiments.validation import FULL_POINTS, run_validation

    res = run_validation(FULL_POINTS if LONG else None, smoke=not LONG, reps_sim=300 if LONG else 100,
                         log=lambda s: None)
    assert res["shift_found"] == [], res["methods"]
    for p in res["points"]:
        cfg = SMOKE[p["problem"]] if not LONG else None
        if cfg is not None:
            assert p["k"] == cfg["k"] and p["target"] == cfg["target"] and p["d"] in cfg["dims"]
        assert p["n"] == round(p["n_star"]) and p["reaches_n_star"]
        assert p["tests_agree"], p
        assert not p["trivial"]
        # n* is where >= 11 of 12 simulated runs meet the target: the simulated errors there
        # sit around it, not far above or below
        assert 0.5 <= p["success_sim"] and p["sim_median"] <= p["target"]
        assert math.isfinite(p["slope_dlog_error_dlog_n"]) and p["slope_dlog_error_dlog_n"] < 0


def test_the_real_sparse_covariance_pca_estimates_what_the_simulation_does():
    """The simulation of SparseCovariancePCA spends the whole budget on the second moment of
    mean-zero rows (as every experiment does); the real path must fit that same estimator, not
    the default that first releases a private mean."""
    import warnings

    import dpdist
    from dpdist.experiments.methods import _sin2, pca_instance, real_error

    inst = pca_instance(20, 3)
    X, truth = inst.make_rows(20_000, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = dpdist.SparseCovariancePCA(3, 1.0, 1e-6, sigma=math.sqrt(inst.sigma2), random_state=7919,
                                         scheduler="synchronous", assume_centered=True).fit(X)
        got = real_error("privcov_power", inst, 20_000, 0, scheduler="synchronous")
    assert 0 < got < 0.5  # a point where the component is found, so that the estimators differ
    assert got == _sin2(est.components_, truth["v1"])
