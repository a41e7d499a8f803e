"""``dpdist generate``: write a Model-1 or Model-2 synthetic dataset into a Zarr store."""

from __future__ import annotations

from dpdist.cli._args import HelpFormatter, add_json_arg, add_progress_args
from dpdist.cli._flags import given_flags, refuse
from dpdist.cli._printing import print_json
from dpdist.cli._run import run_context
from dpdist.cli._progress import stage

#: Flags only one model uses (the others serve both).
MODEL_FLAGS = {1: ("structure", "strength"), 2: ("gap", "lambda1")}


def register(sub) -> None:
    p = sub.add_parser(
        "generate",
        help="write a synthetic Model-1 or Model-2 dataset (Gaussian rows) to Zarr",
        description="Generate Gaussian rows chunk by chunk in parallel into a Zarr group (X = "
        "samples, truth/ = the true covariance): Model 1 (a random k-RCS covariance) or Model 2 "
        "(k-RCS with a k-sparse top eigenvector and a chosen eigengap). Synthetic data: nothing "
        "here is private, and no budget is spent.",
        formatter_class=HelpFormatter,
    )
    p.add_argument("output", metavar="OUTPUT", help="Zarr group to create (required)")
    p.add_argument("--n-samples", type=int, default=1_000_000, help="number of rows n")
    p.add_argument("--n-features", type=int, default=32, help="number of columns d")
    p.add_argument("--k", type=int, default=3, help="row sparsity k of the covariance (non-zeros per row)")
    p.add_argument("--model", type=int, choices=(1, 2), default=1,
                   help="1: a random k-RCS covariance; 2: k-RCS with a k-sparse top eigenvector and an eigengap")
    p.add_argument("--structure", choices=("block", "banded", "graph"),
                   help="Model 1: sparsity pattern of the covariance (default: banded)")
    p.add_argument("--strength", type=float, help="Model 1: off-diagonal strength (default: 0.8)")
    p.add_argument("--gap", type=float, help="Model 2: relative eigengap (default: 0.5)")
    p.add_argument("--lambda1", type=float, help="Model 2: top eigenvalue (default: 2.0)")
    p.add_argument("--chunk-rows", type=int, default=100_000, help="rows per Zarr chunk")
    p.add_argument("--random-state", type=int, default=0, help="seed of the covariance and samples")
    p.add_argument("--scheduler", default=None,
                   help="where to generate, as for `dpdist covariance` (default: dask's configured scheduler, "
                        "threads)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT (default: refuse)")
    add_progress_args(p)
    add_json_arg(p, "what was written")
    p.set_defaults(func=run)


def _given(args, *names) -> dict:
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def run(args) -> int:
    from dpdist.data.results import check_output_path

    refuse([d for d in MODEL_FLAGS[3 - args.model] if d in given_flags(args)],
           f"`dpdist generate --model {args.model}`", f"it is a Model-{3 - args.model} option")
    path = check_output_path(args.output, overwrite=args.overwrite)
    if args.model == 2:
        from dpdist.data.model2 import make_model2

        model = make_model2(args.n_samples, args.n_features, args.k, chunks=args.chunk_rows,
                            random_state=args.random_state, **_given(args, "gap", "lambda1"))
        with run_context(args) as scheduler, stage("writing the samples"):
            path = model.write_zarr(path, overwrite=args.overwrite, scheduler=scheduler)
        params = model.parameters()
        text = (f"Model 2, k={args.k}, gap={params.get('gap')}, lambda1={params.get('lambda1')}")
    else:
        from dpdist.data.synthetic import make_model1

        model = make_model1(args.n_features, args.k, random_state=args.random_state,
                            **_given(args, "structure", "strength"))
        with run_context(args) as scheduler, stage("writing the samples"):
            path = model.write_zarr(path, args.n_samples, chunk_rows=args.chunk_rows, scheduler=scheduler,
                                    overwrite=args.overwrite)
        params = model.describe()
        text = f"Model 1, {params.get('structure')}, k={args.k}, sigma^2 = ||Sigma||_op = {model.sigma2:.4g}"
    if args.json:
        print_json({"output": path, "model": args.model, "n_samples": args.n_samples,
                    "n_features": args.n_features, "parameters": params})
    else:
        print(f"wrote {args.n_samples} x {args.n_features} samples ({text}) to {path}")
    return 0
