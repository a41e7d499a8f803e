"""``dpdist budget``: a dataset's privacy budget in the ledger: show, set, history, recover."""

from __future__ import annotations

import argparse
import os

from dpdist.cli._printing import print_json

LEDGER_HELP = ("the ledger: a path, sqlite:///PATH or postgresql://USER@HOST/DB (password in PGPASSWORD). "
               "Default: $DPDIST_LEDGER, else $XDG_DATA_HOME/dpdist/ledger.sqlite "
               "(~/.local/share/dpdist/ledger.sqlite)")


def add_ledger_args(p: argparse.ArgumentParser) -> None:
    """--ledger and --json (shared with plan, run and report)."""
    p.add_argument("--ledger", default=None, help=LEDGER_HELP)
    p.add_argument("--json", action="store_true", help="print JSON (for orchestrators)")


def register(sub) -> None:
    p = sub.add_parser(
        "budget",
        help="show, set or audit a dataset's privacy budget in the ledger",
        description="The privacy-budget ledger: every job reserves its cost on a dataset before "
        "reading it and commits it with its output. A job killed between the two leaves an open "
        "reservation, which 'show' reports and 'recover' resolves (refunded if the job read no data, "
        "else counted as spent).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="total, spent, remaining and open reservations")
    show.add_argument("dataset", nargs="?", help="dataset URL/path or declared name (default: every dataset)")
    st = actions.add_parser(
        "set", help="set a dataset's total budget (its owner)",
        description="Set a dataset's total budget. DATASET is the path of an existing dataset, a URL "
        "(remote stores are not checked here), or a dataset or name this ledger already holds. A total "
        "below what the dataset has already spent is refused unless --force. --name and --owner, when "
        "not given, keep the dataset's current ones.")
    st.add_argument("dataset", help="dataset path or URL (its identifier), or a name the ledger holds")
    st.add_argument("--epsilon", type=float, help="total epsilon (with --delta)")
    st.add_argument("--delta", type=float, help="total delta in (0, 1) (with --epsilon)")
    st.add_argument("--rho", type=float, help="total zCDP rho (instead of --epsilon/--delta)")
    st.add_argument("--name", default=None, help="a label for the dataset")
    st.add_argument("--owner", default=None, help="who set the budget (recorded)")
    st.add_argument("--force", action="store_true",
                    help="set a total below what the dataset has already spent (every later job is refused)")
    hist = actions.add_parser("history", help="every reservation, commit, release, refusal and budget change")
    hist.add_argument("dataset", help="dataset URL/path or declared name")
    rec = actions.add_parser(
        "recover", help="resolve reservations left open by killed jobs",
        description="Resolve stale reservations: a reservation whose process on this host is gone (or, "
        "with --older-than, any reservation older than that, for jobs of other hosts). One that never "
        "reached the running stage read no data and is released; one that was running may have drawn "
        "noise and is committed as spent.")
    rec.add_argument("dataset", nargs="?", help="dataset URL/path or name (default: every dataset)")
    rec.add_argument("--older-than", type=float, default=None, metavar="SECONDS",
                     help="also resolve reservations of other hosts older than this")
    for q in (show, st, hist, rec):
        add_ledger_args(q)
    p.set_defaults(func=run)


def _fmt(cost: dict | None) -> str:
    if not cost:
        return "-"
    if cost.get("type") == "zcdp":
        return f"rho={float(cost['rho']):.6g}"
    return f"eps={float(cost['epsilon']):.6g} delta={float(cost['delta']):.3g}"


def _status(ledger, dataset: str) -> dict:
    from dpdist.exceptions import BudgetExceeded

    info = next((d for d in ledger.datasets() if d["dataset"] == dataset), None)
    out: dict = {"dataset": dataset, "name": info["name"] if info else None, "owner": info["owner"] if info else None}
    try:
        out.update(ledger.remaining(dataset).to_dict())
    except BudgetExceeded:
        out["total"] = None
    entries = ledger.history(dataset)
    out["committed"] = sum(e.state == "committed" for e in entries)
    out["refused"] = sum(e.state == "refused" for e in entries)
    out["open_reservations"] = [
        {**{k: e.to_dict()[k] for k in ("id", "job", "stage", "host", "pid", "created", "output")},
         "cost": e.cost, "process": e.process_state()}
        for e in entries if e.state == "reserved"
    ]
    return out


def _print_status(s: dict) -> None:
    label = f" ({s['name']})" if s.get("name") else ""
    print(f"dataset   : {s['dataset']}{label}")
    if s.get("total") is None:
        print("budget    : none set (jobs on this dataset are refused; set one with 'dpdist budget set')")
        return
    print(f"budget    : {_fmt(s['total'])}" + (f"  (owner {s['owner']})" if s.get("owner") else ""))
    spent = s["spent"]
    extra = ""
    if spent.get("zcdp_rho"):
        extra = f" (incl. zCDP rho={float(spent['zcdp_rho']):.6g} converted at delta={float(spent['zcdp_converted_at_delta']):.3g})"
    if spent.get("events_accounted_by"):
        at = spent.get("events_accounted_at_delta")
        extra = (f" (the releases' events composed by the {spent['events_accounted_by']} rule"
                 + (f" at delta={float(at):.3g}" if at is not None else "") + ")")
    print(f"spent     : {_fmt(spent)}{extra}; {s['committed']} committed, {len(s['open_reservations'])} open, "
          f"{s['refused']} refused")
    print(f"remaining : {_fmt(s['remaining'])}")
    for r in s["open_reservations"]:
        state = {"alive": "job running", "gone": "STALE: its process is gone",
                 "unknown": f"on host {r['host']}: cannot check its process"}[r["process"]]
        print(f"open      : reservation {r['id']} job {r['job']} ({_fmt(r['cost'])}), stage {r['stage']}, pid "
              f"{r['pid']}, since {r['created']}: {state}")
    if any(r["process"] != "alive" for r in s["open_reservations"]):
        print(f"recover   : dpdist budget recover {s['dataset']}  (add --older-than SECONDS for other hosts)")


def _total(args):
    """The total ``budget set`` was given (checked before the ledger is opened)."""
    from dpdist.exceptions import ValidationError
    from dpdist.privacy.budget import ApproxDP
    from dpdist.privacy.zcdp import ZCDP

    if args.rho is not None:
        if args.epsilon is not None or args.delta is not None:
            raise ValidationError("give either --rho or --epsilon and --delta, not both")
        return ZCDP(args.rho)
    if args.epsilon is not None and args.delta is not None:
        return ApproxDP(args.epsilon, args.delta)
    raise ValidationError("budget set needs --epsilon and --delta, or --rho")


def _is_url(text: str) -> bool:
    return "://" in text and not text.startswith("file://")


def _not_a_dataset(given: str, ledger_url: str):
    from dpdist.exceptions import ValidationError
    from dpdist.ops.ledger import canonical_dataset, redact_url

    return ValidationError(
        f"{given!r} is not an existing path, a URL, or a dataset or name in the ledger "
        f"{redact_url(ledger_url)!r} (no such path: {canonical_dataset(given)!r}); give the dataset's path "
        "or URL, e.g. /data/claims.zarr or s3://bucket/claims.zarr; nothing was changed")


def _names_new_data(given: str) -> bool:
    """Whether ``budget set`` may create a dataset (and the ledger) for ``given``: an existing
    local path, or a URL (a remote store is not opened here: that would need its credentials)."""
    from dpdist.ops.ledger import canonical_dataset

    return _is_url(given) or os.path.exists(canonical_dataset(given))


def _dataset_to_set(ledger, given: str) -> str:
    """The dataset ``budget set`` sets: a dataset or a name the ledger holds, an existing local
    path, or a URL. Anything else is refused, so a mistyped name never becomes a new dataset."""
    dataset = ledger.lookup(given)
    if ledger.knows(dataset) or _names_new_data(given):
        return dataset
    raise _not_a_dataset(given, ledger.url)


def _known(ledger, given: str) -> str:
    """The dataset ``given`` names, which the ledger must hold (show, history)."""
    from dpdist.exceptions import ValidationError
    from dpdist.ops.ledger import redact_url

    dataset = ledger.lookup(given)
    if not ledger.knows(dataset):
        also = f" ({dataset})" if dataset != given else ""
        raise ValidationError(f"dataset {given!r}{also} is not in the ledger {redact_url(ledger.url)!r}: no budget "
                              "was set for it and no job charged it ('dpdist budget show' lists the datasets it "
                              "holds)")
    return dataset


def run(args) -> int:
    from dpdist.exceptions import ValidationError
    from dpdist.ops.ledger import open_ledger, resolve_ledger_url

    url, _ = resolve_ledger_url(args.ledger)
    total = _total(args) if args.action == "set" else None
    # only 'set' of an existing path or a URL may create the ledger; every other use reads an existing one
    create = args.action == "set" and _names_new_data(args.dataset)
    try:
        ledger = open_ledger(url, create=create)
    except ValidationError as exc:
        if args.action == "set" and not create and str(exc).startswith("there is no ledger"):
            raise _not_a_dataset(args.dataset, url) from None  # a name, and no ledger to hold it
        raise
    with ledger:
        dataset = None
        if getattr(args, "dataset", None):
            if args.action == "set":
                dataset = _dataset_to_set(ledger, args.dataset)
            elif args.action in ("show", "history"):
                dataset = _known(ledger, args.dataset)
            else:
                dataset = ledger.lookup(args.dataset)
        if args.action == "set":
            ledger.set_budget(dataset, total, name=args.name, owner=args.owner, force=args.force)
            args.action = "show"
        if args.action == "show":
            names = [dataset] if dataset else [d["dataset"] for d in ledger.datasets()]
            status = [_status(ledger, name) for name in names]
            if args.json:
                print_json(status[0] if dataset else status)
            else:
                if not status:
                    print("no datasets in this ledger")
                for i, s in enumerate(status):
                    if i:
                        print()
                    _print_status(s)
            return 0
        if args.action == "history":
            entries = sorted(ledger.history(dataset), key=lambda e: (e.finished or e.created, e.seq))  # time order
            if args.json:
                print_json([e.to_dict() for e in entries])
                return 0
            print(f"{'seq':>4}  {'time (UTC)':<19}  {'state':<10} {'cost':<28} {'job':<24} {'outcome':<24} output")
            for e in entries:
                cost = ("total " if e.state == "budget-set" else "") + _fmt(e.cost)
                when = (e.finished or e.created)[:19].replace("T", " ")
                detail = e.output or ""
                if e.state in ("refused", "refunded") or (e.outcome or "").startswith(("failed", "recovered", "no-")):
                    detail = (e.note or "")[:120]
                print(f"{e.seq:>4}  {when:<19}  {e.state:<10} {cost:<28} {(e.job or '-')[:24]:<24} "
                      f"{(e.outcome or '-')[:24]:<24} {detail}")
            return 0
        done = ledger.recover(dataset, older_than=args.older_than)
        if args.json:
            print_json([e.to_dict() for e in done])
        else:
            if not done:
                print("no stale reservations")
            for e in done:
                print(f"{e.id}: {e.state} ({e.outcome or e.note}) {_fmt(e.cost)}")
        return 0
