"""``dpdist norm``: private top eigenvalue (spectral norm) of the covariance (PrivNorm)."""

from __future__ import annotations

import argparse

from dpdist.cli._common import add_output_args, add_runtime_args, fit_and_write, input_shape, need, print_mapping


def register(sub) -> None:
    p = sub.add_parser(
        "norm",
        help="private spectral norm of the covariance of a Zarr array (PrivNorm)",
        description="Release an (epsilon, delta)-DP estimate of ||Sigma||_op, the top eigenvalue "
        "of the rows' second moment, with PrivNorm (COLT 2026, Algorithm 3).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("input", nargs="?", help="Zarr array path/URL (or a dpdist dataset group with X)")
    p.add_argument("--k", type=int, help="row sparsity k")
    p.add_argument("--epsilon", type=float, help="privacy epsilon (> 0)")
    p.add_argument("--delta", type=float, help="privacy delta in (0, 1)")
    p.add_argument("--gap", type=float, help="relative eigengap gamma")
    p.add_argument("--sigma", type=float, help="public sub-Gaussian scale")
    p.add_argument("--n-batches", type=int, default=None, help="number of batches")
    p.add_argument("--tau", type=float, default=None, help="FriendlyCore threshold tau")
    p.add_argument("--plan", action="store_true",
                   help="print noise scales and the predicted error for the input's size; read no data")
    p.add_argument("--n-samples", type=int, help="with --plan and no INPUT: n")
    p.add_argument("--n-features", type=int, help="with --plan and no INPUT: d")
    add_runtime_args(p)
    add_output_args(p, required=False)
    p.set_defaults(func=run)


def _estimator(args):
    from dpdist.algorithms.sparse_pca import SpectralNorm

    need(args, "k", "epsilon", "delta", "gap", "sigma")

    extra = {key: getattr(args, key) for key in ("n_batches", "tau") if getattr(args, key) is not None}
    return SpectralNorm(args.k, args.epsilon, args.delta, gap=args.gap, sigma=args.sigma,
                        random_state=args.random_state, scheduler=args.scheduler, **extra)


def run(args) -> int:
    est = _estimator(args)
    if args.plan:
        n, d = input_shape(args)
        print_mapping(est.plan(n, d), args.json)
        return 0
    return fit_and_write(
        est, args,
        summary=lambda fitted: [f"released  : ||Sigma||_op estimate {float(fitted.norm_):.6g}"],
        extra_values=lambda fitted: {"norm": fitted.norm_},
    )
