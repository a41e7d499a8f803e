"""Claims in benchmarks/results/README.md checked against the results files they describe: a
number quoted in the prose comes from the file, and a claim the file contradicts fails here."""

from __future__ import annotations

import json
import math
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RESULTS = os.path.join(ROOT, "benchmarks", "results")


def _load(name: str) -> dict:
    with open(os.path.join(RESULTS, name)) as fh:
        return json.load(fh)


def _readme() -> str:
    with open(os.path.join(RESULTS, "README.md")) as fh:
        return fh.read()


def _section(title: str) -> str:
    text = _readme()
    start = text.index(title)
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _short(x: float) -> str:
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _n_star(name: str, method: str) -> dict:
    return {r["d"]: r["n_star"] for r in _load(name)["methods"][method]["rows"]}


def _table_rows(section: str) -> dict:
    """``label -> cells`` of the markdown table rows in ``section``."""
    out = {}
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            out[cells[0]] = cells[1:]
    return out


def test_default_privcov_section_matches_its_results_files():
    """The default PrivCov against Wang-Xu: every n*, ratio, the fitted exponent and the price
    of privacy quoted in the section are the results files' numbers."""
    section = _section("## The default PrivCov")
    rows = _table_rows(section)
    g = _n_star("sample_complexity_privcov_gumbel_simulated.json", "privcov_gumbel")
    wx = _n_star("sample_complexity_simulated.json", "wang_xu")
    dims = sorted(g)
    assert rows["d"] == [f"{d:,}" for d in dims]
    assert rows["PrivCov default n*"] == [_short(g[d]) for d in dims]
    assert rows["Wang-Xu n*"] == [_short(wx[d]) for d in dims]
    assert rows["ratio"] == [f"{g[d] / wx[d]:.3f}" for d in dims]
    assert all(g[d] <= 0.5 * wx[d] for d in dims if d >= 1000)  # the default needs at most half Wang-Xu's rows
    ref = {m: _n_star("sample_complexity_references_simulated.json", m) for m in ("thresholded", "privcov")}
    text = re.sub(r"\s+", " ", section)
    price = g[2000] / ref["thresholded"][2000]
    assert price <= 100
    assert f"price of privacy: {price:.0f}x" in text
    assert f"needs {_short(ref['privcov'][2000])} ({ref['privcov'][2000] / g[2000]:.0f}x the default)" in text
    fit = _load("sample_complexity_privcov_gumbel_simulated.json")["methods"]["privcov_gumbel"]["fit"]
    assert f"d^{fit['exponent']:.2f} [{fit['ci95'][0]:.2f}, {fit['ci95'][1]:.2f}]" in text


def test_planning_doc_table_is_built_from_the_results_files():
    """docs/planning.md's theorem / measured table is :func:`planning_table` of the results
    files (stale entries shown as ``-``)."""
    from dpdist.experiments.empirical import planning_table

    from dpdist.experiments.empirical import planning_rows

    with open(os.path.join(ROOT, "docs", "planning.md")) as fh:
        doc = fh.read()
    assert planning_table() in doc
    ratios = {(r["method"], r["d"]): r["ratio"] for r in planning_rows() if r["ratio"]}
    low, high = min(ratios, key=ratios.get), max(ratios, key=ratios.get)
    assert (low[0], high[0]) == ("wang_xu", "privpca")
    assert f"bounds are {ratios[low]:.0f}x (Wang-Xu) to {ratios[high]:.0f}x (PrivPCA)" in re.sub(r"\s+", " ", doc)


def _peer_cell(rec: dict | None) -> str:
    if rec is None:
        return ""
    if rec.get("status") == "ok" and rec.get("sin2") is not None:
        return f"{rec['sin2']:.2g} ({rec['seconds']:.1f} s)"
    return "timeout" if rec.get("status") == "timeout" else "not run"


def test_peer_comparison_section_is_the_file():
    """The section's table is peer_comparison.json cell by cell, and each sentence's numbers and
    claims hold in the file."""
    data = _load("peer_comparison.json")
    section = _section("## Peer comparison")
    methods = ["analyze_gauss", "wang_xu_pca", "expmech", "opendp", "diffprivlib"]
    table = _table_rows(section)
    assert table["instance"] == ["d", "eps", *methods]
    expected = [[r["instance"], str(r["d"]), f"{r['epsilon']:g}", *(_peer_cell(r["methods"].get(m)) for m in methods)]
                for r in data["rows"]]
    got = [line for line in section.splitlines() if line.startswith(("| sparse |", "| dense |"))]
    assert [[c.strip() for c in line.strip().strip("|").split("|")] for line in got] == expected
    text = re.sub(r"\s+", " ", section)
    assert f"limited to {data['timeout_seconds']:.0f} s" in text
    fits = [(r["instance"], r["d"], r["epsilon"], m, v) for r in data["rows"] for m, v in r["methods"].items()]
    ok = [f for f in fits if f[4]["status"] == "ok"]
    # d = 5: the three accurate everywhere; Wang-Xu PCA and ExpMech only where stated
    five = {(i, e, m): v["sin2"] for i, d, e, m, v in ok if d == 5}
    acc = [v for (i, e, m), v in five.items() if m in ("analyze_gauss", "opendp", "diffprivlib")]
    assert len(acc) == 18 and f"(sin^2 at most {max(acc):.2g})" in text
    assert {(i, e) for (i, e, m), v in five.items() if m == "wang_xu_pca" and v <= 0.01} == {("sparse", 4.0)}
    assert {e for (i, e, m), v in five.items() if m == "expmech" and v <= 0.01} == {4.0}
    # d = 10: how many peer fits finish, and their times
    for peer, label in (("opendp", "OpenDP finishes within the limit in"), ("diffprivlib", "diffprivlib in")):
        secs = [v["seconds"] for i, d, e, m, v in ok if d == 10 and m == peer]
        assert f"{label} {len(secs)} of 6" in text and f"({min(secs):.1f}-{max(secs):.1f} s)" in text
    assert not [f for f in ok if f[1] >= 50 and f[3] in ("opendp", "diffprivlib")]  # "from d = 50 on they time out"
    assert all(any(m == dm and v["status"] == "ok" for _, _, _, m, v in fits) for dm in methods[:3])
    # d >= 200: none reaches 0.1; the best is AnalyzeGauss at 0.24 (sparse, d = 200, eps = 4)
    big = {(i, d, e, m): v["sin2"] for i, d, e, m, v in ok if d >= 200}
    best = min(big, key=big.get)
    assert big[best] > 0.1 and best == ("sparse", 200, 4.0, "analyze_gauss")
    assert f"the best is AnalyzeGauss at {big[best]:.2g}, sparse, d = 200, eps = 4" in text


