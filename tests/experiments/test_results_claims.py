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


def _peer_sin2() -> dict:
    """(instance, epsilon, method) -> sin^2 at d = 5 from peer_comparison.json."""
    out = {}
    for row in _load("peer_comparison.json")["rows"]:
        if row["d"] == 5:
            for method, rec in row["methods"].items():
                if rec.get("sin2") is not None:
                    out[(row["instance"], row["epsilon"], method)] = rec["sin2"]
    return out


def test_peer_comparison_d5_claims_hold_in_the_file():
    sin2 = _peer_sin2()
    text = re.sub(r"\s+", " ", _section("## Peer comparison"))
    # "AnalyzeGauss, OpenDP and diffprivlib are accurate at every eps on both instances (sin^2 at most 0.0103)"
    accurate = [v for (inst, eps, m), v in sin2.items() if m in ("analyze_gauss", "opendp", "diffprivlib")]
    assert "(sin^2 at most 0.0103)" in text and round(max(accurate), 4) == 0.0103
    # Wang-Xu PCA: accurate only on the sparse instance at eps = 4
    wx = {(inst, eps): v for (inst, eps, m), v in sin2.items() if m == "wang_xu_pca"}
    assert {key for key, v in wx.items() if v <= 0.01} == {("sparse", 4.0)}
    assert [round(wx[("sparse", e)], 3) for e in (0.5, 1.0)] == [0.667, 0.667]
    assert [round(wx[("dense", e)], 3) for e in (0.5, 1.0, 4.0)] == [0.853, 0.276, 0.276]
    assert "0.853, 0.276 and 0.276 on the dense one" in text
    # ExpMech on the sparse instance
    em = [round(sin2[("sparse", e, "expmech")], 4) for e in (0.5, 1.0, 4.0)]
    assert em == [0.6281, 0.4926, 0.0017] and "(0.628 and 0.493; 0.0017 at eps = 4)" in text
    # AnalyzeGauss most accurate at eps = 0.5 and 1 on both; diffprivlib wins dense eps = 4
    for inst in ("sparse", "dense"):
        for eps in (0.5, 1.0):
            here = {m: v for (i, e, m), v in sin2.items() if i == inst and e == eps}
            assert min(here, key=here.get) == "analyze_gauss", (inst, eps)
    dense4 = {m: v for (i, e, m), v in sin2.items() if i == "dense" and e == 4.0}
    assert min(dense4, key=dense4.get) == "diffprivlib"
    assert (f"{dense4['diffprivlib']:.1e}", f"{dense4['analyze_gauss']:.1e}") == ("1.5e-04", "2.8e-04")
    assert "(1.5e-4 vs 2.8e-4)" in text


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


def _peer_rows() -> list[tuple]:
    """(instance, d, epsilon, method, status, sin2, seconds) for every fit in peer_comparison.json."""
    out = []
    for row in _load("peer_comparison.json")["rows"]:
        for method, rec in row["methods"].items():
            out.append((row["instance"], row["d"], row["epsilon"], method, rec["status"], rec.get("sin2"),
                        rec.get("seconds")))
    return out


def _span(values, fmt) -> str:
    return f"{fmt(min(values))}-{fmt(max(values))}"


def test_peer_comparison_timings_and_larger_d_claims_hold_in_the_file():
    rows = _peer_rows()
    text = re.sub(r"\s+", " ", _section("## Peer comparison"))
    ok = [r for r in rows if r[4] == "ok"]

    def secs(pred):
        return [r[6] for r in ok if pred(r)]

    one = lambda x: f"{x:.1f}"  # noqa: E731
    assert f"OpenDP takes {_span(secs(lambda r: r[1] == 5 and r[3] == 'opendp'), one)} s per fit" in text
    assert f"diffprivlib {_span(secs(lambda r: r[1] == 5 and r[3] == 'diffprivlib'), one)} s, dpdist " \
           f"{_span(secs(lambda r: r[1] == 5 and r[3] not in ('opendp', 'diffprivlib')), one)} s" in text
    eigh = [row["reference_numpy_eigh"]["seconds"] * 1e3 for row in _load("peer_comparison.json")["rows"]
            if row["d"] == 5]
    assert f"numpy eigh: {min(eigh):.1f}-{max(eigh):.0f} ms" in text
    # peers never finish beyond d = 5
    assert all(r[4] != "ok" for r in rows if r[1] >= 10 and r[3] in ("opendp", "diffprivlib"))
    ag = lambda pred: secs(lambda r: r[3] == "analyze_gauss" and pred(r))  # noqa: E731
    assert f"AnalyzeGauss takes {_span(ag(lambda r: 10 <= r[1] <= 50), one)} s at d = 10-50 and " \
           f"{_span(ag(lambda r: r[1] == 1000), lambda x: f'{x:.0f}')} s at d = 1000" in text
    sin2 = {(r[0], r[1], r[2], r[3]): r[5] for r in ok}
    assert (round(sin2["sparse", 50, 1.0, "analyze_gauss"], 2), round(sin2["sparse", 50, 4.0, "analyze_gauss"], 2)) \
        == (0.07, 0.01)
    assert round(sin2["sparse", 200, 4.0, "expmech"], 3) == 0.013
    # at d >= 200 nothing private is accurate (sin^2 <= 0.1) except ExpMech at d = 200, eps = 4
    accurate = {k for k, v in sin2.items() if k[1] >= 200 and v <= 0.1}
    assert accurate == {("sparse", 200, 4.0, "expmech")}
    ag_big = [v for k, v in sin2.items() if k[1] >= 200 and k[3] == "analyze_gauss"]
    wx_big = [v for k, v in sin2.items() if k[1] >= 200 and k[3] == "wang_xu_pca"]
    assert (f"{min(ag_big):.2f}", f"{max(ag_big):.1f}") == ("0.36", "1.0") and "AnalyzeGauss 0.36-1.0" in text
    assert (f"{min(wx_big):.2f}", f"{max(wx_big):.1f}") == ("0.99", "1.0") and "Wang-Xu 0.99-1.0" in text
    em = secs(lambda r: r[1] == 1000 and r[3] == "expmech")
    assert f"({min(em) / 60:.1f}-{max(em) / 60:.1f} min per fit here)" in text
    assert all(sin2["sparse", 1000, e, "expmech"] > 0.1 for e in (0.5, 1.0, 4.0))
    assert f"(sin^2 {sin2['sparse', 1000, 4.0, 'expmech']:.2f} at eps = 4)" in text


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
    assert set(real["expmech"].values()) == {86600.0} and "ExpMech 8.7e4 at d = 30, 60 and 120" in text
    assert " / ".join(_short(real["thresholded"][d]) for d in (60, 120)) in text
    sim = _n_star("sample_complexity_simulated.json", "thresholded")
    assert f"{_short(real['thresholded'][60])} real vs {_short(sim[60])} simulated" in text
    alg1 = _n_star("sample_complexity_simulated.json", "privcov")[60]
    pca = _n_star("sample_complexity_simulated.json", "privpca")[50]
    assert f"Algorithm 1 (n* {_short(alg1)} at d = 60) and PrivPCA ({_short(pca)} at d = 50)" in text
    default = _n_star("sample_complexity_privcov_gumbel_simulated.json", "privcov_gumbel")[60]
    power = _n_star("sample_complexity_privcov_power_simulated.json", "privcov_power")[50]
    assert f"({_short(default)} at d = 60) and `SparseCovariancePCA`'s ({_short(power)} at d = 50)" in text
