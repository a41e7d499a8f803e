"""``dpdist plan JOB``: the dry run of a job file; ``dpdist plan --compare``: which method to use
for a question's public parameters. Neither reads data nor spends anything."""

from __future__ import annotations

import math
import sys

from dpdist.cli._args import HelpFormatter
from dpdist.cli.budget import _fmt, add_ledger_args


def register(sub) -> None:
    p = sub.add_parser(
        "plan",
        help="dry run of a job file: cost, budget left after it, predicted error; or --compare the "
             "methods for a question; reads no data",
        description="Validate a job file and print what running it would do: the privacy events and "
        "cost, the cost in (epsilon, delta) at the dataset's delta, the dataset's budget remaining "
        "before and after the job, and the error the estimator's plan() predicts. Reads no data "
        "(the shape comes from the job file or the store's metadata) and changes no ledger. "
        "Exit codes: 0 the job would run, 2 invalid job, 3 the budget would refuse it, 5 ledger or "
        "storage unreachable. With --compare (and no JOB): every method of --task with the error its "
        "plan() predicts at --n-samples x --n-features, the n* measured where known, and the best "
        "private method marked (the one `--method auto` runs); from public parameters only.",
        formatter_class=HelpFormatter,
    )
    p.add_argument("job", nargs="?", help="job file (TOML); not with --compare")
    add_ledger_args(p)
    c = p.add_argument_group("--compare: which method should I use?")
    c.add_argument("--compare", action="store_true",
                   help="compare every method of --task for the public parameters below and mark the best")
    c.add_argument("--task", choices=("covariance", "pca"), default=None,
                   help="what to estimate: the sparse covariance, or the leading sparse component (default: covariance)")
    c.add_argument("--n-samples", type=int, help="n, the number of rows")
    c.add_argument("--n-features", type=int, help="d, the number of features")
    c.add_argument("--k", type=int, help="sparsity k")
    c.add_argument("--epsilon", type=float, help="privacy epsilon (> 0)")
    c.add_argument("--delta", type=float, help="privacy delta in (0, 1)")
    c.add_argument("--sigma", type=float, help="public sub-Gaussian scale of the rows")
    c.add_argument("--gap", type=float, help="relative eigengap (lambda1 - lambda2) / lambda1 (pca)")
    c.add_argument("--radius", type=float, help="public bound on the rows' L2 norms (pca: analyze-gauss)")
    c.add_argument("--target", type=float,
                   help="error target relative to the scale (||M - Sigma||_op <= TARGET sigma^2, or sin^2 <= TARGET): "
                        "also print the least n each theorem needs for it")
    p.set_defaults(func=run)


#: The --compare flags (refused with a JOB).
COMPARE_DESTS = ("task", "n_samples", "n_features", "k", "epsilon", "delta", "sigma", "gap", "radius", "target")