def test_algorithm1_crossover_section_matches_the_sweep():
    import numpy as np

    from dpdist.experiments.sample_complexity import closed_form_crossover, noise_crossover_d

    text = re.sub(r"\s+", " ", _section("## Algorithm 1 / Wang-Xu crossover"))
    p = _n_star("sample_complexity_simulated.json", "privcov")
    w = _n_star("sample_complexity_simulated.json", "wang_xu")
    dims = sorted(p)
    ratio = [p[d] / w[d] for d in dims]
    assert all(r > 1 for r in ratio)  # "Wang-Xu needs fewer samples on the whole measured grid"
    assert f"falls from {ratio[0]:.1f} at d = 60 to {ratio[-1]:.2f} at d = 1e5" in text
    slope, icpt = np.polyfit(np.log(dims), np.log(ratio), 1)
    assert f"slope of {slope:.2f}" in text and f"near d = {_short(math.exp(-icpt / slope))}" in text
    assert f"cross at d = {noise_crossover_d(20, 1.0, 1e-6):,.0f}" in text
    assert f"gives {closed_form_crossover(20, 1e-6):,.0f}" in text


def test_sparse_covariance_pca_section_matches_its_results_files():
    section = _section("## SparseCovariancePCA against the PCA methods")
    rows = _table_rows(section)
    pw = _n_star("sample_complexity_privcov_power_simulated.json", "privcov_power")
    wx = _n_star("sample_complexity_simulated.json", "wang_xu_pca")
    wx.update(_n_star("sample_complexity_references_simulated.json", "wang_xu_pca"))
    pp = _n_star("sample_complexity_simulated.json", "privpca")
    dims = sorted(pw)
    assert rows["d"] == [f"{d:,}" for d in dims]
    assert rows["SparseCovariancePCA n*"] == [_short(pw[d]) for d in dims]
    assert rows["Wang-Xu PCA n*"] == [_short(wx[d]) for d in dims]
    assert rows["PrivPCA n*"] == [_short(pp[d]) if d in pp else "" for d in dims]
    assert all(pw[d] <= wx[d] for d in (1000, 10000, 100000))  # at most Wang-Xu PCA's n*
    theory = {r["d"]: r["theory_n"] for r in _load("sample_complexity_privcov_power_simulated.json")["methods"][
        "privcov_power"]["rows"]}
    assert rows["SparseCovariancePCA plan bound / n*"] == [f"{theory[d] / pw[d]:.0f}x" for d in dims]
    text = re.sub(r"\s+", " ", section)
    assert f"falls from {pw[50] / wx[50]:.3f} at d = 50 to {pw[100000] / wx[100000]:.5f} at d = 1e5" in text


def test_real_pipeline_section_matches_its_results_files():
    text = re.sub(r"\s+", " ", _section("## Real pipeline sweep"))
    real = {m: _n_star("sample_complexity_real.json", m) for m in ("thresholded_pca", "wang_xu_pca", "expmech",
                                                                   "thresholded")}
    assert " / ".join(f"{real['thresholded_pca'][d]:,.0f}" for d in (60, 240, 960)) in text
    assert " / ".join(_short(real["wang_xu_pca"][d]) for d in (20, 40, 80)) in text
    assert " / ".join(_short(real["expmech"][d]) for d in (30, 60, 120)) in text
    # "no trend": the three n* within a factor 1.34 of each other (the search bisects a factor-10
    # bracket in log space down to a width of 10^(1/16) = 1.155 at rtol 0.3; two such steps are 1.334)
    ratio = max(real["expmech"].values()) / min(real["expmech"].values())
    assert ratio <= 1.34 and "the three lie within a factor 1.34, two steps of the search's final bracket" in text
    assert " / ".join(_short(real["thresholded"][d]) for d in (60, 120)) in text
    sim = _n_star("sample_complexity_simulated.json", "thresholded")
    assert f"{_short(real['thresholded'][60])} real vs {_short(sim[60])} simulated" in text
    alg1 = _n_star("sample_complexity_simulated.json", "privcov")[60]
    pca = _n_star("sample_complexity_simulated.json", "privpca")[50]
    assert f"Algorithm 1 (n* {_short(alg1)} at d = 60) and PrivPCA ({_short(pca)} at d = 50)" in text
    default = _n_star("sample_complexity_privcov_gumbel_simulated.json", "privcov_gumbel")[60]
    power = _n_star("sample_complexity_privcov_power_simulated.json", "privcov_power")[50]
    assert f"({_short(default)} at d = 60) and `SparseCovariancePCA`'s ({_short(power)} at d = 50)" in text
