"""Measured n* as planning data: exact at measured d, log-log inside the range, None outside."""

from __future__ import annotations

import json
import math

import pytest

import dpdist.algorithms.measured as measured
import dpdist.experiments.empirical as emp


@pytest.fixture
def table(monkeypatch):
    entry = {"instance_family": "construction1 (k=20)", "target": "||M - Sigma||_op <= 0.25 sigma^2",
             "epsilon": 1.0, "delta": 1e-6, "beta": 0.1, "mode": "simulated", "source": "x.json", "date": "2026-11-30",
             "points": [(100, 1e6), (1000, 1e7), (10000, 4e7)]}
    monkeypatch.setattr(measured, "TABLE", {("privcov", "simulated"): entry})
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
    # the sweeps run the paper's mean-zero models: the second moment, no private mean
    assert t == dpdist.SparseCovariance(3, 1.0, 1e-6, sigma=1.0, assume_centered=True,
                                        selection="paper").min_samples(0.5, 1000)
    t = emp.theory_n_star("privcov_gumbel", 1000, k=3, sigma=1.0, target=0.5, epsilon=1.0, delta=1e-6)
    assert t == dpdist.SparseCovariance(3, 1.0, 1e-6, sigma=1.0, assume_centered=True).min_samples(0.5, 1000)
    t = emp.theory_n_star("privcov_laplace", 1000, k=3, sigma=1.0, target=0.5, epsilon=1.0, delta=1e-6)
    assert t == dpdist.SparseCovariance(3, 1.0, 1e-6, sigma=1.0, assume_centered=True,
                                        selection="laplace").min_samples(0.5, 1000)
    assert emp.theory_n_star("unknown", 10, k=1, sigma=1.0, target=0.5, epsilon=1.0, delta=1e-6) is None


def test_privpca_theory_value_is_the_published_algorithms_least_n():
    """PrivPCA's sweeps run it as published (rows taken as mean-zero): its theorem n* is that
    plan's least n, not the centred default's (unreachable with a private mean at these n)."""
    import dpdist

    t = emp.theory_n_star("privpca", 100, k=2, sigma=1.0, target=0.5, epsilon=1.0, delta=1e-6, gap=0.5)
    assert t is not None
    assert t == dpdist.SparsePCA(2, 1.0, 1e-6, gap=0.5, sigma=1.0, assume_centered=True).min_samples(0.5, 100)


def _results(mode):
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "results" / f"sample_complexity_{mode}.json"
    return json.loads(path.read_text())


def test_plan_reports_the_measured_n_star_labelled_empirical():
    """plan() carries the n* of the committed sweep (read here from the results file itself),
    labelled empirical with its source; nothing outside the measured range of d."""
    import dpdist

    rows = {r["d"]: r["n_star"] for r in _results("simulated")["methods"]["privcov"]["rows"] if r["reached"]}
    plan = dpdist.SparseCovariance(20, 1.0, 1e-6, sigma=1.0, selection="paper").plan(10**9, 2000)
    (e,) = plan.empirical
    assert e["n_star"] == rows[2000] and not e["interpolated"]
    assert e["label"] == "empirical" and e["mode"] == "simulated"
    assert e["source"] == "benchmarks/results/sample_complexity_simulated.json"
    between = dpdist.SparseCovariance(20, 1.0, 1e-6, sigma=1.0, selection="paper").plan(10**9, 1000).empirical[0]
    assert rows[600] < between["n_star"] < rows[2000] and between["interpolated"]
    assert dpdist.SparseCovariance(20, 1.0, 1e-6, sigma=1.0, selection="paper").plan(10**9, 30).empirical == ()  # below d = 60
    assert plan.to_dict()["empirical"][0]["n_star"] == rows[2000]


