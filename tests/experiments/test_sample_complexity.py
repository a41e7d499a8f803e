"""n*(d) search, exponent fit and the crossover, on known functions; a short simulated sweep."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from dpdist.exceptions import ValidationError
from dpdist.experiments.sample_complexity import (
    closed_form_crossover,
    fit_exponent,
    n_star,
    noise_crossover_d,
    run_sample_complexity,
)


def test_n_star_finds_the_threshold_of_a_known_error_curve():
    # error = c / sqrt(n) * (1 + 0.1 z_rep): the 0.9-quantile over reps is c (1 + 0.1 z_(0.9)) / sqrt(n)
    z = np.random.default_rng(0).standard_normal(20)
    c, target = 100.0, 0.5
    res = n_star(lambda n, r: c * (1 + 0.1 * z[r]) / math.sqrt(n), target, beta=0.1, reps=20, start=10, rtol=0.01)
    q = np.sort(1 + 0.1 * z)[17]  # 18 of 20 must succeed: the 18th smallest factor
    exact = (c * q / target) ** 2
    assert res.lower < exact <= res.n_star <= exact * 1.02 and res.reached
    far = n_star(lambda n, r: 1.0, 0.5, reps=3, start=10, n_max=1e6)
    assert not far.reached and far.n_star == math.inf


def test_fit_exponent_recovers_a_power_law_and_its_interval_covers_it():
    d = np.array([50, 200, 1000, 5000, 20000, 100000])
    noise = np.exp(0.05 * np.random.default_rng(1).standard_normal(d.size))
    fit = fit_exponent(d, 3.0 * d**0.5 * noise)
    assert fit["ci95"][0] <= 0.5 <= fit["ci95"][1] and abs(fit["exponent"] - 0.5) < 0.05
    exact = fit_exponent(d, 7.0 * d**1.0)
    assert exact["exponent"] == pytest.approx(1.0) and exact["ci95"][1] - exact["ci95"][0] < 1e-6
    with pytest.raises(ValidationError, match="at least 3"):
        fit_exponent([1, 2], [1, 2])


def test_crossover_closed_form_and_calibrations():
    from dpdist.privacy.mechanisms.gaussian import wang_xu_calibration
    from dpdist.privacy.mechanisms.privcov.calibration import privcov_calibration

    d = closed_form_crossover(3, 1e-6)
    assert d == pytest.approx(64 * 4 * math.log(d * 2 * d / 1e-6), rel=1e-9)
    assert 6000 < d < 12000  # 64 (k+1) log(d / delta_row) is about 8,000 for k = 3, delta = 1e-6
    dn = noise_crossover_d(3, 1.0, 1e-6)
    below, above = int(dn * 0.8), int(dn * 1.25)
    ratio = lambda dd: (privcov_calibration(1.0, 1e-6, 10**6, dd, 3, 1.0).laplace_scale  # noqa: E731
                        / wang_xu_calibration(1.0, 1e-6, 10**6, dd, 1.0)["gaussian_sigma"])
    assert ratio(below) > 1 > ratio(above)  # Wang-Xu's noise is smaller below, PrivCov's above


def test_short_simulated_sweep_writes_labelled_json_and_plots(tmp_path):
    run_sample_complexity(["thresholded", "wang_xu", "privcov"], smoke=True, reps=6, rtol=0.3,
                          out_dir=str(tmp_path), log=lambda s: None)
    data = json.loads((tmp_path / "sample_complexity_simulated.json").read_text())
    assert data["label"] == "SIMULATED" and data["mode"] == "simulated"
    assert os.path.exists(tmp_path / "sample_complexity_covariance_simulated.png")
    n = {m: [r["n_star"] for r in data["methods"][m]["rows"]] for m in data["methods"]}
    # at every d the private methods need more samples than non-private thresholding, and
    # Wang-Xu's n* grows with d
    for i in range(3):
        assert n["thresholded"][i] < n["wang_xu"][i] and n["thresholded"][i] < n["privcov"][i]
    assert n["wang_xu"][-1] > n["wang_xu"][0]
    assert "crossover" in data and data["methods"]["privcov"]["fit"]["n_points"] == 3
    with pytest.raises(ValidationError, match="unknown method"):
        run_sample_complexity(["nope"], smoke=True)


def test_k_sweep_short_form_fits_k_beside_the_plan_bound(tmp_path):
    res = run_sample_complexity(["thresholded", "wang_xu"], smoke=True, ks=[4, 8, 16], dims=[48], reps=4, rtol=0.3,
                                out_dir=str(tmp_path), log=lambda s: None)
    data = json.loads((tmp_path / "sample_complexity_k_simulated.json").read_text())
    assert os.path.exists(tmp_path / "sample_complexity_k_simulated.png")
    assert data["variable"] == "k" and data["ks"] == [4, 8, 16] and data["label"] == "SIMULATED"
    assert "crossover" not in data and data["code_revision"] == res["code_revision"] and data["fingerprints"]
    for name, paper in (("thresholded", 2.0), ("wang_xu", 2.0)):
        m = data["methods"][name]
        assert [(r["k"], r["d"], r["epsilon"]) for r in m["rows"]] == [(4, 48, 1.0), (8, 48, 1.0), (16, 48, 1.0)]
        assert [p["k"] for p in m["instances"]] == [4, 8, 16] and m["paper_exponent"] == paper
        n = [r["n_star"] for r in m["rows"]]
        assert n[0] < n[-1]  # a denser covariance needs more samples
        th = [r["theory_n"] for r in m["rows"]]
        assert th[0] < th[1] < th[2]  # so does the plan bound
        # the difference is the fit of log(n*/bound): exactly the measured slope minus the bound's
        assert m["fit_measured_over_theory"]["exponent"] == pytest.approx(
            m["fit"]["exponent"] - m["fit_theory"]["exponent"], abs=1e-9)
        assert m["fit"]["k_range"] == [4.0, 16.0] and "over the k grid" in m["fit"]["ci_method"]


def test_epsilon_sweep_short_form(tmp_path):
    run_sample_complexity(["thresholded", "wang_xu", "wang_xu_pca"], smoke=True, epsilons=[2, 0.5, 1], reps=4,
                          rtol=0.3, out_dir=str(tmp_path), log=lambda s: None)
    data = json.loads((tmp_path / "sample_complexity_epsilon_simulated.json").read_text())
    for png in ("covariance", "pca"):
        assert os.path.exists(tmp_path / f"sample_complexity_epsilon_simulated_{png}.png")
    assert data["variable"] == "epsilon" and data["epsilons"] == [0.5, 1.0, 2.0] and data["epsilon"] is None
    wx = data["methods"]["wang_xu"]
    assert [r["epsilon"] for r in wx["rows"]] == [0.5, 1.0, 2.0] and wx["paper_exponent"] == -1.0
    n = [r["n_star"] for r in wx["rows"]]
    assert n[0] > n[1] > n[2] and wx["fit"]["exponent"] < 0  # more budget, fewer samples
    assert [r["d"] for r in data["methods"]["wang_xu_pca"]["rows"]] == [40, 40, 40]
    thr = data["methods"]["thresholded"]  # not private: the same n* at every epsilon, slope exactly 0
    assert len({r["n_star"] for r in thr["rows"]}) == 1
    assert thr["fit"]["exponent"] == 0.0 and thr["fit"]["ci95"] == [0.0, 0.0] and thr["paper_exponent"] == 0.0


def test_k_and_epsilon_sweeps_refuse_bad_grids_before_writing(tmp_path):
    out = str(tmp_path / "out")
    cases = [
        (dict(ks=[4, 8], epsilons=[1, 2]), "not both"),
        (dict(ks=[5, 8], dims=[48]), "k dividing d"),  # Construction 1 needs k | d
        (dict(ks=[4, 8], dims=[48, 96]), "one d per method"),
        (dict(ks=[4, 4.5]), "integer >= 2"),
        (dict(epsilons=[1, 0]), "finite number > 0"),
        (dict(epsilons=[1, 1]), "distinct"),
    ]
    for kwargs, match in cases:
        with pytest.raises(ValidationError, match=match):
            run_sample_complexity(["thresholded"], smoke=True, reps=2, out_dir=out, log=lambda s: None, **kwargs)
    # outside the short form, k must also be >= 2 log(d/k): k = 5 at d = 1000 is not Construction 1
    with pytest.raises(ValidationError, match="2 log"):
        run_sample_complexity(["thresholded"], ks=[5, 10], dims=[1000], reps=2, out_dir=out, log=lambda s: None)
    assert not os.path.exists(out)
