"""Measured n* as planning data: exact at measured d, log-log inside the range, None outside."""

from __future__ import annotations

import math

import pytest

import dpdist.experiments.empirical as emp


@pytest.fixture
def table(monkeypatch):
    entry = {"instance_family": "construction1 (k=20)", "target": "||M - Sigma||_op <= 0.25 sigma^2",
             "epsilon": 1.0, "delta": 1e-6, "beta": 0.1, "mode": "simulated", "source": "x.json", "date": "2026-11-30",
             "points": [(100, 1e6), (1000, 1e7), (10000, 4e7)]}
    monkeypatch.setattr(emp, "TABLE", {("privcov", "simulated"): entry})
    return entry


def test_measured_value_is_exact_interpolated_or_absent(table):
    at = emp.measured_n_star("privcov", 1000)
    assert at.n_star == 1e7 and not at.interpolated and at.label == "empirical" and at.source == "x.json"
    mid = emp.measured_n_star("privcov", math.sqrt(1000 * 10000))
    assert mid.interpolated and mid.n_star == pytest.approx(math.sqrt(1e7 * 4e7))
    assert emp.measured_n_star("privcov", 50) is None and emp.measured_n_star("privcov", 20000) is None
    assert emp.measured_n_star("wang_xu", 1000) is None
    assert emp.measured_n_star("privcov", 10000).n_star == 4e7


def test_the_committed_table_covers_the_swept_methods():
    # the shipped TABLE comes from benchmarks/results/sample_complexity_simulated.json
    methods = {m for (m, mode) in emp.TABLE if mode == "simulated"}
    assert {"thresholded", "privcov", "wang_xu", "privpca"} <= methods
    for (m, mode), entry in emp.TABLE.items():
        ds = [d for d, _ in entry["points"]]
        assert ds == sorted(ds) and entry["source"].startswith("benchmarks/results/")


def test_theory_values_come_from_the_estimators_plans():
    import dpdist

    t = emp.theory_n_star("privcov", 1000, k=3, sigma=1.0, target=0.5, epsilon=1.0, delta=1e-6)
    assert t == dpdist.SparseCovariance(3, 1.0, 1e-6, sigma=1.0).min_samples(0.5, 1000)
    assert emp.theory_n_star("unknown", 10, k=1, sigma=1.0, target=0.5, epsilon=1.0, delta=1e-6) is None
