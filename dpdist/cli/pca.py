"""``dpdist pca``: private leading sparse principal component (PrivPCA, ExpMechPCA) and baselines."""

from __future__ import annotations

import argparse
import inspect

from dpdist.cli._common import add_output_args, add_runtime_args, fit_and_write, input_shape, need, print_mapping

METHODS = ("privpca", "expmech", "analyze-gauss", "gaussian", "thresholded")


def register(sub) -> None:
    p = sub.add_parser(
        "pca",
        help="private leading sparse principal component of a Zarr array",
        description="Release an (epsilon, delta)-DP leading principal component of the rows of a "
        "Zarr array: PrivPCA (COLT 2026, Algorithm 2 with PrivNorm), ExpMechPCA (Algorithm 4), "
        "Analyze Gauss, the Wang-Xu Gaussian covariance's top eigenvector, or the NON-PRIVATE "
        "thresholded covariance's top eigenvector.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("input", nargs="?", help="Zarr array path/URL (or a dpdist dataset group with X)")
    p.add_argument("--method", choices=METHODS, default="privpca")
    p.add_argument("--k", type=int, help="sparsity k (privpca, expmech; with --plan also the baselines)")
    p.add_argument("--epsilon", type=float, help="privacy epsilon (> 0)")
    p.add_argument("--delta", type=float, help="privacy delta in (0, 1)")
    p.add_argument("--sigma", type=float, help="public sub-Gaussian scale")
    p.add_argument("--clip", type=float, help="entrywise truncation level (expmech, gaussian)")
    p.add_argument("--gap", type=float, help="relative eigengap gamma (privpca)")
    p.add_argument("--n-batches", type=int, default=None, help="number of batches (privpca)")
    p.add_argument("--tau", type=float, default=None, help="FriendlyCore threshold tau (privpca)")
    p.add_argument("--norm-fraction", type=float, default=0.5, help="share of the budget for PrivNorm (privpca)")
    p.add_argument("--lambda-hat", type=float, default=None, help="public top-eigenvalue estimate; skips PrivNorm (privpca)")
    p.add_argument("--max-subsets", type=int, default=None, help="refusal limit on C(d, k) (expmech)")
    p.add_argument("--row-norm", type=float, help="row L2 bound (analyze-gauss)")
    p.add_argument("--threshold", type=float, default=None, help="hard threshold (gaussian, thresholded)")
    p.add_argument("--beta", type=float, default=None, help="failure probability (expmech, analyze-gauss, gaussian)")
    p.add_argument("--on-nonfinite", choices=("zero", "raise"), default="zero")
    p.add_argument("--plan", action="store_true",
                   help="print noise scales and the predicted error for the input's size; read no data")
    p.add_argument("--n-samples", type=int, help="with --plan and no INPUT: n")
    p.add_argument("--n-features", type=int, help="with --plan and no INPUT: d")
    p.add_argument("--eigengap", type=float, default=None,
                   help="with --plan: absolute eigengap lambda1 - lambda2 of the model, for the sin^2 bound")
    p.add_argument("--target-sin2", type=float, default=None,
                   help="with --plan (expmech, privpca): also print the least n predicted to reach this sin^2")
    add_runtime_args(p)
    add_output_args(p, required=False)
    p.set_defaults(func=run)


def _need(args, *names) -> None:
    need(args, *names, context=f"--method {args.method}")


def _given(args, **names) -> dict:
    """Keyword arguments for the flags the user gave (others keep the estimator's defaults)."""
    return {key: getattr(args, attr) for key, attr in names.items() if getattr(args, attr) is not None}


def _estimator(args):
    import dpdist

    rt = dict(scheduler=args.scheduler)
    if args.method == "privpca":
        _need(args, "k", "epsilon", "delta", "gap", "sigma")
        from dpdist.algorithms.sparse_pca import SparsePCA

        return SparsePCA(
            args.k, args.epsilon, args.delta, gap=args.gap, sigma=args.sigma,
            norm_fraction=args.norm_fraction, random_state=args.random_state,
            **_given(args, n_batches="n_batches", tau="tau", lambda_hat="lambda_hat"), **rt,
        )
    if args.method == "expmech":
        _need(args, "k", "epsilon", "delta")
        return dpdist.ExpMechSparsePCA(
            args.k, args.epsilon, args.delta, sigma=args.sigma, clip=args.clip,
            random_state=args.random_state, on_nonfinite=args.on_nonfinite,
            **_given(args, max_subsets="max_subsets", beta="beta"), **rt,
        )
    if args.method == "analyze-gauss":
        _need(args, "epsilon", "delta", "row_norm")
        return dpdist.baselines.AnalyzeGauss(
            args.epsilon, args.delta, row_norm=args.row_norm, random_state=args.random_state,
            on_nonfinite=args.on_nonfinite, **_given(args, beta="beta"), **rt,
        )
    if args.method == "gaussian":
        _need(args, "epsilon", "delta")
        return dpdist.baselines.GaussianPCA(
            args.epsilon, args.delta, sigma=args.sigma, clip=args.clip, threshold=args.threshold,
            random_state=args.random_state, on_nonfinite=args.on_nonfinite, **_given(args, beta="beta"), **rt,
        )
    return dpdist.baselines.ThresholdedPCA(
        threshold=args.threshold, sigma=args.sigma, on_nonfinite=args.on_nonfinite, **rt
    )


def _plan_kwargs(est, args) -> dict:
    """Pass the optional model parameters that this estimator's plan() accepts."""
    accepted = inspect.signature(est.plan).parameters
    candidates = {"eigengap": args.eigengap, "sigma": args.sigma, "k": args.k}
    return {key: v for key, v in candidates.items() if key in accepted and v is not None}


def print_plan(est, args, n: int, d: int) -> None:
    """Print ``est.plan(n, d)`` (shared with ``dpdist norm``)."""
    plan = est.plan(n, d, **_plan_kwargs(est, args))
    extra = {}
    if getattr(args, "target_sin2", None) is not None:
        from dpdist.exceptions import ValidationError

        if args.method == "expmech":
            _need(args, "eigengap", "sigma")
            extra["min_samples_for_target"] = est.min_samples(args.target_sin2, d, eigengap=args.eigengap)
        elif args.method == "privpca":
            extra["min_samples_for_target"] = est.min_samples(args.target_sin2, d)
        else:
            raise ValidationError("--target-sin2 is available for --method expmech and privpca")
    print_mapping({**plan, **extra}, args.json, width=24)


def run(args) -> int:
    est = _estimator(args)
    if args.plan:
        n, d = input_shape(args)
        print_plan(est, args, n, d)
        return 0

    def summary(fitted) -> list[str]:
        comp = fitted.components_
        return [f"released  : leading component, {comp.shape[1]} features, {int((comp != 0).sum())} non-zeros"]

    return fit_and_write(est, args, summary)