def test_every_measured_method_is_reported_by_its_estimator():
    """Each method of the sweeps shows up in the plan of the estimator the sweep ran, in every
    mode it was measured in (names come from the results files, not from the code)."""
    import dpdist

    b = dpdist.baselines
    plans = {
        "privcov": lambda d: dpdist.SparseCovariance(20, 1.0, 1e-6, sigma=1.0, selection="paper").plan(10**9, d),
        "privcov_gumbel": lambda d: dpdist.SparseCovariance(20, 1.0, 1e-6, sigma=1.0).plan(10**9, d),
        "privcov_laplace": lambda d: dpdist.SparseCovariance(20, 1.0, 1e-6, sigma=1.0,
                                                             selection="laplace").plan(10**9, d),
        "wang_xu": lambda d: b.GaussianCovariance(1.0, 1e-6, sigma=1.0).plan(10**9, d),
        "thresholded": lambda d: b.ThresholdedCovariance(sigma=1.0).plan(10**9, d),
        "privpca": lambda d: dpdist.SparsePCA(3, 1.0, 1e-6, gap=0.5, sigma=1.0).plan(10**9, d),
        "wang_xu_pca": lambda d: b.GaussianPCA(1.0, 1e-6, sigma=1.0).plan(10**9, d, k=3),
        "thresholded_pca": lambda d: b.ThresholdedPCA(sigma=1.0).plan(10**9, d, k=3),
        "expmech": lambda d: dpdist.ExpMechSparsePCA(3, 1.0, 1e-6, sigma=1.0).plan(10**9, d, eigengap=0.5),
        "privcov_power": lambda d: dpdist.SparseCovariancePCA(3, 1.0, 1e-6, sigma=1.0).plan(10**9, d, eigengap=0.5),
    }
    for mode in ("simulated", "real"):
        for name, r in _results(mode)["methods"].items():
            reached = [(row["d"], row["n_star"]) for row in r["rows"] if row["reached"]]
            if not reached:
                continue
            d, n_star = reached[0]
            got = {e["mode"]: e["n_star"] for e in plans[name](d).empirical}
            assert got.get(mode) == n_star, (name, mode, got)


def test_privcov_power_theory_value_is_its_plans_least_n():
    import dpdist

    t = emp.theory_n_star("privcov_power", 1000, k=3, sigma=math.sqrt(2.0), target=0.1, epsilon=1.0, delta=1e-6,
                          gap=0.5)
    assert t == dpdist.SparseCovariancePCA(3, 1.0, 1e-6, sigma=math.sqrt(2.0)).min_samples(0.1, 1000, eigengap=1.0)


def test_the_table_is_what_its_results_files_give():
    """The shipped table equals the one built from the results files it names: each entry holds
    its file's measured points and its file's fingerprint of that method (a table that no longer
    matches its files would put stale numbers in every plan)."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    assert emp.build_table([root / s for s in emp.SOURCES]) == emp.TABLE
    for source in emp.SOURCES:
        res = json.loads((root / source).read_text())
        for name, r in res["methods"].items():
            entry = emp.TABLE[(name, res["mode"])]
            assert entry["source"] == source
            assert entry["points"] == [(row["d"], row["n_star"]) for row in r["rows"] if row["reached"]]
            assert entry["fingerprint"] == res.get("fingerprints", {}).get(name)


def test_the_default_privcov_plan_reports_its_measured_n_star():
    """The default (Gumbel) SparseCovariance's plan carries the n* measured for the Gumbel
    selection, and SparseCovariancePCA's its own, at a measured d."""
    import dpdist

    cov = dpdist.SparseCovariance(20, 1.0, 1e-6, sigma=1.0, assume_centered=True).plan(10**8, 2000)
    (sim,) = [e for e in cov.empirical if e["mode"] == "simulated"]
    assert sim["method"] == "privcov_gumbel" and sim["n_star"] == emp.TABLE[("privcov_gumbel", "simulated")]["points"][3][1]
    pca = dpdist.SparseCovariancePCA(3, 1.0, 1e-6, sigma=1.0, assume_centered=True).plan(10**8, 1000)
    assert [e["method"] for e in pca.empirical] == ["privcov_power"]
