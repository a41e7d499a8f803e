"""``dpdist second-moment``: round trip through Zarr, baseline labelling, --plan, errors."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import dpdist
from dpdist.cli.main import main
from dpdist.data.second_moment_generators import anisotropic_gaussian, to_zarr


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("sm") / "x.zarr"
    to_zarr(anisotropic_gaussian(40_000, random_state=1, chunk_rows=10_000), path)
    return str(path)


def test_recursive_round_trip_matches_the_python_api(store, tmp_path, capsys):
    out = tmp_path / "sm.zarr"
    args = ["second-moment", store, "--rho", "1", "--m", "20", "--radius", "5000", "--lambda-min", "0.5",
            "--random-state", "3", "--scheduler", "synchronous", "--output", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "rho = 1 zCDP" in text and "SEEDED" in text and "n_levels" in text
    res = dpdist.load_result(out)
    est = dpdist.SecondMoment(1.0, m=20, radius=5000.0, lambda_min=0.5, random_state=3,
                              scheduler="synchronous").fit(store)
    np.testing.assert_allclose(res.second_moment, est.second_moment_, rtol=1e-12)
    assert res.metadata["privacy"]["type"] == "zcdp" and res.metadata["privacy"]["rho"] == pytest.approx(1.0)
    assert res.metadata["parameters"]["n_levels"] == est.n_levels_


def test_subsample_aggregate_refuses_then_labels_unsafe_runs(store, tmp_path, capsys):
    base = ["second-moment", store, "--method", "subsample-aggregate", "--epsilon", "1", "--delta", "1e-7",
            "--m", "100", "--random-state", "0", "--scheduler", "synchronous"]
    out = tmp_path / "sa.zarr"
    assert main(base + ["--output", str(out)]) == 2
    assert "--unsafe-no-privacy" in capsys.readouterr().err
    assert not os.path.exists(out)
    assert main(base + ["--unsafe-no-privacy", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "NOT PRIVATE" in text
    meta = dpdist.load_result(out).metadata
    assert meta["private"] is False and meta["privacy"] is None


def test_plan_reads_no_data_and_prints_levels(capsys):
    args = ["second-moment", "--plan", "--rho", "1", "--m", "10", "--radius", "1000", "--lambda-min", "1",
            "--n-samples", "100000", "--n-features", "4", "--json"]
    assert main(args) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["n_levels"] == 8 and len(info["noise_scales"]) == 8  # R^2 = 1e6, alpha = 0.5, m = 10


@pytest.mark.parametrize(
    "extra,message",
    [(["--m", "5"], "--rho"), (["--rho", "1", "--m", "5", "--epsilon", "1"], "subsample-aggregate"),
     (["--rho", "-1", "--m", "5"], "rho")],
)
def test_errors_exit_2_with_a_message(store, tmp_path, capsys, extra, message):
    assert main(["second-moment", store, "--output", str(tmp_path / "o.zarr"), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "o.zarr")
