"""``dpdist generate``: write a Model-1 synthetic dataset into a Zarr store."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser(
        "generate",
        help="write a synthetic Model-1 or Model-2 dataset (Gaussian rows) to Zarr",
        description="Generate Gaussian rows chunk by chunk in parallel into a Zarr group (X = "
        "samples, truth/ = the true covariance): Model 1 (a random k-RCS covariance) or Model 2 "
        "(k-RCS with a k-sparse top eigenvector and a chosen eigengap).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("output", help="Zarr group to create")
    p.add_argument("--n-samples", type=int, default=1_000_000)
    p.add_argument("--n-features", type=int, default=32)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--model", type=int, choices=(1, 2), default=1)
    p.add_argument("--structure", choices=("block", "banded", "graph"), default="banded", help="Model 1")
    p.add_argument("--gap", type=float, default=0.5, help="Model 2: relative eigengap")
    p.add_argument("--lambda1", type=float, default=2.0, help="Model 2: top eigenvalue")
    p.add_argument("--strength", type=float, default=0.8)
    p.add_argument("--chunk-rows", type=int, default=100_000)
    p.add_argument("--random-state", type=int, default=0, help="seed of the covariance and samples")
    p.add_argument("--scheduler", default=None)
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.model == 2:
        from dpdist.data.model2 import make_model2

        m2 = make_model2(args.n_samples, args.n_features, args.k, gap=args.gap, lambda1=args.lambda1,
                         chunks=args.chunk_rows, random_state=args.random_state)
        path = m2.write_zarr(args.output, overwrite=args.overwrite, scheduler=args.scheduler)
        print(f"wrote {args.n_samples} x {args.n_features} samples (Model 2, k={args.k}, gap={args.gap}, "
              f"lambda1={args.lambda1}) to {path}")
        return 0
    from dpdist.data.synthetic import make_model1

    model = make_model1(args.n_features, args.k, structure=args.structure, strength=args.strength,
                        random_state=args.random_state)
    path = model.write_zarr(args.output, args.n_samples, chunk_rows=args.chunk_rows,
                            scheduler=args.scheduler, overwrite=args.overwrite)
    print(f"wrote {args.n_samples} x {args.n_features} samples ({args.structure}, k={args.k}, "
          f"sigma^2 = ||Sigma||_op = {model.sigma2:.4g}) to {path}")
    return 0
