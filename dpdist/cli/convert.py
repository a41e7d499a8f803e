"""``dpdist convert``: write a Parquet, CSV, .npy or Zarr input as a fast-reading Zarr array."""

from __future__ import annotations

from dpdist.cli._args import HelpFormatter, INPUT_HELP, add_columns_arg, add_json_arg, add_progress_args
from dpdist.cli._printing import print_json
from dpdist.cli._run import run_context


def register(sub) -> None:
    p = sub.add_parser(
        "convert",
        help="write a Parquet, CSV or .npy file (or a Zarr array) as a Zarr array in the fastest layout",
        description="Write INPUT as a Zarr array at OUTPUT in the layout the estimators read fastest: "
        "float32, whole rows in each chunk, no compression, every chunk file present. Values are copied "
        "as they are (NaN stays NaN). The write is atomic: a failure leaves nothing at OUTPUT. "
        "Nothing is released and no budget is spent: OUTPUT holds the data themselves.",
        formatter_class=HelpFormatter,
    )
    p.add_argument("input", help=INPUT_HELP)
    p.add_argument("output", help="the Zarr array to create (a local path)")
    add_columns_arg(p)
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="dtype of OUTPUT")
    p.add_argument("--chunk-rows", type=int, default=None,
                   help="rows per chunk (default: about 64 MiB of rows, at most 262,144)")
    p.add_argument("--missing-chunks", choices=("auto", "fill", "raise"), default=None,
                   help="how chunk files absent from a Zarr INPUT are read, as for `dpdist covariance` "
                        "(default 'auto')")
    p.add_argument("--scheduler", default=None,
                   help="where to run (as for `dpdist covariance`; default: dask's configured scheduler)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT once the new one is complete")
    add_progress_args(p)
    add_json_arg(p, "what was written")
    p.set_defaults(func=run)


def run(args) -> int:
    from dpdist.cli._flags import refuse
    from dpdist.data.convert import convert
    from dpdist.data.formats import input_format
    from dpdist.data.results import check_output_path

    if args.missing_chunks is not None and input_format(args.input) != "zarr":
        refuse(["missing_chunks"], "`dpdist convert`", "it applies to a Zarr INPUT")
    check_output_path(args.output, overwrite=args.overwrite)  # before the scheduler starts
    from dpdist.cli._progress import stage

    from dpdist.engine.runtime import open_runtime

    # The engine resolves the flag (a local name, "local-cluster", an address, or dask's
    # configured scheduler) to what dask.compute takes, and words a failed read as every
    # command does.
    with run_context(args) as scheduler, open_runtime(scheduler) as rt, stage("converting to Zarr"):
        try:
            path = convert(args.input, args.output, columns=args.columns, dtype=args.dtype,
                           chunk_rows=args.chunk_rows, overwrite=args.overwrite,
                           missing_chunks=args.missing_chunks or "auto",
                           scheduler=rt.client if rt.client is not None else rt.local)
        except Exception as exc:
            translated = rt.translate(exc, noised=False)
            if translated is exc:
                raise
            raise translated from None
    import zarr

    arr = zarr.open_array(path, mode="r")
    n, d = arr.shape
    if args.json:
        print_json({"output": path, "n_samples": n, "n_features": d, "dtype": str(arr.dtype),
                    "chunk_rows": arr.chunks[0], "columns": arr.attrs.get("columns")})
    else:
        print(f"wrote {n} x {d} {arr.dtype} rows ({arr.chunks[0]} rows a chunk) to {path}")
    return 0
