"""Measured sample complexities as planning data: building the shipped table, and theory beside it.

The estimators' ``plan()`` quotes the n*(d) measured by ``dpdist experiment sample-complexity``
(:mod:`dpdist.algorithms.measured`, labelled *empirical*, with their source), read from a data
file shipped with the package. :func:`build_table` builds that table from the results files of
:data:`SOURCES` and :func:`write_table` writes it (run it after regenerating a source; a test
checks that the shipped file and the results files agree). :func:`theory_n_star` gives the
estimators' own theorem-based planning value (their ``plan()``/``min_samples()``) for the same
target, so the two can be shown side by side (:func:`planning_rows`, :func:`planning_table`).

The measured values hold for the instance family and target they were measured on; they are
not a guarantee for other data, and an entry whose recorded fingerprint differs from today's
code is not quoted (:func:`~dpdist.algorithms.measured.table_status`).
"""

from __future__ import annotations

import json
import os

from dpdist.algorithms import measured as _measured
from dpdist.algorithms.measured import TABLE, EmpiricalNStar, interpolate_loglog, measured_n_star, table_status
from dpdist.exceptions import ValidationError

__all__ = ["PLANNING_LABELS", "SOURCES", "TABLE", "EmpiricalNStar", "build_table", "measured_n_star", "planning_rows",
           "planning_table", "table_from_results", "table_status", "theory_n_star", "write_table"]


#: The results files :data:`TABLE` is built from.
SOURCES = ("benchmarks/results/sample_complexity_simulated.json", "benchmarks/results/sample_complexity_real.json",
           "benchmarks/results/sample_complexity_privcov_gumbel_simulated.json",
           "benchmarks/results/sample_complexity_privcov_power_simulated.json")

def build_table(paths=SOURCES) -> dict:
    """The shipped table (:data:`dpdist.algorithms.measured.TABLE`) as the results files
    ``paths`` give it (later files win on a shared key)."""
    out: dict = {}
    for path in paths:
        out.update(table_from_results(path))
    return out


def write_table(path=None, paths=SOURCES) -> str:
    """Write :func:`build_table` of ``paths`` as the measured-n* data file (default: the one
    shipped in the package, :data:`dpdist.algorithms.measured.DATA_FILE`; run from the
    repository root, where :data:`SOURCES` are). Returns the path written."""
    table = build_table(paths)
    if path is None:
        path = os.path.join(os.path.dirname(os.path.abspath(_measured.__file__)), _measured.DATA_FILE)
    doc = {"about": ("Measured n* of dpdist experiment sample-complexity, per method and mode, built from the "
                     "results files named in each entry's source by dpdist.experiments.empirical.write_table(); "
                     "regenerate it with that function after a source changes (a test checks that the two agree)."),
           "entries": [{"method": method, **entry} for (method, _mode), entry in sorted(table.items())]}
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def table_from_results(path: str) -> dict:
    """Table entries (the shape of :data:`~dpdist.algorithms.measured.TABLE`) from a
    ``sample_complexity_<mode>.json``."""
    with open(path) as fh:
        res = json.load(fh)
    out = {}
    for name, r in res["methods"].items():
        inst = r["instances"][0]
        family = inst.get("instance", "?")
        family += f" (k={r['k']}" + (f", gap={inst['gap']}" if "gap" in inst and family.startswith("model2") else "") + ")"
        target = ("||M - Sigma||_op <= %g sigma^2" if r["problem"] == "covariance" else "sin^2 <= %g") % r["target"]
        out[(name, res["mode"])] = {
            "instance_family": family, "target": target, "epsilon": res["epsilon"], "delta": res["delta"],
            "beta": res["beta"], "mode": res["mode"], "source": f"benchmarks/results/{os.path.basename(path)}",
            "date": res["date"], "points": [(row["d"], row["n_star"]) for row in r["rows"] if row["reached"]],
            "theory_points": [(row["d"], row["theory_n"]) for row in r["rows"] if row["reached"] and row.get("theory_n")],
            "fingerprint": res.get("fingerprints", {}).get(name),
        }
    return out


