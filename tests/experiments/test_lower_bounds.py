"""The lower-bound experiment: its bound formulas, the PrivNorm simulation it uses, the short
form end to end, and the committed full run (benchmarks/results/lower_bounds.json)."""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

from dpdist.cli.main import main
from dpdist.exceptions import ValidationError
from dpdist.experiments.lower_bounds import (
    check,
    run_lower_bounds,
    theorem2_alpha,
    theorem4_success_bound,
    theorem5_risk_bound,
)

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "lower_bounds.json"


# ------------------------------------------------------------------------------ the bounds


@pytest.mark.parametrize("n,d,k,eps", [(1e3, 200, 20, 1.0), (1e6, 200, 20, 1.0), (1e9, 5000, 10, 0.5)])
def test_theorem2_alpha_solves_the_sample_complexity_equation(n, d, k, eps):
    a = theorem2_alpha(n, d, k, eps)
    assert k * k / a**2 + k * math.sqrt(d) / (a * eps * math.log(d / a)) == pytest.approx(n, rel=1e-9)
    assert theorem2_alpha(10 * n, d, k, eps) < a  # more samples, a smaller error floor


def test_theorem2_alpha_large_n_follows_the_non_private_term():
    # at n >> d k^0 the k^2/alpha^2 term dominates: alpha -> k / sqrt(n)
    a = theorem2_alpha(1e16, 50, 10, 1.0)
    assert a == pytest.approx(10 / 1e8, rel=1e-3)


def test_theorem4_bound_is_attained_by_randomized_response_at_one_row():
    """With n = 1 the row identifies the codeword; m-ary randomized response (the truth w.p.
    e^eps / (e^eps + m - 1)) is eps-DP and reaches exactly the bound."""
    for m, eps in [(2, math.log(2)), (400, 1.0), (30, 0.3)]:
        rr = math.exp(eps) / (math.exp(eps) + m - 1)
        assert theorem4_success_bound(1, m, eps, 0.0) == pytest.approx(rr, rel=1e-12)
    assert theorem4_success_bound(1, 2, math.log(2), 0.0) == pytest.approx(2 / 3)


def test_theorem4_bound_with_delta_and_in_n():
    m, eps, delta, n = 50, 1.0, 1e-3, 3
    dn = delta * (math.exp(n * eps) - 1) / (math.exp(eps) - 1)
    w = (m - 1) * math.exp(-n * eps)
    assert theorem4_success_bound(n, m, eps, delta) == pytest.approx((1 + w * dn) / (1 + w), rel=1e-12)
    vals = [theorem4_success_bound(n, 400, 1.0, 1e-6) for n in (1, 2, 4, 8, 16)]
    assert all(a < b for a, b in zip(vals, vals[1:])) and vals[-1] == pytest.approx(1.0, abs=1e-3)
    with pytest.raises(ValidationError):
        theorem4_success_bound(0, 10, 1.0, 0.0)


def test_theorem5_bound_values():
    assert theorem5_risk_bound(64 / 20, 64, 1.0, 0.0) == pytest.approx(0.9 / math.e / 8)
    assert theorem5_risk_bound(2, 64, 1.0, 1e-6) == pytest.approx((0.9 * math.exp(-40 / 64) - 40e-6 / 64) / 8)
    assert theorem5_risk_bound(10_000, 64, 1.0, 1e-6) == 0.0  # negative: vacuous, reported as 0


def test_check_flags_a_private_estimator_beyond_a_certified_bound():
    ok = {"method": "m", "private": True, "n": 8, "ratio": 0.5, "violates_bound": False}
    bad = dict(ok, violates_bound=True, n=32)
    nonpriv = dict(ok, private=False, violates_bound=True)
    res = check({"theorem4": {"rows": [ok, bad, nonpriv]}, "theorem5": {"rows": [dict(ok, ratio=3.0)]}})
    assert res["private_below_certified_bound"] == [{"part": "theorem4", "method": "m", "n": 32}]
    assert not res["no_private_estimator_below_certified_bounds"]
    assert res["largest_ratio_success_over_bound"] == {"theorem4:m": 0.5}
    assert res["smallest_ratio_measured_over_bound"] == {"theorem5:m": 3.0}


# --------------------------------------------------------------------- PrivNorm simulation


def test_simulated_privnorm_follows_its_plan():
    import dpdist
    from dpdist.simulate import model2_block_model, simulate_privnorm

    bm = model2_block_model(20, 3, gap=0.5, lambda1=2.0)
    kw = dict(gap=0.5, sigma=math.sqrt(2.0), assume_centered=True)
    low = dpdist.SpectralNorm(3, 1.0, 1e-6, **kw).plan(10**6, 20)
    high = dpdist.SpectralNorm(3, 1.0, 1e-6, **kw).plan(10**11, 20)
    assert low.release_probability < 0.01 and high.release_probability > 0.99
    runs = [simulate_privnorm(bm, 1e6, 1.0, 1e-6, np.random.default_rng(r)) for r in range(3)]
    assert not any(r.released for r in runs) and all(r.error == 1.0 for r in runs)
    runs = [simulate_privnorm(bm, 1e11, 1.0, 1e-6, np.random.default_rng(r)) for r in range(3)]
    assert all(r.released and r.info["method"] == "privnorm" for r in runs)
    for r in runs:
        assert r.error == pytest.approx(abs(r.info["lambda_hat"] - 2.0) / 2.0)
        assert abs(r.info["lambda_hat"] - 2.0) <= high.error_bound


# ------------------------------------------------------------------------------ short form


def test_lower_bounds_short_form(tmp_path):
    res = run_lower_bounds(smoke=True, parts=["theorem4", "theorem5"], out_dir=str(tmp_path), log=lambda s: None)
    data = json.loads((tmp_path / "lower_bounds_smoke.json").read_text())
    assert (tmp_path / "lower_bounds_smoke.png").stat().st_size > 0
    assert data["commands"][0].endswith("dpdist experiment lower-bounds --smoke --parts theorem4,theorem5")
    assert data["code_revision"] and set(data["config"]) == {"theorem4", "theorem5"}
    t4 = res["theorem4"]
    assert t4["codebook"]["min_distance"] >= t4["codebook"]["g"] / 2
    for row in t4["rows"]:
        assert 0 <= row["decoded"] <= row["reps"] and 0 < row["bound_success"] <= 1
    for row in res["theorem5"]["rows"]:
        assert 0 <= row["sin2_mean"] <= 1 and row["bound_sin2"] >= 0
    assert res["check"]["no_private_estimator_below_certified_bounds"]


def test_lower_bounds_command(tmp_path, capsys):
    rc = main(["experiment", "lower-bounds", "--smoke", "--parts", "theorem6", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "smallest measured / bound" in out and "wrote" in out
    rc = main(["experiment", "lower-bounds", "--smoke", "--parts", "bogus", "--out", str(tmp_path / "x")])
    assert rc == 2 and "unknown part" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # a refusal writes nothing
