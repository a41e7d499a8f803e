"""Measured sample complexities as planning data (labelled *empirical*, with their source).

:data:`TABLE` holds n*(d) measured by ``dpdist experiment sample-complexity``, read from the
data file :data:`DATA_FILE` shipped with the package (written from the results files by
:func:`dpdist.experiments.empirical.write_table`): per method and mode, the instance family,
the target, the budget and the points (d, n*). :func:`measured_n_star` returns the measured
value for a method at a dimension, interpolated log-log between measured points and only
inside the measured range (None outside it: no extrapolation); the estimators' ``plan()``
quotes it in its ``empirical`` field.

The measured values hold for the instance family and target they were measured on; they are
not a guarantee for other data. Each entry carries the fingerprint its results file recorded
(:mod:`dpdist.algorithms.fingerprint`): when it differs from the one today's code gives, the
measurement no longer describes the code and :func:`measured_n_star` returns None
(:func:`table_status` says which fields differ). An entry whose file records no fingerprint is
reported as not checked.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from importlib import resources

from dpdist.exceptions import ValidationError

__all__ = ["DATA_FILE", "TABLE", "EmpiricalNStar", "interpolate_loglog", "load_table", "measured_n_star",
           "table_status"]

#: The data file of measured n*, beside this module (package data).
DATA_FILE = "measured_n_star.json"


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
    fingerprint: str = "not recorded: not checked against this code"

    def to_dict(self) -> dict:
        return asdict(self)


def load_table(text: str | None = None) -> dict:
    """The table ``{(method, mode): entry}`` of a data file's JSON ``text`` (default: the shipped
    :data:`DATA_FILE`); measured points as ``(d, n*)`` tuples."""
    if text is None:
        text = resources.files(__package__).joinpath(DATA_FILE).read_text()
    table = {}
    for item in json.loads(text)["entries"]:
        entry = {k: v for k, v in item.items() if k != "method"}
        entry["points"] = [tuple(p) for p in entry["points"]]
        entry["theory_points"] = [tuple(p) for p in entry["theory_points"]]
        table[(item["method"], entry["mode"])] = entry
    return table


#: The measured n* the package ships (:func:`load_table` of :data:`DATA_FILE`).
TABLE: dict = load_table()


def table_status(method: str, mode: str = "simulated") -> dict | None:
    """Whether the table's entry for ``method`` still describes today's code: ``{"status":
    "fresh" | "stale" | "unfingerprinted", "differences": [...]}`` (None when there is no entry)."""
    from dpdist.algorithms.fingerprint import current_fingerprint, diff

    entry = TABLE.get((method, mode))
    if entry is None:
        return None
    recorded = entry.get("fingerprint")
    if recorded is None:
        return {"status": "unfingerprinted", "differences": []}
    current = current_fingerprint(method)
    if current is None or current["digest"] == recorded.get("digest"):
        return {"status": "fresh", "differences": []}
    return {"status": "stale", "differences": diff(recorded, current) or ["digest differs"]}


def interpolate_loglog(points, d: float) -> tuple[float, bool] | None:
    """Value at d: exact at a point, log-log interpolated between two, None outside."""
    pts = sorted(points)
    if not pts or d < pts[0][0] or d > pts[-1][0]:
        return None
    for (d0, n0), (d1, n1) in zip(pts, pts[1:]):
        if d0 < d < d1:
            t = (math.log(d) - math.log(d0)) / (math.log(d1) - math.log(d0))
            return math.exp(math.log(n0) + t * (math.log(n1) - math.log(n0))), True
    return float(dict(pts)[d]) if d in dict(pts) else float(pts[-1][1]), False


def measured_n_star(method: str, n_features: float, *, mode: str = "simulated") -> EmpiricalNStar | None:
    """The measured n* of ``method`` at dimension ``n_features``: exact at a measured d,
    log-log interpolated between two measured d, None outside the measured range (or when
    the method was not measured in that mode). None, too, when the entry is stale: its results
    file's fingerprint differs from today's code (:func:`table_status` says where)."""
    entry = TABLE.get((method, mode))
    if entry is None:
        return None
    status = table_status(method, mode)
    if status["status"] == "stale":
        return None
    d = float(n_features)
    if not (math.isfinite(d) and d > 0):
        raise ValidationError(f"n_features must be a positive number, got {n_features!r}")
    found = interpolate_loglog(entry["points"], d)
    if found is None:
        return None
    value, interp = found
    keys = ("instance_family", "target", "epsilon", "delta", "beta", "mode", "source", "date")
    checked = {} if status["status"] == "unfingerprinted" else {"fingerprint": "matches this code"}
    return EmpiricalNStar(method, d, float(value), interp, **{k: entry[k] for k in keys}, **checked)
