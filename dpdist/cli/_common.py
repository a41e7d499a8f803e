"""Flags, checks and printing shared by the sub-commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, Iterable

__all__ = [
    "add_output_args",
    "add_runtime_args",
    "fit_and_write",
    "input_shape",
    "need",
    "print_json",
    "print_mapping",
]


def _timeout_arg(text: str) -> float | None:
    """--timeout: seconds (> 0), or 'none' for no limit."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds or 'none', got {text!r}") from None
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected seconds > 0 or 'none', got {text!r}")
    return value


def add_runtime_args(p: argparse.ArgumentParser) -> None:
    """--random-state, --scheduler, --timeout, --missing-chunks, --progress/--no-progress
    (mirroring the Python API: ``random_state``, ``scheduler``, ``timeout`` on estimators;
    ``missing_chunks`` of :func:`dpdist.data.as_dask_array`)."""
    from dpdist.engine.runtime import DEFAULT_TIMEOUT

    p.add_argument("--random-state", type=int, default=None,
                   help="seed the noise (reproducible; tests only). Default: OS entropy")
    p.add_argument("--scheduler", default=None,
                   help="where to run: 'threads', 'synchronous', 'processes', 'local-cluster' (start a "
                        "Dask LocalCluster for this run), or the address of a running cluster "
                        "tcp://HOST:PORT. Default: dask's configured scheduler (threads), starting nothing")
    p.add_argument("--timeout", type=_timeout_arg, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help="fail (exit 5) when the run has not finished after SECONDS (one day), "
                        "or when the cluster has had no worker for 30 s; 'none': no limit")
    p.add_argument("--missing-chunks", choices=("raise", "fill"), default="raise",
                   help="an input Zarr store whose chunk files are not all present is refused before "
                        "anything is read ('raise'), or its missing chunks are read as the array's fill "
                        "value ('fill')")
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show a progress bar (default: only on a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false")


def add_output_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--output", "-o", required=required, help="result Zarr group to write (atomically)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    p.add_argument("--json", action="store_true", help="print the release metadata as JSON")


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_mapping(mapping: dict, as_json: bool, *, skip: Iterable[str] = ("calibration",), width: int = 22) -> None:
    """Print a plan-like mapping as JSON or as aligned ``key : value`` lines."""
    if as_json:
        print_json(mapping)
        return
    for key, value in mapping.items():
        if key not in skip:
            print(f"{key:>{width}} : {value}")


def need(args, *names: str, context: str = "") -> None:
    """Raise a ValidationError naming every missing ``--option`` among ``names``."""
    from dpdist.exceptions import ValidationError

    missing = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n, None) is None]
    if missing:
        prefix = f"{context} needs option(s)" if context else "missing required option(s)"
        raise ValidationError(f"{prefix}: {', '.join(missing)}")


def input_shape(args) -> tuple[int, int]:
    """(n, d) for ``--plan``: from INPUT's metadata (no data read) or --n-samples/--n-features."""
    from dpdist.data.validation import as_dask_array

    if args.input is not None:
        n, d = as_dask_array(args.input).shape  # metadata only
        return int(n), int(d)
    need(args, "n_samples", "n_features", context="--plan without INPUT")
    return int(args.n_samples), int(args.n_features)


def fit_and_write(
    est,
    args,
    summary: Callable[[object], list[str]],
    extra_values: Callable[[object], dict] | None = None,
    report_delta: float | None = None,
) -> int:
    """Check INPUT and --output, fit, write the release atomically, print a summary.

    The output path is checked before any data is read; the release is written only after
    the fit succeeded, so a failure leaves nothing behind.
    """
    from dpdist.data.results import check_output_path, write_result
    from dpdist.exceptions import ValidationError
    from dpdist.report.text import format_release

    if args.input is None:
        raise ValidationError("INPUT (a Zarr array path) is required unless --plan is given")
    if args.output is None:
        raise ValidationError("--output is required")
    out = check_output_path(args.output, overwrite=args.overwrite)
    est.fit(args.input)
    rel = est.release_
    values = dict(rel.values)
    if extra_values is not None:
        for key, value in extra_values(est).items():
            values.setdefault(key, value)
    meta = rel.metadata()
    write_result(out, meta, values, overwrite=args.overwrite)
    if args.json:
        print_json(meta)
    else:
        print(format_release(meta, report_delta=report_delta))
        for line in summary(est):
            print(line)
        if not meta.get("private", True):
            print("WARNING   : this result is NOT PRIVATE")
        print(f"written   : {out}")
    return 0
