"""The command line's side of the estimator contract (docs/estimators.md):
one name per concept (``--radius``, ``--method wang-xu``, no aliases), the plan objects
printed by ``--plan``, and the ``!!`` banner of a vacuous plan or release."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

from dpdist.cli import covariance, pca, second_moment
from dpdist.cli.main import build_parser, main
from dpdist.data.results import load_result

PRIVCOV = ["--k", "2", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1"]


@pytest.fixture
def ten_rows(tmp_path):
    """The issue's example: 10 rows (PrivCov then releases a diagonal of about +-1e4)."""
    path = tmp_path / "ten.zarr"
    arr = zarr.create_array(str(path), shape=(10, 6), chunks=(10, 6), dtype="f8")
    arr[...] = np.random.default_rng(0).standard_normal((10, 6))
    return str(path)


def _call(module, argv):
    args = build_parser().parse_args(argv)
    return module.estimator_call(args, getattr(module, "METHODS", None) or module.METHOD)


def test_one_name_for_the_gaussian_baseline_in_both_commands(capsys):
    from dpdist.baselines import GaussianCovariance, GaussianPCA

    for module, command, cls in ((covariance, "covariance", GaussianCovariance), (pca, "pca", GaussianPCA)):
        assert "wang-xu" in module.METHODS and "gaussian" not in module.METHODS and not hasattr(module, "ALIASES")
        call = _call(module, [command, "x.zarr", "--method", "wang-xu", "--epsilon", "1", "--delta", "1e-6"])
        assert call.cls is cls
        assert main([command, "x.zarr", "--method", "gaussian", "--epsilon", "1", "--delta", "1e-6"]) == 2
        err = capsys.readouterr().err
        assert "invalid choice: 'gaussian'" in err
        assert all(f"'{name}'" in err for name in (*module.METHODS, "auto")), err  # the valid methods, listed


def test_radius_is_the_one_flag_for_the_row_norm_bound(capsys):
    """``--radius`` sets SecondMoment's ``radius`` and AnalyzeGauss's ``row_norm`` (its fixed name)."""
    for argv, module, param in ((["pca", "x.zarr", "--method", "analyze-gauss", "--epsilon", "1", "--delta", "1e-6"],
                                 pca, "row_norm"),
                                (["second-moment", "x.zarr", "--rho", "1", "--m", "5"], second_moment, "radius")):
        call = _call(module, [*argv, "--radius", "3.5"])
        assert getattr(call.build(), param) == 3.5 and call.kwargs == {**call.kwargs, param: 3.5}
        assert main([*argv, "--row-norm", "3.5"]) == 2
        assert "unrecognized arguments: --row-norm" in capsys.readouterr().err


def test_plan_prints_the_plan_and_a_banner_when_it_is_vacuous(capsys):
    base = ["covariance", "--plan", "--n-features", "6", *PRIVCOV]
    assert main([*base, "--n-samples", "10", "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["vacuous"] is True and doc["error_bound"] > 1e3 and doc["error_scale"] == 1.0
    assert err.count("\n") == 1 and err.startswith("dpdist covariance: !! VACUOUS plan: predicted error")
    assert main([*base, "--n-samples", "1000000000"]) == 0
    out, err = capsys.readouterr()
    assert "vacuous : False" in out and "error_metric : ||M - Sigma||_op" in out and "!!" not in err


def test_a_vacuous_release_gets_a_banner_and_its_metadata_says_so(ten_rows, tmp_path, capsys):
    out = str(tmp_path / "cov.zarr")
    assert main(["covariance", ten_rows, *PRIVCOV, "--scheduler", "synchronous", "--output", out]) == 0
    err = capsys.readouterr().err
    banners = [line for line in err.splitlines() if "!! VACUOUS" in line]
    assert len(banners) == 1 and "PrivCov" in banners[0], err
    utility = load_result(out).metadata["parameters"]["utility"]
    assert utility["vacuous"] is True and utility["error_scale"] == 1.0
    # The noise is what makes it vacuous: the Gaussian release's scale is far above the scale 1
    # of the quantity (76 at these public sizes; the noise is unseeded, so the values are
    # checked only loosely: the 6 diagonal entries, N(0, 76^2) each, all stay within 10 of zero
    # with probability 0.105^6 < 2e-6).
    result = load_result(out)
    assert result.metadata["noise_scales"]["gaussian_release"] > 50 * utility["error_scale"]
    assert abs(result.covariance.diagonal()).max() > 10
