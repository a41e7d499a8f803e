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
    from dpdist.privacy.calibration import privcov_calibration, wang_xu_calibration

    d = closed_form_crossover(3, 1e-6)
    assert d == pytest.approx(64 * 4 * math.log(d * 2 * d / 1e-6), rel=1e-9)
    assert 6000 < d < 12000  # ALGORITHMS.md: "about 8,000 for k = 3, delta = 1e-6"
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
