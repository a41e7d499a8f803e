"""Short forms of the by-hand experiments (the full runs write benchmarks/results/)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpdist.experiments.peers import peers_available, run_peer_comparison


@pytest.mark.statistical
def test_second_moment_curves_short_form(tmp_path):
    from dpdist.experiments.second_moment_curves import run_second_moment_curves

    res = run_second_moment_curves(smoke=True, out_dir=str(tmp_path), log=lambda s: None)
    rows = {(r["condition"], r["n"]): r for r in res["ellipsoid"]}
    ill = rows[(1e6, 20_000)]
    # ill-conditioned: the recursion's error is orders of magnitude below the one-shot Gaussian's
    assert np.median(ill["recdpsme"]) * 100 < np.median(ill["one_shot"])
    out = {r["eta"]: r for r in res["outliers"]}
    assert out[0.05]["baseline_bottom"] == out[0.05]["seeds"]  # subsample-and-aggregate returns bottom
    assert min(out[0.05]["recdpsme_lambda_min_vs_clean"]) > 0.5  # the recursion keeps a lower bound
    assert json.loads((tmp_path / "second_moment_curves.json").read_text())["label"] == "real pipeline"


def test_peer_comparison_short_form(tmp_path):
    avail = peers_available()
    if any(v != "ok" for v in avail.values()):
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