def _num(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "no bound"
    return f"{value:.3g}"


def comparison_lines(comp, *, width: int = 11) -> list[str]:
    """The text of a :class:`~dpdist.algorithms.compare.Comparison`, one table row per method."""
    q = comp.question
    head = (f"{q.task}, n={q.n_samples:,}, d={q.n_features:,}, k={q.k}, epsilon={q.epsilon:g}, delta={q.delta:g}, "
            f"sigma={q.sigma:g}")
    head += "".join(f", {name}={getattr(q, name):g}" for name in ("gap", "radius") if getattr(q, name) is not None)
    lines = [f"{'question':<{width}}: {head}",
             f"{'error':<{width}}: {comp.metric}, as each method's plan() bounds it at this n (theorem constants); "
             + ("vacuous at >= 1" if q.task != "covariance" else f"vacuous at >= sigma**2 = {q.scale:.3g}")]
    target = q.target is not None
    if target:
        lines.append(f"{'target':<{width}}: {comp.metric} <= {q.target:g}"
                     + (f" x sigma**2 = {q.target * q.scale:.3g}" if q.task == "covariance" else ""))
    names = max(len(r.name) for r in comp.rows) + 2
    ests = max(len(r.estimator) for r in comp.rows) + 2
    header = f"  {'method':<{names}}{'estimator':<{ests}}{'private':<13}{'predicted':<11}{'verdict':<9}"
    if target:
        header += f"{'meets':<7}theorem n for target"
    lines.append(header.rstrip())
    for r in comp.rows:
        mark = "*" if r.best else " "
        private = {True: "yes", False: "NOT PRIVATE", None: "-"}[r.private]
        line = f"{mark} {r.name:<{names}}{r.estimator:<{ests}}{private:<13}"
        if not r.applicable:
            line += f"not applicable: {r.reason}"
        else:
            line += f"{_num(r.predicted_error):<11}{'VACUOUS' if r.vacuous else 'useful':<9}"
            if target:
                line += f"{'yes' if r.meets_target else 'no':<7}{_num(r.theorem_n) if r.theorem_n else 'unreachable'}"
        lines.append(line.rstrip())
    for r in comp.rows:
        for m in r.measured:
            lines.append(f"{'measured':<{width}}: {r.name}: n* = {m['n_star']:.3g} ({m['mode']}) for {m['target']} on "
                         f"{m['instance_family']} at (epsilon={m['epsilon']:g}, delta={m['delta']:g}), "
                         f"{1 - m['beta']:g} of runs [{m['source']}]")
    for r in comp.rows:
        if r.applicable and r.vacuous:
            lines.append(f"{'vacuous':<{width}}: {r.name}: {r.vacuous_reason}")
    if comp.best is None:
        lines.append(f"{'best':<{width}}: none: {comp.reason}")
    else:
        lines.append(f"{'best':<{width}}: {comp.best} (marked *): {comp.reason}")
    lines.append(f"{'rule':<{width}}: {comp.to_dict()['rule']}")
    return lines


def _compare(args) -> int:
    from dpdist.algorithms.compare import compare_methods
    from dpdist.cli._flags import need, refuse
    from dpdist.cli._printing import print_json

    refuse([d for d in ("job", "ledger") if getattr(args, d) is not None], "`dpdist plan --compare`",
           "it compares methods for public parameters, without a job file or ledger")
    need(args, "n_samples", "n_features", "k", "epsilon", "delta", "sigma", context="`dpdist plan --compare`")
    comp = compare_methods(args.n_samples, args.n_features, k=args.k, epsilon=args.epsilon, delta=args.delta,
                           sigma=args.sigma, task=args.task or "covariance", gap=args.gap, radius=args.radius,
                           target=args.target)
    if args.json:
        print_json(comp.to_dict())
    else:
        for line in comparison_lines(comp):
            print(line)
    return 0


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
        print(f"predicted  : {pe['metric']} <= {float(pe['value']):.6g}  (plan().{pe['plan_key']})")
        if pe.get("vacuous"):
            print(f"dpdist plan: !! VACUOUS plan: {pe['vacuous_reason']}", file=sys.stderr)
    else:
        print("predicted  : (this estimator's plan() predicts no error)")


def run(args) -> int:
    from dpdist.cli._flags import refuse

    if args.compare:
        return _compare(args)
    refuse([d for d in COMPARE_DESTS if getattr(args, d) is not None], "`dpdist plan JOB`", "it is a --compare option")
    if args.job is None:
        from dpdist.exceptions import ValidationError

        raise ValidationError("`dpdist plan` needs a JOB file, or --compare with the public parameters to compare")
    from dpdist.ops.job import load_job
    from dpdist.ops.runner import describe_ledger, job_ledger, plan_job

    job = load_job(args.job)
    ledger, source = job_ledger(job, args.ledger)
    with ledger:
        plan = plan_job(job, ledger=ledger)
    fits = (plan.get("budget") or {}).get("fits", False)
    code = 0 if fits else 3
    if args.json:
        from dpdist.cli._printing import print_json

        print_json({**plan, "exit_code": code, "ledger": describe_ledger(ledger), "ledger_source": source})
    else:
        _print(plan, f"{describe_ledger(ledger)} ({source})")
    return code

