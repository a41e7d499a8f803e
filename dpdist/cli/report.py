"""``dpdist report``: a PNG and a summary of a result, or of the ledger's spending over time."""

from __future__ import annotations

import os

from dpdist.cli._args import HelpFormatter
from dpdist.cli._printing import print_json


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        help="PNG report of a result (support heatmap, spectrum vs predicted error) or of the ledger",
        description="Write a PNG beside RESULT (RESULT without .zarr, plus .png) and print a summary: "
        "the released matrix's support as a heatmap and its spectrum against the error band the plan "
        "predicted. With --ledger and no RESULT: the budget spent over time per dataset.",
        formatter_class=HelpFormatter,
    )
    p.add_argument("result", nargs="?", help="a dpdist result (Zarr group path or URL)")
    p.add_argument("--ledger", default=None,
                   help="report this ledger (path or URL; 'default' for $DPDIST_LEDGER or the default path)")
    p.add_argument("--dataset", action="append", default=None,
                   help="with --ledger: only this dataset (repeatable; default every dataset)")
    p.add_argument("--out", "-o", default=None, help="PNG path (default: beside RESULT, or ./ledger-report.png)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def _png_beside(result: str) -> str:
    base = result.rstrip("/")
    if base.endswith(".zarr"):
        base = base[: -len(".zarr")]
    if "://" in base:
        return os.path.basename(base) + ".png"  # a remote result: the PNG goes to the working directory
    return base + ".png"


def run(args) -> int:
    from dpdist.exceptions import ValidationError

    if (args.result is None) == (args.ledger is None):
        raise ValidationError("give either RESULT or --ledger")
    if args.result is not None:
        return _report_result(args)
    return _report_ledger(args)


def _report_result(args) -> int:
    from dpdist.data.results import load_result
    from dpdist.report.plots import plot_result

    res = load_result(args.result)
    png = args.out or _png_beside(args.result)
    summary = plot_result(res.metadata, res.values, png)
    summary["png"] = png
    if args.json:
        print_json(summary)
        return 0
    from dpdist.report.text import format_release

    print(format_release(res.metadata))
    if "matrix" in summary:
        print(f"released  : {summary['matrix']} {summary['shape'][0]} x {summary['shape'][1]}, "
              f"{summary['nnz']:,} non-zeros ({100 * summary['density']:.2f}%)")
        print(f"spectrum  : top {', '.join(f'{x:.4g}' for x in summary['top_eigenvalues'])}; "
              f"smallest {summary['min_eigenvalue']:.4g}")
    pe = summary.get("predicted_error")
    if pe:
        print(f"predicted : {pe['metric']} <= {pe['value']:.4g}")
    print(f"picture   : {png}")
    return 0


def _report_ledger(args) -> int:
    from dpdist.ops.composition import spent
    from dpdist.ops.ledger import open_ledger, resolve_ledger_url
    from dpdist.report.budget import spending_series
    from dpdist.report.plots import plot_budget

    url, _ = resolve_ledger_url(None if args.ledger == "default" else args.ledger)
    png = args.out or "ledger-report.png"
    with open_ledger(url) as ledger:
        names = [ledger.lookup(d) for d in args.dataset] if args.dataset else [d["dataset"] for d in ledger.datasets()]
        series = [spending_series(ledger, name, spent) for name in names]
    plot_budget(series, png)
    if args.json:
        print_json({"png": png, "datasets": series})
        return 0
    for s in series:
        last = s["points"][-1][1] if s["points"] else 0.0
        n_refused = sum(st == "refused" for _, _, st in s["points"])
        n_committed = sum(st == "committed" for _, _, st in s["points"])
        print(f"{s['label']}: total {s['total']}; {100 * last:.1f}% spent by {n_committed} committed job(s); "
              f"{n_refused} refused")
    print(f"picture   : {png}")
    return 0
