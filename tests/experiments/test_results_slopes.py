"""The exponents quoted in benchmarks/results/README.md ("Fitted exponents against the plan()
bounds") are the committed results files' numbers: every number of that section's tables is
recomputed here from the files' rows (least squares on log-log with a 95% t-interval, written
out with scipy, not with the experiment's own fit), and every (file, method) of the files the
section covers has its row. A row marked pending must belong to a file whose fingerprints no
longer match the code (it is being regenerated); once the file is fresh the test asks for its
numbers."""

from __future__ import annotations

import json
import math
import pathlib
import re

import numpy as np
from scipy import stats

import dpdist.experiments.fingerprint as fp

ROOT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "results"
SECTION = "## Fitted exponents against the plan() bounds"
#: The sweeps the section covers.
FILES = ("sample_complexity_simulated.json", "sample_complexity_real.json",
         "sample_complexity_privcov_gumbel_simulated.json", "sample_complexity_privcov_power_simulated.json",
         "sample_complexity_k_simulated.json", "sample_complexity_epsilon_simulated.json")
#: Where the "large d" column starts.
LARGE_D = 2000


def _fit(x, y) -> tuple[float, float, float]:
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    assert lx.size >= 3
    xc = lx - lx.mean()
    slope = float(xc @ (ly - ly.mean()) / (xc @ xc))
    resid = ly - ly.mean() - slope * xc
    se = math.sqrt(float(resid @ resid) / (lx.size - 2) / float(xc @ xc))
    t = stats.t.ppf(0.975, lx.size - 2)
    return slope, slope - t * se, slope + t * se


def _r(v: float) -> str:
    return f"{v:.3f}".replace("-0.000", "0.000")


def _ci(f) -> str:
    return f"{_r(f[0])} [{_r(f[1])}, {_r(f[2])}]"


def _bracket(x, rows) -> str:
    """Half the range of slopes with each n* anywhere in its bracket (lower, n_star]."""
    if not all("lower" in r for r in rows):
        return "n/a"
    lx = np.log(np.asarray(x, float))
    w = (lx - lx.mean()) / float((lx - lx.mean()) @ (lx - lx.mean()))
    return f"{float(np.abs(w) @ np.log([r['n_star'] / r['lower'] for r in rows])) / 2:.3f}"


def _section() -> str:
    text = (ROOT / "README.md").read_text()
    assert SECTION in text, f"benchmarks/results/README.md has no section {SECTION!r}"
    body = text.split(SECTION, 1)[1]
    return body.split("\n## ", 1)[0]


def _rows(body: str, first_cell: str) -> list[list[str]]:
    out = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and cells[0].startswith(first_cell):
            out.append(cells)
    return out


def _expected(name: str, method: str) -> list[str]:
    """The cells the row of ``method`` in results file ``name`` must hold (after file, method)."""
    data = json.loads((ROOT / name).read_text())
    res = data["methods"][method]
    var = data.get("variable", "d")
    rows = [r for r in res["rows"] if r["reached"]]
    x = [r[var] for r in rows]
    n = [r["n_star"] for r in rows]
    paper = "n/a" if res.get("paper_exponent") is None else f"{res['paper_exponent']:g}"
    grid = ", ".join(f"{v:g}" for v in x)
    cells = [f"{var} = {grid}" + (f" (d = {res['d']})" if var != "d" else ""), paper, _ci(_fit(x, n))]
    th = [r.get("theory_n") for r in rows]
    if not all(th):
        return cells + ["not recorded", "not recorded", _bracket(x, rows), "n/a", "not recorded"]
    cells += [_r(_fit(x, th)[0]), _ci(_fit(x, np.divide(n, th))), _bracket(x, rows)]
    big = [i for i, r in enumerate(rows) if var == "d" and r["d"] >= LARGE_D]
    cells.append(_ci(_fit([x[i] for i in big], [n[i] / th[i] for i in big])) if len(big) >= 3 else "n/a")
    cells.append(f"{th[0] / n[0]:.3g} -> {th[-1] / n[-1]:.3g}")
    return cells


def _stale(name: str) -> bool:
    report = fp.check_result(json.loads((ROOT / name).read_text()))
    return any(r["status"] == "stale" for r in report.values())


