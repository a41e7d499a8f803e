"""The dpdist command: round trips through real Zarr stores, --plan, errors, no partial output."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import zarr

import dpdist
from dpdist.cli.main import main


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "m1.zarr"
    rc = main(["generate", str(path), "--n-samples", "20000", "--n-features", "12", "--k", "3",
               "--chunk-rows", "5000", "--scheduler", "synchronous"])
    assert rc == 0
    return str(path)


def test_covariance_round_trip(dataset, tmp_path, capsys):
    out = tmp_path / "cov.zarr"
    args = ["covariance", dataset, "--k", "3", "--epsilon", "1", "--delta", "1e-5", "--clip", "3",
            "--random-state", "7", "--scheduler", "synchronous", "--output", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    # seeded: the budget is recorded, the release is marked NOT PRIVATE (the seed reproduces the noise)
    assert "(1, 1e-05)-DP" in text and "SEEDED" in text and "NOT PRIVATE" in text
    res = dpdist.load_result(out)
    est = dpdist.SparseCovariance(3, 1.0, 1e-5, clip=3.0, random_state=7, scheduler="synchronous").fit(dataset)
    np.testing.assert_array_equal(res.covariance.toarray(), est.covariance_.toarray())
    assert res.metadata["mechanism"] == est.release_.mechanism
    assert res.metadata["noise_scales"]["gumbel_select"] == est.noise_scale_


@pytest.mark.parametrize("method,flags", [
    ("wang-xu", ["--epsilon", "1", "--delta", "1e-5", "--random-state", "1"]),
    ("thresholded", []),
])
def test_baselines_from_the_cli(dataset, tmp_path, method, flags):
    out = tmp_path / f"{method}.zarr"
    assert main(["covariance", dataset, "--method", method, *flags, "--sigma", "1.3", "--scheduler", "synchronous",
                 "--output", str(out)]) == 0
    res = dpdist.load_result(out)
    assert res.metadata["private"] is False  # seeded (--random-state): never private
    assert (res.metadata["privacy"] is None) is (method == "thresholded")


def test_plan_reads_metadata_only(dataset, capsys):
    assert main(["covariance", dataset, "--k", "3", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1", "--plan", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    ref = dpdist.SparseCovariance(3, 1.0, 1e-6, sigma=1.0).plan(20000, 12)
    assert plan["noise_scale"] == pytest.approx(ref.noise_scale) and plan["n_samples"] == 20000
    assert plan["vacuous"] is ref.vacuous and plan["error_bound"] == pytest.approx(ref.error_bound)
    assert main(["covariance", "--plan", "--n-samples", "1000000", "--n-features", "500", "--k", "3",
                 "--epsilon", "1", "--delta", "1e-6", "--sigma", "1"]) == 0
    assert "min n" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra,msg",
    [
        (["--k", "13", "--epsilon", "1", "--delta", "1e-5", "--clip", "3"], "k must satisfy"),
        (["--k", "3", "--epsilon", "-1", "--delta", "1e-5", "--clip", "3"], "epsilon"),
        (["--k", "3", "--epsilon", "1", "--delta", "2", "--clip", "3"], "delta"),
        (["--k", "3", "--epsilon", "1", "--delta", "1e-5"], "sigma"),
        (["--epsilon", "1", "--delta", "1e-5", "--clip", "3"], "--k"),
    ],
)
def test_bad_input_exits_nonzero_with_one_line_and_writes_nothing(dataset, tmp_path, capsys, extra, msg):
    out = tmp_path / "o.zarr"
    rc = main(["covariance", dataset, *extra, "--scheduler", "synchronous", "--output", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == []


def test_nonfinite_data_writes_nothing(tmp_path, capsys):
    src = zarr.create_array(str(tmp_path / "nan.zarr"), shape=(100, 4), chunks=(50, 4), dtype="f8")
    x = np.random.default_rng(0).standard_normal((100, 4))
    x[60, 1] = np.inf
    src[...] = x
    out = tmp_path / "o.zarr"
    rc = main(["covariance", str(tmp_path / "nan.zarr"), "--k", "1", "--epsilon", "1", "--delta", "1e-5",
               "--clip", "2", "--on-nonfinite", "raise", "--scheduler", "synchronous", "--output", str(out)])
    assert rc == 2 and "NaN or infinite" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["nan.zarr"]
    # the default (--on-nonfinite zero): the row is a zero row, the release is written
    rc = main(["covariance", str(tmp_path / "nan.zarr"), "--k", "1", "--epsilon", "1", "--delta", "1e-5",
               "--clip", "2", "--scheduler", "synchronous", "--output", str(out)])
    assert rc == 0 and out.exists()


def test_missing_input_and_existing_output(dataset, tmp_path, capsys):
    assert main(["covariance", str(tmp_path / "none.zarr"), "--k", "1", "--epsilon", "1", "--delta", "1e-5",
                 "--clip", "1", "--output", str(tmp_path / "o.zarr")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "o.zarr").mkdir()
    assert main(["covariance", dataset, "--k", "1", "--epsilon", "1", "--delta", "1e-5", "--clip", "1",
                 "--output", str(tmp_path / "o.zarr")]) == 2
    assert "already exists" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", ["demo", "generate", "covariance"])
def test_help(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main([cmd, "--help"])
    assert e.value.code == 0 and "usage: dpdist" in capsys.readouterr().out


def test_demo_runs_on_a_local_cluster(capsys):
    assert main(["demo", "--n-samples", "200000", "--n-features", "12", "--random-state", "3",
                 "--scheduler", "local-cluster"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "(2, 1e-06)-DP" in out and "||M - Sigma||_op" in out and "cluster" in out
    # both private releases of the same data add up (basic composition); nothing is kept
    assert "= (4, 2e-06)-DP for the whole demo (basic composition)" in out
    assert "results   : temporary (removed at exit)" in out and "written   :" not in out
    assert "!! SEEDED" in captured.err and "!! NOT PRIVATE" in captured.err


def test_demo_keeps_both_releases_with_workdir(tmp_path, capsys):
    work = tmp_path / "demo"
    assert main(["demo", "--n-samples", "3000", "--n-features", "6", "--k", "2", "--epsilon", "1",
                 "--scheduler", "synchronous", "--workdir", str(work)]) == 0
    out = capsys.readouterr().out
    assert "= (2, 2e-06)-DP for the whole demo" in out
    for name in ("privcov", "wang-xu"):
        res = dpdist.load_result(work / f"{name}.zarr")
        assert f"{name}.zarr" in out and res.metadata["privacy"] == {"type": "approx-dp", "epsilon": 1.0, "delta": 1e-6}
    assert sorted(p.name for p in work.iterdir()) == ["model1.zarr", "privcov.zarr", "wang-xu.zarr"]


def test_generate_model2(tmp_path, capsys):
    out = tmp_path / "m2.zarr"
    assert main(["generate", str(out), "--model", "2", "--n-samples", "3000", "--n-features", "9", "--k", "3",
                 "--chunk-rows", "1000", "--scheduler", "synchronous"]) == 0
    from dpdist.data.model2 import load_model2_truth
    from dpdist.data.validation import as_dask_array

    assert as_dask_array(str(out)).shape == (3000, 9)
    assert np.count_nonzero(load_model2_truth(out)["v1"]) == 3


def test_plan_shows_the_measured_n_star_as_empirical(capsys):
    """--plan prints the sweep's n* at this d as one labelled line (text), the dicts (--json)."""
    argv = ["covariance", "--plan", "--n-samples", "1000000000", "--n-features", "2000", "--k", "20",
            "--epsilon", "1", "--delta", "1e-6", "--sigma", "1", "--selection", "paper"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("empirical n* (simulated)"))
    from dpdist.experiments.empirical import TABLE

    measured = dict(TABLE[("privcov", "simulated")]["points"])[2000]  # the committed sweep's n* at d = 2,000
    assert f"{measured:.3g}" in line and "construction1 (k=20)" in line and "sample_complexity_simulated.json" in line
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [e["label"] for e in doc["empirical"]] == ["empirical"]


def test_the_demos_default_size_is_where_the_flagship_is_useful():
    """At the demo's default size the flagship's plan is not vacuous (no VACUOUS banner) and the
    demo's closing sentence quotes both plans' noise scales (public numbers), not a fixed claim
    about which estimator wins."""
    import argparse

    from dpdist.cli import demo
    from dpdist.data.synthetic import make_model1

    sub = argparse.ArgumentParser().add_subparsers()
    demo.register(sub)
    args = sub.choices["demo"].parse_args([])
    model = make_model1(args.n_features, args.k, structure=args.structure, random_state=0)
    budget = dict(epsilon=args.epsilon, delta=args.delta, sigma=float(np.sqrt(model.sigma2)))
    plan = dpdist.SparseCovariance(args.k, **budget).plan(args.n_samples, args.n_features)
    wx = dpdist.baselines.GaussianCovariance(**budget).plan(args.n_samples, args.n_features)
    assert not plan.vacuous and plan.selection == "gumbel"
    assert plan.error_bound < model.sigma2
    text = demo._noise_comparison(plan, wx)
    assert f"{plan.release_sigma:.2g}" in text and f"{wx.noise_scale:.2g}" in text
    assert "better private estimator" not in text
