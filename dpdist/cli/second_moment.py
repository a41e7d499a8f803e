"""``dpdist second-moment``: private second-moment matrix (RecDPSME, MS25) and its baseline."""

from __future__ import annotations

from dpdist.cli._args import (
    HelpFormatter,
    add_input_arg,
    add_output_args,
    add_plan_args,
    add_runtime_args,
    mark_required,
)
from dpdist.cli._flags import Method, check_cli_flags, context_of, estimator_call, need, refuse
from dpdist.cli._printing import print_plan
from dpdist.cli._run import fit_and_write, input_shape
from dpdist.privacy.zcdp import MAX_RHO

METHODS = {
    "recursive": Method("dpdist.SecondMoment", required=("rho", "m")),
    "subsample-aggregate": Method("dpdist.baselines.SubsampleAggregateSecondMoment", required=("epsilon", "delta", "m")),
}
#: (epsilon, delta) at which a zCDP release is also stated, unless --report-delta is given.
REPORT_DELTA = 1e-6


def register(sub) -> None:
    p = sub.add_parser(
        "second-moment",
        help="private second-moment matrix of a Zarr array (RecDPSME, rho-zCDP)",
        description="Release a rho-zCDP estimate of the second-moment matrix (1/n) sum x x^T of "
        "the rows of a Zarr array with the recursive algorithm of Mahpud-Sheffet (NeurIPS "
        "2025), or the (epsilon, delta)-DP subsample-and-aggregate baseline.",
        formatter_class=HelpFormatter,
    )
    add_input_arg(p)
    p.add_argument("--method", choices=tuple(METHODS), default="recursive")
    p.add_argument("--rho", type=float, help=f"zCDP budget rho (> 0, at most {MAX_RHO:g}) (recursive)")
    p.add_argument("--m", type=int, help="subsamplability size m (>= 1)")
    p.add_argument("--alpha", type=float, help="subsamplability accuracy alpha in (0, 0.5] (default 0.5)")
    p.add_argument("--radius", type=float, default=None,
                   help="public bound on the row L2 norms (default: private norm quantile)")
    p.add_argument("--lambda-min", type=float, default=None,
                   help="public lower bound on lambda_min (default: private bucket histogram)")
    p.add_argument("--init-fraction", type=float,
                   help="share of rho spent on the private initialisation (split between its steps; "
                        "recursive; default 0.1)")
    p.add_argument("--sensitivity", choices=("paper", "tight"),
                   help="paper: 4 R^2/n (MS25); tight: sqrt(2) R^2/n (recursive; default paper)")
    p.add_argument("--xi", type=float, help="failure probability of the analysis (default 0.1)")
    p.add_argument("--psd", action="store_true",
                   help="clip the output's eigenvalues at 0 (post-processing; recursive)")
    p.add_argument("--report-delta", type=float,
                   help=f"delta at which the zCDP guarantee is also printed as (epsilon, delta) "
                        f"(recursive; default {REPORT_DELTA:g})")
    p.add_argument("--epsilon", type=float, help="epsilon of Algorithm 3 (subsample-aggregate)")
    p.add_argument("--delta", type=float, help="delta of Algorithm 3 (subsample-aggregate)")
    p.add_argument("--unsafe-no-privacy", action="store_true",
                   help="subsample-aggregate: run even when its privacy precondition fails; the "
                        "result is labelled NOT PRIVATE")
    add_plan_args(p, "levels, noise scales and predicted gamma")
    add_runtime_args(p)
    add_output_args(p, required=False)
    mark_required(p, METHODS)
    p.set_defaults(func=run)


def _details(meta: dict) -> list[str]:
    """Budget breakdown and public parameters of a second-moment release."""
    lines = []
    p = meta.get("privacy") or {}
    levels = [part for part in p.get("breakdown", []) if part["step"].startswith("level ")]
    for part in p.get("breakdown", []):
        if not part["step"].startswith("level "):
            lines.append(f"budget    : {part['step']}: rho {part['rho']:.4g}")
    if levels:
        lines.append(f"budget    : recursion: {len(levels)} levels x rho {levels[0]['rho']:.4g}")
    params = meta.get("parameters", {})
    for key in ("n_samples", "n_features", "m", "alpha", "radius", "radius_source", "lambda_min",
                "lambda_source", "n_levels", "subspace_dims", "n_groups", "q_tilde"):
        if key in params:
            lines.append(f"{key:<10}: {params[key]}")
    return lines


def run(args) -> int:
    from dpdist.exceptions import ValidationError

    check_cli_flags(args, fit_flags=("report_delta",))
    if args.method != "recursive":
        refuse([d for d in ("report_delta",) if getattr(args, d) is not None], context_of(args),
               "its guarantee is (epsilon, delta)-DP already")
    call = estimator_call(args, METHODS)
    if args.plan:
        n, d = input_shape(args)
        if args.method == "recursive":  # a plan needs values (or guesses) for what a fit would estimate
            need(args, "radius", "lambda_min", context="`dpdist second-moment --plan`")
        return print_plan(args, call.build().plan(n, d, **call.plan_kwargs))
    report_delta = None
    if args.method == "recursive":
        report_delta = REPORT_DELTA if args.report_delta is None else args.report_delta
        if not 0 < report_delta < 1:
            raise ValidationError(f"--report-delta must lie in (0, 1), got {report_delta}")
    return fit_and_write(call, args, lambda fitted: _details(fitted.release_.metadata()), report_delta=report_delta)