def test_every_number_of_the_slopes_table_is_the_files():
    table = [c for c in _rows(_section(), "`sample_complexity_") if len(c) == 11]
    seen = set()
    for cells in table:
        name, method = cells[0].strip("`"), cells[1]
        seen.add((name, method))
        if "pending" in cells[2]:
            assert _stale(name), (f"{name} is fresh again: replace the pending row of {method} by\n| `{name}` | "
                                  f"{method} | " + " | ".join(_expected(name, method)) + " | (finding) |")
            continue
        assert cells[2:10] == _expected(name, method), (f"{name} {method}: the README row differs from the file:\n"
                                                        + " | ".join(_expected(name, method)))
        if cells[6] == "not recorded":
            continue
        low, high = map(float, re.findall(r"-?\d+\.\d+", cells[6])[1:3])
        bracket = float(cells[7])
        finding = cells[10]
        if low - bracket > 0 or high + bracket < 0:  # not zero: a finding or "open" is required
            assert finding and not finding.startswith("none"), f"{name} {method}: a non-zero difference needs a finding"
        else:
            assert finding.startswith("none"), f"{name} {method}: the difference can be 0: say none"
    want = set()
    for name in FILES:
        data = json.loads((ROOT / name).read_text())
        var = data.get("variable", "d")
        for method, res in data["methods"].items():
            if sum(r["reached"] for r in res["rows"]) >= 3 and var in res["rows"][0]:
                want.add((name, method))
    assert seen == want, f"rows missing: {sorted(want - seen)}; rows of no file: {sorted(seen - want)}"


def test_the_instances_sigma2_exponents_are_the_files():
    table = _rows(_section(), "`sample_complexity_")
    sig = [c for c in table if len(c) == 3]
    assert sig, "the table of the instances' sigma^2 is missing"
    for name, method, cell in sig:
        data = json.loads((ROOT / name.strip("`")).read_text())
        var = {"d": "n_features", "k": "k"}[data.get("variable", "d")]
        inst = data["methods"][method]["instances"]
        assert cell == _ci(_fit([p[var] for p in inst], [p["sigma2"] for p in inst])), (name, method)


def test_the_epsilon_free_term_the_section_names():
    """The section explains the default PrivCov's and SparseCovariancePCA's flat bounds in
    epsilon by a term epsilon does not shrink: their plan() at epsilon = 1e5 is more than half
    of the bound the file records at the largest epsilon, and (PrivCov) far above the measured
    n* of non-private thresholding; Wang-Xu's bound has no such term."""
    from dpdist.experiments.empirical import theory_n_star

    data = json.loads((ROOT / "sample_complexity_epsilon_simulated.json").read_text())
    floor = {}
    for method in ("privcov_gumbel", "privcov_power", "wang_xu"):
        res = data["methods"][method]
        last, inst = res["rows"][-1], res["instances"][-1]
        gap = inst.get("gap") if res["problem"] == "pca" else None
        floor[method] = theory_n_star(method, last["d"], k=last["k"], sigma=math.sqrt(inst["sigma2"]),
                                      target=res["target"], epsilon=1e5, delta=data["delta"], gap=gap)
        share = floor[method] / last["theory_n"]
        assert (share > 0.5) == (method != "wang_xu"), (method, share)
    assert data["methods"]["thresholded"]["rows"][-1]["n_star"] < floor["privcov_gumbel"] / 10


def test_slopes_reads_a_committed_file_as_the_table_does():
    from dpdist.experiments.sample_complexity import slopes

    for name in ("sample_complexity_simulated.json", "sample_complexity_k_simulated.json"):
        data = json.loads((ROOT / name).read_text())
        for method, entry in slopes(data).items():
            cells = _expected(name, method)
            assert _ci((entry["measured"]["exponent"], *entry["measured"]["ci95"])) == cells[2]
            if "plan" not in entry:  # a point whose bound reaches no n: the row says so
                assert cells[3] == "not recorded"
                continue
            assert _r(entry["plan"]["exponent"]) == cells[3]
            assert _ci((entry["difference"]["exponent"], *entry["difference"]["ci95"])) == cells[4]
            assert f"{entry['bracket']:.3f}" == cells[5]
