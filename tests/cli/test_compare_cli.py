"""``dpdist plan --compare`` and ``--method auto`` on ``dpdist covariance`` / ``dpdist pca``."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import dpdist
from dpdist import load_result
from dpdist.baselines import GaussianCovariance, GaussianPCA, ThresholdedPCA
from dpdist.cli.main import main

@pytest.fixture(autouse=True)
def known_methods(monkeypatch):
    """Only the methods whose known answers these tests check (see tests/algorithms/test_compare.py)."""
    from dpdist.algorithms import compare
    from tests.algorithms.test_compare import KNOWN

    monkeypatch.setattr(compare, "CANDIDATES", [c for c in compare.CANDIDATES if (c.task, c.name) in KNOWN])


Q16 = ["--n-samples", "4000000", "--n-features", "16", "--k", "3", "--epsilon", "1", "--delta", "1e-6",
       "--sigma", "1"]


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_prints_every_method_marks_the_best_and_says_why(capsys):
    code, out, _ = _run(capsys, "plan", "--compare", *Q16)
    assert code == 0
    rows = {line[2:].split()[0]: line for line in out.splitlines() if line[:2] in ("* ", "  ") and "Covariance" in line}
    assert set(rows) == {"wang-xu", "privcov", "thresholded"}
    assert rows["wang-xu"].startswith("* ") and not rows["privcov"].startswith("*")
    wang_xu = GaussianPCA(1.0, 1e-6, sigma=1.0).plan(4_000_000, 16, k=3).operator_error_bound
    privcov_plan = dpdist.SparseCovariance(3, 1.0, 1e-6, sigma=1.0).plan(4_000_000, 16)
    privcov = privcov_plan.error_bound
    assert "NOT PRIVATE" in rows["thresholded"] and ("VACUOUS" in rows["privcov"]) == privcov_plan.vacuous
    assert f"{wang_xu:.3g}" in rows["wang-xu"] and f"{privcov:.3g}" in rows["privcov"]
    best = next(line for line in out.splitlines() if line.startswith("best"))
    assert "wang-xu" in best and "smallest predicted" in best


def test_compare_shows_measured_n_star_and_the_theorem_n_for_a_target(capsys):
    # n = 1e8: below the theorem n of PrivCov's default (6.9e8 with its private mean), so its row says "no"
    code, out, _ = _run(capsys, "plan", "--compare", "--n-samples", "100000000", "--n-features", "1000", "--k", "20",
                        "--epsilon", "1", "--delta", "1e-6", "--sigma", "1", "--target", "0.25")
    assert code == 0
    measured = [line for line in out.splitlines() if line.startswith("measured")]
    # Wang-Xu's n* is measured at d = 1,000 (PrivCov's default analysis only at two points so far)
    n_star = GaussianCovariance(1.0, 1e-6, sigma=1.0).plan(10**8, 1000).empirical[0]["n_star"]
    assert any(line.split(":")[1].strip() == "wang-xu" and f"n* = {n_star:.3g}" in line for line in measured)
    theorem = dpdist.SparseCovariance(20, 1.0, 1e-6, sigma=1.0).min_samples(0.25, 1000)
    row = next(line for line in out.splitlines() if line.lstrip("* ").split()[:1] == ["privcov"])
    assert row.split()[-1] == f"{theorem:.3g}" and " no " in row


def test_compare_json_for_pca(capsys):
    code, out, _ = _run(capsys, "plan", "--compare", "--task", "pca", "--n-samples", "3000000", "--n-features", "100",
                        "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1", "--gap", "0.5", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["best"] == "expmech"
    rows = {r["name"]: r for r in doc["rows"]}
    assert rows["thresholded"]["private"] is False and rows["thresholded"]["rank"] is None
    expected = ThresholdedPCA(sigma=1.0).plan(3_000_000, 100, k=2, eigengap=0.5).error_bound
    assert rows["thresholded"]["predicted_error"] == pytest.approx(expected, rel=1e-12)
    assert not rows["analyze-gauss"]["applicable"]


@pytest.mark.parametrize("argv, match", [
    (["plan"], "needs a JOB file, or --compare"),
    (["plan", "job.toml", "--k", "3"], "--k is not used by `dpdist plan JOB`"),
    (["plan", "job.toml", "--compare", *Q16], "not used by `dpdist plan --compare`"),
    (["plan", "--compare", *Q16[:-2]], "needs option(s): --sigma"),
    (["plan", "--compare", "--task", "pca", *Q16], "gap"),
])
def test_compare_refuses_bad_usage_with_exit_2(capsys, argv, match):
    code, _, err = _run(capsys, *argv)
    assert code == 2 and match in err


@pytest.fixture
def rows(tmp_path):
    X = np.random.default_rng(0).standard_normal((3000, 6))
    path = tmp_path / "x.npy"
    np.save(path, X)
    return str(path), X


def test_method_auto_runs_the_chosen_method_says_so_and_records_it(rows, tmp_path, capsys):
    path, X = rows
    out = tmp_path / "auto"
    code, text, _ = _run(capsys, "covariance", path, "--method", "auto", "--k", "2", "--epsilon", "1", "--delta",
                         "1e-6", "--sigma", "1", "--random-state", "5", "--scheduler", "synchronous", "-o", str(out))
    assert code == 0
    first = text.splitlines()[0]
    assert first.startswith("method auto: wang-xu (GaussianCovariance): smallest predicted ||M - Sigma||_op")
    res = load_result(out)
    choice = res.metadata["method_choice"]
    assert choice["method"] == "wang-xu" and choice["estimator"] == "GaussianCovariance"
    assert choice["question"]["n_samples"] == 3000 and choice["question"]["n_features"] == 6
    assert "public parameters only" in choice["rule"]
    # exactly the chosen estimator with the given parameters: the same seed gives the same release
    direct = GaussianCovariance(1.0, 1e-6, sigma=1.0, random_state=5, scheduler="synchronous").fit(X)
    np.testing.assert_array_equal(res.covariance.toarray(), direct.covariance_.toarray())


def test_method_auto_plan_for_pca_reads_no_data(capsys):
    code, out, err = _run(capsys, "pca", "--method", "auto", "--plan", "--n-samples", "3000000", "--n-features", "100",
                          "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1", "--gap", "0.5", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["method_choice"]["method"] == "expmech"
    expected = dpdist.ExpMechSparsePCA(2, 1.0, 1e-6, sigma=1.0).plan(3_000_000, 100, eigengap=0.5).error_bound
    assert doc["error_bound"] == pytest.approx(expected, rel=1e-12)
    assert "method auto: expmech" in err


PCA_Q = ["--k", "2", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1"]
PCA_PLAN = ["--plan", "--n-samples", "3000000", "--n-features", "100", *PCA_Q, "--gap", "0.5"]


@pytest.mark.parametrize("extra, match", [
    ([*PCA_Q, "--gap", "0.5", "--clip", "3"], "--clip is not used by `--method auto`"),
    ([*PCA_Q], "needs option(s): --gap"),
    ([*PCA_PLAN, "--target-sin2", "0.1"], "--target-sin2 is not used by `--method auto`"),
    ([*PCA_PLAN, "--eigengap", "0.5"], "--eigengap is not used by `--method auto`"),
    # expmech is the choice at this size, and it has no tile size
    ([*PCA_PLAN, "--tile-size", "8"], "--tile-size is not used by ExpMechSparsePCA (the method --method auto chose"),
])
def test_method_auto_refuses_flags_it_does_not_use_and_writes_nothing(rows, tmp_path, capsys, extra, match):
    path, _ = rows
    out = tmp_path / "never"
    argv = ["pca", "--method", "auto", *extra]
    if "--plan" not in extra:
        argv += [path, "-o", str(out)]
    code, _, err = _run(capsys, *argv)
    assert code == 2 and match in err
    assert not os.path.exists(out)


def test_method_auto_through_a_ledger_records_the_choice_in_the_published_release(tmp_path, capsys, monkeypatch):
    from dpdist.ops.ledger import open_ledger
    from dpdist.privacy.budget import ApproxDP
    from tests.ops.conftest import write_dataset

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("DPDIST_LEDGER", raising=False)
    data = write_dataset(str(tmp_path / "x.zarr"), n=1000, d=5)
    ledger = str(tmp_path / "ledger.sqlite")
    with open_ledger(ledger) as led:
        led.set_budget(data, ApproxDP(1.0, 1e-6))
    out = tmp_path / "cov.zarr"
    code, text, err = _run(capsys, "covariance", data, "--method", "auto", "--k", "2", "--epsilon", "1", "--delta",
                           "1e-6", "--sigma", "1", "--scheduler", "synchronous", "--ledger", ledger, "-o", str(out),
                           "--json")
    assert code == 0, err
    meta = json.loads(text)
    assert meta["ledger"]["recorded"] is True
    assert meta["method_choice"]["method"] == "wang-xu" and "method auto: wang-xu" in err
    assert load_result(out).metadata["method_choice"] == meta["method_choice"]
