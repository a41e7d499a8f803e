"""``dpdist norm``: private top eigenvalue (spectral norm) of the covariance (PrivNorm)."""

from __future__ import annotations

from dpdist.cli._args import (
    HelpFormatter,
    add_centering_args,
    add_input_arg,
    add_output_args,
    add_plan_args,
    add_runtime_args,
    mark_required,
)
from dpdist.cli._flags import Method, check_cli_flags, estimator_call
from dpdist.cli._printing import print_plan
from dpdist.cli._run import fit_and_write, input_shape
from dpdist.privacy.budget import MAX_EPSILON

METHOD = Method("dpdist.SpectralNorm", required=("k", "epsilon", "delta", "gap", "sigma"))


def register(sub) -> None:
    p = sub.add_parser(
        "norm",
        help="private spectral norm of the covariance of a Zarr array (PrivNorm)",
        description="Release an (epsilon, delta)-DP estimate of ||Sigma||_op, the top eigenvalue "
        "of the rows' covariance (centred at a private or public mean; of their second moment with "
        "--assume-centered), with PrivNorm (COLT 2026, Algorithm 3).",
        formatter_class=HelpFormatter,
    )
    add_input_arg(p)
    p.add_argument("--k", type=int, help="row sparsity k")
    p.add_argument("--epsilon", type=float, help=f"privacy epsilon (> 0, at most {MAX_EPSILON:g})")
    p.add_argument("--delta", type=float, help="privacy delta in (0, 1)")
    p.add_argument("--gap", type=float, help="relative eigengap gamma")
    p.add_argument("--sigma", type=float, help="public sub-Gaussian scale")
    p.add_argument("--n-batches", type=int, help="number of batches (default: the estimator's)")
    p.add_argument("--tau", type=float, help="FriendlyCore threshold tau (default: eq. (11))")
    p.add_argument("--beta", type=float, help="failure probability of the utility statements (default 0.05)")
    p.add_argument("--shuffle-batches", action="store_true",
                   help="batches from a public random permutation instead of consecutive rows")
    add_centering_args(p)
    add_plan_args(p, "noise scales and the predicted error")
    p.add_argument("--require-useful", action="store_true",
                   help="refuse (exit 2) before reading any data when the plan predicts a rejected or vacuous "
                        "release (the plan uses public parameters only)")
    add_runtime_args(p)
    add_output_args(p, required=False)
    mark_required(p, {'privnorm': METHOD}, method_flag=False)
    p.set_defaults(func=run)


def run(args) -> int:
    check_cli_flags(args, fit_flags=("require_useful",))
    call = estimator_call(args, METHOD)
    if args.plan:
        n, d = input_shape(args)
        return print_plan(args, call.build().plan(n, d, **call.plan_kwargs))
    return fit_and_write(
        call, args,
        summary=lambda fitted: [f"released  : ||Sigma||_op estimate {float(fitted.norm_):.6g}"],
        extra_values=lambda fitted: {"norm": fitted.norm_},
    )
