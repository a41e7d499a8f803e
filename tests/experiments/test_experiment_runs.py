"""Short forms of the by-hand experiments (the full runs write benchmarks/results/)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from dpdist.experiments.peers import peers_available, run_peer_comparison


@pytest.mark.statistical
def test_second_moment_curves_short_form(tmp_path):
    from dpdist.algorithms.second_moment.selection import radius_grid
    from dpdist.cli.main import main

    argv = ["experiment", "second-moment-curves", "--smoke", "--out", str(tmp_path)]
    assert main(argv) == 0
    res = json.loads((tmp_path / "second_moment_curves.json").read_text())
    assert res["label"] == "real pipeline"
    assert res["command"] == " ".join(["dpdist", *argv])
    for png in ("second_moment_dscaling.png", "second_moment_condition.png", "second_moment_outliers.png"):
        assert (tmp_path / png).stat().st_size > 0
    # d-scaling: every model at every d, each method's slope inside its own interval
    for model in ("ellipsoid", "truncated_pareto"):
        rows = [r for r in res["dscaling"] if r["model"] == model]
        assert len(rows) == len(res["config"]["dscale_ds"])
        fit = res["dscaling_fits"][model]["recdpsme"]
        assert fit["ci95"][0] <= fit["slope"] <= fit["ci95"][1]
    rows = {(r["condition"], r["n"]): r for r in res["ellipsoid"]}
    ill = rows[(1e6, 20_000)]
    # ill-conditioned: the recursion's error is orders of magnitude below the one-shot Gaussian's
    assert np.median(ill["recdpsme"]) * 100 < np.median(ill["one_shot"])
    # the recursion ran on its own private radius: a value of the private step's grid, not a sample maximum
    grid = radius_grid((1e-8, 1e8))
    for r in res["ellipsoid"] + res["outliers"]:
        for radius in r["radius_released"]:
            assert np.isclose(grid, radius, rtol=1e-12, atol=0).any()
    out = {(r["eta"], r["f"]): r for r in res["outliers"]}
    assert out[(0.05, 1.0)]["regime"].startswith("inside")
    assert out[(0.05, 50.0)]["regime"].startswith("outside")
    for key in ((0.05, 1.0), (0.05, 50.0)):
        assert min(out[key]["recdpsme_lambda_min_vs_clean"]) > 0.5  # the recursion keeps a lower bound


def test_loglog_fit_recovers_a_power_law():
    from dpdist.experiments.second_moment_curves import loglog_fit

    ds = [4, 8, 16, 32, 64]
    exact = loglog_fit(ds, [[0.01 * d**1.5] * 3 for d in ds])
    assert exact["slope"] == pytest.approx(1.5)
    assert exact["ci95"] == pytest.approx([1.5, 1.5])
    rng = np.random.default_rng(3)
    noisy = loglog_fit(ds, [0.01 * d**0.5 * np.exp(0.2 * rng.standard_normal(4)) for d in ds])
    assert noisy["ci95"][0] < 0.5 < noisy["ci95"][1]
    assert noisy["ci95"][1] - noisy["ci95"][0] < 0.5
    # one value per x (a deterministic curve): the slope, and no interval to resample
    assert loglog_fit(ds, [[0.01 * d**1.5] for d in ds]) == {"slope": pytest.approx(1.5), "ci95": None, "n_points": 5}
    # x values without a positive finite error are left out; fewer than two x values: no fit
    assert loglog_fit([4, 8], [[0.1], [float("nan")]])["slope"] is None


def test_peer_comparison_short_form(tmp_path):
    avail = peers_available()
    if any(v != "ok" for v in avail.values()):
        if os.environ.get("DPDIST_REQUIRE_PEERS"):  # .ci/run installs the extra: a skip there is a failure
            pytest.fail(f"peer libraries required (DPDIST_REQUIRE_PEERS) but: {avail}")
        pytest.skip(f"peer libraries absent (install with pip install -e '.[compare]'): {avail}")
    res = run_peer_comparison(smoke=True, out_dir=str(tmp_path), log=lambda s: None)
    row = res["rows"][0]
    for name in ("analyze_gauss", "wang_xu_pca", "expmech", "opendp", "diffprivlib"):
        assert name in row["methods"]
    for name in ("analyze_gauss", "opendp", "diffprivlib"):
        m = row["methods"][name]
        assert m["status"] == "ok" and 0.0 <= m["sin2"] <= 1.0 and m["seconds"] > 0
    assert (tmp_path / "peer_comparison.png").exists()


def test_peer_comparison_without_peers_says_why(monkeypatch, tmp_path):
    import dpdist.experiments.peers as peers

    monkeypatch.setattr(peers, "peers_available", lambda: {p: "not installed: test" for p in peers.PEERS})
    res = peers.run_peer_comparison(smoke=True, log=lambda s: None)
    assert res["rows"][0]["methods"]["opendp"]["status"] == "not installed: test"
    assert res["rows"][0]["methods"]["analyze_gauss"]["status"] == "ok"
