"""``dpdist covariance``: private sparse covariance (PrivCov) and its baselines."""

from __future__ import annotations

import argparse

from dpdist.cli._common import add_output_args, add_runtime_args, print_json

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
    p.add_argument("--on-nonfinite", choices=("raise", "zero"), default="raise")
    p.add_argument("--tile-size", type=int, default=2048)
    p.add_argument("--plan", action="store_true",
                   help="print clip, noise scale and error bound for the input's size; read no data")
    p.add_argument("--n-samples", type=int, help="with --plan and no INPUT: n")
    p.add_argument("--n-features", type=int, help="with --plan and no INPUT: d")
    add_runtime_args(p)
    add_output_args(p, required=False)
    p.set_defaults(func=run)


def _need(args, *names):
    from dpdist.exceptions import ValidationError

    missing = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n) is None]
    if missing:
        raise ValidationError(f"missing required option(s): {', '.join(missing)}")


def _estimator(args):
    import dpdist

    if args.method == "privcov":
        _need(args, "k", "epsilon", "delta")
        return dpdist.SparseCovariance(
            args.k, args.epsilon, args.delta, sigma=args.sigma, clip=args.clip, beta=args.beta,
            random_state=args.random_state, scheduler=args.scheduler, on_nonfinite=args.on_nonfinite,
            tile_size=args.tile_size, progress=args.progress,
        )
    if args.method == "wang-xu":
        _need(args, "epsilon", "delta")
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
    from dpdist.data.results import check_output_path, write_result
    from dpdist.data.validation import as_dask_array
    from dpdist.exceptions import ValidationError
    from dpdist.report.text import format_release

    est = _estimator(args)
    if args.plan:
        if args.input is not None:
            n, d = as_dask_array(args.input).shape  # metadata only
        else:
            _need(args, "n_samples", "n_features")
            n, d = args.n_samples, args.n_features
        if not hasattr(est, "plan"):
            raise ValidationError(f"--plan is not available for --method {args.method}")
        plan = est.plan(n, d)
        if args.json:
            print_json(plan)
        else:
            for key, value in plan.items():
                if key != "calibration":
                    print(f"{key:>22} : {value}")
            if args.method == "privcov" and args.sigma is not None:
                print(f"{'min n, error <= sigma^2':>22} : {est.min_samples(args.sigma**2, d)}")
        return 0
    if args.input is None:
        raise ValidationError("INPUT (a Zarr array path) is required unless --plan is given")
    if args.output is None:
        raise ValidationError("--output is required")
    out = check_output_path(args.output, overwrite=args.overwrite)
    est.fit(args.input)
    rel = est.release_
    write_result(out, rel.metadata(), rel.values, overwrite=args.overwrite)
    meta = rel.metadata()
    if args.json:
        print_json(meta)
    else:
        print(format_release(meta))
        M = rel.values["covariance"]
        print(f"released  : {M.shape[0]} x {M.shape[1]} sparse matrix, {M.nnz} non-zeros")
        print(f"written   : {out}")
    return 0
