"""``dpdist norm``: private top eigenvalue (spectral norm) of the covariance (PrivNorm)."""

from __future__ import annotations

import argparse

from dpdist.cli._common import add_output_args, add_runtime_args, print_json


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
    from dpdist.exceptions import ValidationError

    missing = [f"--{n.replace('_', '-')}" for n in ("k", "epsilon", "delta", "gap", "sigma") if getattr(args, n) is None]
    if missing:
        raise ValidationError(f"missing required option(s): {', '.join(missing)}")
    from dpdist.algorithms.sparse_pca import SpectralNorm  # helper module, imported lazily

    extra = {key: getattr(args, key) for key in ("n_batches", "tau") if getattr(args, key) is not None}
    return SpectralNorm(args.k, args.epsilon, args.delta, gap=args.gap, sigma=args.sigma,
                        random_state=args.random_state, scheduler=args.scheduler, **extra)


def run(args) -> int:
    from dpdist.data.results import check_output_path, write_result
    from dpdist.data.validation import as_dask_array
    from dpdist.exceptions import ValidationError
    from dpdist.report.text import format_release

    est = _estimator(args)
    if args.plan:
        if args.input is not None:
            n, d = (int(s) for s in as_dask_array(args.input).shape)  # metadata only
        elif args.n_samples is None or args.n_features is None:
            raise ValidationError("--plan needs INPUT or both --n-samples and --n-features")
        else:
            n, d = args.n_samples, args.n_features
        plan = est.plan(n, d)
        if args.json:
            print_json(plan)
        else:
            for key, value in plan.items():
                if key != "calibration":
                    print(f"{key:>22} : {value}")
        return 0
    if args.input is None:
        raise ValidationError("INPUT (a Zarr array path) is required unless --plan is given")
    if args.output is None:
        raise ValidationError("--output is required")
    out = check_output_path(args.output, overwrite=args.overwrite)
    est.fit(args.input)
    rel = est.release_
    values = dict(rel.values)
    values.setdefault("norm", est.norm_)
    write_result(out, rel.metadata(), values, overwrite=args.overwrite)
    meta = rel.metadata()
    if args.json:
        print_json(meta)
    else:
        print(format_release(meta))
        print(f"released  : ||Sigma||_op estimate {float(est.norm_):.6g}")
        print(f"written   : {out}")
    return 0
