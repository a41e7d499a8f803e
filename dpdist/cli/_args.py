"""The argparse flags the sub-commands share: input and columns, runtime (scheduler, timeout),
progress, plan sizes, centring, non-finite rows, output and ``--json``, and the help format.
"""

from __future__ import annotations

import argparse
from typing import Any

from dpdist.cli._flags import Method

__all__ = [
    "HelpFormatter", "add_centering_args", "add_columns_arg", "add_input_arg", "add_json_arg", "add_nonfinite_arg",
    "add_output_args", "add_plan_args", "add_progress_args", "add_runtime_args", "mark_required",
]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: X)`` only for real defaults that the help text does not already
    state: None means "the library's default", and a help saying "default" in prose is kept
    as written."""

    def _get_help_string(self, action):
        no_default = action.default is None or action.default is False or action.default == argparse.SUPPRESS
        if no_default or "default" in (action.help or "").lower():
            return action.help
        return super()._get_help_string(action)


def mark_required(p: argparse.ArgumentParser, methods: dict[str, Method], *, method_flag: bool = True) -> None:
    """Append "(required)" to the help of every option all ``methods`` require, and
    "(required by --method a, b)" to one only some require (the checks themselves stay in
    :func:`~dpdist.cli._flags.estimator_call`, which also covers --plan)."""
    for action in p._actions:
        needed_by = [name for name, m in methods.items() if action.dest in m.required]
        if not needed_by or not action.option_strings:
            continue
        if len(needed_by) == len(methods) or not method_flag:
            mark = "(required)"
        else:
            mark = f"(required by --method {', '.join(needed_by)})"
        action.help = f"{action.help} {mark}" if action.help else mark


def _timeout_arg(text: str) -> float:
    """--timeout: seconds (> 0), or 'none' for no limit (``math.inf``, which the engine reads as
    no limit)."""
    if text.strip().lower() == "none":
        return float("inf")
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds or 'none', got {text!r}") from None
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected seconds > 0 or 'none', got {text!r}")
    return value


def add_runtime_args(p: argparse.ArgumentParser) -> None:
    """--random-state, --scheduler, --timeout, --missing-chunks, --progress/--no-progress
    (mirroring the Python API: ``random_state`` and ``scheduler`` on estimators; ``--timeout``
    sets the dask configuration key ``dpdist.timeout`` for the run; ``missing_chunks`` of
    :func:`dpdist.data.as_dask_array`)."""
    from dpdist.engine.runtime import DEFAULT_TIMEOUT

    p.add_argument("--random-state", type=int, default=None,
                   help="seed the noise (reproducible; tests only). Default: OS entropy")
    p.add_argument("--scheduler", default=None,
                   help="where to run: 'threads', 'synchronous', 'processes', 'local-cluster' (start a "
                        "Dask LocalCluster for this run), or the address of a running cluster "
                        "(tcp://HOST:PORT or HOST:PORT; any address dask accepts). Default: dask's configured "
                        "scheduler (threads), starting nothing")
    p.add_argument("--timeout", type=_timeout_arg, default=None, metavar="SECONDS",
                   help=f"fail (exit 5) when the run has not finished after SECONDS (default "
                        f"{DEFAULT_TIMEOUT:g}: one day), "
                        "or when the cluster has had no worker for 30 s; 'none': no limit")
    p.add_argument("--missing-chunks", choices=("auto", "fill", "raise"), default=None,
                   help="how chunk files absent from the input Zarr store are read: 'auto' (the default) "
                        "refuses a store whose chunk manifest (written by dpdist) records chunks it no longer "
                        "holds, and reads a store without one per the Zarr specification (missing chunks are "
                        "the fill value); 'fill' always reads them as the fill value; 'raise' also refuses a "
                        "store without a chunk manifest")
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show progress on stderr as plain lines for logs: one per stage or pass, per 10%% and "
                        "per finished stage (default: a redrawn line, only on a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="show no progress at all")


def add_progress_args(p: argparse.ArgumentParser) -> None:
    """--progress/--no-progress for commands without :func:`add_runtime_args`."""
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show progress on stderr as plain lines for logs: one per stage or pass, per 10%% and "
                        "per finished stage (default: a redrawn line, only on a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="show no progress at all")


def add_json_arg(p: argparse.ArgumentParser, what: str = "the result") -> None:
    p.add_argument("--json", action="store_true",
                   help=f"print {what} as one JSON document on stdout (errors too: {{\"error\": ...}})")


#: What INPUT may be, for help texts.
INPUT_HELP = ("a Zarr array path/URL (or a dpdist dataset group with X), or by suffix a Parquet (.parquet, "
              ".pq: a file, a directory of them or a glob; local or s3://), CSV (.csv) or NumPy (.npy, local) file")


def _columns_arg(text: str) -> list[str]:
    """--columns: comma-separated column names."""
    names = [c.strip() for c in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


def add_input_arg(p: argparse.ArgumentParser) -> None:
    """INPUT and --columns (``columns`` of :func:`dpdist.data.as_dask_array`)."""
    p.add_argument("input", nargs="?", metavar="INPUT", help=INPUT_HELP)
    add_columns_arg(p)


def add_columns_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--columns", type=_columns_arg, metavar="A,B,...",
                   help="the columns of a Parquet or CSV INPUT to read, by name, in this order (default: all)")


def add_plan_args(p: argparse.ArgumentParser, what: str) -> None:
    """--plan (print ``what`` for the input's size; read no data), --n-samples, --n-features."""
    p.add_argument("--plan", action="store_true",
                   help=f"print {what} for the input's size; read no data (but a CSV INPUT's rows are counted)")
    p.add_argument("--n-samples", type=int, help="with --plan and no INPUT: n")
    p.add_argument("--n-features", type=int, help="with --plan and no INPUT: d")


def parse_mean(text: str) -> Any:
    """``--mean``: comma-separated numbers, or the path of a ``.npy`` file holding the vector."""
    t = str(text).strip()
    if t.endswith(".npy"):
        import numpy as np

        try:
            return np.load(t, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise argparse.ArgumentTypeError(f"cannot read the mean from {t!r}: {exc}") from None
    try:
        return [float(v) for v in t.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--mean takes comma-separated numbers (e.g. --mean=-1.5,2) or a .npy file, got {text!r}") from None


def add_centering_args(p: argparse.ArgumentParser) -> None:
    """--assume-centered, --mean, --mean-fraction, --mean-clip (the estimators' centring)."""
    p.add_argument("--assume-centered", action="store_true", default=None,
                   help="take the data as mean-zero and release the second moment (1/n) sum x x^T "
                   "(default: centre the data and release the covariance)")
    p.add_argument("--mean", type=parse_mean,
                   help="a public mean to centre at: comma-separated numbers (--mean=-1.5,2,...) or a .npy "
                   "file; recorded as public, costs no budget (default: a private mean)")
    p.add_argument("--mean-fraction", type=float,
                   help="share of the budget spent on the private mean (default 0.1; of mu^2 or rho where "
                        "the stages compose exactly, see docs/estimators.md)")
    p.add_argument("--mean-clip", type=float,
                   help="L2 radius the rows are scaled to for the private mean; must cover the rows' norms "
                   "(default: --radius where the method has it, else the entry clip, from --clip or --sigma, "
                   "times sqrt(d))")


def add_nonfinite_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--on-nonfinite", choices=("raise", "zero"),
                   help="rows with NaN/inf: refuse the input, or zero them (default: the estimator's)")


def add_output_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    """--output, --overwrite, --json, and the ledger the release is charged to (--ledger,
    --no-ledger)."""
    p.add_argument("--output", "-o", required=required,
                   help="result Zarr group to write (atomically)" + ("" if required else "; required unless --plan"))
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    add_json_arg(p, "the release metadata (or the plan)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--ledger", default=None,
                   help="charge the release to this privacy-budget ledger (a path, sqlite:///PATH or "
                        "postgresql://...), as `dpdist run` does: reserve before reading, commit with the "
                        "output. Default: $DPDIST_LEDGER; with neither, the run is recorded nowhere, and is "
                        "refused (exit 3) when the default ledger holds a budget for INPUT")
    g.add_argument("--no-ledger", action="store_true",
                   help="run without a ledger although the default ledger holds a budget for INPUT (the "
                        "release records it); refused when --ledger or $DPDIST_LEDGER names a ledger")
