"""``dpdist run JOB``: run a job file (reserve, fit, commit, publish) with scheduler exit codes."""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from dpdist.cli._common import print_json

#: What each exit code means, as ``status`` in the JSON output.
STATUS = {0: "released", 2: "invalid", 3: "refused", 4: "no-private-result", 5: "infrastructure-failure"}


def register(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run a job file: reserve budget, fit, commit the ledger entry, publish the result",
        description="Run a job file. Exit codes for schedulers: 0 released; 2 invalid job (nothing "
        "read or spent); 3 the ledger refused it (budget would be exceeded; nothing read); 4 no private "
        "result (the budget counts as spent); 5 infrastructure failure (scheduler, workers or storage; "
        "the reservation is released when no noise was drawn); 1 a bug. With --json one JSON object "
        "on standard output says the same.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("job", help="job file (TOML)")
    from dpdist.cli.budget import add_ledger_args

    add_ledger_args(p)
    p.set_defaults(func=run)


def json_errors(args, command: str, body: Callable[[], int]) -> int:
    """Run ``body``; with --json a dpdist error becomes one JSON object on standard output (and
    its message on standard error) and its exit code, so an orchestrator reads one place.
    Without --json the error goes to main's handler."""
    from dpdist.exceptions import DpdistError

    try:
        return body()
    except DpdistError as exc:
        if not getattr(args, "json", False):
            raise
        print_json({"status": STATUS.get(exc.exit_code, "error"), "exit_code": exc.exit_code,
                    "error": str(exc), "error_type": type(exc).__name__, "job": getattr(args, "job", None)})
        print(f"dpdist {command}: error: {exc}", file=sys.stderr)
        return exc.exit_code


def run(args) -> int:
    from dpdist.ops.job import load_job
    from dpdist.ops.runner import job_ledger, run_job

    def body() -> int:
        job = load_job(args.job)
        ledger, _ = job_ledger(job, args.ledger)
        with ledger:
            result = run_job(job, ledger=ledger)
        _print(result, args.json)
        return 0

    return json_errors(args, "run", body)


def _print(result: dict, as_json: bool) -> None:
    if as_json:
        print_json(result)
    else:
        from dpdist.cli.budget import _fmt

        print(f"released  : {result['mechanism']}")
        print(f"dataset   : {result['dataset']}")
        print(f"spent     : {_fmt(result['cost'])} (ledger entry {result['reservation']})")
        print(f"remaining : {_fmt(result['remaining'])}")
        if result.get("predicted_error"):
            pe = result["predicted_error"]
            print(f"predicted : {pe['metric']} <= {pe['value']:.6g}")
        print(f"written   : {result['output']}  ({result['checksum']})")
