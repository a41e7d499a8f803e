"""``dpdist run JOB``: run a job file (reserve, fit, commit, publish) with scheduler exit codes."""

from __future__ import annotations

from dpdist.cli._args import HelpFormatter
from dpdist.cli._banners import banner, privacy_banners, privacy_warnings
from dpdist.cli._printing import print_json


def register(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run a job file: reserve budget, fit, commit the ledger entry, publish the result",
        description="Run a job file. Exit codes for schedulers: 0 released; 2 invalid job (nothing "
        "read or spent); 3 the ledger refused it (budget would be exceeded; nothing read); 4 no private "
        "result (the budget counts as spent); 5 infrastructure failure (scheduler, workers or storage; "
        "the reservation is released when no noise was drawn); 1 a bug; 130 Ctrl-C, 143 SIGTERM (the "
        "reservation is released before the running stage, else counted as spent). With --json one JSON "
        "object on standard output says the same (on failure: status, exit_code, error, job; after a "
        "reservation also entry, spent and noise_drawn). The ledger: "
        "--ledger, else $DPDIST_LEDGER (either pins it: a job file whose [ledger] url names another ledger "
        "is refused, exit 2), else the job file's [ledger] url, else the default. A job file may not seed "
        "its noise (random_state) or set unsafe_no_privacy, and a release that is not private is not "
        "published (exit 4, the budget counts as spent), unless the job sets [output] "
        "publish_not_private = true.",
        formatter_class=HelpFormatter,
    )
    p.add_argument("job", help="job file (TOML)")
    from dpdist.cli.budget import add_ledger_args

    add_ledger_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from dpdist.ops.job import load_job
    from dpdist.ops.runner import job_ledger, run_job

    job = load_job(args.job)
    ledger, _ = job_ledger(job, args.ledger)
    with ledger, privacy_warnings() as warned:
        result = run_job(job, ledger=ledger)
    banner(args, privacy_banners(warned=warned))  # e.g. a vacuous release: `!!` on stderr
    _print(result, args.json)
    return 0


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
            print(f"predicted : {pe['metric']} <= {float(pe['value']):.6g}")
        print(f"written   : {result['output']}  ({result['checksum']})")
