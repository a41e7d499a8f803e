"""The NeurIPS 2025 section of benchmarks/results/README.md states what the committed
second_moment_curves.json holds.

Every number of that section is rebuilt here from the JSON's raw per-seed values (medians,
ratios, slopes by numpy's own least squares, the baseline's privacy condition from its closed
form) and looked up in the section's text, so a claim the data contradict, or a number nobody
measured, fails."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
METHODS = (("recdpsme", "RecDPSME"), ("one_shot", "one-shot"), ("baseline", "S&A (NOT PRIVATE)"))
EXPONENTS = {"recdpsme": "3/2", "one_shot": "3/2", "baseline": "2/3"}
MODELS = {"ellipsoid": "ellipsoid", "truncated_pareto": "truncated Pareto"}


@pytest.fixture(scope="module")
def res() -> dict:
    return json.loads((RESULTS / "second_moment_curves.json").read_text())


@pytest.fixture(scope="module")
def section() -> str:
    text = (RESULTS / "README.md").read_text()
    start = text.index("## NeurIPS 2025 curves")
    end = text.find("\n## ", start + 1)
    return " ".join(text[start:end if end > 0 else None].split())  # line breaks do not matter


def g3(x: float) -> str:
    return f"{x:.3g}"


def ratio_range(values) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.3g}-{hi:.3g}x"


def med(xs) -> float:
    return float(np.median(xs))


def test_the_run_is_the_full_one_and_says_how_it_was_made(res, section):
    assert res["smoke"] is False
    assert res["command"].startswith("dpdist experiment second-moment-curves")
    assert len(res["code_revision"]) >= 40 and not res["code_revision"].endswith(("-dirty", "+uncommitted"))
    assert res["code_revision"][:7] in section
    assert f"{res['seconds'] / 60:.0f} min wall" in section
    assert f"{res['cpu_seconds'] / 60:.0f} min of CPU" in section
    assert res["cpu_seconds"] <= 20 * 60  # sized to one core's 20 minutes


def test_d_scaling_table_and_slopes(res, section):
    ds = res["config"]["dscale_ds"]
    for model, name in MODELS.items():
        rows = [r for r in res["dscaling"] if r["model"] == model]
        assert len(rows) == len(ds)
        for key, label in METHODS:
            xs = np.concatenate([[math.log(r["d"])] * len(r[key]) for r in rows])
            ys = np.log(np.concatenate([r[key] for r in rows]))
            slope = float(np.polyfit(xs, ys, 1)[0])
            fit = res["dscaling_fits"][model][key]
            assert fit["slope"] == pytest.approx(slope, rel=1e-9)
            lo, hi = fit["ci95"]
            assert lo <= slope <= hi
            cells = " | ".join(g3(med(r[key])) for r in rows)
            line = f"| {name} | {label} | {cells} | {slope:.2f} [{lo:.2f}, {hi:.2f}] | {EXPONENTS[key]} |"
            assert line in section, line
        pred = [r["predicted_gamma"] for r in rows]
        slope = float(np.polyfit(np.log([r["d"] for r in rows]), np.log(pred), 1)[0])
        line = f"| {name} | predicted gamma | {' | '.join(g3(p) for p in pred)} | {slope:.2f} | 3/2 |"
        assert line in section, line


def test_condition_table_ratios_and_predicted_gamma(res, section):
    rows = res["ellipsoid"]
    for cond in sorted({r["condition"] for r in rows}):
        rr = [r for r in rows if r["condition"] == cond]
        levels = sorted({L for r in rr for L in r["n_levels"]})
        cells = " | ".join(
            f"{g3(med(r['recdpsme']))} / {g3(med(r['one_shot']))} / "
            f"{g3(med(r['baseline'])) if r['baseline'] else 'bottom'}" for r in rr)
        line = f"| {cond:.0e} | {levels[0]}-{levels[-1]} | {cells} |"
        assert line in section, line
        ratio = ratio_range([med(r["one_shot"]) / med(r["recdpsme"]) for r in rr])
        assert f"{ratio} at condition {cond:.0e}" in section, ratio
    model = ratio_range([r["predicted_gamma"] / med(r["recdpsme"]) for r in rows])
    released = ratio_range([med(r["predicted_gamma_released"]) / med(r["recdpsme"]) for r in rows])
    assert f"{model} above the measured median at the model's R and lambda_min" in section, model
    assert f"{released} at the released ones" in section, released


def test_baseline_group_count_and_private_condition(res, section):
    check = res["baseline_group_count_check"]
    (k1, k2), (e1, e2) = check["groups"], check["errors"]
    assert f"k = {k1} and {k2} groups give gamma = {e1:.4g} and {e2:.4g}" in section
    for row in res["baseline_privacy"]:
        # MS25's n-condition, in groups: k >= 800 max{...} (the 800 m of n over m)
        d, eps, delta = row["d"], row["epsilon"], row["delta"]
        eta_b = 0.5 / (48 * 2 * (math.sqrt(d) + math.sqrt(math.log(4 / 0.1))))
        l2 = math.log(2 / delta)
        k = 800 * max(math.sqrt(2 * d * (d + eta_b**-2) / eps), 8 * d * math.sqrt(l2) / eps, 8 * l2 / eps,
                      12 * math.sqrt(d * l2) / (eps * eta_b))
        assert row["min_groups"] == pytest.approx(k, rel=1e-9)
    small = [r for r in res["baseline_privacy"] if r["d"] == min(res["config"]["dscale_ds"])]
    for row in small:
        claim = (f"rho = {row['rho']:g}: k >= {row['min_groups']:.3g} groups (n >= {row['min_n_at_m_eq_d']:.3g}), "
                 f"{row['pairs']:.2g} pairs, {row['extrapolated_pairwise_seconds'] / 86400 / 365:.2g} years")
        assert claim in section, claim


def test_outlier_table(res, section):
    for r in res["outliers"]:
        eta = f"{100 * r['eta']:g}%"
        f = "-" if r["f"] is None else f"{r['f']:g}"
        regime = r["regime"].split(":")[0]
        low = r["recdpsme_lambda_min_vs_clean"]
        base = r["baseline_lambda_min_vs_clean"]
        line = (f"| {eta} | {f} | {regime} | {min(low):.3f} | {r['baseline_bottom']}/{r['seeds']} | "
                f"{f'{min(base):.3f}' if base else '-'} |")
        assert line in section, line


def test_claims_in_prose_hold(res, section):
    """The sentences that summarise the tables."""
    out = res["outliers"]
    inside = [r for r in out if r["f"] is not None and r["f"] <= 1]
    outside = [r for r in out if r["f"] is not None and r["f"] > 1]
    worst_in = min(min(r["recdpsme_lambda_min_vs_clean"]) for r in inside)
    worst_out = min(min(r["recdpsme_lambda_min_vs_clean"]) for r in outside)
    assert f"worst seed {worst_in:.3f} inside the regime and {worst_out:.3f} outside it" in section
    bottoms = [f"{100 * r['eta']:g}% (f = {r['f']:g})" for r in out if r["baseline_bottom"] == r["seeds"]]
    assert "returns bottom in every run only at " + ", ".join(bottoms) in section


def test_private_initialisation_and_one_shot_claims(res, section):
    rows = res["ellipsoid"]
    radii = {r for row in rows for r in row["radius_released"]}
    assert len(radii) == 1 and f"releases R = {radii.pop():.3g}" in section
    frac = [lam / row["lambda_min"] for row in rows for lam in row["lambda_min_released"]]
    assert max(frac) < 1  # a lower bound, as the normalisation needs
    assert f"{min(frac):.2f}-{max(frac):.2f} of the true lambda_min" in section
    for model, name in MODELS.items():
        dr = [r for r in res["dscaling"] if r["model"] == model]
        ratio = ratio_range([med(r["one_shot"]) / med(r["recdpsme"]) for r in dr])
        assert f"{ratio} ({name})" in section, ratio
    one = [med(r["one_shot_lambda_min_vs_clean"]) for r in res["outliers"]]
    assert f"between {min(one):.3g} and {max(one):.3g}" in section
    eta_b = next(r["baseline_masking_scale"] for r in res["dscaling"] if r["d"] == res["config"]["d"])
    assert eta_b == pytest.approx(0.5 / (96 * (math.sqrt(res["config"]["d"]) + math.sqrt(math.log(40)))))
    assert f"eta_b = {eta_b:.3g} at d = {res['config']['d']}" in section


def test_which_method_is_most_accurate_where_the_section_says(res, section):
    keys = ("recdpsme", "one_shot", "baseline")
    for model in MODELS:
        levels = sorted({L for r in res["dscaling"] if r["model"] == model for L in r["n_levels"]})
        assert f"(L = {levels[0]}-{levels[-1]}" in section
        for r in res["dscaling"]:
            if r["model"] == model and r["d"] >= 8:  # "the most accurate method at d >= 8"
                assert med(r["baseline"]) == min(med(r[k]) for k in keys), (model, r["d"])
    rows = res["ellipsoid"]
    top = max(r["n"] for r in rows)
    for r in rows:
        if r["n"] <= 1e5:  # "the most accurate at n <= 1e5"
            assert med(r["baseline"]) == min(med(r[k]) for k in keys), (r["condition"], r["n"])
        else:  # "at n = 1e6 its masking floor lies above RecDPSME's medians"
            assert r["n"] == top == 1e6 and med(r["baseline"]) > med(r["recdpsme"])
    floor = [med(r["baseline"]) for r in rows if r["n"] == top]
    assert f"its masking floor ({min(floor):.2g}-{max(floor):.2g})" in section
    # "each group of 400 rows holds 4-20 outliers" at 1% and 5%
    assert {r["baseline_m"] for r in res["outliers"]} == {400}
    assert 400 * 0.01 == 4 and 400 * 0.05 == 20 and "each group of 400 rows holds 4-20 outliers" in section


def test_slope_and_bound_sentences(res, section):
    fits = res["dscaling_fits"]
    lo, hi = fits["ellipsoid"]["recdpsme"]["ci95"]
    assert hi < 1.5  # "3/2 lies just above the first interval"
    lo, hi = fits["truncated_pareto"]["recdpsme"]["ci95"]
    assert lo <= 1.5 <= hi  # "and inside the second"
    assert "3/2 lies just above the first interval" in section
    levels = {r["d"]: set(r["n_levels"]) for r in res["dscaling"] if r["model"] == "ellipsoid"}
    assert levels[16] == {7} and levels[32] == {6}  # "the level count drops from 7 to 6 at d = 32"
    for model in MODELS:  # "Subsample-and-aggregate is flatter than its bound"
        assert fits[model]["baseline"]["ci95"][1] < 2 / 3
    rows = res["ellipsoid"]
    for cond in (1e2,):  # "At condition 1e2 RecDPSME is the less accurate ... gives it two levels"
        rc = [r for r in rows if r["condition"] == cond]
        assert all(med(r["recdpsme"]) > med(r["one_shot"]) for r in rc)
        assert {L for r in rc for L in r["n_levels"]} == {2}
    # "a conservative bound, by more than an order of magnitude in most rows"
    over = [r["predicted_gamma"] / med(r["recdpsme"]) > 10 for r in rows]
    assert sum(over) > len(over) / 2
    assert min(r["predicted_gamma"] / med(r["recdpsme"]) for r in rows) > 1


def test_setup_the_section_describes(res, section):
    cfg = res["config"]
    eps, delta = res["baseline_epsilon"], res["baseline_delta"]
    assert f"(eps, delta) = ({eps:.3g}, {delta:.2g})" in section
    # the recipe: the baseline's (2 eps, 4 e^eps delta) is RecDPSME's (eps*, delta*) at rho
    eps_star = res["rho"] + 2 * math.sqrt(res["rho"] * math.log(1 / res["delta_star"]))
    assert 2 * eps == pytest.approx(eps_star) and 4 * math.exp(eps) * delta == pytest.approx(res["delta_star"])
    assert res["delta_star"] == 1e-6 and f"(2 eps, 4 e^eps delta) = ({2 * eps:.3g}, 1e-6)" in section
    assert (cfg["dscale_n"], cfg["dscale_seeds"], cfg["dscale_condition"]) == (200_000, 3, 1e4)
    assert "at n = 2e5, 3 seeds" in section and "cond(A) = 1e4" in section
    assert (cfg["d"], cfg["seeds"]) == (8, 3) and "(ellipsoid, d = 8, m = 2d, 3 seeds)" in section
    assert (cfg["outlier_n"], cfg["outlier_seeds"]) == (400_000, 5) and "n = 4e5, m = 5, 5 seeds" in section
    assert cfg["dscale_ds"] == [4, 8, 16, 32, 64] and cfg["pareto_bound"] == 10
    for r in res["dscaling"] + res["ellipsoid"]:  # "groups of n / 100 rows, at least 10 d"
        assert r["baseline_m"] == max(10 * r["d"], r["n"] // 100)
    for r in res["dscaling"]:
        assert r["m"] == 2 * r["d"] if r["model"] == "ellipsoid" else r["m"] >= 2 * r["d"]
