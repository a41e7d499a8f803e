"""``dpdist covariance``: private sparse covariance (PrivCov) and its baselines."""

from __future__ import annotations

from dpdist.cli._args import (
    HelpFormatter,
    add_centering_args,
    add_input_arg,
    add_nonfinite_arg,
    add_output_args,
    add_plan_args,
    add_runtime_args,
    mark_required,
)
from dpdist.cli._flags import Method, check_cli_flags, estimator_call
from dpdist.cli._printing import print_plan
from dpdist.cli._run import fit_and_write, input_shape
from dpdist.privacy.budget import MAX_EPSILON

METHODS = {
    "privcov": Method("dpdist.SparseCovariance", required=("k", "epsilon", "delta")),
    "wang-xu": Method("dpdist.baselines.GaussianCovariance", required=("epsilon", "delta")),
    "thresholded": Method("dpdist.baselines.ThresholdedCovariance"),
}


def register(sub) -> None:
    p = sub.add_parser(
        "covariance",
        help="private sparse covariance of a Zarr array (Algorithm 1, PrivCov)",
        description="Release an (epsilon, delta)-DP sparse covariance of the rows of a Zarr array "
        "with PrivCov (COLT 2026, Algorithm 1), or a baseline: the Wang-Xu Gaussian mechanism, or "
        "the NON-PRIVATE thresholded covariance. PrivCov centres the data at a private mean (or "
        "--mean) unless --assume-centered asks for the second moment. A flag the chosen method "
        "does not use is refused.",
        formatter_class=HelpFormatter,
    )
    add_input_arg(p)
    p.add_argument("--method", choices=(*METHODS, "auto"), default="privcov",
                   help="estimator; auto: the private method whose plan "
                        "predicts the smallest error for the input's size (`dpdist plan --compare`), chosen "
                        "from public parameters only")
    p.add_argument("--k", type=int, help="row sparsity k (privcov)")
    p.add_argument("--epsilon", type=float, help=f"privacy epsilon (> 0, at most {MAX_EPSILON:g}) (privcov, wang-xu)")
    p.add_argument("--delta", type=float, help="privacy delta in (0, 1) (privcov, wang-xu)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--sigma", type=float, help="public sub-Gaussian scale (sets the clip level)")
    g.add_argument("--clip", type=float, help="entrywise truncation level R (privcov, wang-xu)")
    p.add_argument("--row-clip", type=float,
                   help="L2 bound C the entry-clipped rows are scaled to (privcov with --selection gumbel or "
                   "laplace; default from --sigma; inf: none); shrinks the release's sensitivity")
    p.add_argument("--threshold", type=float, help="threshold (wang-xu, thresholded)")
    p.add_argument("--beta", type=float, help="failure probability (privcov, wang-xu; default 0.1)")
    add_centering_args(p)
    p.add_argument("--selection", choices=("gumbel", "laplace", "paper"),
                   help="privcov's selection and analysis: gumbel (default; Gumbel top-k, Gaussian release, zCDP), "
                   "laplace (Laplace selection, Gaussian release, zCDP; both proved in docs/privacy/privcov.md) "
                   "or paper (Algorithm 1 as printed)")
    add_nonfinite_arg(p)
    p.add_argument("--tile-size", type=int, help="features per Gram tile (default: the estimator's)")
    add_plan_args(p, "clip, noise scale and error bound")
    add_runtime_args(p)
    add_output_args(p, required=False)
    mark_required(p, METHODS)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.method == "auto":
        return _run_auto(args)
    check_cli_flags(args)
    call = estimator_call(args, METHODS)
    if args.plan:
        n, d = input_shape(args)
        est = call.build()
        plan = est.plan(n, d, **call.plan_kwargs)
        extra = {}
        if args.method == "privcov" and args.sigma is not None:
            extra["min n, error <= sigma^2"] = est.min_samples(args.sigma**2, d)
        return print_plan(args, plan, extra)

    return fit_and_write(call, args, _summary)


def _summary(fitted) -> list[str]:
    M = fitted.covariance_
    return [f"released  : {M.shape[0]} x {M.shape[1]} sparse matrix, {M.nnz} non-zeros"]


def _run_auto(args) -> int:
    """``--method auto``: say which method :func:`dpdist.compare_methods` chose and why, then
    plan or run it; the release records the choice under ``method_choice``."""
    from dpdist.cli._auto import auto_call, say

    check_cli_flags(args)
    call, record, line = auto_call(args, "covariance")
    if args.plan:
        n, d = input_shape(args)
        say(args, line)
        return print_plan(args, call.build().plan(n, d, **call.plan_kwargs), {"method_choice": record} if args.json else None)
    say(args, line)
    return fit_and_write(call, args, _summary, extra_metadata={"method_choice": record})
