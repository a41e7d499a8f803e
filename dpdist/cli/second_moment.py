"""``dpdist second-moment``: private second-moment matrix (RecDPSME, MS25) and its baseline."""

from __future__ import annotations

import argparse

from dpdist.cli._common import add_output_args, add_runtime_args, fit_and_write, input_shape, need, print_mapping

METHODS = ("recursive", "subsample-aggregate")


def register(sub) -> None:
    p = sub.add_parser(
        "second-moment",
        help="private second-moment matrix of a Zarr array (RecDPSME, rho-zCDP)",
        description="Release a rho-zCDP estimate of the second-moment matrix (1/n) sum x x^T of "
        "the rows of a Zarr array with the recursive algorithm of Mahpud-Sheffet (NeurIPS "
        "2025), or the (epsilon, delta)-DP subsample-and-aggregate baseline.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("input", nargs="?", help="Zarr array path/URL (or a dpdist dataset group with X)")
    p.add_argument("--method", choices=METHODS, default="recursive")
    p.add_argument("--rho", type=float, help="zCDP budget rho (> 0) (recursive)")
    p.add_argument("--m", type=int, required=True, help="subsamplability size m (>= 1)")
    p.add_argument("--alpha", type=float, default=0.5, help="subsamplability accuracy alpha in (0, 0.5]")
    p.add_argument("--radius", type=float, default=None,
                   help="public bound on the row norms (default: private norm quantile)")
    p.add_argument("--lambda-min", type=float, default=None,
                   help="public lower bound on lambda_min (default: private bucket histogram)")
    p.add_argument("--init-fraction", type=float, default=0.1,
                   help="share of rho spent on the private initialisation (split between its steps)")
    p.add_argument("--sensitivity", choices=("paper", "tight"), default="paper",
                   help="paper: 4 R^2/n (MS25); tight: sqrt(2) R^2/n")
    p.add_argument("--xi", type=float, default=0.1, help="failure probability of the analysis")
    p.add_argument("--psd", action="store_true", help="clip the output's eigenvalues at 0 (post-processing)")
    p.add_argument("--report-delta", type=float, default=1e-6,
                   help="delta at which the zCDP guarantee is also printed as (epsilon, delta)")
    p.add_argument("--epsilon", type=float, help="epsilon of Algorithm 3 (subsample-aggregate)")
    p.add_argument("--delta", type=float, help="delta of Algorithm 3 (subsample-aggregate)")
    p.add_argument("--unsafe-no-privacy", action="store_true",
                   help="subsample-aggregate: run even when its privacy precondition fails; the "
                        "result is labelled NOT PRIVATE")
    p.add_argument("--plan", action="store_true",
                   help="print levels, noise scales and predicted gamma; read no data")
    p.add_argument("--n-samples", type=int, help="with --plan and no INPUT: n")
    p.add_argument("--n-features", type=int, help="with --plan and no INPUT: d")
    add_runtime_args(p)
    add_output_args(p, required=False)
    p.set_defaults(func=run)


def _estimator(args):
    import dpdist
    from dpdist.baselines import SubsampleAggregateSecondMoment
    from dpdist.exceptions import ValidationError

    if args.method == "recursive":
        need(args, "rho")
        if args.epsilon is not None or args.delta is not None or args.unsafe_no_privacy:
            raise ValidationError("--epsilon/--delta/--unsafe-no-privacy belong to --method subsample-aggregate")
        return dpdist.SecondMoment(
            args.rho, m=args.m, alpha=args.alpha, radius=args.radius, lambda_min=args.lambda_min,
            init_fraction=args.init_fraction, sensitivity=args.sensitivity, xi=args.xi,
            random_state=args.random_state, scheduler=args.scheduler, psd=args.psd,
        )
    need(args, "epsilon", "delta")
    if args.rho is not None or args.radius is not None or args.lambda_min is not None:
        raise ValidationError("--rho/--radius/--lambda-min belong to --method recursive")
    return SubsampleAggregateSecondMoment(
        args.epsilon, args.delta, m=args.m, alpha=args.alpha, xi=args.xi,
        unsafe_no_privacy=args.unsafe_no_privacy, random_state=args.random_state, scheduler=args.scheduler,
    )


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

    est = _estimator(args)
    if args.plan:
        if args.method != "recursive":
            raise ValidationError("--plan is available for --method recursive only")
        n, d = input_shape(args)
        plan = est.plan(n, d)
        info = {
            "n_levels": plan.n_levels,
            "noise_scales": list(plan.noise_scales),
            "predicted_gamma": plan.predicted_gamma,
            "event_e_min_samples": plan.event_e_min_samples,
            "event_e_holds": plan.event_e_holds,
            "rho_main": plan.rho_main,
        }
        print_mapping(info, args.json, width=20)
        return 0
    return fit_and_write(est, args, lambda fitted: _details(fitted.release_.metadata()),
                         report_delta=args.report_delta)
