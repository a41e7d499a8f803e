"""``dpdist pca``: private leading sparse principal component (PrivPCA, ExpMechPCA) and baselines."""

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
from dpdist.cli._flags import Method, check_cli_flags, context_of, estimator_call, need, refuse
from dpdist.cli._printing import print_plan
from dpdist.cli._run import fit_and_write, input_shape
from dpdist.privacy.budget import MAX_EPSILON

METHODS = {
    "privpca": Method("dpdist.SparsePCA", required=("k", "epsilon", "delta", "gap", "sigma")),
    "expmech": Method("dpdist.ExpMechSparsePCA", required=("k", "epsilon", "delta")),
    "privcov-power": Method("dpdist.SparseCovariancePCA", required=("k", "epsilon", "delta")),
    "analyze-gauss": Method("dpdist.baselines.AnalyzeGauss", required=("epsilon", "delta", "radius"),
                            params={"radius": "row_norm"}),
    "wang-xu": Method("dpdist.baselines.GaussianPCA", required=("epsilon", "delta")),
    "thresholded": Method("dpdist.baselines.ThresholdedPCA"),
}
#: Methods whose estimator has min_samples(target_sin2, ...) for --target-sin2.
TARGET_SIN2 = ("privpca", "expmech", "privcov-power")
#: Methods whose min_samples needs the absolute eigengap.
NEEDS_EIGENGAP = ("expmech", "privcov-power")


def register(sub) -> None:
    p = sub.add_parser(
        "pca",
        help="private leading sparse principal component of a Zarr array",
        description="Release an (epsilon, delta)-DP leading principal component of the rows of a "
        "Zarr array: PrivPCA (COLT 2026, Algorithm 2 with PrivNorm), ExpMechPCA (Algorithm 4), "
        "the truncated power method on PrivCov's released matrix (privcov-power), "
        "Analyze Gauss, the Wang-Xu Gaussian covariance's top eigenvector (wang-xu), "
        "or the NON-PRIVATE thresholded covariance's top eigenvector. A flag the chosen method "
        "does not use is refused.",
        formatter_class=HelpFormatter,
    )
    add_input_arg(p)
    p.add_argument("--method", choices=(*METHODS, "auto"), default="privpca",
                   help="estimator; auto: the private method whose plan "
                        "predicts the smallest error for the input's size (`dpdist plan --compare`), chosen "
                        "from public parameters only")
    p.add_argument("--k", type=int, help="sparsity k (privpca, expmech; with --plan also wang-xu, thresholded)")
    p.add_argument("--epsilon", type=float, help=f"privacy epsilon (> 0, at most {MAX_EPSILON:g})")
    p.add_argument("--delta", type=float, help="privacy delta in (0, 1)")
    p.add_argument("--sigma", type=float, help="public sub-Gaussian scale")
    p.add_argument("--clip", type=float, help="entrywise truncation level (expmech, privcov-power, wang-xu)")
    p.add_argument("--row-clip", type=float,
                   help="L2 bound C the entry-clipped rows are scaled to (privcov-power; default from --sigma; "
                   "inf: none)")
    p.add_argument("--gap", type=float, help="relative eigengap gamma (privpca)")
    p.add_argument("--n-batches", type=int, help="number of batches (privpca)")
    p.add_argument("--tau", type=float, help="FriendlyCore threshold tau (privpca)")
    p.add_argument("--norm-fraction", type=float, help="share of the budget for PrivNorm (privpca; default 0.5)")
    p.add_argument("--lambda-hat", type=float, help="public top-eigenvalue estimate; skips PrivNorm (privpca)")
    p.add_argument("--shuffle-batches", action="store_true",
                   help="batches from a public random permutation, not consecutive rows (privpca)")
    p.add_argument("--max-subsets", type=int, help="refusal limit on C(d, k) (expmech)")
    p.add_argument("--radius", type=float, help="public bound on the row L2 norms (analyze-gauss)")
    p.add_argument("--threshold", type=float, help="hard threshold (wang-xu, thresholded)")
    p.add_argument("--beta", type=float, help="failure probability (default: the estimator's)")
    add_centering_args(p)
    add_nonfinite_arg(p)
    p.add_argument("--tile-size", type=int, help="features per Gram tile (analyze-gauss, wang-xu, thresholded)")
    add_plan_args(p, "noise scales and the predicted error")
    p.add_argument("--require-useful", action="store_true",
                   help="refuse (exit 2) before reading any data when the plan predicts a rejected or vacuous "
                        "release (the plan uses public parameters only) (privpca)")
    p.add_argument("--eigengap", type=float,
                   help="with --plan: absolute eigengap lambda1 - lambda2 of the model, for the sin^2 bound")
    p.add_argument("--target-sin2", type=float,
                   help="with --plan (expmech, privpca, privcov-power): also print the least n predicted to reach "
                   "this sin^2")
    add_runtime_args(p)
    add_output_args(p, required=False)
    mark_required(p, METHODS)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.method == "auto":
        return _run_auto(args)
    check_cli_flags(args, plan_flags=("target_sin2",), fit_flags=("require_useful",))
    call = estimator_call(args, METHODS)
    if args.plan:
        n, d = input_shape(args)
        est = call.build()
        plan = est.plan(n, d, **call.plan_kwargs)
        extra = {}
        if args.target_sin2 is not None:
            if args.method not in TARGET_SIN2:
                refuse(["target_sin2"], context_of(args), f"it is available for --method {' and '.join(TARGET_SIN2)}")
            if args.method in NEEDS_EIGENGAP:
                need(args, "eigengap", context=f"--target-sin2 with --method {args.method}")
            extra["min_samples_for_target"] = est.min_samples(args.target_sin2, d, **call.plan_kwargs)
        return print_plan(args, plan, extra, width=24)

    return fit_and_write(call, args, _summary)


def _summary(fitted) -> list[str]:
    comp = fitted.components_
    return [f"released  : leading component, {comp.shape[1]} features, {int((comp != 0).sum())} non-zeros"]


def _run_auto(args) -> int:
    """``--method auto``: say which method :func:`dpdist.compare_methods` chose and why, then
    plan or run it; the release records the choice under ``method_choice``."""
    from dpdist.cli._auto import auto_call, say

    check_cli_flags(args, plan_flags=("target_sin2",))
    call, record, line = auto_call(args, "pca")
    if args.plan:
        n, d = input_shape(args)
        say(args, line)
        return print_plan(args, call.build().plan(n, d, **call.plan_kwargs), {"method_choice": record} if args.json else None)
    say(args, line)
    return fit_and_write(call, args, _summary, extra_metadata={"method_choice": record})
