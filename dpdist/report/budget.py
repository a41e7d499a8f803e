"""The series a budget plot draws: per dataset, the share of its budget spent over time,
read from a privacy-budget ledger's history (:func:`dpdist.report.plots.plot_budget`).

The report layer does not import the ledger: it reads any object with the ledger's
``history(dataset)`` and ``datasets()``, and composes the charges with the rule it is given
(the ledger's own, :func:`dpdist.ops.composition.spent`), so the plotted shares are the
ones the ledger enforces.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from dpdist.privacy.zcdp import ZCDP, Guarantee

__all__ = ["spending_series"]


def spending_series(
    ledger: Any, dataset: str, compose: Callable[[Guarantee, Sequence[Guarantee]], Any]
) -> dict:
    """The share of ``dataset``'s budget spent over time, for :func:`dpdist.report.plots.plot_budget`.

    One point per committed or open charge (at its commit or reservation time) and per
    refusal (at the level the budget had then); the share is the composed epsilon (or rho)
    over the total in force at that time, under the ledger's rule ``compose(total, charges)``
    (:func:`dpdist.ops.composition.spent`). ``dataset`` is the dataset's identifier in the
    ledger (:meth:`dpdist.ops.ledger.Ledger.lookup` gives it for a path or a name).
    """
    entries = ledger.history(dataset)
    events = sorted(((e.finished or e.created) if e.state == "committed" else e.created, e.seq, e) for e in entries)
    total: Guarantee | None = None
    charges: list[Guarantee] = []
    points = []
    level = 0.0

    def share(result: Any) -> float:
        if isinstance(result.total, ZCDP):
            return float(result.rho or 0) / result.total.rho
        return float(result.epsilon or 0) / result.total.epsilon

    for when, _, e in events:
        if e.state == "budget-set":
            total = e.privacy
        elif total is None:
            continue
        elif e.state in ("committed", "reserved"):
            charges.append(e.charge)  # the cost, with the release's events when it has them
        elif e.state != "refused":
            continue
        if total is not None:
            level = share(compose(total, charges))
            points.append((when, level, e.state))
    name = next((d["name"] for d in ledger.datasets() if d["dataset"] == dataset), None)
    return {"dataset": dataset, "label": name or dataset, "points": points,
            "total": total.describe() if total is not None else "none"}
