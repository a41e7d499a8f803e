"""Measured sample complexities as planning data (labelled *empirical*, with their source).

:data:`TABLE` holds n*(d) measured by ``dpdist experiment sample-complexity`` (the JSON named
in each entry's ``source``, under ``benchmarks/results/``): per method, the instance family,
the target, the budget and the points (d, n*). :func:`measured_n_star` returns the measured
value for a method at a dimension, interpolated log-log between measured points and only
inside the measured range (None outside it: no extrapolation). :func:`theory_n_star` gives the
estimators' own theorem-based planning value (their ``plan()``/``min_samples()``) for the
same target, so the two can be shown side by side (:func:`planning_rows`).

The measured values hold for the instance family and target they were measured on; they are
not a guarantee for other data.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from dpdist.exceptions import ValidationError

__all__ = ["TABLE", "EmpiricalNStar", "measured_n_star", "planning_rows", "table_from_results", "theory_n_star"]


@dataclass(frozen=True)
class EmpiricalNStar:
    """A measured n* (least n with error <= target in >= 1 - beta of the repetitions)."""

    method: str
    n_features: float
    n_star: float
    interpolated: bool
    instance_family: str
    target: str
    epsilon: float
    delta: float
    beta: float
    mode: str
    source: str
    date: str
    label: str = "empirical"

    def to_dict(self) -> dict:
        return asdict(self)


#: Filled from benchmarks/results/sample_complexity_*.json by :func:`table_from_results`.
TABLE: dict = {}


def table_from_results(path: str) -> dict:
    """Table entries (the shape of :data:`TABLE`) from a ``sample_complexity_<mode>.json``."""
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
            "beta": res["beta"], "mode": res["mode"], "source": f"benchmarks/results/sample_complexity_{res['mode']}.json",
            "date": res["date"], "points": [(row["d"], row["n_star"]) for row in r["rows"] if row["reached"]],
        }
    return out


def measured_n_star(method: str, n_features: float, *, mode: str = "simulated") -> EmpiricalNStar | None:
    """The measured n* of ``method`` at dimension ``n_features``: exact at a measured d,
    log-log interpolated between two measured d, None outside the measured range (or when
    the method was not measured in that mode)."""
    entry = TABLE.get((method, mode))
    if entry is None:
        return None
    d = float(n_features)
    if not (math.isfinite(d) and d > 0):
        raise ValidationError(f"n_features must be a positive number, got {n_features!r}")
    pts = sorted(entry["points"])
    if not pts or d < pts[0][0] or d > pts[-1][0]:
        return None
    for (d0, n0), (d1, n1) in zip(pts, pts[1:] + [pts[-1]]):
        if d == d0:
            value, interp = n0, False
            break
        if d0 < d < d1:
            t = (math.log(d) - math.log(d0)) / (math.log(d1) - math.log(d0))
            value, interp = math.exp(math.log(n0) + t * (math.log(n1) - math.log(n0))), True
            break
    else:
        value, interp = pts[-1][1], False
    keys = ("instance_family", "target", "epsilon", "delta", "beta", "mode", "source", "date")
    return EmpiricalNStar(method, d, float(value), interp, **{k: entry[k] for k in keys})


def theory_n_star(method: str, n_features: int, *, k: int, sigma: float, target: float, epsilon: float,
                  delta: float, gap: float | None = None) -> float | None:
    """The estimator's own planning value for the same target (theorem constants): the least n
    at which its ``plan()`` bound meets ``target`` (alpha for covariance, sin^2 for PCA).
    None when the estimator plans no such bound."""
    import dpdist
    from dpdist.privacy.calibration import search_min_samples

    d = int(n_features)
    s2 = sigma * sigma
    try:
        if method == "privcov":
            return float(dpdist.SparseCovariance(k, epsilon, delta, sigma=sigma).min_samples(target * s2, d))
        if method in ("wang_xu", "thresholded"):
            est = (dpdist.baselines.GaussianPCA(epsilon, delta, sigma=sigma) if method == "wang_xu"
                   else dpdist.baselines.ThresholdedPCA(sigma=sigma))
            return float(search_min_samples(lambda n: est.plan(n, d, k=k)["operator_error_bound"], target * s2,
                                            start=4, limit=1 << 62))
        if method in ("wang_xu_pca", "thresholded_pca"):
            est = (dpdist.baselines.GaussianPCA(epsilon, delta, sigma=sigma) if method == "wang_xu_pca"
                   else dpdist.baselines.ThresholdedPCA(sigma=sigma))
            return float(search_min_samples(lambda n: est.plan(n, d, k=k, eigengap=gap * s2)["sin2_bound"], target,
                                            start=4, limit=1 << 62))
        if method == "privpca":
            return float(dpdist.SparsePCA(k, epsilon, delta, gap=gap, sigma=sigma).min_samples(target, d))
        if method == "expmech":
            return float(dpdist.ExpMechSparsePCA(k, epsilon, delta, sigma=sigma).min_samples(target, d,
                                                                                             eigengap=gap * s2))
    except ValidationError:
        return None
    return None


def planning_rows(dims=(1000, 10000, 100000), *, mode: str = "simulated") -> list[dict]:
    """Theory vs measured n* for every method in :data:`TABLE` at the given d (README rows).

    The theory value uses the same target, budget, k, sigma and gap as the measurement
    (covariance: Construction 1 has a drawn sigma^2, so the theory column uses the sigma^2
    recorded for that d when it was measured, else the nearest measured one)."""
    rows = []
    for (method, m), entry in sorted(TABLE.items()):
        if m != mode:
            continue
        for d in dims:
            meas = measured_n_star(method, d, mode=mode)
            params = entry.get("theory_parameters", {})
            theory = None
            if params:
                theory = theory_n_star(method, d, k=params["k"], sigma=params["sigma"], target=params["target"],
                                       epsilon=entry["epsilon"], delta=entry["delta"], gap=params.get("gap"))
            rows.append({"method": method, "d": d, "theory_n": theory,
                         "measured_n": None if meas is None else meas.n_star,
                         "ratio": None if (meas is None or theory is None) else theory / meas.n_star,
                         "instance_family": entry["instance_family"], "target": entry["target"],
                         "source": entry["source"], "date": entry["date"], "label": "empirical"})
    return rows
