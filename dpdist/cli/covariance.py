"""``dpdist covariance``: private sparse covariance (PrivCov) and its baselines."""

from __future__ import annotations

import argparse

from dpdist.cli._common import add_output_args, add_runtime_args, fit_and_write, input_shape, need, print_mapping

METHODS = ("privcov", "wang-xu", "thresholded")


def register(sub) -> None:
    p = sub.add_parser(
        "covariance",
        help="private sparse covariance of a Zarr array (Algorithm 1, PrivCov)",
        description="Release an (epsilon, delta)-DP sparse covariance (second moment) of the "
        "rows of a Zarr array with PrivCov (COLT 2026, Algorithm 1), or a baseline.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("input", nargs="?", help="Zarr array path/URL (or a dpdist dataset group with X)")
    p.add_argument("--method", choices=METHODS, default="privcov")
    p.add_argument("--k", type=int, help="row sparsity k (privcov)")
    p.add_argument("--epsilon", type=float, help="privacy epsilon (> 0)")
    p.add_argument("--delta", type=float, help="privacy delta in (0, 1)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--sigma", type=float, help="public sub-Gaussian scale (sets the clip level)")
    g.add_argument("--clip", type=float, help="entrywise truncation level R")
    p.add_argument("--threshold", type=float, default=None, help="threshold (baselines)")
    p.add_argument("--beta", type=float, default=0.1, help="failure probability")
    p.add_argument("--on-nonfinite", choices=("zero", "raise"), default="zero")
    p.add_argument("--tile-size", type=int, default=2048)
    p.add_argument("--plan", action="store_true",
                   help="print clip, noise scale and error bound for the input's size; read no data")
    p.add_argument("--n-samples", type=int, help="with --plan and no INPUT: n")
    p.add_argument("--n-features", type=int, help="with --plan and no INPUT: d")
    add_runtime_args(p)
    add_output_args(p, required=False)
    p.set_defaults(func=run)


def _estimator(args):
    import dpdist

    if args.method == "privcov":
        need(args, "k", "epsilon", "delta")
        return dpdist.SparseCovariance(
            args.k, args.epsilon, args.delta, sigma=args.sigma, clip=args.clip, beta=args.beta,
            random_state=args.random_state, scheduler=args.scheduler, on_nonfinite=args.on_nonfinite,
            tile_size=args.tile_size, progress=args.progress,
        )
    if args.method == "wang-xu":
        need(args, "epsilon", "delta")
        return dpdist.baselines.GaussianCovariance(
            args.epsilon, args.delta, sigma=args.sigma, clip=args.clip, threshold=args.threshold,
            random_state=args.random_state, beta=args.beta, scheduler=args.scheduler,
            tile_size=args.tile_size, on_nonfinite=args.on_nonfinite,
        )
    return dpdist.baselines.ThresholdedCovariance(
        threshold=args.threshold, sigma=args.sigma, scheduler=args.scheduler,
        tile_size=args.tile_size, on_nonfinite=args.on_nonfinite,
    )


def run(args) -> int:
    from dpdist.exceptions import ValidationError

    est = _estimator(args)
    if args.plan:
        if not hasattr(est, "plan"):
            raise ValidationError(f"--plan is not available for --method {args.method}")
        n, d = input_shape(args)
        plan = est.plan(n, d)
        if args.method == "privcov" and args.sigma is not None and not args.json:
            plan["min n, error <= sigma^2"] = est.min_samples(args.sigma**2, d)
        print_mapping(plan, args.json)
        return 0

    def summary(fitted) -> list[str]:
        M = fitted.covariance_
        return [f"released  : {M.shape[0]} x {M.shape[1]} sparse matrix, {M.nnz} non-zeros"]

    return fit_and_write(est, args, summary)