def theory_n_star(method: str, n_features: int, *, k: int, sigma: float, target: float, epsilon: float,
                  delta: float, gap: float | None = None) -> float | None:
    """The estimator's own planning value for the same target (theorem constants): the least n
    at which its ``plan()`` bound meets ``target`` (alpha for covariance, sin^2 for PCA).
    None when the estimator plans no such bound."""
    import dpdist
    from dpdist.experiments.methods import PRIVCOV_SELECTIONS
    from dpdist.algorithms._utility import search_min_samples

    d = int(n_features)
    s2 = sigma * sigma
    try:
        if method in PRIVCOV_SELECTIONS:
            selection = PRIVCOV_SELECTIONS[method]
            return float(dpdist.SparseCovariance(k, epsilon, delta, sigma=sigma, selection=selection,
                                                    assume_centered=True)
                         .min_samples(target * s2, d))
        if method in ("wang_xu", "thresholded"):
            est = (dpdist.baselines.GaussianPCA(epsilon, delta, sigma=sigma, assume_centered=True)
                   if method == "wang_xu"
                   else dpdist.baselines.ThresholdedPCA(sigma=sigma))
            return float(search_min_samples(lambda n: est.plan(n, d, k=k).operator_error_bound, target * s2,
                                            start=4, limit=1 << 62))
        if method in ("wang_xu_pca", "thresholded_pca"):
            est = (dpdist.baselines.GaussianPCA(epsilon, delta, sigma=sigma, assume_centered=True)
                   if method == "wang_xu_pca"
                   else dpdist.baselines.ThresholdedPCA(sigma=sigma))
            return float(search_min_samples(lambda n: est.plan(n, d, k=k, eigengap=gap * s2).sin2_bound, target,
                                            start=4, limit=1 << 62))
        if method == "privpca":
            return float(dpdist.SparsePCA(k, epsilon, delta, gap=gap, sigma=sigma, assume_centered=True)
                         .min_samples(target, d))
        if method == "expmech":
            return float(dpdist.ExpMechSparsePCA(k, epsilon, delta, sigma=sigma).min_samples(target, d,
                                                                                             eigengap=gap * s2))
        if method == "privcov_power":
            return float(dpdist.SparseCovariancePCA(k, epsilon, delta, sigma=sigma).min_samples(target, d,
                                                                                                eigengap=gap * s2))
    except ValidationError:
        return None
    return None


def planning_rows(dims=(1000, 10000, 100000), *, mode: str = "simulated") -> list[dict]:
    """Theory vs measured n* for every method in :data:`TABLE` at the given d (README rows):
    both interpolated log-log between the measured grid points, neither for a stale entry (the theory value is the
    estimator's own ``plan()``/``min_samples()`` bound for the same target, budget and instance
    parameters, recorded next to each measurement)."""
    rows = []
    for (method, m), entry in sorted(_measured.TABLE.items()):
        if m != mode:
            continue
        stale = table_status(method, mode)["status"] == "stale"
        for d in dims:
            meas = measured_n_star(method, d, mode=mode)
            th = None if stale else interpolate_loglog(entry.get("theory_points", []), float(d))
            theory = None if th is None else th[0]
            rows.append({"method": method, "d": d, "theory_n": theory,
                         "measured_n": None if meas is None else meas.n_star,
                         "ratio": None if (meas is None or theory is None) else theory / meas.n_star,
                         "instance_family": entry["instance_family"], "target": entry["target"],
                         "source": entry["source"], "date": entry["date"], "label": "empirical"})
    return rows


#: Row labels of :func:`planning_table`, in order (methods of :data:`TABLE`'s simulated entries).
PLANNING_LABELS = {
    "privcov": 'PrivCov, `selection="paper"` (Algorithm 1)',
    "privcov_gumbel": 'PrivCov, default (`selection="gumbel"`, row clip)',
    "wang_xu": "Wang-Xu (`GaussianCovariance`)",
    "thresholded": "thresholded, NOT PRIVATE",
    "privpca": "PrivPCA (`SparsePCA`)",
    "privcov_power": "`SparseCovariancePCA` (PrivCov default + power method)",
    "wang_xu_pca": "Wang-Xu PCA (`GaussianPCA`)",
    "thresholded_pca": "thresholded PCA, NOT PRIVATE",
}


def _short(x: float | None) -> str:
    """``4.3e10`` style (two significant digits), or ``-`` when there is no value."""
    if x is None:
        return "-"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def planning_table(dims=(1000, 10000, 100000)) -> str:
    """The markdown table of theorem / measured n* at ``dims`` (docs/planning.md prints it; a
    test checks that the two agree): :func:`planning_rows` of the simulated entries, ``-`` where
    the results files have no value (d outside the measured grid)."""
    rows = {(r["method"], r["d"]): r for r in planning_rows(dims)}
    head = "| method | " + " | ".join(f"d = {d:,}: theorem / measured" for d in dims) + " |"
    lines = [head, "|---|" + "---|" * len(dims)]
    for method, label in PLANNING_LABELS.items():
        if (method, dims[0]) not in rows:
            continue
        cells = [f"{_short(rows[method, d]['theory_n'])} / {_short(rows[method, d]['measured_n'])}" for d in dims]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
