"""The commands centre: --mean (comma list or .npy), --assume-centered, the private mean (covariance, norm, pca)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

import dpdist
from dpdist.cli.main import main

MU = np.array([5.0, -3.0, 2.0])


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    path = tmp_path_factory.mktemp("centering") / "x.zarr"
    zarr.save_array(str(path), np.random.default_rng(0).standard_normal((400, 3)) + MU)
    return str(path)


BASE = ["--k", "2", "--epsilon", "1", "--delta", "1e-5", "--clip", "4", "--random-state", "7",
        "--scheduler", "synchronous"]


@pytest.mark.parametrize("how", ["list", "npy"])
def test_a_public_mean_from_the_command_line_is_the_estimators(shifted, tmp_path, how):
    if how == "npy":
        np.save(tmp_path / "mu.npy", MU)
        flag = ["--mean", str(tmp_path / "mu.npy")]
    else:
        flag = ["--mean=5,-3,2"]
    out = tmp_path / "cov.zarr"
    assert main(["covariance", shifted, *BASE, *flag, "--output", str(out)]) == 0
    res = dpdist.load_result(out)
    est = dpdist.SparseCovariance(2, 1.0, 1e-5, clip=4.0, random_state=7, scheduler="synchronous", mean=MU).fit(shifted)
    np.testing.assert_array_equal(res.covariance.toarray(), est.covariance_.toarray())
    c = res.metadata["parameters"]["centering"]
    assert c["mode"] == "public-mean" and c["mean"] == MU.tolist()


def test_the_default_releases_a_private_mean_and_assume_centered_the_second_moment(shifted, tmp_path, capsys):
    out = tmp_path / "cov.zarr"
    assert main(["covariance", shifted, *BASE, "--mean-clip", "9", "--mean-fraction", "0.2",
                 "--output", str(out), "--json"]) == 0
    meta = json.loads(capsys.readouterr().out)
    assert meta["parameters"]["centering"]["mode"] == "private-mean"
    assert meta["parameters"]["centering"]["mean_fraction"] == 0.2
    assert [e["step"] for e in meta["events"]] == ["mean", "PrivCov rows"]
    res = dpdist.load_result(out)
    assert np.abs(res["mean"] - MU).max() < 6 * meta["noise_scales"]["mean_gaussian"]
    assert main(["covariance", shifted, *BASE, "--assume-centered", "--output", str(tmp_path / "m.zarr"),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["parameters"]["centering"]["mode"] == "assume-centered"


@pytest.mark.parametrize("flag, message", [
    (["--mean=5,x"], "comma-separated numbers"),
    (["--mean", "missing.npy"], "cannot read the mean"),
    (["--mean=5,-3"], "mean has 2 entries"),
])
def test_a_bad_mean_is_a_usage_error_and_writes_nothing(shifted, tmp_path, capsys, flag, message):
    out = tmp_path / "cov.zarr"
    assert main(["covariance", shifted, *BASE, *flag, "--output", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


FRIENDLY = ["--k", "2", "--epsilon", "1", "--delta", "1e-6", "--gap", "0.5", "--sigma", "1", "--n-samples", "100000",
            "--n-features", "3", "--plan", "--json"]


@pytest.mark.parametrize("command", [["norm"], ["pca", "--method", "privpca"]])
def test_the_centring_flags_reach_privnorm_and_privpca(command, capsys):
    assert main([*command, *FRIENDLY]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["centering"] == "private-mean" and default["mean_noise_scale"] > 0
    assert main([*command, *FRIENDLY, "--assume-centered"]) == 0
    moment = json.loads(capsys.readouterr().out)
    assert moment["centering"] == "assume-centered" and moment["mean_noise_scale"] is None
    assert main([*command, *FRIENDLY, "--mean=5,-3,2"]) == 0
    assert json.loads(capsys.readouterr().out)["centering"] == "public-mean"
    assert main([*command, *FRIENDLY, "--mean-fraction", "0.3", "--mean-clip", "40"]) == 0
    bigger = json.loads(capsys.readouterr().out)
    assert bigger["mean_noise_scale"] != default["mean_noise_scale"]
    assert main([*command, *FRIENDLY, "--mean=5,-3"]) == 2
    assert "mean has 2 entries" in capsys.readouterr().err

