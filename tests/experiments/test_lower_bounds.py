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
from dpdist.experiments.lower_bound_formulas import (
    theorem2_alpha,
    theorem4_success_bound,
    theorem5_risk_bound,
)
from dpdist.experiments.lower_bounds import check, run_lower_bounds

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
    rc = main(["experiment", "lower-bounds", "--smoke", "--parts", "theorem2,theorem6,expmech,privnorm", "--out",
               str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "smallest measured / bound" in out and "wrote" in out
    data = json.loads((tmp_path / "lower_bounds_smoke.json").read_text())
    assert [r["k"] for r in data["expmech"]["rows"]] == [2, 3, 4] and len(data["privnorm"]["rows"]) == 2
    assert data["theorem2"]["label"] == data["theorem6"]["label"] == data["privnorm"]["label"] == "SIMULATED"
    rc = main(["experiment", "lower-bounds", "--smoke", "--parts", "bogus", "--out", str(tmp_path / "x")])
    assert rc == 2 and "unknown part" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # a refusal writes nothing


# ------------------------------------------------------------------------ the committed run


def _committed():
    if not RESULTS.exists():
        pytest.skip("benchmarks/results/lower_bounds.json not present")
    return json.loads(RESULTS.read_text())


def test_committed_run_no_private_estimator_beyond_a_certified_bound():
    """Recomputed from the counts and the bound formulas, not from the run's own flags:
    Theorem 4's decoding rate (exact binomial interval) never exceeds what (eps, delta)-DP
    allows, and Theorem 5's mean sin^2 (t-interval) never falls below Proposition 4's bound."""
    from scipy import stats

    res = _committed()
    eps, delta = res["epsilon"], res["delta"]
    m = res["theorem4"]["codebook"]["size"]
    checked = 0
    for row in res["theorem4"]["rows"]:
        if row["method"] in ("empirical_pca", "thresholded_pca"):
            continue
        bound = theorem4_success_bound(row["n"], m, eps, delta)
        low = stats.binomtest(row["decoded"], row["reps"]).proportion_ci(0.95, method="exact").low
        assert low <= bound, row
        checked += 1
    d5 = res["theorem5"]["instance"]["n_features"]
    for row in res["theorem5"]["rows"]:
        if row["method"] in ("empirical_pca", "thresholded_pca"):
            continue
        bound = theorem5_risk_bound(row["n"], d5, eps, delta)
        assert row["sin2_mean_ci95"][1] >= bound, row
        checked += 1
    assert checked >= 30 and res["check"]["no_private_estimator_below_certified_bounds"]
    # Theorem 2's constant-1 prediction is not a floor (its constants are unspecified): no check here


def test_committed_run_is_what_the_readme_quotes():
    from dpdist.experiments.lower_bound_plots import readme_tables

    res = _committed()
    readme = (RESULTS.parent / "README.md").read_text()
    assert readme_tables(res) in readme
    assert res["commands"][0] in readme
    assert not res["smoke"] and res["code_revision"] != "unknown"
    minutes = round(sum(res["seconds"].values()) / 60)
    assert f"(`lower_bounds.*`, {minutes} min on one core)" in readme


def test_committed_run_supports_the_readme_prose():
    """The numbers the README's prose quotes (beside its generated tables)."""
    res = _committed()
    t4 = {(r["method"], r["n"]): r for r in res["theorem4"]["rows"]}
    m = res["theorem4"]["codebook"]["size"]
    assert theorem4_success_bound(8, m, 1.0, 1e-6) < 1 <= theorem4_success_bound(32, m, 1.0, 1e-6) + 1e-12
    assert theorem5_risk_bound(32, 64, 1.0, 1e-6) > 0 == theorem5_risk_bound(128, 64, 1.0, 1e-6)
    assert round(min(r["ratio"] for r in res["theorem5"]["rows"] if r["private"] and r["ratio"])) == 16
    assert t4[("empirical_pca", 8192)]["decoded"] == 39 and t4[("empirical_pca", 131072)]["decoded"] == 50
    assert all(t4[("thresholded_pca", n)]["decoded"] == 50 for n in (8192, 32768, 131072))
    assert max(r["decoded"] for r in res["theorem4"]["rows"] if r["private"]) == 1
    t5 = {(r["method"], r["n"]): r for r in res["theorem5"]["rows"]}
    assert t5[("empirical_pca", 32768)]["sin2_mean"] < 0.01
    assert all(r["sin2_mean"] > 0.97 for r in res["theorem5"]["rows"] if r["private"])
    t2 = [r for r in res["theorem2"]["rows"] if r["private"]]
    assert f"{min(r['ratio'] for r in t2):.2g}" == "0.62" and f"{max(r['ratio'] for r in t2):.2g}" == "1.3e+04"
    assert [(r["method"], r["n"]) for r in t2 if r["ratio"] < 1] == [("privcov_gumbel", 1e8)]
    thr = [r["ratio"] for r in res["theorem2"]["rows"] if not r["private"]]
    assert f"{min(thr):.3g}" == "1.06" and f"{max(thr):.2g}" == "3.7"
    fits = res["theorem6"]["fit_n_at_target_vs_d"].values()
    fit6 = res["theorem6"]["fit_n_at_target_vs_d"]
    assert {m: f"{f['exponent']:.2f}" for m, f in fit6.items()} == {"thresholded_pca": "1.98", "wang_xu_pca": "2.18",
                                                                    "privcov_power": "1.01"}
    assert fit6["thresholded_pca"]["ci95"][0] > 1 and fit6["wang_xu_pca"]["ci95"][0] > 1
    assert fit6["privcov_power"]["ci95"][0] < 1 < fit6["privcov_power"]["ci95"][1]
    ratios = [r["ratio"] for r in res["theorem6"]["n_at_target"]]
    assert f"{min(ratios):.0e}" == "1e+03" and f"{max(ratios):.0e}" == "4e+05"
    em = res["expmech"]
    assert em["fit"]["ci95"][0] <= 2.0 <= em["fit"]["ci95"][1]
    over = [r["theory_n"] / r["n_star"] for r in em["rows"]]
    assert round(min(over)) == 42 and round(max(over)) == 125
    pn = {r["n"]: r for r in res["privnorm"]["rows"]}
    assert pn[1e7]["pass_rate"] == 0 == pn[1e7]["plan_release_probability"]
    lo = min(n for n in pn if pn[n]["pass_rate"] == 1)
    assert f"{lo:.2g}" == "3.2e+07" and pn[lo]["plan_release_probability"] > 0.99
    f = res["privnorm"]["fit_error_vs_n"]
    assert f"{f['exponent']:.2f}" == "-0.48" and f["ci95"][0] <= -0.5 <= f["ci95"][1]
    below = [r["plan_relative_error_bound"] / r["rel_error_median"] for r in pn.values() if r["rel_error_median"]]
    assert f"{min(below):.1f}" == "3.2" and f"{max(below):.1f}" == "6.7"
    assert pn[10**10.5]["rel_error_median"] > 1 > pn[1e11]["rel_error_median"]
