"""``dpdist plan JOB``: the dry run of a job file (reads no data, spends nothing)."""

from __future__ import annotations

import sys

from dpdist.cli._common import HelpFormatter
from dpdist.cli.budget import _fmt, add_ledger_args


def register(sub) -> None:
    p = sub.add_parser(
        "plan",
        help="dry run of a job file: cost, budget left after it, predicted error; reads no data",
        description="Validate a job file and print what running it would do: the privacy events and "
        "cost, the cost in (epsilon, delta) at the dataset's delta, the dataset's budget remaining "
        "before and after the job, and the error the estimator's plan() predicts. Reads no data "
        "(the shape comes from the job file or the store's metadata) and changes no ledger. "
        "Exit codes: 0 the job would run, 2 invalid job, 3 the budget would refuse it, 5 ledger or "
        "storage unreachable.",
        formatter_class=HelpFormatter,
    )
    p.add_argument("job", help="job file (TOML)")
    add_ledger_args(p)
    p.set_defaults(func=run)


def _print(plan: dict, ledger_desc: str) -> None:
    label = f" ({plan['dataset_name']})" if plan.get("dataset_name") else ""
    print(f"job        : {plan['job']}  ({plan['estimator']}, n={plan['shape'][0]:,}, d={plan['shape'][1]})")
    print(f"dataset    : {plan['dataset']}{label}")
    print(f"ledger     : {ledger_desc}")
    for ev in plan["events"]:
        print(f"event      : {_fmt(ev)}")
    if "epsilon_at_delta" in plan:
        e = plan["epsilon_at_delta"]
        print(f"cost       : = ({e['epsilon']:.6g}, {e['delta']:.3g})-DP at the dataset's delta ({e['conversion']})")
    b = plan.get("budget") or {}
    if b.get("total") is None:
        print(f"budget     : {b.get('note', 'no ledger')}")
    else:
        print(f"budget     : {_fmt(b['total'])}")
        print(f"remaining  : {_fmt(b['remaining_before'])} now")
        if b["fits"]:
            print(f"after job  : {_fmt(b['remaining_after'])}")
        else:
            print(f"after job  : REFUSED: {b['reason']}")
        if b.get("open_reservations"):
            print(f"open       : {b['open_reservations']} reservation(s) of other jobs count against the budget")
    pe = plan.get("predicted_error")
    if pe:
        print(f"predicted  : {pe['metric']} <= {float(pe['value']):.6g}  (plan()['{pe['plan_key']}'])")
        if pe.get("vacuous"):
            print(f"dpdist plan: !! VACUOUS plan: {pe['vacuous_reason']}", file=sys.stderr)
    else:
        print("predicted  : (this estimator's plan() predicts no error)")


def run(args) -> int:
    from dpdist.ops.job import load_job
    from dpdist.ops.runner import describe_ledger, job_ledger, plan_job

    job = load_job(args.job)
    ledger, source = job_ledger(job, args.ledger)
    with ledger:
        plan = plan_job(job, ledger=ledger)
    fits = (plan.get("budget") or {}).get("fits", False)
    code = 0 if fits else 3
    if args.json:
        from dpdist.cli._common import print_json

        print_json({**plan, "exit_code": code, "ledger": describe_ledger(ledger), "ledger_source": source})
    else:
        _print(plan, f"{describe_ledger(ledger)} ({source})")
    return code

